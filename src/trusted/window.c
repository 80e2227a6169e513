/* The trusted code as the MPK gate runs it: trusted.c and work.c compiled
 * once more, with names of their own (window.h), into one stretch of text
 * that nothing outside it is called from.
 *
 * While the gate holds a compartment's key open, every instruction that
 * runs must be trusted: one instruction of the caller's (a C library
 * function reached through the PLT, whose GOT slot the untrusted side can
 * write) would run with the key open and could read the secret.  So this
 * copy
 *  - is freestanding and built without builtins, loop idioms, jump tables,
 *    stack protector or sanitizers (meson.build), so that the compiler
 *    emits no call to memset, memcpy, __stack_chk_fail or a sanitizer's
 *    runtime and no indirect jump;
 *  - makes its host calls (isobench/work.h) as system calls of its own,
 *    below, instead of through the C library (host.c);
 *  - is compiled as one translation unit between two labels, the first
 *    at its text's start, the second after its text's end:
 *    [isob_window_text, isob_window_text_end) is its whole text.
 * tests/callgraph/check_window.py disassembles the built binary from the
 * gate's entries and fails on any call or jump that leaves the gate's text
 * and this range, or that it cannot follow; docs/mechanisms.md says why
 * the host calls keep the key open (the kernel is trusted, and honours
 * PKRU on its own accesses to the buffers they name), and what that does
 * not cover: work the kernel does for the untrusted side on the way back
 * from them (io_uring task work, rseq, signals: tests/vm/mpk_kernel.c).
 *
 * ISOB_WINDOW_LEAKY (tests only, tests/callgraph/meson.build) builds the
 * copy as the trusted code was built before: memset from the C library and
 * host calls through host.c.  The call-graph test and the GOT attack of
 * tests/vm must fail on that build. */
#include "window.h"

#if !defined(__x86_64__)
#error "the window copy is the x86-64 MPK gate's; other architectures have no gate"
#endif

/* The start: the first thing in this unit's text (-fno-toplevel-reorder
 * keeps top-level asm and functions in source order). */
__asm__(".pushsection .text, 0\n"
        ".globl isob_window_text\n"
        ".hidden isob_window_text\n"
        "isob_window_text:\n"
        ".popsection\n");

#include "trusted.c"
#include "work.c"

/* The code behind the gate in ERIM's call kinds (gate_x86.S, BODY_DIRECT
 * and BODY_INDIRECT): the empty function of ERIM's microbenchmark, which
 * counts its calls in the slot page (trusted memory) and returns 0, as the
 * switch benchmark's plain `direct` kinds do outside any compartment. */
long isob_window_kind_empty(uint64_t *calls)
{
    (*calls)++;
    __asm__ __volatile__("" ::: "memory");
    return 0;
}

#if !defined(ISOB_WINDOW_LEAKY)

/* x86-64 Linux system call numbers and constants (no libc headers here). */
#define WS_READ 0
#define WS_WRITE 1
#define WS_MADVISE 28
#define WS_GETRUSAGE 98
#define WS_MADV_DONTNEED 4
#define WS_RUSAGE_SELF 0
#define WS_ENOSYS 38
/* struct rusage: two struct timevals, then longs; ru_minflt is the fifth. */
#define WS_RUSAGE_LONGS 18
#define WS_RUSAGE_MINFLT 8

static int64_t window_syscall3(int64_t nr, int64_t a0, int64_t a1, int64_t a2)
{
    int64_t r;
    __asm__ __volatile__("syscall"
                         : "=a"(r)
                         : "a"(nr), "D"(a0), "S"(a1), "d"(a2)
                         : "rcx", "r11", "memory");
    return r;
}

/* host.c's semantics, result for result: a value >= 0 or -errno. */
int64_t isob_host_call(uint32_t op, int64_t a0, int64_t a1, int64_t a2)
{
    switch (op) {
    case ISOB_HOST_WRITE:
        return window_syscall3(WS_WRITE, (int)a0, a1, a2);
    case ISOB_HOST_READ:
        return window_syscall3(WS_READ, (int)a0, a1, a2);
    case ISOB_HOST_DISCARD:
        if (a1 % ISOB_WORK_PAGE || a2 % ISOB_WORK_PAGE || a2 < 0)
            return -W_EINVAL;
        return window_syscall3(WS_MADVISE, a1, a2, WS_MADV_DONTNEED);
    case ISOB_HOST_MINFLT: {
        /* The buffer is on the trusted stack: a getrusage that reports
         * success without writing it (a seccomp filter of the untrusted
         * side can answer 0 without running the call) must not hand back
         * what an earlier entry left there.  The kernel never reports a
         * negative count, so -1 marks "not written". */
        long ru[WS_RUSAGE_LONGS];
        ru[WS_RUSAGE_MINFLT] = -1;
        int64_t r = window_syscall3(WS_GETRUSAGE, WS_RUSAGE_SELF, (int64_t)(uintptr_t)ru, 0);
        if (r < 0)
            return r;
        return ru[WS_RUSAGE_MINFLT] < 0 ? -W_EIO : (int64_t)ru[WS_RUSAGE_MINFLT];
    }
    default:
        return -WS_ENOSYS;
    }
}

#endif

/* The end: in subsection 1 of .text, which the assembler places after all
 * of subsection 0, where the compiler puts every function, those it makes
 * itself (partial inlining's .part, clones) after the last line included. */
__asm__(".pushsection .text, 1\n"
        ".globl isob_window_text_end\n"
        ".hidden isob_window_text_end\n"
        "isob_window_text_end:\n"
        ".popsection\n");
