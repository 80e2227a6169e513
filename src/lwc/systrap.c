/* LWC_SYSTRAP and lwc_restrict: the seccomp side of the lwc library.
 *
 * A trapped context runs under a seccomp filter that sends the calls it
 * names to a listener (SECCOMP_RET_USER_NOTIF); its creator holds the
 * listener and is the supervisor.  The context's switch up to its creator
 * is one more trapped call, LWC_SYSTRAP_SWITCH_NR, a number Linux does not
 * have: so the creator waits on one thing, the listener (and the
 * context's pidfd, for its death), and a trapped call and a switch up
 * arrive the same way.  An unanswered notification is "held"; the next
 * switch down answers it, so exactly one of the two runs.
 *
 * The filters are written in classic BPF by hand: they are a few
 * comparisons, and the trap filter must name a number no system call
 * table has. */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "isobench/arch.h"
#include "lwc_impl.h"

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
/* The x32 ABI's system calls carry this bit; the filters refuse them. */

/* The calls the library itself makes in a trapped context, from the
 * filter's installation to every switch: trapping one would leave the
 * context waiting for an answer that the creator, waiting for something
 * else, never gives. */
static const int lwc_never_trapped[] = {
    SYS_futex, SYS_close_range, SYS_exit, SYS_exit_group, SYS_rt_sigreturn, SYS_restart_syscall,
    SYS_prctl, SYS_seccomp, SYS_rt_sigprocmask, LWC_SYSTRAP_SWITCH_NR,
};

int lwc_systrap_allowed(int nr)
{
    if (nr < 0 || nr >= LWC_SYSTRAP_SWITCH_NR)
        return -EINVAL;
    for (size_t i = 0; i < sizeof lwc_never_trapped / sizeof lwc_never_trapped[0]; i++)
        if (nr == lwc_never_trapped[i])
            return -EINVAL;
    return 0;
}

/* Calls whose arguments point at memory a policy reads (a path, an
 * address): the supervisor must never let the kernel run them as made
 * (SECCOMP_USER_NOTIF_FLAG_CONTINUE), since the context could change that
 * memory between the check and the kernel's own read. */
static const int lwc_reads_memory[] = {
    SYS_openat, SYS_openat2, SYS_execve, SYS_execveat, SYS_newfstatat, SYS_statx, SYS_faccessat,
    SYS_faccessat2, SYS_unlinkat, SYS_renameat, SYS_renameat2, SYS_mkdirat, SYS_linkat,
    SYS_symlinkat, SYS_fchmodat, SYS_fchownat, SYS_truncate, SYS_readlinkat, SYS_chdir,
    SYS_chroot, SYS_mknodat, SYS_mount, SYS_umount2, SYS_connect, SYS_bind, SYS_sendto,
    SYS_sendmsg,
#ifdef SYS_open
    /* The older forms, where the architecture still has them (x86-64; arm64
     * never had them). */
    SYS_open, SYS_creat, SYS_stat, SYS_lstat, SYS_access, SYS_unlink, SYS_rename, SYS_mkdir,
    SYS_rmdir, SYS_link, SYS_symlink, SYS_chmod, SYS_chown, SYS_lchown, SYS_readlink, SYS_mknod,
#endif
};

/* openat, or open where the architecture has it. */
static int lwc_is_open(long nr)
{
#ifdef SYS_open
    if (nr == SYS_open)
        return 1;
#endif
    return nr == SYS_openat;
}

static int reads_memory(int nr)
{
    for (size_t i = 0; i < sizeof lwc_reads_memory / sizeof lwc_reads_memory[0]; i++)
        if (nr == lwc_reads_memory[i])
            return 1;
    return 0;
}

/* A filter under construction. */
struct bpf_prog {
    struct sock_filter f[16 + 2 * (LWC_MAX_SPEC + 1)];
    unsigned n;
};

static void emit(struct bpf_prog *p, unsigned short code, unsigned char jt, unsigned char jf, uint32_t k)
{
    p->f[p->n++] = (struct sock_filter){code, jt, jf, k};
}

/* The common head: other architectures are killed, x32 calls (on x86-64)
 * fail with ENOSYS, and the accumulator holds the call's number. */
static void emit_head(struct bpf_prog *p)
{
    emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, (uint32_t)offsetof(struct seccomp_data, arch));
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, ISOB_AUDIT_ARCH);
    emit(p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_KILL_PROCESS);
    emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, (uint32_t)offsetof(struct seccomp_data, nr));
#if ISOB_SYSCALL_ALIAS_BIT
    emit(p, BPF_JMP | BPF_JGE | BPF_K, 0, 1, ISOB_SYSCALL_ALIAS_BIT);
    emit(p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS);
#endif
}

static int load(struct bpf_prog *p, unsigned long flags)
{
    struct sock_fprog prog = {.len = (unsigned short)p->n, .filter = p->f};
    /* Without CAP_SYS_ADMIN a filter needs no_new_privs, which stays for
     * good, as the filter does. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -errno;
    long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
    if (fd < 0 && errno == EINVAL && (flags & SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV))
        fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags & ~SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
                     &prog);
    return fd < 0 ? -errno : (int)fd;
}

int lwc_systrap_install(const int *nrs, size_t n)
{
    if (n > LWC_MAX_SPEC)
        return -EINVAL;
    /* The supervisor takes the listener from this context (pidfd_getfd)
     * and reads the paths of its calls (process_vm_readv): the kernel
     * allows both only on a dumpable target.  A supervisor that hid its
     * own memory before creating this context (as a monitor must, or the
     * context writes over its policy through /proc/PID/mem) left it
     * non-dumpable; the context has nothing to hide from its supervisor. */
    if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0)
        return -errno;
    struct bpf_prog p = {.n = 0};
    emit_head(&p);
    for (size_t i = 0; i <= n; i++) {
        uint32_t nr = i < n ? (uint32_t)nrs[i] : LWC_SYSTRAP_SWITCH_NR;
        emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, nr);
        emit(&p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_USER_NOTIF);
    }
    emit(&p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
    /* WAIT_KILLABLE_RECV (Linux 5.19): once the supervisor took a
     * notification, only a fatal signal ends the context's wait, so a
     * signal cannot withdraw a held switch (older kernels: it can, and the
     * creator then sees the context as dead). */
    return load(&p, SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV);
}

void lwc_systrap_up(void)
{
    /* Answered by the creator's next switch down; the result is 0. */
    syscall(LWC_SYSTRAP_SWITCH_NR);
}

int lwc_restrict_self(void)
{
    if (prctl(PR_SET_DUMPABLE, 0) != 0)
        return -errno;
    static const uint32_t denied[] = {SYS_process_vm_readv, SYS_process_vm_writev, SYS_ptrace,
                                      SYS_pidfd_getfd};
    const unsigned nd = sizeof denied / sizeof denied[0];
    struct bpf_prog p = {.n = 0};
    emit_head(&p);
    /* Indices below: the head, the denied calls, the prctl test, allow,
     * the argument test, deny, allow. */
    unsigned deny = p.n + nd + 4;
    for (unsigned i = 0; i < nd; i++)
        emit(&p, BPF_JMP | BPF_JEQ | BPF_K, (unsigned char)(deny - p.n - 1), 0, denied[i]);
    emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, SYS_prctl);
    emit(&p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
    /* prctl's option is an int: its low word decides. */
    emit(&p, BPF_LD | BPF_W | BPF_ABS, 0, 0, (uint32_t)offsetof(struct seccomp_data, args[0]));
    emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, PR_SET_DUMPABLE);
    emit(&p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ERRNO | EPERM);
    emit(&p, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
    if (p.n != deny + 2)
        return -EPROTO;
    int rc = load(&p, 0);
    return rc < 0 ? rc : 0;
}

/* The kernel's notification size, checked once against the room held. */
static int notif_size(void)
{
    static int size;
    if (!size) {
        struct seccomp_notif_sizes s;
        if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &s) != 0)
            return -errno;
        if (s.seccomp_notif > LWC_NOTIF_ROOM || s.seccomp_notif_resp > sizeof(struct seccomp_notif_resp))
            return -ENOTSUP;
        size = s.seccomp_notif;
    }
    return size;
}

int lwc_systrap_wait(struct lwc_ent *e)
{
    int size = notif_size();
    if (size < 0)
        return size;
    int pfd = lwc_pidfd(e);
    if (pfd < 0)
        return pfd;
    for (;;) {
        struct pollfd p[2] = {{e->listener, POLLIN, 0}, {pfd, POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (p[0].revents & POLLIN) {
            memset(&e->notif, 0, (size_t)size);
            if (ioctl(e->listener, SECCOMP_IOCTL_NOTIF_RECV, &e->notif) == 0) {
                e->held = 1;
                e->reply_ready = 0;
                e->held_switch = e->notif.n.data.nr == LWC_SYSTRAP_SWITCH_NR;
                return 0;
            }
            /* ENOENT: the call was withdrawn before it was taken. */
            if (errno == EINTR || errno == ENOENT)
                continue;
            return -errno;
        }
        if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) || (p[0].revents & (POLLHUP | POLLERR)))
            return lwc_child_died(e);
    }
}

int lwc_systrap_switch(struct lwc_ent *e, int h, int *from, struct lwc_msg *in)
{
    int rc;
    if (!e->held && (rc = lwc_systrap_wait(e)) < 0)
        return rc;
    struct seccomp_notif_resp r = {.id = e->notif.n.id};
    if (!e->held_switch) {
        if (e->reply_ready)
            r = e->resp;
        else
            r.error = -EPERM;
    }
    e->held = 0;
    e->reply_ready = 0;
    if (ioctl(e->listener, SECCOMP_IOCTL_NOTIF_SEND, &r) != 0)
        return errno == ENOENT ? lwc_child_died(e) : -errno;
    if ((rc = lwc_systrap_wait(e)) < 0)
        return rc;
    if (from)
        *from = h;
    if (e->held_switch) {
        if (in)
            *in = e->link->msg;
        return 0;
    }
    if (in) {
        memset(in, 0, sizeof *in);
        in->w[0] = (uint64_t)e->notif.n.data.nr;
        for (int i = 0; i < 6; i++)
            in->w[1 + i] = e->notif.n.data.args[i];
    }
    return LWC_TRAPPED;
}

static struct lwc_ent *trapped(int lwc, int *err)
{
    struct lwc_ent *e = lwc_ent_of(lwc);
    *err = e ? -EINVAL : -ESRCH;
    if (!e || !e->child || !e->systrap || !e->held || e->held_switch)
        return NULL;
    return e;
}

int lwc_syscall(int lwc, const struct lwc_sysreply *r)
{
    int err;
    struct lwc_ent *e = trapped(lwc, &err);
    if (!e)
        return err;
    if (!r)
        return -EINVAL;
    struct seccomp_notif_resp resp = {.id = e->notif.n.id};
    int nr = e->notif.n.data.nr, ret = 0;
    switch (r->action) {
    case LWC_SYS_DENY:
        if (r->value < 0)
            return -EINVAL;
        resp.error = -(int)(r->value ? r->value : EPERM);
        break;
    case LWC_SYS_RETURN:
        resp.val = r->value;
        break;
    case LWC_SYS_CONTINUE:
        if (reads_memory(nr))
            return -EINVAL;
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        break;
    case LWC_SYS_OPEN: {
        if (!lwc_is_open(nr) || !r->path)
            return -EINVAL;
        /* The supervisor's own copy of the path, checked by its policy,
         * is what is opened: the context's memory is not read again. */
        int fd = openat(AT_FDCWD, r->path, r->flags | O_CLOEXEC, r->mode);
        if (fd < 0) {
            ret = resp.error = -errno;
            break;
        }
        struct seccomp_notif_addfd a = {.id = resp.id, .flags = 0, .srcfd = (uint32_t)fd, .newfd = 0,
                                        .newfd_flags = (uint32_t)(r->flags & O_CLOEXEC)};
        int n = ioctl(e->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &a);
        int add_err = errno;
        close(fd);
        if (n < 0) {
            ret = resp.error = -add_err;
            break;
        }
        resp.val = n;
        ret = n;
        break;
    }
    default:
        return -EINVAL;
    }
    e->resp = resp;
    e->reply_ready = 1;
    return ret;
}

int lwc_trap_string(int lwc, unsigned argi, char *buf, size_t len)
{
    int err;
    struct lwc_ent *e = trapped(lwc, &err);
    if (!e)
        return err;
    if (argi > 5 || !buf || len == 0)
        return -EINVAL;
    uintptr_t addr = (uintptr_t)e->notif.n.data.args[argi];
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), got = 0;
    /* Page by page: the string may end just before memory that is not
     * mapped, which a read of len bytes at once would fail on. */
    while (got < len) {
        size_t chunk = ps - (addr + got) % ps;
        if (chunk > len - got)
            chunk = len - got;
        struct iovec local = {buf + got, chunk}, remote = {(void *)(addr + got), chunk};
        ssize_t n = process_vm_readv(e->pid, &local, 1, &remote, 1, 0);
        if (n <= 0)
            return n < 0 ? -errno : -EFAULT;
        char *z = memchr(buf + got, 0, (size_t)n);
        if (z) {
            uint64_t id = e->notif.n.id;
            if (ioctl(e->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) != 0)
                return -ESRCH;
            return (int)(z - buf);
        }
        got += (size_t)n;
    }
    return -ENAMETOOLONG;
}
