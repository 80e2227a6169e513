/* arm64 (AArch64) primitives used by the harness and the mechanisms: the
 * sibling of arch_x86.h, with the same set of functions (see arch.h). */
#ifndef ISOBENCH_ARCH_ARM64_H
#define ISOBENCH_ARCH_ARM64_H

#include <stdint.h>
#include <ucontext.h>
#include <linux/audit.h>

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

/* A seccomp filter checks the architecture of each call first; arm64 has
 * no second set of call numbers under the same audit architecture. */
#define ISOB_AUDIT_ARCH AUDIT_ARCH_AARCH64
#define ISOB_SYSCALL_ALIAS_BIT 0u

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

/* The store the protection-fault primitive faults on: `str w9, [x0]`
 * (encoding 0xb9000009, fixed by pinning its registers), which the SIGSEGV
 * handler recognises before it steps over it. */
#define ISOB_FAULTING_STORE_LEN 4
static inline void isob_faulting_store(volatile uint32_t *p)
{
    register volatile uint32_t *x0 __asm__("x0") = p;
    __asm__ __volatile__("mov w9, #1\n\tstr w9, [x0]" : : "r"(x0) : "x9", "memory");
}

/* In a SIGSEGV handler (uc: its third argument): when the faulting
 * instruction is isob_faulting_store's, move the saved pc past it, so that
 * returning from the handler goes on after the store, which never
 * happened.  1 if it was that store, else 0 (then returning would fault
 * again). */
static inline int isob_skip_faulting_store(void *uc)
{
    mcontext_t *mc = &((ucontext_t *)uc)->uc_mcontext;
    if (*(const uint32_t *)(uintptr_t)mc->pc != 0xb9000009u)
        return 0;
    mc->pc += ISOB_FAULTING_STORE_LEN;
    return 1;
}

/* Leave the process with `code` by the bare system call (exit_group, 94):
 * for the tiny static binary of the fork+execve primitive, which has no C
 * library. */
static inline __attribute__((noreturn)) void isob_raw_exit(int code)
{
    register long x0 __asm__("x0") = code;
    register long x8 __asm__("x8") = 94;
    __asm__ __volatile__("svc #0" : : "r"(x0), "r"(x8) : "memory");
    __builtin_unreachable();
}

/* Whether a hypervisor is there: arm64 has no architectural bit that says
 * so to user space, so it cannot tell (-1). */
static inline int isob_hypervisor_bit(void) { return -1; }

#endif
