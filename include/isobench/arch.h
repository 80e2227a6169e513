/* The architecture layer: one header per architecture, chosen here, each
 * with the same small set of inline functions and constants.
 *
 *   isob_timer_read()     the fixed-rate timer, ordered at both edges
 *   ISOB_TIMER_NAME       its backend name ("tsc", "cntvct")
 *   ISOB_TIMER_UNIT       its unit in results ("tsc_ticks", "cntvct_ticks")
 *   ISOB_TIMER_LABEL      how reasons name it ("TSC", "CNTVCT_EL0")
 *   ISOB_TIMER_HOW        why it is usable and how it is read (counter_why)
 *   ISOB_ARCH_USER_PMC    1 where perf counters are read from user space
 *   isob_rdpmc(i)         read counter i from user space
 *   isob_pmc_cpu()        the CPU number, ordered after earlier instructions
 *   isob_pmc_fence()      keep later instructions after the counter reads
 *   isob_cpu_relax()      the spin-wait hint
 *   isob_faulting_store(p), isob_skip_faulting_store(uc)
 *                         a store of known encoding, and stepping over it
 *                         in a SIGSEGV handler (oslat's protection fault)
 *   isob_raw_exit(code)   exit_group without a C library (oslat's tiny binary)
 *   isob_hypervisor_bit() 1/0 where the CPU says whether a hypervisor runs it, else -1
 *   ISOB_AUDIT_ARCH       the audit architecture a seccomp filter checks for
 *   ISOB_SYSCALL_ALIAS_BIT  a bit of call numbers of a second ABI to refuse (x32), or 0
 *
 * The timer's frequency and whether it is usable are functions of
 * src/harness/timer_<arch>.c (harness.h declares them).  Generic code
 * includes this header and nothing architecture-specific. */
#ifndef ISOBENCH_ARCH_H
#define ISOBENCH_ARCH_H

#if defined(__x86_64__)
#include "isobench/arch_x86.h"
#elif defined(__aarch64__)
#include "isobench/arch_arm64.h"
#else
#error "isobench supports x86-64 and arm64 (aarch64)"
#endif

/* Keep the compiler from moving memory accesses across this point, and from
 * deleting computations whose results are only "used" here. */
#define isob_clobber() __asm__ __volatile__("" ::: "memory")
#define isob_keep(v) __asm__ __volatile__("" : : "r,m"(v) : "memory")

#endif
