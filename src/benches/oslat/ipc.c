/* ipc: LMbench's local-communication latencies (lat_pipe, lat_unix,
 * lat_udp, lat_tcp, lat_rpc, lat_connect; SEIMI's Table VI).  A server
 * process echoes what the measuring process sends; one sample is one
 * round trip, in LMbench's default message size and in 1 KiB.  Nothing
 * leaves 127.0.0.1.  Each checks its own work:
 *
 *   pipe, unix, tcp   every echo equals what was sent (each message differs)
 *   udp               the same, each datagram numbered; a datagram not
 *                     answered within the time-out is counted lost, a cell
 *                     with more than 1% lost fails
 *   rpc-udp, rpc-tcp  ONC RPC (libtirpc) to a server on a port the client is
 *                     given (no rpcbind): every reply equals the request;
 *                     time-outs counted, more than 1% fail
 *   tcp-connect       socket(), connect(), close() to a listening server:
 *                     the server accepted every connection; TIME_WAIT
 *                     sockets are counted before and after, and the number
 *                     of connections per cell is bounded so that they cannot
 *                     exhaust the ephemeral ports */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isob_config.h"
#include "isobench/futex.h"
#include "isobench/mechanism.h"
#include "oslat.h"

#if ISOB_HAVE_TIRPC && !defined(ISOB_NO_TIRPC)
#include <rpc/rpc.h>
#endif

#define IPC_BIG 1024                    /* the second message size: 1 KiB */
#define IPC_MAX 65536                   /* largest message a server echoes */
#define IPC_UDP_TIMEOUT_MS 200          /* a datagram not answered by then is lost */
#define IPC_TCP_TIMEOUT_S 5             /* a stream not answered by then has timed out */
#define IPC_CONNECT_MAX 2000            /* connections per tcp-connect cell, at most */
#define IPC_CONNECT_MAX_QUICK 500
#define IPC_BACKLOG 4096                /* above IPC_CONNECT_MAX: the queue never overflows */
/* An ONC RPC program number from the range left to users (0x20000000-0x3fffffff). */
#define IPC_RPC_PROG 0x2f150e1aUL
#define IPC_RPC_VERS 1UL
#define IPC_RPC_CHAR 1UL                /* echo one char: LMbench's lat_rpc payload */
#define IPC_RPC_BYTES 2UL               /* echo a byte string */

enum ipc_kind { IPC_PIPE, IPC_UNIX, IPC_UDP, IPC_TCP };

/* LMbench's default message sizes: one byte, but four for UDP, whose
 * messages carry a sequence number. */
static size_t ipc_default_size(enum ipc_kind k) { return k == IPC_UDP ? 4 : 1; }

struct ipc_chan {
    enum ipc_kind kind;
    int cw, cr;          /* the client writes to cw, reads from cr */
    int sw, sr;          /* the server's ends */
    pid_t server;
};

static ssize_t ipc_read_full(int fd, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k <= 0)
            return k;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

/* The echo server; sabotage: every echo comes back changed. */
static void ipc_serve(struct ipc_chan *ch, size_t m, int sabotage)
{
    char *buf = malloc(IPC_MAX);
    if (!buf)
        _exit(1);
    if (ch->kind == IPC_UDP) {
        for (;;) {
            struct sockaddr_in from;
            socklen_t fl = sizeof from;
            ssize_t n = recvfrom(ch->sr, buf, IPC_MAX, 0, (struct sockaddr *)&from, &fl);
            if (n <= 0)
                _exit(0);
            buf[n - 1] ^= (char)sabotage;
            sendto(ch->sw, buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
        }
    }
    for (;;) {
        if (ipc_read_full(ch->sr, buf, m) != (ssize_t)m)
            _exit(0);
        buf[m - 1] ^= (char)sabotage;
        if (write(ch->sw, buf, m) != (ssize_t)m)
            _exit(0);
    }
}

/* A TCP listener on 127.0.0.1, port chosen by the kernel. */
static int ipc_listener(struct sockaddr_in *a, int backlog)
{
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t al = sizeof *a;
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (ls < 0 || bind(ls, (struct sockaddr *)a, sizeof *a) != 0 ||
        getsockname(ls, (struct sockaddr *)a, &al) != 0 || listen(ls, backlog) != 0) {
        int rc = -errno;
        if (ls >= 0)
            close(ls);
        return rc;
    }
    return ls;
}

static int ipc_open(struct oslat *o, struct ipc_chan *ch, size_t m)
{
    int p1[2] = {-1, -1}, p2[2] = {-1, -1}, ls = -1, rc = 0;
    struct sockaddr_in a;
    ch->cw = ch->cr = ch->sw = ch->sr = -1;
    switch (ch->kind) {
    case IPC_PIPE:
        if (pipe2(p1, O_CLOEXEC) != 0 || pipe2(p2, O_CLOEXEC) != 0)
            rc = -errno;
        ch->cw = p1[1];
        ch->sr = p1[0];
        ch->sw = p2[1];
        ch->cr = p2[0];
        break;
    case IPC_UNIX:
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p1) != 0)
            rc = -errno;
        ch->cw = ch->cr = p1[0];
        ch->sw = ch->sr = p1[1];
        break;
    case IPC_UDP: {
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int c = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        socklen_t al = sizeof a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        struct timeval tv = {0, IPC_UDP_TIMEOUT_MS * 1000};
        if (s < 0 || c < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
            getsockname(s, (struct sockaddr *)&a, &al) != 0 ||
            connect(c, (struct sockaddr *)&a, sizeof a) != 0 ||
            setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
            rc = -errno;
        ch->cw = ch->cr = c;
        ch->sw = ch->sr = s;
        break;
    }
    case IPC_TCP: {
        ls = ipc_listener(&a, 1);
        if (ls < 0)
            return ls;
        int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
        struct timeval tv = {IPC_TCP_TIMEOUT_S, 0};
        int s = -1;
        if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) != 0 ||
            (s = accept4(ls, NULL, NULL, SOCK_CLOEXEC)) < 0 ||
            setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
            setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
            setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
            rc = -errno;
        close(ls);
        ch->cw = ch->cr = c;
        ch->sw = ch->sr = s;
        break;
    }
    }
    if (rc == 0) {
        ch->server = oslat_fork(o->server_cpu);
        if (ch->server < 0)
            rc = (int)ch->server;
        else if (ch->server == 0) {
            /* Only the client may hold its ends, so that its closing them
             * is an end of file here. */
            close(ch->cw);
            if (ch->cr != ch->cw)
                close(ch->cr);
            ipc_serve(ch, m, o->sabotage);
        }
    }
    /* The server's ends belong to the server alone, so that its death is
     * an end of file here. */
    if (ch->sw >= 0)
        close(ch->sw);
    if (ch->sr >= 0 && ch->sr != ch->sw)
        close(ch->sr);
    ch->sw = ch->sr = -1;
    return rc;
}

static void ipc_close(struct ipc_chan *ch)
{
    if (ch->cw >= 0)
        close(ch->cw);
    if (ch->cr >= 0 && ch->cr != ch->cw)
        close(ch->cr);
    ch->cw = ch->cr = -1;
    /* A UDP server never sees an end of file. */
    if (ch->kind == IPC_UDP && ch->server > 0)
        kill(ch->server, SIGKILL);
    oslat_reap(ch->server);
}

/* One round trip: 0, -1 an error or end of file, -2 a time-out.  UDP
 * replies of an earlier, timed-out datagram are skipped and counted. */
static inline __attribute__((always_inline)) int ipc_rt(const struct ipc_chan *ch, const char *out,
                                                        char *in, size_t m, long *stale)
{
    if (write(ch->cw, out, m) != (ssize_t)m)
        return -1;
    if (ch->kind == IPC_UDP) {
        for (;;) {
            ssize_t k = recv(ch->cr, in, m, 0);
            if (k < 0)
                return errno == EAGAIN || errno == EWOULDBLOCK ? -2 : -1;
            if ((size_t)k == m && memcmp(in, out, sizeof(uint32_t)) == 0)
                return 0;
            (*stale)++;
        }
    }
    size_t got = 0;
    while (got < m) {
        ssize_t k = read(ch->cr, in + got, m - got);
        if (k <= 0)
            return k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? -2 : -1;
        got += (size_t)k;
    }
    return 0;
}

static const char *ipc_size_label(size_t m, char *buf, size_t len)
{
    if (m >= 1024)
        snprintf(buf, len, "%zuK", m / 1024);
    else
        snprintf(buf, len, "%zuB", m);
    return buf;
}

static int ipc_echo(struct oslat *o, const struct oslat_prim *p)
{
    enum ipc_kind kind = !strcmp(p->name, "pipe") ? IPC_PIPE : !strcmp(p->name, "unix") ? IPC_UNIX
                         : !strcmp(p->name, "udp") ? IPC_UDP : IPC_TCP;
    const size_t sizes[2] = {ipc_default_size(kind), IPC_BIG};
    char *out = malloc(IPC_MAX), *in = malloc(IPC_MAX);
    if (!out || !in) {
        free(out);
        free(in);
        return -ENOMEM;
    }
    int rc = 0;
    for (int si = 0; si < 2 && rc == 0; si++) {
        size_t m = sizes[si];
        struct ipc_chan ch = {.kind = kind};
        rc = ipc_open(o, &ch, m);
        if (rc) {
            ipc_close(&ch);
            break;
        }
        char label[24];
        struct oslat_cell c;
        rc = oslat_cell_open(&c, o, p, ipc_size_label(m, label, sizeof label));
        if (rc) {
            ipc_close(&ch);
            break;
        }
        memset(out, 0, m);
        memset(in, 0, m);
        uint32_t seq = 0;
        long wrong = 0, lost = 0, failed = 0, stale = 0, checked = 0;
        /* Every message differs (a number in its first bytes) so that an
         * echo cannot be mistaken for an earlier one. */
#define IPC_PRE(SEQ, OUT, M)                                                        \
    do {                                                                            \
        (SEQ)++;                                                                    \
        memcpy((OUT), &(SEQ), (M) < sizeof (SEQ) ? (M) : sizeof (SEQ));             \
    } while (0)
#define IPC_POST(R, C, KIND, LOST, FAILED, CHECKED, WRONG, IN, OUT, M)                     \
    do {                                                                                   \
        if ((R) == -2) {                                                                   \
            (LOST)++;                                                                      \
            (C).discard = 1;                                                               \
            /* A stream is out of step; datagrams lost past the limit                      \
             * fail the cell anyway. */                                                    \
            (C).stop |= (KIND) != IPC_UDP || ((LOST) > 5 && (LOST) * 100 > (long)(C).ops); \
        } else if ((R) != 0) {                                                             \
            (FAILED)++;                                                                    \
            (C).stop = 1;                                                                  \
        } else {                                                                           \
            (CHECKED)++;                                                                   \
            (WRONG) += memcmp((IN), (OUT), (M)) != 0;                                      \
        }                                                                                  \
    } while (0)
        int r_ = 0;
        OSLAT_WARM(&c, IPC_PRE(seq, out, m), r_ = ipc_rt(&ch, out, in, m, &stale),
                   IPC_POST(r_, c, kind, lost, failed, checked, wrong, in, out, m));
        OSLAT_EACH(&c, IPC_PRE(seq, out, m), r_ = ipc_rt(&ch, out, in, m, &stale),
                   IPC_POST(r_, c, kind, lost, failed, checked, wrong, in, out, m));
#undef IPC_PRE
#undef IPC_POST
        /* The batched estimate needs a stream that stays in step; a lost
         * datagram would stall it, so UDP has none. */
        if (kind != IPC_UDP && !c.stop) {
            long berr = 0;
            OSLAT_BATCHED(&c, berr += ipc_rt(&ch, out, in, m, &stale) != 0);
            failed += berr;
        }
        ipc_close(&ch);
        double loss = c.ops ? (double)lost / (double)c.ops : 0;
        oslat_param(&c, "msg_bytes", "%zu", m);
        oslat_param(&c, "msg_default", "%s", si == 0 ? "true" : "false");
        oslat_param(&c, "round_trips", "%llu", (unsigned long long)c.ops);
        oslat_param(&c, kind == IPC_UDP ? "lost" : "timeouts", "%ld", lost);
        oslat_param(&c, "loss_rate", "%.6f", loss);
        if (kind == IPC_UDP)
            oslat_param(&c, "stale_replies", "%ld", stale);
        oslat_param(&c, "echoes_checked", "%ld", checked);
        oslat_param(&c, "wrong_echoes", "%ld", wrong);
        if (failed)
            oslat_fail(&c, "%ld round trips failed (the server ended or a call erred)", failed);
        if (wrong)
            oslat_fail(&c, "%ld of %ld echoes checked differ from what was sent", wrong, checked);
        if (loss > OSLAT_MAX_LOSS || (kind != IPC_UDP && lost))
            oslat_fail(&c, "%ld of %llu round trips %s (%.2f%%)", lost, (unsigned long long)c.ops,
                       kind == IPC_UDP ? "lost a datagram" : "timed out", 100 * loss);
        oslat_cell_close(&c);
    }
    free(out);
    free(in);
    return rc;
}

/* ---- ONC RPC ---- */

#if ISOB_HAVE_TIRPC && !defined(ISOB_NO_TIRPC)
struct ipc_rpc_buf {
    char *p;
    u_int len;
};

static bool_t ipc_xdr_buf(XDR *x, struct ipc_rpc_buf *b)
{
    return xdr_bytes(x, &b->p, &b->len, IPC_MAX);
}

static char *ipc_rpc_data;
static int ipc_rpc_sabotage;

static void ipc_rpc_dispatch(struct svc_req *rq, SVCXPRT *xp)
{
    switch (rq->rq_proc) {
    case NULLPROC:
        svc_sendreply(xp, (xdrproc_t)(void (*)(void))xdr_void, NULL);
        return;
    case IPC_RPC_CHAR: {
        char ch = 0;
        if (!svc_getargs(xp, (xdrproc_t)xdr_char, (caddr_t)&ch)) {
            svcerr_decode(xp);
            return;
        }
        ch ^= (char)ipc_rpc_sabotage;
        svc_sendreply(xp, (xdrproc_t)xdr_char, (caddr_t)&ch);
        return;
    }
    case IPC_RPC_BYTES: {
        /* Decoded into the server's own buffer, which is never freed. */
        struct ipc_rpc_buf b = {ipc_rpc_data, 0};
        if (!svc_getargs(xp, (xdrproc_t)ipc_xdr_buf, (caddr_t)&b)) {
            svcerr_decode(xp);
            return;
        }
        if (b.len)
            b.p[b.len - 1] ^= (char)ipc_rpc_sabotage;
        svc_sendreply(xp, (xdrproc_t)ipc_xdr_buf, (caddr_t)&b);
        return;
    }
    default:
        svcerr_noproc(xp);
    }
}

/* The RPC server on sock (bound, for TCP listening): never returns. */
static void ipc_rpc_serve(int sock, int udp, int sabotage)
{
    ipc_rpc_data = malloc(IPC_MAX);
    ipc_rpc_sabotage = sabotage;
    SVCXPRT *xp = udp ? svcudp_create(sock) : svctcp_create(sock, 0, 0);
    /* Protocol 0: registered with the dispatcher only, never with rpcbind. */
    if (!ipc_rpc_data || !xp || !svc_register(xp, IPC_RPC_PROG, IPC_RPC_VERS, ipc_rpc_dispatch, 0))
        _exit(1);
    svc_run();
    _exit(1);
}

static inline __attribute__((always_inline)) enum clnt_stat ipc_rpc_call(CLIENT *cl, size_t m, char *och,
                                                                        char *ich,
                                                                        struct ipc_rpc_buf *ob,
                                                                        struct ipc_rpc_buf *ib,
                                                                        struct timeval tv)
{
    if (m == 1)
        return clnt_call(cl, IPC_RPC_CHAR, (xdrproc_t)xdr_char, (caddr_t)och, (xdrproc_t)xdr_char,
                         (caddr_t)ich, tv);
    return clnt_call(cl, IPC_RPC_BYTES, (xdrproc_t)ipc_xdr_buf, (caddr_t)ob, (xdrproc_t)ipc_xdr_buf,
                     (caddr_t)ib, tv);
}

static int ipc_rpc(struct oslat *o, const struct oslat_prim *p)
{
    const int udp = strcmp(p->name, "rpc-udp") == 0;
    const size_t sizes[2] = {1, IPC_BIG};
    char *out = malloc(IPC_MAX), *in = malloc(IPC_MAX);
    if (!out || !in) {
        free(out);
        free(in);
        return -ENOMEM;
    }
    int rc = 0;
    for (int si = 0; si < 2 && rc == 0; si++) {
        size_t m = sizes[si];
        struct sockaddr_in a;
        int ss;
        if (udp) {
            socklen_t al = sizeof a;
            memset(&a, 0, sizeof a);
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            ss = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            if (ss < 0 || bind(ss, (struct sockaddr *)&a, sizeof a) != 0 ||
                getsockname(ss, (struct sockaddr *)&a, &al) != 0) {
                rc = -errno;
                if (ss >= 0)
                    close(ss);
                break;
            }
        } else {
            ss = ipc_listener(&a, 16);
            if (ss < 0) {
                rc = ss;
                break;
            }
        }
        pid_t server = oslat_fork(o->server_cpu);
        if (server == 0)
            ipc_rpc_serve(ss, udp, o->sabotage);
        close(ss);
        if (server < 0) {
            rc = (int)server;
            break;
        }
        /* The client's own socket: libtirpc would otherwise bind a reserved
         * port (as root) or ask rpcbind. */
        int cs = socket(AF_INET, (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0);
        CLIENT *cl = NULL;
        struct timeval wait = udp ? (struct timeval){0, IPC_UDP_TIMEOUT_MS * 1000}
                                  : (struct timeval){IPC_TCP_TIMEOUT_S, 0};
        if (cs >= 0 && udp)
            cl = clntudp_create(&a, IPC_RPC_PROG, IPC_RPC_VERS, wait, &cs);
        else if (cs >= 0 && connect(cs, (struct sockaddr *)&a, sizeof a) == 0)
            cl = clnttcp_create(&a, IPC_RPC_PROG, IPC_RPC_VERS, &cs, 0, 0);
        if (!cl) {
            rc = cs < 0 ? -errno : -ECONNREFUSED;
            if (cs >= 0)
                close(cs);
            kill(server, SIGKILL);
            oslat_reap(server);
            break;
        }
        char label[24];
        struct oslat_cell c;
        rc = oslat_cell_open(&c, o, p, ipc_size_label(m, label, sizeof label));
        if (rc) {
            clnt_destroy(cl);
            kill(server, SIGKILL);
            oslat_reap(server);
            break;
        }
        struct ipc_rpc_buf ob = {out, (u_int)m}, ib = {in, (u_int)m};
        char och = 0, ich = 0;
        unsigned seq = 0;
        long wrong = 0, lost = 0, failed = 0, checked = 0;
        enum clnt_stat st = RPC_SUCCESS;
#define RPC_PRE(SEQ, OCH, OUT, M, IB)                                               \
    do {                                                                            \
        (SEQ)++;                                                                    \
        (OCH) = (char)((SEQ) & 0x7f);                                               \
        memcpy((OUT), &(SEQ), (M) < sizeof (SEQ) ? (M) : sizeof (SEQ));             \
        (IB).len = (u_int)(M);                                                      \
    } while (0)
#define RPC_POST(ST, C, UDP, LOST, FAILED, CHECKED, WRONG, M, ICH, OCH, IB, IN, OUT)        \
    do {                                                                                    \
        if ((ST) == RPC_TIMEDOUT) {                                                         \
            (LOST)++;                                                                       \
            (C).discard = 1;                                                                \
            (C).stop |= !(UDP) || ((LOST) > 5 && (LOST) * 100 > (long)(C).ops);             \
        } else if ((ST) != RPC_SUCCESS) {                                                   \
            (FAILED)++;                                                                     \
            (C).stop = 1;                                                                   \
        } else {                                                                            \
            (CHECKED)++;                                                                    \
            (WRONG) += (M) == 1 ? (ICH) != (OCH)                                            \
                                : ((IB).len != (M) || memcmp((IN), (OUT), (M)) != 0);       \
        }                                                                                   \
    } while (0)
        OSLAT_WARM(&c, RPC_PRE(seq, och, out, m, ib),
                   st = ipc_rpc_call(cl, m, &och, &ich, &ob, &ib, wait),
                   RPC_POST(st, c, udp, lost, failed, checked, wrong, m, ich, och, ib, in, out));
        OSLAT_EACH(&c, RPC_PRE(seq, och, out, m, ib),
                   st = ipc_rpc_call(cl, m, &och, &ich, &ob, &ib, wait),
                   RPC_POST(st, c, udp, lost, failed, checked, wrong, m, ich, och, ib, in, out));
#undef RPC_PRE
#undef RPC_POST
        clnt_destroy(cl);
        kill(server, SIGKILL);
        oslat_reap(server);
        double loss = c.ops ? (double)lost / (double)c.ops : 0;
        oslat_param(&c, "msg_bytes", "%zu", m);
        oslat_param(&c, "msg_default", "%s", si == 0 ? "true" : "false");
        oslat_param(&c, "xdr", "\"%s\"", m == 1 ? "char" : "bytes");
        oslat_param(&c, "server_port", "%u", (unsigned)ntohs(a.sin_port));
        oslat_param(&c, "rpcbind", "false");
        oslat_param(&c, "round_trips", "%llu", (unsigned long long)c.ops);
        oslat_param(&c, "timeouts", "%ld", lost);
        oslat_param(&c, "loss_rate", "%.6f", loss);
        oslat_param(&c, "replies_checked", "%ld", checked);
        oslat_param(&c, "wrong_replies", "%ld", wrong);
        if (failed)
            oslat_fail(&c, "%ld calls failed: %s", failed, clnt_sperrno(st));
        if (wrong)
            oslat_fail(&c, "%ld of %ld replies checked differ from the request", wrong, checked);
        if (loss > OSLAT_MAX_LOSS || (!udp && lost))
            oslat_fail(&c, "%ld of %llu calls timed out (%.2f%%)", lost, (unsigned long long)c.ops,
                       100 * loss);
        oslat_cell_close(&c);
    }
    free(out);
    free(in);
    return rc;
}
#else
static int ipc_rpc(struct oslat *o, const struct oslat_prim *p)
{
    oslat_emit_bare(o, p, NULL, "skipped", "isob was built without libtirpc (ONC RPC)");
    return 0;
}
#endif

/* ---- TCP connect ---- */

/* Sockets in TIME_WAIT in this network namespace, or -1 where
 * /proc/net/tcp cannot be read (a Landlock domain). */
static long ipc_time_wait(void)
{
    static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    long n = 0;
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(files[i], "re");
        if (!f)
            return i == 0 ? -1 : n;
        char line[512];
        while (fgets(line, sizeof line, f)) {
            unsigned st;
            if (sscanf(line, " %*s %*s %*s %x", &st) == 1 && st == 0x06)
                n++;
        }
        fclose(f);
    }
    return n;
}

/* The size of the ephemeral port range, or a common default. */
static long ipc_ephemeral_ports(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
    long lo = 32768, hi = 60999;
    if (f) {
        if (fscanf(f, "%ld %ld", &lo, &hi) != 2) {
            lo = 32768;
            hi = 60999;
        }
        fclose(f);
    }
    return hi - lo + 1;
}

/* Whether connect() to 127.0.0.1 may reuse a port whose socket is in
 * TIME_WAIT (for more than a second): net.ipv4.tcp_tw_reuse 1, or 2
 * (loopback only, Linux's default), with TCP timestamps on.  Then the
 * sockets in TIME_WAIT do not bound a cell's connections. */
static int ipc_tw_reusable(void)
{
    static const char *const files[] = {"/proc/sys/net/ipv4/tcp_tw_reuse",
                                        "/proc/sys/net/ipv4/tcp_timestamps"};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(files[i], "re");
        long v = 0;
        if (!f)
            return 0;
        if (fscanf(f, "%ld", &v) != 1)
            v = 0;
        fclose(f);
        if (v < 1)
            return 0;
    }
    return 1;
}

static inline __attribute__((always_inline)) int ipc_connect_once(const struct sockaddr_in *a,
                                                                  long *no_port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return 1;
    int r = connect(s, (const struct sockaddr *)a, sizeof *a);
    if (r != 0 && errno == EADDRNOTAVAIL)
        (*no_port)++;
    return (close(s) != 0) | (r != 0);
}

static int ipc_connect(struct oslat *o, const struct oslat_prim *p)
{
    struct sockaddr_in a;
    int ls = ipc_listener(&a, IPC_BACKLOG);
    if (ls < 0)
        return ls;
    uint64_t *accepted = isob_map(4096, 1);
    if (!accepted) {
        close(ls);
        return -ENOMEM;
    }
    pid_t server = oslat_fork(o->server_cpu);
    if (server == 0) {
        /* Accept and close, counting; broken on purpose: close without
         * counting every other one. */
        for (uint64_t i = 0;; i++) {
            int s = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
            if (s >= 0) {
                close(s);
                if (!(o->sabotage && (i & 1)))
                    __atomic_add_fetch(accepted, 1, __ATOMIC_RELEASE);
            }
        }
    }
    close(ls);
    if (server < 0) {
        isob_unmap(accepted, 4096);
        return (int)server;
    }
    long tw0 = ipc_time_wait(), ports = ipc_ephemeral_ports();
    size_t planned = o->ctx->opts.quick ? IPC_CONNECT_MAX_QUICK : IPC_CONNECT_MAX;
    /* Every connection leaves a TIME_WAIT socket on the client's side for a
     * minute: never plan more than half of the ports still free, unless the
     * kernel reuses them (those older than a second) for loopback. */
    if (tw0 >= 0 && !ipc_tw_reusable() && (long)planned > (ports - tw0) / 2)
        planned = ports - tw0 > 0 ? (size_t)((ports - tw0) / 2) : 0;
    if (planned < OSLAT_MIN_SAMPLES * 20) {
        char why[200];
        snprintf(why, sizeof why, "%ld sockets in TIME_WAIT of %ld ephemeral ports: too few free "
                 "ports for a tcp-connect cell", tw0, ports);
        oslat_emit_bare(o, p, "connect", "skipped", why);
        kill(server, SIGKILL);
        oslat_reap(server);
        isob_unmap(accepted, 4096);
        return 0;
    }
    struct oslat o2 = *o;
    if (o2.cap > planned)
        o2.cap = planned;
    if (o2.warmup > planned / 10)
        o2.warmup = planned / 10;
    struct oslat_cell c;
    int rc = oslat_cell_open(&c, &o2, p, "connect");
    if (rc) {
        kill(server, SIGKILL);
        oslat_reap(server);
        isob_unmap(accepted, 4096);
        return rc;
    }
    long failed = 0, no_port = 0;
    OSLAT_WARM(&c, (void)0, failed += ipc_connect_once(&a, &no_port), (void)0);
    OSLAT_EACH(&c, (void)0, failed += ipc_connect_once(&a, &no_port), (void)0);
    /* The server accepts what was queued; give it a moment to catch up. */
    uint64_t want = c.ops - (uint64_t)failed, got = 0;
    for (int waited = 0; waited < OSLAT_REAP_MS; waited++) {
        got = __atomic_load_n(accepted, __ATOMIC_ACQUIRE);
        if (got >= want)
            break;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    kill(server, SIGKILL);
    oslat_reap(server);
    isob_unmap(accepted, 4096);
    long tw1 = ipc_time_wait();
    oslat_param(&c, "connections", "%llu", (unsigned long long)c.ops);
    oslat_param(&c, "accepted", "%llu", (unsigned long long)got);
    oslat_param(&c, "failed", "%ld", failed);
    oslat_param(&c, "no_free_port", "%ld", no_port);
    oslat_param(&c, "time_wait_before", "%ld", tw0);
    oslat_param(&c, "time_wait_after", "%ld", tw1);
    oslat_param(&c, "ephemeral_ports", "%ld", ports);
    oslat_param(&c, "max_connections", "%zu", planned);
    if (c.ops && (double)failed / (double)c.ops > OSLAT_MAX_LOSS)
        oslat_fail(&c, "%ld of %llu connects failed (%ld for want of a free port)", failed,
                   (unsigned long long)c.ops, no_port);
    if (got != want)
        oslat_fail(&c, "the server accepted %llu of %llu connections", (unsigned long long)got,
                   (unsigned long long)want);
    oslat_cell_close(&c);
    return 0;
}

const struct oslat_prim oslat_ipc[] = {
    {.name = "pipe", .family = "ipc", .table = "VI", .traps = OSLAT_TRAPS_EACH, .two_contexts = 1,
     .summary = "round trip over two pipes (1 B, 1 KiB)", OSLAT_CALLS(SYS_read, SYS_write),
     .run = ipc_echo},
    {.name = "unix", .family = "ipc", .table = "VI", .traps = OSLAT_TRAPS_EACH, .two_contexts = 1,
     .summary = "round trip over an AF_UNIX stream socket pair (1 B, 1 KiB)",
     OSLAT_CALLS(SYS_read, SYS_write), .run = ipc_echo},
    {.name = "udp", .family = "ipc", .table = "VI", .traps = OSLAT_TRAPS_EACH, .two_contexts = 1,
     .summary = "round trip of a UDP datagram over 127.0.0.1 (4 B, 1 KiB)",
     OSLAT_CALLS(SYS_write, SYS_recvfrom, SYS_sendto), .run = ipc_echo},
    {.name = "tcp", .family = "ipc", .table = "VI", .traps = OSLAT_TRAPS_EACH, .two_contexts = 1,
     .summary = "round trip over a TCP connection on 127.0.0.1 (1 B, 1 KiB)",
     OSLAT_CALLS(SYS_read, SYS_write), .run = ipc_echo},
    {.name = "rpc-udp", .family = "ipc", .table = "VI", .traps = OSLAT_TRAPS_EACH, .two_contexts = 1,
     .summary = "ONC RPC call over UDP on 127.0.0.1, no rpcbind (char, 1 KiB)",
     OSLAT_CALLS(SYS_sendto, SYS_recvfrom, SYS_sendmsg, SYS_recvmsg, SYS_poll, SYS_ppoll),
     .run = ipc_rpc},
    {.name = "rpc-tcp", .family = "ipc", .table = "VI", .traps = OSLAT_TRAPS_EACH, .two_contexts = 1,
     .summary = "ONC RPC call over TCP on 127.0.0.1, no rpcbind (char, 1 KiB)",
     OSLAT_CALLS(SYS_read, SYS_write, SYS_poll, SYS_ppoll), .run = ipc_rpc},
    {.name = "tcp-connect", .family = "ipc", .table = "VI", .traps = OSLAT_TRAPS_EACH, .two_contexts = 1,
     .summary = "socket(), connect() and close() to a TCP server on 127.0.0.1",
     OSLAT_CALLS(SYS_socket, SYS_connect, SYS_close, SYS_accept4), .run = ipc_connect},
    {.name = NULL},
};
