/* The memcached text protocol: the parser on its own (proto.h), then the
 * parser and executor together (serve.h) against a real compartment, with
 * no sockets.  A "conversation" feeds bytes to one simulated connection in
 * chunks of a chosen size and collects every reply, so each case can also
 * check that chunking (down to one byte at a time) changes nothing. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isob_config.h"
#include "isobench/loadgen.h"
#include "isobench/proto.h"

#include "isobench/serve.h"
#include "tap.h"

/* The reply to "version". */
#define VERSION_LINE "VERSION " ISOB_PROTO_COMPAT_VERSION " " ISOB_PROTO_SERVER_NAME ISOB_VERSION "\r\n"

/* Heap of the test compartments: room for a few thousand entries. */
#define TEST_HEAP (8u << 20)

#define CHECK_STR(got, want)                                                          \
    do {                                                                              \
        const char *g_ = (got), *w_ = (want);                                         \
        if (strcmp(g_, w_) != 0) {                                                    \
            fprintf(stderr, "# %s:%d: got  \"%s\"\n#   want \"%s\"\n", __FILE__,         \
                    __LINE__, g_, w_);                                                \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

/* --- the parser alone ------------------------------------------------------ */

static int parse(struct isob_proto *p, const char *s, struct isob_proto_cmd *cmd, size_t *need)
{
    return isob_proto_parse(p, (const unsigned char *)s, strlen(s), cmd, need);
}

static void t_parse_set(void)
{
    struct isob_proto p;
    struct isob_proto_cmd c;
    size_t need;
    isob_proto_init(&p, 1024);
    const char *in = "set key 42 -1 3 noreply\r\nabc\r\nget x\r\n";
    CHECK_EQ_LONG(parse(&p, in, &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_SET);
    CHECK(c.key_len == 3 && memcmp(c.key, "key", 3) == 0);
    CHECK_EQ_LONG(c.flags, 42);
    CHECK_EQ_LONG(c.exptime, -1);
    CHECK_EQ_LONG(c.bytes, 3);
    CHECK(memcmp(c.data, "abc", 3) == 0);
    CHECK_EQ_LONG(c.noreply, 1);
    CHECK_EQ_LONG(c.consumed, strlen("set key 42 -1 3 noreply\r\nabc\r\n"));
}

static void t_parse_need_more(void)
{
    struct isob_proto p;
    struct isob_proto_cmd c;
    size_t need = 99;
    isob_proto_init(&p, 1024);
    CHECK_EQ_LONG(parse(&p, "", &c, &need), ISOB_PROTO_MORE);
    CHECK_EQ_LONG(parse(&p, "get ke", &c, &need), ISOB_PROTO_MORE);
    CHECK_EQ_LONG(need, 0);
    /* The line is complete, the data is not: the parser says how much the
     * whole command takes, so that the caller can make room. */
    CHECK_EQ_LONG(parse(&p, "set k 0 0 10\r\nabc", &c, &need), ISOB_PROTO_MORE);
    CHECK_EQ_LONG(need, strlen("set k 0 0 10\r\n") + 10 + 2);
}

static void t_parse_get_keys(void)
{
    struct isob_proto p;
    struct isob_proto_cmd c;
    size_t need;
    isob_proto_init(&p, 1024);
    CHECK_EQ_LONG(parse(&p, "gets  a bb   ccc \n", &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_GETS);
    const unsigned char *pos = c.keys, *k;
    size_t n, i = 0;
    const char *want[] = {"a", "bb", "ccc"};
    while (isob_proto_next_key(&c, &pos, &k, &n)) {
        CHECK(i < 3);
        CHECK(n == strlen(want[i]) && memcmp(k, want[i], n) == 0);
        i++;
    }
    CHECK_EQ_LONG(i, 3);
}

static void t_parse_cas_touch_gat(void)
{
    struct isob_proto p;
    struct isob_proto_cmd c;
    size_t need;
    isob_proto_init(&p, 1024);
    CHECK_EQ_LONG(parse(&p, "cas k 1 -5 2 18446744073709551615 noreply\r\nab\r\n", &c, &need),
                  ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_CAS);
    CHECK(c.cas == UINT64_MAX);
    CHECK_EQ_LONG(c.exptime, -5);
    CHECK_EQ_LONG(c.noreply, 1);
    CHECK(memcmp(c.data, "ab", 2) == 0);
    /* A last token that is not "noreply" is ignored, as memcached does. */
    CHECK_EQ_LONG(parse(&p, "set k 0 0 1 maybe\r\nx\r\n", &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_SET);
    CHECK_EQ_LONG(c.noreply, 0);
    CHECK_EQ_LONG(parse(&p, "touch key 2592001 noreply\r\n", &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_TOUCH);
    CHECK_EQ_LONG(c.exptime, 2592001);
    CHECK_EQ_LONG(c.noreply, 1);
    CHECK(c.key_len == 3 && memcmp(c.key, "key", 3) == 0);
    CHECK_EQ_LONG(parse(&p, "gats -1 a b\r\n", &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_GATS);
    CHECK_EQ_LONG(c.exptime, -1);
    CHECK(c.keys_len == 3 && memcmp(c.keys, "a b", 3) == 0);
    /* gat with no keys is a get of nothing, as memcached answers it. */
    CHECK_EQ_LONG(parse(&p, "gat 10\r\n", &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_GAT);
    CHECK_EQ_LONG(c.keys_len, 0);
    /* version and quit take no arguments, and ignore any, as memcached. */
    CHECK_EQ_LONG(parse(&p, "version 2\r\n", &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_VERSION);
    /* The caller may have the parser refuse a value it cannot hold. */
    p.refuse = 1;
    CHECK_EQ_LONG(parse(&p, "set k 0 0 5\r\nab", &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_ERROR);
    CHECK_STR(c.reply, "SERVER_ERROR out of memory storing object\r\n");
    CHECK_EQ_LONG(c.refused, ISOB_PROTO_NO_MEMORY);
    CHECK_EQ_LONG(c.unlink, 1);
    CHECK_EQ_LONG(p.refuse, 0);
    CHECK_EQ_LONG(p.swallow, 7);
}

static void t_parse_errors(void)
{
    static const struct { const char *in; const char *reply; int close; } cases[] = {
        {"bogus\r\n", "ERROR\r\n", 0},
        {"\r\n", "ERROR\r\n", 0},
        {"SET k 0 0 1\r\n", "ERROR\r\n", 0},  /* commands are case-sensitive */
        /* A wrong number of arguments is an unknown command, as in memcached. */
        {"set k 0 0\r\n", "ERROR\r\n", 0},
        {"set k 0 0 1 2 3\r\n", "ERROR\r\n", 0},
        {"cas k 0 0 1\r\n", "ERROR\r\n", 0},
        {"get\r\n", "ERROR\r\n", 0},
        {"gets   \r\n", "ERROR\r\n", 0},
        {"gat\r\n", "ERROR\r\n", 0},
        {"delete\r\n", "ERROR\r\n", 0},
        {"delete a b c d\r\n", "ERROR\r\n", 0},
        {"touch k\r\n", "ERROR\r\n", 0},
        {"flush_all 0 noreply x\r\n", "ERROR\r\n", 0},
        {"verbosity\r\n", "ERROR\r\n", 0},
        {"verbosity 1 2 3\r\n", "ERROR\r\n", 0},
        {"incr k\r\n", "ERROR\r\n", 0},
        {"decr k 1 2 3\r\n", "ERROR\r\n", 0},
        {"incr k x\r\n", "CLIENT_ERROR invalid numeric delta argument\r\n", 0},
        {"decr k -1\r\n", "CLIENT_ERROR invalid numeric delta argument\r\n", 0},
        {"incr k 18446744073709551616\r\n", "CLIENT_ERROR invalid numeric delta argument\r\n", 0},
        {"append k 0 0\r\n", "ERROR\r\n", 0},
        {"prepend k x 0 1\r\n", "CLIENT_ERROR bad command line format\r\n", 0},
        /* The meta commands' errors, as memcached 1.6 words them. */
        {"mg\r\n", "ERROR\r\n", 0},
        {"md\r\n", "ERROR\r\n", 0},
        {"mg k zz\r\n", "CLIENT_ERROR invalid flag\r\n", 0},
        {"mg k v v\r\n", "CLIENT_ERROR duplicate flag\r\n", 0},
        {"md k q q\r\n", "CLIENT_ERROR invalid or duplicate flag\r\n", 0},
        {"mg k Tx\r\n", "CLIENT_ERROR bad token in command line format\r\n", 0},
        {"mg k O12345678901234567890123456789012\r\n", "CLIENT_ERROR opaque token too long\r\n", 0},
        {"md k Cx\r\n", "CLIENT_ERROR invalid or duplicate flag\r\n", 0},
        {"ms k\r\n", "CLIENT_ERROR bad command line format\r\n", 0},
        {"ms k x\r\n", "CLIENT_ERROR bad command line format\r\n", 0},
        {"ms k 1 MZ\r\n", "CLIENT_ERROR invalid mode for ms M token\r\n", 0},
        {"ms k 1 Fx\r\n", "CLIENT_ERROR bad command line format\r\n", 0},
        {"set k x 0 1\r\n", "CLIENT_ERROR bad command line format\r\n", 0},
        {"set k 0 0 -1\r\n", "CLIENT_ERROR bad command line format\r\n", 0},
        {"set k 0 x 1\r\n", "CLIENT_ERROR bad command line format\r\n", 0},
        {"set k 0 2147483648 1\r\n", "CLIENT_ERROR bad command line format\r\n", 0},
        {"set k 4294967296 0 1\r\n", "CLIENT_ERROR bad command line format\r\n", 0},
        {"set k 0 0 99999999999\r\n", "CLIENT_ERROR bad command line format\r\n", 0},
        {"cas k 0 0 1 x\r\n", "CLIENT_ERROR bad command line format\r\n", 0},
        {"cas k 0 0 1 18446744073709551616\r\n", "CLIENT_ERROR bad command line format\r\n", 0},
        {"get a\tb\r\n", "CLIENT_ERROR bad command line format\r\n", 0},
        {"gat 10 a\tb\r\n", "CLIENT_ERROR bad command line format\r\n", 0},
        {"gat x k\r\n", "CLIENT_ERROR invalid exptime argument\r\n", 0},
        {"touch k x\r\n", "CLIENT_ERROR invalid exptime argument\r\n", 0},
        {"delete k 5\r\n", "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n", 0},
        {"flush_all x\r\n", "CLIENT_ERROR invalid exptime argument\r\n", 0},
        {"flush_all 10\r\n", "CLIENT_ERROR delayed flush_all not supported\r\n", 0},
        {"stats items\r\n", "ERROR\r\n", 0},
        {"verbosity x\r\n", "CLIENT_ERROR bad command line format\r\n", 0},
        {"a b c d e f g h i j\r\n", "ERROR\r\n", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct isob_proto p;
        struct isob_proto_cmd c;
        size_t need;
        isob_proto_init(&p, 1024);
        CHECK_EQ_LONG(parse(&p, cases[i].in, &c, &need), ISOB_PROTO_CMD);
        if (c.op != ISOB_OP_ERROR)
            fprintf(stderr, "# case %zu: %s", i, cases[i].in);
        CHECK_EQ_LONG(c.op, ISOB_OP_ERROR);
        CHECK_STR(c.reply, cases[i].reply);
        CHECK_EQ_LONG(c.close, cases[i].close);
        CHECK_EQ_LONG(c.noreply, 0);
        CHECK_EQ_LONG(c.consumed, strlen(cases[i].in));
    }
}

static void t_parse_key_limits(void)
{
    struct isob_proto p;
    struct isob_proto_cmd c;
    size_t need;
    char line[600];
    isob_proto_init(&p, 1024);
    char key[ISOB_PROTO_KEY_MAX + 2];
    memset(key, 'k', sizeof key - 1);
    key[ISOB_PROTO_KEY_MAX] = 0;
    snprintf(line, sizeof line, "get %s\r\n", key);
    CHECK_EQ_LONG(parse(&p, line, &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_GET);
    key[ISOB_PROTO_KEY_MAX] = 'k';
    key[ISOB_PROTO_KEY_MAX + 1] = 0;
    snprintf(line, sizeof line, "get %s\r\n", key);
    CHECK_EQ_LONG(parse(&p, line, &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_ERROR);
    snprintf(line, sizeof line, "set %s 0 0 1\r\nx\r\n", key);
    CHECK_EQ_LONG(parse(&p, line, &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_ERROR);
    /* memaslap's keys carry bytes 0x10..0x1f; memcached takes them, so
     * must we.  A NUL, a tab or a CR inside a key are refused. */
    CHECK_EQ_LONG(parse(&p, "get \x10\x1f" "ab\r\n", &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_GET);
    CHECK_EQ_LONG(isob_proto_parse(&p, (const unsigned char *)"get a\0b\r\n", 9, &c, &need),
                  ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_ERROR);
    CHECK_EQ_LONG(parse(&p, "get a\rb\r\n", &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_ERROR);
}

static void t_parse_line_too_long(void)
{
    struct isob_proto p;
    struct isob_proto_cmd c;
    size_t need;
    static unsigned char buf[ISOB_PROTO_GET_LINE_MAX + 16];
    isob_proto_init(&p, 1024);
    /* Any line but get/gets: ISOB_PROTO_LINE_MAX bytes and no end yet is
     * still fine, one more is not. */
    memset(buf, 'x', sizeof buf);
    CHECK_EQ_LONG(isob_proto_parse(&p, buf, ISOB_PROTO_LINE_MAX, &c, &need), ISOB_PROTO_MORE);
    CHECK_EQ_LONG(isob_proto_parse(&p, buf, ISOB_PROTO_LINE_MAX + 1, &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_ERROR);
    CHECK_EQ_LONG(c.close, 1);
    CHECK_STR(c.reply, "CLIENT_ERROR line too long\r\n");
    /* A complete line that is too long is refused the same way. */
    buf[ISOB_PROTO_LINE_MAX + 1] = '\n';
    CHECK_EQ_LONG(isob_proto_parse(&p, buf, ISOB_PROTO_LINE_MAX + 2, &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.close, 1);
    /* get lines may be longer (many keys), up to their own bound. */
    memcpy(buf, "get ", 4);
    for (size_t i = 4; i < sizeof buf; i++)
        buf[i] = i % 100 == 0 ? ' ' : 'k';
    CHECK_EQ_LONG(isob_proto_parse(&p, buf, ISOB_PROTO_GET_LINE_MAX - 1, &c, &need),
                  ISOB_PROTO_MORE);
    CHECK_EQ_LONG(isob_proto_parse(&p, buf, ISOB_PROTO_GET_LINE_MAX, &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.close, 1);
    buf[ISOB_PROTO_GET_LINE_MAX - 1] = '\n';
    CHECK_EQ_LONG(isob_proto_parse(&p, buf, ISOB_PROTO_GET_LINE_MAX, &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_GET);
}

static void t_parse_too_large_swallows(void)
{
    struct isob_proto p;
    struct isob_proto_cmd c;
    size_t need;
    isob_proto_init(&p, 10);
    const char *line = "set k 0 0 11\r\n";
    CHECK_EQ_LONG(parse(&p, line, &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_ERROR);
    CHECK_STR(c.reply, "SERVER_ERROR object too large for cache\r\n");
    CHECK_EQ_LONG(c.refused, ISOB_PROTO_TOO_LARGE);
    CHECK_EQ_LONG(c.unlink, 1);
    CHECK_EQ_LONG(c.consumed, strlen(line));
    /* The 11 bytes and their "\r\n" go, in whatever pieces they come. */
    CHECK_EQ_LONG(parse(&p, "0123456", &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_NONE);
    CHECK_EQ_LONG(c.consumed, 7);
    CHECK_EQ_LONG(parse(&p, "890\r\nget k\r\n", &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_NONE);
    CHECK_EQ_LONG(c.consumed, 6);
    CHECK_EQ_LONG(parse(&p, "get k\r\n", &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_GET);
    /* add is refused the same way but deletes nothing. */
    CHECK_EQ_LONG(parse(&p, "add k 0 0 11 noreply\r\n", &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.unlink, 0);
    CHECK_EQ_LONG(c.noreply, 1);
}

static void t_parse_binary_junk(void)
{
    /* Deterministic junk, including NULs, CRs and LFs: the parser must
     * always make progress and never read out of bounds (the fuzzer
     * checks the latter much harder under ASan). */
    static unsigned char buf[8192];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof buf; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    buf[0] = 0x81;  /* not 0x80, the binary protocol's magic byte: that one
                     * ends the connection at once (t_parse_binary_refused) */
    struct isob_proto p;
    isob_proto_init(&p, 1024);
    size_t off = 0, cmds = 0;
    while (off < sizeof buf) {
        struct isob_proto_cmd c;
        size_t need;
        if (isob_proto_parse(&p, buf + off, sizeof buf - off, &c, &need) == ISOB_PROTO_MORE)
            break;
        CHECK(c.consumed > 0 && c.consumed <= sizeof buf - off);
        if (c.op == ISOB_OP_ERROR)
            CHECK(c.reply != NULL);
        off += c.consumed;
        cmds++;
        if (c.close)
            break;
    }
    CHECK(cmds > 0);
}

/* --- HTTP/1.x GET (--http) -------------------------------------------------- */

static int hparse(struct isob_proto *p, const char *s, struct isob_proto_cmd *cmd)
{
    size_t need = 99;
    int r = isob_http_parse(p, (const unsigned char *)s, strlen(s), cmd, &need);
    CHECK_EQ_LONG(need, 0);
    return r;
}

static void t_http_parse_get(void)
{
    struct isob_proto p;
    struct isob_proto_cmd c;
    isob_proto_init(&p, 1024);
    /* HTTP/1.0 closes unless asked to keep the connection; 1.1 keeps it
     * unless asked to close. */
    static const struct { const char *in; int keep; } cases[] = {
        {"GET / HTTP/1.0\r\n\r\n", 0},
        {"GET / HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n", 1},
        {"GET / HTTP/1.0\r\nconnection:Keep-Alive\r\n\r\n", 1},
        {"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1},
        {"GET / HTTP/1.1\r\nConnection: TE, close\r\n\r\n", 0},
        {"GET / HTTP/1.0\n\n", 0},
        {"\r\nGET / HTTP/1.0\r\nContent-Length: 0\r\n\r\n", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_LONG(hparse(&p, cases[i].in, &c), ISOB_PROTO_CMD);
        CHECK_EQ_LONG(c.op, ISOB_OP_HTTP_GET);
        CHECK(c.key_len == 1 && c.key[0] == '/');
        CHECK_EQ_LONG(c.keep_alive, cases[i].keep);
        CHECK_EQ_LONG(c.consumed, strlen(cases[i].in));
    }
    /* Pipelined: one request at a time, the path as sent. */
    const char two[] = "GET /a/b?c HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n";
    CHECK_EQ_LONG(hparse(&p, two, &c), ISOB_PROTO_CMD);
    CHECK(c.key_len == 6 && memcmp(c.key, "/a/b?c", 6) == 0);
    CHECK_EQ_LONG(c.consumed, strlen("GET /a/b?c HTTP/1.1\r\n\r\n"));
    /* A head arriving in pieces: more is needed until its empty line, and
     * the line split across two reads is still found. */
    const char *head = "GET / HTTP/1.0\r\nHost: x\r\n\r\n";
    size_t n = strlen(head), need;
    for (size_t cut = 0; cut < n; cut++)
        CHECK_EQ_LONG(isob_http_parse(&p, (const unsigned char *)head, cut, &c, &need),
                      ISOB_PROTO_MORE);
    CHECK_EQ_LONG(isob_http_parse(&p, (const unsigned char *)head, n, &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.consumed, n);
}

static void t_http_parse_refusals(void)
{
    struct isob_proto p;
    struct isob_proto_cmd c;
    isob_proto_init(&p, 1024);
    static const struct { const char *in, *status; } cases[] = {
        {"POST / HTTP/1.0\r\n\r\n", "HTTP/1.0 405 "},
        {"get / HTTP/1.0\r\n\r\n", "HTTP/1.0 405 "},
        {"GET / HTTP/2.0\r\n\r\n", "HTTP/1.0 505 "},
        {"GET / FTP/1.0\r\n\r\n", "HTTP/1.0 400 "},
        {"GET /\r\n\r\n", "HTTP/1.0 400 "},
        {"GET  / HTTP/1.0\r\n\r\n", "HTTP/1.0 400 "},
        {"GET x HTTP/1.0\r\n\r\n", "HTTP/1.0 400 "},
        {"GET / HTTP/1.0\r\nno colon\r\n\r\n", "HTTP/1.0 400 "},
        {"GET / HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc", "HTTP/1.0 400 "},
        {"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.0 400 "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_LONG(hparse(&p, cases[i].in, &c), ISOB_PROTO_CMD);
        CHECK_EQ_LONG(c.op, ISOB_OP_ERROR);
        CHECK_EQ_LONG(c.close, 1);
        if (strncmp(c.reply, cases[i].status, strlen(cases[i].status)) != 0)
            fprintf(stderr, "# %s -> %s", cases[i].in, c.reply);
        CHECK(strncmp(c.reply, cases[i].status, strlen(cases[i].status)) == 0);
        CHECK(strstr(c.reply, "Connection: close\r\n\r\n") != NULL);
    }
    /* A path longer than a key may be, and a head that never ends. */
    static char line[ISOB_HTTP_HEAD_MAX + 64];
    int n = snprintf(line, sizeof line, "GET /%0*d HTTP/1.0\r\n\r\n", ISOB_PROTO_KEY_MAX, 0);
    CHECK(n > 0);
    CHECK_EQ_LONG(hparse(&p, line, &c), ISOB_PROTO_CMD);
    CHECK(strncmp(c.reply, "HTTP/1.0 414 ", 13) == 0);
    memset(line, 'a', sizeof line - 1);
    memcpy(line, "GET / HTTP/1.0\r\nX: ", 19);
    line[sizeof line - 1] = 0;
    CHECK_EQ_LONG(hparse(&p, line, &c), ISOB_PROTO_CMD);
    CHECK(strncmp(c.reply, "HTTP/1.0 431 ", 13) == 0);
    CHECK_EQ_LONG(c.close, 1);
}

/* --- parser and executor, no sockets --------------------------------------- */

/* One simulated connection: bytes go in as the server reads them (into
 * the connection's own buffer when it offers one, else through a scratch
 * buffer that is overwritten right after), and every reply is taken out
 * as a client that always reads would. */
struct sim {
    struct isob_conn c;
    unsigned char *got;   /* all replies so far */
    size_t got_len;
    int closed;
};

#define SIM_GOT (4u << 20)

static void sim_init(struct isob_serve *s, struct sim *c)
{
    static unsigned char got[SIM_GOT];
    memset(c, 0, sizeof *c);
    isob_conn_init(&c->c, s);
    c->got = got;
}

/* Take every reply out, `piece` bytes at a time (0: all it offers). */
static void sim_drain(struct sim *c, size_t piece)
{
    for (;;) {
        size_t n;
        const unsigned char *p = isob_conn_output(&c->c, &n);
        if (!p)
            break;
        if (piece && n > piece)
            n = piece;
        CHECK(c->got_len + n < SIM_GOT);
        memcpy(c->got + c->got_len, p, n);
        c->got_len += n;
        isob_conn_sent(&c->c, n);
    }
    if (isob_conn_wants(&c->c) & ISOB_CONN_DONE)
        c->closed = 1;
}

/* Deliver bytes to the connection, as socket reads would, and reply. */
static void sim_feed(struct sim *c, const void *in, size_t n)
{
    static unsigned char scratch[4096];
    const unsigned char *p = in;
    while (n && !c->closed) {
        unsigned char *buf;
        size_t room;
        if (!isob_conn_reading(&c->c, &buf, &room)) {
            size_t before = c->got_len;
            sim_drain(c, 0);
            /* Not reading with nothing to send would be a stall. */
            CHECK(c->closed || c->got_len > before);
            continue;
        }
        if (!buf) {
            buf = scratch;
            room = room < sizeof scratch ? room : sizeof scratch;
        }
        size_t take = n < room ? n : room;
        memcpy(buf, p, take);
        isob_conn_input(&c->c, buf, take);
        memset(scratch, 0xee, sizeof scratch);  /* nothing may point into it now */
        p += take;
        n -= take;
        sim_drain(c, 0);
    }
}

/* Bytes of the last replies sim_take returned (they may hold NULs). */
static size_t conv_len;

/* Everything replied so far, as a string; the record is emptied. */
static char *sim_take(struct sim *c)
{
    static char text[SIM_GOT + 1];
    if (c->got_len)
        memcpy(text, c->got, c->got_len);
    text[c->got_len] = 0;
    conv_len = c->got_len;
    c->got_len = 0;
    return text;
}

/* One connection's whole conversation, delivered in chunks of `chunk`
 * bytes (0: all at once); it is then closed, and must hold no memory.
 * Returns the replies. */
static char *converse_n(struct isob_serve *s, const void *in, size_t n, size_t chunk, int *closed)
{
    static struct sim c;
    size_t held_before = s->mem.used - (size_t)s->mem.pooled * ISOB_SERVE_BUF_SMALL;
    sim_init(s, &c);
    const unsigned char *p = in;
    if (chunk == 0)
        chunk = n;
    for (size_t off = 0; off < n; off += chunk)
        sim_feed(&c, p + off, n - off < chunk ? n - off : chunk);
    if (closed)
        *closed = c.closed;
    char *r = sim_take(&c);
    isob_conn_fini(&c.c);
    /* Beyond the pool of small buffers, it left nothing charged. */
    CHECK_EQ_LONG(s->mem.used - (size_t)s->mem.pooled * ISOB_SERVE_BUF_SMALL, held_before);
    return r;
}

static char *converse(struct isob_serve *s, const char *in)
{
    return converse_n(s, in, strlen(in), 0, NULL);
}

static void serve_on(struct isob_serve *s, const char *mech)
{
    const struct isob_mechanism *m = isob_mechanism_find(mech);
    CHECK(m != NULL);
    char why[256] = "";
    if (m->probe(why, sizeof why) != 0)
        SKIP("%s: %s", mech, why);
    int rc = isob_serve_init(s, m, TEST_HEAP, isob_serve_value_limit(), -1, SIZE_MAX);
    if (rc)
        fprintf(stderr, "# isob_serve_init(%s): %s\n", mech, isob_strerror(rc));
    CHECK_EQ_LONG(rc, 0);
}

/* The commands of a typical session and their replies, on any mechanism. */
static const char SESSION_IN[] =
    "set a 0 0 1\r\n1\r\n"
    "set b 7 0 3\r\nxyz\r\n"
    "get a b c\r\n"
    "gets b\r\n"
    "add a 0 0 1\r\n2\r\n"
    "add c 5 0 2\r\ncc\r\n"
    "replace d 0 0 1\r\n4\r\n"
    "replace a 9 0 2\r\naa\r\n"
    "get a c d\r\n"
    "delete b\r\n"
    "delete b\r\n"
    "get b\r\n"
    "set e 0 0 0\r\n\r\n"
    "get e\n"
    "flush_all\r\n"
    "get a c e\r\n"
    "version\r\n"
    "verbosity 1\r\n";
static const char SESSION_OUT[] =
    "STORED\r\n"
    "STORED\r\n"
    "VALUE a 0 1\r\n1\r\nVALUE b 7 3\r\nxyz\r\nEND\r\n"
    "VALUE b 7 3 2\r\nxyz\r\nEND\r\n"
    "NOT_STORED\r\n"
    "STORED\r\n"
    "NOT_STORED\r\n"
    "STORED\r\n"
    "VALUE a 9 2\r\naa\r\nVALUE c 5 2\r\ncc\r\nEND\r\n"
    "DELETED\r\n"
    "NOT_FOUND\r\n"
    "END\r\n"
    "STORED\r\n"
    "VALUE e 0 0\r\n\r\nEND\r\n"
    "OK\r\n"
    "END\r\n"
    VERSION_LINE
    "OK\r\n";

static void check_session(const char *mech)
{
    /* Pipelined in one piece, then in pieces of every small size, down to
     * one byte at a time: the replies never change.  Each on a new server,
     * since cas uniques are never reused. */
    size_t chunks[] = {0, 1, 2, 3, 5, 7, 13, 64};
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        struct isob_serve s;
        serve_on(&s, mech);
        char *got = converse_n(&s, SESSION_IN, sizeof SESSION_IN - 1, chunks[i], NULL);
        if (strcmp(got, SESSION_OUT) != 0)
            fprintf(stderr, "# in chunks of %zu bytes\n", chunks[i]);
        CHECK_STR(got, SESSION_OUT);
        isob_serve_fini(&s);
    }
}

/* --http against a real compartment: the document start-up stored at "/",
 * a 404 for another path, keep-alive as asked, and every 200 reply is what
 * isob loadgen accepts. */
static void t_http_serves_document(void)
{
    struct isob_serve s;
    serve_on(&s, "direct");
    s.http = 1;
    struct isob_serve_startup su = {0};
    CHECK_EQ_LONG(isob_serve_startup(&s, &su), 0);
    const char in[] = "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                      "GET /nothing HTTP/1.1\r\n\r\n"
                      "GET / HTTP/1.0\r\n\r\n"
                      "GET / HTTP/1.0\r\n\r\n";
    size_t chunks[] = {0, 1, 7};
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
        int closed = 0;
        char *got = converse_n(&s, in, sizeof in - 1, chunks[k], &closed);
        size_t len = conv_len, used = 0;
        int keep = 0;
        char why[200] = "";
        CHECK_EQ_LONG(isob_lg_check_http(got, len, ISOB_HTTP_DOC, ISOB_HTTP_DOC_BYTES, &used, &keep,
                                         why, sizeof why), ISOB_LG_OK);
        CHECK_EQ_LONG(keep, 1);
        got += used;
        len -= used;
        const char nf[] = "HTTP/1.0 404 Not Found\r\n";
        CHECK(strncmp(got, nf, sizeof nf - 1) == 0);
        CHECK(strstr(got, "Connection: keep-alive\r\n") != NULL);
        char *second = strstr(got, "HTTP/1.0 200 ");
        CHECK(second != NULL);
        len -= (size_t)(second - got);
        CHECK_EQ_LONG(isob_lg_check_http(second, len, ISOB_HTTP_DOC, ISOB_HTTP_DOC_BYTES, &used,
                                         &keep, why, sizeof why), ISOB_LG_OK);
        CHECK_EQ_LONG(keep, 0);
        /* The request without keep-alive ends the connection: the fourth
         * is never answered. */
        CHECK_EQ_LONG(used, len);
        CHECK_EQ_LONG(closed, 1);
    }
    CHECK_EQ_LONG(s.st.get_hits, 6);
    CHECK_EQ_LONG(s.st.get_misses, 3);
    isob_serve_fini(&s);
}

/* Start-up stores loadgen's keys with loadgen's values and the start-up
 * items, each as isob_serve_startup_value makes it, and counts them. */
static void t_startup_state(void)
{
    struct isob_serve s;
    const struct isob_mechanism *m = isob_mechanism_find("direct");
    struct isob_serve_startup su = {.preload_keys = 100, .preload_value = 45, .startup_mb = 1};
    CHECK_EQ_LONG(isob_serve_init(&s, m, TEST_HEAP + isob_serve_startup_heap(&su),
                                  isob_serve_value_limit(), -1, SIZE_MAX), 0);
    CHECK_EQ_LONG(isob_serve_startup(&s, &su), 0);
    CHECK_EQ_LONG(s.preloaded, 100);
    CHECK_EQ_LONG(s.startup_items, 16);
    /* Start-up is no client's doing. */
    CHECK_EQ_LONG(s.st.cmd_set, 0);
    char key[32], want[256], v[45];
    isob_lg_key(99, key, sizeof key);
    isob_lg_value(99, v, sizeof v);
    snprintf(want, sizeof want, "VALUE %s 0 45\r\n%.45s\r\nEND\r\n", key, v);
    char get[64];
    snprintf(get, sizeof get, "get %s\r\n", key);
    CHECK_STR(converse(&s, get), want);
    static unsigned char item[ISOB_SERVE_STARTUP_VALUE];
    isob_serve_startup_value(15, item, sizeof item);
    char *got = converse(&s, "get startup_000015\r\n");
    const char head[] = "VALUE startup_000015 0 65502\r\n";
    CHECK(strncmp(got, head, sizeof head - 1) == 0);
    CHECK(memcmp(got + sizeof head - 1, item, sizeof item) == 0);
    CHECK_STR(converse(&s, "get startup_000016\r\n"), "END\r\n");
    isob_serve_fini(&s);
}

/* The commands memcached's conformance test and modern clients add to the
 * classic set: incr, decr (the result keeps the value's length, padded
 * with spaces, as memcached does), append, prepend, verbosity and the meta
 * commands.  The replies are memcached 1.6.18's own to the same input
 * (tests/python/test_serve_memcached.py compares the two live). */
static const char NEW_IN[] =
    "set n 5 0 2\r\n"
    "10\r\n"
    "incr n 5\r\n"
    "decr n 6\r\n"
    "get n\r\n"
    "incr n 18446744073709551615\r\n"
    "get n\r\n"
    "incr n 1 noreply\r\n"
    "decr nope 1\r\n"
    "set t 0 0 3\r\n"
    "abc\r\n"
    "incr t 1\r\n"
    "append t 9 0 2\r\n"
    "de\r\n"
    "prepend t 9 0 2\r\n"
    "xy\r\n"
    "get t\r\n"
    "append nope 0 0 1\r\n"
    "z\r\n"
    "verbosity 1\r\n"
    "verbosity 1 noreply\r\n"
    "verbosity noreply\r\n"
    "mn\r\n"
    "ms m 3 F7 k O1\r\n"
    "abc\r\n"
    "mg m v f t s k O2\r\n"
    "mg m q\r\n"
    "mg miss v q\r\n"
    "mg miss k O3\r\n"
    "ms m 2 ME\r\n"
    "zz\r\n"
    "ms m 2 MA q\r\n"
    "de\r\n"
    "ms m 2 MP\r\n"
    "xy\r\n"
    "ms m2 2 MR\r\n"
    "zz\r\n"
    "ms m 2 C1\r\n"
    "zz\r\n"
    "mg m v\r\n"
    "md m C1 k\r\n"
    "md m q\r\n"
    "md m O4\r\n"
    "ms x 2 Q\r\n"
    "ab\r\n"
    "mn\r\n";
static const char NEW_OUT[] =
    "STORED\r\n"
    "15\r\n"
    "9\r\n"
    "VALUE n 5 2\r\n"
    "9 \r\n"
    "END\r\n"
    "8\r\n"
    "VALUE n 5 2\r\n"
    "8 \r\n"
    "END\r\n"
    "NOT_FOUND\r\n"
    "STORED\r\n"
    "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
    "STORED\r\n"
    "STORED\r\n"
    "VALUE t 0 7\r\n"
    "xyabcde\r\n"
    "END\r\n"
    "NOT_STORED\r\n"
    "OK\r\n"
    "MN\r\n"
    "HD km O1\r\n"
    "VA 3 f7 t-1 s3 km O2\r\n"
    "abc\r\n"
    "HD\r\n"
    "EN kmiss O3\r\n"
    "NS\r\n"
    "HD\r\n"
    "NS\r\n"
    "EX\r\n"
    "VA 7\r\n"
    "xyabcde\r\n"
    "EX km\r\n"
    "NF O4\r\n"
    "CLIENT_ERROR invalid flag\r\n"
    "MN\r\n";

static void check_new(const char *mech)
{
    size_t chunks[] = {0, 1, 3, 7};
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        struct isob_serve s;
        serve_on(&s, mech);
        char *got = converse_n(&s, NEW_IN, sizeof NEW_IN - 1, chunks[i], NULL);
        if (strcmp(got, NEW_OUT) != 0)
            fprintf(stderr, "# in chunks of %zu bytes\n", chunks[i]);
        CHECK_STR(got, NEW_OUT);
        isob_serve_fini(&s);
    }
}

static void t_new_commands_direct(void) { check_new("direct"); }
static void t_new_commands_process_futex(void) { check_new("process-futex"); }

/* A binary-protocol request is refused at once, with only its first byte
 * in: one response header of that protocol ("not supported", its body the
 * reason) and the connection closed, so that a binary client fails fast
 * instead of waiting for its time-out. */
static void t_binary_refused(void)
{
    struct isob_proto p;
    struct isob_proto_cmd c;
    size_t need;
    isob_proto_init(&p, 1024);
    static const unsigned char magic[] = {0x80};
    CHECK_EQ_LONG(isob_proto_parse(&p, magic, 1, &c, &need), ISOB_PROTO_CMD);
    CHECK_EQ_LONG(c.op, ISOB_OP_ERROR);
    CHECK_EQ_LONG(c.close, 1);
    CHECK_EQ_LONG(c.consumed, 1);
    CHECK(c.reply_len > 24);
    const unsigned char *r = (const unsigned char *)c.reply;
    CHECK_EQ_LONG(r[0], 0x81);
    CHECK_EQ_LONG((r[6] << 8) | r[7], 0x83);
    CHECK_EQ_LONG(((uint32_t)r[8] << 24) | ((uint32_t)r[9] << 16) | ((uint32_t)r[10] << 8) | r[11],
                  c.reply_len - 24);
    /* Through the server: those bytes, then the close. */
    struct isob_serve s;
    serve_on(&s, "direct");
    static const unsigned char get[] = {0x80, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
                                        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
                                        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 'k'};
    int closed = 0;
    char *got = converse_n(&s, get, sizeof get, 0, &closed);
    CHECK_EQ_LONG(closed, 1);
    CHECK_EQ_LONG((unsigned char)got[0], 0x81);
    CHECK(strstr(got + 24, "text protocol") != NULL);
    isob_serve_fini(&s);
}

static void t_session_direct(void) { check_session("direct"); }
static void t_session_process_futex(void) { check_session("process-futex"); }

static void t_noreply(void)
{
    struct isob_serve s;
    serve_on(&s, "direct");
    CHECK_STR(converse(&s,
                       "set a 1 0 1 noreply\r\na\r\n"
                       "set b 2 0 1 noreply\r\nb\r\n"
                       "add a 0 0 1 noreply\r\nx\r\n"
                       "replace b 3 0 2 noreply\r\nbb\r\n"
                       "replace z 0 0 1 noreply\r\nz\r\n"
                       "delete a noreply\r\n"
                       "delete a 0 noreply\r\n"
                       "verbosity 0 noreply\r\n"
                       "get a b z\r\n"),
              "VALUE b 3 2\r\nbb\r\nEND\r\n");
    CHECK_STR(converse(&s, "flush_all noreply\r\nget b\r\n"), "END\r\n");
    CHECK_STR(converse(&s, "flush_all 0 noreply\r\nflush_all 0\r\n"), "OK\r\n");
    isob_serve_fini(&s);
}

static void t_flags_round_trip(void)
{
    struct isob_serve s;
    serve_on(&s, "direct");
    CHECK_STR(converse(&s,
                       "set f0 0 0 1\r\na\r\n"
                       "set f1 1 0 1\r\nb\r\n"
                       "set fmax 4294967295 0 1\r\nc\r\n"
                       "set fodd 305419896 0 1\r\nd\r\n"
                       "get f0 f1 fmax fodd\r\n"),
              "STORED\r\nSTORED\r\nSTORED\r\nSTORED\r\n"
              "VALUE f0 0 1\r\na\r\nVALUE f1 1 1\r\nb\r\n"
              "VALUE fmax 4294967295 1\r\nc\r\nVALUE fodd 305419896 1\r\nd\r\nEND\r\n");
    isob_serve_fini(&s);
}

static void t_binary_values(void)
{
    struct isob_serve s;
    serve_on(&s, "direct");
    /* A value may hold anything, "\r\n" and NULs included: only its length
     * frames it. */
    static const char in[] = "set bin 0 0 6\r\n\r\n\0\r\n\n\r\nget bin\r\n";
    static const char want[] = "STORED\r\nVALUE bin 0 6\r\n\r\n\0\r\n\n\r\nEND\r\n";
    for (size_t chunk = 0; chunk <= 1; chunk++) {
        char *got = converse_n(&s, in, sizeof in - 1, chunk, NULL);
        CHECK(conv_len == sizeof want - 1 && memcmp(got, want, sizeof want - 1) == 0);
    }
    isob_serve_fini(&s);
}

static void t_errors_keep_stream_and_data(void)
{
    struct isob_serve s;
    serve_on(&s, "direct");
    CHECK_STR(converse(&s, "set keep 3 0 4\r\nsafe\r\n"), "STORED\r\n");
    size_t limit = s.max_value;
    char big[128];
    /* Too large: refused, its data skipped, the stream goes on.  A set
     * that is refused removes the key's old value, as memcached does. */
    CHECK_STR(converse(&s, "set gone 0 0 1\r\nx\r\n"), "STORED\r\n");
    snprintf(big, sizeof big, "set gone 0 0 %zu\r\n", limit + 1);
    static char msg[ISOB_PROTO_DEFAULT_MAX_VALUE + 256];
    CHECK(limit + 1 + 64 <= sizeof msg);
    size_t n = strlen(big);
    memcpy(msg, big, n);
    memset(msg + n, 'v', limit + 1);
    n += limit + 1;
    memcpy(msg + n, "\r\nget gone keep\r\n", 17);
    n += 17;
    for (size_t chunk = 0; chunk <= 7; chunk += 7) {
        char *got = converse_n(&s, msg, n, chunk, NULL);
        CHECK_STR(got, "SERVER_ERROR object too large for cache\r\nVALUE keep 3 4\r\nsafe\r\nEND\r\n");
    }
    /* Exactly the limit is fine. */
    snprintf(big, sizeof big, "set edge 0 0 %zu\r\n", limit);
    n = strlen(big);
    memcpy(msg, big, n);
    memset(msg + n, 'e', limit);
    memcpy(msg + n + limit, "\r\n", 2);
    memcpy(msg + n + limit + 2, "get edge\r\n", 10);
    char *got = converse_n(&s, msg, n + limit + 12, 0, NULL);
    char head[64];
    int hn = snprintf(head, sizeof head, "STORED\r\nVALUE edge 0 %zu\r\n", limit);
    CHECK_EQ_LONG(conv_len, (size_t)hn + limit + 2 + 5);
    CHECK(memcmp(got, head, (size_t)hn) == 0);
    size_t same = 0;
    while (same < limit && got[hn + same] == 'e')
        same++;
    CHECK_EQ_LONG(same, limit);
    CHECK(memcmp(got + hn + limit, "\r\nEND\r\n", 7) == 0);

    /* A wrong byte count: the block is not followed by "\r\n". */
    CHECK_STR(converse(&s, "set keep 0 0 2\r\nabc\r\nget keep\r\n"),
              "CLIENT_ERROR bad data chunk\r\nERROR\r\nVALUE keep 3 4\r\nsafe\r\nEND\r\n");
    CHECK_STR(converse(&s, "set keep 0 0 2 noreply\r\nabcd\r\nget keep\r\n"),
              "ERROR\r\nVALUE keep 3 4\r\nsafe\r\nEND\r\n");
    /* append's and prepend's data is data, never run as commands; the
     * item keeps its flags. */
    CHECK_STR(converse(&s, "append keep 0 0 9\r\nflush_all\r\n"
                           "prepend keep 0 0 9 noreply\r\nflush_all\r\nget keep\r\n"
                           "set keep 3 0 4\r\nsafe\r\n"),
              "STORED\r\nVALUE keep 3 22\r\nflush_allsafeflush_all\r\nEND\r\nSTORED\r\n");
    /* Unknown commands, wrong argument counts, malformed lines, junk. */
    CHECK_STR(converse(&s, "incr keep 1\r\nset keep\r\ndelete\r\nset keep x 0 1\r\n"
                           "get keep\r\n"),
              "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
              "ERROR\r\nERROR\r\nCLIENT_ERROR bad command line format\r\n"
              "VALUE keep 3 4\r\nsafe\r\nEND\r\n");
    static const unsigned char junk[] = {0x81, 0x00, 0x00, 0x05, 0xff, 0xfe, '\r', '\n',
                                         'g', 'e', 't', ' ', 'k', 'e', 'e', 'p', '\n'};
    CHECK_STR(converse_n(&s, junk, sizeof junk, 0, NULL), "ERROR\r\nVALUE keep 3 4\r\nsafe\r\nEND\r\n");
    isob_serve_fini(&s);
}

static void t_close_cases(void)
{
    struct isob_serve s;
    serve_on(&s, "direct");
    int closed;
    /* quit closes without a reply; what came before it is answered, what
     * comes after is not read. */
    CHECK_STR(converse_n(&s, "version\r\nquit\r\nversion\r\n", 24, 0, &closed),
              VERSION_LINE);
    CHECK_EQ_LONG(closed, 1);
    /* A line that never ends: an error, then the connection closes. */
    static char line[ISOB_PROTO_LINE_MAX + 100];
    memset(line, 'z', sizeof line);
    CHECK_STR(converse_n(&s, line, sizeof line, 0, &closed), "CLIENT_ERROR line too long\r\n");
    CHECK_EQ_LONG(closed, 1);
    CHECK_STR(converse_n(&s, line, sizeof line, 1, &closed), "CLIENT_ERROR line too long\r\n");
    CHECK_EQ_LONG(closed, 1);
    isob_serve_fini(&s);
}

static void t_stats(void)
{
    struct isob_serve s;
    serve_on(&s, "direct");
    converse(&s, "set a 0 0 1\r\na\r\nset b 0 0 1\r\nb\r\nget a x\r\ndelete b\r\n");
    char *st = converse(&s, "stats\r\n");
    static const char *want[] = {
        "STAT pid ", "STAT uptime ", "STAT curr_connections ", "STAT cmd_get 2\r\n",
        "STAT cmd_set 2\r\n", "STAT get_hits 1\r\n", "STAT get_misses 1\r\n",
        "STAT delete_hits 1\r\n", "STAT curr_items 1\r\n", "STAT total_items 2\r\n",
        "STAT bytes ", "STAT mechanism direct\r\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!strstr(st, want[i])) {
            fprintf(stderr, "# missing %s in\n", want[i]);
            fputs(st, stderr);
        }
        CHECK(strstr(st, want[i]) != NULL);
    }
    CHECK(strlen(st) > 5 && strcmp(st + strlen(st) - 5, "END\r\n") == 0);
    CHECK_STR(converse(&s, "stats reset\r\n"), "RESET\r\n");
    st = converse(&s, "stats\r\n");
    CHECK(strstr(st, "STAT cmd_get 0\r\n") != NULL);
    CHECK(strstr(st, "STAT curr_items 1\r\n") != NULL);  /* the store is not reset */
    isob_serve_fini(&s);
}

/* --- time, cas, touch, eviction ---------------------------------------------- */

/* A clock the test moves: monotonic seconds since an arbitrary start, and
 * a Unix time that moves with it. */
static uint64_t fake_mono_s = 1000;
static int64_t fake_unix_s = 1700000000;
static void fake_clock(struct isob_serve_time *now)
{
    now->mono_ns = fake_mono_s * 1000000000ull;
    now->unix_s = fake_unix_s;
}
static void fake_advance(uint64_t secs)
{
    fake_mono_s += secs;
    fake_unix_s += (int64_t)secs;
}

/* A server on the fake clock, started at its current time. */
static void serve_fake_time(struct isob_serve *s)
{
    serve_on(s, "direct");
    s->clock = fake_clock;
    struct isob_serve_time t;
    fake_clock(&t);
    s->started_ns = t.mono_ns;
    s->epoch_unix = t.unix_s - ISOB_SERVE_TIME_BASE;
}

static void t_exptime(void)
{
    struct isob_serve s;
    serve_fake_time(&s);
    char cmd[256];
    /* Relative: gone exactly when the seconds have passed, as in memcached
     * (an item is expired once its time is not after the clock). */
    CHECK_STR(converse(&s, "set r 0 10 1\r\nr\r\nset never 0 0 1\r\nn\r\n"), "STORED\r\nSTORED\r\n");
    fake_advance(9);
    CHECK_STR(converse(&s, "get r\r\n"), "VALUE r 0 1\r\nr\r\nEND\r\n");
    fake_advance(1);
    CHECK_STR(converse(&s, "get r never\r\n"), "VALUE never 0 1\r\nn\r\nEND\r\n");
    /* Negative: stored, and never seen; an add then succeeds. */
    CHECK_STR(converse(&s, "set neg 0 -1 1\r\nx\r\nget neg\r\nadd neg 0 0 1\r\ny\r\nget neg\r\n"),
              "STORED\r\nEND\r\nSTORED\r\nVALUE neg 0 1\r\ny\r\nEND\r\n");
    /* Absolute beyond 30 days: a Unix time, in the past or in the future. */
    snprintf(cmd, sizeof cmd, "set past 0 %lld 1\r\np\r\nset future 0 %lld 1\r\nf\r\n"
             "set days30 0 %d 1\r\nd\r\nget past future days30\r\n",
             (long long)fake_unix_s - 5, (long long)fake_unix_s + 100, ISOB_SERVE_RELATIVE_MAX);
    CHECK_STR(converse(&s, cmd), "STORED\r\nSTORED\r\nSTORED\r\n"
                                 "VALUE future 0 1\r\nf\r\nVALUE days30 0 1\r\nd\r\nEND\r\n");
    /* 2592001 is absolute: January 1970, long past. */
    CHECK_STR(converse(&s, "set old 0 2592001 1\r\no\r\nget old\r\n"), "STORED\r\nEND\r\n");
    fake_advance(99);
    CHECK_STR(converse(&s, "get future\r\n"), "VALUE future 0 1\r\nf\r\nEND\r\n");
    fake_advance(1);
    CHECK_STR(converse(&s, "get future\r\n"), "END\r\n");
    /* 30 days is relative: still there 30 days less a second later. */
    fake_advance((uint64_t)ISOB_SERVE_RELATIVE_MAX - 100 - 1);
    CHECK_STR(converse(&s, "get days30\r\n"), "VALUE days30 0 1\r\nd\r\nEND\r\n");
    fake_advance(1);
    CHECK_STR(converse(&s, "get days30\r\n"), "END\r\n");
    /* touch and gat move the expiry; a touch with -1 ends it now. */
    CHECK_STR(converse(&s, "set t 0 5 1\r\nt\r\ntouch t 100\r\ntouch nope 1\r\n"),
              "STORED\r\nTOUCHED\r\nNOT_FOUND\r\n");
    fake_advance(50);
    CHECK_STR(converse(&s, "gat 10 t nope\r\n"), "VALUE t 0 1\r\nt\r\nEND\r\n");
    fake_advance(9);
    CHECK_STR(converse(&s, "get t\r\n"), "VALUE t 0 1\r\nt\r\nEND\r\n");
    CHECK_STR(converse(&s, "touch t -1 noreply\r\nget t\r\n"), "END\r\n");
    char *st = converse(&s, "stats\r\n");
    CHECK(strstr(st, "STAT cmd_touch 5\r\n") != NULL);
    CHECK(strstr(st, "STAT touch_hits 3\r\n") != NULL);
    CHECK(strstr(st, "STAT touch_misses 2\r\n") != NULL);
    isob_serve_fini(&s);
}

static void t_cas(void)
{
    struct isob_serve s;
    serve_on(&s, "direct");
    /* Uniques count stores from 1, as memcached's do; gets and gats show
     * them; cas stores only on the current one. */
    CHECK_STR(converse(&s, "set a 0 0 1\r\n1\r\nset b 5 0 2\r\nbb\r\ngets a b nope\r\n"),
              "STORED\r\nSTORED\r\nVALUE a 0 1 1\r\n1\r\nVALUE b 5 2 2\r\nbb\r\nEND\r\n");
    CHECK_STR(converse(&s, "cas a 3 0 1 2\r\nx\r\ncas nope 0 0 1 1\r\nx\r\n"
                           "cas a 3 0 1 1\r\ny\r\ngets a\r\n"),
              "EXISTS\r\nNOT_FOUND\r\nSTORED\r\nVALUE a 3 1 3\r\ny\r\nEND\r\n");
    CHECK_STR(converse(&s, "cas a 0 0 1 1 noreply\r\nz\r\ngats 0 a\r\ntouch a 0\r\ngets a\r\n"),
              "VALUE a 3 1 3\r\ny\r\nEND\r\nTOUCHED\r\nVALUE a 3 1 3\r\ny\r\nEND\r\n");
    /* Failed stores take no unique; the next store gets 4. */
    CHECK_STR(converse(&s, "add a 0 0 1\r\nq\r\nreplace nope 0 0 1\r\nq\r\nset c 0 0 1\r\nc\r\n"
                           "gets c\r\n"),
              "NOT_STORED\r\nNOT_STORED\r\nSTORED\r\nVALUE c 0 1 4\r\nc\r\nEND\r\n");
    char *st = converse(&s, "stats\r\n");
    CHECK(strstr(st, "STAT cas_hits 1\r\n") != NULL);
    CHECK(strstr(st, "STAT cas_badval 2\r\n") != NULL);
    CHECK(strstr(st, "STAT cas_misses 1\r\n") != NULL);
    isob_serve_fini(&s);
}

/* A full store evicts (memcached's default), counting it in stats; with
 * eviction off (memcached -M) it refuses, counting that. */
static void t_eviction(void)
{
    static char value[1024], cmd[1200];
    memset(value, 'e', sizeof value);
    for (int evict = 1; evict >= 0; evict--) {
        struct isob_serve s;
        CHECK_EQ_LONG(isob_serve_init(&s, isob_mechanism_find("direct"), 256u << 10,
                                      isob_serve_value_limit(), -1, SIZE_MAX), 0);
        s.evict = evict;
        size_t stored = 0, refused = 0;
        for (int i = 0; i < 1000; i++) {
            int n = snprintf(cmd, sizeof cmd, "set key%d 0 0 %zu\r\n", i, sizeof value);
            memcpy(cmd + n, value, sizeof value);
            memcpy(cmd + n + sizeof value, "\r\n", 2);
            char *got = converse_n(&s, cmd, (size_t)n + sizeof value + 2, 0, NULL);
            if (strcmp(got, "STORED\r\n") == 0)
                stored++;
            else if (strcmp(got, "SERVER_ERROR out of memory storing object\r\n") == 0)
                refused++;
            else
                CHECK_STR(got, "STORED\r\n");
        }
        /* The last key stored is there in either case. */
        const char *head = evict ? "VALUE key999 0 1024\r\n" : "VALUE key0 0 1024\r\n";
        char *last = converse(&s, evict ? "get key999\r\n" : "get key0\r\n");
        CHECK(strncmp(last, head, strlen(head)) == 0);
        char *st = converse(&s, "stats\r\n");
        char want[64];
        if (evict) {
            CHECK_EQ_LONG(stored, 1000);
            CHECK(strstr(st, "STAT evictions 0\r\n") == NULL);
            CHECK(strstr(st, "STAT store_no_memory 0\r\n") != NULL);
        } else {
            CHECK(refused > 0 && stored + refused == 1000);
            CHECK(strstr(st, "STAT evictions 0\r\n") != NULL);
            snprintf(want, sizeof want, "STAT store_no_memory %zu\r\n", refused);
            CHECK(strstr(st, want) != NULL);
        }
        fprintf(stderr, "# evict %d: %zu stored, %zu refused\n", evict, stored, refused);
        isob_serve_fini(&s);
    }
}

/* --- bounded memory ----------------------------------------------------------- */

/* A multi-get streams: one value at a time goes into the output, the next
 * is fetched only once the output has drained below the high mark, and
 * nothing is read meanwhile.  A client reading in small pieces gets every
 * value whole. */
#define STREAM_VALUE (100u * 1024u)
#define STREAM_KEYS 60
static void t_multiget_streams(void)
{
    struct isob_serve s;
    serve_on(&s, "direct");
    static char set[STREAM_VALUE + 64];
    int n = snprintf(set, sizeof set, "set v 0 0 %u\r\n", STREAM_VALUE);
    for (unsigned i = 0; i < STREAM_VALUE; i++)
        set[n + i] = (char)('a' + i % 23);
    memcpy(set + n + STREAM_VALUE, "\r\n", 2);
    converse_n(&s, set, (size_t)n + STREAM_VALUE + 2, 0, NULL);
    static char line[STREAM_KEYS * 2 + 16];
    strcpy(line, "get");
    for (int i = 0; i < STREAM_KEYS; i++)
        strcat(line, " v");
    strcat(line, "\r\nversion\r\n");
    struct isob_conn c;
    isob_conn_init(&c, &s);
    isob_conn_input(&c, (const unsigned char *)line, strlen(line));
    /* Stopped after the first value that crossed the mark: nothing more is
     * read, and the output holds the mark and one reply at most. */
    unsigned char *buf;
    size_t room, pending;
    CHECK_EQ_LONG(isob_conn_reading(&c, &buf, &room), 0);
    CHECK(isob_conn_output(&c, &pending) != NULL);
    CHECK(pending <= ISOB_CONN_OUT_HIGH + STREAM_VALUE + 64);
    CHECK(c.paused);
    CHECK(s.st.get_hits < STREAM_KEYS);
    size_t peak_out = c.out.cap;
    /* Read it all, 1000 bytes at a time; check every byte. */
    static char reply[STREAM_KEYS * (STREAM_VALUE + 32) + 64];
    size_t got = 0;
    for (;;) {
        const unsigned char *p = isob_conn_output(&c, &pending);
        if (!p)
            break;
        size_t take = pending < 1000 ? pending : 1000;
        CHECK(got + take <= sizeof reply);
        memcpy(reply + got, p, take);
        got += take;
        isob_conn_sent(&c, take);
        if (c.out.cap > peak_out)
            peak_out = c.out.cap;
    }
    CHECK(peak_out <= ISOB_CONN_OUT_HIGH + STREAM_VALUE + 8192);
    CHECK_EQ_LONG(s.st.get_hits, STREAM_KEYS);
    char head[64];
    int hn = snprintf(head, sizeof head, "VALUE v 0 %u\r\n", STREAM_VALUE);
    size_t off = 0;
    for (int i = 0; i < STREAM_KEYS; i++) {
        CHECK(memcmp(reply + off, head, (size_t)hn) == 0);
        CHECK(memcmp(reply + off + hn, set + n, STREAM_VALUE + 2) == 0);
        off += (size_t)hn + STREAM_VALUE + 2;
    }
    const char tail[] = "END\r\n" VERSION_LINE;
    CHECK_EQ_LONG(got, off + sizeof tail - 1);
    CHECK(memcmp(reply + off, tail, sizeof tail - 1) == 0);
    /* All sent: the connection holds no buffer and reads again. */
    CHECK(c.in == NULL && c.out.p == NULL);
    CHECK_EQ_LONG(isob_conn_reading(&c, &buf, &room), 1);
    isob_conn_fini(&c);
    isob_serve_fini(&s);
}

/* Pipelined commands beyond the mark wait in the connection's input, and
 * run as the replies drain. */
static void t_pipeline_backpressure(void)
{
    struct isob_serve s;
    serve_on(&s, "direct");
    static char value[1000];
    memset(value, 'p', sizeof value);
    static char set[1100];
    int n = snprintf(set, sizeof set, "set p 0 0 %zu\r\n", sizeof value);
    memcpy(set + n, value, sizeof value);
    memcpy(set + n + sizeof value, "\r\n", 2);
    converse_n(&s, set, (size_t)n + sizeof value + 2, 0, NULL);
    enum { GETS = 2000 };
    static char in[GETS * 7];
    for (int i = 0; i < GETS; i++)
        memcpy(in + 7 * i, "get p\r\n", 7);
    struct isob_conn c;
    isob_conn_init(&c, &s);
    isob_conn_input(&c, (const unsigned char *)in, sizeof in);
    unsigned char *buf;
    size_t room, pending;
    CHECK_EQ_LONG(isob_conn_reading(&c, &buf, &room), 0);
    isob_conn_output(&c, &pending);
    CHECK(pending > ISOB_CONN_OUT_HIGH && pending <= ISOB_CONN_OUT_HIGH + sizeof value + 64);
    CHECK(c.in_len > 0 && c.in_len < sizeof in);
    size_t got = 0;
    const unsigned char *p;
    while ((p = isob_conn_output(&c, &pending))) {
        got += pending;
        isob_conn_sent(&c, pending);
    }
    CHECK_EQ_LONG(s.st.get_hits, GETS);
    CHECK_EQ_LONG(got, (size_t)GETS * (strlen("VALUE p 0 1000\r\n") + sizeof value + 2 + 5));
    isob_conn_fini(&c);
    isob_serve_fini(&s);
}

/* The global cap: values that do not fit are refused with their data
 * skipped (and a refused set drops the old value, as memcached's does), a
 * get that cannot be buffered says so, every refusal is counted, and once
 * the connections are gone nothing is held but the pool. */
static void t_buffer_cap(void)
{
    struct isob_serve s;
    CHECK_EQ_LONG(isob_serve_init(&s, isob_mechanism_find("direct"), TEST_HEAP,
                                  isob_serve_value_limit(), -1, 2u << 20), 0);
    enum { V = 1000000 };
    static char msg[V + 128];
    int n = snprintf(msg, sizeof msg, "set big 0 0 %d\r\n", V);
    memset(msg + n, 'b', V);
    memcpy(msg + n + V, "\r\n", 2);
    /* With nothing else held, a value of ~1 MiB fits in the 2 MiB cap. */
    CHECK_STR(converse_n(&s, msg, (size_t)n + V + 2, 4096, NULL), "STORED\r\n");
    CHECK_STR(converse(&s, "set old 0 0 3\r\nold\r\n"), "STORED\r\n");
    /* One connection holds most of a value: another value no longer fits. */
    struct sim a;
    sim_init(&s, &a);
    sim_feed(&a, msg, (size_t)n + V / 2);
    CHECK(s.mem.used >= (size_t)V);
    static char msg2[V + 128];
    int n2 = snprintf(msg2, sizeof msg2, "set old 0 0 %d\r\n", V);
    memset(msg2 + n2, 'c', V);
    memcpy(msg2 + n2 + V, "\r\nget old\r\n", 11);
    CHECK_STR(converse_n(&s, msg2, (size_t)n2 + V + 11, 1000, NULL),
              "SERVER_ERROR out of memory storing object\r\nEND\r\n");
    /* ... nor does a get of a large value. */
    CHECK_STR(converse(&s, "get big\r\n"), "SERVER_ERROR out of memory writing get response\r\n");
    CHECK_EQ_LONG(s.mem.refusals, 2);
    CHECK(s.mem.peak <= s.mem.limit);
    /* The held value completes; then everything fits again. */
    sim_feed(&a, msg + n + V / 2, V - V / 2 + 2);
    CHECK_STR(sim_take(&a), "STORED\r\n");
    isob_conn_fini(&a.c);
    char *got = converse(&s, "get big\r\n");
    CHECK(strncmp(got, "VALUE big 0 1000000\r\n", 21) == 0);
    char *st = converse(&s, "stats\r\n");
    CHECK(strstr(st, "STAT conn_buffer_oom 2\r\n") != NULL);
    CHECK(strstr(st, "STAT conn_buffer_limit 2097152\r\n") != NULL);
    CHECK_EQ_LONG(s.mem.used, (size_t)s.mem.pooled * ISOB_SERVE_BUF_SMALL);
    isob_serve_fini(&s);
}

/* Many connections, each with most of a value: the first few hold theirs
 * up to the cap (less the part kept for replies), the others are refused
 * and skip their data; closing them all gives everything back. */
static void t_many_unfinished_values(void)
{
    struct isob_serve s;
    CHECK_EQ_LONG(isob_serve_init(&s, isob_mechanism_find("direct"), TEST_HEAP,
                                  isob_serve_value_limit(), -1, 8u << 20), 0);
    enum { CONNS = 100, V = 1000000 };
    static struct sim c[CONNS];
    static char msg[V + 64];
    memset(msg, 'u', sizeof msg);
    size_t held = 0, refused = 0;
    for (int i = 0; i < CONNS; i++) {
        int n = snprintf(msg, sizeof msg, "set u%d 0 0 %d\r\n", i, V);
        msg[n - 1] = '\n';
        memset(msg + n, 'u', (size_t)V - 1000);
        sim_init(&s, &c[i]);
        sim_feed(&c[i], msg, (size_t)n + V - 1000);
        char *r = sim_take(&c[i]);
        if (strcmp(r, "") == 0)
            held++;
        else if (strcmp(r, "SERVER_ERROR out of memory storing object\r\n") == 0)
            refused++;
        else
            CHECK_STR(r, "");
        CHECK(s.mem.used <= s.mem.limit);
    }
    fprintf(stderr, "# %zu held, %zu refused; %zu bytes held, %zu at most\n", held, refused,
            s.mem.used, s.mem.peak);
    CHECK(held >= 5 && held < 8 && held + refused == CONNS);
    CHECK_EQ_LONG(s.mem.refusals, refused);
    CHECK(s.mem.peak <= s.mem.limit);
    for (int i = 0; i < CONNS; i++) {
        isob_conn_eof(&c[i].c);
        isob_conn_fini(&c[i].c);
    }
    CHECK_EQ_LONG(s.mem.used, (size_t)s.mem.pooled * ISOB_SERVE_BUF_SMALL);
    isob_serve_fini(&s);
    CHECK_EQ_LONG(s.mem.used, 0);
}

/* A store that fails on demand, for the errors the real one rarely gives:
 * every entry but the clock returns fake_result. */
static long fake_result;
static int fake_deletes;
static long fake_call(struct isob_serve *s, unsigned entry)
{
    (void)s;
    if (entry == ISOB_ENTRY_KV_CLOCK)
        return 0;
    if (entry == ISOB_ENTRY_KV_DELETE)
        fake_deletes++;
    return fake_result;
}

static void t_store_errors(void)
{
    struct isob_serve s;
    /* The real store, full: a heap too small to hold one leaves none. */
    CHECK_EQ_LONG(isob_serve_init(&s, isob_mechanism_find("direct"), ISOB_KV_OFFSET, 100, -1,
                                  SIZE_MAX), 0);
    CHECK_STR(converse(&s, "set a 0 0 1\r\na\r\nget a\r\n"),
              "SERVER_ERROR out of memory storing object\r\nEND\r\n");
    isob_serve_fini(&s);

    serve_on(&s, "direct");
    s.call = fake_call;
    fake_result = -EIO;
    static const char *const cmds[] = {"get a\r\n", "gat 1 a\r\n", "delete a\r\n",
                                       "touch a 1\r\n", "flush_all\r\n", "stats\r\n",
                                       "cas a 0 0 1 1\r\nx\r\n", "add a 0 0 1\r\nx\r\n"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char *got = converse(&s, cmds[i]);
        if (strncmp(got, "SERVER_ERROR ", 13) != 0) {
            fprintf(stderr, "# %s -> ", cmds[i]);
            fputs(got, stderr);
        }
        CHECK(strncmp(got, "SERVER_ERROR ", 13) == 0);
    }
    /* A set the store refuses for want of room drops the old value. */
    fake_result = -ENOSPC;
    fake_deletes = 0;
    CHECK_STR(converse(&s, "set a 0 0 1\r\na\r\n"), "SERVER_ERROR out of memory storing object\r\n");
    CHECK_EQ_LONG(fake_deletes, 1);
    CHECK_STR(converse(&s, "add a 0 0 1\r\na\r\n"), "SERVER_ERROR out of memory storing object\r\n");
    CHECK_EQ_LONG(fake_deletes, 1);
    CHECK_EQ_LONG(s.st.store_no_memory, 2);
    fake_result = 2;  /* a get result shorter than the flags: not ours */
    char *got = converse(&s, "get a\r\n");
    CHECK(strncmp(got, "SERVER_ERROR ", 13) == 0);
    s.call = isob_serve_call_comp;
    isob_serve_fini(&s);
}

static void t_init_limits(void)
{
    struct isob_serve s;
    const struct isob_mechanism *m = isob_mechanism_find("direct");
    /* memcached's default, 1 MiB, is the default; the store takes more. */
    CHECK_EQ_LONG(isob_serve_value_limit(), ISOB_PROTO_DEFAULT_MAX_VALUE);
    CHECK(isob_serve_value_max() > ISOB_PROTO_DEFAULT_MAX_VALUE);
    CHECK_EQ_LONG(isob_serve_value_max(), ISOB_KV_MAX_VALUE - ISOB_SERVE_FLAGS_BYTES);
    CHECK_EQ_LONG(isob_serve_init(&s, m, TEST_HEAP, isob_serve_value_max() + 1, -1, SIZE_MAX),
                  -EMSGSIZE);
}

int main(void)
{
    TAP_CASE(t_parse_set);
    TAP_CASE(t_parse_need_more);
    TAP_CASE(t_parse_get_keys);
    TAP_CASE(t_parse_cas_touch_gat);
    TAP_CASE(t_parse_errors);
    TAP_CASE(t_parse_key_limits);
    TAP_CASE(t_parse_line_too_long);
    TAP_CASE(t_parse_too_large_swallows);
    TAP_CASE(t_parse_binary_junk);
    TAP_CASE(t_http_parse_get);
    TAP_CASE(t_http_parse_refusals);
    TAP_CASE(t_http_serves_document);
    TAP_CASE(t_startup_state);
    TAP_CASE(t_session_direct);
    TAP_CASE(t_new_commands_direct);
    TAP_CASE(t_new_commands_process_futex);
    TAP_CASE(t_binary_refused);
    TAP_CASE(t_session_process_futex);
    TAP_CASE(t_noreply);
    TAP_CASE(t_flags_round_trip);
    TAP_CASE(t_binary_values);
    TAP_CASE(t_errors_keep_stream_and_data);
    TAP_CASE(t_close_cases);
    TAP_CASE(t_stats);
    TAP_CASE(t_store_errors);
    TAP_CASE(t_exptime);
    TAP_CASE(t_cas);
    TAP_CASE(t_eviction);
    TAP_CASE(t_multiget_streams);
    TAP_CASE(t_pipeline_backpressure);
    TAP_CASE(t_buffer_cap);
    TAP_CASE(t_many_unfinished_values);
    TAP_CASE(t_init_limits);
    return tap_done();
}
