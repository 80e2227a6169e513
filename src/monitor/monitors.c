/* The reference monitors of refmon and isob serve --monitor (monitors.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/arch.h"
#include "isobench/lwc.h"
#include "isobench/mechanism.h"
#include "monitors.h"

/* How long stopping the broker waits for it to leave before killing it. */
#define RM_BROKER_STOP_MS 2000
/* Descriptors the broker keeps open for its client at once. */
#define RM_BROKER_HANDLES 16
/* Exit codes of a monitored child that could not be set up. */
#define RM_EXIT_SETUP 3

int rm_policy_path_ok(const struct rm_policy *p, const char *path)
{
    size_t n = strlen(p->dir);
    if (path[0] != '/' || strncmp(path, p->dir, n) != 0 || path[n] != '/')
        return 0;
    for (const char *c = path; (c = strstr(c, "..")) != NULL; c += 2)
        if ((c == path || c[-1] == '/') && (c[2] == '/' || c[2] == 0))
            return 0;
    return 1;
}

/* ---- seccomp filters ----
 *
 * Every isolating monitor confines its workload with a default-deny
 * filter: the calls the monitor checks (trapped to it, or an argument
 * test), then an allow-list of calls that name no file by path, reach no
 * other process's memory and run no program, then a deny-list refused
 * with EPERM (the ways around a monitor of opens: open, creat, openat2,
 * open_by_handle_at, io_uring, execve, process_vm_*, ptrace, seccomp,
 * mmap of a file), and everything else, unknown numbers included,
 * refused with ENOSYS (so that the C library falls back where it can, as
 * from clone3 to clone).  Only the native ABI passes: another
 * architecture's calls (i386 on x86-64) kill the process, x32's numbers
 * fail. */

/* Calls a workload may make as made.  None opens a file, reads or writes
 * another process's memory, or executes: reads and writes go to
 * descriptors the workload already holds. */
static const int rm_allowed[] = {
    SYS_read, SYS_write, SYS_readv, SYS_writev, SYS_close, SYS_fstat, SYS_lseek, SYS_fcntl,
    SYS_dup, SYS_dup3, SYS_pipe2, SYS_ftruncate, SYS_fsync, SYS_fdatasync,
    SYS_brk, SYS_munmap, SYS_mremap, SYS_mprotect, SYS_madvise, SYS_membarrier,
    SYS_rt_sigaction, SYS_rt_sigprocmask, SYS_rt_sigreturn, SYS_rt_sigtimedwait, SYS_sigaltstack,
    SYS_getpid, SYS_gettid, SYS_getppid, SYS_getuid, SYS_geteuid, SYS_getgid, SYS_getegid,
    SYS_getrusage, SYS_times, SYS_clock_gettime, SYS_clock_getres, SYS_clock_nanosleep,
    SYS_nanosleep, SYS_gettimeofday, SYS_setitimer, SYS_getitimer,
    SYS_futex, SYS_set_robust_list, SYS_set_tid_address, SYS_sched_yield, SYS_sched_getaffinity,
    SYS_getrandom, SYS_exit, SYS_exit_group, SYS_restart_syscall, SYS_uname, SYS_prctl,
    SYS_close_range,
    SYS_eventfd2, SYS_epoll_create1, SYS_epoll_ctl, SYS_epoll_pwait, SYS_ppoll, SYS_pselect6,
    SYS_signalfd4, SYS_timerfd_create, SYS_timerfd_settime, SYS_timerfd_gettime,
    SYS_accept, SYS_accept4, SYS_recvfrom, SYS_recvmsg, SYS_recvmmsg, SYS_shutdown,
    SYS_getsockopt, SYS_setsockopt, SYS_getsockname, SYS_getpeername, SYS_socketpair,
    SYS_clone, SYS_wait4, SYS_waitid, SYS_kill, SYS_tgkill, SYS_tkill,
#ifdef SYS_rseq
    SYS_rseq,
#endif
#ifdef SYS_epoll_pwait2
    SYS_epoll_pwait2,
#endif
#ifdef SYS_open
    /* The older forms x86-64 still has (arm64 never had them). */
    SYS_dup2, SYS_pipe, SYS_epoll_wait, SYS_epoll_create, SYS_poll, SYS_select, SYS_arch_prctl,
    SYS_getrlimit, SYS_time, SYS_fork, SYS_vfork,
#endif
};

/* Calls refused by name (EPERM): each reads a file, runs a program or
 * reaches another process without passing the monitor. */
static const int rm_refused[] = {
    SYS_openat2, SYS_open_by_handle_at, SYS_name_to_handle_at, SYS_io_uring_setup,
    SYS_io_uring_enter, SYS_io_uring_register, SYS_execve, SYS_execveat, SYS_process_vm_readv,
    SYS_process_vm_writev, SYS_ptrace, SYS_seccomp, SYS_pidfd_getfd, SYS_memfd_create,
    SYS_openat, SYS_pread64, SYS_pwrite64, SYS_preadv, SYS_pwritev, SYS_preadv2, SYS_pwritev2,
    SYS_sendfile, SYS_splice, SYS_socket, SYS_connect, SYS_bind, SYS_sendmsg, SYS_sendmmsg,
#ifdef SYS_open
    SYS_open, SYS_creat,
#endif
};

struct rm_bpf {
    struct sock_filter f[256];
    unsigned n;
};

static void op(struct rm_bpf *b, unsigned short code, unsigned char jt, unsigned char jf, uint32_t k)
{
    if (b->n < sizeof b->f / sizeof b->f[0])
        b->f[b->n] = (struct sock_filter){code, jt, jf, k};
    b->n++;
}

#define RM_LD(field) op(b, BPF_LD | BPF_W | BPF_ABS, 0, 0, (uint32_t)offsetof(struct seccomp_data, field))
/* The low and high words of argument i (little-endian, as both
 * architectures run here). */
#define RM_ARG_LO(i) (uint32_t)offsetof(struct seccomp_data, args[i])
#define RM_ARG_HI(i) (uint32_t)(offsetof(struct seccomp_data, args[i]) + 4)

/* The rules after the monitor's own: with the call's number in the
 * accumulator, decide it.  Each block reloads the number when it leaves
 * it changed. */
static void rm_rules_tail(struct rm_bpf *b)
{
    /* mmap: only without a file (MAP_ANONYMOUS), since a mapped file is
     * read and written without a call the monitor sees. */
    op(b, BPF_JMP | BPF_JEQ | BPF_K, 0, 4, SYS_mmap);
    op(b, BPF_LD | BPF_W | BPF_ABS, 0, 0, RM_ARG_LO(3));
    op(b, BPF_JMP | BPF_JSET | BPF_K, 0, 1, MAP_ANONYMOUS);        /* -> refuse */
    op(b, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
    op(b, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ERRNO | EPERM);
    /* sendto: only without an address (send on a connected socket); an
     * address could name a socket by path. */
    op(b, BPF_JMP | BPF_JEQ | BPF_K, 0, 6, SYS_sendto);
    op(b, BPF_LD | BPF_W | BPF_ABS, 0, 0, RM_ARG_LO(4));
    op(b, BPF_JMP | BPF_JEQ | BPF_K, 0, 3, 0);                     /* -> refuse */
    op(b, BPF_LD | BPF_W | BPF_ABS, 0, 0, RM_ARG_HI(4));
    op(b, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0);                     /* -> refuse */
    op(b, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
    op(b, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ERRNO | EPERM);
    /* prlimit64: only on the workload itself (pid 0), which getrlimit
     * and setrlimit use. */
    op(b, BPF_JMP | BPF_JEQ | BPF_K, 0, 6, SYS_prlimit64);
    op(b, BPF_LD | BPF_W | BPF_ABS, 0, 0, RM_ARG_LO(0));
    op(b, BPF_JMP | BPF_JEQ | BPF_K, 0, 2, 0);                     /* -> refuse */
    op(b, BPF_LD | BPF_W | BPF_ABS, 0, 0, RM_ARG_HI(0));
    op(b, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, 0);                     /* -> allow */
    op(b, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ERRNO | EPERM);
    op(b, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
    /* The allow-list: each match jumps to the allow at its end. */
    const unsigned na = sizeof rm_allowed / sizeof rm_allowed[0];
    for (unsigned i = 0; i < na; i++)
        op(b, BPF_JMP | BPF_JEQ | BPF_K, (unsigned char)(na - i), 0, (uint32_t)rm_allowed[i]);
    /* Not allowed: refused by name, else unknown. */
    const unsigned nr = sizeof rm_refused / sizeof rm_refused[0];
    op(b, BPF_JMP | BPF_JA, 0, 0, 1);                              /* over the allow */
    op(b, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
    for (unsigned i = 0; i < nr; i++)
        op(b, BPF_JMP | BPF_JEQ | BPF_K, (unsigned char)(nr - i), 0, (uint32_t)rm_refused[i]);
    op(b, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS);
    op(b, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ERRNO | EPERM);
}

/* Architecture check, x32 refused, then the call's number in the
 * accumulator. */
static void rm_head(struct rm_bpf *b)
{
    RM_LD(arch);
    op(b, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, ISOB_AUDIT_ARCH);
    op(b, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_KILL_PROCESS);
    RM_LD(nr);
#if ISOB_SYSCALL_ALIAS_BIT
    op(b, BPF_JMP | BPF_JGE | BPF_K, 0, 1, ISOB_SYSCALL_ALIAS_BIT);
    op(b, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS);
#endif
}

static int load(struct rm_bpf *b)
{
    if (b->n > sizeof b->f / sizeof b->f[0])
        return -E2BIG;
    struct sock_fprog prog = {.len = (unsigned short)b->n, .filter = b->f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -errno;
    return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0 ? 0 : -errno;
}

int rm_confine(enum rm_confinement how)
{
    struct rm_bpf bb = {.n = 0}, *b = &bb;
    rm_head(b);
    switch (how) {
    case RM_CONFINE_FD:
        /* pread64 and pwrite64 only on descriptors 3 to 65535 (an argument
         * check, which the kernel's cache of constant decisions cannot
         * short-cut); no open at all, since a filter cannot read a path. */
        op(b, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, SYS_pread64);
        op(b, BPF_JMP | BPF_JEQ | BPF_K, 0, 5, SYS_pwrite64);      /* -> the rules */
        RM_LD(args[0]);
        op(b, BPF_JMP | BPF_JGE | BPF_K, 2, 0, 65536);             /* -> deny */
        op(b, BPF_JMP | BPF_JGE | BPF_K, 0, 1, 3);                 /* -> allow : deny */
        op(b, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
        op(b, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ERRNO | EPERM);
        break;
    case RM_CONFINE_TRACE:
        /* openat, pread64 and pwrite64 stop for the tracer. */
        op(b, BPF_JMP | BPF_JEQ | BPF_K, 3, 0, SYS_openat);
        op(b, BPF_JMP | BPF_JEQ | BPF_K, 2, 0, SYS_pread64);
        op(b, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, SYS_pwrite64);
        op(b, BPF_JMP | BPF_JA, 0, 0, 1);                          /* -> the rules */
        op(b, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_TRACE);
        break;
    case RM_CONFINE_LWC:
        /* openat, pread64 and pwrite64 pass to the context's trap filter
         * (installed before this one), which sends them to the
         * supervisor, as is its switch up. */
        op(b, BPF_JMP | BPF_JEQ | BPF_K, 3, 0, SYS_openat);
        op(b, BPF_JMP | BPF_JEQ | BPF_K, 2, 0, SYS_pread64);
        op(b, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, SYS_pwrite64);
        op(b, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, LWC_SYSTRAP_SWITCH_NR);
        op(b, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
        break;
    case RM_CONFINE_BROKER:
        /* No file call at all: the broker makes them. */
        break;
    default:
        return -EINVAL;
    }
    rm_rules_tail(b);
    return load(b);
}

/* In a forked child: die with the parent, which was `parent`. */
static void die_with(pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(RM_EXIT_SETUP);
}

/* The monitor hides its memory before it creates what it monitors: a
 * non-dumpable process's /proc/PID/mem, process_vm_* and ptrace are
 * refused to every process of its uid without CAP_SYS_PTRACE, so the
 * workload cannot write over the policy, whatever its filter lets
 * through.  The previous setting, to restore when the workload is gone
 * (children forked later inherit the setting, and some of those must be
 * readable). */
static int hide_monitor(int *was)
{
    *was = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
    if (*was < 0)
        return -errno;
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 ? 0 : -errno;
}

static void unhide_monitor(int was)
{
    if (was > 0)
        prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
}

static int wait_child(pid_t pid, int *st)
{
    while (waitpid(pid, st, 0) < 0)
        if (errno != EINTR)
            return -errno;
    return 0;
}

static int child_result(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st) == 0 ? 0 : WEXITSTATUS(st) == RM_EXIT_SETUP ? -EPERM : -EPROTO;
    return -EOWNERDEAD;
}

/* Fork a child that confines itself as how says and runs fn; wait for
 * it.  The monitor is non-dumpable meanwhile. */
static int run_confined(enum rm_confinement how, rm_workload_fn fn, void *arg)
{
    int was, rc = hide_monitor(&was);
    if (rc)
        return rc;
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        rc = -errno;
        unhide_monitor(was);
        return rc;
    }
    if (pid == 0) {
        die_with(parent);
        if (rm_confine(how) != 0)
            _exit(RM_EXIT_SETUP);
        fn(arg);
        _exit(0);
    }
    int st = 0;
    rc = wait_child(pid, &st);
    unhide_monitor(was);
    return rc ? rc : child_result(st);
}

int rm_run_seccomp(rm_workload_fn fn, void *arg)
{
    return run_confined(RM_CONFINE_FD, fn, arg);
}

int rm_run_brokered(rm_workload_fn fn, void *arg)
{
    return run_confined(RM_CONFINE_BROKER, fn, arg);
}

/* A NUL-terminated string of another process, page by page. */
static __attribute__((unused)) int read_string(pid_t pid, uintptr_t addr, char *buf, size_t len)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), got = 0;
    while (got < len) {
        size_t chunk = ps - (addr + got) % ps;
        if (chunk > len - got)
            chunk = len - got;
        struct iovec l = {buf + got, chunk}, r = {(void *)(addr + got), chunk};
        ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (n <= 0)
            return n < 0 ? -errno : -EFAULT;
        if (memchr(buf + got, 0, (size_t)n))
            return 0;
        got += (size_t)n;
    }
    return -ENAMETOOLONG;
}

#if defined(__x86_64__)
static int trace(const struct rm_policy *p, rm_workload_fn fn, void *arg, struct rm_tally *t);
#endif

int rm_run_ptrace(const struct rm_policy *p, rm_workload_fn fn, void *arg, struct rm_tally *t)
{
#if !defined(__x86_64__)
    /* The monitor reads the call and rewrites its result in x86-64's
     * registers; other architectures have no port yet. */
    (void)p, (void)fn, (void)arg, (void)t;
    return -ENOTSUP;
#else
    int was, rc = hide_monitor(&was);
    if (rc)
        return rc;
    rc = trace(p, fn, arg, t);
    unhide_monitor(was);
    return rc;
#endif
}

#if defined(__x86_64__)
static int trace(const struct rm_policy *p, rm_workload_fn fn, void *arg, struct rm_tally *t)
{
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        die_with(parent);
        /* The tracer reads this process's memory (the path): it must be
         * dumpable, which it did not inherit from the hidden tracer. */
        if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0 || ptrace(PTRACE_TRACEME, 0, 0, 0) != 0)
            _exit(RM_EXIT_SETUP);
        raise(SIGSTOP);
        if (rm_confine(RM_CONFINE_TRACE) != 0)
            _exit(RM_EXIT_SETUP);
        fn(arg);
        _exit(0);
    }
    int st = 0, rc = wait_child(pid, &st);
    if (rc == 0 && !(WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP))
        rc = child_result(st) ? child_result(st) : -EPROTO;
    if (rc == 0 && ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACESECCOMP | PTRACE_O_EXITKILL) != 0)
        rc = -errno;
    if (rc) {
        kill(pid, SIGKILL);
        wait_child(pid, &st);
        return rc;
    }
    int sig = 0;
    for (;;) {
        if (ptrace(PTRACE_CONT, pid, 0, (void *)(long)sig) != 0 && errno != ESRCH) {
            rc = -errno;
            kill(pid, SIGKILL);
        }
        sig = 0;
        if ((rc = wait_child(pid, &st)) != 0)
            return rc;
        if (WIFEXITED(st) || WIFSIGNALED(st))
            return child_result(st);
        if (!WIFSTOPPED(st))
            continue;
        if ((st >> 8) != (SIGTRAP | (PTRACE_EVENT_SECCOMP << 8))) {
            sig = WSTOPSIG(st) == SIGTRAP ? 0 : WSTOPSIG(st);
            continue;
        }
        struct user_regs_struct regs;
        if (ptrace(PTRACE_GETREGS, pid, 0, &regs) != 0)
            continue;
        t->checked++;
        int ok;
        if ((long)regs.orig_rax == SYS_openat) {
            /* The tracee is stopped, but another of its threads could
             * change the path after this read: ptrace monitors live with
             * that race (this workload has one thread). */
            char path[RM_PATH_MAX];
            ok = read_string(pid, (uintptr_t)regs.rsi, path, sizeof path) == 0 && rm_policy_path_ok(p, path);
        } else {
            ok = rm_policy_fd_ok((long)(int)regs.rdi);
        }
        if (!ok) {
            /* Skip the call; it returns -EPERM. */
            t->denied++;
            regs.orig_rax = (unsigned long long)-1;
            regs.rax = (unsigned long long)-EPERM;
            ptrace(PTRACE_SETREGS, pid, 0, &regs);
        }
    }
}
#endif

int rm_run_lwcmon(const struct rm_policy *p, rm_workload_fn fn, void *arg, void *shared,
                  size_t shared_len, struct rm_tally *t)
{
    struct lwc_spec sp[] = {
        {.res = LWC_RES_VM, .how = LWC_SHARED, .vm = {shared, shared_len}},
        {.res = LWC_RES_SYSCALL, .sys = {SYS_openat}},
        {.res = LWC_RES_SYSCALL, .sys = {SYS_pread64}},
        {.res = LWC_RES_SYSCALL, .sys = {SYS_pwrite64}},
    };
    int caller, was, rc = hide_monitor(&was);
    if (rc)
        return rc;
    int h = lwc_create(sp, sizeof sp / sizeof sp[0], LWC_SYSTRAP, &caller, NULL);
    if (h == LWC_SWITCHED) {
        /* The context's second filter, on top of the trap filter: the
         * calls the supervisor does not see are refused unless the
         * allow-list names them.  Installed before the workload's first
         * instruction; a failure ends the context, which the supervisor
         * reports as its death. */
        if (rm_confine(RM_CONFINE_LWC) != 0)
            _exit(RM_EXIT_SETUP);
        fn(arg);
        lwc_switch(caller, NULL, NULL, NULL);
        _exit(0);
    }
    if (h < 0) {
        unhide_monitor(was);
        return h;
    }
    struct lwc_msg in;
    char path[RM_PATH_MAX];
    while ((rc = lwc_switch(h, NULL, NULL, &in)) == LWC_TRAPPED) {
        t->checked++;
        struct lwc_sysreply r = {.action = LWC_SYS_DENY, .value = EPERM};
        if ((long)in.w[0] == SYS_openat) {
            /* The supervisor opens its own checked copy of the path: the
             * context cannot change it between check and use. */
            if (lwc_trap_string(h, 1, path, sizeof path) >= 0 && rm_policy_path_ok(p, path))
                r = (struct lwc_sysreply){.action = LWC_SYS_OPEN, .path = path, .flags = (int)in.w[3],
                                          .mode = (mode_t)in.w[4]};
        } else if (rm_policy_fd_ok((long)(int)in.w[1])) {
            /* A descriptor number is a register: nothing to race. */
            r.action = LWC_SYS_CONTINUE;
        }
        if (r.action == LWC_SYS_DENY)
            t->denied++;
        lwc_syscall(h, &r);
    }
    lwc_destroy(h);
    unhide_monitor(was);
    return rc;
}

/* ---- the broker ---- */

enum { RMB_OPEN_PASS = 1, RMB_OPEN_KEEP, RMB_PREAD, RMB_PWRITE, RMB_CLOSE };

struct rmb_req {
    int32_t op;
    int32_t handle;
    int32_t flags;
    uint32_t len;
    int64_t off;
    char path[RM_PATH_MAX];
};

/* Send one reply, with a descriptor when fd >= 0. */
static int rmb_reply(int sock, int64_t ret, int fd)
{
    struct iovec iov = {&ret, sizeof ret};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } c;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        m.msg_control = c.buf;
        m.msg_controllen = sizeof c.buf;
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(h), &fd, sizeof fd);
    }
    return sendmsg(sock, &m, MSG_NOSIGNAL) == (ssize_t)sizeof ret ? 0 : -errno;
}

static void rmb_serve(void *arg, struct isob_trusted *tr)
{
    (void)tr;
    struct rm_broker *b = arg;
    int fds[RM_BROKER_HANDLES];
    for (int i = 0; i < RM_BROKER_HANDLES; i++)
        fds[i] = -1;
    struct rmb_req q;
    for (;;) {
        ssize_t n = recv(b->peer, &q, sizeof q, 0);
        if (n != (ssize_t)sizeof q)
            return;
        if (q.op != RMB_CLOSE)
            b->tally->checked++;  /* a close checks nothing: the handle is the broker's */
        int64_t ret;
        int pass = -1;
        q.path[RM_PATH_MAX - 1] = 0;
        if (q.op == RMB_OPEN_PASS || q.op == RMB_OPEN_KEEP) {
            if (!rm_policy_path_ok(&b->policy, q.path)) {
                ret = -EPERM;
            } else {
                int fd = openat(AT_FDCWD, q.path, q.flags | O_CLOEXEC);
                ret = fd < 0 ? -errno : 0;
                if (fd >= 0 && q.op == RMB_OPEN_PASS) {
                    pass = fd;
                } else if (fd >= 0) {
                    int k = 0;
                    while (k < RM_BROKER_HANDLES && fds[k] >= 0)
                        k++;
                    if (k == RM_BROKER_HANDLES) {
                        close(fd);
                        ret = -EMFILE;
                    } else {
                        fds[k] = fd;
                        ret = k;
                    }
                }
            }
        } else if ((q.op == RMB_PREAD || q.op == RMB_PWRITE) && q.handle >= 0 &&
                   q.handle < RM_BROKER_HANDLES && fds[q.handle] >= 0 && q.len <= b->buf_len) {
            ssize_t r = q.op == RMB_PREAD ? pread(fds[q.handle], b->buf, q.len, (off_t)q.off)
                                          : pwrite(fds[q.handle], b->buf, q.len, (off_t)q.off);
            ret = r < 0 ? -errno : r;
        } else if (q.op == RMB_CLOSE && q.handle >= 0 && q.handle < RM_BROKER_HANDLES &&
                   fds[q.handle] >= 0) {
            ret = close(fds[q.handle]) == 0 ? 0 : -errno;
            fds[q.handle] = -1;
        } else {
            ret = -EBADF;
        }
        if (ret == -EPERM)
            b->tally->denied++;
        if (rmb_reply(b->peer, ret, pass) != 0)
            return;
        if (pass >= 0)
            close(pass);
    }
}

int rm_broker_start(struct rm_broker *b, const struct rm_policy *p, size_t buf_len)
{
    memset(b, 0, sizeof *b);
    b->sock = b->peer = -1;
    b->policy = *p;
    b->buf_len = buf_len;
    b->buf = isob_map(buf_len, 1);
    b->tally = isob_map(sizeof *b->tally, 1);
    int sv[2];
    if (!b->buf || !b->tally || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        int err = errno ? -errno : -ENOMEM;
        rm_broker_stop(b);
        return err;
    }
    b->sock = sv[0];
    b->peer = sv[1];
    struct isob_server_spec ss = {.cpu = -1, .heap_size = 2 * 4096, .setup = NULL, .serve = rmb_serve,
                                  .arg = b, .keep_fd = {b->peer, -1}};
    int rc = isob_server_start(&b->server, &ss);
    close(b->peer);
    b->peer = -1;
    if (rc)
        rm_broker_stop(b);
    return rc;
}

void rm_broker_stop(struct rm_broker *b)
{
    if (b->sock >= 0)
        close(b->sock);  /* the broker reads end of file and leaves */
    if (b->peer >= 0)
        close(b->peer);
    b->sock = b->peer = -1;
    if (b->server.pid > 0)
        isob_server_stop(&b->server, RM_BROKER_STOP_MS);
    isob_unmap(b->buf, b->buf_len);
    isob_unmap(b->tally, sizeof *b->tally);
    b->buf = NULL;
    b->tally = NULL;
}

/* One request and its reply (and descriptor, into *fd when fd). */
static int64_t rmb_call(struct rm_broker *b, const struct rmb_req *q, int *fd)
{
    if (send(b->sock, q, sizeof *q, MSG_NOSIGNAL) != (ssize_t)sizeof *q)
        return -EPIPE;
    int64_t ret;
    struct iovec iov = {&ret, sizeof ret};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } c;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof c.buf};
    if (recvmsg(b->sock, &m, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof ret)
        return -EPIPE;
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
        int got;
        memcpy(&got, CMSG_DATA(h), sizeof got);
        if (fd)
            *fd = got;
        else
            close(got);
    }
    return ret;
}

static int rmb_open(struct rm_broker *b, const char *path, int flags, int op)
{
    struct rmb_req q = {.op = op, .flags = flags};
    if (strlen(path) >= sizeof q.path)
        return -ENAMETOOLONG;
    strcpy(q.path, path);
    int fd = -1;
    int64_t r = rmb_call(b, &q, op == RMB_OPEN_PASS ? &fd : NULL);
    if (op == RMB_OPEN_PASS && r == 0)
        return fd >= 0 ? fd : -EPROTO;
    return (int)r;
}

int rm_broker_open(struct rm_broker *b, const char *path, int flags)
{
    return rmb_open(b, path, flags, RMB_OPEN_PASS);
}

int rm_broker_open_kept(struct rm_broker *b, const char *path, int flags)
{
    return rmb_open(b, path, flags, RMB_OPEN_KEEP);
}

long rm_broker_pread(struct rm_broker *b, int handle, size_t len, off_t off)
{
    struct rmb_req q = {.op = RMB_PREAD, .handle = handle, .len = (uint32_t)len, .off = off};
    return (long)rmb_call(b, &q, NULL);
}

long rm_broker_pwrite(struct rm_broker *b, int handle, size_t len, off_t off)
{
    struct rmb_req q = {.op = RMB_PWRITE, .handle = handle, .len = (uint32_t)len, .off = off};
    return (long)rmb_call(b, &q, NULL);
}

int rm_broker_close(struct rm_broker *b, int handle)
{
    struct rmb_req q = {.op = RMB_CLOSE, .handle = handle};
    return (int)rmb_call(b, &q, NULL);
}
