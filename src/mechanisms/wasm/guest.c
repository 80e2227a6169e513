/* The wasm side of the wasm mechanisms: compiled with src/trusted/trusted.c
 * to one wasm32 module (clang --target=wasm32 -nostdlib, see meson.build),
 * which wasm2c turns into C for the host.
 *
 * Everything here speaks in linear-memory offsets, because inside the
 * sandbox that is all a pointer is.  The host never hands the guest a host
 * pointer: it copies the message into the guest's message buffer, calls
 * isob_guest_call, and copies the message back out.
 *
 * Freestanding like trusted.c: no libc, and one import, ("isob",
 * "host_call"), through which the work entries ask the host for the
 * system calls of the workloads (include/isobench/work.h); the host checks
 * every buffer against linear memory and allows only the descriptors
 * granted to the compartment.  Otherwise the module can do nothing but
 * compute on its own linear memory. */
#include "isobench/trusted.h"

/* Defined by wasm-ld: the first byte after the data and the shadow stack. */
extern unsigned char __heap_base;

#define WASM_PAGE 65536u
/* The heap starts page-aligned so that the trusted state and the planted
 * secret sit at the same offsets from it as in the native mechanisms. */
#define HEAP_ALIGN 4096u
/* Error codes travel as negative errno values; the numbers are Linux's,
 * spelled out because there is no <errno.h> here. */
#define GUEST_ENOMEM 12
#define GUEST_EINVAL 22

/* The guest's own state.  These globals live in linear memory too, in the
 * module's .bss, below the shadow stack. */
static struct isob_trusted *guest_trusted;
static struct isob_msg *guest_msg;
static uint32_t guest_cap;

/* Set up the trusted heap (heap_size bytes from __heap_base) and the message
 * buffer after it (shared_size bytes, header included), growing linear
 * memory as needed.  Returns the message buffer's offset, or a negative
 * errno. */
int64_t isob_guest_init(uint32_t heap_size, uint32_t shared_size)
{
    if (shared_size <= sizeof(struct isob_msg))
        return -GUEST_EINVAL;
    /* 64-bit arithmetic: a 32-bit sum could wrap and pass the checks. */
    uint64_t heap = ((uint64_t)(uintptr_t)&__heap_base + HEAP_ALIGN - 1) & ~(uint64_t)(HEAP_ALIGN - 1);
    uint64_t msg = (heap + heap_size + 15u) & ~(uint64_t)15u;
    uint64_t end = msg + shared_size;
    /* wasm-rt keeps the memory size in 32 bits, so the last page of the
     * 4 GiB space cannot be used. */
    if (end > 0xffff0000ull)
        return -GUEST_ENOMEM;
    uint64_t have = (uint64_t)__builtin_wasm_memory_size(0) * WASM_PAGE;
    if (end > have &&
        __builtin_wasm_memory_grow(0, (uintptr_t)((end - have + WASM_PAGE - 1) / WASM_PAGE)) == (uintptr_t)-1)
        return -GUEST_ENOMEM;
    guest_trusted = isob_trusted_init((void *)(uintptr_t)heap, heap_size);
    if (!guest_trusted)
        return -GUEST_ENOMEM;
    guest_msg = (struct isob_msg *)(uintptr_t)msg;
    guest_cap = shared_size - (uint32_t)sizeof(struct isob_msg);
    return (int64_t)msg;
}

/* Run one entry on the message buffer.  The trusted code returns a long,
 * which is 32 bits on wasm32; it is widened here so the host sees the same
 * signed value. */
int64_t isob_guest_call(uint32_t entry)
{
    return isob_trusted_call(guest_trusted, entry, guest_msg, guest_cap);
}

/* The four functions a freestanding C compiler may call on its own (for
 * struct copies and loops it recognises).  The trusted code does not need
 * them today; defining them here means a change there cannot break the
 * link.  no_builtin keeps clang from turning these very loops back into
 * calls to themselves; wasm-ld drops the ones nothing uses. */
__attribute__((no_builtin)) void *memcpy(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
    return dst;
}

__attribute__((no_builtin)) void *memmove(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (d < s) {
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
    } else {
        for (size_t i = n; i > 0; i--)
            d[i - 1] = s[i - 1];
    }
    return dst;
}

__attribute__((no_builtin)) void *memset(void *dst, int c, size_t n)
{
    unsigned char *d = dst;
    for (size_t i = 0; i < n; i++)
        d[i] = (unsigned char)c;
    return dst;
}

__attribute__((no_builtin)) int memcmp(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* Read and write 8 bytes at any 32-bit offset: what hostile code inside the
 * sandbox can do with a pointer it made up.  The host uses them only in
 * tests, to show that every such access stays in linear memory or traps.
 * volatile keeps the compiler from deciding the access cannot happen. */
uint64_t isob_guest_peek(uint32_t offset)
{
    return *(volatile uint64_t *)(uintptr_t)offset;
}

void isob_guest_poke(uint32_t offset, uint64_t value)
{
    *(volatile uint64_t *)(uintptr_t)offset = value;
}

/* Call whatever the function table holds at any index, as hostile code
 * could with a function pointer it made up: in wasm32 a function pointer is
 * a table index, so this is one call_indirect.  The host uses it only in
 * the isolation matrix, to show that an index outside the table traps. */
int64_t isob_guest_call_indirect(uint32_t index)
{
    int64_t (*volatile fn)(void) = (int64_t (*)(void))(uintptr_t)index;
    return fn();
}
