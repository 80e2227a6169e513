/* delegate: memory handed down a chain, then revoked -- the microkernel
 * benchmark that delegates memory recursively between tasks
 * (docs/microkernel.md).  The owner fills a region of R bytes with a
 * pattern; hop 1 receives all of it, and every hop maps its share,
 * verifies its checksum and passes the upper half on (a share of 64 bytes
 * is passed whole), down to hop d.  Variants:
 *
 *   threads    d threads of one process; a share is a pointer (no
 *              isolation at all: labelled so, the floor of the others)
 *   processes  d processes; a share is the region's memfd, passed over an
 *              AF_UNIX socket (SCM_RIGHTS) with its offset and length, and
 *              mapped at that sub-range (MAP_SHARED, page-aligned around it)
 *   copies     d processes; a share is copied into the next hop's own
 *              buffer with process_vm_writev, then announced over a socket
 *
 * Times come from CLOCK_MONOTONIC_RAW, in ns, which every process reads
 * alike: a hop's delegation is from the delegator's stamp before it hands
 * the share over to the receiver's having mapped it (hop samples); end to
 * end is from the first hand-over to the last hop's verified checksum.
 * What each hop verified goes to a shared page, with its own times.
 *
 * Revocation (processes): after each delegation the owner revokes, in turn
 *
 *   truncate   ftruncate(memfd, 0): the kernel removes the pages from every
 *              holder's mapping before the call returns; its duration is the
 *              revocation latency.  Then every holder touches its share and
 *              must take SIGBUS, which it reports.
 *   unmap      the owner asks every holder to munmap its share and waits
 *              for every acknowledgement: the latency.  Then every holder
 *              touches the old address and must take SIGSEGV.
 *
 * A hop that dies is counted and reported, the others are ended, and the
 * benchmark goes on with the next configuration.  Every hop dies with the
 * measuring process (PR_SET_PDEATHSIG). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isobench/futex.h"
#include "isobench/mechanism.h"
#include "isobench/server.h"
#include "delegate.h"

const char *const dg_variant_names[DG__COUNT + 1] = {"threads", "processes", "copies", NULL};
static const uint64_t dg_default_sizes[] = {4096, 1 << 20, 64 << 20};
static const uint64_t dg_default_depths[] = {1, 2, 4, 8, 16, 32};
/* The seed of the owner's pattern. */
#define DG_SEED 0xde1e6a7eull
/* A hop's thread stack: it only sums and passes on. */
#define DG_THREAD_STACK (64 * 1024)
/* How long a measuring process may take before the parent ends it. */
#define DG_CHILD_TIMEOUT_S 900
#define DG_CHILD_TIMEOUT_S_QUICK 170
/* Chains up to this depth list each hop's medians in their results. */
#define DG_PER_HOP_MAX 64
/* How long the owner looks for the hop that died once the chain broke. */
#define DG_DEATH_WAIT_MS 2000
/* The one protection delegate runs under: its measuring process is only
 * the unconfined, untraced baseline (none verifies that). */
static const struct uk_protect *dg_none(void);

enum { DG_DELEGATE = 1, DG_READY, DG_DONE, DG_PROBE, DG_UNMAP, DG_RELEASE, DG_ACK, DG_PROBED };

/* What a message between owner and hops carries. */
struct dg_msg {
    uint32_t cmd;
    int32_t arg;               /* ACK and PROBED: the signal the probe met, 0 for none */
    uint64_t off, len;         /* DELEGATE: the share, in bytes of the region */
};

/* What hop k did with its share in the current repetition. */
struct dg_rec {
    uint64_t t_sent;           /* the delegator's stamp before handing the share over */
    uint64_t t_recv;           /* the hop has the message (and descriptor) */
    uint64_t t_mapped;         /* ... and the share mapped (= t_recv without a mapping) */
    uint64_t t_verified;       /* ... and its checksum computed */
    uint64_t off, len;         /* the share it received */
    uint64_t want;             /* the owner's checksum of the share it should have received */
    uint64_t sum;              /* the checksum it computed */
    int32_t err;               /* 0, or -errno of mapping or copying */
    int32_t halved;            /* it passed on half (0: the share was passed whole or it was last) */
};

struct dg_thread_arg;

/* The page shared by owner and hops (and the hop threads' array). */
struct dg_hop {
    pid_t pid;
    uint32_t pad;
    uint64_t addr;             /* copies: the hop's buffer */
    struct dg_rec rec;
};

/* One configuration being measured. */
struct dg_chain {
    const struct dg_config *cfg;
    enum dg_variant v;
    uint64_t region;
    unsigned d;
    enum isob_placement pl;
    struct dg_hop *hop;        /* hop[1..d]; shared for processes */
    size_t hop_bytes;
    int *link;                 /* link[2k], link[2k+1]: the socketpair from hop k to hop k+1 (0: owner) */
    int *ctl;                  /* ctl[2k], ctl[2k+1]: the socketpair between owner and hop k */
    unsigned char *owner_buf;  /* copies and threads: the region itself */
    int memfd;                 /* processes: the region of this repetition */
    /* threads */
    pthread_t *th;
    struct dg_thread_arg *args;
    uint32_t *mail;            /* mailbox sequence per hop (futex) */
    uint64_t *mail_off, *mail_len;
    uint32_t done, quit;
    int started;               /* hops running */
};

/* ---- shares ---- */

static uint64_t dg_cap(uint64_t region, unsigned k)
{
    uint64_t len = region;
    for (unsigned i = 1; i < k && len / 2 >= DG_MIN_SHARE; i++)
        len /= 2;
    return len;
}

/* The share hop k+1 gets from hop k's [off, off+len): the upper half. */
static void dg_next(uint64_t off, uint64_t len, uint64_t *noff, uint64_t *nlen, int *halved)
{
    *halved = len / 2 >= DG_MIN_SHARE;
    *nlen = *halved ? len / 2 : len;
    *noff = off + (len - *nlen);
}

/* ---- messages ---- */

static int dg_send(int sock, const struct dg_msg *m, int fd)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof *m};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof ctl.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    ssize_t k;
    while ((k = sendmsg(sock, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    return k == (ssize_t)sizeof *m ? 0 : -EPIPE;
}

/* A whole message (messages are sent whole on SOCK_SEQPACKET); *fd gets
 * the descriptor that came with it, or -1.  0, or -EPIPE at end of file. */
static int dg_recv(int sock, struct dg_msg *m, int *fd)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = m, .iov_len = sizeof *m};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                        .msg_controllen = sizeof ctl.buf};
    if (fd)
        *fd = -1;
    ssize_t k;
    while ((k = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    if (k != (ssize_t)sizeof *m)
        return -EPIPE;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        int got;
        memcpy(&got, CMSG_DATA(c), sizeof got);
        if (fd)
            *fd = got;
        else
            close(got);
    }
    return 0;
}

/* ---- probing a revoked share ---- */

static sigjmp_buf dg_jmp;
static volatile sig_atomic_t dg_sig;

static void dg_on_fault(int sig)
{
    dg_sig = sig;
    siglongjmp(dg_jmp, 1);
}

/* Read one byte at p; the signal that read raised (SIGBUS, SIGSEGV), or 0
 * when it read.  The handlers are in place only while it reads. */
static int dg_probe(const volatile unsigned char *p)
{
    struct sigaction sa = {.sa_handler = dg_on_fault}, old_bus, old_segv;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &old_bus);
    sigaction(SIGSEGV, &sa, &old_segv);
    dg_sig = 0;
    if (sigsetjmp(dg_jmp, 1) == 0) {
        unsigned char b = *p;
        isob_keep(b);
    }
    sigaction(SIGBUS, &old_bus, NULL);
    sigaction(SIGSEGV, &old_segv, NULL);
    return dg_sig;
}

/* ---- a hop process ---- */

/* Close every descriptor from 3 up but the n in keep (each >= 3 or -1). */
static void dg_keep_only(int *keep, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    unsigned from = 3;
    for (int i = 0; i <= n; i++) {
        unsigned to = i < n ? (unsigned)keep[i] : ~0u;
        if (i < n && keep[i] < (int)from)
            continue;
        if (to > from && syscall(SYS_close_range, from, to - 1, 0) != 0) {
            /* Kernels before 5.9: one at a time, up to the limit. */
            long max = sysconf(_SC_OPEN_MAX);
            for (long fd = from; fd < (long)to && fd < (max > 0 ? max : 1024); fd++)
                close((int)fd);
        }
        from = to + 1;
    }
}

/* Hop k of a process chain; returns its exit status. */
/* Hand the share on from hop k (whose message was m) to hop k + 1: the
 * next message down, with the memfd (fd) or, for copies, the bytes written
 * into the next hop's buffer first, from the share (its first byte is m's
 * offset) or, when it has none, from this hop's buffer.  0, or 1 when the
 * next hop is gone. */
static int dg_pass_on(struct dg_chain *c, unsigned k, const struct dg_msg *m,
                      const unsigned char *share, const unsigned char *buf, int fd, int down)
{
    struct dg_msg n = {.cmd = DG_DELEGATE};
    int halved;
    dg_next(m->off, m->len, &n.off, &n.len, &halved);
    c->hop[k].rec.halved = halved;
    struct dg_rec *nr = &c->hop[k + 1].rec;
    nr->t_sent = isob_clock_ns();
    if (c->v != DG_COPIES)
        return dg_send(down, &n, fd) ? 1 : 0;
    const unsigned char *src = share ? share + (n.off - m->off) : buf;
    struct iovec local = {.iov_base = (void *)src, .iov_len = n.len};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)c->hop[k + 1].addr, .iov_len = n.len};
    ssize_t w = process_vm_writev(c->hop[k + 1].pid, &local, 1, &remote, 1, 0);
    if (w != (ssize_t)n.len)
        nr->err = w < 0 ? -errno : -EIO;
    return dg_send(down, &n, -1) ? 1 : 0;
}

/* What the owner decides becomes of a process hop's share (map, maplen of
 * it mapped): released, probed after a truncation, or unmapped and then
 * probed on request; each answered on ctl.  0; -1 when the owner closed
 * the control socket (the hop leaves); 1 when an answer could not be sent. */
static int dg_owner_says(int ctl, const unsigned char *share, unsigned char *map, size_t maplen)
{
    struct dg_msg cmd;
    if (dg_recv(ctl, &cmd, NULL))
        return -1;
    struct dg_msg ack = {.cmd = DG_ACK};
    if (cmd.cmd == DG_PROBE)
        ack.arg = share ? dg_probe(share) : -1;
    if (map)
        munmap(map, maplen);
    if (dg_send(ctl, &ack, -1))
        return 1;
    if (cmd.cmd == DG_UNMAP) {
        struct dg_msg probed = {.cmd = DG_PROBED, .arg = share ? dg_probe(share) : -1};
        if (dg_send(ctl, &probed, -1))
            return 1;
    }
    return 0;
}

static int dg_hop_main(struct dg_chain *c, unsigned k)
{
    const unsigned d = c->d;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int up = c->link[2 * (k - 1) + 1], down = k < d ? c->link[2 * k] : -1, ctl = c->ctl[2 * k + 1];
    int keep[3] = {up, down, ctl};
    dg_keep_only(keep, 3);
    struct dg_hop *me = &c->hop[k];
    unsigned char *buf = NULL;
    uint64_t cap = dg_cap(c->region, k);
    if (c->v == DG_COPIES) {
        buf = isob_map(cap, 0);
        if (!buf)
            return 1;
        me->addr = (uint64_t)(uintptr_t)buf;
        /* The delegator must be allowed to write into this process where
         * Yama restricts ptrace to descendants (EINVAL without Yama). */
        prctl(PR_SET_PTRACER, k > 1 ? c->hop[k - 1].pid : getppid(), 0, 0, 0);
    }
    struct dg_msg m = {.cmd = DG_READY};
    if (dg_send(ctl, &m, -1))
        return 1;
    for (;;) {
        int fd = -1;
        if (dg_recv(up, &m, &fd) || m.cmd != DG_DELEGATE)
            return 0;
        struct dg_rec *r = &me->rec;
        r->t_recv = isob_clock_ns();
        r->off = m.off;
        r->len = m.len;
        unsigned char *map = NULL, *share = NULL;
        size_t maplen = 0;
        if (c->v == DG_PROCESSES) {
            uint64_t aoff = m.off & ~(uint64_t)(page - 1);
            maplen = (size_t)(((m.off + m.len + page - 1) & ~(uint64_t)(page - 1)) - aoff);
            map = fd >= 0 ? mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)aoff)
                          : MAP_FAILED;
            if (map == MAP_FAILED) {
                r->err = fd >= 0 ? -errno : -EBADF;
                map = NULL;
            } else {
                share = map + (m.off - aoff);
            }
        } else if (m.len <= cap) {
            share = buf;
        } else {
            r->err = -EMSGSIZE;
        }
        r->t_mapped = c->v == DG_PROCESSES ? isob_clock_ns() : r->t_recv;
        r->sum = share ? uk_sum(share, m.len, m.off / 8) : 0;
        r->t_verified = isob_clock_ns();
        if (c->cfg->sabotage == DG_SABOTAGE_KILL_HOP && k == (d + 1) / 2)
            raise(SIGKILL);
        if (k < d) {
            if (dg_pass_on(c, k, &m, share, buf, fd, down))
                return 1;
        } else {
            struct dg_msg done = {.cmd = DG_DONE};
            if (dg_send(ctl, &done, -1))
                return 1;
        }
        if (fd >= 0)
            close(fd);
        if (c->v != DG_PROCESSES)
            continue;
        int rc = dg_owner_says(ctl, share, map, maplen);
        if (rc)
            return rc < 0 ? 0 : 1;
    }
}

/* ---- a hop thread ---- */

struct dg_thread_arg {
    struct dg_chain *c;
    unsigned k;
};

static void *dg_thread_main(void *arg)
{
    struct dg_thread_arg *a = arg;
    struct dg_chain *c = a->c;
    unsigned k = a->k, d = c->d;
    uint32_t seen = 0;
    for (;;) {
        uint32_t v;
        while ((v = isob_load(&c->mail[k])) == seen && !isob_load(&c->quit))
            isob_futex_wait(&c->mail[k], seen, FUTEX_PRIVATE_FLAG);
        if (isob_load(&c->quit))
            return NULL;
        seen = v;
        struct dg_rec *r = &c->hop[k].rec;
        r->t_recv = isob_clock_ns();
        r->t_mapped = r->t_recv;
        uint64_t off = c->mail_off[k], len = c->mail_len[k];
        r->off = off;
        r->len = len;
        r->sum = uk_sum(c->owner_buf + off, len, off / 8);
        r->t_verified = isob_clock_ns();
        if (k < d) {
            int halved;
            dg_next(off, len, &c->mail_off[k + 1], &c->mail_len[k + 1], &halved);
            r->halved = halved;
            c->hop[k + 1].rec.t_sent = isob_clock_ns();
            isob_store(&c->mail[k + 1], isob_load(&c->mail[k + 1]) + 1);
            isob_futex_wake(&c->mail[k + 1], 1, FUTEX_PRIVATE_FLAG);
        } else {
            isob_store(&c->done, isob_load(&c->done) + 1);
            isob_futex_wake(&c->done, 1, FUTEX_PRIVATE_FLAG);
        }
    }
}

/* ---- the owner ---- */

/* The CPU of hop k for a placement: the owner's, alternating with the next
 * one (cross-cpu), or none. */
static int dg_hop_cpu(const struct dg_chain *c, unsigned k)
{
    if (c->pl == ISOB_PLACE_UNPINNED)
        return -1;
    if (c->pl == ISOB_PLACE_CROSS_CPU && (k % 2))
        return isob_server_cpu(ISOB_PLACE_CROSS_CPU, c->cfg->cpu);
    return c->cfg->cpu;
}

/* Wait for hop k's next message on its control socket, which must be of
 * type `want` (messages of one hop come in order, and the owner asks for
 * them in the order they are sent).  0; -EPIPE with *dead = k when its
 * socket closed (it died, or its upstream did and it left); -EPROTO for
 * another message; -ETIMEDOUT. */
static int dg_wait(struct dg_chain *c, unsigned k, uint32_t want, struct dg_msg *out, unsigned *dead)
{
    struct pollfd pf = {.fd = c->ctl[2 * k], .events = POLLIN};
    int n;
    while ((n = poll(&pf, 1, DG_WAIT_MS)) < 0 && errno == EINTR)
        ;
    if (n == 0)
        return -ETIMEDOUT;
    if (n < 0 || dg_recv(c->ctl[2 * k], out, NULL)) {
        *dead = k;
        return -EPIPE;
    }
    return out->cmd == want ? 0 : -EPROTO;
}

/* End every hop process and reap it, after a hop was seen to go (its
 * socket closed: `dead`, 0 for none).  A hop's descriptors close before it
 * becomes a zombie, and the hops after it leave on their own (end of file
 * upstream), so the hops are watched for up to DG_DEATH_WAIT_MS until one
 * has ended abnormally; then the rest are killed.  Returns how many ended
 * abnormally before that, and the first one's end in words. */
static unsigned dg_end_hops(struct dg_chain *c, unsigned dead, char *first, size_t len)
{
    unsigned died = 0;
    first[0] = 0;
    for (int waited = 0; dead && !died && waited < DG_DEATH_WAIT_MS; waited++) {
        for (unsigned k = 1; k <= c->d; k++) {
            int st;
            if (c->hop[k].pid > 0 && waitpid(c->hop[k].pid, &st, WNOHANG) == c->hop[k].pid) {
                c->hop[k].pid = 0;
                if (WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0)) {
                    if (!died++) {
                        char why[128];
                        isob_server_describe(st, why, sizeof why);
                        snprintf(first, len, "hop %u %s", k, why);
                    }
                }
            }
        }
        if (!died) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
    }
    for (unsigned k = 1; k <= c->d; k++) {
        if (c->hop[k].pid > 0) {
            kill(c->hop[k].pid, SIGKILL);
            waitpid(c->hop[k].pid, NULL, 0);
        }
        c->hop[k].pid = 0;
    }
    return died;
}

static void dg_close_all(struct dg_chain *c)
{
    for (unsigned k = 0; k <= c->d; k++) {
        for (int e = 0; e < 2; e++) {
            if (c->link && c->link[2 * k + e] >= 0)
                close(c->link[2 * k + e]);
            if (c->ctl && c->ctl[2 * k + e] >= 0)
                close(c->ctl[2 * k + e]);
            if (c->link)
                c->link[2 * k + e] = -1;
            if (c->ctl)
                c->ctl[2 * k + e] = -1;
        }
    }
}

/* Start the hops.  0, or -errno with why. */
static int dg_start(struct dg_chain *c, char *why, size_t len)
{
    const unsigned d = c->d;
    if (c->v == DG_THREADS) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, DG_THREAD_STACK);
        struct dg_thread_arg *args = c->args = calloc(d + 1, sizeof *args);
        c->th = calloc(d + 1, sizeof *c->th);
        if (!args || !c->th) {
            pthread_attr_destroy(&attr);
            snprintf(why, len, "out of memory");
            return -ENOMEM;
        }
        c->started = 0;
        for (unsigned k = 1; k <= d; k++) {
            args[k] = (struct dg_thread_arg){c, k};
            int rc = pthread_create(&c->th[k], &attr, dg_thread_main, &args[k]);
            if (rc) {
                snprintf(why, len, "thread %u of %u: %s", k, d, isob_strerror(-rc));
                pthread_attr_destroy(&attr);
                return -rc;
            }
            int cpu = dg_hop_cpu(c, k);
            if (cpu >= 0) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(cpu, &set);
                pthread_setaffinity_np(c->th[k], sizeof set, &set);
            }
            c->started = (int)k;
        }
        pthread_attr_destroy(&attr);
        return 0;
    }
    for (unsigned k = 0; k <= d; k++) {
        int type = SOCK_SEQPACKET | SOCK_CLOEXEC;
        if ((k < d && socketpair(AF_UNIX, type, 0, &c->link[2 * k]) != 0) ||
            (k >= 1 && socketpair(AF_UNIX, type, 0, &c->ctl[2 * k]) != 0)) {
            int rc = -errno;
            snprintf(why, len, "socketpair for hop %u: %s", k, isob_strerror(rc));
            return rc;
        }
    }
    for (unsigned k = 1; k <= d; k++) {
        pid_t pid = uk_fork(dg_hop_cpu(c, k));
        if (pid < 0) {
            snprintf(why, len, "fork of hop %u of %u: %s", k, d, isob_strerror(pid));
            return pid;
        }
        if (pid == 0)
            isob_exit_raw(dg_hop_main(c, k));
        c->hop[k].pid = pid;
        c->started = (int)k;
    }
    /* The owner keeps the head of the chain and its end of every control socket. */
    for (unsigned k = 0; k <= d; k++) {
        if (k >= 1 && c->link[2 * k - 1] >= 0) {
            close(c->link[2 * k - 1]);
            c->link[2 * k - 1] = -1;
        }
        if (k >= 1 && k < d) {
            close(c->link[2 * k]);
            c->link[2 * k] = -1;
        }
        if (k >= 1) {
            close(c->ctl[2 * k + 1]);
            c->ctl[2 * k + 1] = -1;
        }
    }
    for (unsigned k = 1; k <= d; k++) {
        struct dg_msg m;
        unsigned dead = 0;
        int rc = dg_wait(c, k, DG_READY, &m, &dead);
        if (rc) {
            snprintf(why, len, "hop %u did not start: %s", dead ? dead : k, isob_strerror(rc));
            return rc;
        }
    }
    return 0;
}

static void dg_stop(struct dg_chain *c)
{
    if (c->v == DG_THREADS) {
        isob_store(&c->quit, 1);
        for (int k = 1; k <= c->started; k++) {
            isob_futex_wake(&c->mail[k], 1, FUTEX_PRIVATE_FLAG);
        }
        for (int k = 1; k <= c->started; k++)
            pthread_join(c->th[k], NULL);
        c->started = 0;
        return;
    }
    /* End of file on the head of the chain and on every control socket:
     * each hop leaves; one that does not is killed. */
    dg_close_all(c);
    for (unsigned k = 1; k <= c->d; k++) {
        if (c->hop[k].pid > 0)
            uk_reap(c->hop[k].pid);
        c->hop[k].pid = 0;
    }
    c->started = 0;
}

/* The region of one repetition for processes: a fresh memfd filled with the
 * pattern; the owner's checksum of every hop's share goes into its record. */
static int dg_prepare(struct dg_chain *c)
{
    const unsigned d = c->d;
    unsigned char *data = c->owner_buf;
    size_t maplen = 0;
    if (c->v == DG_PROCESSES) {
        c->memfd = memfd_create("isob-delegate", MFD_CLOEXEC);
        if (c->memfd < 0)
            return -errno;
        if (ftruncate(c->memfd, (off_t)c->region) != 0)
            return -errno;
        maplen = c->region;
        data = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, c->memfd, 0);
        if (data == MAP_FAILED)
            return -errno;
        uk_fill(data, c->region, DG_SEED, 0);
    }
    uint64_t off = 0, len = c->region;
    for (unsigned k = 1; k <= d; k++) {
        memset(&c->hop[k].rec, 0, sizeof c->hop[k].rec);
        c->hop[k].rec.want = uk_sum(data + off, len, off / 8);
        if (k < d) {
            int halved;
            dg_next(off, len, &off, &len, &halved);
        }
    }
    /* Broken on purpose: a byte of the deepest share changes after the
     * owner summed it, so every hop (their shares all hold it) must see it. */
    if (c->cfg->sabotage == DG_SABOTAGE_CORRUPT)
        data[off + len / 2] ^= 0x40;
    if (c->v == DG_PROCESSES)
        munmap(data, maplen);
    return 0;
}

/* One delegation down the chain.  0; -EPIPE with *dead, -ETIMEDOUT. */
static int dg_delegate(struct dg_chain *c, unsigned *dead)
{
    if (c->v == DG_THREADS) {
        uint32_t done = isob_load(&c->done);
        c->mail_off[1] = 0;
        c->mail_len[1] = c->region;
        c->hop[1].rec.t_sent = isob_clock_ns();
        isob_store(&c->mail[1], isob_load(&c->mail[1]) + 1);
        isob_futex_wake(&c->mail[1], 1, FUTEX_PRIVATE_FLAG);
        while (isob_load(&c->done) == done)
            isob_futex_wait(&c->done, done, FUTEX_PRIVATE_FLAG);
        return 0;
    }
    struct dg_msg m = {.cmd = DG_DELEGATE, .off = 0, .len = c->region};
    c->hop[1].rec.t_sent = isob_clock_ns();
    if (c->v == DG_COPIES) {
        struct iovec local = {.iov_base = c->owner_buf, .iov_len = c->region};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)c->hop[1].addr, .iov_len = c->region};
        ssize_t w = process_vm_writev(c->hop[1].pid, &local, 1, &remote, 1, 0);
        if (w != (ssize_t)c->region)
            c->hop[1].rec.err = w < 0 ? -errno : -EIO;
    }
    if (dg_send(c->link[0], &m, c->v == DG_PROCESSES ? c->memfd : -1)) {
        *dead = 1;
        return -EPIPE;
    }
    return dg_wait(c, c->d, DG_DONE, &m, dead);
}

/* Revoke every holder's share of this repetition's memfd.  *ns gets the
 * latency, *faults how many holders met `expect` when they touched their
 * share afterwards.  0; -EPIPE with *dead; -ETIMEDOUT. */
static int dg_revoke(struct dg_chain *c, int truncate_it, uint64_t *ns, unsigned *faults,
                     int *expect, unsigned *dead)
{
    const unsigned d = c->d;
    struct dg_msg m;
    *faults = 0;
    int rc = 0;
    if (truncate_it) {
        *expect = SIGBUS;
        /* Broken on purpose: a "truncation" that keeps every page. */
        off_t to = c->cfg->sabotage == DG_SABOTAGE_NO_REVOKE ? (off_t)c->region : 0;
        uint64_t t0 = isob_clock_ns();
        int tr = ftruncate(c->memfd, to);
        *ns = isob_clock_ns() - t0;
        if (tr != 0)
            return -errno;
        struct dg_msg probe = {.cmd = DG_PROBE};
        for (unsigned k = 1; k <= d; k++)
            if (dg_send(c->ctl[2 * k], &probe, -1)) {
                *dead = k;
                return -EPIPE;
            }
        for (unsigned k = 1; k <= d && rc == 0; k++) {
            rc = dg_wait(c, k, DG_ACK, &m, dead);
            *faults += rc == 0 && m.arg == SIGBUS;
        }
        return rc;
    }
    *expect = SIGSEGV;
    struct dg_msg un = {.cmd = DG_UNMAP};
    uint64_t t0 = isob_clock_ns();
    for (unsigned k = 1; k <= d; k++)
        if (dg_send(c->ctl[2 * k], &un, -1)) {
            *dead = k;
            return -EPIPE;
        }
    for (unsigned k = 1; k <= d && rc == 0; k++)
        rc = dg_wait(c, k, DG_ACK, &m, dead);
    *ns = isob_clock_ns() - t0;
    for (unsigned k = 1; k <= d && rc == 0; k++) {
        rc = dg_wait(c, k, DG_PROBED, &m, dead);
        *faults += rc == 0 && m.arg == SIGSEGV;
    }
    return rc;
}

/* ---- results ---- */

struct dg_out {
    struct isob_samples hop, e2e, revoke[2];
    uint64_t *transfer, *map, *verify; /* [rep * d + k - 1] */
    size_t reps_done;
    uint64_t checksums_ok, bytes_per_rep, halvings;
    unsigned faults[2], holders[2];    /* per revocation kind, summed over repetitions */
    char fail[640];
};

static double dg_median_of(const uint64_t *v, size_t stride, size_t off, size_t n)
{
    uint64_t *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!tmp)
        return 0;
    for (size_t i = 0; i < n; i++)
        tmp[i] = v[i * stride + off];
    double m = isob_median_u64(tmp, n);
    free(tmp);
    return m;
}

static void dg_emit(struct dg_chain *c, struct isob_bench_ctx *ctx, struct dg_out *o, const char *metric,
                    int revoke_kind, struct isob_samples *s)
{
    struct uk_params pj;
    char *params = NULL;
    const int ok = !o->fail[0] && s && s->n;
    if (uk_params_begin(&pj) == 0) {
        struct isob_jw *w = &pj.w;
        isob_jw_str(w, "variant", dg_variant_names[c->v]);
        isob_jw_int(w, "region", (long long)c->region);
        isob_jw_int(w, "depth", (long long)c->d);
        isob_jw_str(w, "placement", isob_placement_name(c->pl));
        isob_jw_str(w, "metric", metric);
        if (revoke_kind >= 0)
            isob_jw_str(w, "revoke", revoke_kind ? "truncate" : "unmap");
        isob_jw_str(w, "isolation", c->v == DG_THREADS ? "none: one address space, a share is a pointer"
                                    : c->v == DG_PROCESSES ? "separate processes sharing the memfd's pages"
                                    : "separate processes, each with its own copy");
        isob_jw_obj(w, "work");
        isob_jw_int(w, "repetitions", (long long)o->reps_done);
        if (revoke_kind < 0) {
            isob_jw_int(w, "checksums_verified", (long long)o->checksums_ok);
            isob_jw_int(w, "bytes_verified_per_repetition", (long long)o->bytes_per_rep);
            isob_jw_int(w, "shares_halved_per_repetition", (long long)o->halvings);
        }
        if (strcmp(metric, "hop") == 0 && o->reps_done && c->d <= DG_PER_HOP_MAX) {
            static const char *const part[3] = {"transfer_median_ns", "map_median_ns", "verify_median_ns"};
            uint64_t *arr[3] = {o->transfer, o->map, o->verify};
            for (int p = 0; p < 3; p++) {
                isob_jw_arr(w, part[p]);
                for (unsigned k = 1; k <= c->d; k++)
                    isob_jw_double(w, NULL, dg_median_of(arr[p], c->d, k - 1, o->reps_done));
                isob_jw_close(w, ']');
            }
        }
        if (revoke_kind >= 0) {
            isob_jw_int(w, "holders_probed", (long long)o->holders[revoke_kind]);
            isob_jw_int(w, "holders_faulted", (long long)o->faults[revoke_kind]);
            isob_jw_str(w, "fault_expected", revoke_kind ? "SIGBUS" : "SIGSEGV");
        }
        isob_jw_close(w, '}');
        if (ok) {
            double p5, p50, p95;
            uk_percentiles(s, &p5, &p50, &p95);
            uk_jw_spread(w, p5, p50, p95);
        }
        params = uk_params_end(&pj);
    }
    isob_emit_result(ctx, "delegate", params ? params : "{}", ok ? s : NULL, NULL,
                     ok ? "ok" : "failed", ok ? NULL : (o->fail[0] ? o->fail : "no repetition completed"),
                     "ns");
    free(params);
}

static void dg_fail(struct dg_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void dg_fail(struct dg_out *o, const char *fmt, ...)
{
    if (o->fail[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->fail, sizeof o->fail, fmt, ap);
    va_end(ap);
}

/* Check and keep one repetition's records; 0, or -EBADMSG with o->fail set. */
static int dg_collect(struct dg_chain *c, struct dg_out *o)
{
    const unsigned d = c->d;
    unsigned bad = 0, first = 0;
    uint64_t bytes = 0, halvings = 0;
    for (unsigned k = 1; k <= d; k++) {
        const struct dg_rec *r = &c->hop[k].rec;
        if (r->err || r->sum != r->want) {
            if (!bad++)
                first = k;
            continue;
        }
        bytes += r->len;
        halvings += r->halved;
        size_t i = o->reps_done * d + (k - 1);
        o->transfer[i] = r->t_recv - r->t_sent;
        o->map[i] = r->t_mapped - r->t_recv;
        o->verify[i] = r->t_verified - r->t_mapped;
        if (o->hop.n < o->hop.cap)
            o->hop.v[o->hop.n++] = r->t_mapped - r->t_sent;
    }
    if (bad) {
        const struct dg_rec *r = &c->hop[first].rec;
        if (r->err)
            dg_fail(o, "hop %u of %u could not take its share [%llu, +%llu): %s (%u hops failed)", first,
                    d, (unsigned long long)r->off, (unsigned long long)r->len, isob_strerror(r->err), bad);
        else
            dg_fail(o, "checksum mismatch at %u of %u hops; first hop %u, share [%llu, +%llu): "
                    "sum 0x%llx, the owner's 0x%llx", bad, d, first, (unsigned long long)r->off,
                    (unsigned long long)r->len, (unsigned long long)r->sum, (unsigned long long)r->want);
        return -EBADMSG;
    }
    o->checksums_ok += d;
    o->bytes_per_rep = bytes;
    o->halvings = halvings;
    o->e2e.v[o->e2e.n++] = c->hop[d].rec.t_verified - c->hop[1].rec.t_sent;
    o->reps_done++;
    return 0;
}

/* Repetition rep of a running chain: the region handed down, checked and
 * (processes) revoked, its figures into o.  0, or -errno after the
 * failure was put into o in words (the hops ended where one went). */
static int dg_repetition(struct dg_chain *c, struct dg_out *o, size_t rep)
{
    const enum dg_variant v = c->v;
    const unsigned depth = c->d;
    int rc;
    if (v == DG_PROCESSES || rep == 0) {
        rc = dg_prepare(c);
        if (rc) {
            dg_fail(o, "preparing the region: %s", isob_strerror(rc));
            return rc;
        }
    } else {
        for (unsigned k = 1; k <= depth; k++) {
            uint64_t want = c->hop[k].rec.want;
            memset(&c->hop[k].rec, 0, sizeof c->hop[k].rec);
            c->hop[k].rec.want = want;
        }
    }
    unsigned dead = 0;
    rc = dg_delegate(c, &dead);
    if (rc == 0)
        rc = dg_collect(c, o);
    if (rc == 0 && v == DG_PROCESSES) {
        int truncate_it = rep % 2 == 0, expect;
        uint64_t ns = 0;
        unsigned faults = 0;
        rc = dg_revoke(c, truncate_it, &ns, &faults, &expect, &dead);
        if (rc == 0) {
            o->faults[truncate_it] += faults;
            o->holders[truncate_it] += depth;
            struct isob_samples *s = &o->revoke[truncate_it];
            s->v[s->n++] = ns;
            if (faults != depth) {
                dg_fail(o, "after %s, %u of %u holders could still read their share (no %s)",
                        truncate_it ? "truncation" : "unmapping", depth - faults, depth,
                        expect == SIGBUS ? "SIGBUS" : "SIGSEGV");
                rc = -EBADMSG;
            }
        }
    }
    /* Copies and threads have nothing to revoke: copies are their
     * holders' own, threads share everything. */
    if (c->memfd >= 0) {
        close(c->memfd);
        c->memfd = -1;
    }
    if (rc == -EPROTO)
        dg_fail(o, "a hop answered out of turn (protocol error)");
    if (rc == -EPIPE || rc == -ETIMEDOUT) {
        char first[160];
        unsigned died = v == DG_THREADS ? 0 : dg_end_hops(c, rc == -EPIPE ? dead : 0, first,
                                                         sizeof first);
        if (died)
            dg_fail(o, "%u of %u hops died (%s); the other %u were ended", died, depth, first,
                    depth - died);
        else if (rc == -EPIPE)
            dg_fail(o, "hop %u of %u left the chain (its socket closed, its exit normal); "
                    "the hops were ended", dead, depth);
        else
            dg_fail(o, "no answer from the chain in %d ms; its %u hops were ended", DG_WAIT_MS,
                    depth);
    }
    if (rc && !o->fail[0])
        dg_fail(o, "repetition %zu: %s", rep + 1, isob_strerror(rc));
    return rc;
}

/* Everything dg_config_run allocated for the chain c and its figures o. */
static void dg_free(struct dg_chain *c, struct dg_out *o)
{
    if (c->memfd >= 0)
        close(c->memfd);
    isob_samples_free(&o->hop);
    isob_samples_free(&o->e2e);
    isob_samples_free(&o->revoke[0]);
    isob_samples_free(&o->revoke[1]);
    free(o->transfer);
    free(o->map);
    free(o->verify);
    if (c->v == DG_THREADS)
        free(c->hop);
    else if (c->hop)
        isob_unmap(c->hop, c->hop_bytes);
    if (c->owner_buf)
        isob_unmap(c->owner_buf, c->region);
    free(c->link);
    free(c->ctl);
    free(c->mail);
    free(c->mail_off);
    free(c->mail_len);
    free(c->th);
    free(c->args);
}

void dg_config_run(const struct dg_config *cfg, struct isob_bench_ctx *ctx, enum dg_variant v,
                   uint64_t region, unsigned depth, enum isob_placement pl)
{
    struct dg_chain c = {.cfg = cfg, .v = v, .region = region, .d = depth, .pl = pl, .memfd = -1};
    struct dg_out o = {0};
    const size_t reps = cfg->reps;
    char why[512] = "";
    int rc = 0;
    if (isob_samples_alloc(&o.hop, reps * depth, 1) || isob_samples_alloc(&o.e2e, reps, 1) ||
        isob_samples_alloc(&o.revoke[0], reps, 1) || isob_samples_alloc(&o.revoke[1], reps, 1)) {
        dg_fail(&o, "out of memory");
        goto out;
    }
    o.transfer = calloc(reps * depth, sizeof *o.transfer);
    o.map = calloc(reps * depth, sizeof *o.map);
    o.verify = calloc(reps * depth, sizeof *o.verify);
    c.hop_bytes = (depth + 1) * sizeof *c.hop;
    c.hop = v == DG_THREADS ? calloc(depth + 1, sizeof *c.hop) : isob_map(c.hop_bytes, 1);
    c.link = malloc(2 * (depth + 1) * sizeof *c.link);
    c.ctl = malloc(2 * (depth + 1) * sizeof *c.ctl);
    c.mail = calloc(depth + 2, sizeof *c.mail);
    c.mail_off = calloc(depth + 2, sizeof *c.mail_off);
    c.mail_len = calloc(depth + 2, sizeof *c.mail_len);
    if (!o.transfer || !o.map || !o.verify || !c.hop || !c.link || !c.ctl || !c.mail || !c.mail_off ||
        !c.mail_len) {
        dg_fail(&o, "out of memory");
        goto out;
    }
    for (unsigned i = 0; i < 2 * (depth + 1); i++)
        c.link[i] = c.ctl[i] = -1;
    if (v != DG_PROCESSES) {
        /* The owner's region: filled once, since nothing revokes it. */
        c.owner_buf = isob_map(region, 0);
        if (!c.owner_buf) {
            dg_fail(&o, "mapping the %llu-byte region: out of memory", (unsigned long long)region);
            goto out;
        }
        uk_fill(c.owner_buf, region, DG_SEED, 0);
    }
    rc = isob_place_self(pl == ISOB_PLACE_UNPINNED ? pl : ISOB_PLACE_SAME_CPU, cfg->cpu, why, sizeof why);
    if (rc == 0)
        rc = dg_start(&c, why, sizeof why);
    if (rc) {
        dg_fail(&o, "%s", why);
        goto stop;
    }
    for (size_t rep = 0; rep < reps; rep++)
        if (dg_repetition(&c, &o, rep) != 0)
            break;
stop:
    dg_stop(&c);
out:
    dg_emit(&c, ctx, &o, "hop", -1, &o.hop);
    dg_emit(&c, ctx, &o, "end-to-end", -1, &o.e2e);
    if (v == DG_PROCESSES) {
        dg_emit(&c, ctx, &o, "revoke", 1, &o.revoke[1]);
        dg_emit(&c, ctx, &o, "revoke", 0, &o.revoke[0]);
    }
    dg_free(&c, &o);
}

/* ---- the benchmark ---- */

int dg_parse(const struct isob_bench_opts *o, struct dg_config *cfg, char *why, size_t len)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->variants = (1u << DG__COUNT) - 1;
    if (o->variants && uk_list_names("delegate: --variant", o->variants, dg_variant_names,
                                     &cfg->variants, why, len))
        return -EINVAL;
    if (o->nsizes) {
        for (size_t i = 0; i < o->nsizes && i < UK_MAX_LIST; i++) {
            if (o->sizes[i] > DG_MAX_REGION) {
                snprintf(why, len, "delegate: --sizes: %zu bytes is above the largest region, 1G",
                         o->sizes[i]);
                return -EINVAL;
            }
            cfg->sizes[cfg->nsizes++] = o->sizes[i];
        }
    } else {
        memcpy(cfg->sizes, dg_default_sizes, sizeof dg_default_sizes);
        cfg->nsizes = sizeof dg_default_sizes / sizeof dg_default_sizes[0];
    }
    if (uk_list_or("delegate: --depth", o->depths, dg_default_depths,
                   sizeof dg_default_depths / sizeof dg_default_depths[0], 1, DG_MAX_DEPTH,
                   cfg->depths, &cfg->ndepths, why, len))
        return -EINVAL;
    /* Refused up front: a chain the machine cannot hold. */
    char what[64];
    int rc = uk_check_most_tasks("delegate: --depth", cfg->depths, cfg->ndepths, what, sizeof what,
                                 why, len);
    if (rc == 0 && (cfg->variants & ~(1u << DG_THREADS)))
        rc = uk_check_fds(what, 4 * (uk_list_max(cfg->depths, cfg->ndepths) + 1), why, len);
    return rc ? -EINVAL : 0;
}

static int dg_check(const struct isob_bench_opts *o, char *why, size_t len)
{
    struct dg_config cfg;
    return dg_parse(o, &cfg, why, len);
}

static void dg_under(struct uk_confined *u, void *arg)
{
    const struct dg_config *cfg = arg;
    /* Times are CLOCK_MONOTONIC_RAW readings in ns, compared across
     * processes: the results say so (counter "clock", unit "ns"). */
    struct isob_counter clk;
    struct isob_bench_ctx c2;
    if (uk_clock_ctx(u, &clk, &c2) != 0) {
        isob_emit_result(u->ctx, "delegate", "{}", NULL, NULL, u->skip ? "skipped" : "failed",
                         u->skip ? u->skip : "the clock counter could not be opened", NULL);
        return;
    }
    for (unsigned v = 0; v < DG__COUNT; v++) {
        if (!(cfg->variants & (1u << v)))
            continue;
        for (unsigned pl = 0; pl < 3; pl++) {
            if (!(cfg->placements & (1u << pl)))
                continue;
            if (pl == ISOB_PLACE_CROSS_CPU && isob_server_cpu(ISOB_PLACE_CROSS_CPU, cfg->cpu) < 0) {
                char params[160];
                snprintf(params, sizeof params, "{\"variant\":\"%s\",\"placement\":\"cross-cpu\"}",
                         dg_variant_names[v]);
                isob_emit_result(&c2, "delegate", params, NULL, NULL, "skipped",
                                 "cross-cpu placement needs two CPUs and a pinned owner", "ns");
                continue;
            }
            for (unsigned s = 0; s < cfg->nsizes; s++)
                for (unsigned d = 0; d < cfg->ndepths; d++)
                    dg_config_run(cfg, &c2, (enum dg_variant)v, cfg->sizes[s], (unsigned)cfg->depths[d],
                                  (enum isob_placement)pl);
        }
    }
    u->ctx->failed |= c2.failed;
    isob_counter_close(&clk);
}

/* The calls of the measuring process and its hops (none filters nothing;
 * the list documents them). */
static const int dg_calls[] = {SYS_sendmsg, SYS_recvmsg, SYS_mmap, SYS_munmap, SYS_ftruncate,
                               SYS_memfd_create, SYS_process_vm_writev, SYS_futex, SYS_poll};

static int dg_run(struct isob_bench_ctx *ctx)
{
    struct dg_config cfg;
    char why[300];
    if (dg_parse(&ctx->opts, &cfg, why, sizeof why))
        return -EINVAL;
    cfg.cpu = ctx->opts.client_cpu;
    /* One placement unless asked: every hop on the owner's CPU. */
    cfg.placements = ctx->opts.placement_given ? ctx->opts.placements : 1u << ISOB_PLACE_SAME_CPU;
    size_t reps = ctx->opts.quick ? DG_REPS_QUICK : DG_REPS;
    cfg.reps = ctx->opts.n < reps ? ctx->opts.n : reps;
    /* Revocation alternates truncation and unmapping: each needs one. */
    if (cfg.reps < 2)
        cfg.reps = 2;
    struct isob_confine_req req = {.calls = dg_calls, .ncalls = sizeof dg_calls / sizeof dg_calls[0],
                                   .helper_cpu = -1};
    int rc = uk_run_confined(ctx, "delegate", dg_none(), &req,
                             ctx->opts.quick ? DG_CHILD_TIMEOUT_S_QUICK : DG_CHILD_TIMEOUT_S, dg_under, &cfg);
    ctx->skipped = rc == 4;
    return 0;
}

static const struct uk_protect *dg_none(void)
{
    static struct uk_protect none;
    if (!none.conf) {
        snprintf(none.name, sizeof none.name, "none");
        none.conf = isob_confine_find("none");
    }
    return &none;
}

static const struct isob_bench_option dg_options[] = {
    {"--sizes", "region sizes, multiples of 64 B, up to 1G", "4K,1M,64M", "the region the owner delegates"},
    {"--depth", "chain depths, 1 to 4096 (pid and descriptor limits checked)", "1,2,4,8,16,32",
     "hops the region is handed down"},
    {"--variant", "threads,processes,copies", "all", "what a share is: a pointer, a memfd, a copy"},
    {NULL, NULL, NULL, NULL},
};

const struct isob_bench isob_bench_delegate = {
    .name = "delegate",
    .summary = "memory handed down a chain of threads or processes (pointer, memfd, copy), each "
               "hop checksumming its half; revocation by truncation or unmapping",
    .needs_mechanism = 0,
    .run = dg_run,
    .check = dg_check,
    .options = dg_options,
};
