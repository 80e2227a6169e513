/* The wasm mechanisms' hooks for tests (tests/c/test_wasm.c): look at a
 * compartment's linear memory from the host, and run guest code that reads
 * or writes it at any 32-bit offset, as hostile code in the sandbox could.
 * Each returns 0 or a negative errno: -EINVAL for a compartment of another
 * mechanism, -ENOTSUP when the wasm mechanisms were built without their
 * tools, -EFAULT when the guest access trapped. */
#ifndef ISOB_WASM_H
#define ISOB_WASM_H

#include <stddef.h>
#include <stdint.h>

#include "isobench/mechanism.h"

/* Address space reserved for one guard-page linear memory.  A wasm32 access
 * reaches base + (a 32-bit address) + (a 32-bit static offset) + up to 8
 * bytes, so everything below base + 8 GiB + 8 must belong to the sandbox;
 * one 64 KiB guard page more covers the tail.  wasm-rt 1.0.32 itself
 * reserves exactly 8 GiB, 6 bytes short. */
#define ISOB_WASM_GUARD_RESERVATION ((size_t)8 << 30 | (size_t)65536)

struct isob_wasm_linear {
    unsigned char *base;  /* host address of linear-memory offset 0 */
    size_t size;          /* bytes the guest can use */
    size_t reserved;      /* bytes from base that belong to the sandbox: the
                             guard reservation, or size for wasm-bounds */
    uint32_t msg_offset;  /* offset of the guest's message buffer */
};

int isob_wasm_linear(struct isob_comp *c, struct isob_wasm_linear *out);
/* Guest code reads 8 bytes at offset into *value. */
int isob_wasm_peek(struct isob_comp *c, uint32_t offset, uint64_t *value);
/* Guest code writes value at offset. */
int isob_wasm_poke(struct isob_comp *c, uint32_t offset, uint64_t value);

/* Descriptors one compartment's host calls may use, at most. */
#define ISOB_WASM_MAX_FDS 8
/* Let the guest's host calls read and write fd (isob_host_grant_fd);
 * -ENOSPC when ISOB_WASM_MAX_FDS are granted already. */
int isob_wasm_grant_fd(struct isob_comp *c, int fd);

#endif
