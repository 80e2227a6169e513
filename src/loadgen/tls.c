/* `isob tlsload`: full TLS handshakes against `isob serve --http --tls`, one
 * after another, as lwC measured its isolated OpenSSL key (Litton et al.,
 * OSDI 2016: 10,000 handshakes, 99.7 s with the key in nginx, 100.4 s
 * with it in an lwC).  Each handshake is a new connection, never a resumed
 * session (no ticket, no session kept), followed by one GET whose reply
 * is checked byte for byte against the document, and a close.  One JSON
 * line: the count, the wall-clock seconds of all of them, per-handshake
 * latency percentiles (connect to handshake done) and of the whole
 * connection (to the reply checked), and this process's CPU time. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "isobench/bench.h"
#include "isobench/loadgen.h"

#define TL_DEFAULT_HANDSHAKES 1000
#define TL_MAX_HANDSHAKES 10000000
#define TL_TIMEOUT_S 10
#define TL_SAMPLES 20000

static void usage(FILE *f)
{
    fprintf(f,
        "usage: isob tlsload --port P [options]   N full TLS handshakes against isob serve\n"
        "                                         --http --tls, one after another (JSON)\n"
        "\n"
        "options (defaults in brackets):\n"
        "  --host A          IPv4 address of the server [127.0.0.1]\n"
        "  --port P          its TCP port (required)\n"
        "  --handshakes N    connections, each a full handshake (never resumed), one\n"
        "                    GET checked byte for byte and a close [%d]\n"
        "  --doc-bytes N     the document the GET must return (isob serve\n"
        "                    --doc-bytes) [45]\n"
        "  --duration S      instead of --handshakes: for S seconds, --conns threads\n"
        "                    each running sessions of --session requests (HTTP/1.1\n"
        "                    keep-alive, the last one closing) over one TLS connection\n"
        "                    each, a full handshake per session; the line then has\n"
        "                    requests, sessions, throughput_rps and latency_us (each\n"
        "                    request, sent to reply checked, its handshake not in it)\n"
        "  --conns C         threads with --duration [1]\n"
        "  --session L       requests per session with --duration [1]\n"
        "\n"
        "Prints one line {\"type\":\"tlsload\", handshakes, verified, errors,\n"
        "error_first, seconds, samples_ns (each handshake's ns in measuring order,\n"
        "every samples_every-th), handshake_us {p50,p90,p99,mean,max},\n"
        "connection_us {...}, cpu {user_s, sys_s}}.  Exit 0 when every reply was\n"
        "right, 1 when one was not or a handshake failed, 2 for bad usage, 4 where\n"
        "built without libssl.\n",
        TL_DEFAULT_HANDSHAKES);
}

#ifndef ISOB_HAVE_LIBSSL

int isob_tlsload_main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
    fprintf(stderr, "isob tlsload: SKIP: built without libssl (install libssl-dev and rebuild)\n");
    return 4;
}

#else

#include <openssl/err.h>
#include <openssl/ssl.h>

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "isob tlsload: error: ");
    fprintf(stderr, what, arg);
    fprintf(stderr, " (see isob tlsload --help)\n");
    return 2;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void quantiles(struct isob_jw *w, const char *key, uint64_t *v, size_t n)
{
    isob_jw_obj(w, key);
    if (n) {
        qsort(v, n, sizeof *v, cmp_u64);
        double sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += (double)v[i];
        isob_jw_int(w, "n", (long long)n);
        isob_jw_double(w, "p50", (double)v[(n - 1) / 2] / 1e3);
        isob_jw_double(w, "p90", (double)v[(size_t)((double)(n - 1) * 0.90)] / 1e3);
        isob_jw_double(w, "p99", (double)v[(size_t)((double)(n - 1) * 0.99)] / 1e3);
        isob_jw_double(w, "mean", sum / (double)n / 1e3);
        isob_jw_double(w, "max", (double)v[n - 1] / 1e3);
    }
    isob_jw_close(w, '}');
}

/* One connection: the handshake's and the whole connection's times.  0,
 * or -1 with why. */
static int one(SSL_CTX *ctx, const struct sockaddr_in *a, const char *doc, size_t doc_len,
               uint64_t *hs_ns, uint64_t *all_ns, char *why, size_t why_len)
{
    static char buf[ISOB_HTTP_DOC_MAX + 4096];
    uint64_t t0 = now_ns();
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    SSL *s = NULL;
    int rc = -1;
    if (fd < 0) {
        snprintf(why, why_len, "socket: %s", strerror(errno));
        return -1;
    }
    struct timeval tv = {TL_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one_ = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one_, sizeof one_);
    if (connect(fd, (const struct sockaddr *)a, sizeof *a) != 0) {
        snprintf(why, why_len, "connect: %s", strerror(errno));
        goto out;
    }
    s = SSL_new(ctx);
    if (!s || SSL_set_fd(s, fd) != 1 || SSL_connect(s) != 1) {
        unsigned long e = ERR_get_error();
        snprintf(why, why_len, "handshake: %s", e ? ERR_error_string(e, NULL) : "failed");
        goto out;
    }
    if (SSL_session_reused(s)) {
        snprintf(why, why_len, "the session was resumed");
        goto out;
    }
    *hs_ns = now_ns() - t0;
    static const char req[] = "GET / HTTP/1.0\r\n\r\n";
    if (SSL_write(s, req, sizeof req - 1) != (int)sizeof req - 1) {
        snprintf(why, why_len, "sending the request failed");
        goto out;
    }
    size_t n = 0;
    for (;;) {
        int r = SSL_read(s, buf + n, (int)(sizeof buf - 1 - n));
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n >= sizeof buf - 1)
            break;
    }
    size_t used = 0;
    int keep = 0;
    char w2[160];
    if (isob_lg_check_http(buf, n, doc, doc_len, &used, &keep, w2, sizeof w2) != ISOB_LG_OK) {
        snprintf(why, why_len, "the reply: %s", n ? w2 : "none");
        goto out;
    }
    *all_ns = now_ns() - t0;
    rc = 0;
out:
    if (s) {
        SSL_shutdown(s);
        SSL_free(s);
    }
    close(fd);
    return rc;
}

/* --duration: C threads, each running sessions of L requests over one TLS
 * connection (a full handshake per session) until the time is up. */
struct sess_thread {
    pthread_t t;
    SSL_CTX *ctx;
    const struct sockaddr_in *a;
    const char *doc;
    size_t doc_len;
    long session;
    uint64_t end_ns;
    uint64_t *lat;          /* each request's ns, up to cap */
    size_t n, cap;
    uint64_t requests, sessions, errors;
    char first[256];
};

/* One request on s and its reply checked: 0 or -1 with why. */
static int sess_request(SSL *s, const char *doc, size_t doc_len, int last, char *why, size_t len)
{
    static const char keep[] = "GET / HTTP/1.1\r\nHost: isob\r\n\r\n";
    static const char close_[] = "GET / HTTP/1.1\r\nHost: isob\r\nConnection: close\r\n\r\n";
    const char *req = last ? close_ : keep;
    int rl = (int)strlen(req);
    if (SSL_write(s, req, rl) != rl) {
        snprintf(why, len, "sending a request failed");
        return -1;
    }
    char buf[ISOB_HTTP_DOC_MAX + 1024];
    size_t n = 0;
    for (;;) {
        size_t used = 0;
        int ka = 0;
        char w2[160];
        int c = n ? isob_lg_check_http(buf, n, doc, doc_len, &used, &ka, w2, sizeof w2)
                  : ISOB_LG_INCOMPLETE;
        if (c == ISOB_LG_OK)
            return 0;
        if (c == ISOB_LG_BAD) {
            snprintf(why, len, "the reply: %s", w2);
            return -1;
        }
        int r = n < sizeof buf ? SSL_read(s, buf + n, (int)(sizeof buf - n)) : 0;
        if (r <= 0) {
            snprintf(why, len, "the reply ended after %zu bytes", n);
            return -1;
        }
        n += (size_t)r;
    }
}

static void *sess_main(void *arg)
{
    struct sess_thread *t = arg;
    while (now_ns() < t->end_ns) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct timeval tv = {TL_TIMEOUT_S, 0};
        char why[256] = "connect failed";
        SSL *s = NULL;
        int ok = fd >= 0;
        if (ok) {
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
            int one_ = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one_, sizeof one_);
            ok = connect(fd, (const struct sockaddr *)t->a, sizeof *t->a) == 0;
        }
        if (ok) {
            s = SSL_new(t->ctx);
            ok = s && SSL_set_fd(s, fd) == 1 && SSL_connect(s) == 1;
            if (!ok)
                snprintf(why, sizeof why, "handshake failed");
        }
        for (long i = 0; ok && i < t->session && now_ns() < t->end_ns; i++) {
            uint64_t t0 = now_ns();
            ok = sess_request(s, t->doc, t->doc_len, i == t->session - 1, why, sizeof why) == 0;
            if (ok) {
                t->requests++;
                if (t->n < t->cap)
                    t->lat[t->n++] = now_ns() - t0;
                if (i == t->session - 1)
                    t->sessions++;
            }
        }
        if (!ok && t->errors++ == 0)
            snprintf(t->first, sizeof t->first, "%s", why);
        if (s) {
            SSL_shutdown(s);
            SSL_free(s);
        }
        if (fd >= 0)
            close(fd);
        if (!ok)
            break;  /* a failed connection ends this thread's load */
    }
    return NULL;
}

static int run_sessions(SSL_CTX *ctx, const struct sockaddr_in *a, const char *doc, long docn,
                        long conns, long session, double duration)
{
    struct sess_thread *th = calloc((size_t)conns, sizeof *th);
    if (!th)
        return 1;
    uint64_t t0 = now_ns(), end = t0 + (uint64_t)(duration * 1e9);
    long started = 0;
    for (long i = 0; i < conns; i++) {
        th[i] = (struct sess_thread){.ctx = ctx, .a = a, .doc = doc, .doc_len = (size_t)docn,
                                     .session = session, .end_ns = end, .cap = 1u << 20};
        th[i].lat = malloc(th[i].cap * sizeof *th[i].lat);
        if (!th[i].lat || pthread_create(&th[i].t, NULL, sess_main, &th[i]) != 0)
            break;
        started++;
    }
    uint64_t requests = 0, sessions = 0, errors = 0, nlat = 0;
    const char *first = NULL;
    for (long i = 0; i < started; i++) {
        pthread_join(th[i].t, NULL);
        requests += th[i].requests;
        sessions += th[i].sessions;
        errors += th[i].errors;
        nlat += th[i].n;
        if (th[i].errors && !first)
            first = th[i].first;
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    uint64_t *all = malloc((nlat ? nlat : 1) * sizeof *all);
    size_t k = 0;
    for (long i = 0; all && i < started; i++)
        for (size_t j = 0; j < th[i].n; j++)
            all[k++] = th[i].lat[j];
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    struct isob_jw w;
    isob_jw_begin(&w, stdout, "tlsload");
    isob_jw_int(&w, "conns", conns);
    isob_jw_int(&w, "session", session);
    isob_jw_int(&w, "requests", (long long)requests);
    isob_jw_int(&w, "sessions", (long long)sessions);
    isob_jw_int(&w, "errors", (long long)(errors + (uint64_t)(conns - started)));
    isob_jw_str(&w, "error_first", first ? first : started < conns ? "a thread did not start" : NULL);
    isob_jw_int(&w, "doc_bytes", docn);
    isob_jw_double(&w, "seconds", secs);
    isob_jw_double(&w, "throughput_rps", secs > 0 ? (double)requests / secs : 0);
    if (all)
        quantiles(&w, "latency_us", all, k);
    isob_jw_obj(&w, "cpu");
    isob_jw_double(&w, "user_s", (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6);
    isob_jw_double(&w, "sys_s", (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
    isob_jw_close(&w, '}');
    isob_jw_end(&w);
    for (long i = 0; i < conns; i++)
        free(th[i].lat);
    free(th);
    free(all);
    return errors || started < conns || !requests ? 1 : 0;
}

int isob_tlsload_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"host", required_argument, 0, 'H'}, {"port", required_argument, 0, 'p'},
        {"handshakes", required_argument, 0, 'n'}, {"doc-bytes", required_argument, 0, 'd'},
        {"conns", required_argument, 0, 'c'}, {"session", required_argument, 0, 'L'},
        {"duration", required_argument, 0, 'D'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    const char *host = "127.0.0.1";
    long port = -1, count = TL_DEFAULT_HANDSHAKES, docn = ISOB_HTTP_DOC_BYTES, conns = 1,
         session = 1;
    double duration = 0;
    static char doc[ISOB_HTTP_DOC_MAX + 1];
    int opt;
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        char *end;
        switch (opt) {
        case 'H': host = optarg; break;
        case 'p':
            port = strtol(optarg, &end, 10);
            if (*end || end == optarg || port < 1 || port > 65535)
                return usage_error("--port: '%s' is not from 1 to 65535", optarg);
            break;
        case 'n':
            count = strtol(optarg, &end, 10);
            if (*end || end == optarg || count < 1 || count > TL_MAX_HANDSHAKES)
                return usage_error("--handshakes: '%s' is not from 1 to 10000000", optarg);
            break;
        case 'd':
            docn = strtol(optarg, &end, 10);
            if (*end || end == optarg || docn < ISOB_HTTP_DOC_BYTES || docn > ISOB_HTTP_DOC_MAX)
                return usage_error("--doc-bytes: '%s' is not from 45 to 65536", optarg);
            break;
        case 'c':
            conns = strtol(optarg, &end, 10);
            if (*end || end == optarg || conns < 1 || conns > 1024)
                return usage_error("--conns: '%s' is not from 1 to 1024", optarg);
            break;
        case 'L':
            session = strtol(optarg, &end, 10);
            if (*end || end == optarg || session < 1 || session > 1000000000)
                return usage_error("--session: '%s' is not from 1 to 1000000000", optarg);
            break;
        case 'D':
            duration = strtod(optarg, &end);
            if (*end || end == optarg || !(duration > 0 && duration <= 3600))
                return usage_error("--duration: '%s' is not a number of seconds up to 3600",
                                   optarg);
            break;
        case 'h': usage(stdout); return 0;
        case ':': return usage_error("option %s needs a value", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if (port < 0)
        return usage_error("--port is required%s", "");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return usage_error("--host: '%s' is not an IPv4 address", host);
    isob_http_doc((size_t)docn, doc);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        fprintf(stderr, "isob tlsload: error: no SSL context\n");
        return 1;
    }
    /* The server's certificate is self-signed and not checked: what is
     * measured is the handshake's cost, the key's signature included. */
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    if (duration > 0) {
        int rc = run_sessions(ctx, &a, doc, docn, conns, session, duration);
        SSL_CTX_free(ctx);
        return rc;
    }
    uint64_t *hs = malloc((size_t)count * sizeof *hs), *all = malloc((size_t)count * sizeof *all);
    if (!hs || !all) {
        fprintf(stderr, "isob tlsload: error: %s\n", strerror(ENOMEM));
        return 1;
    }
    size_t ok = 0, errors = 0;
    char first[256] = "";
    uint64_t t0 = now_ns();
    for (long i = 0; i < count; i++) {
        char why[256];
        if (one(ctx, &a, doc, (size_t)docn, &hs[ok], &all[ok], why, sizeof why) == 0) {
            ok++;
        } else if (errors++ == 0) {
            snprintf(first, sizeof first, "%s", why);
        }
    }
    double seconds = (double)(now_ns() - t0) / 1e9;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    struct isob_jw w;
    isob_jw_begin(&w, stdout, "tlsload");
    isob_jw_int(&w, "handshakes", count);
    isob_jw_int(&w, "verified", (long long)ok);
    isob_jw_int(&w, "errors", (long long)errors);
    isob_jw_str(&w, "error_first", errors ? first : NULL);
    isob_jw_int(&w, "doc_bytes", docn);
    isob_jw_double(&w, "seconds", seconds);
    /* Every handshake's time in measuring order (every k-th beyond
     * TL_SAMPLES), before the quantiles sort them. */
    size_t every = ok > TL_SAMPLES ? (ok + TL_SAMPLES - 1) / TL_SAMPLES : 1;
    isob_jw_int(&w, "samples_every", (long long)every);
    isob_jw_u64_column(&w, "samples_ns", hs, ok ? (ok - 1) / every + 1 : 0, (unsigned)every, 0);
    quantiles(&w, "handshake_us", hs, ok);
    quantiles(&w, "connection_us", all, ok);
    isob_jw_obj(&w, "cpu");
    isob_jw_double(&w, "user_s", (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6);
    isob_jw_double(&w, "sys_s", (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
    isob_jw_close(&w, '}');
    isob_jw_end(&w);
    free(hs);
    free(all);
    SSL_CTX_free(ctx);
    return errors ? 1 : 0;
}

#endif
