/* What memory.c gives wasm.c and the generated code: the linear memories of
 * the two variants and the fault handler of the guard-page one.
 *
 * The generated code of each variant calls wasm_rt_allocate_memory,
 * wasm_rt_grow_memory and wasm_rt_free_memory under the names below
 * (renamed with -D in meson.build), so that each variant gets the memory its
 * checks need, and so that a guard reservation is released whole: wasm-rt
 * 1.0.32's own free unmaps only the pages in use and leaks the rest of the
 * 8 GiB on every instance. */
#ifndef ISOB_WASM_MEMORY_H
#define ISOB_WASM_MEMORY_H

#include "wasm-rt.h"

/* Guard pages: the whole ISOB_WASM_GUARD_RESERVATION is mapped
 * inaccessible and the used pages are opened in place, so the memory never
 * moves and any access past its end faults inside the reservation. */
void isob_wasm_guard_memory_allocate(wasm_rt_memory_t *m, uint32_t initial_pages, uint32_t max_pages);
uint32_t isob_wasm_guard_memory_grow(wasm_rt_memory_t *m, uint32_t delta);
void isob_wasm_guard_memory_free(wasm_rt_memory_t *m);

/* Bounds checks: an exact-size mapping with nothing reserved around it, so
 * the generated checks are all that stand between the guest and whatever
 * the host has mapped next to it.  Growing may move it. */
void isob_wasm_bounds_memory_allocate(wasm_rt_memory_t *m, uint32_t initial_pages, uint32_t max_pages);
uint32_t isob_wasm_bounds_memory_grow(wasm_rt_memory_t *m, uint32_t delta);
void isob_wasm_bounds_memory_free(wasm_rt_memory_t *m);

/* The guard reservation the calling thread is running guest code in, or
 * NULL: a fault inside it is a trap, any other fault is not ours. */
extern __thread unsigned char *isob_wasm_guard_active __attribute__((tls_model("initial-exec")));

/* Install the SIGSEGV handler that turns faults in isob_wasm_guard_active
 * into wasm traps and passes every other fault on to the handler it
 * replaced.  Idempotent; 0 or a negative errno. */
int isob_wasm_fault_handler_install(void);

#endif
