/* Work in and out of a compartment: the kernels of the worksweep, cpuwork,
 * memops and pipeio benchmarks (src/trusted/work.c), and the host-call
 * interface through which trusted code asks for the few system calls those
 * workloads need.
 *
 * The kernels are freestanding C like the rest of src/trusted/, and they
 * are compiled once for the native build: the benchmarks' `out` placement
 * calls the very same functions (same object code, same flags) that the
 * ISOB_ENTRY_WORK..IO_SUM entries run inside a compartment.  The MPK
 * mechanisms run a second build of the same source with the same code
 * generation flags (src/trusted/window.c), which must call nothing outside
 * itself while the key is open.  The wasm mechanisms compile the same
 * source to wasm32, which is another ABI; the benchmarks label it so.
 *
 * Message layouts of the entries (see trusted.h for the numbering).  64-bit
 * values travel in arg[]; the entry's return value is a 31-bit fold of
 * them (a long is 32 bits on wasm32) or a negative errno.
 *
 *   WORK         arg[0] = k, arg[1] = seed: k iterations of the integer
 *                kernel; arg[2] = its 64-bit value
 *   CPU_INT, CPU_FLOAT, CPU_MATHS
 *                arg[0] = iterations, arg[1] = seed; arg[2] = the result
 *   CPU_ARRAY    arg[0] = elements, arg[1] = seed: the array lives in the
 *                work arena; arg[2] = its sum; -ENOMEM if it does not fit
 *   MATH_SIN .. MATH_LOG
 *                arg[0] = the bits of a double x; arg[1] = the bits of f(x)
 *   MEM_ALLOC    arg[0] = bytes (a multiple of 8): takes a block at the
 *                start of the arena and hands its pages back to the host
 *                (ISOB_HOST_DISCARD), so the block is fresh memory, as
 *                malloc's mmap gives; -EBUSY while a block is live,
 *                -ENOMEM when it does not fit; arg[1] = its heap offset
 *   MEM_WRITE    arg[0] = seed: every 8-byte word w[i] = seed + i * K
 *   MEM_FILL     arg[0] = a byte: memset of the whole block
 *   MEM_READ     arg[2] = the sum of every word of the block
 *   MEM_FREE     hands the block's pages back (ISOB_HOST_DISCARD)
 *   HOST_FAULTS  arg[1] = minor page faults of the process the compartment
 *                runs in (ISOB_HOST_MINFLT)
 *   IO_FILL      arg[0] = seed, arg[1] = bytes (<= ISOB_WORK_IO_MAX): fills
 *                the compartment's output buffer; returns its checksum
 *   IO_WRITE     arg[0] = fd, arg[1] = bytes: writes them from the output
 *                buffer, looping over short writes; returns bytes written;
 *                arg[3] = write calls made
 *   IO_READ      arg[0] = fd, arg[1] = bytes: reads exactly that many into
 *                the input buffer, looping over short reads; returns bytes
 *                read; arg[3] = short reads
 *   IO_ROUNDTRIP arg[0] = write fd, arg[1] = read fd, arg[2] = bytes: write
 *                then read back as many; returns bytes read; arg[3] = short
 *                reads
 *   IO_SUM       arg[0] = bytes: returns the checksum (isob_checksum) of the
 *                input buffer's first bytes, so the caller can verify a read
 *                without the check inside the timed call
 *   IO_STREAM    arg[0] = fd, arg[1] = chunk bytes, arg[2] = chunks: writes
 *                the output buffer's first chunk bytes that many times;
 *                returns 0; arg[3] = write calls made
 *
 * The work entries own the heap from ISOB_WORK_OFFSET on: the first of them
 * to run re-initialises the key-value store with no room (KV_SET then
 * returns -ENOSPC), so a compartment serves the store or the work entries,
 * not both. */
#ifndef ISOBENCH_WORK_H
#define ISOBENCH_WORK_H

#include <stddef.h>
#include <stdint.h>

#include "isobench/trusted.h"

/* The entries' 31-bit result for a 64-bit value v. */
static inline long isob_work_fold31(uint64_t v)
{
    return (long)((v ^ (v >> 31) ^ (v >> 62)) & 0x7fffffffu);
}

/* Where the work entries' state page starts in the heap; their arena
 * follows it, page-aligned. */
#define ISOB_WORK_OFFSET 16384u
#define ISOB_WORK_PAGE 4096u
#define ISOB_WORK_ARENA (ISOB_WORK_OFFSET + ISOB_WORK_PAGE)
/* The I/O entries' output and input buffers, each this large, at the
 * start of the arena. */
#define ISOB_WORK_IO_MAX (64u * 1024u)
/* The multiplier of MEM_WRITE's words (the golden ratio in 64 bits). */
#define ISOB_WORK_MEM_K 0x9e3779b97f4a7c15ull

/* Heap bytes a compartment needs for an arena of arena_bytes. */
static inline size_t isob_work_heap_size(size_t arena_bytes)
{
    return ISOB_WORK_ARENA + ((arena_bytes + ISOB_WORK_PAGE - 1) / ISOB_WORK_PAGE) * ISOB_WORK_PAGE;
}

/* ---- the host-call interface ----
 * Trusted code makes no system calls of its own.  When a workload needs
 * one, it calls isob_host_call, which the embedding provides:
 *   native mechanisms  src/mechanisms/host.c, linked into the process
 *                      that runs the trusted code: the caller's own for
 *                      in-process mechanisms, the server for process
 *                      mechanisms, which thus make the call themselves;
 *   mpk, mpk-bridge    the window copy's own system calls
 *                      (src/trusted/window.c), with host.c's results: no
 *                      C library code may run while the key is open;
 *   wasm               an import ("isob", "host_call") that the host
 *                      implements (wasm.c), as WASI does: buffers are
 *                      linear-memory offsets, checked against the memory,
 *                      and only file descriptors granted to that
 *                      compartment (isob_host_grant_fd) may be used.
 * A mechanism that filters the compartment's system calls (seccomp) kills
 * a server that tries; the benchmarks skip such placements up front.
 * Buffers are passed as (int64_t)(uintptr_t)pointer.  Returns a value >= 0
 * or a negative errno. */
enum isob_host_op {
    ISOB_HOST_WRITE = 1,   /* a0 = fd, a1 = buffer, a2 = bytes: one write(2) */
    ISOB_HOST_READ = 2,    /* a0 = fd, a1 = buffer, a2 = bytes: one read(2) */
    ISOB_HOST_DISCARD = 3, /* a1 = buffer, a2 = bytes, page-aligned: the pages
                              become fresh zero pages (MADV_DONTNEED) */
    ISOB_HOST_MINFLT = 4,  /* minor faults of the calling process (getrusage) */
};

#if defined(__wasm__)
__attribute__((import_module("isob"), import_name("host_call")))
#endif
int64_t isob_host_call(uint32_t op, int64_t a0, int64_t a1, int64_t a2);

/* ---- kernels: called directly for `out`, through the entries for `in` ---- */

/* worksweep: k iterations of a dependent 64-bit multiply-xorshift chain. */
uint64_t isob_work_kernel(uint64_t k, uint64_t seed);

/* cpuwork: Morello's four kernels, with defined integer widths and our own
 * deterministic maths (no libm; the same bits native and wasm). */
uint64_t isob_work_cpu_int(uint32_t n, uint64_t seed);
uint64_t isob_work_cpu_float(uint32_t n, uint64_t seed);   /* bits of a float */
uint64_t isob_work_cpu_maths(uint32_t n, uint64_t seed);   /* bits of a double */
uint64_t isob_work_cpu_array(uint32_t *a, uint32_t n, uint64_t seed);
/* The maths kernel's x for iteration i: the lib-in-compartment loop must
 * form it the same way. */
static inline double isob_work_maths_x(uint32_t i, uint64_t seed)
{
    return (double)(uint32_t)(i + (uint32_t)seed);
}

/* The five maths routines.  Accurate to a few ulp for 0 <= x < 2^27. */
double isob_work_sin(double x);
double isob_work_cos(double x);
double isob_work_tan(double x);
double isob_work_sqrt(double x);
double isob_work_log(double x);

/* memops: write every word, memset every byte, read every word. */
void isob_work_mem_write(uint64_t *p, size_t words, uint64_t seed);
void isob_work_mem_fill(void *p, size_t bytes, int c);
uint64_t isob_work_mem_read(const uint64_t *p, size_t words);
/* What isob_work_mem_read returns after isob_work_mem_write(p, words, seed),
 * in closed form, so it is known without the memory. */
uint64_t isob_work_mem_expected(size_t words, uint64_t seed);

/* pipeio: fill a buffer with the pattern of seed; write or read all of
 * len bytes through the host call, looping over short transfers.  Return
 * bytes moved or a negative errno; *calls counts write calls, *shorts
 * reads that returned less than asked. */
void isob_work_io_fill(unsigned char *buf, size_t len, uint64_t seed);
int64_t isob_work_io_write(int fd, const unsigned char *buf, size_t len, uint64_t *calls);
int64_t isob_work_io_read(int fd, unsigned char *buf, size_t len, uint64_t *shorts);

/* The entries above, run on the compartment's heap (trusted.c dispatches
 * every entry from ISOB_ENTRY_WORK on here). */
long isob_work_call(struct isob_trusted *t, unsigned entry, struct isob_msg *msg, size_t cap);

#endif
