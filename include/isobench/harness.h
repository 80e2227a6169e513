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
 *     report samples (raw), every est[r] and their median, empty, dropped
 *
 * The measured loops are macros so that the body is inlined between the
 * two reads with nothing else in the region: no calls, no allocation. */
#ifndef ISOBENCH_HARNESS_H
#define ISOBENCH_HARNESS_H

#include <errno.h>
#include <sched.h>
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

/* Options for choosing a backend. */
struct isob_counter_opts {
    const char *force;             /* NULL (best available), "perf", ISOB_TIMER_NAME, "clock" */
    enum isob_scope scope;         /* perf counting scope */
    int cpu;                       /* CPU for ISOB_SCOPE_CPU */
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
    struct isob_counter_opts opts; /* as asked for, so that a forked child can reopen it */
};

/* Choose and open the best backend allowed by opts.  Returns 0, or a
 * negative errno when a forced backend is not available (why says so). */
int isob_counter_init(struct isob_counter *c, const struct isob_counter_opts *opts);
void isob_counter_init_fake(struct isob_counter *c, struct isob_fake_clock *fake);
void isob_counter_close(struct isob_counter *c);
/* In a forked child: open the same backend again for this process (a perf
 * group counts the thread that opened it, never a child).  0 or -errno. */
int isob_counter_reopen(struct isob_counter *c);

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
 * the backend knows it, same signature, both readings valid, not multiplexed
 * in between: isob_perf_pair_valid). Only the perf backend ever rejects; the timer
 * is synchronised across CPUs on the machines where it is used at all. */
__attribute__((always_inline)) static inline int isob_sample_valid_as(enum isob_backend be,
                                                                      const struct isob_snap *a,
                                                                      const struct isob_snap *b)
{
    if (be != ISOB_BACKEND_PERF)
        return 1;
    return isob_perf_pair_valid(a, b);
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
 * most cap extra attempts.  In this macro and in ISOB_MEASURE_BATCHED, BODY
 * runs directly inside the measuring loop, so a `break` in BODY ends that
 * loop (a K-iteration run in the batched case): a caller that breaks out
 * (a compartment died) must fail the result. */
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

/* The batched estimate of one result: the estimate of every (K, 2K) pair,
 * in the order they were measured, and their median.  Every pair is kept
 * so that the spread of the estimate can be reported beside it, and so
 * that a bimodal body (whose t(2K) - t(K) means little) can be recognised
 * afterwards. */
struct isob_batched {
    size_t cap;    /* pairs asked for */
    size_t n;      /* valid pairs measured */
    double *reps;  /* reps[0..n): each pair's (t(2K) - t(K)) / K */
    double *sort;  /* room to sort a copy: reps keeps the measuring order */
    double est;    /* median of reps; -1 when no pair was valid */
};

/* Room for `reps` pairs, allocated and touched before any measuring.
 * Returns 0 or -ENOMEM. */
int isob_batched_alloc(struct isob_batched *b, size_t reps);
void isob_batched_free(struct isob_batched *b);
/* b->est from b->reps (outside any measured region: it sorts a copy). */
void isob_batched_finish(struct isob_batched *b);

/* Batched estimate into B (from isob_batched_alloc): B->cap pairs of (K,
 * 2K) iterations; the estimate of one BODY is the median over pairs of
 * (t(2K) - t(K)) / K, which cancels the fixed cost of the readings.  Pairs
 * with an invalid reading are skipped. */
#define ISOB_MEASURE_BATCHED(C, K, B, BODY)                                          \
    ISOB_DISPATCH((C), isob_be_, ISOB_MEASURE_BATCHED_AS(isob_be_, C, K, B, BODY))
#define ISOB_MEASURE_BATCHED_AS(BE, C, K, B, BODY)                                   \
    do {                                                                             \
        (B)->n = 0;                                                                  \
        for (size_t isob_r_ = 0; isob_r_ < (B)->cap; isob_r_++) {                    \
            uint64_t isob_t1_, isob_t2_;                                             \
            int isob_ok1_, isob_ok2_;                                                \
            ISOB_MEASURE_K((BE), (C), (K), BODY, isob_t1_, isob_ok1_);               \
            ISOB_MEASURE_K((BE), (C), 2 * (K), BODY, isob_t2_, isob_ok2_);           \
            if (isob_ok1_ && isob_ok2_)                                              \
                (B)->reps[(B)->n++] =                                                \
                    ((double)isob_t2_ - (double)isob_t1_) / (double)(K);             \
        }                                                                            \
        isob_batched_finish(B);                                                      \
    } while (0)

/* Placement of a two-context mechanism's contexts. */
enum isob_placement {
    ISOB_PLACE_SAME_CPU = 0,
    ISOB_PLACE_CROSS_CPU = 1,
    ISOB_PLACE_UNPINNED = 2,
};
const char *isob_placement_name(enum isob_placement p);
int isob_placement_parse(const char *s, enum isob_placement *out);

/* CPUs come from the affinity mask the process started with (its allowed
 * set), not from the CPUs online; see src/harness/pin.c. */
/* Pin the calling thread to one CPU (0 or -errno); -1 unpins (back to the
 * allowed set).  A caller that cannot pin must not report a placement. */
int isob_pin_self(int cpu);
/* CPUs in the allowed set. */
int isob_ncpus(void);
/* 1 when cpu is in the allowed set. */
int isob_cpu_allowed(int cpu);
/* The lowest CPU in the allowed set. */
int isob_first_cpu(void);
/* The CPU after cpu in set, wrapping around (cpu -1: the first); -1 when
 * set holds no CPU but cpu. */
int isob_next_cpu_in(const cpu_set_t *set, int cpu);
/* Server CPU for a placement given the client CPU: the same one, the next
 * one in the allowed set, or -1 (unpinned, or no second CPU). */
int isob_server_cpu(enum isob_placement p, int client_cpu);
/* Pin the calling thread for placement p: to client_cpu, or (unpinned)
 * back to the allowed set.  0, or -errno with the reason in why ("pin to
 * CPU 3: Invalid argument"): the caller then fails the result instead of
 * labelling it with a placement it does not have. */
int isob_place_self(enum isob_placement p, int client_cpu, char *why, size_t len);
/* CPU the caller runs on now. */
int isob_current_cpu(void);


#endif
