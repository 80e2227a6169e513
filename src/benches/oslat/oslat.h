/* oslat: what the operating system's own latencies become under a
 * confinement.  The internals shared by the driver (oslat.c) and the four
 * families of primitives (ctx.c, fs.c, ipc.c, proc.c, bw.c); see docs/oslat.md.
 *
 * A primitive measures one or more cells (a size, a message length, a
 * ring shape).  A cell, in pseudo-code:
 *
 *     oslat_cell_open      samples and scratch allocated and touched,
 *                          the confinement's helper count read
 *     OSLAT_WARM           warm-up iterations, not recorded
 *     OSLAT_EACH           per-iteration samples until the cap or the budget
 *     OSLAT_BATCHED        K vs 2K iterations, where an iteration is cheap
 *     self-check           did the work happen (counts, checksums, faults)
 *     oslat_cell_close     helper count checked against the iterations,
 *                          one result line
 *
 * Every iteration, warm-up and batched ones included, is counted in
 * cell->ops; a primitive that traps on every iteration must have been
 * seen by the confinement's helper at least that often. */
#ifndef ISOB_OSLAT_H
#define ISOB_OSLAT_H

#include <stdint.h>
#include <sys/types.h>

#include "isobench/bench.h"
#include "isobench/confine.h"


/* Per-iteration measuring time per cell; warm-up may take a quarter more,
 * the batched estimate half more.  --quick takes the smaller one. */
#define OSLAT_BUDGET_NS 500000000ull
#define OSLAT_BUDGET_NS_QUICK 100000000ull
/* Per-iteration samples a cell takes at least, budget or not. */
#define OSLAT_MIN_SAMPLES 5
/* Budgets a cell may run over while it has fewer than OSLAT_MIN_SAMPLES. */
#define OSLAT_OVERTIME 3
/* A batched estimate needs at least this K to be worth its time. */
#define OSLAT_MIN_BATCH_K 16
/* System calls one primitive lists for the trapping confinements. */
#define OSLAT_MAX_CALLS 12
/* Lost datagrams or timed-out requests above this share fail a cell. */
#define OSLAT_MAX_LOSS 0.01
/* The exit status of the tiny static binary (tiny.c) fork+execve runs. */
#define OSLAT_TINY_STATUS 42
/* How long a helper process (server, ring member) gets to leave. */
#define OSLAT_REAP_MS 2000

/* What a confinement's helper must have seen during a cell. */
enum oslat_traps {
    OSLAT_TRAPS_ANY = 0,   /* not checked */
    OSLAT_TRAPS_EACH = 1,  /* every iteration makes a listed call */
    OSLAT_TRAPS_NONE = 2,  /* no iteration may enter the kernel (vDSO) */
};

struct oslat;

struct oslat_prim {
    const char *name;           /* as --primitive takes it */
    const char *family;         /* ctx, fs, ipc, proc, bw */
    const char *table;          /* SEIMI's table it belongs to: IV, V, VI, III; BW: LMbench's bandwidths */
    const char *summary;
    int calls[OSLAT_MAX_CALLS]; /* system calls of its measured regions (OSLAT_CALLS) */
    size_t ncalls;
    enum oslat_traps traps;
    int two_contexts;           /* measured once per placement */
    /* Measure every cell, emitting one result each.  0, or -errno for a
     * failure before any cell could be measured (the driver reports it). */
    int (*run)(struct oslat *o, const struct oslat_prim *p);
};

/* .calls and .ncalls of a primitive from one list. */
#define OSLAT_CALLS(...) .calls = {__VA_ARGS__}, .ncalls = sizeof((int[]){__VA_ARGS__}) / sizeof(int)

/* The families, each ended by an entry without a name. */
extern const struct oslat_prim oslat_ctx[];
extern const struct oslat_prim oslat_fs[];
extern const struct oslat_prim oslat_ipc[];
extern const struct oslat_prim oslat_proc[];
extern const struct oslat_prim oslat_bw[];

/* One measuring process's context. */
struct oslat {
    struct isob_bench_ctx *ctx;
    struct isob_confine_state *cs; /* the confinement in force (none included) */
    const char *dir;               /* the test directory: exists, writable, only ours */
    const char *tiny;              /* the tiny static binary fork+execve runs, or NULL */
    const char *placement;         /* of the cell being measured */
    int cpu;                       /* the measuring process's CPU, -1 unpinned */
    int server_cpu;                /* the second context's CPU for this placement, -1 unpinned */
    uint64_t budget_ns;
    size_t cap;                    /* per-iteration samples per cell, at most */
    size_t warmup;                 /* warm-up iterations, at most */
    size_t batch_k, batch_reps;
    int sabotage;                  /* tests only: each primitive breaks its own work */
};

struct oslat_cell {
    struct oslat *o;
    const struct oslat_prim *p;
    char label[48];
    struct isob_samples s;
    struct isob_batched b;         /* the batched estimate; b.est -1: none */
    size_t batch_k;
    uint64_t ev0;                  /* helper count at the start */
    uint64_t ops;                  /* iterations done, warm-up and batched included */
    uint64_t each_ns;              /* wall time of the per-iteration loop */
    int discard;                   /* POST: keep no sample of this iteration */
    int stop;                      /* stop measuring (a stream out of step) */
    char extra[2048];              /* the primitive's params members */
    char fail[320];                /* the first failed check; empty when verified */
};

/* Allocate samples (cap) and scratch, then read the helper count.  0 or -errno. */
int oslat_cell_open(struct oslat_cell *c, struct oslat *o, const struct oslat_prim *p,
                    const char *label);
/* Add `"key":value` (value already JSON) to the cell's params. */
void oslat_param(struct oslat_cell *c, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Record a failed check (the first one is kept as the reason). */
void oslat_fail(struct oslat_cell *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Check the helper count, emit the result line, free.  A cell with
 * samples and no failure is ok. */
void oslat_cell_close(struct oslat_cell *c);
/* Emit a result without samples: status "skipped" or "failed". */
void oslat_emit_bare(struct oslat *o, const struct oslat_prim *p, const char *label,
                     const char *status, const char *reason);
/* The filesystem fd is on (fs_type: ext2/3/4, tmpfs, overlayfs, ...;
 * fs_magic: statfs's f_type) and the test directory (fs_dir), as params. */
void oslat_fs_where(struct oslat_cell *c, int fd);
/* Divide every sample by d (a sample that timed d operations). */
void oslat_samples_div(struct isob_samples *s, uint64_t d);
/* Divide the batched estimate and each of its pairs by d, likewise. */
void oslat_batched_div(struct isob_batched *b, uint64_t d);
/* K for the batched estimate from the per-iteration loop's pace, 0 for none. */
size_t oslat_batch_k(const struct oslat_cell *c);

/* Fork a helper of the measurement (ring member, server): in the child it
 * dies with the parent and is pinned to cpu (>= 0).  The child's pid, 0 in
 * the child, or -errno. */
pid_t oslat_fork(int cpu);
/* Reap a helper: wait up to OSLAT_REAP_MS for it, then SIGKILL it. */
void oslat_reap(pid_t pid);

/* Keep b - a as the next sample of c, for loops of their own: a dropped
 * sample is counted, a full buffer keeps no more. */
static inline __attribute__((always_inline)) void oslat_store(struct oslat_cell *c, enum isob_backend be,
                                                              const struct isob_snap *a,
                                                              const struct isob_snap *b)
{
    if (!isob_sample_valid_as(be, a, b)) {
        c->s.dropped++;
        return;
    }
    if (c->s.n >= c->s.cap)
        return;
    for (unsigned e = 0; e < c->s.nev; e++)
        c->s.v[c->s.n * c->s.nev + e] = b->v[e] - a->v[e];
    c->s.n++;
}

#define OSLAT_DEADLINE(C) (isob_clock_ns() + (C)->o->budget_ns)

/* Warm-up: PRE; BODY; POST up to o->warmup times, at most a quarter of
 * the budget. */
#define OSLAT_WARM(C, PRE, BODY, POST)                                                   \
    do {                                                                                 \
        uint64_t oslat_wend_ = isob_clock_ns() + (C)->o->budget_ns / 4;                  \
        for (size_t oslat_w_ = 0; oslat_w_ < (C)->o->warmup && !(C)->stop; oslat_w_++) { \
            if (isob_clock_ns() > oslat_wend_)                                           \
                break;                                                                   \
            PRE;                                                                         \
            BODY;                                                                        \
            POST;                                                                        \
            (C)->ops++;                                                                  \
            (C)->discard = 0;                                                            \
        }                                                                                \
    } while (0)

/* Per-iteration samples of BODY, each between two readings, until the
 * cap or the budget (with at least OSLAT_MIN_SAMPLES, unless that takes
 * OSLAT_OVERTIME budgets more: iterations that keep no sample).  PRE and POST run
 * outside the region; POST may set (C)->discard to keep no sample of this
 * iteration, or (C)->stop to end the loop. */
#define OSLAT_EACH(C, PRE, BODY, POST)                                                   \
    ISOB_DISPATCH((C)->o->ctx->ctr, oslat_be_, OSLAT_EACH_AS(oslat_be_, C, PRE, BODY, POST))
#define OSLAT_EACH_AS(BE, C, PRE, BODY, POST)                                            \
    do {                                                                                 \
        struct isob_counter *oslat_ctr_ = (C)->o->ctx->ctr;                              \
        struct isob_samples *oslat_s_ = &(C)->s;                                         \
        struct isob_snap oslat_a_, oslat_b_;                                             \
        uint64_t oslat_t0_ = isob_clock_ns();                                            \
        uint64_t oslat_end_ = oslat_t0_ + (C)->o->budget_ns;                             \
        size_t oslat_tries_ = 0;                                                         \
        oslat_s_->n = 0;                                                                 \
        while (oslat_s_->n < oslat_s_->cap && oslat_tries_++ < 2 * oslat_s_->cap &&      \
               !(C)->stop) {                                                             \
            if (isob_clock_ns() > oslat_end_ &&                                          \
                (oslat_s_->n >= OSLAT_MIN_SAMPLES ||                                     \
                 isob_clock_ns() > oslat_end_ + OSLAT_OVERTIME * (C)->o->budget_ns))       \
                break;                                                                   \
            PRE;                                                                         \
            isob_read_as((BE), oslat_ctr_, &oslat_a_);                                   \
            isob_clobber();                                                              \
            BODY;                                                                        \
            isob_clobber();                                                              \
            isob_read_as((BE), oslat_ctr_, &oslat_b_);                                   \
            POST;                                                                        \
            (C)->ops++;                                                                  \
            if ((C)->discard) {                                                          \
                (C)->discard = 0;                                                        \
                continue;                                                                \
            }                                                                            \
            if (!isob_sample_valid_as((BE), &oslat_a_, &oslat_b_)) {                     \
                oslat_s_->dropped++;                                                     \
                continue;                                                                \
            }                                                                            \
            for (unsigned oslat_e_ = 0; oslat_e_ < oslat_s_->nev; oslat_e_++)            \
                oslat_s_->v[oslat_s_->n * oslat_s_->nev + oslat_e_] =                    \
                    oslat_b_.v[oslat_e_] - oslat_a_.v[oslat_e_];                         \
            oslat_s_->n++;                                                               \
        }                                                                                \
        (C)->each_ns = isob_clock_ns() - oslat_t0_;                                      \
    } while (0)

/* The batched estimate of BODY (see harness.h), with K from the pace of
 * the per-iteration loop so that it takes about half the budget. */
#define OSLAT_BATCHED(C, BODY)                                                           \
    do {                                                                                 \
        size_t oslat_k_ = oslat_batch_k(C);                                              \
        (C)->batch_k = oslat_k_;                                                         \
        if (oslat_k_) {                                                                  \
            ISOB_MEASURE_BATCHED((C)->o->ctx->ctr, oslat_k_, &(C)->b, BODY);             \
            (C)->ops += 3 * oslat_k_ * (C)->o->batch_reps;                               \
        }                                                                                \
    } while (0)

#endif
