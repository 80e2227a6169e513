/* worksweep: what a crossing costs against the work done per crossing.
 *
 * One entry, ISOB_ENTRY_WORK(k), runs k iterations of a fixed integer
 * kernel (isob_work_kernel) inside the compartment, for k = 0, 10, ...,
 * 1e6.  Each call is timed on its own (and batched, K against 2K calls),
 * and every call's value is checked against the same kernel run here,
 * outside any compartment; calls alternate between two seeds, so a stale
 * or skipped computation gives a wrong value.  The overhead curve and the
 * break-even work per crossing (5% and 1% over `direct`) are computed from
 * these results in Python.  SEIMI (Fig. 6) draws the same trade-off. */
#include <stdlib.h>
#include <string.h>

#include "isobench/work.h"
#include "workload.h"

static const uint64_t ws_ks[] = {0, 10, 100, 1000, 10000, 100000, 1000000};
#define WS_NK (sizeof ws_ks / sizeof ws_ks[0])

#define WS_BUDGET_NS 1500000000ull       /* per k: samples stop at about this much time */
#define WS_BUDGET_NS_QUICK 200000000ull  /* ... with --quick */
#define WS_MIN_SAMPLES 30                /* per k, whatever the budget */
#define WS_PILOT_CALLS 5                 /* calls timed to size the sample count */
#define WS_MIN_BATCH_K 10                /* a smaller K is not worth a batched estimate */
#define WS_CHECK_MIN_K 1000              /* ns per iteration is checked from this k on */

struct ws_k {
    uint64_t k;
    uint64_t seeds[2], values[2];
    long folds[2];
};

/* Per-call cost in ns, from a few timed calls (outside the results). */
static double ws_pilot(struct wl *w, struct isob_comp *c, const struct ws_k *kk)
{
    struct isob_msg *msg = c->mech->shared(c);
    double ns[WS_PILOT_CALLS];
    for (int i = 0; i < WS_PILOT_CALLS; i++) {
        msg->arg[0] = (int64_t)kk->k;
        msg->arg[1] = (int64_t)kk->seeds[0];
        uint64_t a = wl_read(w);
        isob_call(c, ISOB_ENTRY_WORK);
        ns[i] = wl_ns(w, (double)(wl_read(w) - a));
    }
    double m = isob_median_double(ns, WS_PILOT_CALLS);
    return m > 1 ? m : 1;
}

static void ws_one(struct wl *w, const char *placement, struct isob_comp *c, uint64_t k)
{
    struct isob_bench_ctx *ctx = &w->wctx;
    struct isob_msg *msg = c->mech->shared(c);
    struct ws_k kk = {.k = k, .seeds = {0x5eed0001ull + k, 0x5eed0002ull + 7 * k}};
    for (int j = 0; j < 2; j++) {
        kk.values[j] = isob_work_kernel(k, kk.seeds[j]);
        kk.folds[j] = isob_work_fold31(kk.values[j]);
    }
    uint64_t budget = ctx->opts.quick ? WS_BUDGET_NS_QUICK : WS_BUDGET_NS;
    double per_call = ws_pilot(w, c, &kk);
    size_t n = (size_t)((double)budget / per_call);
    if (n > ctx->opts.n)
        n = ctx->opts.n;
    if (n < WS_MIN_SAMPLES)
        n = WS_MIN_SAMPLES;
    size_t warmup = ctx->opts.warmup < n / 10 + 1 ? ctx->opts.warmup : n / 10 + 1;
    /* The batched estimate only where its 3K calls per pair fit in a
     * quarter of the budget. */
    size_t bk = ctx->opts.batch_k, reps = ctx->opts.batch_reps;
    double fit = (double)budget / 4 / (per_call * 3 * (double)reps);
    if ((double)bk > fit)
        bk = (size_t)fit;
    if (bk < WS_MIN_BATCH_K)
        bk = 0;

    struct wl_params p;
    struct isob_samples s;
    int have_s = isob_samples_alloc(&s, n, ctx->ctr->nev) == 0;
    struct isob_batched b;
    int have_b = isob_batched_alloc(&b, reps) == 0;
    long bad = 0;
    unsigned it = 0;
    uint64_t calls = 0;
#define WS_BODY(C, MSG, K, KK, IT, BAD, CALLS)                                      \
    do {                                                                            \
        unsigned j_ = (IT)++ & 1;                                                   \
        (MSG)->arg[0] = (int64_t)(K);                                               \
        (MSG)->arg[1] = (int64_t)(KK).seeds[j_];                                    \
        (MSG)->arg[2] = 0;                                                          \
        (BAD) += isob_call((C), ISOB_ENTRY_WORK) != (KK).folds[j_] ||               \
               (uint64_t)(MSG)->arg[2] != (KK).values[j_];                          \
        (CALLS)++;                                                                  \
    } while (0)
    double total_ns = 0;
    if (have_s && have_b) {
        for (size_t i = 0; i < warmup; i++)
            WS_BODY(c, msg, k, kk, it, bad, calls);
        uint64_t t0 = isob_clock_ns();
        ISOB_MEASURE_EACH(ctx->ctr, &s, WS_BODY(c, msg, k, kk, it, bad, calls));
        total_ns = (double)(isob_clock_ns() - t0);
        if (bk)
            ISOB_MEASURE_BATCHED(ctx->ctr, bk, &b, WS_BODY(c, msg, k, kk, it, bad, calls));
    }
#undef WS_BODY

    double ns_per_iter = k && s.n ? total_ns / ((double)s.n * (double)k) : 0;
    char reason[256] = "";
    if (!have_s || !have_b)
        snprintf(reason, sizeof reason, "out of memory for samples");
    else if (bad)
        snprintf(reason, sizeof reason, "%ld of %llu calls returned a value other than the kernel's",
                 bad, (unsigned long long)calls);
    else if (s.n == 0)
        snprintf(reason, sizeof reason, "no valid sample");
    else if (k >= WS_CHECK_MIN_K && ns_per_iter < WL_MIN_NS_PER_ITER)
        snprintf(reason, sizeof reason,
                 "implausible: %.3g ns per iteration (below %.2g): the kernel cannot have run",
                 ns_per_iter, WL_MIN_NS_PER_ITER);

    if (wl_params_begin(&p, placement) == 0) {
        isob_jw_str(&p.jw, "variant", "entry");
        wl_jw_u64(&p.jw, "k", k);
        isob_jw_str(&p.jw, "kernel", "lcg-xorshift64");
        wl_jw_u64(&p.jw, "seed", kk.seeds[0]);
        wl_jw_u64(&p.jw, "value", kk.values[0]);
        wl_jw_u64(&p.jw, "seed2", kk.seeds[1]);
        wl_jw_u64(&p.jw, "value2", kk.values[1]);
        wl_jw_u64(&p.jw, "calls_checked", calls);
        if (k)
            isob_jw_double(&p.jw, "ns_per_iteration", ns_per_iter);
        isob_jw_int(&p.jw, "batch_k", (long long)bk);
    }
    wl_emit(w, wl_params_end(&p, c->mech), reason[0] ? NULL : &s, reason[0] || !bk || !have_b ? NULL : &b, warmup,
            reason[0] ? "failed" : "ok", reason[0] ? reason : NULL);
    wl_params_free(&p);
    if (have_s)
        isob_samples_free(&s);
    if (have_b)
        isob_batched_free(&b);
}

static void ws_placement(struct wl *w, const char *placement, int server_cpu, void *arg)
{
    (void)arg;
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    spec.server_cpu = server_cpu;
    struct isob_comp *c;
    int rc = isob_comp_create(w->ctx->mech, &spec, &c);
    if (rc) {
        struct wl_params p;
        char reason[160];
        snprintf(reason, sizeof reason, "create: %s", isob_strerror(rc));
        if (wl_params_begin(&p, placement) == 0)
            isob_jw_str(&p.jw, "variant", "entry");
        wl_emit(w, wl_params_end(&p, w->ctx->mech), NULL, NULL, 0, "failed", reason);
        wl_params_free(&p);
        return;
    }
    /* No data travels with WORK: mechanisms that copy the message copy
     * its header only. */
    c->mech->shared(c)->len = 0;
    for (size_t i = 0; i < WS_NK; i++)
        ws_one(w, placement, c, ws_ks[i]);
    isob_comp_destroy(c);
}

static int ws_run(struct isob_bench_ctx *ctx)
{
    struct wl w;
    int rc = wl_begin(&w, ctx, "worksweep");
    if (rc)
        return rc;
    wl_each_placement(&w, ws_placement, NULL);
    wl_end(&w);
    return 0;
}

const struct isob_bench isob_bench_worksweep = {
    .name = "worksweep",
    .summary = "crossing cost against work per crossing: WORK(k), k = 0 to 1e6 kernel iterations",
    .needs_mechanism = 1,
    .run = ws_run,
};
