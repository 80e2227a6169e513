/* A clock that both sides of a cross-process handoff read, for the lwc
 * benchmarks (lwc-switch, lwc-create, refmon, lwc-sign).
 *
 * The harness's perf backend counts the calling thread only, so it would
 * miss the other process of a switch, a forked context's page faults and
 * a monitor's work.  These benchmarks therefore time with the TSC (where
 * the harness found it usable: constant, nonstop and synchronised across
 * CPUs) or CLOCK_MONOTONIC_RAW, and emit their results through a copy of
 * the benchmark context whose counter is that clock, with its own empty
 * region; the header line still names the harness's counter. */
#ifndef ISOBENCH_BENCH_XCLOCK_H
#define ISOBENCH_BENCH_XCLOCK_H

#include "isobench/bench.h"

struct isob_xclock {
    struct isob_bench_ctx ctx;  /* the caller's context, counter replaced */
    struct isob_counter ctr;    /* the counter opened here, when one was */
    int own;                    /* ctr was opened here and is closed by close */
    int tsc;                    /* 1: the TSC; 0: CLOCK_MONOTONIC_RAW */
};

/* Choose the clock: the harness's counter when it is the TSC or the
 * clock, else the TSC if usable, else the clock.  0 or -errno. */
int isob_xclock_open(struct isob_xclock *x, struct isob_bench_ctx *ctx);
/* Close it; a failed result emitted through x->ctx fails ctx too. */
void isob_xclock_close(struct isob_xclock *x, struct isob_bench_ctx *ctx);

/* One reading (the fenced timer: the TSC, or arm64's CNTVCT; or nanoseconds). */
static inline uint64_t isob_xclock_now(const struct isob_xclock *x)
{
    return x->tsc ? isob_timer_read() : isob_clock_ns();
}

/* Ticks of x in one microsecond (0 when the TSC frequency is unknown). */
double isob_xclock_per_us(const struct isob_xclock *x);

#endif
