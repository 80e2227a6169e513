/* isob loadgen (include/isobench/loadgen.h): N threads, each an epoll
 * loop over its share of C connections in sessions of L requests; closed
 * loop (a request sent when the last reply was verified) or open loop
 * (--rate: each connection sends on a schedule of its own, and latency
 * counts from the scheduled time). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "isobench/bench.h"
#include "isobench/harness.h"
#include "isobench/loadgen.h"

_Static_assert(sizeof ISOB_HTTP_DOC - 1 == ISOB_HTTP_DOC_BYTES, "the HTTP document is 45 bytes");

#define EXIT_USAGE 2

/* Defaults, printed by --help. */
#define LG_DEFAULT_CONNS 16        /* concurrent connections */
#define LG_DEFAULT_SESSION 64      /* requests per connection before it is closed */
#define LG_DEFAULT_DURATION 5.0    /* seconds of measured load */
#define LG_DEFAULT_KEYS 1000       /* memcache: keys loaded before, and asked for */
#define LG_DEFAULT_VALUE 45        /* memcache: bytes of each value, as the paper's documents */
#define LG_DEFAULT_TIMEOUT 5.0     /* seconds a reply may take before the connection fails */
/* How long in-flight requests may finish after the duration ended. */
#define LG_DRAIN_S 1.0
/* Limits of the options. */
#define LG_MAX_CONNS 65536
#define LG_MAX_VALUE (1u << 20)
#define LG_MAX_KEYS 10000000
/* A reply larger than this is an error whatever it says. */
#define LG_MAX_REPLY (2u << 20)
/* Latencies kept for the percentiles (4 bytes each); later ones are
 * counted but not kept, and the line says so. */
#define LG_MAX_LATENCIES (64u << 20)
/* Latencies --samples may ask to print. */
#define LG_MAX_SAMPLES 1000000
/* Keys set per batch while loading. */
#define LG_LOAD_BATCH 256
/* Threads and CPUs --threads and --cpu may name. */
#define LG_MAX_THREADS 64
/* Open loop: a request its idle connection sent later than this after its
 * scheduled time was late because of the generator (its thread not
 * running, or busy), not the server: counted apart, so that a reader can
 * tell the two. */
#define LG_LATE_NS 100000u
/* Offered load --rate may ask for, requests per second over all connections. */
#define LG_MAX_RATE 1e8

/* ---- reply checks ---- */

int isob_lg_check_exact(const char *buf, size_t len, const char *want, size_t want_len, size_t *used,
                        char *why, size_t why_len)
{
    size_t n = len < want_len ? len : want_len;
    for (size_t i = 0; i < n; i++)
        if (buf[i] != want[i]) {
            size_t eol = 0;
            while (eol < len && eol < 60 && buf[eol] != '\r' && buf[eol] != '\n')
                eol++;
            snprintf(why, why_len, "reply differs from the expected one at byte %zu: \"%.*s\"", i,
                     (int)eol, buf);
            return ISOB_LG_BAD;
        }
    if (len < want_len)
        return ISOB_LG_INCOMPLETE;
    *used = want_len;
    return ISOB_LG_OK;
}

/* The value of header name in [h, end), or NULL. */
static const char *header(const char *h, const char *end, const char *name, size_t *vlen)
{
    size_t nl = strlen(name);
    while (h < end) {
        const char *eol = memchr(h, '\n', (size_t)(end - h));
        if (!eol)
            eol = end;
        if ((size_t)(eol - h) > nl && strncasecmp(h, name, nl) == 0 && h[nl] == ':') {
            const char *v = h + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = eol;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' '))
                ve--;
            *vlen = (size_t)(ve - v);
            return v;
        }
        h = eol + 1;
    }
    return NULL;
}

int isob_lg_check_http(const char *buf, size_t len, const char *body, size_t body_len, size_t *used,
                       int *keep_alive, char *why, size_t why_len)
{
    static const char proto[] = "HTTP/1.";
    size_t pl = sizeof proto - 1;
    if (memcmp(buf, proto, len < pl ? len : pl) != 0) {
        snprintf(why, why_len, "not an HTTP/1.x reply: \"%.*s\"", (int)(len < 40 ? len : 40), buf);
        return ISOB_LG_BAD;
    }
    const char *end = NULL;
    for (size_t i = 0; i + 3 < len; i++)
        if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') {
            end = buf + i + 4;
            break;
        }
    if (!end)
        return len > LG_MAX_REPLY ? ISOB_LG_BAD : ISOB_LG_INCOMPLETE;
    if (buf[pl + 1] != ' ' || strncmp(buf + pl + 2, "200", 3) != 0) {
        size_t line = strcspn(buf, "\r\n");
        snprintf(why, why_len, "status is not 200: \"%.*s\"", (int)(line > 60 ? 60 : line), buf);
        return ISOB_LG_BAD;
    }
    const char *h = memchr(buf, '\n', (size_t)(end - buf)) + 1;
    size_t vl;
    const char *cl = header(h, end, "Content-Length", &vl);
    if (!cl) {
        snprintf(why, why_len, "no Content-Length: a reply on a kept connection needs one");
        return ISOB_LG_BAD;
    }
    char num[24];
    snprintf(num, sizeof num, "%.*s", (int)(vl < 20 ? vl : 20), cl);
    char *e;
    unsigned long long n = strtoull(num, &e, 10);
    if (*e || e == num || n != body_len) {
        snprintf(why, why_len, "Content-Length %s, expected %zu", num, body_len);
        return ISOB_LG_BAD;
    }
    size_t head = (size_t)(end - buf);
    if (len < head + body_len)
        return ISOB_LG_INCOMPLETE;
    if (memcmp(end, body, body_len) != 0) {
        snprintf(why, why_len, "the body is not the expected document");
        return ISOB_LG_BAD;
    }
    const char *ka = header(h, end, "Connection", &vl);
    *keep_alive = ka && vl == 10 && strncasecmp(ka, "keep-alive", 10) == 0;
    *used = head + body_len;
    return ISOB_LG_OK;
}

/* ---- the generator ---- */

enum lg_proto { LG_MEMCACHE, LG_HTTP };

struct lg_opts {
    enum lg_proto proto;
    struct sockaddr_in addr;
    const char *host;
    unsigned port;
    size_t conns, session, keys, value;
    unsigned set_pct;
    double duration, timeout;
    const char *path;
    const char *body;
    size_t body_len;
    int cpu;                 /* the first CPU of --cpu, or -1 */
    int cpus[LG_MAX_THREADS];/* --cpu's list: thread i runs on cpus[i % ncpus] */
    size_t ncpus;
    int auto_cpus;           /* cpus chosen away from the server's, not by --cpu */
    size_t threads;          /* --threads: epoll loops, each over its share of conns */
    double rate;             /* --rate: offered requests/s over all connections; 0: closed loop */
    int poisson;             /* --arrival poisson (1) or fixed (0) */
    int from_sent;           /* --latency-from sent: hides coordinated omission, on purpose */
    double gap_ns;           /* mean gap between one connection's scheduled sends */
    long server_pid;
    uint64_t seed;
    size_t samples;  /* latencies to print as they were measured, at most */
};

/* LG_WAITING: open loop only, nothing in flight, the next scheduled send
 * not yet due. */
/* LG_PARKED: open, but done with: the run is over and the connection is kept
 * open (out of epoll) until the server's figures have been read. */
enum lg_state { LG_IDLE, LG_CONNECTING, LG_SENDING, LG_READING, LG_WAITING, LG_PARKED };

struct lg_conn {
    int fd;
    enum lg_state state;
    size_t done_in_session;  /* replies verified in this session */
    char *out;
    size_t out_len, out_off, out_cap;
    char *in;
    size_t in_len, in_cap;
    uint32_t events;         /* what epoll watches for on fd */
    char *want;              /* memcache: the expected reply */
    size_t want_len, want_cap;
    uint64_t sent_ns;        /* latency counts from here: the send, or its schedule */
    uint64_t actual_ns;      /* when the request in flight was really sent */
    uint64_t next_ns;        /* open loop: when the next request is due */
    int last;                /* the request in flight ends the session */
};

/* One thread's generator: its own epoll loop, connections, counts and
 * latencies, merged into the run's by the main thread at the end. */
struct lg {
    struct lg_opts o;
    int ep;
    int tfd;                 /* open loop: a timer for the earliest due send */
    uint64_t timer_at;       /* what tfd is armed for, 0: disarmed */
    struct lg_conn *c;
    size_t n;                /* connections of this thread */
    size_t id;
    uint64_t rng;
    uint64_t t0, end, t_end; /* start, end of the load, when this thread stopped */
    pthread_barrier_t *stopped, *read;
    /* counts */
    uint64_t requests, errors, sessions, connects, unfinished, short_sessions;
    uint64_t queued;         /* open loop: requests due while their connection was busy */
    uint64_t unsent;         /* open loop: requests due before the end, never sent */
    uint64_t late;           /* open loop: sent over LG_LATE_NS after their time by an idle connection */
    uint64_t lag_max;        /* open loop: the largest such lateness, ns */
    char error_first[256];
    uint32_t *lat;           /* nanoseconds, capped */
    size_t nlat, lat_cap;
    uint64_t lat_dropped;
    double lat_sum;
    int stopping;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: keys and gaps only need to spread, not to be secret. */
static uint64_t rnd_step(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static uint64_t rnd(struct lg *g) { return rnd_step(&g->rng); }

static void lg_error(struct lg *g, const char *fmt, const char *a, const char *b)
{
    if (!g->errors++)
        snprintf(g->error_first, sizeof g->error_first, fmt, a, b);
}

static int grow(char **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 256;
    while (n < need)
        n *= 2;
    char *q = realloc(*p, n);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

void isob_lg_value(size_t k, char *v, size_t n)
{
    for (size_t j = 0; j < n; j++)
        v[j] = (char)('a' + (k * 31 + j * 7) % 26);
}

int isob_lg_key(size_t k, char *buf, size_t len)
{
    return snprintf(buf, len, "key_%08zu", k);
}

static int append(char **p, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (grow(p, cap, *len + n + 1) != 0)
        return -ENOMEM;
    memcpy(*p + *len, s, n);
    *len += n;
    (*p)[*len] = 0;
    return 0;
}

/* Build the next request of c (and, for memcache, its expected reply). */
static int lg_request(struct lg *g, struct lg_conn *c)
{
    c->out_len = c->out_off = 0;
    c->last = g->o.session && c->done_in_session + 1 >= g->o.session;
    char head[160];
    if (g->o.proto == LG_HTTP) {
        int n = snprintf(head, sizeof head, "GET %s HTTP/1.0\r\nHost: %s\r\nConnection: %s\r\n\r\n",
                         g->o.path, g->o.host, c->last ? "close" : "keep-alive");
        return append(&c->out, &c->out_len, &c->out_cap, head, (size_t)n);
    }
    size_t k = (size_t)(rnd(g) % g->o.keys);
    int set = g->o.set_pct && rnd(g) % 100 < g->o.set_pct;
    char key[32];
    int kl = isob_lg_key(k, key, sizeof key);
    c->want_len = 0;
    if (grow(&c->want, &c->want_cap, g->o.value + 128) != 0 || grow(&c->out, &c->out_cap, g->o.value + 128) != 0)
        return -ENOMEM;
    if (set) {
        int n = snprintf(head, sizeof head, "set %.*s 0 0 %zu\r\n", kl, key, g->o.value);
        append(&c->out, &c->out_len, &c->out_cap, head, (size_t)n);
        isob_lg_value(k, c->out + c->out_len, g->o.value);
        c->out_len += g->o.value;
        append(&c->out, &c->out_len, &c->out_cap, "\r\n", 2);
        append(&c->want, &c->want_len, &c->want_cap, "STORED\r\n", 8);
    } else {
        int n = snprintf(head, sizeof head, "get %.*s\r\n", kl, key);
        append(&c->out, &c->out_len, &c->out_cap, head, (size_t)n);
        n = snprintf(head, sizeof head, "VALUE %.*s 0 %zu\r\n", kl, key, g->o.value);
        append(&c->want, &c->want_len, &c->want_cap, head, (size_t)n);
        isob_lg_value(k, c->want + c->want_len, g->o.value);
        c->want_len += g->o.value;
        append(&c->want, &c->want_len, &c->want_cap, "\r\nEND\r\n", 7);
    }
    return 0;
}

static void lg_close(struct lg *g, struct lg_conn *c, int abortive)
{
    if (c->fd < 0)
        return;
    if (abortive) {
        /* The client closes first: a reset instead of a FIN leaves no
         * TIME_WAIT here, so short sessions do not run the ephemeral
         * ports out. */
        struct linger l = {1, 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    epoll_ctl(g->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->state = LG_IDLE;
}

/* The run is over for this connection: it sends and reads no more, but
 * stays open until the server's figures have been read (lg_thread), so
 * that no session of the server ends, nor its process with it, before. */
static void lg_park(struct lg *g, struct lg_conn *c)
{
    if (c->fd < 0)
        return;
    epoll_ctl(g->ep, EPOLL_CTL_DEL, c->fd, NULL);
    c->state = LG_PARKED;
}

static int lg_watch(struct lg *g, struct lg_conn *c, uint32_t events, int op)
{
    /* A request per reply would otherwise cost an epoll_ctl that changes
     * nothing. */
    if (op == EPOLL_CTL_MOD && c->events == events)
        return 0;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    c->events = events;
    return epoll_ctl(g->ep, op, c->fd, &ev);
}

/* The natural logarithm of x > 0, without libm (which isob does not link):
 * x = m 2^e with m in [1, 2), ln m = 2 atanh((m - 1) / (m + 1)) by its
 * series, exact to double precision within 20 terms since the argument is
 * at most 1/3. */
double isob_lg_ln(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int e = (int)((bits >> 52) & 0x7ff) - 1023;
    bits = (bits & ~(0x7ffull << 52)) | (1023ull << 52);
    double m;
    memcpy(&m, &bits, sizeof m);
    double t = (m - 1) / (m + 1), t2 = t * t, term = t, sum = 0;
    for (int k = 1; k < 40; k += 2) {
        sum += term / k;
        term *= t2;
    }
    return 2 * sum + e * 0.69314718055994530942;
}

/* Open loop: the gap to a connection's next scheduled send, ns: fixed, or
 * exponential with that mean (Poisson arrivals). */
double isob_lg_gap(double mean_ns, int poisson, uint64_t *rng)
{
    if (!poisson)
        return mean_ns;
    double u = (double)((rnd_step(rng) >> 11) + 1) / 9007199254740992.0; /* (0, 1] */
    return -isob_lg_ln(u) * mean_ns;
}

static double lg_gap(struct lg *g) { return isob_lg_gap(g->o.gap_ns, g->o.poisson, &g->rng); }

/* Open c and start its first request. */
static int lg_connect(struct lg *g, struct lg_conn *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return -errno;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->done_in_session = 0;
    c->in_len = 0;
    g->connects++;
    if (connect(c->fd, (struct sockaddr *)&g->o.addr, sizeof g->o.addr) != 0 && errno != EINPROGRESS) {
        int err = -errno;
        close(c->fd);
        c->fd = -1;
        return err;
    }
    c->state = LG_CONNECTING;
    return lg_watch(g, c, EPOLLOUT, EPOLL_CTL_ADD) == 0 ? 0 : -errno;
}

static void lg_send_request(struct lg *g, struct lg_conn *c);

/* A connection ended with an error: count it, and start another. */
static void lg_fail(struct lg *g, struct lg_conn *c, const char *what, const char *detail)
{
    lg_error(g, what, detail, "");
    lg_close(g, c, 1);
    if (!g->stopping) {
        int rc = lg_connect(g, c);
        if (rc)
            lg_error(g, "connect: %s%s", strerror(-rc), "");
    }
}

static void lg_send_request(struct lg *g, struct lg_conn *c)
{
    if (lg_request(g, c) != 0) {
        lg_fail(g, c, "%s%s", "out of memory");
        return;
    }
    uint64_t now = now_ns();
    c->actual_ns = now;
    if (g->o.rate > 0) {
        /* Latency counts from the scheduled time, whenever the request
         * could go: a request that waited for its connection waited for
         * the server (no coordinated omission).  --latency-from sent
         * counts from now instead, which hides that wait. */
        c->sent_ns = g->o.from_sent ? now : c->next_ns;
        c->next_ns += (uint64_t)lg_gap(g);
    } else {
        c->sent_ns = now;
    }
    c->state = LG_SENDING;
    ssize_t n = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN) {
        lg_fail(g, c, "send: %s%s", strerror(errno));
        return;
    }
    c->out_off = n > 0 ? (size_t)n : 0;
    if (c->out_off < c->out_len) {
        lg_watch(g, c, EPOLLOUT, EPOLL_CTL_MOD);
        return;
    }
    c->state = LG_READING;
    lg_watch(g, c, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_MOD);
}

/* c is ready for its next request: closed loop, it goes now; open loop,
 * when it is due, at once when it is overdue (it fell due while the
 * connection was busy: counted as queued). */
static void lg_next(struct lg *g, struct lg_conn *c)
{
    if (g->o.rate > 0) {
        /* A request due at or after the end is not part of the run. */
        if (c->next_ns > now_ns() || c->next_ns >= g->end) {
            c->state = LG_WAITING;
            lg_watch(g, c, EPOLLRDHUP, EPOLL_CTL_MOD);
            return;
        }
        g->queued++;
    }
    lg_send_request(g, c);
}

static void lg_record(struct lg *g, uint64_t ns)
{
    g->requests++;
    g->lat_sum += (double)ns;
    if (g->nlat == g->lat_cap) {
        size_t cap = g->lat_cap ? g->lat_cap * 2 : 65536;
        uint32_t *p = cap <= LG_MAX_LATENCIES ? realloc(g->lat, cap * sizeof *p) : NULL;
        if (!p) {
            g->lat_dropped++;
            return;
        }
        g->lat = p;
        g->lat_cap = cap;
    }
    g->lat[g->nlat++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}

/* Bytes arrived on c: check the reply, go on. */
static void lg_readable(struct lg *g, struct lg_conn *c)
{
    int eof = 0;
    for (;;) {
        if (grow(&c->in, &c->in_cap, c->in_len + 65536) != 0) {
            lg_fail(g, c, "%s%s", "out of memory");
            return;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (n < 0 && errno == EAGAIN)
            break;
        if (n < 0) {
            lg_fail(g, c, "recv: %s%s", strerror(errno));
            return;
        }
        if (n == 0) {
            eof = 1;
            break;
        }
        c->in_len += (size_t)n;
        /* Less than asked for: the socket is empty now (a recv that says
         * EAGAIN would be a syscall per reply for nothing). */
        if ((size_t)n < c->in_cap - (c->in_len - (size_t)n))
            break;
    }
    size_t used = 0;
    char why[200] = "";
    int keep = 0;
    int r = g->o.proto == LG_HTTP
                ? isob_lg_check_http(c->in, c->in_len, g->o.body, g->o.body_len, &used, &keep, why, sizeof why)
                : isob_lg_check_exact(c->in, c->in_len, c->want, c->want_len, &used, why, sizeof why);
    if (r == ISOB_LG_BAD) {
        lg_fail(g, c, "%s%s", why);
        return;
    }
    if (r == ISOB_LG_INCOMPLETE) {
        if (eof) {
            char at[64];
            snprintf(at, sizeof at, "%zu of %zu", c->done_in_session, g->o.session);
            g->short_sessions++;
            lg_fail(g, c, "the server closed the connection after %s requests of the session%s", at);
        } else if (c->in_len > LG_MAX_REPLY) {
            lg_fail(g, c, "%s%s", "a reply longer than 2 MiB");
        }
        return;
    }
    if (c->in_len != used) {
        lg_fail(g, c, "%s%s", "bytes after the reply that no request asked for");
        return;
    }
    lg_record(g, now_ns() - c->sent_ns);
    c->in_len = 0;
    c->done_in_session++;
    if (c->last) {
        g->sessions++;
        lg_close(g, c, g->o.proto != LG_HTTP);
        if (!g->stopping) {
            int rc = lg_connect(g, c);
            if (rc)
                lg_error(g, "connect: %s%s", strerror(-rc), "");
        }
        return;
    }
    if (eof) {
        char at[64];
        snprintf(at, sizeof at, "%zu of %zu", c->done_in_session, g->o.session);
        g->short_sessions++;
        lg_fail(g, c, "the server closed the connection after %s requests of the session%s", at);
        return;
    }
    if (g->stopping) {
        lg_park(g, c);
        return;
    }
    lg_next(g, c);
}

static void lg_writable(struct lg *g, struct lg_conn *c)
{
    if (c->state == LG_CONNECTING) {
        int err = 0;
        socklen_t l = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
        if (err) {
            lg_error(g, "connect: %s%s", strerror(err), "");
            lg_close(g, c, 0);
            /* A refused connection is not retried in a loop: the run ends
             * with the error. */
            g->stopping = 1;
            return;
        }
        lg_next(g, c);
        return;
    }
    ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN) {
        lg_fail(g, c, "send: %s%s", strerror(errno));
        return;
    }
    c->out_off += n > 0 ? (size_t)n : 0;
    if (c->out_off == c->out_len) {
        c->state = LG_READING;
        lg_watch(g, c, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_MOD);
    }
}

/* memcache: set every key once, over one blocking connection, checking
 * each STORED. */
static int lg_load(struct lg *g)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct timeval tv = {(time_t)g->o.timeout, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&g->o.addr, sizeof g->o.addr) != 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    char *buf = NULL, *val = malloc(g->o.value + 1);
    size_t len = 0, cap = 0;
    int rc = val ? 0 : -ENOMEM;
    for (size_t k0 = 0; k0 < g->o.keys && rc == 0; k0 += LG_LOAD_BATCH) {
        size_t k1 = k0 + LG_LOAD_BATCH < g->o.keys ? k0 + LG_LOAD_BATCH : g->o.keys;
        len = 0;
        for (size_t k = k0; k < k1 && rc == 0; k++) {
            char head[96], key[32];
            isob_lg_key(k, key, sizeof key);
            int n = snprintf(head, sizeof head, "set %s 0 0 %zu\r\n", key, g->o.value);
            isob_lg_value(k, val, g->o.value);
            rc = append(&buf, &len, &cap, head, (size_t)n);
            if (!rc)
                rc = append(&buf, &len, &cap, val, g->o.value);
            if (!rc)
                rc = append(&buf, &len, &cap, "\r\n", 2);
        }
        for (size_t off = 0; rc == 0 && off < len;) {
            ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
            if (n <= 0)
                rc = n < 0 ? -errno : -EPIPE;
            else
                off += (size_t)n;
        }
        /* One STORED per key. */
        size_t want = (k1 - k0) * 8, got = 0;
        char in[4096];
        while (rc == 0 && got < want) {
            ssize_t n = recv(fd, in, sizeof in < want - got ? sizeof in : want - got, 0);
            if (n <= 0) {
                rc = n < 0 ? -errno : -EPIPE;
                break;
            }
            for (ssize_t i = 0; i < n; i++)
                if (in[i] != "STORED\r\n"[(got + (size_t)i) % 8])
                    rc = -EPROTO;
            got += (size_t)n;
        }
    }
    free(buf);
    free(val);
    close(fd);
    return rc;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static double pct(const uint32_t *v, size_t n, double p)
{
    if (!n)
        return 0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return (double)v[i] / 1000.0;
}

/* CPU time of one process, in clock ticks, and its parent; 0 or -1.  User
 * and system time include those of its children that it has waited for
 * (cutime, cstime): a server that forks a process per session, or makes a
 * context per connection, reaps them during the run, and their time would
 * be lost with them otherwise. */
static int stat_of(long pid, long *ppid, unsigned long *ut, unsigned long *st,
                   unsigned long *reaped)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *q = strrchr(buf, ')');
    long cut, cst;
    if (!q || sscanf(q + 2, "%*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %ld %ld", ppid, ut, st,
                     &cut, &cst) != 5)
        return -1;
    *ut += cut > 0 ? (unsigned long)cut : 0;
    *st += cst > 0 ? (unsigned long)cst : 0;
    if (reaped)
        *reaped = (cut > 0 ? (unsigned long)cut : 0) + (cst > 0 ? (unsigned long)cst : 0);
    return 0;
}

/* Over every live thread of process pid: the times it blocked
 * (voluntary_ctxt_switches of /proc/PID/task/TID/status: a thread that
 * waits for a request sleeps once per wait) and its CPU time in ns (the
 * first field of /proc/PID/task/TID/schedstat, the scheduler's own count,
 * where the kernel keeps it).  The threads that ended are not counted. */
static void tasks_of(long pid, unsigned long long *blocked, unsigned long long *ns,
                     long *counted)
{
    char path[96], line[128];
    snprintf(path, sizeof path, "/proc/%ld/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%ld/task/%.20s/status", pid, e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            while (fgets(line, sizeof line, f))
                if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0) {
                    *blocked += strtoull(line + 24, NULL, 10);
                    break;
                }
            fclose(f);
        }
        snprintf(path, sizeof path, "/proc/%ld/task/%.20s/schedstat", pid, e->d_name);
        f = fopen(path, "r");
        if (f) {
            unsigned long long v;
            if (fscanf(f, "%llu", &v) == 1 && v > 0) {
                *ns += v;
                (*counted)++;
            }
            fclose(f);
        }
    }
    closedir(d);
}

/* A server's process tree as one reading saw it: its processes' pids,
 * their threads' voluntary switches (tasks_of), and its CPU time in ns:
 * per process, its live threads' schedstat time, or its own clock ticks
 * where those are more (threads that ended), plus the clock ticks of the
 * children it reaped.  /proc/PID/stat counts in ticks of 10 ms, each
 * process truncated on its own: a server of 65 processes that each ran 2
 * ms would read 0. */
struct tree {
    long *pids;
    long n;
    unsigned long long blocked;
    unsigned long long cpu_ns;
    long scheduled;     /* threads whose schedstat gave a count (0: ticks only) */
};

/* CPU seconds of pid and every live process below it (a server's
 * compartments run in processes of their own), those it reaped included,
 * and how many there were; 0 or -1 when pid is gone.  tr: where given, the
 * tree's pids and switches too (tr->pids is the caller's to free). */
static int proc_cpu(long pid, double *user, double *sys, long *nproc, struct tree *tr)
{
    long pp;
    unsigned long ut, st, rp;
    if (stat_of(pid, &pp, &ut, &st, &rp) != 0)
        return -1;
    /* Processes and parents, read once; then the tree, level by level. */
    long cap = 4096, n = 0;
    long (*all)[2] = malloc((size_t)cap * sizeof *all);
    unsigned long (*t)[3] = malloc((size_t)cap * sizeof *t);
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (all && t && d && (e = readdir(d))) {
        long q = atol(e->d_name);
        if (n == cap) {
            /* A server with a context per connection has thousands. */
            long (*a2)[2] = realloc(all, (size_t)cap * 2 * sizeof *all);
            if (a2)
                all = a2;
            unsigned long (*t2)[3] = a2 ? realloc(t, (size_t)cap * 2 * sizeof *t) : NULL;
            if (t2)
                t = t2;
            if (!a2 || !t2)
                break;
            cap *= 2;
        }
        if (q > 0 && q != pid && stat_of(q, &all[n][1], &t[n][0], &t[n][1], &t[n][2]) == 0) {
            all[n][0] = q;
            n++;
        }
    }
    if (d)
        closedir(d);
    double hz = (double)sysconf(_SC_CLK_TCK);
    unsigned long su = ut, ss = st;
    long count = 1;
    char *in = calloc((size_t)(n ? n : 1), 1);
    for (int grew = 1; grew && in && all && t;) {
        grew = 0;
        for (long i = 0; i < n; i++) {
            if (in[i])
                continue;
            int below = all[i][1] == pid;
            for (long j = 0; j < n && !below; j++)
                below = in[j] && all[j][0] == all[i][1];
            if (below) {
                in[i] = 1;
                su += t[i][0];
                ss += t[i][1];
                count++;
                grew = 1;
            }
        }
    }
    if (tr) {
        double tick_ns = 1e9 / hz;
        tr->n = 0;
        tr->blocked = tr->cpu_ns = 0;
        tr->scheduled = 0;
        tr->pids = malloc((size_t)count * sizeof *tr->pids);
        for (long i = -1; i < n; i++) {
            if (i >= 0 && !(in && all && t && in[i]))
                continue;
            long q = i < 0 ? pid : all[i][0];
            unsigned long tot = i < 0 ? ut + st : t[i][0] + t[i][1];
            unsigned long reaped = i < 0 ? rp : t[i][2];
            unsigned long long ns = 0;
            tasks_of(q, &tr->blocked, &ns, &tr->scheduled);
            double own = (double)(tot - reaped) * tick_ns;
            tr->cpu_ns += (unsigned long long)((double)ns > own ? (double)ns : own)
                          + (unsigned long long)((double)reaped * tick_ns);
            if (tr->pids && tr->n < count)
                tr->pids[tr->n++] = q;
        }
    }
    free(in);
    free(all);
    free(t);
    *user = (double)su / hz;
    *sys = (double)ss / hz;
    if (nproc)
        *nproc = count;
    return 0;
}

static double tv_s(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec / 1e6; }

/* The processes of the first reading that the second did not see: they
 * ended during the run, and their threads' switches went with them. */
static long tree_ended(const struct tree *a, const struct tree *b)
{
    long gone = 0;
    for (long i = 0; a->pids && i < a->n; i++) {
        long j = 0;
        while (b->pids && j < b->n && b->pids[j] != a->pids[i])
            j++;
        gone += !b->pids || j == b->n;
    }
    return gone;
}

static void lg_report(struct lg *g, double wall, struct rusage *r0, struct rusage *r1, int have_srv,
                      double su0, double ss0, double su1, double ss1, long nproc,
                      const struct tree *tr0, const struct tree *tr1)
{
    struct isob_jw w;
    isob_jw_begin(&w, stdout, "loadgen");
    isob_jw_str(&w, "proto", g->o.proto == LG_HTTP ? "http" : "memcache");
    isob_jw_str(&w, "host", g->o.host);
    isob_jw_int(&w, "port", g->o.port);
    isob_jw_int(&w, "conns", (long long)g->o.conns);
    isob_jw_int(&w, "session", (long long)g->o.session);
    isob_jw_int(&w, "threads", (long long)g->o.threads);
    if (g->o.rate > 0) {
        isob_jw_double(&w, "rate_rps", g->o.rate);
        isob_jw_str(&w, "arrival", g->o.poisson ? "poisson" : "fixed");
        isob_jw_str(&w, "latency_from", g->o.from_sent ? "sent" : "scheduled");
    } else {
        isob_jw_raw(&w, "rate_rps", "null");
        isob_jw_str(&w, "arrival", "closed");
        isob_jw_str(&w, "latency_from", "sent");
    }
    isob_jw_int(&w, "queued", (long long)g->queued);
    isob_jw_int(&w, "unsent", (long long)g->unsent);
    isob_jw_int(&w, "late", (long long)g->late);
    isob_jw_double(&w, "send_lag_max_us", (double)g->lag_max / 1000.0);
    if (g->o.proto == LG_HTTP) {
        isob_jw_str(&w, "path", g->o.path);
        isob_jw_int(&w, "body_bytes", (long long)g->o.body_len);
    } else {
        isob_jw_int(&w, "keys", (long long)g->o.keys);
        isob_jw_int(&w, "value_bytes", (long long)g->o.value);
        isob_jw_int(&w, "set_percent", g->o.set_pct);
    }
    isob_jw_double(&w, "duration_s", wall);
    isob_jw_int(&w, "requests", (long long)g->requests);
    isob_jw_int(&w, "verified", (long long)g->requests);
    isob_jw_int(&w, "errors", (long long)g->errors);
    isob_jw_str(&w, "error_first", g->errors ? g->error_first : NULL);
    isob_jw_int(&w, "sessions", (long long)g->sessions);
    isob_jw_int(&w, "connects", (long long)g->connects);
    isob_jw_int(&w, "unfinished", (long long)g->unfinished);
    isob_jw_double(&w, "throughput_rps", wall > 0 ? (double)g->requests / wall : 0);
    if (g->o.samples) {
        /* Every k-th latency in the order measured, before sorting for the
         * percentiles: a systematic sample of the run, not its fastest. */
        size_t k = (g->nlat + g->o.samples - 1) / g->o.samples;
        isob_jw_arr(&w, "samples_ns");
        for (size_t i = 0; k && i < g->nlat; i += k)
            fprintf(stdout, i ? ",%u" : "%u", g->lat[i]);
        isob_jw_close(&w, ']');
        isob_jw_int(&w, "samples_every", (long long)k);
    }
    qsort(g->lat, g->nlat, sizeof *g->lat, cmp_u32);
    isob_jw_obj(&w, "latency_us");
    isob_jw_int(&w, "n", (long long)g->nlat);
    isob_jw_int(&w, "not_kept", (long long)g->lat_dropped);
    isob_jw_double(&w, "mean", g->requests ? g->lat_sum / (double)g->requests / 1000.0 : 0);
    isob_jw_double(&w, "p50", pct(g->lat, g->nlat, 0.50));
    isob_jw_double(&w, "p90", pct(g->lat, g->nlat, 0.90));
    isob_jw_double(&w, "p99", pct(g->lat, g->nlat, 0.99));
    isob_jw_double(&w, "p999", pct(g->lat, g->nlat, 0.999));
    isob_jw_double(&w, "max", g->nlat ? (double)g->lat[g->nlat - 1] / 1000.0 : 0);
    isob_jw_close(&w, '}');
    double u = tv_s(r1->ru_utime) - tv_s(r0->ru_utime), s = tv_s(r1->ru_stime) - tv_s(r0->ru_stime);
    isob_jw_obj(&w, "cpu");
    isob_jw_double(&w, "user_s", u);
    isob_jw_double(&w, "sys_s", s);
    isob_jw_double(&w, "busy", wall > 0 ? (u + s) / wall : 0);
    isob_jw_double(&w, "us_per_request", g->requests ? (u + s) * 1e6 / (double)g->requests : 0);
    isob_jw_int(&w, "pinned_cpu", g->o.cpu);
    isob_jw_arr(&w, "pinned_cpus");
    for (size_t i = 0; i < g->o.ncpus; i++)
        fprintf(stdout, i ? ",%d" : "%d", g->o.cpus[i]);
    isob_jw_close(&w, ']');
    isob_jw_str(&w, "pinned_by", g->o.ncpus ? (g->o.auto_cpus ? "away from the server" : "--cpu")
                                            : NULL);
    isob_jw_close(&w, '}');
    if (have_srv) {
        /* cpu_s: the tree's CPU time by the scheduler's count (struct
         * tree); user_s and sys_s in clock ticks, each process truncated
         * to one, as /proc/PID/stat splits them. */
        double cpu = su1 - su0 + ss1 - ss0;
        const char *clock = "ticks";
        if (tr0->pids && tr1->pids && tr1->cpu_ns >= tr0->cpu_ns) {
            cpu = (double)(tr1->cpu_ns - tr0->cpu_ns) / 1e9;
            /* Where the kernel keeps no scheduler count, every process
             * fell back to its ticks. */
            clock = tr0->scheduled && tr1->scheduled ? "schedstat" : "ticks";
        }
        isob_jw_obj(&w, "server_cpu");
        isob_jw_int(&w, "pid", g->o.server_pid);
        isob_jw_int(&w, "processes", nproc);
        isob_jw_double(&w, "user_s", su1 - su0);
        isob_jw_double(&w, "sys_s", ss1 - ss0);
        isob_jw_double(&w, "cpu_s", cpu);
        isob_jw_str(&w, "clock", clock);
        isob_jw_double(&w, "busy", wall > 0 ? cpu / wall : 0);
        isob_jw_double(&w, "us_per_request", g->requests ? cpu * 1e6 / (double)g->requests : 0);
        /* The times the server's threads blocked during the run, over the
         * threads alive at its end; a lower bound where processes ended
         * (processes_ended > 0: a process per session). */
        long long blocked = (long long)(tr1->blocked - tr0->blocked);
        if (tr1->blocked >= tr0->blocked && tr0->pids && tr1->pids) {
            isob_jw_int(&w, "blocked", blocked);
            isob_jw_int(&w, "processes_ended", tree_ended(tr0, tr1));
        } else {
            isob_jw_raw(&w, "blocked", "null");
            isob_jw_raw(&w, "processes_ended", "null");
        }
        isob_jw_close(&w, '}');
    } else {
        isob_jw_raw(&w, "server_cpu", "null");
    }
    isob_jw_end(&w);
    /* The generator should cost less per request than what it measures;
     * where it does not, a saturated client bounds the throughput. */
    double mine = u + s, theirs = su1 - su0 + ss1 - ss0;
    if (tr0->pids && tr1->pids && tr1->cpu_ns >= tr0->cpu_ns)
        theirs = (double)(tr1->cpu_ns - tr0->cpu_ns) / 1e9;
    if (have_srv && g->requests && mine > theirs)
        fprintf(stderr, "isob loadgen: note: loadgen's CPU per request (%.2f us) is higher than the "
                "server's (%.2f us)\n", mine * 1e6 / (double)g->requests, theirs * 1e6 / (double)g->requests);
}

/* One thread's load: connect its connections, serve events until the
 * duration ended and what was in flight drained (or the drain time ran
 * out). */
static void lg_loop(struct lg *g)
{
    for (size_t i = 0; i < g->n; i++) {
        struct lg_conn *c = &g->c[i];
        if (g->o.rate > 0)
            /* Fixed arrivals start spread over one gap, so that the
             * connections do not send in bursts; Poisson ones after a
             * first gap of their own. */
            c->next_ns = g->t0 + (uint64_t)(g->o.poisson ? lg_gap(g)
                                            : g->o.gap_ns * (double)(i * g->o.threads + g->id) /
                                                  (double)g->o.conns);
        int rc = lg_connect(g, c);
        if (rc) {
            lg_error(g, "connect: %s%s", strerror(-rc), "");
            g->stopping = 1;
            break;
        }
    }
    struct epoll_event ev[256];
    uint64_t drain_end = 0;
    for (;;) {
        uint64_t now = now_ns(), due = UINT64_MAX;
        if (!g->stopping && now >= g->end) {
            g->stopping = 1;
            g->t_end = now;
        }
        if (g->stopping && !drain_end)
            drain_end = now + (uint64_t)(LG_DRAIN_S * 1e9);
        size_t open = 0;
        for (size_t i = 0; i < g->n; i++) {
            struct lg_conn *c = &g->c[i];
            if (c->fd < 0 || c->state == LG_PARKED)
                continue;
            if (c->state == LG_WAITING) {
                if (g->stopping) {
                    lg_park(g, c);
                } else if (c->next_ns <= now && c->next_ns < g->end) {
                    uint64_t lag = now - c->next_ns;
                    if (lag > LG_LATE_NS)
                        g->late++;
                    g->lag_max = lag > g->lag_max ? lag : g->lag_max;
                    lg_send_request(g, c);
                    open++;
                } else {
                    /* Wake at the end at the latest, to stop on time. */
                    uint64_t at = c->next_ns < g->end ? c->next_ns : g->end;
                    due = at < due ? at : due;
                    open++;
                }
                continue;
            }
            /* A reply that takes longer than the time-out fails its
             * connection: a stuck server is an error, not a hang. */
            if (c->state != LG_CONNECTING && now - c->actual_ns > (uint64_t)(g->o.timeout * 1e9)) {
                lg_fail(g, c, "%s%s", "no reply within the time-out");
                continue;
            }
            if (g->stopping && c->state == LG_CONNECTING)
                lg_park(g, c);
            else
                open++;
        }
        if (g->stopping && (open == 0 || now >= drain_end))
            break;
        if (g->tfd >= 0 && due != UINT64_MAX && due != g->timer_at) {
            struct itimerspec it = {.it_value = {(time_t)(due / 1000000000u), (long)(due % 1000000000u)}};
            timerfd_settime(g->tfd, TFD_TIMER_ABSTIME, &it, NULL);
            g->timer_at = due;
        }
        int n = epoll_wait(g->ep, ev, (int)(sizeof ev / sizeof ev[0]), 100);
        if (n < 0 && errno != EINTR) {
            lg_error(g, "epoll_wait: %s%s", strerror(errno), "");
            break;
        }
        for (int i = 0; i < n; i++) {
            struct lg_conn *c = ev[i].data.ptr;
            if (!c) {
                /* The schedule's timer: the loop's scan sends what is due. */
                uint64_t x;
                if (read(g->tfd, &x, sizeof x) < 0 && errno != EAGAIN)
                    lg_error(g, "timerfd: %s%s", strerror(errno), "");
                g->timer_at = 0;
                continue;
            }
            if (c->fd < 0 || c->state == LG_PARKED)
                continue;
            if (c->state == LG_WAITING) {
                if (ev[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
                    char at[64];
                    snprintf(at, sizeof at, "%zu of %zu", c->done_in_session, g->o.session);
                    g->short_sessions++;
                    lg_fail(g, c, "the server closed the connection after %s requests of the session%s", at);
                }
            } else if (c->state == LG_READING && (ev[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
                lg_readable(g, c);
            else if (ev[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
                lg_writable(g, c);
        }
    }
    if (!g->t_end)
        g->t_end = now_ns();
}

static void *lg_thread(void *arg)
{
    struct lg *g = arg;
    /* The schedule's timer fires up to the thread's timer slack late (50
     * us by default); the open loop asks for none. */
    if (g->o.rate > 0)
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (g->o.ncpus) {
        int rc = isob_pin_self(g->o.cpus[g->id % g->o.ncpus]);
        if (rc) {
            char cpu[16];
            snprintf(cpu, sizeof cpu, "%d", g->o.cpus[g->id % g->o.ncpus]);
            lg_error(g, "pin to CPU %s: %s", cpu, isob_strerror(rc));
            g->stopping = 1;
        }
    }
    if (!g->stopping)
        lg_loop(g);
    else
        g->t_end = now_ns();
    /* The server's figures are read while the run's connections are still
     * open: closing them ends sessions (and their processes), which is not
     * part of the run, and the process count is that of the run. */
    pthread_barrier_wait(g->stopped);
    pthread_barrier_wait(g->read);
    for (size_t i = 0; i < g->n; i++) {
        struct lg_conn *c = &g->c[i];
        if (c->fd >= 0) {
            if (c->state == LG_READING || c->state == LG_SENDING)
                g->unfinished++;
            lg_close(g, c, 1);
        }
        /* Requests due before the end (the duration's, not when this
         * thread noticed it) that never went: for Poisson
         * arrivals the count the mean gap gives. */
        if (g->o.rate > 0 && c->next_ns < g->end)
            g->unsent += 1 + (uint64_t)((double)(g->end - 1 - c->next_ns) / g->o.gap_ns);
    }
    return NULL;
}

/* Thread t's figures added to the run's in g. */
static void lg_merge(struct lg *g, struct lg *t)
{
    if (t->errors && !g->errors)
        memcpy(g->error_first, t->error_first, sizeof g->error_first);
    g->requests += t->requests;
    g->errors += t->errors;
    g->sessions += t->sessions;
    g->connects += t->connects;
    g->unfinished += t->unfinished;
    g->short_sessions += t->short_sessions;
    g->queued += t->queued;
    g->unsent += t->unsent;
    g->late += t->late;
    g->lag_max = t->lag_max > g->lag_max ? t->lag_max : g->lag_max;
    g->lat_sum += t->lat_sum;
    g->lat_dropped += t->lat_dropped;
    g->t_end = t->t_end > g->t_end ? t->t_end : g->t_end;
    if (!t->nlat)
        return;
    uint32_t *p = realloc(g->lat, (g->nlat + t->nlat) * sizeof *p);
    if (!p) {
        g->lat_dropped += t->nlat;
        return;
    }
    memcpy(p + g->nlat, t->lat, t->nlat * sizeof *p);
    g->lat = p;
    g->nlat += t->nlat;
}

static int lg_run(struct lg *g)
{
    size_t nt = g->o.threads;
    struct lg *ts = calloc(nt, sizeof *ts);
    pthread_t *tid = calloc(nt, sizeof *tid);
    if (!ts || !tid) {
        fprintf(stderr, "isob loadgen: error: %s\n", strerror(ENOMEM));
        return 1;
    }
    if (g->o.proto == LG_MEMCACHE) {
        int rc = lg_load(g);
        if (rc) {
            fprintf(stderr, "isob loadgen: error: loading %zu keys into %s:%u: %s\n", g->o.keys, g->o.host,
                    g->o.port, rc == -EPROTO ? "a set was not answered STORED" : strerror(-rc));
            return 1;
        }
    }
    pthread_barrier_t stopped, read;
    pthread_barrier_init(&stopped, NULL, (unsigned)nt + 1);
    pthread_barrier_init(&read, NULL, (unsigned)nt + 1);
    for (size_t i = 0; i < nt; i++) {
        struct lg *t = &ts[i];
        t->o = g->o;
        t->id = i;
        t->n = g->o.conns / nt + (i < g->o.conns % nt);
        t->c = calloc(t->n, sizeof *t->c);
        /* No connection is open until lg_loop opens it (a thread that
         * stops early must not close descriptor 0). */
        for (size_t j = 0; t->c && j < t->n; j++)
            t->c[j].fd = -1;
        t->ep = epoll_create1(EPOLL_CLOEXEC);
        t->tfd = -1;
        t->rng = (g->o.seed + i) * 0x9e3779b97f4a7c15ull + 1;
        t->stopped = &stopped;
        t->read = &read;
        if (g->o.rate > 0) {
            t->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
            struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
            if (t->tfd < 0 || epoll_ctl(t->ep, EPOLL_CTL_ADD, t->tfd, &ev) != 0) {
                fprintf(stderr, "isob loadgen: error: timerfd: %s\n", strerror(errno));
                return 1;
            }
        }
        if (t->ep < 0 || !t->c) {
            fprintf(stderr, "isob loadgen: error: %s\n", strerror(t->ep < 0 ? errno : ENOMEM));
            return 1;
        }
    }
    double su0 = 0, ss0 = 0, su1 = 0, ss1 = 0;
    long nproc = 0;
    struct tree tr0 = {0}, tr1 = {0};
    int have_srv = g->o.server_pid > 0 && proc_cpu(g->o.server_pid, &su0, &ss0, NULL, &tr0) == 0;
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    uint64_t t0 = now_ns(), end = t0 + (uint64_t)(g->o.duration * 1e9);
    for (size_t i = 0; i < nt; i++) {
        ts[i].t0 = t0;
        ts[i].end = end;
        int rc = pthread_create(&tid[i], NULL, lg_thread, &ts[i]);
        if (rc) {
            /* Those started die with the process. */
            fprintf(stderr, "isob loadgen: error: starting thread %zu: %s\n", i, strerror(rc));
            exit(1);
        }
    }
    pthread_barrier_wait(&stopped);
    getrusage(RUSAGE_SELF, &r1);
    if (have_srv && proc_cpu(g->o.server_pid, &su1, &ss1, &nproc, &tr1) != 0)
        have_srv = 0;
    pthread_barrier_wait(&read);
    for (size_t i = 0; i < nt; i++)
        pthread_join(tid[i], NULL);
    for (size_t i = 0; i < nt; i++)
        lg_merge(g, &ts[i]);
    lg_report(g, (double)(g->t_end - t0) / 1e9, &r0, &r1, have_srv, su0, ss0, su1, ss1, nproc,
              &tr0, &tr1);
    free(tr0.pids);
    free(tr1.pids);
    if (g->errors)
        fprintf(stderr, "isob loadgen: %llu errors; the first: %s\n", (unsigned long long)g->errors,
                g->error_first);
    for (size_t i = 0; i < nt; i++) {
        for (size_t j = 0; j < ts[i].n; j++) {
            free(ts[i].c[j].in);
            free(ts[i].c[j].out);
            free(ts[i].c[j].want);
        }
        free(ts[i].c);
        free(ts[i].lat);
        close(ts[i].ep);
        if (ts[i].tfd >= 0)
            close(ts[i].tfd);
    }
    free(ts);
    free(tid);
    free(g->lat);
    pthread_barrier_destroy(&stopped);
    pthread_barrier_destroy(&read);
    return g->errors ? 1 : 0;
}

/* ---- the command line ---- */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: isob loadgen --port P [options]    load a memcached or HTTP server; one JSON line\n"
        "\n"
        "options (defaults in brackets):\n"
        "  --host A           IPv4 address of the server [127.0.0.1]\n"
        "  --port P           its TCP port (required)\n"
        "  --proto X          memcache or http [memcache]\n"
        "  --conns C          concurrent connections [%d]\n"
        "  --session L        requests per connection before it is closed and opened\n"
        "                     again [%d]\n"
        "  --duration S       seconds of load [%.0f]\n"
        "  --timeout S        seconds a reply may take; a later one fails its\n"
        "                     connection [%.0f]\n"
        "  --keys K           memcache: keys set before the run and asked for [%d]\n"
        "  --value-size B     memcache: bytes of each value [%d]\n"
        "  --set-percent P    memcache: share of requests that are sets (of the same\n"
        "                     value, so gets stay checkable) [0]\n"
        "  --path P           http: the path asked for [/]\n"
        "  --expect-body S    http: the body every reply must carry [the 45-byte\n"
        "                     document of include/isobench/loadgen.h]\n"
        "  --doc-bytes N      http: expect the N-byte document of isob serve\n"
        "                     --doc-bytes N (45 to 65536) instead\n"
        "  --threads N        epoll loops, one thread each, the connections dealt out\n"
        "                     over them (at most --conns, at most %d) [1]\n"
        "  --cpu C[,C...]     pin thread i to the i-th CPU of the list (round robin);\n"
        "                     name CPUs the server does not use [with --server-pid:\n"
        "                     the CPUs the server's affinity leaves, if any; else\n"
        "                     unpinned]\n"
        "  --rate R           open loop: R requests/s offered over all connections,\n"
        "                     each connection on a schedule of its own (R/C per\n"
        "                     connection); latency counts from the scheduled time,\n"
        "                     so a request that waited for its busy connection\n"
        "                     counts that wait (no coordinated omission).  A\n"
        "                     connection has one request in flight: offer R only\n"
        "                     with C well above R x latency [0: closed loop, each\n"
        "                     request sent when the last reply was verified]\n"
        "  --arrival A        with --rate: poisson (exponential gaps) or fixed\n"
        "                     [poisson]\n"
        "  --latency-from F   with --rate: scheduled, or sent (the time it went\n"
        "                     out: hides the queueing behind a slow reply; only to\n"
        "                     show the difference) [scheduled]\n"
        "  --server-pid PID   also report the CPU time of that process and of the\n"
        "                     processes below it (compartments) over the run\n"
        "  --seed S           seed of the keys asked for [1]\n"
        "  --samples N        also print up to N latencies (ns) in the order they were\n"
        "                     measured (thread after thread), every k-th, as\n"
        "                     samples_ns [0: none]\n"
        "\n"
        "Every reply is checked byte for byte.  The JSON line gives the CPU time of\n"
        "the generator and of the server's process tree, each also per request\n"
        "(us_per_request); stderr notes when the generator's is the higher.  Open\n"
        "loop: queued counts requests that fell due while their connection was\n"
        "busy, unsent those due before the end that never went, late those an idle\n"
        "connection sent over 100 us after their time (the generator lagged, not\n"
        "the server; send_lag_max_us the worst).  docs/serve.md explains the open\n"
        "loop and the CPU accounting.\n"
        "\n"
        "Exit status 0 when all were right, 1 when one was not or a connection\n"
        "failed (the JSON line still comes), 2 for bad usage.\n",
        LG_DEFAULT_CONNS, LG_DEFAULT_SESSION, LG_DEFAULT_DURATION, LG_DEFAULT_TIMEOUT,
        LG_DEFAULT_KEYS, LG_DEFAULT_VALUE, LG_MAX_THREADS);
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "isob loadgen: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see isob loadgen --help)\n");
    return EXIT_USAGE;
}

static int parse_size(const char *s, unsigned long long lo, unsigned long long hi, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || s[0] == '+' || v < lo || v > hi)
        return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_seconds(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

enum { OPT_HOST = 256, OPT_PORT, OPT_PROTO, OPT_CONNS, OPT_SESSION, OPT_DURATION, OPT_TIMEOUT, OPT_KEYS,
       OPT_VALUE, OPT_SETPCT, OPT_PATH, OPT_BODY, OPT_CPU, OPT_SRVPID, OPT_SEED, OPT_SAMPLES,
       OPT_DOC_BYTES, OPT_THREADS, OPT_RATE, OPT_ARRIVAL, OPT_FROM };

/* o->cpus: the CPUs this process may use that the server (o->server_pid)
 * may not; none when the server may use them all (an unpinned server) or
 * its affinity cannot be read. */
static void avoid_server(struct lg_opts *o)
{
    cpu_set_t srv, mine;
    if (sched_getaffinity((pid_t)o->server_pid, sizeof srv, &srv) != 0 ||
        sched_getaffinity(0, sizeof mine, &mine) != 0)
        return;
    size_t n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < LG_MAX_THREADS; c++)
        if (CPU_ISSET(c, &mine) && !CPU_ISSET(c, &srv))
            o->cpus[n++] = c;
    if (n) {
        o->ncpus = n;
        o->cpu = o->cpus[0];
        o->auto_cpus = 1;
    }
}

/* --cpu's list, "C[,C...]": 0, or -1 when a CPU is not one this process
 * may use or the list is malformed. */
static int parse_cpus(const char *s, struct lg_opts *o)
{
    o->ncpus = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        if (*p < '0' || *p > '9')
            return -1;
        unsigned long v = strtoul(p, &end, 10);
        if (errno || v >= CPU_SETSIZE || !isob_cpu_allowed((int)v) || o->ncpus == LG_MAX_THREADS)
            return -1;
        o->cpus[o->ncpus++] = (int)v;
        if (*end == 0)
            break;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
    o->cpu = o->cpus[0];
    return 0;
}

/* Options whose meaning depends on others. */
struct lg_given {
    int port, arrival, from;
};

/* The document --doc-bytes makes: the body every reply must carry. */
static char lg_doc[ISOB_HTTP_DOC_MAX + 1];

static void lg_defaults(struct lg_opts *o)
{
    o->proto = LG_MEMCACHE;
    o->host = "127.0.0.1";
    o->conns = LG_DEFAULT_CONNS;
    o->session = LG_DEFAULT_SESSION;
    o->duration = LG_DEFAULT_DURATION;
    o->timeout = LG_DEFAULT_TIMEOUT;
    o->keys = LG_DEFAULT_KEYS;
    o->value = LG_DEFAULT_VALUE;
    o->path = "/";
    o->body = ISOB_HTTP_DOC;
    o->body_len = ISOB_HTTP_DOC_BYTES;
    o->cpu = -1;
    o->seed = 1;
    o->threads = 1;
    o->poisson = 1;
}

/* lg_option_server's and lg_option_load's answer for an option of the other. */
#define LG_NOT_MINE (-1)

/* An option that names the server and what it must answer (arg, as
 * getopt gave it) into o: 0, LG_NOT_MINE, or the exit status after a
 * usage error was reported. */
static int lg_option_server(struct lg_opts *o, int opt, const char *arg, struct lg_given *given)
{
    size_t v;
    switch (opt) {
    case OPT_HOST: o->host = arg; return 0;
    case OPT_PORT:
        if (parse_size(arg, 1, 65535, &v))
            return usage_error("--port: '%s' is not a port from 1 to 65535", arg);
        o->port = (unsigned)v;
        given->port = 1;
        return 0;
    case OPT_PROTO:
        if (strcmp(arg, "memcache") == 0)
            o->proto = LG_MEMCACHE;
        else if (strcmp(arg, "http") == 0)
            o->proto = LG_HTTP;
        else
            return usage_error("--proto: '%s' is neither memcache nor http", arg);
        return 0;
    case OPT_PATH:
        if (arg[0] != '/' || strpbrk(arg, " \r\n") || strlen(arg) > 100)
            return usage_error("--path: '%s' is not a path (starts with /, no spaces, at most 100 bytes)",
                               arg);
        o->path = arg;
        return 0;
    case OPT_BODY:
        o->body = arg;
        o->body_len = strlen(arg);
        return 0;
    case OPT_DOC_BYTES:
        if (parse_size(arg, ISOB_HTTP_DOC_BYTES, ISOB_HTTP_DOC_MAX, &v) || isob_http_doc(v, lg_doc))
            return usage_error("--doc-bytes: '%s' is not from 45 to 65536", arg);
        o->body = lg_doc;
        o->body_len = v;
        return 0;
    case OPT_CPU:
        if (parse_cpus(arg, o))
            return usage_error("--cpu %s: not a list of CPUs this process may use (C[,C...])", arg);
        return 0;
    case OPT_SRVPID:
        if (parse_size(arg, 1, 4194304, &v))
            return usage_error("--server-pid: '%s' is not a process id", arg);
        o->server_pid = (long)v;
        return 0;
    case OPT_SEED:
        if (parse_size(arg, 0, UINT64_MAX, &v))
            return usage_error("--seed: '%s' is not a number", arg);
        o->seed = v;
        return 0;
    default: return LG_NOT_MINE;
    }
}

/* An option that shapes the load (arg, as getopt gave it) into o: 0,
 * LG_NOT_MINE, or the exit status after a usage error was reported. */
static int lg_option_load(struct lg_opts *o, int opt, const char *arg, struct lg_given *given)
{
    size_t v;
    switch (opt) {
    case OPT_CONNS:
        if (parse_size(arg, 1, LG_MAX_CONNS, &o->conns))
            return usage_error("--conns: '%s' is not a count from 1 to 65536", arg);
        return 0;
    case OPT_SESSION:
        if (parse_size(arg, 1, 1000000000, &o->session))
            return usage_error("--session: '%s' is not a count from 1 to 1000000000", arg);
        return 0;
    case OPT_DURATION:
        if (parse_seconds(arg, 0.01, 86400, &o->duration))
            return usage_error("--duration: '%s' is not a number of seconds from 0.01 to 86400", arg);
        return 0;
    case OPT_TIMEOUT:
        if (parse_seconds(arg, 0.01, 3600, &o->timeout))
            return usage_error("--timeout: '%s' is not a number of seconds from 0.01 to 3600", arg);
        return 0;
    case OPT_KEYS:
        if (parse_size(arg, 1, LG_MAX_KEYS, &o->keys))
            return usage_error("--keys: '%s' is not a count from 1 to 10000000", arg);
        return 0;
    case OPT_VALUE:
        if (parse_size(arg, 1, LG_MAX_VALUE, &o->value))
            return usage_error("--value-size: '%s' is not a size from 1 to 1048576", arg);
        return 0;
    case OPT_SETPCT:
        if (parse_size(arg, 0, 100, &v))
            return usage_error("--set-percent: '%s' is not a percentage from 0 to 100", arg);
        o->set_pct = (unsigned)v;
        return 0;
    case OPT_THREADS:
        if (parse_size(arg, 1, LG_MAX_THREADS, &o->threads))
            return usage_error("--threads: '%s' is not a count from 1 to 64", arg);
        return 0;
    case OPT_RATE:
        if (parse_seconds(arg, 1e-3, LG_MAX_RATE, &o->rate))
            return usage_error("--rate: '%s' is not a rate from 0.001 to 100000000 requests/s", arg);
        return 0;
    case OPT_ARRIVAL:
        if (strcmp(arg, "poisson") == 0)
            o->poisson = 1;
        else if (strcmp(arg, "fixed") == 0)
            o->poisson = 0;
        else
            return usage_error("--arrival: '%s' is neither poisson nor fixed", arg);
        given->arrival = 1;
        return 0;
    case OPT_FROM:
        if (strcmp(arg, "scheduled") == 0)
            o->from_sent = 0;
        else if (strcmp(arg, "sent") == 0)
            o->from_sent = 1;
        else
            return usage_error("--latency-from: '%s' is neither scheduled nor sent", arg);
        given->from = 1;
        return 0;
    case OPT_SAMPLES:
        if (parse_size(arg, 0, LG_MAX_SAMPLES, &o->samples))
            return usage_error("--samples: '%s' is not a count from 0 to 1000000", arg);
        return 0;
    default: return LG_NOT_MINE;
    }
}

/* One option (getopt's value opt, its argument arg, as given word) into o:
 * 0, or the exit status after a usage error was reported. */
static int lg_option(struct lg_opts *o, int opt, const char *arg, const char *word,
                     struct lg_given *given)
{
    if (opt == ':')
        return usage_error("option %s needs a value", word);
    int rc = lg_option_server(o, opt, arg, given);
    if (rc == LG_NOT_MINE)
        rc = lg_option_load(o, opt, arg, given);
    return rc == LG_NOT_MINE ? usage_error("unknown option '%s'", word) : rc;
}

/* What the options ask of each other and of this machine, once all are
 * read; then the generator's own CPU.  0, or the exit status after the
 * error was reported. */
static int lg_settle(struct lg_opts *o, const struct lg_given *given)
{
    if (!given->port)
        return usage_error("--port is required%s", "");
    if (o->threads > o->conns)
        return usage_error("--threads: more threads than connections (--conns)%s", "");
    if ((given->arrival || given->from) && o->rate <= 0)
        return usage_error("--arrival and --latency-from need --rate%s", "");
    if (o->rate > 0)
        o->gap_ns = (double)o->conns * 1e9 / o->rate;
    o->addr.sin_family = AF_INET;
    o->addr.sin_port = htons((uint16_t)o->port);
    if (inet_pton(AF_INET, o->host, &o->addr.sin_addr) != 1 || strlen(o->host) > 40)
        return usage_error("--host: '%s' is not an IPv4 address", o->host);
    if (o->server_pid) {
        double u, s;
        char pid[24];
        snprintf(pid, sizeof pid, "%ld", o->server_pid);
        if (proc_cpu(o->server_pid, &u, &s, NULL, NULL) != 0)
            return usage_error("--server-pid %s: no such process to read", pid);
    }
    /* Without --cpu, the threads keep off the CPUs the server may run on,
     * where others are left: a generator that shares the server's CPU
     * measures the two together. */
    if (o->ncpus == 0 && o->server_pid)
        avoid_server(o);
    /* The main thread (which loads the keys) runs on the first CPU; each
     * load thread pins itself to its own. */
    if (o->cpu >= 0) {
        int rc = isob_pin_self(o->cpu);
        if (rc) {
            fprintf(stderr, "isob loadgen: error: pin to CPU %d: %s\n", o->cpu, isob_strerror(rc));
            return 1;
        }
    }
    return 0;
}

int isob_loadgen_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"host", required_argument, 0, OPT_HOST}, {"port", required_argument, 0, OPT_PORT},
        {"proto", required_argument, 0, OPT_PROTO}, {"conns", required_argument, 0, OPT_CONNS},
        {"session", required_argument, 0, OPT_SESSION}, {"duration", required_argument, 0, OPT_DURATION},
        {"timeout", required_argument, 0, OPT_TIMEOUT}, {"keys", required_argument, 0, OPT_KEYS},
        {"value-size", required_argument, 0, OPT_VALUE}, {"set-percent", required_argument, 0, OPT_SETPCT},
        {"path", required_argument, 0, OPT_PATH}, {"expect-body", required_argument, 0, OPT_BODY},
        {"cpu", required_argument, 0, OPT_CPU}, {"server-pid", required_argument, 0, OPT_SRVPID},
        {"seed", required_argument, 0, OPT_SEED}, {"samples", required_argument, 0, OPT_SAMPLES},
        {"doc-bytes", required_argument, 0, OPT_DOC_BYTES},
        {"threads", required_argument, 0, OPT_THREADS}, {"rate", required_argument, 0, OPT_RATE},
        {"arrival", required_argument, 0, OPT_ARRIVAL}, {"latency-from", required_argument, 0, OPT_FROM},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    struct lg g;
    memset(&g, 0, sizeof g);
    struct lg_opts *o = &g.o;
    struct lg_given given = {0, 0, 0};
    lg_defaults(o);
    int opt;
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (opt == 'h') {
            usage(stdout);
            return 0;
        }
        int rc = lg_option(o, opt, optarg, argv[optind - 1], &given);
        if (rc)
            return rc;
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    int rc = lg_settle(o, &given);
    if (rc)
        return rc;
    g.rng = o->seed * 0x9e3779b97f4a7c15ull + 1;
    return lg_run(&g);
}
