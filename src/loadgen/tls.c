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

int isob_tlsload_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"host", required_argument, 0, 'H'}, {"port", required_argument, 0, 'p'},
        {"handshakes", required_argument, 0, 'n'}, {"doc-bytes", required_argument, 0, 'd'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    const char *host = "127.0.0.1";
    long port = -1, count = TL_DEFAULT_HANDSHAKES, docn = ISOB_HTTP_DOC_BYTES;
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
