/* pingpong: the round trip between two processes over one IPC primitive,
 * with no compartment around it: the floor the process mechanisms are
 * held to, and the microkernel IPC benchmark (docs/microkernel.md).  The
 * matrix:
 *
 *   primitive   futex      robust futex handoff, message in shared memory
 *               pipe       a pipe each way, message through the pipes
 *               socket     an AF_UNIX stream socketpair, message through it
 *               socket-fd  the same, and every message carries a descriptor
 *                          (SCM_RIGHTS: a capability transferred); each side
 *                          checks that the one it received names the file
 *                          sent (same device and inode), then closes it
 *               eventfd    an eventfd each way as the doorbell, message in
 *                          shared memory
 *               spin       both sides spin on a shared word (then yield),
 *                          message in shared memory
 *   placement   same-cpu and cross-cpu (never averaged together)
 *   payload     0, 64, 4096 bytes after an 8-byte sequence stamp
 *   protect     none, seccomp, userns, landlock: both endpoints confined
 *               through src/confine, each verified in force
 *
 * One round trip: the client puts its message (stamp and payload) into
 * the channel, the server copies it into its reply, the client takes the
 * reply out.  Each protection runs in a measuring process of its own that
 * confines itself; every server it forks inherits the confinement and
 * verifies it again before it serves.  A cell whose endpoint is not
 * verified is skipped with the reason, never measured under the name.
 *
 * Checks: every per-iteration reply is checksummed in full (stamp and
 * payload) outside the measured region; every batched reply's stamp is
 * compared inside it, the last one checksummed; the server counts what it
 * answered, which must equal what the client sent; with socket-fd both
 * sides count the descriptors that named the file. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isobench/futex.h"
#include "isobench/mechanism.h"
#include "isobench/server.h"
#include "pingpong.h"

/* The server's heap: it serves nothing from it, but every server has one. */
#define PP_HEAP_BYTES (4096 * 2)
/* Pause-spins before a spinning waiter yields the CPU (as process-spin):
 * on one CPU the other side runs only once the waiter gives way. */
#define PP_SPINS_BEFORE_YIELD 256u
/* What the client's doorbell eventfd reads when the server died: no
 * answer ever counts to it (the server writes 1 per reply). */
#define PP_EVENTFD_DEAD 0x100000000ull
/* How long a measuring process may take before the parent ends it. */
#define PP_CHILD_TIMEOUT_S 600
#define PP_CHILD_TIMEOUT_S_QUICK 170
/* The seed of every message's payload pattern. */
#define PP_SEED 0x1b0b5eedull

const char *const pp_prim_names[PP__COUNT + 1] = {"futex", "pipe", "socket", "socket-fd",
                                                   "eventfd", "spin", NULL};
static const uint64_t pp_default_payloads[] = {0, 64, 4096};

/* The page the client and the server share: the handoff word, what the
 * server counted and verified, then the request and reply slots. */
struct pp_shared {
    struct isob_phs hs __attribute__((aligned(64)));
    uint32_t quit;
    uint64_t echoed;            /* messages the server answered */
    uint64_t fds_ok, fds_bad;   /* socket-fd: descriptors that did and did not name the file */
    uint64_t dev, ino;          /* socket-fd: the file every descriptor must name */
    int32_t verify_rc;          /* the server's verification of the protection */
    char verify_why[384];
    char evidence[ISOB_CONFINE_EVIDENCE_MAX];
};

#define PP_SLOT (((PP_HDR + PP_MAX_PAYLOAD) + 63) & ~(size_t)63)
#define PP_REQ_OFF ((sizeof(struct pp_shared) + 63) & ~(size_t)63)
#define PP_SHARED_BYTES (PP_REQ_OFF + 2 * PP_SLOT)

struct pp {
    enum pp_prim prim;
    size_t len;                 /* PP_HDR + payload */
    int sabotage;
    struct pp_shared *sh;
    unsigned char *req, *rep;   /* slots in sh */
    unsigned char *sbuf;        /* the server's own buffer (its copy after the fork) */
    uint32_t tid;               /* the handoff word's idle value */
    int a[2], b[2];             /* pipe: a to the server, b back; socket: a; eventfd: a[0] to, b[0] back */
    int file;                   /* socket-fd: the file passed in every message */
    struct isob_confine_state *cs; /* verified again by the server */
    struct isob_server server;
    uint64_t fds_ok, fds_bad;   /* socket-fd: the client's count */
};

/* The client's doorbell, for the SIGCHLD handler: a dead server rings it
 * with PP_EVENTFD_DEAD, so that a client asleep on it (or about to be)
 * wakes and sees the death. */
static volatile int pp_wake_fd = -1;

static void pp_sigchld(int sig)
{
    (void)sig;
    int saved = errno;
    int fd = pp_wake_fd;
    if (fd >= 0) {
        uint64_t v = PP_EVENTFD_DEAD;
        ssize_t w = write(fd, &v, sizeof v);
        (void)w;
    }
    errno = saved;
}

/* ---- moving bytes ---- */

static inline __attribute__((always_inline)) int pp_write_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            return -EPIPE;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static inline __attribute__((always_inline)) int pp_read_all(int fd, unsigned char *p, size_t n)
{
    while (n) {
        ssize_t k = read(fd, p, n);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            return -EPIPE;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static inline __attribute__((always_inline)) int pp_send_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            return -EPIPE;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static inline __attribute__((always_inline)) int pp_recv_all(int fd, unsigned char *p, size_t n)
{
    while (n) {
        ssize_t k = recv(fd, p, n, MSG_WAITALL);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            return -EPIPE;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Send n bytes with descriptor fd attached to the first of them. */
static inline __attribute__((always_inline)) int pp_send_fd(int sock, const unsigned char *p, size_t n, int fd)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = (void *)p, .iov_len = n};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                        .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    ssize_t k;
    while ((k = sendmsg(sock, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (k <= 0)
        return -EPIPE;
    return (size_t)k == n ? 0 : pp_send_all(sock, p + k, n - (size_t)k);
}

/* Receive n bytes and the descriptor attached to them: *fd is the
 * descriptor, or -1 when none came.  0, or -EPIPE when the peer is gone. */
static inline __attribute__((always_inline)) int pp_recv_fd(int sock, unsigned char *p, size_t n, int *fd)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = p, .iov_len = n};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                        .msg_controllen = sizeof ctl.buf};
    *fd = -1;
    ssize_t k;
    while ((k = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    if (k <= 0)
        return -EPIPE;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(fd, CMSG_DATA(c), sizeof *fd);
    return (size_t)k == n ? 0 : pp_recv_all(sock, p + k, n - (size_t)k);
}

/* 1 when fd names the file whose device and inode are given. */
static inline __attribute__((always_inline)) int pp_same_file(int fd, uint64_t dev, uint64_t ino)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_dev == dev && (uint64_t)st.st_ino == ino;
}

static inline void pp_backoff(unsigned *spins)
{
    if (*spins < PP_SPINS_BEFORE_YIELD) {
        (*spins)++;
        isob_cpu_relax();
    } else {
        sched_yield();
    }
}

/* ---- the server ---- */

/* The server's answer in shared memory: the request copied into the reply. */
static inline void pp_echo_shared(struct pp *p)
{
    memcpy(p->rep, p->req, p->len);
    if (p->sabotage == PP_SABOTAGE_CORRUPT)
        p->rep[p->len / 2] ^= 1;
    p->sh->echoed++;
}

static int pp_setup(void *arg, struct isob_trusted *t)
{
    (void)t;
    struct pp *p = arg;
    /* The protection must hold here too: the server is the other endpoint. */
    char why[384] = "";
    int rc = p->cs ? isob_confine_verify(p->cs, why, sizeof why) : 0;
    if (p->cs)
        snprintf(p->sh->evidence, sizeof p->sh->evidence, "%s", p->cs->evidence);
    p->sh->verify_rc = rc;
    if (rc) {
        snprintf(p->sh->verify_why, sizeof p->sh->verify_why, "%s", why);
        return -EPERM;
    }
    return (p->prim == PP_FUTEX || p->prim == PP_SPIN) ? isob_phs_serve_init(&p->sh->hs, &p->tid) : 0;
}

static void pp_serve(void *arg, struct isob_trusted *t)
{
    (void)t;
    struct pp *p = arg;
    struct pp_shared *sh = p->sh;
    uint32_t *w = &sh->hs.word, tid = p->tid;
    switch (p->prim) {
    case PP_FUTEX:
        for (;;) {
            isob_phs_wait(w, tid);
            if (sh->quit)
                return;
            pp_echo_shared(p);
            isob_phs_reply(w, tid);
        }
    case PP_SPIN:
        for (;;) {
            unsigned spins = 0;
            while (isob_load(w) == tid)
                pp_backoff(&spins);
            if (sh->quit)
                return;
            pp_echo_shared(p);
            isob_store(w, tid);
        }
    case PP_EVENTFD:
        for (;;) {
            uint64_t v;
            if (read(p->a[0], &v, sizeof v) != (ssize_t)sizeof v || sh->quit)
                return;
            pp_echo_shared(p);
            v = 1;
            if (write(p->b[0], &v, sizeof v) != (ssize_t)sizeof v)
                return;
        }
    case PP_PIPE:
        for (;;) {
            if (pp_read_all(p->a[0], p->sbuf, p->len))
                return;
            if (p->sabotage == PP_SABOTAGE_CORRUPT)
                p->sbuf[p->len / 2] ^= 1;
            sh->echoed++;
            if (pp_write_all(p->b[1], p->sbuf, p->len))
                return;
        }
    case PP_SOCKET:
        for (;;) {
            if (pp_recv_all(p->a[1], p->sbuf, p->len))
                return;
            if (p->sabotage == PP_SABOTAGE_CORRUPT)
                p->sbuf[p->len / 2] ^= 1;
            sh->echoed++;
            if (pp_send_all(p->a[1], p->sbuf, p->len))
                return;
        }
    case PP_SOCKET_FD:
        for (;;) {
            int fd;
            if (pp_recv_fd(p->a[1], p->sbuf, p->len, &fd))
                return;
            if (pp_same_file(fd, sh->dev, sh->ino))
                sh->fds_ok++;
            else
                sh->fds_bad++;
            if (p->sabotage == PP_SABOTAGE_CORRUPT)
                p->sbuf[p->len / 2] ^= 1;
            sh->echoed++;
            /* Broken on purpose: the server hands back a capability to
             * something else (its own socket) instead of the one it got. */
            int back = p->sabotage == PP_SABOTAGE_WRONG_FD ? p->a[1] : fd;
            int rc = back >= 0 ? pp_send_fd(p->a[1], p->sbuf, p->len, back)
                               : pp_send_all(p->a[1], p->sbuf, p->len);
            if (fd >= 0)
                close(fd);
            if (rc)
                return;
        }
    default:
        return;
    }
}

static void pp_close(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Start the server for one cell.  The client then holds no write end of
 * what it reads (a dead server reads as end of file) and keeps the read
 * end of what it writes (a write to a dead server fails instead of raising
 * SIGPIPE).  0, or -errno; -EPERM when the server could not verify the
 * protection (the reason is in sh->verify_why). */
static int pp_start(struct pp *p, int server_cpu)
{
    p->a[0] = p->a[1] = p->b[0] = p->b[1] = p->file = -1;
    memset(p->sh, 0, sizeof *p->sh);
    int rc = 0;
    switch (p->prim) {
    case PP_PIPE:
        rc = (pipe2(p->a, O_CLOEXEC) == 0 && pipe2(p->b, O_CLOEXEC) == 0) ? 0 : -errno;
        break;
    case PP_SOCKET:
    case PP_SOCKET_FD:
        rc = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p->a) == 0 ? 0 : -errno;
        break;
    case PP_EVENTFD:
        p->a[0] = eventfd(0, EFD_CLOEXEC);
        p->b[0] = eventfd(0, EFD_CLOEXEC);
        rc = p->a[0] >= 0 && p->b[0] >= 0 ? 0 : -errno;
        break;
    default:
        break;
    }
    if (rc == 0 && p->prim == PP_SOCKET_FD) {
        struct stat st;
        p->file = memfd_create("isob-pingpong-cap", MFD_CLOEXEC);
        rc = p->file >= 0 && fstat(p->file, &st) == 0 ? 0 : -errno;
        if (rc == 0) {
            p->sh->dev = (uint64_t)st.st_dev;
            p->sh->ino = (uint64_t)st.st_ino;
        }
    }
    if (rc)
        return rc;
    struct isob_server_spec ss = {.cpu = server_cpu, .heap_size = PP_HEAP_BYTES, .setup = pp_setup,
                                  .serve = pp_serve, .arg = p, .keep_fd = {-1, -1}};
    if (p->prim == PP_PIPE) {
        ss.keep_fd[0] = p->a[0];
        ss.keep_fd[1] = p->b[1];
    } else if (p->prim == PP_SOCKET || p->prim == PP_SOCKET_FD) {
        ss.keep_fd[0] = p->a[1];
    } else if (p->prim == PP_EVENTFD) {
        ss.keep_fd[0] = p->a[0];
        ss.keep_fd[1] = p->b[0];
    }
    rc = isob_server_start(&p->server, &ss);
    if (rc == -EPROTO || (rc && p->sh->verify_rc))
        rc = -EPERM;
    if (rc)
        return rc;
    if (p->prim == PP_FUTEX || p->prim == PP_SPIN)
        p->tid = isob_phs_tid(&p->sh->hs);
    else if (p->prim == PP_PIPE)
        pp_close(&p->b[1]);
    else if (p->prim == PP_SOCKET || p->prim == PP_SOCKET_FD)
        pp_close(&p->a[1]);
    else if (p->prim == PP_EVENTFD)
        pp_wake_fd = p->b[0];
    return 0;
}

/* Order the server out and reap it. */
static void pp_stop(struct pp *p)
{
    pp_wake_fd = -1;
    if (p->server.pid > 0 && !p->server.ended) {
        p->sh->quit = 1;
        if (p->prim == PP_FUTEX || p->prim == PP_SPIN) {
            if (isob_phs_post(&p->sh->hs.word, p->tid) == 0)
                isob_futex_wake(&p->sh->hs.word, 1, 0);
        } else if (p->prim == PP_EVENTFD) {
            uint64_t v = 1;
            ssize_t w = write(p->a[0], &v, sizeof v);
            (void)w;
        }
    }
    pp_close(&p->a[0]);
    pp_close(&p->a[1]);
    pp_close(&p->b[0]);
    pp_close(&p->b[1]);
    pp_close(&p->file);
    if (p->server.pid > 0)
        isob_server_stop(&p->server, UK_REAP_MS);
}

/* ---- one round trip, per primitive ----
 * Each returns 0, or -EOWNERDEAD when the server is gone.  They are inlined into
 * the measured regions, so that nothing but the round trip sits there. */

#define PP_TRIP static inline __attribute__((always_inline)) int

PP_TRIP pp_trip_futex(struct pp *p, const unsigned char *msg, unsigned char *reply)
{
    memcpy(p->req, msg, p->len);
    if (isob_phs_request(&p->sh->hs.word, p->tid))
        return -EOWNERDEAD;
    memcpy(reply, p->rep, p->len);
    return 0;
}

PP_TRIP pp_trip_spin(struct pp *p, const unsigned char *msg, unsigned char *reply)
{
    uint32_t *w = &p->sh->hs.word, tid = p->tid, v;
    memcpy(p->req, msg, p->len);
    if (isob_phs_post(w, tid))
        return -EOWNERDEAD;
    unsigned spins = 0;
    while ((v = isob_load(w)) == (tid | ISOB_PHS_REQ))
        pp_backoff(&spins);
    if (v != tid)
        return -EOWNERDEAD;
    memcpy(reply, p->rep, p->len);
    return 0;
}

PP_TRIP pp_trip_eventfd(struct pp *p, const unsigned char *msg, unsigned char *reply)
{
    uint64_t v = 1;
    memcpy(p->req, msg, p->len);
    if (write(p->a[0], &v, sizeof v) != (ssize_t)sizeof v)
        return -EOWNERDEAD;
    ssize_t k;
    while ((k = read(p->b[0], &v, sizeof v)) < 0 && errno == EINTR)
        ;
    if (k != (ssize_t)sizeof v || v != 1)
        return -EOWNERDEAD;
    memcpy(reply, p->rep, p->len);
    return 0;
}

PP_TRIP pp_trip_pipe(struct pp *p, const unsigned char *msg, unsigned char *reply)
{
    return pp_write_all(p->a[1], msg, p->len) || pp_read_all(p->b[0], reply, p->len) ? -EOWNERDEAD : 0;
}

PP_TRIP pp_trip_socket(struct pp *p, const unsigned char *msg, unsigned char *reply)
{
    return pp_send_all(p->a[0], msg, p->len) || pp_recv_all(p->a[0], reply, p->len) ? -EOWNERDEAD : 0;
}

PP_TRIP pp_trip_socket_fd(struct pp *p, const unsigned char *msg, unsigned char *reply)
{
    int fd;
    if (pp_send_fd(p->a[0], msg, p->len, p->file) || pp_recv_fd(p->a[0], reply, p->len, &fd))
        return -EOWNERDEAD;
    if (pp_same_file(fd, p->sh->dev, p->sh->ino))
        p->fds_ok++;
    else
        p->fds_bad++;
    if (fd >= 0)
        close(fd);
    return 0;
}

/* ---- one cell ---- */

/* The stamp of a message or reply. */
static inline uint64_t pp_stamp(const unsigned char *m)
{
    uint64_t s;
    memcpy(&s, m, sizeof s);
    return s;
}

static inline void pp_set_stamp(unsigned char *m, uint64_t s) { memcpy(m, &s, sizeof s); }

/* What a cell counted and checked. */
struct pp_work {
    uint64_t ops;          /* round trips made, warm-up and batched included */
    uint64_t full_checks;  /* replies checksummed in full */
    uint64_t stamp_checks; /* replies whose stamp was compared */
    uint64_t bad;          /* replies that failed either check */
    uint64_t each_ns;
    size_t batch_k;
    int dead;              /* the server stopped answering */
};

/* 1 when reply is the echo of message number seq: stamp and payload sum. */
static inline int pp_reply_ok(const unsigned char *reply, uint64_t seq, size_t payload, uint64_t sum)
{
    return pp_stamp(reply) == seq && uk_sum(reply + PP_HDR, payload, 1) == sum;
}

/* Warm-up, per-iteration samples and the batched estimate of TRIP, a
 * round trip of P from MSG into REPLY under CFG's budget, counted on CTR
 * into S and B; WK counts and checks, SEQ numbers the messages, and a
 * reply is checked against PAYLOAD bytes whose sum is SUM. */
#define PP_CELL(TRIP, P, CFG, CTR, S, B, MSG, REPLY, WK, SEQ, PAYLOAD, SUM)                  \
    do {                                                                                     \
        uint64_t wend = isob_clock_ns() + (CFG)->budget_ns / 4;                              \
        for (size_t i = 0; i < (CFG)->warmup && !(WK)->dead && isob_clock_ns() < wend;      \
             i++) {                                                                          \
            pp_set_stamp((MSG), ++(SEQ));                                                    \
            (WK)->dead = TRIP((P), (MSG), (REPLY)) != 0;                                     \
            (WK)->ops += !(WK)->dead;                                                        \
            (WK)->stamp_checks++;                                                            \
            (WK)->bad += !(WK)->dead && pp_stamp(REPLY) != (SEQ);                            \
        }                                                                                    \
        UK_EACH((CTR), (S), (CFG)->budget_ns, (WK)->dead, &(WK)->each_ns,                    \
                pp_set_stamp((MSG), ++(SEQ)),                                                \
                (WK)->dead = TRIP((P), (MSG), (REPLY)) != 0,                                 \
                if (!(WK)->dead) {                                                           \
                    (WK)->ops++;                                                             \
                    (WK)->full_checks++;                                                     \
                    (WK)->bad += !pp_reply_ok((REPLY), (SEQ), (PAYLOAD), (SUM));             \
                });                                                                          \
        (WK)->batch_k = (WK)->dead ? 0                                                       \
                                   : uk_batch_k((WK)->each_ns, (S)->n + (S)->dropped,        \
                                                (CFG)->budget_ns, (CFG)->batch_reps,         \
                                                (CFG)->batch_k);                             \
        if ((WK)->batch_k) {                                                                 \
            ISOB_MEASURE_BATCHED((CTR), (WK)->batch_k, (B),                                  \
                                 if (!(WK)->dead) {                                          \
                                     pp_set_stamp((MSG), ++(SEQ));                           \
                                     (WK)->dead = TRIP((P), (MSG), (REPLY)) != 0;            \
                                     (WK)->ops += !(WK)->dead;                               \
                                     (WK)->stamp_checks++;                                   \
                                     (WK)->bad += !(WK)->dead && pp_stamp(REPLY) != (SEQ);   \
                                 });                                                         \
            (WK)->full_checks++;                                                             \
            (WK)->bad += !(WK)->dead && !pp_reply_ok((REPLY), (SEQ), (PAYLOAD), (SUM));      \
        }                                                                                    \
    } while (0)

static void pp_measure(struct pp *p, const struct pp_config *cfg, struct isob_counter *ctr,
                       struct isob_samples *s, struct isob_batched *b,
                       unsigned char *msg, unsigned char *reply, struct pp_work *wk)
{
    const size_t payload = p->len - PP_HDR;
    uk_fill(msg + PP_HDR, payload, PP_SEED, 1);
    const uint64_t sum = uk_sum(msg + PP_HDR, payload, 1);
    uint64_t seq = 0;
    switch (p->prim) {
    case PP_FUTEX: PP_CELL(pp_trip_futex, p, cfg, ctr, s, b, msg, reply, wk, seq, payload, sum);
        break;
    case PP_PIPE: PP_CELL(pp_trip_pipe, p, cfg, ctr, s, b, msg, reply, wk, seq, payload, sum);
        break;
    case PP_SOCKET: PP_CELL(pp_trip_socket, p, cfg, ctr, s, b, msg, reply, wk, seq, payload, sum);
        break;
    case PP_SOCKET_FD: PP_CELL(pp_trip_socket_fd, p, cfg, ctr, s, b, msg, reply, wk, seq, payload, sum);
        break;
    case PP_EVENTFD: PP_CELL(pp_trip_eventfd, p, cfg, ctr, s, b, msg, reply, wk, seq, payload, sum);
        break;
    case PP_SPIN: PP_CELL(pp_trip_spin, p, cfg, ctr, s, b, msg, reply, wk, seq, payload, sum);
        break;
    default: break;
    }
}

/* The slot of the none-baseline table for a cell. */
static size_t pp_slot(unsigned prim, unsigned pay, unsigned pl)
{
    return ((size_t)prim * PP_MAX_PAYLOADS + pay) * 3 + pl;
}

/* The verdict on a cell whose server stayed alive: "failed" with the
 * reason when a reply, an echo count or a passed descriptor was wrong or
 * no sample was valid, else "ok". */
static const char *pp_verdict(const struct pp *p, const struct pp_work *wk,
                              const struct isob_samples *s, char *reason, size_t len)
{
    if (wk->bad)
        snprintf(reason, len, "%llu of %llu replies were not the message sent "
                 "(stamp or payload checksum)", (unsigned long long)wk->bad,
                 (unsigned long long)(wk->full_checks + wk->stamp_checks));
    else if (p->sh->echoed != wk->ops)
        snprintf(reason, len, "the server answered %llu messages, the client "
                 "received %llu", (unsigned long long)p->sh->echoed, (unsigned long long)wk->ops);
    else if (p->prim == PP_SOCKET_FD && (p->fds_ok != wk->ops || p->sh->fds_ok != wk->ops))
        snprintf(reason, len, "of %llu descriptors passed each way, %llu reached the "
                 "server and %llu came back naming the file sent",
                 (unsigned long long)wk->ops, (unsigned long long)p->sh->fds_ok,
                 (unsigned long long)p->fds_ok);
    else if (s->n == 0)
        snprintf(reason, len, "no valid sample (%llu dropped)", (unsigned long long)s->dropped);
    else
        return "ok";
    return "failed";
}

/* The params of a cell's result line (free() them), or NULL: what was
 * measured, under which protection with its evidence, the spread and the
 * delta against none of an ok cell, and the work done and checked. */
static char *pp_params(const struct pp_config *cfg, const struct pp *p, const struct pp_work *wk,
                       const struct isob_confine_state *cs, const char *prot_evidence, unsigned pay,
                       enum isob_placement pl, int ok, double p5, double p50, double p95)
{
    const enum pp_prim prim = p->prim;
    struct uk_params pj;
    if (uk_params_begin(&pj) != 0)
        return NULL;
    struct isob_jw *w = &pj.w;
    isob_jw_str(w, "placement", isob_placement_name(pl));
    isob_jw_str(w, "primitive", pp_prim_names[prim]);
    isob_jw_int(w, "payload", (long long)cfg->payloads[pay]);
    isob_jw_str(w, "protect", cfg->protect);
    isob_jw_str(w, "protect_confinement", cs ? cs->conf->name : NULL);
    isob_jw_str(w, "protect_variant", cs ? isob_confine_variant(cs) : NULL);
    isob_jw_str(w, "protect_threat", cs ? cs->conf->threat : NULL);
    isob_jw_obj(w, "protect_evidence");
    isob_jw_raw(w, "client", prot_evidence && prot_evidence[0] ? prot_evidence : "null");
    if (p->sh->evidence[0]) {
        char ev[ISOB_CONFINE_EVIDENCE_MAX + 2];
        snprintf(ev, sizeof ev, "{%s}", p->sh->evidence);
        isob_jw_raw(w, "server", ev);
    } else {
        isob_jw_raw(w, "server", "null");
    }
    isob_jw_close(w, '}');
    if (ok) {
        uk_jw_spread(w, p5, p50, p95);
        size_t k = pp_slot(prim, pay, pl);
        if (cfg->baseline && !cfg->is_baseline && cfg->baseline[k] > 0) {
            isob_jw_obj(w, "delta_vs_none");
            isob_jw_double(w, "median", p50 - cfg->baseline[k]);
            isob_jw_double(w, "ratio", p50 / cfg->baseline[k]);
            isob_jw_close(w, '}');
        } else {
            isob_jw_raw(w, "delta_vs_none", "null");
        }
    }
    isob_jw_obj(w, "work");
    isob_jw_int(w, "ops", (long long)wk->ops);
    isob_jw_int(w, "echoed", (long long)p->sh->echoed);
    isob_jw_int(w, "full_checks", (long long)wk->full_checks);
    isob_jw_int(w, "stamp_checks", (long long)wk->stamp_checks);
    isob_jw_int(w, "bad_replies", (long long)wk->bad);
    if (prim == PP_SOCKET_FD) {
        isob_jw_int(w, "fds_named_file_client", (long long)p->fds_ok);
        isob_jw_int(w, "fds_named_file_server", (long long)p->sh->fds_ok);
    }
    isob_jw_int(w, "batch_k", (long long)wk->batch_k);
    isob_jw_int(w, "budget_ms", (long long)(cfg->budget_ns / 1000000));
    int virt = uk_virtualized();
    if (virt < 0)
        isob_jw_raw(w, "virtualized", "null");
    else
        isob_jw_bool(w, "virtualized", virt);
    isob_jw_close(w, '}');
    return uk_params_end(&pj);
}

void pp_cell(const struct pp_config *cfg, struct isob_bench_ctx *ctx, struct isob_confine_state *cs,
             const char *prot_evidence, enum pp_prim prim, unsigned pay, enum isob_placement pl)
{
    const uint64_t payload = cfg->payloads[pay];
    char reason[1024] = "";
    const char *status = "ok";
    struct isob_samples s = {0};
    struct isob_batched b = {0};
    int have_b = 0;
    double p5 = 0, p50 = 0, p95 = 0;
    unsigned char *msg = NULL, *reply = NULL;
    struct pp_work wk = {0};
    struct pp p = {.prim = prim, .len = PP_HDR + payload, .sabotage = cfg->sabotage, .cs = cs,
                   .sh = cfg->shared};
    /* Nothing of the previous cell's server may show in this one's result. */
    memset(p.sh, 0, sizeof *p.sh);
    p.req = (unsigned char *)p.sh + PP_REQ_OFF;
    p.rep = p.req + PP_SLOT;
    int started = 0;

    int scpu = isob_server_cpu(pl, cfg->cpu);
    if (pl == ISOB_PLACE_CROSS_CPU && scpu < 0) {
        status = "skipped";
        snprintf(reason, sizeof reason, "cross-cpu placement needs two CPUs and a pinned client");
        goto emit;
    }
    int rc = isob_place_self(pl, cfg->cpu, reason, sizeof reason);
    if (rc) {
        status = "failed";
        goto emit;
    }
    have_b = isob_batched_alloc(&b, cfg->batch_reps) == 0;
    msg = calloc(1, PP_SLOT);
    reply = calloc(1, PP_SLOT);
    p.sbuf = calloc(1, PP_SLOT);
    if (!have_b || !msg || !reply || !p.sbuf || isob_samples_alloc(&s, cfg->cap, ctx->ctr->nev)) {
        status = "failed";
        snprintf(reason, sizeof reason, "out of memory");
        goto emit;
    }
    rc = pp_start(&p, scpu);
    started = 1;
    if (rc == -EPERM) {
        /* The other endpoint is not confined as claimed: nothing may be
         * measured under the protection's name. */
        status = "skipped";
        snprintf(reason, sizeof reason, "the server endpoint could not verify protection %s: %s",
                 cfg->protect, p.sh->verify_why[0] ? p.sh->verify_why : isob_strerror(rc));
        goto emit;
    }
    if (rc) {
        status = "failed";
        snprintf(reason, sizeof reason, "start: %s", isob_strerror(rc));
        goto emit;
    }
    pp_measure(&p, cfg, ctx->ctr, &s, &b, msg, reply, &wk);
    if (wk.dead) {
        char why[ISOB_COMP_WHY_LEN];
        isob_server_ended(&p.server, why, sizeof why);
        status = "failed";
        snprintf(reason, sizeof reason, "the round trip failed after %llu; the server %s",
                 (unsigned long long)wk.ops, why);
    }
    pp_stop(&p);
    started = 0;
    if (!wk.dead)
        status = pp_verdict(&p, &wk, &s, reason, sizeof reason);
    if (strcmp(status, "ok") == 0) {
        uk_percentiles(&s, &p5, &p50, &p95);
        if (cfg->baseline) {
            size_t k = pp_slot(prim, pay, pl);
            if (cfg->is_baseline) {
                cfg->baseline[k] = p50;
            }
        }
    }

emit:
    if (started)
        pp_stop(&p);
    int ok = strcmp(status, "ok") == 0;
    char *params = pp_params(cfg, &p, &wk, cs, prot_evidence, pay, pl, ok, p5, p50, p95);
    isob_emit_result(ctx, "pingpong", params ? params : "{}", ok ? &s : NULL, ok && b.n ? &b : NULL,
                     status, ok ? NULL : reason, NULL);
    free(params);
    isob_samples_free(&s);
    if (have_b)
        isob_batched_free(&b);
    free(msg);
    free(reply);
    free(p.sbuf);
}

/* ---- the benchmark ---- */

/* The system calls the measuring process and its servers make once
 * confined (an allow-list of the 300-rule kind must hold all of them). */
static const int pp_calls[] = {
    SYS_read, SYS_write, SYS_sendmsg, SYS_recvmsg, SYS_sendto, SYS_recvfrom, SYS_futex,
    SYS_sched_yield, SYS_fstat, SYS_close, SYS_pipe2, SYS_socketpair, SYS_eventfd2,
    SYS_memfd_create, SYS_clone, SYS_clone3, SYS_wait4, SYS_kill, SYS_exit, SYS_exit_group,
    SYS_set_robust_list, SYS_prctl, SYS_sched_setaffinity, SYS_sched_getaffinity, SYS_getcpu,
    SYS_mmap, SYS_munmap, SYS_mprotect, SYS_brk, SYS_rt_sigaction, SYS_rt_sigprocmask,
    SYS_rt_sigreturn, SYS_close_range, SYS_getpid, SYS_getppid, SYS_gettid, SYS_openat,
    SYS_newfstatat, SYS_statx, SYS_clock_gettime, SYS_clock_nanosleep, SYS_nanosleep,
    SYS_unlink, SYS_unlinkat, SYS_getuid, SYS_geteuid, SYS_madvise, SYS_rseq, SYS_lseek,
    SYS_perf_event_open, SYS_ioctl, SYS_socket, SYS_setsockopt, SYS_bind, SYS_getsockname,
};

struct pp_run {
    struct pp_config cfg;
    unsigned prims;
    unsigned placements;
};

static void pp_under(struct uk_confined *u, void *arg)
{
    struct pp_run *r = arg;
    struct pp_config cfg = r->cfg;
    cfg.protect = u->prot->name;
    cfg.is_baseline = strcmp(u->prot->name, "none") == 0;
    if (!u->skip) {
        struct sigaction sa = {.sa_handler = pp_sigchld};
        sigemptyset(&sa.sa_mask);
        /* No SA_RESTART: a client asleep in read() must wake. */
        sigaction(SIGCHLD, &sa, NULL);
    }
    for (unsigned prim = 0; prim < PP__COUNT; prim++) {
        if (!(r->prims & (1u << prim)))
            continue;
        for (unsigned pay = 0; pay < cfg.npayloads; pay++) {
            for (unsigned pl = 0; pl < 3; pl++) {
                if (!(r->placements & (1u << pl)))
                    continue;
                if (u->skip) {
                    pp_emit_skip(&cfg, u->ctx, prim, pay, (enum isob_placement)pl, u->skip);
                    continue;
                }
                pp_cell(&cfg, u->ctx, u->cs, u->evidence, (enum pp_prim)prim, pay,
                        (enum isob_placement)pl);
            }
        }
    }
    if (u->skip)
        u->ctx->skipped = 1;
}

void pp_emit_skip(const struct pp_config *cfg, struct isob_bench_ctx *ctx, unsigned prim,
                  unsigned pay, enum isob_placement pl, const char *why)
{
    char params[256];
    snprintf(params, sizeof params,
             "{\"placement\":\"%s\",\"primitive\":\"%s\",\"payload\":%llu,\"protect\":\"%s\"}",
             isob_placement_name(pl), pp_prim_names[prim], (unsigned long long)cfg->payloads[pay],
             cfg->protect);
    isob_emit_result(ctx, "pingpong", params, NULL, NULL, "skipped", why, NULL);
}

int pp_parse(const struct isob_bench_opts *o, struct pp_config *cfg, unsigned *prims,
             struct uk_protect *prot, int *nprot, char *why, size_t len)
{
    memset(cfg, 0, sizeof *cfg);
    if (o->nsizes) {
        snprintf(why, len, "pingpong: --sizes does not apply (message sizes are --payload)");
        return -EINVAL;
    }
    *prims = (1u << PP__COUNT) - 1;
    if (o->param && uk_list_names("pingpong: --primitive", o->param, pp_prim_names, prims, why, len))
        return -EINVAL;
    if (o->payloads) {
        int n = uk_list_numbers("pingpong: --payload", o->payloads, 0, PP_MAX_PAYLOAD, 1,
                                cfg->payloads, why, len);
        if (n < 0)
            return -EINVAL;
        if (n > PP_MAX_PAYLOADS) {
            snprintf(why, len, "pingpong: --payload: more than %d sizes", PP_MAX_PAYLOADS);
            return -EINVAL;
        }
        cfg->npayloads = (unsigned)n;
    } else {
        cfg->npayloads = sizeof pp_default_payloads / sizeof pp_default_payloads[0];
        memcpy(cfg->payloads, pp_default_payloads, sizeof pp_default_payloads);
    }
    int n = uk_protect_parse(o->protect, prot, why, len);
    if (n < 0) {
        char tmp[300];
        snprintf(tmp, sizeof tmp, "pingpong: %s", why);
        snprintf(why, len, "%s", tmp);
        return -EINVAL;
    }
    *nprot = n;
    return 0;
}

static int pp_check(const struct isob_bench_opts *o, char *why, size_t len)
{
    struct pp_config cfg;
    unsigned prims;
    struct uk_protect prot[UK_MAX_PROTECT];
    int nprot;
    return pp_parse(o, &cfg, &prims, prot, &nprot, why, len);
}

static int pp_run(struct isob_bench_ctx *ctx)
{
    struct pp_run r;
    struct uk_protect prot[UK_MAX_PROTECT];
    int nprot;
    char why[300];
    if (pp_parse(&ctx->opts, &r.cfg, &r.prims, prot, &nprot, why, sizeof why))
        return -EINVAL;
    r.placements = ctx->opts.placements;
    r.cfg.cpu = ctx->opts.client_cpu;
    r.cfg.budget_ns = ctx->opts.quick ? PP_BUDGET_NS_QUICK : PP_BUDGET_NS;
    r.cfg.cap = ctx->opts.n;
    r.cfg.warmup = ctx->opts.warmup;
    r.cfg.batch_k = ctx->opts.batch_k;
    r.cfg.batch_reps = ctx->opts.batch_reps;
    /* Shared by every measuring process: the page of each cell's client
     * and server, and the baseline medians the none process leaves for
     * the others' deltas. */
    size_t base_bytes = PP__COUNT * PP_MAX_PAYLOADS * 3 * sizeof(double);
    r.cfg.shared = isob_map(PP_SHARED_BYTES, 1);
    r.cfg.baseline = isob_map(base_bytes, 1);
    if (!r.cfg.shared || !r.cfg.baseline) {
        isob_unmap(r.cfg.shared, PP_SHARED_BYTES);
        isob_unmap(r.cfg.baseline, base_bytes);
        return -ENOMEM;
    }
    struct isob_confine_req req = {.calls = pp_calls, .ncalls = sizeof pp_calls / sizeof pp_calls[0],
                                   .helper_cpu = ctx->opts.client_cpu};
    int measured = 0, skipped = 0;
    for (int i = 0; i < nprot; i++) {
        int rc = uk_run_confined(ctx, "pingpong", &prot[i], &req,
                                 ctx->opts.quick ? PP_CHILD_TIMEOUT_S_QUICK : PP_CHILD_TIMEOUT_S,
                                 pp_under, &r);
        measured += rc == 0 || rc == 1;
        skipped += rc == 4;
    }
    isob_unmap(r.cfg.shared, PP_SHARED_BYTES);
    isob_unmap(r.cfg.baseline, base_bytes);
    ctx->skipped = !measured && skipped && !ctx->failed;
    return 0;
}

static void pp_describe(struct isob_jw *w)
{
    isob_jw_arr(w, "primitives");
    for (unsigned i = 0; i < PP__COUNT; i++)
        isob_jw_str(w, NULL, pp_prim_names[i]);
    isob_jw_close(w, ']');
}

static const struct isob_bench_option pp_options[] = {
    {"--primitive", "futex,pipe,socket,socket-fd,eventfd,spin", "all", "IPC primitives"},
    {"--payload", "bytes, 0 to 65536", "0,64,4096", "payload after the 8-byte stamp, checksummed"},
    {"--protect", UK_PROTECT_NAMES ",seccomp-allow:VARIANT", "none",
     "confinement of both endpoints, verified in each; none always runs first"},
    {NULL, NULL, NULL, NULL},
};

const struct isob_bench isob_bench_pingpong = {
    .name = "pingpong",
    .summary = "two-process round trip over futex, pipe, socket, socket+fd, eventfd, spin; "
               "payloads; both endpoints confined (--protect)",
    .needs_mechanism = 0,
    .run = pp_run,
    .check = pp_check,
    .describe = pp_describe,
    .options = pp_options,
};

size_t pp_shared_bytes(void) { return PP_SHARED_BYTES; }
