/* The measuring harness: counter backends, measured regions, samples,
 * the batched estimator, the empty-region cost, CPU pinning.
 *
 * One measurement, in pseudo-code:
 *
 *     pick backend (perf group > timer > CLOCK_MONOTONIC_RAW), record why
 *     pin to the client CPU (placement decides the server CPU)
 *     empty = median over N of (read; read)          -- reported, never hidden
 *     warm-up: W calls, not recorded
 *     for i in 0..N:  a = read; BODY; b = read; sample[i] = b - a
 *                     (perf: dropped when multiplexed or the CPU/index moved)
 *     batched: for r in 0..R: t(K) = time of K BODYs, t(2K) likewise,
 *              est[r] = (t(2K) - t(K)) / K      -- read overhead cancels
 *     report samples (raw), median of est, empty, dropped
 *
 * The measured loops are macros so that the body is inlined between the
 * two reads with nothing else in the region: no calls, no allocation. */
#ifndef ISOBENCH_HARNESS_H
#define ISOBENCH_HARNESS_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "isobench/arch.h"
#include "isobench/error.h"
#include "isobench/snap.h"
#include "isobench/perf.h"

#define ISOB_SCHEMA_VERSION 1

enum isob_backend {
    ISOB_BACKEND_PERF = 1,  /* perf_event group; unit "cycles" */
    ISOB_BACKEND_TIMER = 2, /* the arch's fixed-rate timer (TSC, CNTVCT_EL0); arch.h */
    ISOB_BACKEND_CLOCK = 3, /* clock_gettime(CLOCK_MONOTONIC_RAW); unit "ns" */
    ISOB_BACKEND_FAKE = 4,  /* tests only: a software clock of known cost */
};

/* A software clock for testing timing code: every read advances it by
 * read_cost, and code under test advances it by what it "costs". */
struct isob_fake_clock {
    uint64_t now;
    uint64_t read_cost;
};

struct isob_counter {
    enum isob_backend backend;
    const char *name;              /* "perf", ISOB_TIMER_NAME, "clock", "fake" */
    const char *unit;              /* "cycles", ISOB_TIMER_UNIT, "ns" */
    char why[512];                 /* why this backend: what the better ones said */
    double tsc_hz;                 /* the timer's frequency (TSC, CNTVCT_EL0), 0 if unknown */
    const char *tsc_hz_source;     /* "tsc_known_freq", "calibrated", NULL */
    unsigned nev;                  /* events per reading (1 but for perf) */
    const char *event_names[ISOB_MAX_EVENTS];
    struct isob_perf perf;         /* valid when backend == ISOB_BACKEND_PERF */
    struct isob_fake_clock *fake;  /* valid when backend == ISOB_BACKEND_FAKE */
};

/* Options for choosing a backend. */
struct isob_counter_opts {
    const char *force;             /* NULL (best available), "perf", ISOB_TIMER_NAME, "clock" */
    enum isob_scope scope;         /* perf counting scope */
    int cpu;                       /* CPU for ISOB_SCOPE_CPU */
};

/* Choose and open the best backend allowed by opts.  Returns 0, or a
 * negative errno when a forced backend is not available (why says so). */
int isob_counter_init(struct isob_counter *c, const struct isob_counter_opts *opts);
void isob_counter_init_fake(struct isob_counter *c, struct isob_fake_clock *fake);
void isob_counter_close(struct isob_counter *c);

/* Timer facts (src/harness/timer_<arch>.c): whether the timer is usable as
 * a clock (it counts at a fixed rate), and its frequency.  Return 0 or a
 * negative errno with the reason in why. */
int isob_timer_usable(char *why, size_t len);
int isob_timer_hz(double *hz, const char **source);

static inline uint64_t isob_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Take one reading with backend B.  When B is a constant (as in the
 * measuring macros, which dispatch once outside their loops) the switch
 * folds away and nothing but the reading itself sits at a region's edge. */
__attribute__((always_inline)) static inline void isob_read_as(enum isob_backend b, struct isob_counter *c,
                                                               struct isob_snap *s)
{
    switch (b) {
    case ISOB_BACKEND_PERF:
        isob_perf_snap(&c->perf, s);
        return;
    case ISOB_BACKEND_TIMER:
        s->v[0] = isob_timer_read();
        s->cpu = UINT32_MAX; /* not needed: timer samples are never dropped */
        s->sig = 0;
        s->ok = 1;
        return;
    case ISOB_BACKEND_FAKE:
        c->fake->now += c->fake->read_cost;
        s->v[0] = c->fake->now;
        s->cpu = 0;
        s->sig = 0;
        s->ok = 1;
        return;
    case ISOB_BACKEND_CLOCK:
    default:
        s->v[0] = isob_clock_ns();
        s->cpu = UINT32_MAX;
        s->sig = 0;
        s->ok = 1;
        return;
    }
}

/* Take one reading with whatever backend c has. */
static inline void isob_read(struct isob_counter *c, struct isob_snap *s)
{
    isob_read_as(c->backend, c, s);
}

/* Run STMT with B bound to the counter's backend as a compile-time
 * constant, so that every copy of a measuring loop is specialised. */
#define ISOB_DISPATCH(C, B, STMT)                                                    \
    do {                                                                             \
        switch ((C)->backend) {                                                      \
        case ISOB_BACKEND_PERF: { const enum isob_backend B = ISOB_BACKEND_PERF; STMT; } break; \
        case ISOB_BACKEND_TIMER: { const enum isob_backend B = ISOB_BACKEND_TIMER; STMT; } break; \
        case ISOB_BACKEND_FAKE: { const enum isob_backend B = ISOB_BACKEND_FAKE; STMT; } break; \
        default: { const enum isob_backend B = ISOB_BACKEND_CLOCK; STMT; } break;              \
        }                                                                            \
    } while (0)

/* a and b bracket one region: 1 if the sample is comparable (same CPU where
 * the backend knows it, same signature, both readings valid). Only the perf
 * backend ever rejects; the timer is synchronised across CPUs on the machines
 * where it is used at all. */
__attribute__((always_inline)) static inline int isob_sample_valid_as(enum isob_backend be,
                                                                      const struct isob_snap *a,
                                                                      const struct isob_snap *b)
{
    if (be != ISOB_BACKEND_PERF)
        return 1;
    return a->ok && b->ok && a->sig == b->sig && a->cpu == b->cpu;
}

static inline int isob_sample_valid(const struct isob_counter *c, const struct isob_snap *a,
                                    const struct isob_snap *b)
{
    return isob_sample_valid_as(c->backend, a, b);
}

/* Samples of one result: n rows of nev values each, allocated up front. */
struct isob_samples {
    size_t n, cap;
    unsigned nev;
    uint64_t *v;       /* v[i * nev + e] */
    uint64_t dropped;  /* samples rejected by isob_sample_valid */
};

int isob_samples_alloc(struct isob_samples *s, size_t cap, unsigned nev);
void isob_samples_free(struct isob_samples *s);
/* Median of event e (0 if empty); sorts a copy. */
double isob_samples_median(const struct isob_samples *s, unsigned e);
double isob_median_u64(uint64_t *v, size_t n);   /* sorts v in place */
double isob_median_double(double *v, size_t n);  /* sorts v in place */

/* Per-iteration measurement: up to S->cap samples of BODY, each between two
 * readings.  Invalid samples are counted in S->dropped and retried, with at
 * most cap extra attempts. */
#define ISOB_MEASURE_EACH(C, S, BODY) ISOB_DISPATCH((C), isob_be_, ISOB_MEASURE_EACH_AS(isob_be_, C, S, BODY))
#define ISOB_MEASURE_EACH_AS(BE, C, S, BODY)                                         \
    do {                                                                             \
        struct isob_snap isob_a_, isob_b_;                                           \
        size_t isob_tries_ = 0;                                                      \
        (S)->n = 0;                                                                  \
        while ((S)->n < (S)->cap && isob_tries_++ < 2 * (S)->cap) {                  \
            isob_read_as((BE), (C), &isob_a_);                                       \
            isob_clobber();                                                          \
            BODY;                                                                    \
            isob_clobber();                                                          \
            isob_read_as((BE), (C), &isob_b_);                                       \
            if (!isob_sample_valid_as((BE), &isob_a_, &isob_b_)) {                   \
                (S)->dropped++;                                                      \
                continue;                                                            \
            }                                                                        \
            for (unsigned isob_e_ = 0; isob_e_ < (S)->nev; isob_e_++)                \
                (S)->v[(S)->n * (S)->nev + isob_e_] = isob_b_.v[isob_e_] - isob_a_.v[isob_e_]; \
            (S)->n++;                                                                \
        }                                                                            \
    } while (0)

/* One reading of K iterations of BODY into *OUT (primary event).  Returns
 * through OK whether the pair of readings was valid. */
#define ISOB_MEASURE_K(BE, C, K, BODY, OUT, OK)                                      \
    do {                                                                             \
        struct isob_snap isob_a_, isob_b_;                                           \
        isob_read_as((BE), (C), &isob_a_);                                           \
        isob_clobber();                                                              \
        for (size_t isob_k_ = 0; isob_k_ < (size_t)(K); isob_k_++) {                 \
            BODY;                                                                    \
            isob_clobber();                                                          \
        }                                                                            \
        isob_read_as((BE), (C), &isob_b_);                                           \
        (OUT) = isob_b_.v[0] - isob_a_.v[0];                                         \
        (OK) = isob_sample_valid_as((BE), &isob_a_, &isob_b_);                       \
    } while (0)

/* Batched estimate: REPS pairs of (K, 2K) iterations; the estimate of one
 * BODY is the median over pairs of (t(2K) - t(K)) / K, which cancels the
 * fixed cost of the readings.  Pairs with an invalid reading are skipped.
 * *EST receives the median (or -1 when no pair was valid). */
#define ISOB_MEASURE_BATCHED(C, K, REPS, SCRATCH, BODY, EST)                         \
    ISOB_DISPATCH((C), isob_be_, ISOB_MEASURE_BATCHED_AS(isob_be_, C, K, REPS, SCRATCH, BODY, EST))
#define ISOB_MEASURE_BATCHED_AS(BE, C, K, REPS, SCRATCH, BODY, EST)                  \
    do {                                                                             \
        size_t isob_got_ = 0;                                                        \
        for (size_t isob_r_ = 0; isob_r_ < (size_t)(REPS); isob_r_++) {              \
            uint64_t isob_t1_, isob_t2_;                                             \
            int isob_ok1_, isob_ok2_;                                                \
            ISOB_MEASURE_K((BE), (C), (K), BODY, isob_t1_, isob_ok1_);                     \
            ISOB_MEASURE_K((BE), (C), 2 * (K), BODY, isob_t2_, isob_ok2_);                 \
            if (isob_ok1_ && isob_ok2_)                                              \
                (SCRATCH)[isob_got_++] =                                             \
                    ((double)isob_t2_ - (double)isob_t1_) / (double)(K);             \
        }                                                                            \
        (EST) = isob_got_ ? isob_median_double((SCRATCH), isob_got_) : -1.0;         \
    } while (0)

/* Placement of a two-context mechanism's contexts. */
enum isob_placement {
    ISOB_PLACE_SAME_CPU = 0,
    ISOB_PLACE_CROSS_CPU = 1,
    ISOB_PLACE_UNPINNED = 2,
};
const char *isob_placement_name(enum isob_placement p);
int isob_placement_parse(const char *s, enum isob_placement *out);

/* Pinning: the calling thread to one CPU (0 or -errno); -1 unpins (all CPUs). */
int isob_pin_self(int cpu);
int isob_ncpus(void);
/* Server CPU for a placement given the client CPU: same, the next one, or -1. */
int isob_server_cpu(enum isob_placement p, int client_cpu);
/* CPU the caller runs on now. */
int isob_current_cpu(void);


#endif
