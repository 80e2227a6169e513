/* libFuzzer target: the memcached text-protocol parser and the command
 * executor, against a real `direct` compartment (so the trusted store runs
 * under the sanitizers too).
 *
 * Each input is one client's byte stream.  It runs twice on an empty
 * store, once whole and once in chunks whose size the first byte picks,
 * and the replies must be identical: how the bytes arrive must never
 * change what the server says.  Besides that, the parser must always make
 * progress and stay inside its input, which ASan and UBSan check.
 *
 * Built and run by tests/fuzz/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isobench/proto.h"
#include "isobench/serve.h"

extern const struct isob_mechanism isob_mech_direct;

/* A small heap, so that inputs can fill the store and reach -ENOSPC. */
#define FUZZ_HEAP (256u * 1024u)
/* A small value limit, so that refused values and their skipping are
 * reached by short inputs; half the inputs use the real limit. */
#define FUZZ_SMALL_MAX_VALUE 16u
/* Replies compared in full up to this size; beyond, only the lengths. */
#define FUZZ_CAPTURE (1u << 20)
/* The simulated connection's input buffer: the longest get line, or a
 * set line with the largest value, fits. */
#define FUZZ_IN (ISOB_PROTO_GET_LINE_MAX + ISOB_PROTO_DEFAULT_MAX_VALUE + 8192)

static struct isob_serve serve;

struct capture {
    unsigned char *p;
    size_t len;   /* bytes replied in all */
};

static void die(const char *what)
{
    fprintf(stderr, "fuzz_proto: %s\n", what);
    abort();
}

/* One connection: feed in[0..n) in chunks of `chunk`, collect the replies. */
static void run(const uint8_t *in, size_t n, size_t chunk, size_t max_value, size_t out_limit,
                struct capture *cap)
{
    static unsigned char buf[FUZZ_IN];
    size_t len = 0;
    struct isob_proto p;
    struct isob_buf out = {0};
    isob_proto_init(&p, max_value);
    cap->len = 0;
    if (serve.store->flush(&serve) < 0)
        die("flush failed");
    for (size_t off = 0; off < n;) {
        size_t take = n - off < chunk ? n - off : chunk;
        if (take > sizeof buf - len)
            take = sizeof buf - len;
        if (take == 0)
            die("input buffer full: a command outgrew every bound");
        memcpy(buf + len, in + off, take);
        len += take;
        off += take;
        int close_it;
        size_t need;
        for (;;) {
            size_t used = isob_serve_feed(&serve, &p, buf, len, &out, out_limit, &close_it, &need);
            if (used > len || need > sizeof buf)
                die("feed used more than it had, or needs more than any bound");
            len -= used;
            memmove(buf, buf + used, len);
            /* Drain the replies, as a send would, then go on if the
             * output limit is what stopped the feed. */
            size_t room = cap->len < FUZZ_CAPTURE ? FUZZ_CAPTURE - cap->len : 0;
            if (out.len && room)
                memcpy(cap->p + cap->len, out.p, out.len < room ? out.len : room);
            cap->len += out.len;
            int stopped = out.len > out_limit;
            out.len = 0;
            if (close_it || !stopped || used == 0)
                break;
        }
        if (close_it)
            break;
    }
    isob_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct capture whole, pieces;
    if (!serve.comp) {
        if (isob_serve_init(&serve, &isob_mech_direct, FUZZ_HEAP, isob_serve_value_limit(), -1))
            die("isob_serve_init failed");
        whole.p = malloc(FUZZ_CAPTURE);
        pieces.p = malloc(FUZZ_CAPTURE);
        if (!whole.p || !pieces.p)
            die("out of memory");
    }
    if (size < 1)
        return 0;
    size_t chunk = (data[0] & 0x3f) + 1;
    size_t max_value = data[0] & 0x40 ? FUZZ_SMALL_MAX_VALUE : isob_serve_value_limit();
    size_t out_limit = data[0] & 0x80 ? 64 : SIZE_MAX;
    data++;
    size--;
    run(data, size, size ? size : 1, max_value, out_limit, &whole);
    run(data, size, chunk, max_value, out_limit, &pieces);
    /* stats tells the time and counts since start: it may differ. */
    if (memmem(data, size, "stats", 5))
        return 0;
    if (whole.len != pieces.len ||
        memcmp(whole.p, pieces.p, whole.len < FUZZ_CAPTURE ? whole.len : FUZZ_CAPTURE) != 0)
        die("replies depend on how the input was chunked");
    return 0;
}
