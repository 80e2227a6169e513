/* libFuzzer target: one client connection of `isob serve`, through the
 * connection state machine the server's sockets use (isob_conn: reading,
 * back-pressure, buffers, the buffer cap), the parser and the executor,
 * against a real `direct` compartment (so the trusted store runs under the
 * sanitizers too).
 *
 * Each input is two bytes of settings and then one client's byte stream.
 * It runs twice on an empty store, once delivered whole and once in chunks
 * whose size the first byte picks, with the replies taken out in pieces
 * whose size the second byte picks, and the replies must be identical: how
 * the bytes arrive and leave must never change what the server says.  A
 * third run, when the settings ask for it, has a tight buffer cap, where
 * refusals depend on what is held and only the bounds are checked: the
 * buffers never hold more than the cap, and a closed connection holds
 * nothing.  Besides that, everything must make progress and stay in
 * bounds, which ASan and UBSan check.
 *
 * Built and run by tests/fuzz/run.sh (libFuzzer); tests/fuzz/replay.c runs
 * the same function over the checked-in corpus in every build. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isobench/proto.h"
#include "isobench/serve.h"

extern const struct isob_mechanism isob_mech_direct;

/* A small heap, so that inputs can fill the store and reach eviction. */
#define FUZZ_HEAP (32u * 1024u)
/* A small value limit, so that refused values and their skipping are
 * reached by short inputs; half the inputs use the real limit. */
#define FUZZ_SMALL_MAX_VALUE 16u
/* The tight run's buffer cap: a value of more than about 40 KiB is
 * refused, and a multi-get's output outgrows it, so it waits for its
 * replies to drain before each value. */
#define FUZZ_TIGHT_CAP (64u * 1024u)
/* Replies compared in full up to this size; beyond, only the lengths. */
#define FUZZ_CAPTURE (1u << 20)
/* The read buffer, as large as the server's: a whole run's input of up to
 * this size arrives in one piece. */
#define FUZZ_SCRATCH (64u * 1024u)
/* Steps without progress before the run is declared stuck. */
#define FUZZ_STALL 4

/* One server per kind of run: the whole and the chunked runs see the same
 * inputs in the same order, so their stores (cas uniques included) stay
 * alike; the tight one is never compared. */
static struct isob_serve whole_s, piece_s, tight_s;

struct capture {
    unsigned char *p;
    size_t len;   /* bytes replied in all */
};

static void die(const char *what)
{
    fprintf(stderr, "fuzz_proto: %s\n", what);
    abort();
}

/* The store's clock never moves, so that both runs see the same time. */
static void fixed_clock(struct isob_serve_time *now)
{
    now->mono_ns = 1000000000ull;
    now->unix_s = 1700000000;
}

static void serve_make(struct isob_serve *s, size_t cap)
{
    if (isob_serve_init(s, &isob_mech_direct, FUZZ_HEAP, isob_serve_value_limit(), -1, cap))
        die("isob_serve_init failed");
    s->clock = fixed_clock;
    struct isob_serve_time t;
    fixed_clock(&t);
    s->started_ns = t.mono_ns;
    s->epoch_unix = t.unix_s - ISOB_SERVE_TIME_BASE;
}

static void check_bounds(const struct isob_serve *s)
{
    if (s->mem.used > s->mem.limit)
        die("connection buffers hold more than the cap");
}

/* Take replies out, `piece` bytes per send, until none is left or the
 * connection would read again (all = 0) or until none is left (all = 1). */
static void drain(struct isob_serve *s, struct isob_conn *c, size_t piece, int all,
                  struct capture *cap)
{
    for (;;) {
        unsigned char *buf;
        size_t room, n;
        if (!all && isob_conn_reading(c, &buf, &room))
            return;
        const unsigned char *p = isob_conn_output(c, &n);
        if (!p)
            return;
        if (n > piece)
            n = piece;
        size_t keep = cap->len < FUZZ_CAPTURE ? FUZZ_CAPTURE - cap->len : 0;
        memcpy(cap->p + cap->len, p, n < keep ? n : keep);
        cap->len += n;
        isob_conn_sent(c, n);
        check_bounds(s);
    }
}

/* One connection: in[0..n) arrives in chunks of `chunk` bytes, replies
 * leave in pieces of `piece`; everything replied goes to cap. */
static void run(struct isob_serve *s, const uint8_t *in, size_t n, size_t chunk, size_t piece,
                size_t max_value, struct capture *cap)
{
    static unsigned char scratch[FUZZ_SCRATCH];
    cap->len = 0;
    s->msg->len = 0;
    if (s->call(s, ISOB_ENTRY_KV_FLUSH) < 0)
        die("flush failed");
    size_t real_max = s->max_value;
    s->max_value = max_value;
    struct isob_conn c;
    isob_conn_init(&c, s);
    s->max_value = real_max;
    int stalled = 0;
    for (size_t off = 0; off < n;) {
        unsigned char *buf;
        size_t room;
        if (!isob_conn_reading(&c, &buf, &room)) {
            if (isob_conn_wants(&c) & ISOB_CONN_DONE)
                break;
            size_t before = cap->len;
            drain(s, &c, piece, 0, cap);
            if (cap->len == before && ++stalled > FUZZ_STALL)
                die("the connection neither reads nor has replies to send");
            continue;
        }
        stalled = 0;
        size_t take = n - off < chunk ? n - off : chunk;
        if (!buf) {
            buf = scratch;
            room = room < sizeof scratch ? room : sizeof scratch;
        }
        if (take > room)
            take = room;
        if (take == 0)
            die("the connection reads, with no room");
        memcpy(buf, in + off, take);
        isob_conn_input(&c, buf, take);
        /* Nothing may point into the caller's buffer once input returns. */
        if (buf == scratch)
            memset(scratch, 0xa5, take);
        off += take;
        check_bounds(s);
    }
    drain(s, &c, piece, 1, cap);
    isob_conn_eof(&c);
    drain(s, &c, piece, 1, cap);
    if (isob_conn_output(&c, &(size_t){0}) != NULL)
        die("replies left after the end");
    isob_conn_fini(&c);
    if (s->mem.used != (size_t)s->mem.pooled * ISOB_SERVE_BUF_SMALL)
        die("a closed connection still holds buffer memory");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct capture whole, pieces, tight;
    if (!whole_s.comp) {
        serve_make(&whole_s, SIZE_MAX);
        serve_make(&piece_s, SIZE_MAX);
        serve_make(&tight_s, FUZZ_TIGHT_CAP);
        whole.p = malloc(FUZZ_CAPTURE);
        pieces.p = malloc(FUZZ_CAPTURE);
        tight.p = malloc(FUZZ_CAPTURE);
        if (!whole.p || !pieces.p || !tight.p)
            die("out of memory");
    }
    if (size < 2)
        return 0;
    size_t chunk = (data[0] & 0x3f) + 1;
    size_t max_value = data[0] & 0x40 ? FUZZ_SMALL_MAX_VALUE : isob_serve_value_limit();
    int tight_run = data[0] & 0x80;
    size_t piece = data[1] & 0x80 ? SIZE_MAX : (size_t)(data[1] & 0x7f) * 97 + 1;
    /* Eviction on or off, in all three alike. */
    int evict = !(data[1] & 0x40);
    whole_s.evict = piece_s.evict = tight_s.evict = evict;
    whole_s.store_now = piece_s.store_now = tight_s.store_now = 0;  /* tell the store again */
    data += 2;
    size -= 2;
    run(&whole_s, data, size, size ? size : 1, SIZE_MAX, max_value, &whole);
    run(&piece_s, data, size, chunk, piece, max_value, &pieces);
    if (tight_run)
        run(&tight_s, data, size, chunk, piece, max_value, &tight);
    /* stats tells counts since start and the buffers in use: they may differ. */
    if (memmem(data, size, "stats", 5))
        return 0;
    if (whole.len != pieces.len ||
        memcmp(whole.p, pieces.p, whole.len < FUZZ_CAPTURE ? whole.len : FUZZ_CAPTURE) != 0)
        die("replies depend on how the input was chunked or the replies taken out");
    return 0;
}
