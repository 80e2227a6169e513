/* kv: the memcached-like macrobenchmark (SecureCells; Konrad 2023, 3.2).
 *
 * The hash table (src/trusted/kv.h) lives in the compartment's trusted
 * heap; this untrusted front end reaches it only through ISOB_ENTRY_KV_SET
 * and ISOB_ENTRY_KV_GET across the mechanism under test.  For each data
 * size D:
 *
 *     create a compartment whose heap holds D/64 entries (isob_kv_heap_size)
 *     set:    insert D/64 entries, 12-byte seeded keys, 64-byte values
 *     stats:  the store's own count and bytes in use (ISOB_ENTRY_KV_STATS)
 *     warmup: one pass reading every entry in a seeded random order
 *     get:    passes reading every entry, each in a fresh seeded order,
 *             until the passes asked for ran or the time budget is spent
 *
 * Every request is timed on its own (one reading before the call, one
 * after) and every reply is verified, length and content, outside the
 * readings.  A wrong reply fails the result and is never averaged in.
 * Each phase (set, warmup, get) is one result line; see docs/kv.md.
 *
 * --reading per-pass times the get passes as Konrad does (2023, §3.3:
 * counters read once per iteration, an iteration reading every entry):
 * one reading before a whole pass and one after it, divided by the gets
 * of the pass, so that the reading's own cost is shared out among them
 * instead of standing beside each.  Such a pass includes the front end's
 * work for each request (making the key, checking the reply), as Konrad's
 * iteration does.  Results carry params "reading". */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isobench/bench.h"
#include "../trusted/kv.h"
#include "kv_workload.h"

#define KV_SIZE_MIN ((size_t)4 << 10)          /* the sweep starts at 4 KiB */
#define KV_SIZE_MAX ((size_t)256 << 20)        /* ... and ends at 256 MiB */
#define KV_SIZE_MAX_QUICK ((size_t)16 << 20)   /* --quick ends at 16 MiB */
#define KV_SIZE_FACTOR 4                       /* each size is 4 times the last */
#define KV_MIN_ITERATIONS 3                    /* measured passes per size, at least */
#define KV_WARMUP_PASSES 1                     /* unmeasured-for-the-result passes before them */
#define KV_SAMPLE_CAP 65536                    /* per-request samples kept per result */
#define KV_BUDGET_NS 3000000000ull             /* measured passes stop after the one that crosses 3 s */
#define KV_SIZE_BUDGET_NS 60000000000ull       /* a size predicted to need more than 60 s ... */
#define KV_SIZE_BUDGET_NS_QUICK 15000000000ull /* ... (15 s with --quick) is skipped */

/* What one phase's requests came to.  Sums cover only requests with a
 * right reply and a valid sample, so a wrong value never reaches a mean. */
struct kv_tally {
    uint64_t requests;               /* requests made */
    uint64_t verified;               /* replies checked and right */
    uint64_t bad;                    /* replies wrong */
    uint64_t valid;                  /* right replies with a valid sample */
    uint64_t dropped;                /* right replies whose sample the counter rejected */
    uint64_t sum[ISOB_MAX_EVENTS];   /* per event, over the valid ones */
    uint64_t seen;                   /* valid samples offered to the sampler */
    char why[200];                   /* the first wrong reply */
};

/* How the get passes are timed (--reading): a bit each. */
enum kv_reading { KV_PER_REQUEST = 1, KV_PER_PASS = 2 };
static const char *const kv_reading_names[] = {"per-request", "per-pass"};

/* One data size on one compartment. */
struct kv_run {
    struct isob_bench_ctx *ctx;
    const char *placement;
    const char *reading;             /* the phase's reading, as the params say it */
    size_t data_bytes, entries;
    int64_t store_bytes, heap_bytes; /* from ISOB_ENTRY_KV_STATS; -1 before */
    size_t passes_asked, passes;     /* measured passes: asked for and run */
    uint64_t warm_gets;              /* gets before the measured ones */
};

/* One pass of requests, each between two readings of backend BE.  set:
 * insert entries 0..n-1; else read order[0..n).  Samples of valid right
 * requests are kept when their running number is a multiple of stride. */
__attribute__((always_inline)) static inline void
kv_pass_as(enum isob_backend be, struct isob_counter *ctr, struct isob_comp *c, int set,
           const uint32_t *order, size_t n, uint64_t seed, struct isob_samples *s, uint64_t stride,
           struct kv_tally *t)
{
    struct isob_msg *msg = c->mech->shared(c);
    const unsigned entry = set ? ISOB_ENTRY_KV_SET : ISOB_ENTRY_KV_GET;
    for (size_t k = 0; k < n; k++) {
        uint64_t i = set ? k : order[k];
        kvw_key(seed, i, msg->data);
        msg->arg[0] = KVW_KEY_BYTES;
        if (set) {
            kvw_value(seed, i, msg->data + KVW_KEY_BYTES);
            msg->arg[1] = KVW_VALUE_BYTES;
            msg->arg[2] = 0;  /* no expiry */
            msg->len = KVW_KEY_BYTES + KVW_VALUE_BYTES;
        } else {
            msg->len = KVW_KEY_BYTES;
        }
        struct isob_snap a, b;
        isob_read_as(be, ctr, &a);
        isob_clobber();
        long r = isob_call(c, entry);
        isob_clobber();
        isob_read_as(be, ctr, &b);
        t->requests++;
        /* A dead compartment answers every request at once with an error;
         * the pass ends at the first, and the phase fails with the cause. */
        if (r == -EOWNERDEAD && isob_comp_why(c))
            break;
        int wrong;
        if (set) {
            wrong = r != 0;
            if (wrong && !t->bad)
                snprintf(t->why, sizeof t->why, "set of entry %llu failed: %s",
                         (unsigned long long)i, isob_strerror((int)r));
        } else {
            wrong = kvw_verify(seed, i, r, msg->data, t->bad ? NULL : t->why, t->bad ? 0 : sizeof t->why);
        }
        if (wrong) {
            t->bad++;
            continue;
        }
        t->verified++;
        if (!isob_sample_valid_as(be, &a, &b)) {
            t->dropped++;
            s->dropped++;
            continue;
        }
        t->valid++;
        int keep = t->seen++ % stride == 0 && s->n < s->cap;
        for (unsigned e = 0; e < s->nev; e++) {
            uint64_t d = b.v[e] - a.v[e];
            t->sum[e] += d;
            if (keep)
                s->v[s->n * s->nev + e] = d;
        }
        s->n += (size_t)keep;
    }
}

static void kv_pass(struct isob_counter *ctr, struct isob_comp *c, int set, const uint32_t *order,
                    size_t n, uint64_t seed, struct isob_samples *s, uint64_t stride, struct kv_tally *t)
{
    ISOB_DISPATCH(ctr, be_, kv_pass_as(be_, ctr, c, set, order, n, seed, s, stride, t));
}

/* One pass of gets between two readings (--reading per-pass): the sample
 * is the pass's count divided by its gets, rounded to the nearest unit.
 * A pass with a wrong reply or a dead compartment keeps no sample (the
 * phase fails on t->bad or the death); one whose readings the counter
 * rejects drops all its gets. */
__attribute__((always_inline)) static inline void
kv_pass_whole_as(enum isob_backend be, struct isob_counter *ctr, struct isob_comp *c,
                 const uint32_t *order, size_t n, uint64_t seed, struct isob_samples *s,
                 uint64_t stride, struct kv_tally *t)
{
    struct isob_msg *msg = c->mech->shared(c);
    const uint64_t bad0 = t->bad;
    size_t done = 0;
    struct isob_snap a, b;
    isob_read_as(be, ctr, &a);
    isob_clobber();
    for (size_t k = 0; k < n; k++) {
        uint64_t i = order[k];
        kvw_key(seed, i, msg->data);
        msg->arg[0] = KVW_KEY_BYTES;
        msg->len = KVW_KEY_BYTES;
        long r = isob_call(c, ISOB_ENTRY_KV_GET);
        t->requests++;
        if (r == -EOWNERDEAD && isob_comp_why(c))
            break;
        if (kvw_verify(seed, i, r, msg->data, t->bad ? NULL : t->why, t->bad ? 0 : sizeof t->why)) {
            t->bad++;
            continue;
        }
        t->verified++;
        done++;
    }
    isob_clobber();
    isob_read_as(be, ctr, &b);
    if (t->bad != bad0 || done != n || n == 0)
        return;
    if (!isob_sample_valid_as(be, &a, &b)) {
        t->dropped += n;
        s->dropped++;
        return;
    }
    t->valid += n;
    int keep = t->seen++ % stride == 0 && s->n < s->cap;
    for (unsigned e = 0; e < s->nev; e++) {
        uint64_t d = b.v[e] - a.v[e];
        t->sum[e] += d;
        if (keep)
            s->v[s->n * s->nev + e] = (d + n / 2) / n;
    }
    s->n += (size_t)keep;
}

static void kv_pass_whole(struct isob_counter *ctr, struct isob_comp *c, const uint32_t *order,
                          size_t n, uint64_t seed, struct isob_samples *s, uint64_t stride,
                          struct kv_tally *t)
{
    ISOB_DISPATCH(ctr, be_, kv_pass_whole_as(be_, ctr, c, order, n, seed, s, stride, t));
}

/* --reading: 0 with the bits, or -EINVAL with the reason. */
static int kv_readings(const char *list, unsigned *mask, char *why, size_t len)
{
    *mask = KV_PER_REQUEST;
    if (!list)
        return 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", list);
    *mask = 0;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        unsigned bit = 0;
        for (unsigned k = 0; k < 2; k++)
            if (strcmp(tok, kv_reading_names[k]) == 0)
                bit = 1u << k;
        if (!bit) {
            snprintf(why, len, "kv: unknown --reading '%s' (per-request, per-pass)", tok);
            return -EINVAL;
        }
        *mask |= bit;
    }
    if (!*mask) {
        snprintf(why, len, "kv: --reading needs per-request, per-pass or both");
        return -EINVAL;
    }
    return 0;
}

static int kv_check(const struct isob_bench_opts *opts, char *why, size_t len)
{
    unsigned mask;
    return kv_readings(opts->reading, &mask, why, len);
}

/* Samples for `planned` requests: at most KV_SAMPLE_CAP, every stride-th. */
static int kv_samples(struct isob_samples *s, uint64_t *stride, uint64_t planned, unsigned nev)
{
    *stride = planned > KV_SAMPLE_CAP ? (planned + KV_SAMPLE_CAP - 1) / KV_SAMPLE_CAP : 1;
    size_t cap = planned < KV_SAMPLE_CAP ? (size_t)planned : KV_SAMPLE_CAP;
    return isob_samples_alloc(s, cap ? cap : 1, nev);
}

/* The params object of a result: the configuration first, then what this
 * phase measured about the store and its requests. */
static char *kv_params(const struct kv_run *r, const char *variant, const struct kv_tally *t,
                       uint64_t stride)
{
    struct isob_bench_ctx *ctx = r->ctx;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    struct isob_jw w = {.f = f, .comma = 0};
    char num[32];
    fputc('{', f);
    isob_jw_str(&w, "placement", r->placement);
    isob_jw_str(&w, "variant", variant);
    /* set and warmup are always timed per request; get as --reading says
     * (a get skipped or failed before it was timed: the first asked). */
    const char *reading = r->reading;
    if (!reading) {
        unsigned mask = KV_PER_REQUEST;
        char why[120];
        kv_readings(strcmp(variant, "get") == 0 ? ctx->opts.reading : NULL, &mask, why, sizeof why);
        reading = kv_reading_names[(mask & KV_PER_REQUEST) ? 0 : 1];
    }
    isob_jw_str(&w, "reading", reading);
    /* A placement skipped as a whole has no data size to speak of. */
    if (r->data_bytes) {
        isob_jw_int(&w, "data_bytes", (long long)r->data_bytes);
        isob_jw_int(&w, "entries", (long long)r->entries);
        isob_jw_int(&w, "key_bytes", KVW_KEY_BYTES);
        isob_jw_int(&w, "value_bytes", KVW_VALUE_BYTES);
        snprintf(num, sizeof num, "%llu", (unsigned long long)ctx->opts.seed);
        isob_jw_raw(&w, "seed", num);
    }
    if (t && strcmp(variant, "get") == 0) {
        isob_jw_int(&w, "iterations", (long long)r->passes);
        isob_jw_int(&w, "iterations_asked", (long long)r->passes_asked);
    }
    if (r->store_bytes >= 0) {
        isob_jw_int(&w, "store_bytes", r->store_bytes);
        isob_jw_int(&w, "heap_bytes", r->heap_bytes);
        isob_jw_double(&w, "store_ratio", (double)r->store_bytes / (double)r->data_bytes);
        isob_jw_double(&w, "heap_ratio", (double)r->heap_bytes / (double)r->data_bytes);
    }
    if (t) {
        isob_jw_int(&w, "requests", (long long)t->requests);
        isob_jw_int(&w, "verified", (long long)t->verified);
        isob_jw_int(&w, "sample_stride", (long long)stride);
        /* The exact mean over every timed request, not only the kept
         * samples; like each sample it spans one empty region. */
        isob_jw_double(&w, "mean", t->valid ? (double)t->sum[0] / (double)t->valid : NAN);
        struct isob_counter *ctr = ctx->ctr;
        if (ctr->backend == ISOB_BACKEND_PERF && ctr->nev > 1) {
            for (unsigned e = 1; e < ctr->nev; e++) {
                char key[64];
                snprintf(key, sizeof key, "%s_per_request", ctr->event_names[e]);
                isob_jw_double(&w, key, t->valid ? (double)t->sum[e] / (double)t->valid : NAN);
            }
            if (strcmp(ctr->event_names[1], "instructions") == 0 && t->sum[1])
                isob_jw_double(&w, "cpi", (double)t->sum[0] / (double)t->sum[1]);
        } else {
            /* No instructions, TLB misses or CPI: say why, in the counter's words. */
            isob_jw_str(&w, "pmu_reason", ctr->why);
        }
    }
    const char *extra = ctx->mech->result_params;
    if (extra)
        fprintf(f, ",%s", extra);
    fputc('}', f);
    fclose(f);
    return buf;
}

/* Emit one phase.  The result's "warmup" is the number of gets that came
 * before its measured requests (0 for set and for the warm-up itself). */
static void kv_emit(struct kv_run *r, const char *variant, const struct kv_tally *t,
                    const struct isob_samples *s, uint64_t stride, uint64_t warm, const char *status,
                    const char *reason)
{
    struct isob_bench_ctx c2 = *r->ctx;
    c2.opts.warmup = warm;
    char *params = kv_params(r, variant, t, stride);
    isob_emit_result(&c2, "kv", params ? params : "{}", s, NULL, status, reason, NULL);
    r->ctx->failed |= c2.failed;
    free(params);
}

/* A phase's verdict: failed with the compartment's death, or with the
 * first wrong reply, or ok.  Returns 1 when the phase failed. */
static int kv_emit_phase(struct kv_run *r, struct isob_comp *c, const char *variant,
                         const struct kv_tally *t, const struct isob_samples *s, uint64_t stride,
                         uint64_t warm)
{
    const char *died = isob_comp_why(c);
    if (died) {
        kv_emit(r, variant, t, NULL, stride, warm, "failed", died);
    } else if (t->bad) {
        char reason[320];
        snprintf(reason, sizeof reason, "%llu of %llu requests wrong; first: %s",
                 (unsigned long long)t->bad, (unsigned long long)t->requests, t->why);
        kv_emit(r, variant, t, NULL, stride, warm, "failed", reason);
    } else if (s->n == 0) {
        kv_emit(r, variant, t, NULL, stride, warm, "failed", "no valid sample: the counter rejected every reading");
    } else {
        kv_emit(r, variant, t, s, stride, warm, "ok", NULL);
        return 0;
    }
    return 1;
}

/* Passes to measure for one size: --iterations, or enough for --n gets and
 * at least KV_MIN_ITERATIONS. */
static size_t kv_passes_asked(const struct isob_bench_opts *o, size_t entries)
{
    if (o->iterations)
        return o->iterations;
    size_t p = (o->n + entries - 1) / entries;
    return p < KV_MIN_ITERATIONS ? KV_MIN_ITERATIONS : p;
}

/* The phases of one size on a fresh compartment.  Returns the requests
 * made, for the next size's time prediction. */
/* The get phase: the measured passes, each in its own order, once per
 * reading asked for (the same store, the same orders).  Unless
 * --iterations asked for a count, they stop after the pass that crosses
 * the budget, so that a slow mechanism still finishes the sweep.  Their
 * requests are added to *made.  0, or -ENOMEM when there was no room for
 * the samples (the caller reports it). */
static int kv_get_phase(struct kv_run *r, struct isob_comp *c, uint32_t *order, uint64_t *made)
{
    struct isob_bench_ctx *ctx = r->ctx;
    unsigned nev = ctx->ctr->nev;
    struct isob_samples s;
    struct kv_tally t;
    uint64_t stride;
    unsigned readings = KV_PER_REQUEST;
    char rwhy[120];
    kv_readings(ctx->opts.reading, &readings, rwhy, sizeof rwhy);
    for (unsigned k = 0; k < 2; k++) {
        if (!(readings & (1u << k)))
            continue;
        const int whole = (1u << k) == KV_PER_PASS;
        r->reading = kv_reading_names[k];
        r->passes = 0;
        memset(&t, 0, sizeof t);
        if (kv_samples(&s, &stride, whole ? r->passes_asked : (uint64_t)r->entries * r->passes_asked,
                       nev) != 0)
            return -ENOMEM;
        uint64_t t0 = isob_clock_ns();
        for (size_t p = 0; p < r->passes_asked && !t.bad && !isob_comp_why(c); p++) {
            kvw_shuffle(order, r->entries, ctx->opts.seed, KV_WARMUP_PASSES + p);
            if (whole)
                kv_pass_whole(ctx->ctr, c, order, r->entries, ctx->opts.seed, &s, stride, &t);
            else
                kv_pass(ctx->ctr, c, 0, order, r->entries, ctx->opts.seed, &s, stride, &t);
            r->passes++;
            if (!ctx->opts.iterations && isob_clock_ns() - t0 >= KV_BUDGET_NS)
                break;
        }
        *made += t.requests;
        int bad = kv_emit_phase(r, c, "get", &t, &s, stride, r->warm_gets);
        isob_samples_free(&s);
        if (bad)
            break;
    }
    r->reading = NULL;
    return 0;
}

static uint64_t kv_size(struct isob_bench_ctx *ctx, const char *placement, int server_cpu, size_t data)
{
    const struct isob_mechanism *m = ctx->mech;
    struct kv_run r = {.ctx = ctx, .placement = placement, .data_bytes = data,
                       .entries = data / KVW_VALUE_BYTES, .store_bytes = -1, .heap_bytes = -1};
    r.passes_asked = kv_passes_asked(&ctx->opts, r.entries);
    unsigned nev = ctx->ctr->nev;
    uint64_t made = 0;

    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    spec.server_cpu = server_cpu;
    spec.heap_size = isob_kv_heap_size(r.entries, KVW_KEY_BYTES, KVW_VALUE_BYTES);
    uint32_t *order = malloc(r.entries * sizeof *order);
    struct isob_comp *c = NULL;
    int rc = order ? isob_comp_create(m, &spec, &c) : -ENOMEM;
    if (rc != 0) {
        char reason[200];
        snprintf(reason, sizeof reason, "create (heap of %zu bytes): %s", spec.heap_size, isob_strerror(rc));
        kv_emit(&r, "set", NULL, NULL, 1, 0, "failed", reason);
        free(order);
        return 0;
    }
    for (size_t i = 0; i < r.entries; i++)
        order[i] = (uint32_t)i;

    /* set: fill the store. */
    struct isob_samples s;
    struct kv_tally t;
    uint64_t stride;
    const char *phase = "set";
    memset(&t, 0, sizeof t);
    if (kv_samples(&s, &stride, r.entries, nev) != 0)
        goto oom;
    kv_pass(ctx->ctr, c, 1, NULL, r.entries, ctx->opts.seed, &s, stride, &t);
    made += t.requests;
    struct isob_msg *msg = m->shared(c);
    long items = isob_call(c, ISOB_ENTRY_KV_STATS);
    if (items >= 0) {
        r.store_bytes = msg->arg[1];
        r.heap_bytes = msg->arg[2];
    }
    if (!t.bad && items != (long)r.entries) {
        t.bad = 1;
        snprintf(t.why, sizeof t.why, "the store holds %ld entries after %zu sets", items, r.entries);
    }
    int failed = kv_emit_phase(&r, c, "set", &t, &s, stride, 0);
    isob_samples_free(&s);
    if (failed)
        goto out;

    /* warmup: read everything once; reported apart, never mixed in. */
    phase = "warmup";
    memset(&t, 0, sizeof t);
    if (kv_samples(&s, &stride, (uint64_t)r.entries * KV_WARMUP_PASSES, nev) != 0)
        goto oom;
    for (size_t p = 0; p < KV_WARMUP_PASSES; p++) {
        kvw_shuffle(order, r.entries, ctx->opts.seed, p);
        kv_pass(ctx->ctr, c, 0, order, r.entries, ctx->opts.seed, &s, stride, &t);
    }
    made += t.requests;
    r.warm_gets = t.requests;
    failed = kv_emit_phase(&r, c, "warmup", &t, &s, stride, 0);
    isob_samples_free(&s);
    if (failed)
        goto out;

    /* get: the measured passes (kv_get_phase). */
    phase = "get";
    if (kv_get_phase(&r, c, order, &made) != 0)
        goto oom;
    goto out;

oom:
    kv_emit(&r, phase, NULL, NULL, 1, 0, "failed", "out of memory for samples");
out:
    isob_comp_destroy(c);
    free(order);
    return made;
}

/* The data sizes: --sizes, or 4 KiB to 256 MiB (16 MiB with --quick) by 4. */
static size_t kv_sizes(const struct isob_bench_opts *o, size_t *out)
{
    if (o->nsizes) {
        memcpy(out, o->sizes, o->nsizes * sizeof *out);
        return o->nsizes;
    }
    size_t n = 0, max = o->quick ? KV_SIZE_MAX_QUICK : KV_SIZE_MAX;
    for (size_t d = KV_SIZE_MIN; d <= max && n < ISOB_MAX_SIZES; d *= KV_SIZE_FACTOR)
        out[n++] = d;
    return n;
}

static void kv_skip(struct isob_bench_ctx *ctx, const char *placement, size_t data, const char *why)
{
    struct kv_run r = {.ctx = ctx, .placement = placement, .data_bytes = data,
                       .entries = data / KVW_VALUE_BYTES, .store_bytes = -1, .heap_bytes = -1};
    kv_emit(&r, "get", NULL, NULL, 1, 0, "skipped", why);
}

/* Predicted ns for one size at `pace` ns per request: the fill, the
 * warm-up passes and one measured pass (kvw_size_over_budget's sum). */
static double kv_predicted_ns(double pace, size_t size)
{
    return pace * (double)(size / KVW_VALUE_BYTES) * (2 + KV_WARMUP_PASSES);
}

static void kv_placement(struct isob_bench_ctx *ctx, enum isob_placement pl)
{
    const char *name = isob_placement_name(pl);
    size_t sizes[ISOB_MAX_SIZES], n = kv_sizes(&ctx->opts, sizes);
    int server_cpu = isob_server_cpu(pl, ctx->opts.client_cpu);
    if (pl == ISOB_PLACE_CROSS_CPU && server_cpu < 0) {
        kv_skip(ctx, name, 0, "cross-cpu placement needs two CPUs and a pinned client");
        return;
    }
    char pin_why[160];
    if (isob_place_self(pl, ctx->opts.client_cpu, pin_why, sizeof pin_why) != 0) {
        struct kv_run r = {.ctx = ctx, .placement = name, .store_bytes = -1, .heap_bytes = -1};
        kv_emit(&r, "set", NULL, NULL, 1, 0, "failed", pin_why);
        return;
    }
    uint64_t budget = ctx->opts.quick ? KV_SIZE_BUDGET_NS_QUICK : KV_SIZE_BUDGET_NS;
    int baseline = strcmp(ctx->mech->name, "direct") == 0;
    double pace = 0;
    for (size_t i = 0; i < n; i++) {
        /* A size whose fill, warm-up and one measured pass would take longer
         * than the budget is skipped, with every larger one, unless --sizes
         * asked for it by name, or the mechanism is the baseline, whose
         * figure every other mechanism's of that size is read against.  The
         * pace per request is the last size's as measured: grown by its own
         * growth, a slowdown that load caused at one size was squared and
         * skipped sizes that fit. */
        if (!ctx->opts.nsizes && kvw_size_over_budget(pace, sizes[i] / KVW_VALUE_BYTES,
                                                      KV_WARMUP_PASSES, budget, baseline)) {
            /* Each larger size at the same pace: a lower bound for it. */
            for (; i < n; i++) {
                char why[200];
                snprintf(why, sizeof why,
                         "predicted %.0f s at %.2f us per request, over the %llu s budget per "
                         "size; pass --sizes to run it anyway",
                         kv_predicted_ns(pace, sizes[i]) / 1e9, pace / 1e3,
                         (unsigned long long)(budget / 1000000000ull));
                kv_skip(ctx, name, sizes[i], why);
            }
            return;
        }
        uint64_t t0 = isob_clock_ns();
        uint64_t made = kv_size(ctx, name, server_cpu, sizes[i]);
        if (made)
            pace = (double)(isob_clock_ns() - t0) / (double)made;
    }
}

static int kv_run(struct isob_bench_ctx *ctx)
{
    int two = (ctx->mech->props & ISOB_TWO_CONTEXTS) != 0;
    /* Without --placement the sweep runs same-cpu only: cross-cpu wake-ups
     * cost ~50 us here and would turn the sweep into hours. */
    unsigned want = ctx->opts.placement_given ? ctx->opts.placements : 1u << ISOB_PLACE_SAME_CPU;
    for (unsigned p = 0; p < 3; p++) {
        if (!(want & (1u << p)))
            continue;
        /* With one execution context there is nothing to place: run once,
         * at the first placement asked for that is not cross-cpu. */
        if (!two && p == ISOB_PLACE_CROSS_CPU)
            continue;
        kv_placement(ctx, (enum isob_placement)p);
        if (!two)
            break;
    }
    if (!two && (want & (1u << ISOB_PLACE_CROSS_CPU)))
        kv_skip(ctx, "cross-cpu", 0, "one execution context: cross-cpu placement does not apply");
    return 0;
}

static const struct isob_bench_option kv_options[] = {
    {"--reading", "per-request,per-pass", "per-request",
     "counter readings around every get, or around a whole pass of gets (Konrad's)"},
    {NULL, NULL, NULL, NULL},
};

const struct isob_bench isob_bench_kv = {
    .name = "kv",
    .summary = "memcached-like store in the compartment: set, then seeded random gets, 4 KiB to 256 MiB",
    .needs_mechanism = 1,
    .run = kv_run,
    .check = kv_check,
    .options = kv_options,
};
