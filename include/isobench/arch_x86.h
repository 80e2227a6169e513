/* x86-64 primitives used by the harness and the mechanisms.
 *
 * Everything architecture-specific lives here or in a sibling header
 * (arch_arm64.h) with the same set of functions; arch.h chooses one, so
 * that a port adds a header instead of scattering ifdefs. */
#ifndef ISOBENCH_ARCH_X86_H
#define ISOBENCH_ARCH_X86_H

#include <cpuid.h>
#include <stdint.h>
#include <ucontext.h>
#include <linux/audit.h>

/* The timer backend is the TSC; the names are those of every result
 * isobench has produced on x86-64. */
#define ISOB_TIMER_NAME "tsc"
#define ISOB_TIMER_UNIT "tsc_ticks"
#define ISOB_TIMER_LABEL "TSC"
#define ISOB_TIMER_HOW "constant and nonstop, read with lfence;rdtsc;lfence"

/* A seccomp filter checks the architecture of each call first: x86-64's,
 * and its x32 calls (the same audit architecture, with this bit set in the
 * call's number) are refused apart. */
#define ISOB_AUDIT_ARCH AUDIT_ARCH_X86_64
#define ISOB_SYSCALL_ALIAS_BIT 0x40000000u

/* rdpmc reads the perf counters from user space where the kernel allows it. */
#define ISOB_ARCH_USER_PMC 1

/* Read the TSC after all earlier instructions have retired, then fence so
 * that later instructions cannot start before the read.  *aux receives
 * IA32_TSC_AUX, which Linux sets to (node << 12) | cpu. */
static inline uint64_t isob_rdtscp(uint32_t *aux)
{
    uint32_t lo, hi, a;
    __asm__ __volatile__("rdtscp\n\tlfence" : "=a"(lo), "=d"(hi), "=c"(a) : : "memory");
    if (aux)
        *aux = a;
    return ((uint64_t)hi << 32) | lo;
}

/* Read the TSC fenced on both sides: the first LFENCE keeps the read from
 * starting before earlier instructions complete, the second keeps later
 * instructions from starting before the read.  The same ordering as
 * rdtscp+lfence at a lower cost: on the KVM guests isobench grew up on an
 * empty region costs about 44 ticks this way and about 51 with rdtscp at
 * both edges. */
static inline uint64_t isob_rdtsc_fenced(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi) : : "memory");
    return ((uint64_t)hi << 32) | lo;
}

/* The timer reading at the edges of a measured region. */
static inline uint64_t isob_timer_read(void) { return isob_rdtsc_fenced(); }

/* Read performance counter `idx` (the mmap page's index minus one). */
static inline uint64_t isob_rdpmc(uint32_t idx)
{
    uint32_t lo, hi;
    __asm__ __volatile__("rdpmc" : "=a"(lo), "=d"(hi) : "c"(idx) : "memory");
    return ((uint64_t)hi << 32) | lo;
}

/* The CPU a perf reading is taken on.  rdtscp waits for all earlier
 * instructions to execute and its lfence keeps the rdpmcs after it from
 * starting early, so the reading cannot drift into the code before it.
 * Linux keeps the CPU number in the low 12 bits of TSC_AUX. */
static inline uint32_t isob_pmc_cpu(void)
{
    uint32_t aux;
    (void)isob_rdtscp(&aux);
    return aux & 0xfff;
}

static inline void isob_cpu_relax(void) { __asm__ __volatile__("pause" ::: "memory"); }

static inline void isob_lfence(void) { __asm__ __volatile__("lfence" ::: "memory"); }

/* rdpmc is not ordered with later instructions; the fence keeps a measured
 * body from starting before the last counter was read. */
static inline void isob_pmc_fence(void) { isob_lfence(); }

/* PKRU access (only valid where CPUID reports OSPKE). */
static inline uint32_t isob_rdpkru(void)
{
    uint32_t eax, edx;
    __asm__ __volatile__(".byte 0x0f,0x01,0xee" : "=a"(eax), "=d"(edx) : "c"(0));
    return eax;
}

static inline void isob_wrpkru(uint32_t pkru)
{
    __asm__ __volatile__(".byte 0x0f,0x01,0xef" : : "a"(pkru), "c"(0), "d"(0) : "memory");
}

/* The store the protection-fault primitive faults on: `movl $1, (%rdi)`,
 * whose encoding (c7 07 01 00 00 00) the SIGSEGV handler recognises
 * before it steps over it. */
#define ISOB_FAULTING_STORE_LEN 6
static inline void isob_faulting_store(volatile uint32_t *p)
{
    __asm__ __volatile__("movl $1, (%0)" : : "D"(p) : "memory");
}

/* In a SIGSEGV handler (uc: its third argument): when the faulting
 * instruction is isob_faulting_store's, move the saved instruction pointer
 * past it, so that returning from the handler goes on after the store,
 * which never happened.  1 if it was that store, else 0 (then returning
 * would fault again). */
static inline int isob_skip_faulting_store(void *uc)
{
    static const unsigned char insn[ISOB_FAULTING_STORE_LEN] = {0xc7, 0x07, 0x01, 0x00, 0x00, 0x00};
    greg_t *rip = &((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
    const unsigned char *ip = (const unsigned char *)*rip;
    for (int i = 0; i < ISOB_FAULTING_STORE_LEN; i++)
        if (ip[i] != insn[i])
            return 0;
    *rip += ISOB_FAULTING_STORE_LEN;
    return 1;
}

/* Leave the process with `code` by the bare system call: for the tiny
 * static binary of the fork+execve primitive, which has no C library. */
static inline __attribute__((noreturn)) void isob_raw_exit(int code)
{
    __asm__ __volatile__("syscall" : : "a"(231 /* exit_group */), "D"(code) : "rcx", "r11", "memory");
    __builtin_unreachable();
}

/* 1 when a hypervisor says it is there (CPUID.1:ECX bit 31, reserved for
 * hypervisors to set), 0 when not, -1 when the CPU cannot tell. */
static inline int isob_hypervisor_bit(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return -1;
    return (int)((c >> 31) & 1);
}

#endif
