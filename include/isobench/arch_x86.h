/* x86-64 primitives used by the harness and the mechanisms.
 *
 * Everything architecture-specific lives here so that a port (arm64, CHERI)
 * adds a sibling header instead of scattering ifdefs. */
#ifndef ISOBENCH_ARCH_X86_H
#define ISOBENCH_ARCH_X86_H

#include <stdint.h>

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

/* Read performance counter `idx` (the mmap page's index minus one). */
static inline uint64_t isob_rdpmc(uint32_t idx)
{
    uint32_t lo, hi;
    __asm__ __volatile__("rdpmc" : "=a"(lo), "=d"(hi) : "c"(idx) : "memory");
    return ((uint64_t)hi << 32) | lo;
}

static inline void isob_cpu_relax(void) { __asm__ __volatile__("pause" ::: "memory"); }

static inline void isob_lfence(void) { __asm__ __volatile__("lfence" ::: "memory"); }

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

/* Keep the compiler from moving memory accesses across this point, and from
 * deleting computations whose results are only "used" here. */
#define isob_clobber() __asm__ __volatile__("" ::: "memory")
#define isob_keep(v) __asm__ __volatile__("" : : "r,m"(v) : "memory")

#endif
