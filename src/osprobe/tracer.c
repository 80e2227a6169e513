/* The pre-attached tracer (see include/isobench/osprobe.h).
 *
 * A process of the caller's uid, without capabilities, attaches to the
 * caller with PTRACE_SEIZE and PTRACE_O_TRACEFORK, VFORK and CLONE before
 * the caller makes anything, and then resumes every tracee with
 * PTRACE_SYSCALL, so that it stops at the entry and exit of each system
 * call of the caller and of every process the caller starts from then on
 * (a compartment's server, an lwc context).  It then reads a target the
 * caller names with process_vm_readv and /proc/PID/mem, as any process of
 * the uid could read a dumpable one.
 *
 * A server checks three things before it maps its trusted heap
 * (isob_server_close_to_readers, src/mechanisms/server_close.c; seccomp's
 * server checks them again before its filter), and the caller the first
 * two (isob_caller_close_to_readers).  What the tracer does to each, as
 * an attacker that controls every system call of its tracees would:
 *
 *   1. prctl(PR_SET_DUMPABLE, 0): rewritten at its entry to
 *      prctl(PR_SET_DUMPABLE, 1); the process stays dumpable (both modes);
 *   2. prctl(PR_GET_DUMPABLE), which must say 0: made to return 0 at its
 *      exit; the process believes it is closed (both modes);
 *   3. TracerPid in /proc/self/status, which must be 0 (isob_tracer_pid:
 *      fopen and fgets, that is openat and read): the naive mode leaves it
 *      alone, and the server finds the tracer there and refuses to start
 *      (-ISOB_ETRACED).  The hiding mode (ISOB_TRACER_HIDE) rewrites it at
 *      the exit of every read, pread64, readv, preadv and preadv2 of every
 *      tracee: where the bytes the call returned hold "TracerPid:", white
 *      space and a number other than 0, the number becomes "0" padded with
 *      spaces to the same length, in the tracee's buffer
 *      (process_vm_writev; PTRACE_POKEDATA where that fails).  The count
 *      the call returned stays the same, so nothing else in the file moves.
 *
 * No other check in the project decides -ISOB_ETRACED (server.h): no
 * server tries PTRACE_TRACEME or reads /proc/self/stat's state.  The
 * hiding mode covers a field in one buffer; a tracee that read the file a
 * byte at a time, or through mmap (procfs does not allow it), or asked
 * another process to read it for it would need more of the same: a tracer
 * attached before a compartment exists controls its system calls, and no
 * check inside it can be trusted.  The tracer reads and writes a tracee's
 * buffer with the ptrace access check, which a non-dumpable tracee fails
 * for a tracer without CAP_SYS_PTRACE: rewrite 1 is what keeps that open.
 * x86-64 only (the registers that carry a system call's arguments);
 * elsewhere the probe is untested. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/ptrace.h>

#include "isobench/error.h"
#include "isobench/osprobe.h"

/* How long the caller waits for the tracer to attach, to probe, to leave. */
#define TRACER_REPLY_TIMEOUT_MS 10000
/* Tracees the tracer keeps state for (the caller, its servers, helpers). */
#define TRACER_MAX_TRACEES 64

enum { CMD_PROBE = 'P', CMD_QUIT = 'Q' };

struct tracer_cmd {
    int op;
    struct isob_osprobe_target target;
};

/* What the tracer sends: once attached, then once per command. */
struct tracer_reply {
    int rc;          /* attach: 0 or a negative errno */
    char why[120];
    struct isob_tracer_stats stats;
    struct isob_osprobe_result res[ISOB_TRACER_PROBES];
};

static const char *const tracer_probe_names[ISOB_TRACER_PROBES] = {"process_vm_readv", "/proc/PID/mem read"};

const char *isob_tracer_probe_name(int p)
{
    return p >= 0 && p < ISOB_TRACER_PROBES ? tracer_probe_names[p] : "?";
}

long isob_tracer_pid(pid_t pid)
{
    char path[64];
    if (pid)
        snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    else
        snprintf(path, sizeof path, "/proc/self/status");
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    char line[256];
    long v = -ENOENT;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "TracerPid: %ld", &v) == 1)
            break;
    fclose(f);
    return v;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Read exactly len bytes within timeout_ms (the whole read). */
static int read_all(int fd, void *buf, size_t len, int timeout_ms)
{
    char *p = buf;
    while (len) {
        struct pollfd pf = {fd, POLLIN, 0};
        int r = poll(&pf, 1, timeout_ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            return -ETIMEDOUT;
        ssize_t n = r > 0 ? read(fd, p, len) : -1;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ---- in the tracer ---- */

struct tracee {
    pid_t pid;
    int fake_get;  /* at the exit of this call, make PR_GET_DUMPABLE return 0 */
    long nr;       /* the system call it entered (hiding mode: the reads), or -1 */
    uint64_t buf, count; /* its second and third arguments */
};

static struct tracee *tracee_of(struct tracee *t, pid_t pid)
{
    struct tracee *free_slot = NULL;
    for (int i = 0; i < TRACER_MAX_TRACEES; i++) {
        if (t[i].pid == pid)
            return &t[i];
        if (!t[i].pid && !free_slot)
            free_slot = &t[i];
    }
    if (free_slot) {
        free_slot->pid = pid;
        free_slot->fake_get = 0;
        free_slot->nr = -1;
    }
    return free_slot;
}

#if defined(__x86_64__)
/* Bytes of one read the hiding mode looks at: /proc/PID/status is about
 * 1.5 KiB, and glibc's stdio reads it in one call of its buffer's size. */
#define TRACER_SCAN_MAX 65536

/* Read len bytes of the tracee at addr: process_vm_readv, else PEEKDATA. */
static int tracee_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
    if (process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len)
        return 0;
    for (size_t off = 0; off < len; off += sizeof(long)) {
        errno = 0;
        long w = ptrace(PTRACE_PEEKDATA, pid, (void *)(uintptr_t)(addr + off), 0);
        if (errno)
            return -errno;
        memcpy((char *)buf + off, &w, len - off < sizeof w ? len - off : sizeof w);
    }
    return 0;
}

/* Write len bytes into the tracee at addr: process_vm_writev, else
 * PEEKDATA and POKEDATA a word at a time (the bytes around kept). */
static int tracee_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
    struct iovec local = {(void *)buf, len}, remote = {(void *)(uintptr_t)addr, len};
    if (process_vm_writev(pid, &local, 1, &remote, 1, 0) == (ssize_t)len)
        return 0;
    for (size_t off = 0; off < len;) {
        uint64_t at = (addr + off) & ~(uint64_t)(sizeof(long) - 1);
        size_t skip = (size_t)(addr + off - at), n = sizeof(long) - skip;
        if (n > len - off)
            n = len - off;
        errno = 0;
        long w = ptrace(PTRACE_PEEKDATA, pid, (void *)(uintptr_t)at, 0);
        if (errno)
            return -errno;
        memcpy((char *)&w + skip, (const char *)buf + off, n);
        if (ptrace(PTRACE_POKEDATA, pid, (void *)(uintptr_t)at, (void *)w) != 0)
            return -errno;
        off += n;
    }
    return 0;
}

/* In one buffer a tracee read (len bytes at addr): every "TracerPid:",
 * white space and a number other than 0 becomes "TracerPid:", the same
 * white space, "0" and spaces to the number's length. */
static void hide_in(pid_t pid, uint64_t addr, size_t len, struct isob_tracer_stats *st)
{
    static const char key[] = "TracerPid:";
    static char buf[TRACER_SCAN_MAX];
    if (len > sizeof buf)
        len = sizeof buf;
    if (len < sizeof key || tracee_read(pid, addr, buf, len) != 0)
        return;
    for (size_t i = 0; i + sizeof key - 1 < len; i++) {
        if (memcmp(buf + i, key, sizeof key - 1) != 0)
            continue;
        size_t d = i + sizeof key - 1;
        while (d < len && (buf[d] == ' ' || buf[d] == '\t'))
            d++;
        size_t e = d;
        while (e < len && buf[e] >= '0' && buf[e] <= '9')
            e++;
        int nonzero = 0;
        for (size_t k = d; k < e; k++)
            nonzero |= buf[k] != '0';
        if (e == d || !nonzero)
            continue;
        buf[d] = '0';
        memset(buf + d + 1, ' ', e - d - 1);
        if (tracee_write(pid, addr + d, buf + d, e - d) == 0)
            st->tracerpid_hidden++;
        i = e;
    }
}

/* At the exit of a read the tracee made (tr->nr): hide the tracer in what
 * the call returned. */
static void hide_at_exit(pid_t pid, const struct tracee *tr, int64_t got, struct isob_tracer_stats *st)
{
    if (got <= 0)
        return;
    if (tr->nr == SYS_read || tr->nr == SYS_pread64) {
        hide_in(pid, tr->buf, (size_t)got, st);
        return;
    }
    /* readv, preadv, preadv2: the iovecs in order, up to the count read. */
    struct iovec iov[16];
    size_t n = tr->count < 16 ? (size_t)tr->count : 16;
    if (n == 0 || tracee_read(pid, tr->buf, iov, n * sizeof iov[0]) != 0)
        return;
    uint64_t left = (uint64_t)got;
    for (size_t i = 0; i < n && left; i++) {
        size_t take = iov[i].iov_len < left ? iov[i].iov_len : (size_t)left;
        hide_in(pid, (uint64_t)(uintptr_t)iov[i].iov_base, take, st);
        left -= take;
    }
}

static int is_read(long nr)
{
    return nr == SYS_read || nr == SYS_pread64 || nr == SYS_readv || nr == SYS_preadv || nr == SYS_preadv2;
}

/* At a system-call stop: rewrite or fake the dumpability calls; hiding:
 * hide the tracer in what a read returned. */
static void at_syscall(pid_t pid, struct tracee *tr, int hide, struct isob_tracer_stats *st)
{
    struct __ptrace_syscall_info info;
    memset(&info, 0, sizeof info);
    if (ptrace(PTRACE_GET_SYSCALL_INFO, pid, (void *)sizeof info, &info) <= 0)
        return;
    struct user_regs_struct regs;
    if (info.op == PTRACE_SYSCALL_INFO_ENTRY) {
        if (tr) {
            tr->fake_get = 0;
            tr->nr = hide && is_read((long)info.entry.nr) ? (long)info.entry.nr : -1;
            tr->buf = info.entry.args[1];
            tr->count = info.entry.args[2];
        }
        if (info.entry.nr != SYS_prctl)
            return;
        if ((int)info.entry.args[0] == PR_SET_DUMPABLE && info.entry.args[1] == 0 &&
            ptrace(PTRACE_GETREGS, pid, 0, &regs) == 0) {
            regs.rsi = 1;
            if (ptrace(PTRACE_SETREGS, pid, 0, &regs) == 0)
                st->set_rewritten++;
        } else if ((int)info.entry.args[0] == PR_GET_DUMPABLE && tr) {
            tr->fake_get = 1;
        }
    } else if (info.op == PTRACE_SYSCALL_INFO_EXIT && tr && tr->nr >= 0) {
        hide_at_exit(pid, tr, info.exit.rval, st);
        tr->nr = -1;
    } else if (info.op == PTRACE_SYSCALL_INFO_EXIT && tr && tr->fake_get) {
        tr->fake_get = 0;
        if (ptrace(PTRACE_GETREGS, pid, 0, &regs) == 0 && regs.rax != 0) {
            regs.rax = 0;
            if (ptrace(PTRACE_SETREGS, pid, 0, &regs) == 0)
                st->get_faked++;
        }
    }
}
#define TRACER_ARCH_OK 1
#else
static void at_syscall(pid_t pid, struct tracee *tr, int hide, struct isob_tracer_stats *st)
{
    (void)pid;
    (void)tr;
    (void)hide;
    (void)st;
}
#define TRACER_ARCH_OK 0
#endif

static void read_target(const struct isob_osprobe_target *t, struct isob_osprobe_result res[ISOB_TRACER_PROBES])
{
    memset(res, 0, sizeof(struct isob_osprobe_result) * ISOB_TRACER_PROBES);
    uint64_t v = 0;
    struct iovec local = {&v, sizeof v}, remote = {(void *)t->addr, sizeof v};
    ssize_t n = process_vm_readv(t->pid, &local, 1, &remote, 1, 0);
    struct isob_osprobe_result *r = &res[ISOB_TRACER_VM_READV];
    if (n == (ssize_t)sizeof v) {
        r->outcome = ISOB_OSP_GRANTED;
        r->secret_seen = v == t->secret;
    } else {
        r->outcome = n < 0 && errno == ENOSYS ? ISOB_OSP_UNTESTED : ISOB_OSP_DENIED;
        r->err = n < 0 ? errno : EIO;
    }
    r = &res[ISOB_TRACER_MEM_READ];
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/mem", (long)t->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    v = 0;
    if (fd < 0) {
        r->outcome = errno == ENOENT ? ISOB_OSP_UNTESTED : ISOB_OSP_DENIED;
        r->err = errno;
        if (r->outcome == ISOB_OSP_UNTESTED)
            snprintf(r->note, sizeof r->note, "%s: no such file", path);
        return;
    }
    n = pread(fd, &v, sizeof v, (off_t)t->addr);
    if (n == (ssize_t)sizeof v) {
        r->outcome = ISOB_OSP_GRANTED;
        r->secret_seen = v == t->secret;
    } else {
        r->outcome = ISOB_OSP_DENIED;
        r->err = n < 0 ? errno : EIO;
        snprintf(r->note, sizeof r->note, "opened, then pread failed");
    }
    close(fd);
}

static int drop_caps(void)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3];
    memset(none, 0, sizeof none);
    return syscall(SYS_capset, &hdr, none) == 0 ? 0 : -errno;
}

static void __attribute__((noreturn)) tracer_main(pid_t caller, int hide, int cmd_fd, int reply_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct tracer_reply rep;
    memset(&rep, 0, sizeof rep);
    if (getppid() != caller)
        _exit(1);
    if ((rep.rc = drop_caps()) != 0) {
        snprintf(rep.why, sizeof rep.why, "cannot drop the tracer's capabilities: %s", isob_strerror(rep.rc));
    } else if (ptrace(PTRACE_SEIZE, caller, 0,
                      PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
                          PTRACE_O_TRACECLONE) != 0) {
        rep.rc = -errno;
        snprintf(rep.why, sizeof rep.why, "PTRACE_SEIZE of the caller: %s", isob_errno_name(rep.rc));
    } else if (ptrace(PTRACE_INTERRUPT, caller, 0, 0) != 0) {
        rep.rc = -errno;
        snprintf(rep.why, sizeof rep.why, "PTRACE_INTERRUPT of the caller: %s", isob_errno_name(rep.rc));
    }
    if (rep.rc) {
        write_all(reply_fd, &rep, sizeof rep);
        _exit(0);
    }
    rep.stats.attached = 1;
    rep.stats.followed = 1;
    rep.stats.hides = hide;
    struct tracee tracees[TRACER_MAX_TRACEES];
    memset(tracees, 0, sizeof tracees);
    tracee_of(tracees, caller);
    int told = 0;
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, __WALL | WNOHANG);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid < 0)
            _exit(0); /* nothing left to trace */
        if (pid == 0) {
            struct pollfd pf = {cmd_fd, POLLIN, 0};
            if (poll(&pf, 1, 1) <= 0)
                continue;
            struct tracer_cmd cmd;
            if (read_all(cmd_fd, &cmd, sizeof cmd, TRACER_REPLY_TIMEOUT_MS) != 0 || cmd.op == CMD_QUIT) {
                write_all(reply_fd, &rep, sizeof rep);
                _exit(0); /* the kernel detaches every tracee, which goes on */
            }
            read_target(&cmd.target, rep.res);
            write_all(reply_fd, &rep, sizeof rep);
            continue;
        }
        struct tracee *tr = tracee_of(tracees, pid);
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            if (tr)
                tr->pid = 0;
            continue;
        }
        if (!WIFSTOPPED(status))
            continue;
        int sig = WSTOPSIG(status), event = status >> 16;
        long deliver = 0;
        if (sig == (SIGTRAP | 0x80)) {
            at_syscall(pid, tr, hide, &rep.stats);
        } else if (event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK || event == PTRACE_EVENT_CLONE) {
            rep.stats.followed++;
        } else if (event == PTRACE_EVENT_STOP) {
            /* The first stop of the caller (the interrupt) and of each new
             * tracee: from here on it stops at every system call. */
            if (pid == caller && !told) {
                told = 1;
                write_all(reply_fd, &rep, sizeof rep);
            }
        } else if (event == 0) {
            deliver = sig; /* a signal on its way: let it through */
        }
        ptrace(PTRACE_SYSCALL, pid, 0, (void *)deliver);
    }
}

/* ---- in the caller ---- */

int isob_tracer_attach(struct isob_tracer *t, char *why, size_t len)
{
    return isob_tracer_attach_mode(t, 0, why, len);
}

int isob_tracer_attach_mode(struct isob_tracer *t, unsigned flags, char *why, size_t len)
{
    memset(t, 0, sizeof *t);
    t->cmd_fd = t->reply_fd = -1;
    if (!TRACER_ARCH_OK) {
        snprintf(why, len, "the pre-attached tracer rewrites x86-64 registers; not built for this architecture");
        return -ENOTSUP;
    }
    int cmd[2], reply[2];
    if (pipe2(cmd, O_CLOEXEC) != 0) {
        int err = -errno;
        snprintf(why, len, "pipe: %s", isob_strerror(err));
        return err;
    }
    if (pipe2(reply, O_CLOEXEC) != 0) {
        int err = -errno;
        close(cmd[0]);
        close(cmd[1]);
        snprintf(why, len, "pipe: %s", isob_strerror(err));
        return err;
    }
    pid_t caller = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int err = -errno;
        close(cmd[0]);
        close(cmd[1]);
        close(reply[0]);
        close(reply[1]);
        snprintf(why, len, "fork: %s", isob_strerror(err));
        return err;
    }
    if (pid == 0) {
        close(cmd[1]);
        close(reply[0]);
        tracer_main(caller, (flags & ISOB_TRACER_HIDE) != 0, cmd[0], reply[1]);
    }
    close(cmd[0]);
    close(reply[1]);
    t->pid = pid;
    t->cmd_fd = cmd[1];
    t->reply_fd = reply[0];
    struct tracer_reply rep;
    int rc = read_all(t->reply_fd, &rep, sizeof rep, TRACER_REPLY_TIMEOUT_MS);
    if (rc) {
        snprintf(why, len, "the tracer %s", rc == -ETIMEDOUT ? "did not report" : "ended without a report");
    } else if (rep.rc) {
        rc = rep.rc;
        snprintf(why, len, "%s", rep.why);
    }
    if (rc) {
        /* The tracer reported its failure and is ending, or never reported:
         * it takes no command now, and writing CMD_QUIT to a tracer that has
         * exited would meet a closed pipe (SIGPIPE kills the caller). */
        kill(t->pid, SIGKILL);
        while (waitpid(t->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        t->pid = 0;
        isob_tracer_stop(t, NULL);  /* closes the pipes */
        return rc;
    }
    t->stats = rep.stats;
    return 0;
}

int isob_tracer_probe(struct isob_tracer *t, const struct isob_osprobe_target *target,
                      struct isob_osprobe_result res[ISOB_TRACER_PROBES])
{
    struct tracer_cmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.op = CMD_PROBE;
    cmd.target = *target;
    struct tracer_reply rep;
    int rc = write_all(t->cmd_fd, &cmd, sizeof cmd);
    if (rc == 0)
        rc = read_all(t->reply_fd, &rep, sizeof rep, TRACER_REPLY_TIMEOUT_MS);
    if (rc)
        return rc;
    t->stats = rep.stats;
    memcpy(res, rep.res, sizeof rep.res);
    return 0;
}

void isob_tracer_stop(struct isob_tracer *t, struct isob_tracer_stats *stats)
{
    if (t->pid > 0) {
        struct tracer_cmd cmd;
        memset(&cmd, 0, sizeof cmd);
        cmd.op = CMD_QUIT;
        struct tracer_reply rep;
        if (t->cmd_fd >= 0 && write_all(t->cmd_fd, &cmd, sizeof cmd) == 0 &&
            read_all(t->reply_fd, &rep, sizeof rep, TRACER_REPLY_TIMEOUT_MS) == 0)
            t->stats = rep.stats;
        else
            kill(t->pid, SIGKILL);
        while (waitpid(t->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        t->pid = 0;
    }
    if (t->cmd_fd >= 0)
        close(t->cmd_fd);
    if (t->reply_fd >= 0)
        close(t->reply_fd);
    t->cmd_fd = t->reply_fd = -1;
    if (stats)
        *stats = t->stats;
}
