/* cpuwork: Morello's four CPU kernels (int, float, array, maths) out of
 * and inside a compartment.
 *
 * Placements ("where" in params; Morello's in and out):
 *   out                 the kernel called as plain code here;
 *   in                  the whole trial is one entry in the compartment
 *                       (ISOB_ENTRY_CPU_*); for native mechanisms it runs
 *                       the very object code `out` calls (src/trusted/
 *                       work.c, one translation unit, the same flags);
 *                       for wasm it is that source compiled to wasm32,
 *                       another ABI, and labelled so;
 *   lib-in-compartment  maths only: this loop calls sin, cos, tan, sqrt
 *                       and log as five compartment entries per iteration,
 *                       the model of a library in a compartment (c18n).
 * Trials interleave the placements (out, in, lib, out, in, lib, ...) so
 * that drift during the run does not favour one.  Each trial's value
 * depends on every iteration and is checked equal across placements for
 * the same seed; each trial's time per iteration is bounded below, so a
 * loop that did not run fails instead of being fast. */
#include <stdlib.h>
#include <string.h>

#include "isob_config.h"
#include "isobench/work.h"
#include "workload.h"

#define CW_ITERATIONS 100000000u      /* Morello's WORKLOAD_SIZE, per trial */
#define CW_QUICK_DIVISOR 100u         /* --quick runs this many times fewer */
#define CW_TRIALS 10                  /* trials per kernel and placement */
#define CW_WARM_DIVISOR 10u           /* the unrecorded warm-up trial is this much shorter */
#define CW_LIB_TARGET_NS 500000000ull /* a lib-in-compartment trial aims at this long */
#define CW_LIB_TARGET_NS_QUICK 20000000ull
#define CW_LIB_PILOT 16               /* iterations timed to size lib-in-compartment */
#define CW_LIB_MIN 100                /* its iterations, at least */
#define CW_ARRAY_BYTES_PER_ELEMENT 24 /* bytes the array kernel moves per element */

enum { CW_INT, CW_FLOAT, CW_ARRAY, CW_MATHS, CW_NKERNELS };
enum { W_OUT, W_IN, W_LIB, W_NWHERE };
static const char *const cw_where[W_NWHERE] = {"out", "in", "lib-in-compartment"};

/* The kernels `out` calls; tests swap in broken ones to see the checks
 * fail (workload.h). */
const struct isob_cpuwork_kernels isob_cpuwork_native = {
    .cpu_int = isob_work_cpu_int,
    .cpu_float = isob_work_cpu_float,
    .cpu_maths = isob_work_cpu_maths,
    .cpu_array = isob_work_cpu_array,
};

static const struct {
    const char *name;
    unsigned entry;
} cw_kernels[CW_NKERNELS] = {
    [CW_INT] = {"int", ISOB_ENTRY_CPU_INT},
    [CW_FLOAT] = {"float", ISOB_ENTRY_CPU_FLOAT},
    [CW_ARRAY] = {"array", ISOB_ENTRY_CPU_ARRAY},
    [CW_MATHS] = {"maths", ISOB_ENTRY_CPU_MATHS},
};

struct cw_run {
    struct wl *w;
    const struct isob_cpuwork_kernels *k;
    const char *placement;
    struct isob_comp *c;
    uint32_t n;            /* iterations of out and in */
    uint32_t *array;       /* out's array, n elements, touched before the trials */
    int is_wasm;
};

static uint64_t cw_out(const struct cw_run *r, int kernel, uint32_t n, uint64_t seed)
{
    switch (kernel) {
    case CW_INT: return r->k->cpu_int(n, seed);
    case CW_FLOAT: return r->k->cpu_float(n, seed);
    case CW_ARRAY: return r->k->cpu_array(r->array, n, seed);
    default: return r->k->cpu_maths(n, seed);
    }
}

/* One trial inside: 0 and the value in *v, or a negative errno. */
static long cw_in(const struct cw_run *r, int kernel, uint32_t n, uint64_t seed, uint64_t *v)
{
    struct isob_msg *msg = r->c->mech->shared(r->c);
    msg->arg[0] = n;
    msg->arg[1] = (int64_t)seed;
    msg->arg[2] = 0;
    long rc = isob_call(r->c, cw_kernels[kernel].entry);
    if (rc < 0)
        return rc;
    *v = (uint64_t)msg->arg[2];
    return rc == isob_work_fold31(*v) ? 0 : -EPROTO;
}

static double cw_bits_double(int64_t b)
{
    union { int64_t i; double d; } u = {b};
    return u.d;
}

static int64_t cw_double_bits(double d)
{
    union { double d; int64_t i; } u = {d};
    return u.i;
}

/* One maths routine as a compartment entry. */
static inline double cw_lib_call(struct isob_comp *c, struct isob_msg *msg, unsigned entry, double x,
                                 long *bad)
{
    msg->arg[0] = cw_double_bits(x);
    *bad += isob_call(c, entry) != 0;
    return cw_bits_double(msg->arg[1]);
}

/* The maths kernel with each routine behind a crossing: the same
 * arithmetic, in the same order, as isob_work_cpu_maths. */
static uint64_t cw_lib(struct isob_comp *c, uint32_t n, uint64_t seed, long *bad)
{
    struct isob_msg *msg = c->mech->shared(c);
    double acc = 0.0;
    for (uint32_t i = 0; i < n; i++) {
        double x = isob_work_maths_x(i, seed);
        double s = cw_lib_call(c, msg, ISOB_ENTRY_MATH_SIN, x, bad);
        double co = cw_lib_call(c, msg, ISOB_ENTRY_MATH_COS, x, bad);
        double t = cw_lib_call(c, msg, ISOB_ENTRY_MATH_TAN, x, bad);
        double q = cw_lib_call(c, msg, ISOB_ENTRY_MATH_SQRT, x, bad);
        double l = cw_lib_call(c, msg, ISOB_ENTRY_MATH_LOG, x + 1.0, bad);
        acc += s * co * t * q * l;
    }
    return (uint64_t)cw_double_bits(acc);
}

/* What one placement's trials of one kernel came to. */
struct cw_result {
    struct isob_samples s;
    uint64_t value[CW_TRIALS];
    double ns[CW_TRIALS];
    uint32_t n;
    char why[256];
};

static void cw_fail(struct cw_result *res, const char *fmt, int trial, const char *detail)
{
    if (res->why[0])
        return;
    snprintf(res->why, sizeof res->why, fmt, trial, detail);
}

/* The lowest plausible ns per iteration of a kernel. */
static double cw_floor_ns(int kernel)
{
    if (kernel == CW_ARRAY)
        return CW_ARRAY_BYTES_PER_ELEMENT / WL_MAX_GBPS;
    return WL_MIN_NS_PER_ITER;
}

static void cw_emit(struct cw_run *r, int kernel, int where, struct cw_result *res, uint32_t warm_n)
{
    struct wl *w = r->w;
    const struct isob_bench_ctx *ctx = &w->wctx;
    struct wl_params p;
    if (wl_params_begin(&p, r->placement) == 0) {
        isob_jw_str(&p.jw, "where", cw_where[where]);
        isob_jw_str(&p.jw, "kernel", cw_kernels[kernel].name);
        /* trial_iterations says what was asked (it identifies the result);
         * iterations is what this placement ran (fewer for lib). */
        isob_jw_int(&p.jw, "trial_iterations", r->n);
        isob_jw_int(&p.jw, "iterations", res->n);
        isob_jw_int(&p.jw, "iterations_morello", CW_ITERATIONS);
        if (ctx->opts.iterations)
            isob_jw_str(&p.jw, "scaled", "--iterations: out and in run the count asked for");
        else if (ctx->opts.quick)
            isob_jw_str(&p.jw, "scaled", "--quick: out and in run Morello's count / 100");
        if (where == W_LIB)
            isob_jw_str(&p.jw, "scaled_lib", "iterations chosen for a trial of about the target time; "
                                              "compare per iteration");
        isob_jw_int(&p.jw, "trials", CW_TRIALS);
        isob_jw_int(&p.jw, "warmup_iterations", where == W_LIB ? res->n / CW_WARM_DIVISOR + 1 : warm_n);
        isob_jw_int(&p.jw, "crossings_per_trial", where == W_OUT ? 0 : where == W_IN ? 1 : 5ll * res->n);
        /* Only where the code inside is not out's object code. */
        if (where != W_OUT && r->is_wasm)
            isob_jw_str(&p.jw, "abi", "wasm32 (clang, wasm2c, then the native compiler): not out's object code");
        isob_jw_str(&p.jw, "compiler", ISOB_CC);
        isob_jw_str(&p.jw, "cflags", ISOB_CFLAGS);
        isob_jw_arr(&p.jw, "values");
        for (int t = 0; t < CW_TRIALS; t++)
            wl_jw_u64(&p.jw, NULL, res->value[t]);
        isob_jw_close(&p.jw, ']');
        double ns[CW_TRIALS];
        memcpy(ns, res->ns, sizeof ns);
        isob_jw_double(&p.jw, "ns_per_iteration", isob_median_double(ns, CW_TRIALS));
        isob_jw_str(&p.jw, "verified", where == W_OUT ? "every trial's value equals in's for its seed"
                                                      : "every trial's value equals out's for its seed and count");
    }
    int bad = res->why[0] != 0;
    wl_emit(w, wl_params_end(&p, ctx->mech), bad ? NULL : &res->s, NULL, 1, bad ? "failed" : "ok",
            bad ? res->why : NULL);
    wl_params_free(&p);
}

static void cw_skip(struct cw_run *r, int kernel, const char *where, const char *why)
{
    struct wl_params p;
    if (wl_params_begin(&p, r->placement) == 0) {
        isob_jw_str(&p.jw, "where", where);
        isob_jw_str(&p.jw, "kernel", cw_kernels[kernel].name);
    }
    wl_emit(r->w, wl_params_end(&p, r->w->wctx.mech), NULL, NULL, 0, "skipped", why);
    wl_params_free(&p);
}

/* Iterations for lib-in-compartment: what fits the target time. */
static uint32_t cw_lib_iterations(struct cw_run *r)
{
    long bad = 0;
    uint64_t a = wl_read(r->w);
    cw_lib(r->c, CW_LIB_PILOT, 1, &bad);
    double per = wl_ns(r->w, (double)(wl_read(r->w) - a)) / CW_LIB_PILOT;
    double target = (double)(r->w->wctx.opts.quick ? CW_LIB_TARGET_NS_QUICK : CW_LIB_TARGET_NS);
    double n = per > 0 ? target / per : r->n;
    if (n > r->n)
        n = r->n;
    if (n < CW_LIB_MIN)
        n = CW_LIB_MIN;
    return (uint32_t)n;
}

static void cw_kernel(struct cw_run *r, int kernel)
{
    struct wl *w = r->w;
    unsigned nev = w->wctx.ctr->nev;
    int lib = kernel == CW_MATHS;
    struct cw_result res[W_NWHERE];
    memset(res, 0, sizeof res);
    int oom = 0;
    for (int i = 0; i < W_NWHERE; i++) {
        oom |= isob_samples_alloc(&res[i].s, CW_TRIALS, nev) != 0;
        res[i].n = r->n;
    }
    if (oom) {
        for (int i = 0; i < W_NWHERE; i++) {
            snprintf(res[i].why, sizeof res[i].why, "out of memory for samples");
            if (i != W_LIB || lib)
                cw_emit(r, kernel, i, &res[i], 0);
            isob_samples_free(&res[i].s);
        }
        return;
    }
    if (lib)
        res[W_LIB].n = cw_lib_iterations(r);

    /* One short unrecorded trial per placement first: caches, page tables
     * and a sleeping server are not what a trial should time. */
    uint32_t warm_n = r->n / CW_WARM_DIVISOR ? r->n / CW_WARM_DIVISOR : 1;
    uint64_t v;
    long lbad = 0;
    isob_keep(cw_out(r, kernel, warm_n, 99));
    long rc = cw_in(r, kernel, warm_n, 99, &v);
    if (lib)
        cw_lib(r->c, res[W_LIB].n / CW_WARM_DIVISOR + 1, 99, &lbad);
    if (rc < 0)
        snprintf(res[W_IN].why, sizeof res[W_IN].why, "warm-up trial: %s", isob_strerror(rc));

    for (int t = 0; t < CW_TRIALS; t++) {
        uint64_t seed = (uint64_t)t + 1;
        /* out */
        uint64_t a = wl_read(w);
        res[W_OUT].value[t] = cw_out(r, kernel, r->n, seed);
        uint64_t b = wl_read(w);
        res[W_OUT].s.v[t * nev] = b - a;
        res[W_OUT].ns[t] = wl_ns(w, (double)(b - a)) / r->n;
        /* in */
        a = wl_read(w);
        rc = res[W_IN].why[0] ? -ECANCELED : cw_in(r, kernel, r->n, seed, &v);
        b = wl_read(w);
        res[W_IN].s.v[t * nev] = b - a;
        res[W_IN].ns[t] = wl_ns(w, (double)(b - a)) / r->n;
        res[W_IN].value[t] = rc == 0 ? v : 0;
        if (rc < 0 && rc != -ECANCELED)
            cw_fail(&res[W_IN], "trial %d: the entry failed: %s", t, isob_strerror(rc));
        if (rc == 0 && v != res[W_OUT].value[t]) {
            cw_fail(&res[W_IN], "trial %d: in's value differs from out's%s", t, "");
            cw_fail(&res[W_OUT], "trial %d: out's value differs from in's%s", t, "");
        }
        if (!lib)
            continue;
        /* lib-in-compartment, checked against out's kernel at its count */
        long bad = 0;
        a = wl_read(w);
        res[W_LIB].value[t] = cw_lib(r->c, res[W_LIB].n, seed, &bad);
        b = wl_read(w);
        res[W_LIB].s.v[t * nev] = b - a;
        res[W_LIB].ns[t] = wl_ns(w, (double)(b - a)) / res[W_LIB].n;
        if (bad)
            cw_fail(&res[W_LIB], "trial %d: %s", t, "a maths entry returned an error");
        else if (res[W_LIB].value[t] != cw_out(r, kernel, res[W_LIB].n, seed))
            cw_fail(&res[W_LIB], "trial %d: lib-in-compartment's value differs from out's%s", t, "");
    }
    for (int i = 0; i < (lib ? W_NWHERE : W_LIB); i++) {
        res[i].s.n = CW_TRIALS;
        for (int t = 0; t < CW_TRIALS; t++) {
            if (res[i].ns[t] < cw_floor_ns(kernel)) {
                char d[96];
                snprintf(d, sizeof d, "%.3g ns per iteration, below the plausible %.2g: the loop cannot have run",
                         res[i].ns[t], cw_floor_ns(kernel));
                cw_fail(&res[i], "trial %d: implausible: %s", t, d);
            }
        }
        cw_emit(r, kernel, i, &res[i], warm_n);
    }
    /* lib-in-compartment has no result for the other kernels: they call no
     * library routine, so a library in the compartment changes nothing. */
    for (int i = 0; i < W_NWHERE; i++)
        isob_samples_free(&res[i].s);
}

/* A compartment for one kernel: the array kernel's heap holds its array;
 * the others get the default heap, so that a mechanism whose crossing
 * cost grows with the heap (mprotect changes the protection of all of it)
 * is not charged for an array they never touch.  0 or -errno. */
static int cw_create(struct cw_run *r, int server_cpu, size_t heap, char *why, size_t len)
{
    const struct isob_mechanism *m = r->w->wctx.mech;
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    spec.server_cpu = server_cpu;
    if (heap)
        spec.heap_size = heap;
    int rc = isob_comp_create(m, &spec, &r->c);
    if (rc) {
        snprintf(why, len, "create (heap of %zu bytes): %s", spec.heap_size, isob_strerror(rc));
        r->c = NULL;
        return rc;
    }
    /* No data travels with these entries. */
    r->c->mech->shared(r->c)->len = 0;
    return 0;
}

static void cw_placement(struct wl *w, const char *placement, int server_cpu, void *arg)
{
    const struct isob_bench_ctx *ctx = &w->wctx;
    size_t n = ctx->opts.iterations ? ctx->opts.iterations
               : ctx->opts.quick ? CW_ITERATIONS / CW_QUICK_DIVISOR : CW_ITERATIONS;
    struct cw_run r = {.w = w, .k = arg, .placement = placement, .n = (uint32_t)n,
                       .is_wasm = strncmp(ctx->mech->name, "wasm", 4) == 0};
    size_t array_bytes = (size_t)r.n * sizeof(uint32_t);
    uint64_t avail = 0;
    int array_ok = wl_mem_available("/proc/meminfo", &avail) == 0 && 2 * array_bytes <= avail / 2;
    for (int k = 0; k < CW_NKERNELS; k++) {
        char why[200];
        if (k == CW_ARRAY && !array_ok) {
            snprintf(why, sizeof why, "the array needs %zu MiB twice (out and in); MemAvailable is %llu MiB, "
                     "of which at most half is used", array_bytes >> 20, (unsigned long long)(avail >> 20));
            for (int i = 0; i < W_LIB; i++)
                cw_skip(&r, k, cw_where[i], why);
            continue;
        }
        if (k == CW_ARRAY)
            r.array = isob_map(array_bytes, 0);
        int rc = k == CW_ARRAY && !r.array ? -ENOMEM
                 : cw_create(&r, server_cpu, k == CW_ARRAY ? isob_work_heap_size(array_bytes) : 0, why, sizeof why);
        if (rc == -ENOMEM && !r.array && k == CW_ARRAY)
            snprintf(why, sizeof why, "out of memory for out's array of %zu bytes", array_bytes);
        if (rc) {
            for (int i = 0; i < (k == CW_MATHS ? W_NWHERE : W_LIB); i++) {
                struct wl_params p;
                if (wl_params_begin(&p, placement) == 0) {
                    isob_jw_str(&p.jw, "where", cw_where[i]);
                    isob_jw_str(&p.jw, "kernel", cw_kernels[k].name);
                }
                wl_emit(w, wl_params_end(&p, ctx->mech), NULL, NULL, 0, "failed", why);
                wl_params_free(&p);
            }
        } else {
            cw_kernel(&r, k);
            isob_comp_destroy(r.c);
            r.c = NULL;
        }
        if (k == CW_ARRAY) {
            isob_unmap(r.array, array_bytes);
            r.array = NULL;
        }
    }
}

int isob_cpuwork_run_with(struct isob_bench_ctx *ctx, const struct isob_cpuwork_kernels *k)
{
    struct wl w;
    int rc = wl_begin(&w, ctx, "cpuwork");
    if (rc)
        return rc;
    wl_each_placement(&w, cw_placement, (void *)k);
    wl_end(&w);
    return 0;
}

static int cw_run(struct isob_bench_ctx *ctx)
{
    return isob_cpuwork_run_with(ctx, &isob_cpuwork_native);
}

const struct isob_bench isob_bench_cpuwork = {
    .name = "cpuwork",
    .summary = "Morello's CPU kernels (int, float, array, maths) out, in, and with the maths library in the compartment",
    .needs_mechanism = 1,
    .run = cw_run,
};
