/* arm64 (AArch64) primitives used by the harness and the mechanisms: the
 * sibling of arch_x86.h, with the same set of functions (see arch.h). */
#ifndef ISOBENCH_ARCH_ARM64_H
#define ISOBENCH_ARCH_ARM64_H

#include <stdint.h>

/* The timer backend is the generic timer's virtual count, CNTVCT_EL0.  It
 * counts at the fixed frequency of CNTFRQ_EL0 (often 24 to 100 MHz, 1 GHz
 * from Armv8.6), not at the core clock, so its unit does not call it
 * cycles: one tick is many instructions on most cores. */
#define ISOB_TIMER_NAME "cntvct"
#define ISOB_TIMER_UNIT "cntvct_ticks"
#define ISOB_TIMER_LABEL "CNTVCT_EL0"
#define ISOB_TIMER_HOW                                                                   \
    "the generic timer's virtual count, fixed rate by architecture (CNTFRQ_EL0), "       \
    "read with isb;mrs;isb; a tick is not a core cycle"

/* Reading the PMU from user space (PMEVCNTR<n>_EL0 through the mmap page,
 * kernel.perf_user_access) is not implemented: perf counters are read with
 * read(2), which perf.c chooses when this is 0. */
#define ISOB_ARCH_USER_PMC 0

/* Read the timer fenced on both sides.  Reads of CNTVCT_EL0 may be
 * performed early and out of order with the instructions around them; the
 * ISB before it keeps the read from starting before earlier instructions
 * complete, the ISB after it keeps later instructions from starting before
 * the read. */
static inline uint64_t isob_timer_read(void)
{
    uint64_t v;
    __asm__ __volatile__("isb\n\tmrs %0, cntvct_el0\n\tisb" : "=r"(v) : : "memory");
    return v;
}

/* The timer's frequency in Hz as firmware programmed it (0 where it did
 * not).  Linux lets user space read it, emulating the read where a CPU
 * erratum makes it trap the timer registers. */
static inline uint64_t isob_timer_freq(void)
{
    uint64_t v;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(v));
    return v;
}

/* Never called while ISOB_ARCH_USER_PMC is 0 (perf.c then reads with
 * read(2)); they exist so that the generic fast path compiles, and they
 * trap rather than return a number that could pass for a count. */
static inline uint64_t isob_rdpmc(uint32_t idx)
{
    (void)idx;
    __builtin_trap();
}

static inline uint32_t isob_pmc_cpu(void) { __builtin_trap(); }

static inline void isob_pmc_fence(void) { __asm__ __volatile__("isb" ::: "memory"); }

/* The spin-wait hint.  YIELD does nothing on most cores, so a spin budget
 * counted in hints would be spent in a few nanoseconds; ISB takes some tens
 * of cycles, closer to what PAUSE costs on x86-64. */
static inline void isob_cpu_relax(void) { __asm__ __volatile__("isb" ::: "memory"); }

#endif
