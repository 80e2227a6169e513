/* One reading of the active counter backend: the value of every event in the
 * group, the CPU it was taken on, and a signature that changes whenever the
 * reading cannot be compared with another (perf: counter index changed,
 * multiplexed).  Shared by harness.h and perf.h. */
#ifndef ISOBENCH_SNAP_H
#define ISOBENCH_SNAP_H

#include <stdint.h>

/* At most this many events in a perf group (cycles, instructions, dTLB and
 * iTLB load misses). */
#define ISOB_MAX_EVENTS 4

struct isob_snap {
    uint64_t v[ISOB_MAX_EVENTS]; /* event values; v[0] is the primary (time or cycles) */
    /* perf only: nanoseconds the events were enabled and running, summed
     * over the events.  A sample is comparable when both grew by the same
     * amount between its two readings (no multiplexing in between); the
     * totals themselves differ for good after one multiplexing episode. */
    uint64_t enabled, running;
    uint32_t cpu;                /* CPU the reading was taken on (UINT32_MAX: unknown) */
    uint32_t sig;                /* comparability signature; equal in both ends of a valid sample */
    int ok;                      /* 0: the reading itself failed (e.g. read(2) of the group) */
};

#endif
