/* `isob loadgen`: a load generator for the memcached text protocol and a
 * minimal HTTP/1.0 GET, with session length under control.
 *
 * C connections, each running sessions of L requests: connect, L requests
 * one after another, close, connect again; for a fixed duration.  Closed
 * loop (the default): each request is sent when the last reply was
 * verified.  Open loop (--rate R): each connection sends on a schedule of
 * its own (Poisson or fixed gaps, R/C per connection), and a latency counts
 * from the scheduled time, so that waiting behind a slow reply is not
 * hidden (docs/serve.md).  --threads N runs N epoll loops, the
 * connections dealt out over them.  Every reply is checked byte for
 * byte against what it must be.  The result is one JSON line: throughput,
 * latency percentiles, the counts that prove the work, and the CPU time of
 * the generator (and of the server, given its pid), so that a run shows
 * which of the two was saturated.
 *
 * The reply checks are pure functions, so that they can be tested without
 * sockets. */
#ifndef ISOBENCH_LOADGEN_H
#define ISOBENCH_LOADGEN_H

#include <stddef.h>
#include <stdint.h>

/* The document of the HTTP mode: 45 bytes, as the lwC paper's, and what a
 * server of this project answers to GET (loadgen checks bodies against it
 * unless told another). */
#define ISOB_HTTP_DOC "<html><body>isobench: 45 bytes</body></html>\n"
#define ISOB_HTTP_DOC_BYTES 45
/* The largest document --doc-bytes makes. */
#define ISOB_HTTP_DOC_MAX 65536

/* The document of n bytes (ISOB_HTTP_DOC_BYTES to ISOB_HTTP_DOC_MAX) into
 * buf (n + 1 bytes, NUL-terminated): ISOB_HTTP_DOC for 45, else the same
 * head and tail ("<html><body>isobench: 900 bytes" ... "</body></html>\n")
 * around letters a-z repeated (lwC's nginx served 45- and 900-byte
 * documents: Litton et al., OSDI 2016, the nginx experiments).  0, or -1 for an n out of range. */
int isob_http_doc(size_t n, char *buf);

/* memcache: the name of key k ("key_%08zu") in buf; its length, as
 * snprintf's. */
int isob_lg_key(size_t k, char *buf, size_t len);

/* memcache: the value of key k, n printable bytes fixed per key.  A server
 * may hold the keys before any client came (isob serve --preload-keys,
 * whose sessions may not keep what the load phase set), and every get is
 * still checked against this. */
void isob_lg_value(size_t k, char *v, size_t n);

/* Results of a reply check. */
enum {
    ISOB_LG_INCOMPLETE = 0,  /* more bytes are needed */
    ISOB_LG_OK = 1,          /* a whole, correct reply of *used bytes */
    ISOB_LG_BAD = -1,        /* a reply that is not the one expected (why says how) */
};

/* memcached: the reply in buf must be exactly want (the whole expected
 * reply text, e.g. "VALUE k 0 3\r\nabc\r\nEND\r\n").  A reply that starts
 * differently is bad at the first differing byte. */
int isob_lg_check_exact(const char *buf, size_t len, const char *want, size_t want_len, size_t *used,
                        char *why, size_t why_len);

/* HTTP: a status line "HTTP/1.x 200 ...", headers with Content-Length, a
 * blank line and a body equal to body (body_len bytes).  *keep_alive is
 * set when the reply says "Connection: keep-alive". */
int isob_lg_check_http(const char *buf, size_t len, const char *body, size_t body_len, size_t *used,
                       int *keep_alive, char *why, size_t why_len);

/* The open loop's schedule: the gap before a connection's next request,
 * ns: mean_ns itself (fixed arrivals), or an exponential draw with that
 * mean (poisson != 0: Poisson arrivals), from the xorshift state *rng
 * (never 0).  Pure, so that its arithmetic is tested without sockets. */
double isob_lg_gap(double mean_ns, int poisson, uint64_t *rng);

/* The natural logarithm of x > 0 (isob links no libm), to double
 * precision. */
double isob_lg_ln(double x);

/* The subcommand: argv[0] is "loadgen".  Exit status 0 (every reply
 * verified), 1 (a reply failed its check, or a connection failed), 2
 * (usage). */
int isob_loadgen_main(int argc, char **argv);

/* `isob tlsload` (src/loadgen/tls.c): full TLS handshakes against isob
 * serve --http --tls, one after another; argv[0] is "tlsload".  Exit 0,
 * 1 (a reply or handshake failed), 2 (usage), 4 (built without libssl). */
int isob_tlsload_main(int argc, char **argv);

#endif
