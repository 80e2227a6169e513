/* Inline reading of the perf group: the rdpmc fast path.
 *
 * isob_perf_snap sits at both edges of every measured region, so with the
 * kernel's system interface it makes no calls: the CPU number comes from
 * rdtscp and the counters from rdpmc, both inline.  Only a fake interface
 * (tests) goes through the function pointers, and only the read(2) path
 * (isob_perf_snap_slow) leaves the inline code at all. */
#ifndef ISOBENCH_PERF_IMPL_H
#define ISOBENCH_PERF_IMPL_H

#include <stdint.h>

#include "isobench/arch.h"

/* The signature is an FNV-1a hash of the counter indices: one xor and one
 * multiply per event, and a changed index changes it. */
#define ISOB_PERF_SIG_SEED 2166136261u
#define ISOB_PERF_SIG_PRIME 16777619u

/* GCC judges the reading too large to inline on its own, but an out-of-line
 * call at each edge of a measured region is exactly what the harness avoids. */
#define ISOB_PERF_INLINE static inline __attribute__((always_inline))

/* The PMU returns pmc_width bits; the kernel's offset assumes the value was
 * sign-extended from there (it programs counters to negative values).  The
 * mask keeps a nonsensical width of 0 from becoming an undefined shift. */
ISOB_PERF_INLINE uint64_t isob_perf_sext(uint64_t raw, unsigned width)
{
    unsigned sh = (64u - width) & 63u;
    return (uint64_t)((int64_t)(raw << sh) >> sh);
}

ISOB_PERF_INLINE void isob_perf_snap(struct isob_perf *p, struct isob_snap *s)
{
    if (!p->use_rdpmc) {
        isob_perf_snap_slow(p, s);
        return;
    }

    /* Where the architecture has no user-space reading, use_rdpmc is only
     * ever set with a fake interface (perf.c), and this folds to 0. */
    const int real = ISOB_ARCH_USER_PMC && p->real_sys;
    uint32_t cpu;
    if (real) {
        /* Ordered after the code before it, so the reading cannot drift
         * into that code (arch.h). */
        cpu = isob_pmc_cpu();
    } else {
        cpu = p->sys->getcpu();
    }

    /* A CPU-wide event counts in that CPU's PMU; from any other CPU rdpmc
     * would read an unrelated counter, while read(2) asks the right one. */
    if (p->scope == ISOB_SCOPE_CPU && cpu != (uint32_t)p->cpu) {
        isob_perf_snap_slow(p, s);
        return;
    }

    uint32_t sig = ISOB_PERF_SIG_SEED;
    uint64_t en_sum = 0, run_sum = 0;
    for (unsigned e = 0; e < p->nev; e++) {
        /* The kernel rewrites the page whenever it (re)schedules the event;
         * volatile makes every field a fresh load, and the lock read before
         * and after tells whether such an update raced with this one. */
        const volatile struct perf_event_mmap_page *pc = p->page[e];
        uint32_t seq, idx;
        uint64_t enabled, running, count;
        do {
            seq = pc->lock;
            isob_clobber();
            idx = pc->index;
            enabled = pc->time_enabled;
            running = pc->time_running;
            count = (uint64_t)pc->offset;
            /* Without a counter (index 0: the event is off the PMU now) or
             * without the right to read it, the offset alone is the count
             * at the kernel's last update, stale by whatever came since:
             * read(2) asks the kernel for the count of this moment. */
            if (!pc->cap_user_rdpmc || !idx) {
                isob_perf_snap_slow(p, s);
                return;
            }
            uint64_t raw = real ? isob_rdpmc(idx - 1) : p->sys->rdpmc(idx - 1);
            count += isob_perf_sext(raw, pc->pmc_width);
            isob_clobber();
        } while (pc->lock != seq);
        s->v[e] = count;
        sig = (sig ^ idx) * ISOB_PERF_SIG_PRIME;
        en_sum += enabled;
        run_sum += running;
    }

    /* rdpmc is not ordered with later instructions; the fence keeps the
     * measured body from starting before the last counter was read. */
    if (real)
        isob_pmc_fence();

    s->cpu = cpu;
    s->sig = sig;
    s->enabled = en_sum;
    s->running = run_sum;
    s->ok = 1;
}

/* Whether readings a and b of the perf group bracket a comparable sample:
 * both read, on one CPU, with the same counters, and not multiplexed in
 * between.  Multiplexing is judged on what changed between the readings:
 * fewer nanoseconds running than enabled in that span means the group was
 * off the PMU for part of it, so its counts miss events.  (Running never
 * grows faster than enabled, so the sums over the events compare exactly.) */
ISOB_PERF_INLINE int isob_perf_pair_valid(const struct isob_snap *a, const struct isob_snap *b)
{
    return a->ok && b->ok && a->sig == b->sig && a->cpu == b->cpu &&
           b->enabled - a->enabled == b->running - a->running;
}

#endif
