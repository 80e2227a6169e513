/* Helpers shared by the workload benchmarks (worksweep, cpuwork, memops,
 * pipeio, scale): a wall-clock counter, params objects, the CPU placements
 * to run, plausibility bounds and what /proc says about memory.
 * docs/workloads.md says what each workload proves. */
#ifndef ISOB_BENCHES_WORKLOAD_H
#define ISOB_BENCHES_WORKLOAD_H

#include <stdint.h>
#include <stdio.h>

#include "isobench/bench.h"

/* Plausibility bounds: a result beyond them is an error, not a result. */
#define WL_MAX_GBPS 100.0        /* no memory rate of one thread exceeds this */
#define WL_MIN_NS_PER_ITER 0.1   /* an iteration of a dependent chain takes a cycle or more */

/* The workloads time wall-clock: the TSC where it is usable, else
 * CLOCK_MONOTONIC_RAW.  A thread's perf cycle counter would not see work
 * done in a server process or time spent blocked in the kernel, and both
 * are part of what these workloads cost. */
struct wl {
    struct isob_bench_ctx *ctx;   /* the driver's */
    struct isob_bench_ctx wctx;   /* the same, with the wall counter and its empty region */
    struct isob_counter wall;     /* used when the driver's counter is perf */
    const char *bench;
};

/* Set up w for ctx (0 or -errno), and give it back (propagating failure). */
int wl_begin(struct wl *w, struct isob_bench_ctx *ctx, const char *bench);
void wl_end(struct wl *w);

/* Nanoseconds in d readings of w's counter. */
double wl_ns(const struct wl *w, double d);
/* One reading of w's counter (its primary value). */
uint64_t wl_read(struct wl *w);

/* A params object under construction: {"placement":..., then members}. */
struct wl_params {
    char *buf;
    size_t len;
    FILE *f;
    struct isob_jw jw;
};
/* Begin with the placement (NULL: none).  0 or -ENOMEM. */
int wl_params_begin(struct wl_params *p, const char *placement);
/* Close with the mechanism's own members; p->buf is the text, or NULL when
 * memory ran out. */
const char *wl_params_end(struct wl_params *p, const struct isob_mechanism *m);
void wl_params_free(struct wl_params *p);
/* A 64-bit unsigned member, exact (no trip through a double). */
void wl_jw_u64(struct isob_jw *jw, const char *key, uint64_t v);

/* Emit one result of w's benchmark with w's counter: warmup is the number
 * of unrecorded runs before the samples, batched the batched estimate
 * (NULL: none); s NULL for a result without samples. */
void wl_emit(struct wl *w, const char *params, const struct isob_samples *s,
             const struct isob_batched *batched,
             size_t warmup, const char *status, const char *reason);

/* The CPU placements to run: a mechanism with one execution context runs
 * once; one with two runs the first placement asked, or each one asked
 * when --placement was given.  fn gets the placement and the server CPU;
 * cross-cpu without a second CPU is reported skipped here. */
typedef void wl_placement_fn(struct wl *w, const char *placement, int server_cpu, void *arg);
void wl_each_placement(struct wl *w, wl_placement_fn *fn, void *arg);

/* Bytes of MemAvailable in a meminfo file ("/proc/meminfo"); 0 or -errno. */
int wl_mem_available(const char *meminfo, uint64_t *bytes);

/* The THP setting ("always", "madvise", "never" or "unknown"): with THP a
 * first touch can fault in 2 MiB at once. */
const char *wl_thp_mode(char *buf, size_t len);

/* A small seeded generator for choices that must be the same every run. */
static inline uint64_t wl_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* cpuwork's `out` kernels.  The benchmark runs isob_cpuwork_native; tests
 * run it with broken kernels (a zero-trip loop) to see its checks fail. */
struct isob_cpuwork_kernels {
    uint64_t (*cpu_int)(uint32_t n, uint64_t seed);
    uint64_t (*cpu_float)(uint32_t n, uint64_t seed);
    uint64_t (*cpu_maths)(uint32_t n, uint64_t seed);
    uint64_t (*cpu_array)(uint32_t *a, uint32_t n, uint64_t seed);
};
extern const struct isob_cpuwork_kernels isob_cpuwork_native;
int isob_cpuwork_run_with(struct isob_bench_ctx *ctx, const struct isob_cpuwork_kernels *k);

/* memops' `out` kernels, replaceable the same way (a zero-trip write, a
 * write that skips a page). */
struct isob_memops_kernels {
    void (*write)(uint64_t *p, size_t words, uint64_t seed);
    void (*fill)(void *p, size_t bytes, int c);
    uint64_t (*read)(const uint64_t *p, size_t words);
};
extern const struct isob_memops_kernels isob_memops_native;
int isob_memops_run_with(struct isob_bench_ctx *ctx, const struct isob_memops_kernels *k);

#endif
