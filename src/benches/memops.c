/* memops: allocate, write, read and free large blocks, out of and inside a
 * compartment (Morello's memory experiment, with its loops made to run).
 *
 * For each block size and trial, two passes:
 *     alloc; write every 8-byte word; read every word into a sum; free
 *     alloc; memset every byte;       read every word into a sum; free
 * Each step is timed on its own, and the minor page faults it caused are
 * counted around it (untimed): a first write into fresh memory faults about
 * once per 4 KiB page (once per 2 MiB with transparent huge pages), a read
 * of memory already written does not.  The sum is checked against its
 * closed form, so a write that skipped words is caught even when the
 * faults look right.  Rates above WL_MAX_GBPS fail as implausible.
 *
 * "where" in params:
 *   out  malloc and free here (glibc; every block is above the mmap
 *        threshold, which is pinned so that each block is fresh memory);
 *   in   the compartment's own heap, sized for the block at creation: the
 *        MEM_* entries take the block there and hand its pages back to the
 *        host with MADV_DONTNEED on alloc and free, so a block is fresh
 *        memory as malloc's is.  The faults are counted where they happen,
 *        through a host call that asks getrusage in the process that runs
 *        the compartment (the server, for process mechanisms).
 * Trials alternate which placement goes first. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "isobench/host.h"
#include "isobench/work.h"
#include "workload.h"

#define MO_MIB ((size_t)1 << 20)
#define MO_SIZE_STEP (100 * MO_MIB)       /* 100 MiB to 1000 MiB by 100 MiB (Morello's sizes) */
#define MO_SIZE_COUNT 10
#define MO_TRIALS 10                      /* trials per size and placement */
#define MO_AVAIL_DIVISOR 2                /* a block may take at most half of MemAvailable */
#define MO_MIN_BYTES (1 * MO_MIB)         /* smaller blocks would not leave the allocator's heap */
#define MO_FILL 0xa5                      /* the memset pass's byte */
#define MO_HUGE_PAGE (2 * MO_MIB)         /* the largest page one fault can bring in */
#define MO_MMAP_THRESHOLD (128 * 1024)    /* pinned: every block comes from mmap */

static const size_t mo_quick_sizes[] = {64 * MO_MIB, 256 * MO_MIB};

enum { S_ALLOC, S_WRITE, S_MEMSET, S_READ, S_FREE, S_N };
static const char *const mo_steps[S_N] = {"alloc", "write", "memset", "read", "free"};
enum { MO_OUT, MO_IN };
static const char *const mo_where[2] = {"out", "in"};

const struct isob_memops_kernels isob_memops_native = {
    .write = isob_work_mem_write,
    .fill = isob_work_mem_fill,
    .read = isob_work_mem_read,
};

/* One step's trials at one size and placement. */
struct mo_step {
    struct isob_samples s;
    uint64_t faults[2 * MO_TRIALS];
    double gbps[2 * MO_TRIALS];
    char why[256];
};

struct mo_run {
    struct wl *w;
    const struct isob_memops_kernels *k;
    const char *placement;
    struct isob_comp *c;       /* the compartment of this size; NULL for out only */
    size_t bytes;
    struct mo_step st[2][S_N];
    const char *in_skip;       /* why `in` does not run, or NULL */
    const char *out_skip;      /* why `out` does not run, or NULL */
    char in_why[256];
};

static void mo_fail(struct mo_step *st, const char *fmt, int trial, const char *detail)
{
    if (!st->why[0])
        snprintf(st->why, sizeof st->why, fmt, trial, detail);
}

static uint64_t mo_self_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_minflt;
}

/* Minor faults where the compartment runs; UINT64_MAX when unknown. */
static uint64_t mo_comp_faults(struct isob_comp *c)
{
    if (isob_call(c, ISOB_ENTRY_HOST_FAULTS) != 0)
        return UINT64_MAX;
    return (uint64_t)c->mech->shared(c)->arg[1];
}

/* Record a step's sample: its time, its faults and its rate. */
static void mo_record(struct mo_run *r, int where, int step, uint64_t ticks, uint64_t f0, uint64_t f1)
{
    struct mo_step *st = &r->st[where][step];
    if (st->s.n == st->s.cap)
        return;
    size_t i = st->s.n++;
    st->s.v[i * st->s.nev] = ticks;
    st->faults[i] = f0 == UINT64_MAX || f1 == UINT64_MAX ? UINT64_MAX : f1 - f0;
    double ns = wl_ns(r->w, (double)ticks);
    st->gbps[i] = ns > 0 ? (double)r->bytes / ns : 0;
}

/* The checks of a touching step (write or memset) and of the read after
 * it; sum is what the read returned, want what it must be. */
static void mo_check(struct mo_run *r, int where, int step, int trial, uint64_t sum, uint64_t want)
{
    struct mo_step *touch = &r->st[where][step], *rd = &r->st[where][S_READ];
    size_t i = touch->s.n - 1;
    uint64_t least = r->bytes / MO_HUGE_PAGE ? r->bytes / MO_HUGE_PAGE : 1;
    char d[200];
    if (touch->faults[i] == UINT64_MAX) {
        mo_fail(touch, "trial %d: %s", trial, "its minor faults could not be counted");
    } else if (touch->faults[i] < least) {
        snprintf(d, sizeof d, "%llu minor faults for %zu fresh bytes, at least %llu expected: "
                 "the memory was not touched", (unsigned long long)touch->faults[i], r->bytes,
                 (unsigned long long)least);
        mo_fail(touch, "trial %d: %s", trial, d);
    }
    if (sum != want) {
        snprintf(d, sizeof d, "the sum read back is %#llx, not %#llx: not every word was %s",
                 (unsigned long long)sum, (unsigned long long)want, step == S_WRITE ? "written" : "set");
        mo_fail(touch, "trial %d: %s", trial, d);
        if (step == S_WRITE)
            mo_fail(rd, "trial %d: %s", trial, d);
    }
    struct mo_step *rates[2] = {touch, rd};
    for (int k = 0; k < 2; k++) {
        struct mo_step *st = rates[k];
        if (k == 1 && step != S_WRITE)
            break;
        double g = st->gbps[st->s.n - 1];
        if (g > WL_MAX_GBPS) {
            snprintf(d, sizeof d, "%.1f GB/s is above the plausible %.0f GB/s", g, WL_MAX_GBPS);
            mo_fail(st, "trial %d: implausible: %s", trial, d);
        }
    }
}

/* One trial out: both passes with malloc and free. */
static void mo_trial_out(struct mo_run *r, int trial, uint64_t seed)
{
    size_t words = r->bytes / 8;
    for (int pass = 0; pass < 2; pass++) {
        int step = pass ? S_MEMSET : S_WRITE;
        uint64_t f0 = mo_self_faults(), a = wl_read(r->w);
        void *p = malloc(r->bytes);
        uint64_t b = wl_read(r->w), f1 = mo_self_faults();
        if (!p) {
            mo_fail(&r->st[MO_OUT][S_ALLOC], "trial %d: malloc: %s", trial, "out of memory");
            return;
        }
        mo_record(r, MO_OUT, S_ALLOC, b - a, f0, f1);
        a = wl_read(r->w);
        if (pass)
            r->k->fill(p, r->bytes, MO_FILL);
        else
            r->k->write(p, words, seed);
        b = wl_read(r->w);
        uint64_t f2 = mo_self_faults();
        mo_record(r, MO_OUT, step, b - a, f1, f2);
        a = wl_read(r->w);
        uint64_t sum = r->k->read(p, words);
        b = wl_read(r->w);
        uint64_t f3 = mo_self_faults();
        /* The read after memset only verifies; it is not a result. */
        if (!pass)
            mo_record(r, MO_OUT, S_READ, b - a, f2, f3);
        mo_check(r, MO_OUT, step, trial, sum,
                 pass ? (uint64_t)words * (0x0101010101010101ull * MO_FILL) : isob_work_mem_expected(words, seed));
        a = wl_read(r->w);
        free(p);
        b = wl_read(r->w);
        mo_record(r, MO_OUT, S_FREE, b - a, f3, mo_self_faults());
    }
}

/* One entry of an `in` step; its result, and the failure recorded. */
static long mo_call(struct mo_run *r, int step, int trial, unsigned entry)
{
    long rc = isob_call(r->c, entry);
    if (rc < 0) {
        char d[160];
        snprintf(d, sizeof d, "the entry failed: %s", isob_strerror(rc));
        mo_fail(&r->st[MO_IN][step], "trial %d: %s", trial, d);
    }
    return rc;
}

/* One trial in: both passes through the MEM_* entries. */
static void mo_trial_in(struct mo_run *r, int trial, uint64_t seed)
{
    size_t words = r->bytes / 8;
    struct isob_msg *msg = r->c->mech->shared(r->c);
    for (int pass = 0; pass < 2; pass++) {
        int step = pass ? S_MEMSET : S_WRITE;
        uint64_t f0 = mo_comp_faults(r->c), a, b;
        msg->arg[0] = (int64_t)r->bytes;
        a = wl_read(r->w);
        long rc = mo_call(r, S_ALLOC, trial, ISOB_ENTRY_MEM_ALLOC);
        b = wl_read(r->w);
        uint64_t f1 = mo_comp_faults(r->c);
        if (rc < 0)
            return;
        mo_record(r, MO_IN, S_ALLOC, b - a, f0, f1);
        msg->arg[0] = pass ? MO_FILL : (int64_t)seed;
        a = wl_read(r->w);
        rc = mo_call(r, step, trial, pass ? ISOB_ENTRY_MEM_FILL : ISOB_ENTRY_MEM_WRITE);
        b = wl_read(r->w);
        uint64_t f2 = mo_comp_faults(r->c);
        mo_record(r, MO_IN, step, b - a, f1, f2);
        a = wl_read(r->w);
        rc = rc < 0 ? rc : mo_call(r, S_READ, trial, ISOB_ENTRY_MEM_READ);
        b = wl_read(r->w);
        uint64_t f3 = mo_comp_faults(r->c), sum = (uint64_t)msg->arg[2];
        if (!pass)
            mo_record(r, MO_IN, S_READ, b - a, f2, f3);
        if (rc >= 0)
            mo_check(r, MO_IN, step, trial, sum,
                     pass ? (uint64_t)words * (0x0101010101010101ull * MO_FILL) : isob_work_mem_expected(words, seed));
        a = wl_read(r->w);
        rc = mo_call(r, S_FREE, trial, ISOB_ENTRY_MEM_FREE);
        b = wl_read(r->w);
        mo_record(r, MO_IN, S_FREE, b - a, f3, mo_comp_faults(r->c));
        if (rc < 0)
            return;
    }
}

static void mo_emit(struct mo_run *r, int where, int step)
{
    struct wl *w = r->w;
    struct mo_step *st = &r->st[where][step];
    const struct isob_mechanism *m = w->wctx.mech;
    struct wl_params p;
    char thp[32];
    if (wl_params_begin(&p, r->placement) == 0) {
        isob_jw_str(&p.jw, "where", mo_where[where]);
        isob_jw_str(&p.jw, "step", mo_steps[step]);
        isob_jw_int(&p.jw, "size_bytes", (long long)r->bytes);
        isob_jw_int(&p.jw, "size_mib", (long long)(r->bytes / MO_MIB));
        isob_jw_int(&p.jw, "trials", MO_TRIALS);
        isob_jw_arr(&p.jw, "minor_faults");
        for (size_t i = 0; i < st->s.n; i++) {
            if (st->faults[i] == UINT64_MAX)
                isob_jw_raw(&p.jw, NULL, "null");
            else
                wl_jw_u64(&p.jw, NULL, st->faults[i]);
        }
        isob_jw_close(&p.jw, ']');
        isob_jw_int(&p.jw, "pages_4k", (long long)(r->bytes / 4096));
        isob_jw_str(&p.jw, "fault_site", where == MO_OUT || !(m->props & ISOB_SEPARATE_AS)
                                              ? "this process" : "the compartment's server process");
        if (step == S_WRITE || step == S_MEMSET || step == S_READ) {
            double g[2 * MO_TRIALS];
            memcpy(g, st->gbps, st->s.n * sizeof *g);
            isob_jw_double(&p.jw, "gbps", st->s.n ? isob_median_double(g, st->s.n) : 0);
            isob_jw_str(&p.jw, "verified", step == S_MEMSET
                        ? "every word read back equals the memset byte's"
                        : "the sum of every word read back equals its closed form");
        }
        isob_jw_str(&p.jw, "allocator", where == MO_OUT
                    ? "malloc (glibc, mmap threshold pinned at 128 KiB)"
                    : "the compartment's heap; pages handed back with MADV_DONTNEED through a host call");
        isob_jw_str(&p.jw, "thp", wl_thp_mode(thp, sizeof thp));
        /* memset is the C library's, but in a wasm guest. */
        if (step == S_MEMSET && where == MO_IN && strncmp(m->name, "wasm", 4) == 0)
            isob_jw_str(&p.jw, "memset", "the wasm guest's byte loop (guest.c), not the C library's");
    }
    int bad = st->why[0] || st->s.n == 0;
    wl_emit(w, wl_params_end(&p, m), bad ? NULL : &st->s, NULL, 0, bad ? "failed" : "ok",
            bad ? (st->why[0] ? st->why : "no trial completed") : NULL);
    wl_params_free(&p);
}

static void mo_skip(struct mo_run *r, int where, const char *why)
{
    for (int step = 0; step < S_N; step++) {
        struct wl_params p;
        if (wl_params_begin(&p, r->placement) == 0) {
            isob_jw_str(&p.jw, "where", mo_where[where]);
            isob_jw_str(&p.jw, "step", mo_steps[step]);
            isob_jw_int(&p.jw, "size_bytes", (long long)r->bytes);
            isob_jw_int(&p.jw, "size_mib", (long long)(r->bytes / MO_MIB));
        }
        wl_emit(r->w, wl_params_end(&p, r->w->wctx.mech), NULL, NULL, 0, "skipped", why);
        wl_params_free(&p);
    }
}

static void mo_size(struct mo_run *r, int server_cpu)
{
    const struct isob_mechanism *m = r->w->wctx.mech;
    unsigned nev = r->w->wctx.ctr->nev;
    memset(r->st, 0, sizeof r->st);
    int oom = 0;
    for (int where = 0; where < 2; where++)
        for (int step = 0; step < S_N; step++)
            oom |= isob_samples_alloc(&r->st[where][step].s, 2 * MO_TRIALS, nev) != 0;
    r->c = NULL;
    r->in_skip = NULL;
    char why[256];
    if (!isob_host_calls_ok(m, why, sizeof why)) {
        snprintf(r->in_why, sizeof r->in_why, "%s", why);
        r->in_skip = r->in_why;
    } else if (!oom) {
        struct isob_comp_spec spec;
        isob_spec_defaults(&spec);
        spec.server_cpu = server_cpu;
        spec.heap_size = isob_work_heap_size(r->bytes);
        int rc = isob_comp_create(m, &spec, &r->c);
        if (rc) {
            snprintf(r->in_why, sizeof r->in_why, "create (heap of %zu bytes): %s", spec.heap_size,
                     isob_strerror(rc));
            r->c = NULL;
        } else {
            r->c->mech->shared(r->c)->len = 0;
        }
    }
    if (!oom) {
        for (int t = 0; t < MO_TRIALS; t++) {
            uint64_t seed = 0x6d656d0000000000ull + (uint64_t)t;
            /* Alternate which goes first, so that neither always meets the
             * other's freed memory. */
            for (int k = 0; k < 2; k++) {
                int where = (k + t) % 2 ? MO_OUT : MO_IN;
                if (where == MO_OUT && !r->out_skip)
                    mo_trial_out(r, t, seed);
                else if (where == MO_IN && r->c)
                    mo_trial_in(r, t, seed);
            }
        }
    }
    for (int where = 0; where < 2; where++) {
        const char *skip = where == MO_IN ? r->in_skip : r->out_skip;
        if (skip) {
            mo_skip(r, where, skip);
            continue;
        }
        for (int step = 0; step < S_N; step++) {
            struct mo_step *st = &r->st[where][step];
            if (oom)
                snprintf(st->why, sizeof st->why, "out of memory for samples");
            else if (where == MO_IN && !r->c)
                snprintf(st->why, sizeof st->why, "%s", r->in_why);
            mo_emit(r, where, step);
        }
    }
    if (r->c)
        isob_comp_destroy(r->c);
    for (int where = 0; where < 2; where++)
        for (int step = 0; step < S_N; step++)
            isob_samples_free(&r->st[where][step].s);
}

/* The block sizes: --sizes, or Morello's, or --quick's. */
static size_t mo_sizes(const struct isob_bench_opts *o, size_t *out)
{
    if (o->nsizes) {
        memcpy(out, o->sizes, o->nsizes * sizeof *out);
        return o->nsizes;
    }
    if (o->quick) {
        memcpy(out, mo_quick_sizes, sizeof mo_quick_sizes);
        return sizeof mo_quick_sizes / sizeof mo_quick_sizes[0];
    }
    for (size_t i = 0; i < MO_SIZE_COUNT; i++)
        out[i] = (i + 1) * MO_SIZE_STEP;
    return MO_SIZE_COUNT;
}

struct mo_arg {
    const struct isob_memops_kernels *k;
};

static void mo_placement(struct wl *w, const char *placement, int server_cpu, void *arg)
{
    struct mo_arg *ma = arg;
    size_t sizes[ISOB_MAX_SIZES], n = mo_sizes(&w->wctx.opts, sizes);
    uint64_t avail = 0;
    wl_mem_available("/proc/meminfo", &avail);
    /* glibc's MALLOC_PERTURB_ fills every block inside malloc, so out's
     * write would no longer be the first touch: out is then not Morello's
     * measurement and is not run. */
    const char *perturb = getenv("MALLOC_PERTURB_");
    int out_ok = !perturb || !*perturb || strcmp(perturb, "0") == 0;
    struct mo_run *r = calloc(1, sizeof *r);
    if (!r) {
        struct wl_params p;
        wl_params_begin(&p, placement);
        wl_emit(w, wl_params_end(&p, w->wctx.mech), NULL, NULL, 0, "failed", "out of memory");
        wl_params_free(&p);
        return;
    }
    r->w = w;
    r->k = ma->k;
    r->placement = placement;
    r->out_skip = out_ok ? NULL : "MALLOC_PERTURB_ is set: malloc fills each block itself, so the "
                                  "write would not be its first touch";
    for (size_t i = 0; i < n; i++) {
        r->bytes = sizes[i];
        if (sizes[i] > avail / MO_AVAIL_DIVISOR) {
            char why[200];
            snprintf(why, sizeof why, "a %zu MiB block is more than half of MemAvailable (%llu MiB)",
                     sizes[i] / MO_MIB, (unsigned long long)(avail / MO_MIB));
            mo_skip(r, MO_OUT, why);
            mo_skip(r, MO_IN, why);
            continue;
        }
        mo_size(r, server_cpu);
    }
    free(r);
}

int isob_memops_run_with(struct isob_bench_ctx *ctx, const struct isob_memops_kernels *k)
{
    struct wl w;
    int rc = wl_begin(&w, ctx, "memops");
    if (rc)
        return rc;
    /* A fixed threshold: glibc would otherwise raise it after the first
     * free, up to 32 MiB, and smaller blocks would then be reused memory
     * that no longer faults. */
    mallopt(M_MMAP_THRESHOLD, MO_MMAP_THRESHOLD);
    struct mo_arg ma = {k};
    wl_each_placement(&w, mo_placement, &ma);
    wl_end(&w);
    return 0;
}

static int mo_run_bench(struct isob_bench_ctx *ctx)
{
    return isob_memops_run_with(ctx, &isob_memops_native);
}

/* --sizes beyond what this machine can hold are refused before anything
 * runs, with the figure. */
static int mo_check_opts(const struct isob_bench_opts *o, char *why, size_t len)
{
    uint64_t avail = 0;
    int rc = wl_mem_available("/proc/meminfo", &avail);
    for (size_t i = 0; i < o->nsizes; i++) {
        if (o->sizes[i] < MO_MIN_BYTES) {
            snprintf(why, len, "--sizes: %zu bytes is below the 1 MiB a block needs to be fresh memory",
                     o->sizes[i]);
            return -EINVAL;
        }
        if (rc == 0 && o->sizes[i] > avail / MO_AVAIL_DIVISOR) {
            snprintf(why, len, "--sizes: a %zu MiB block needs more than half of MemAvailable (%llu MiB)",
                     o->sizes[i] / MO_MIB, (unsigned long long)(avail / MO_MIB));
            return -ENOMEM;
        }
    }
    return 0;
}

const struct isob_bench isob_bench_memops = {
    .name = "memops",
    .summary = "allocate, write, memset, read, free 100-1000 MiB blocks, out and in the compartment's heap",
    .needs_mechanism = 1,
    .run = mo_run_bench,
    .check = mo_check_opts,
};
