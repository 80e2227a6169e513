/* ctx: LMbench's context-switch latency (lat_ctx; SEIMI's Table IV).
 *
 * N processes form a ring of pipes; a 64-bit token goes round it, and
 * each process, on receiving it, sums its own array of S KiB, adds one to
 * the token and passes it on.  The measuring process is the ring's first
 * member: one sample is one round (N hops), kept as round / N, the time
 * of a hop.  Cells N/S: 2/0, 2/16, 2/64, 8/16, 8/64, 16/16, 16/64.
 *
 * A hop is a context switch plus what passing the token and summing the
 * array cost.  That overhead is measured in the measuring process alone,
 * N hops through a pipe to itself, summing its own N arrays of S KiB in
 * turn (the same cache footprint as the ring), and reported as a result
 * of its own.  The raw hop, the overhead and their difference (LMbench's
 * "context switch time") are all kept: the difference can hide noise or
 * even turn negative, so it is never the only number.
 *
 * Checked: the token comes back having been counted by every hop, every
 * member did as many hops as there were rounds, and every member's sums
 * add up to its array's sum once per hop. */
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isobench/mechanism.h"
#include "oslat.h"

#define CTX_MAX_PROCS 16

static const struct {
    int procs;
    int kib;
} ctx_cells[] = {{2, 0}, {2, 16}, {2, 64}, {8, 16}, {8, 64}, {16, 16}, {16, 64}};

/* What one member did, in memory shared with the measuring process. */
struct ctx_slot {
    uint64_t hops;
    uint64_t sum;
} __attribute__((aligned(64)));

static size_t ctx_words(int kib) { return (size_t)kib * 1024 / sizeof(uint64_t); }

/* An array whose word j is base + j, and the sum one pass over it gives. */
static uint64_t *ctx_array(int kib, uint64_t base, uint64_t *sum)
{
    size_t w = ctx_words(kib);
    uint64_t *a = malloc(w ? w * sizeof *a : sizeof *a);
    if (!a)
        return NULL;
    for (size_t j = 0; j < w; j++)
        a[j] = base + j;
    *sum = w * base + (w ? w * (w - 1) / 2 : 0);
    return a;
}

static uint64_t ctx_base(int member) { return (uint64_t)(member + 1) << 20; }

static inline __attribute__((always_inline)) uint64_t ctx_sum(const uint64_t *a, size_t words)
{
    /* The array is read anew at every hop: the compiler may not assume it
     * unchanged since the last one. */
    isob_keep(a);
    uint64_t s = 0;
    for (size_t j = 0; j < words; j++)
        s += a[j];
    return s;
}

/* A ring member: receive, sum, count, pass on, until the ring closes.
 * Broken on purpose (sabotage): member 1 passes the token on uncounted. */
static void ctx_member(int member, int rfd, int wfd, int kib, struct ctx_slot *slot, int sabotage)
{
    uint64_t expect;
    uint64_t *a = ctx_array(kib, ctx_base(member), &expect);
    if (!a)
        _exit(1);
    const size_t words = ctx_words(kib);
    const uint64_t inc = sabotage && member == 1 ? 0 : 1;
    for (;;) {
        uint64_t tok;
        if (read(rfd, &tok, sizeof tok) != sizeof tok)
            _exit(0);
        uint64_t s = ctx_sum(a, words);
        __atomic_store_n(&slot->sum, slot->sum + s, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->hops, slot->hops + 1, __ATOMIC_RELEASE);
        tok += inc;
        if (write(wfd, &tok, sizeof tok) != sizeof tok)
            _exit(0);
    }
}

struct ctx_ring {
    int procs, kib;
    int w0, r0;                  /* the measuring process's ends */
    pid_t pids[CTX_MAX_PROCS];
    struct ctx_slot *slots;      /* shared, one per member */
};

static int ctx_member_cpu(const struct oslat *o, int member)
{
    if (o->cpu < 0 || o->server_cpu < 0)
        return -1;
    /* cross-cpu: the ring alternates between the two CPUs, so that every
     * hop crosses; same-cpu: server_cpu is the same CPU. */
    return member % 2 ? o->server_cpu : o->cpu;
}

static void ctx_ring_close(struct ctx_ring *r)
{
    /* Closing the first pipe ends the ring member by member. */
    if (r->w0 >= 0)
        close(r->w0);
    if (r->r0 >= 0)
        close(r->r0);
    for (int i = 1; i < r->procs; i++)
        oslat_reap(r->pids[i]);
    isob_unmap(r->slots, 4096);
}

static int ctx_ring_open(struct oslat *o, struct ctx_ring *r, int procs, int kib)
{
    int fds[CTX_MAX_PROCS][2];
    memset(r, 0, sizeof *r);
    r->procs = procs;
    r->kib = kib;
    r->w0 = r->r0 = -1;
    r->slots = isob_map(4096, 1);
    if (!r->slots)
        return -ENOMEM;
    int made = 0, rc = 0;
    for (; made < procs; made++)
        if (pipe2(fds[made], O_CLOEXEC) != 0) {
            rc = -errno;
            break;
        }
    for (int i = 1; rc == 0 && i < procs; i++) {
        pid_t pid = oslat_fork(ctx_member_cpu(o, i));
        if (pid < 0) {
            rc = (int)pid;
            break;
        }
        if (pid == 0) {
            /* Member i reads pipe i and writes pipe i+1; it keeps no other
             * end, so that the ring closes when the measuring process
             * closes its write end. */
            int rfd = fds[i][0], wfd = fds[(i + 1) % procs][1];
            for (int j = 0; j < procs; j++) {
                if (fds[j][0] != rfd)
                    close(fds[j][0]);
                if (fds[j][1] != wfd)
                    close(fds[j][1]);
            }
            ctx_member(i, rfd, wfd, kib, &r->slots[i], o->sabotage);
        }
        r->pids[i] = pid;
    }
    for (int j = 0; j < made; j++) {
        if (rc == 0 && j == 0)
            r->r0 = fds[0][0];
        else
            close(fds[j][0]);
        if (rc == 0 && j == 1 % procs)
            r->w0 = fds[j][1];
        else
            close(fds[j][1]);
    }
    if (rc)
        ctx_ring_close(r);
    return rc;
}

/* One round from the measuring process: pass the token, get it back, do
 * its own hop's work.  0, or 1 when the ring broke. */
static inline __attribute__((always_inline)) int ctx_round(const struct ctx_ring *r, uint64_t *tok,
                                                           const uint64_t *a, size_t words,
                                                           uint64_t *sum)
{
    if (write(r->w0, tok, sizeof *tok) != sizeof *tok || read(r->r0, tok, sizeof *tok) != sizeof *tok)
        return 1;
    *sum += ctx_sum(a, words);
    (*tok)++;
    return 0;
}

/* N hops in one process: through a pipe to itself, summing array j of N. */
static inline __attribute__((always_inline)) int ctx_overhead(int w, int rd, int procs, uint64_t *tok,
                                                              uint64_t *const *arrays, size_t words,
                                                              uint64_t *sum, int first)
{
    int bad = 0;
    for (int j = first; j < procs; j++) {
        bad |= write(w, tok, sizeof *tok) != sizeof *tok;
        bad |= read(rd, tok, sizeof *tok) != sizeof *tok;
        *sum += ctx_sum(arrays[j], words);
        (*tok)++;
    }
    return bad;
}

static double ctx_median(struct oslat_cell *c)
{
    return c->s.n ? isob_samples_median(&c->s, 0) : 0;
}

/* The overhead cell: measured, checked, left open for the raw cell to read. */
static int ctx_measure_overhead(struct oslat *o, const struct oslat_prim *p, struct oslat_cell *c,
                                int procs, int kib)
{
    char label[32];
    snprintf(label, sizeof label, "%dp/%dK overhead", procs, kib);
    int rc = oslat_cell_open(c, o, p, label);
    if (rc)
        return rc;
    int pfd[2];
    uint64_t *arrays[CTX_MAX_PROCS] = {0}, expect = 0, one = 0;
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        rc = -errno;
        oslat_fail(c, "pipe: %s", isob_strerror(rc));
        return 0;
    }
    for (int j = 0; j < procs; j++) {
        arrays[j] = ctx_array(kib, ctx_base(j), &one);
        expect += one;
        if (!arrays[j])
            rc = -ENOMEM;
    }
    const size_t words = ctx_words(kib);
    uint64_t tok = 0, sum = 0;
    long bad = 0;
    if (rc == 0) {
    /* Broken on purpose: the first hop of every N is left out. */
    const int first = o->sabotage ? 1 : 0;
#define CTX_OH_BODY bad += ctx_overhead(pfd[1], pfd[0], procs, &tok, arrays, words, &sum, first)
        OSLAT_WARM(c, (void)0, CTX_OH_BODY, (void)0);
        OSLAT_EACH(c, (void)0, CTX_OH_BODY, (void)0);
        OSLAT_BATCHED(c, CTX_OH_BODY);
#undef CTX_OH_BODY
        oslat_samples_div(&c->s, (uint64_t)procs);
        oslat_batched_div(&c->b, (uint64_t)procs);
        if (bad || tok != c->ops * (uint64_t)procs || sum != c->ops * expect)
            oslat_fail(c, "in one process the token counted %llu hops of %llu and the sums were %s "
                       "(%ld pipe calls failed)", (unsigned long long)tok,
                       (unsigned long long)(c->ops * (uint64_t)procs), sum == c->ops * expect ? "right" : "wrong", bad);
    } else {
        oslat_fail(c, "set-up: %s", isob_strerror(rc));
    }
    for (int j = 0; j < procs; j++)
        free(arrays[j]);
    close(pfd[0]);
    close(pfd[1]);
    oslat_param(c, "variant", "\"overhead\"");
    oslat_param(c, "processes", "%d", procs);
    oslat_param(c, "array_kib", "%d", kib);
    oslat_param(c, "per", "\"hop\"");
    return 0;
}

static int ctx_run(struct oslat *o, const struct oslat_prim *p)
{
    for (size_t ci = 0; ci < sizeof ctx_cells / sizeof ctx_cells[0]; ci++) {
        const int procs = ctx_cells[ci].procs, kib = ctx_cells[ci].kib;
        struct oslat_cell oh, c;
        int rc = ctx_measure_overhead(o, p, &oh, procs, kib);
        if (rc)
            return rc;
        double oh_median = oh.fail[0] ? -1 : ctx_median(&oh), oh_batched = oh.fail[0] || !oh.b.n ? NAN : oh.b.est;
        oslat_cell_close(&oh);

        struct ctx_ring r;
        rc = ctx_ring_open(o, &r, procs, kib);
        if (rc)
            return rc;
        char label[32];
        snprintf(label, sizeof label, "%dp/%dK", procs, kib);
        rc = oslat_cell_open(&c, o, p, label);
        if (rc) {
            ctx_ring_close(&r);
            return rc;
        }
        uint64_t expect0 = 0, tok = 0, sum0 = 0;
        uint64_t *a0 = ctx_array(kib, ctx_base(0), &expect0);
        const size_t words = ctx_words(kib);
        long broke = 0;
        if (!a0) {
            oslat_fail(&c, "out of memory");
        } else {
#define CTX_BODY broke += ctx_round(&r, &tok, a0, words, &sum0)
#define CTX_POST c.stop |= broke != 0
            OSLAT_WARM(&c, (void)0, CTX_BODY, CTX_POST);
            OSLAT_EACH(&c, (void)0, CTX_BODY, CTX_POST);
            if (!broke)
                OSLAT_BATCHED(&c, CTX_BODY);
#undef CTX_BODY
#undef CTX_POST
        }
        oslat_samples_div(&c.s, (uint64_t)procs);
        oslat_batched_div(&c.b, (uint64_t)procs);
        const uint64_t rounds = c.ops;
        if (broke)
            oslat_fail(&c, "the ring broke: a pipe call failed or a member ended");
        else if (tok != rounds * (uint64_t)procs)
            oslat_fail(&c, "the token came back counting %llu hops, not %llu (%llu rounds of %d)",
                       (unsigned long long)tok, (unsigned long long)(rounds * (uint64_t)procs),
                       (unsigned long long)rounds, procs);
        for (int i = 1; i < procs && !c.fail[0]; i++) {
            uint64_t h = __atomic_load_n(&r.slots[i].hops, __ATOMIC_ACQUIRE);
            uint64_t s = __atomic_load_n(&r.slots[i].sum, __ATOMIC_RELAXED);
            uint64_t e = words * ctx_base(i) + (words ? words * (words - 1) / 2 : 0);
            if (h != rounds || s != h * e)
                oslat_fail(&c, "member %d made %llu hops of %llu, its sums %s", i, (unsigned long long)h,
                           (unsigned long long)rounds, s == h * e ? "right" : "wrong");
        }
        if (!c.fail[0] && a0 && sum0 != rounds * expect0)
            oslat_fail(&c, "the measuring process's sums are wrong");
        free(a0);
        ctx_ring_close(&r);
        double med = ctx_median(&c);
        oslat_param(&c, "variant", "\"raw\"");
        oslat_param(&c, "processes", "%d", procs);
        oslat_param(&c, "array_kib", "%d", kib);
        oslat_param(&c, "per", "\"hop\"");
        oslat_param(&c, "rounds", "%llu", (unsigned long long)rounds);
        if (oh_median >= 0) {
            oslat_param(&c, "overhead_per_hop", "%.3f", oh_median);
            oslat_param(&c, "switch_per_hop", "%.3f", med - oh_median);
        } else {
            oslat_param(&c, "overhead_per_hop", "null");
            oslat_param(&c, "switch_per_hop", "null");
        }
        if (c.b.n && !isnan(oh_batched))
            oslat_param(&c, "switch_per_hop_batched", "%.3f", c.b.est - oh_batched);
        oslat_cell_close(&c);
    }
    return 0;
}

const struct oslat_prim oslat_ctx[] = {
    {.name = "ctx", .family = "ctx", .table = "IV", .traps = OSLAT_TRAPS_EACH, .two_contexts = 1,
     .summary = "a token passed round a ring of N processes over pipes, each summing S KiB",
     OSLAT_CALLS(SYS_read, SYS_write), .run = ctx_run},
    {.name = NULL},
};
