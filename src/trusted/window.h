/* The names of the window copy of the trusted code (window.c).
 *
 * window.c compiles trusted.c and work.c a second time, as the code that
 * the MPK gate runs with the compartment's key open.  Every function they
 * define with external linkage gets a name of its own here, so that the
 * copy links beside the ordinary one (which the other mechanisms, and the
 * benchmarks' `out` placement, call) and so that nothing but the gate
 * reaches it.  A name missing here fails the link as a duplicate. */
#ifndef ISOBENCH_TRUSTED_WINDOW_H
#define ISOBENCH_TRUSTED_WINDOW_H

#define isob_trusted_init isob_window_trusted_init
#define isob_checksum isob_window_checksum
#define isob_canary_guard isob_window_canary_guard
#define isob_trusted_call isob_window_trusted_call
#define isob_work_kernel isob_window_work_kernel
#define isob_work_cpu_int isob_window_work_cpu_int
#define isob_work_cpu_float isob_window_work_cpu_float
#define isob_work_cpu_array isob_window_work_cpu_array
#define isob_work_cpu_maths isob_window_work_cpu_maths
#define isob_work_sin isob_window_work_sin
#define isob_work_cos isob_window_work_cos
#define isob_work_tan isob_window_work_tan
#define isob_work_sqrt isob_window_work_sqrt
#define isob_work_log isob_window_work_log
#define isob_work_mem_write isob_window_work_mem_write
#define isob_work_mem_fill isob_window_work_mem_fill
#define isob_work_mem_read isob_window_work_mem_read
#define isob_work_mem_expected isob_window_work_mem_expected
#define isob_work_io_fill isob_window_work_io_fill
#define isob_work_io_write isob_window_work_io_write
#define isob_work_io_read isob_window_work_io_read
#define isob_work_call isob_window_work_call
/* The host calls: the window's own system calls (window.c), except in the
 * test-only leaky build, which keeps the C library's (host.c), as the
 * trusted code once did under mpk. */
#if !defined(ISOB_WINDOW_LEAKY)
#define isob_host_call isob_window_host_call
#endif

/* The gate's call target (gate_x86.S), and the bounds of the window text:
 * every instruction of the copy lies in [isob_window_text,
 * isob_window_text_end), which tests/callgraph checks. */
#include "isobench/trusted.h"
long isob_window_trusted_call(struct isob_trusted *t, unsigned entry, struct isob_msg *msg,
                              size_t cap);
/* ERIM's call kinds behind the gate: the empty function the direct-call and
 * indirect-call kinds call (window.c). */
long isob_window_kind_empty(uint64_t *calls);
extern const unsigned char isob_window_text[], isob_window_text_end[];

#endif
