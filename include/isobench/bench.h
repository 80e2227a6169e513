/* The benchmark contract and the JSON-lines output of the native driver. */
#ifndef ISOBENCH_BENCH_H
#define ISOBENCH_BENCH_H

#include <stdio.h>
#include "isobench/harness.h"
#include "isobench/mechanism.h"

/* Defaults of the measuring loop; `isob --help` prints them. */
#define ISOB_DEFAULT_N 20000          /* per-iteration samples per result */
#define ISOB_DEFAULT_WARMUP 2000      /* calls before measuring, not recorded */
#define ISOB_DEFAULT_BATCH_K 1000     /* K of the batched (K vs 2K) estimator */
#define ISOB_DEFAULT_BATCH_REPS 15    /* (K, 2K) pairs; the estimate is their median */
#define ISOB_DEFAULT_EMPTY_N 20000    /* empty-region samples */
#define ISOB_QUICK_DIVISOR 4          /* --quick divides n, warm-up and K by this */
#define ISOB_MAX_SIZES 32             /* --sizes: at most this many data sizes */
#define ISOB_DEFAULT_SEED 1           /* --seed: seeds the kv benchmark's keys and orders */

struct isob_bench_opts {
    size_t n, warmup, batch_k, batch_reps, empty_n;
    int quick;
    unsigned placements;       /* bit (1 << enum isob_placement) for each placement to run */
    int client_cpu;            /* CPU of the untrusted side; -1 unpinned */
    const char *param;         /* benchmark-specific selector (pingpong: --primitive), or NULL */
    int placement_given;       /* 1 when --placement was passed (kv then runs every placement asked) */
    size_t sizes[ISOB_MAX_SIZES]; /* --sizes: data sizes in bytes; nsizes 0 means the benchmark's own */
    size_t nsizes;
    size_t iterations;         /* --iterations: measured passes per data size; 0 means derived from n */
    uint64_t seed;             /* --seed: keys, values and read orders */
    const char *confine;       /* --confine: oslat's confinement (NAME or NAME:VARIANT), or NULL */
    size_t limit;              /* --limit: scale's most compartments; 0 means its default */
    /* Options of the microkernel benchmarks (docs/microkernel.md), as
     * given: comma-separated lists that each benchmark's check() parses.
     * NULL: the benchmark's default. */
    const char *protect;       /* --protect: pingpong's protections of both endpoints */
    const char *payloads;      /* --payload: pingpong's and switch's message sizes in bytes */
    const char *depths;        /* --depth: delegate's chain depths */
    const char *variants;      /* --variant: delegate's and sched's variants */
    const char *workers;       /* --workers: sched's worker counts */
    const char *slices;        /* --slice: sched's slice lengths in microseconds */
    const char *modes;         /* --mode: sched's yield or preempt */
    const char *cpus;          /* --cpus: sched's one CPU or all CPUs */
    const char *pid;           /* --pid: inspect's target process, or NULL for isob itself */
    const char *reading;       /* --reading: kv's counter readings, per-request and/or per-pass */
};

/* An option only some benchmarks take: isob refuses it for the others,
 * and `isob list --json` lists it under each benchmark that takes it. */
struct isob_bench_option {
    const char *name;          /* "--protect" */
    const char *values;        /* what it takes, in words: "none,seccomp,userns,landlock" */
    const char *dflt;          /* the default, as it would be written */
    const char *summary;
};

struct isob_bench_ctx {
    struct isob_counter *ctr;
    const struct isob_mechanism *mech;   /* NULL for benchmarks without one */
    struct isob_bench_opts opts;
    FILE *out;
    double empty_median;                 /* cost of an empty region, primary unit */
    double empty_mean;                   /* resolves below the counter's step */
    uint64_t empty_min;
    double empty_p5, empty_p95;          /* what reading costs, inside 90% of empty regions */
    size_t empty_n;
    uint64_t step;                       /* smallest non-zero difference of two readings */
    int failed;                          /* set when a result failed */
    int skipped;                         /* set when nothing could be measured here: exit 4 */
};

struct isob_jw;

struct isob_bench {
    const char *name;
    const char *summary;
    int needs_mechanism;
    int takes_confine;                   /* accepts --confine */
    /* Emits result lines; returns 0, or a negative errno for a failure that
     * stopped the benchmark (individual failed results set ctx->failed). */
    int (*run)(struct isob_bench_ctx *ctx);
    /* Optional: reject options before anything is measured (0, or -EINVAL
     * with a one-line reason; isob exits 2). */
    int (*check)(const struct isob_bench_opts *opts, char *why, size_t len);
    /* Optional: more members of its `isob list --json` entry. */
    void (*describe)(struct isob_jw *w);
    /* Optional: the options of struct isob_bench_opts' microkernel group
     * it takes, ended by an entry without a name. */
    const struct isob_bench_option *options;
};

/* 1 when b lists the option `name` ("--protect") among its own. */
int isob_bench_takes(const struct isob_bench *b, const char *name);

extern const struct isob_bench *const isob_benches[];
const struct isob_bench *isob_bench_find(const char *name);

/* ---- output (src/harness/emit.c) ----
 * Every line is one JSON object with "schema_version" and "type".
 * Schema history:
 *   1  first version: header, result, isolation, list lines.
 *      The isolation line later gained the attacker matrix, with its own
 *      matrix_version (isolation.h); its earlier members are unchanged.
 *      Later additions, each optional for a reader (an older isob omits
 *      them): result "batched_reps" (every (K, 2K) pair's estimate, in
 *      measuring order; [] when there is no batched estimate), header
 *      "empty_region" "p5" and "p95". */

/* A streaming JSON-lines writer: one object per line, flushed at the end so
 * that a crash later loses nothing already written. */
struct isob_jw {
    FILE *f;
    int comma;  /* a value was written at this level: the next needs a comma */
};
void isob_jw_begin(struct isob_jw *w, FILE *f, const char *type); /* {"schema_version":..,"type":.. */
void isob_jw_end(struct isob_jw *w);                               /* }\n and fflush */
void isob_jw_str(struct isob_jw *w, const char *key, const char *v); /* v NULL -> null */
void isob_jw_int(struct isob_jw *w, const char *key, long long v);
void isob_jw_double(struct isob_jw *w, const char *key, double v);   /* non-finite -> null */
void isob_jw_bool(struct isob_jw *w, const char *key, int v);
void isob_jw_raw(struct isob_jw *w, const char *key, const char *json);
void isob_jw_obj(struct isob_jw *w, const char *key);  /* opens an object */
void isob_jw_arr(struct isob_jw *w, const char *key);  /* opens an array */
void isob_jw_close(struct isob_jw *w, char bracket);   /* '}' or ']' */
/* An array of column e of a row-major u64 table with `stride` values a row. */
void isob_jw_u64_column(struct isob_jw *w, const char *key, const uint64_t *v, size_t n,
                        unsigned stride, unsigned e);

/* The measurement's header line. */
void isob_emit_header(struct isob_bench_ctx *ctx, const char *bench);

/* A result line.  params_json is a JSON object text ("{...}"), s may be NULL
 * for a skipped or failed result without samples, and batched NULL (or one
 * with no valid pair) for a result without a batched estimate. */
void isob_emit_result(struct isob_bench_ctx *ctx, const char *bench, const char *params_json,
                      const struct isob_samples *s, const struct isob_batched *batched,
                      const char *status, const char *reason, const char *unit_override);

/* Measure the empty region into ctx->empty_median (and keep its samples in
 * the header). Returns 0 or -errno. */
int isob_measure_empty(struct isob_bench_ctx *ctx);

#endif
