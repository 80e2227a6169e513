/* The trusted component: the code that runs inside a compartment.
 *
 * Freestanding on purpose (no libc, no system calls, no globals), so that
 * the same source compiles to wasm32 for the WebAssembly mechanism and its
 * state lives only in the heap the mechanism gives it. */
#include "isobench/trusted.h"
#include "isobench/work.h"
#include "kv.h"

/* Where the planted secret lives: far enough into the heap that it is not
 * on the same page as the state header. */
#define SECRET_OFFSET 4096u

struct isob_trusted *isob_trusted_init(void *heap, size_t size)
{
    if (size < SECRET_OFFSET + sizeof(uint64_t) || size < sizeof(struct isob_trusted))
        return 0;
    struct isob_trusted *t = (struct isob_trusted *)heap;
    t->calls = 0;
    t->secret = 0;
    t->heap = (unsigned char *)heap;
    t->heap_size = size;
    kv_init(t->heap, size);
    return t;
}

uint32_t isob_checksum(const unsigned char *p, size_t n)
{
    /* Sum of 64-bit words and trailing bytes, folded to 31 bits so that it
     * is always a non-negative result. Cheap enough not to dominate the cost
     * of moving 4 KiB across a compartment boundary. */
    uint64_t sum = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        sum += *(const uint64_t *)(const void *)(p + i);
    for (; i < n; i++)
        sum += p[i];
    sum = (sum >> 31) ^ (sum & 0x7fffffffu) ^ (sum >> 62);
    return (uint32_t)(sum & 0x7fffffffu);
}

long isob_trusted_call(struct isob_trusted *t, unsigned entry, struct isob_msg *msg, size_t cap)
{
    t->calls++;
    switch (entry) {
    case ISOB_ENTRY_EMPTY:
        return 0;
    case ISOB_ENTRY_SINK:
        if (msg->len > cap)
            return -22; /* EINVAL */
        return (long)isob_checksum(msg->data, msg->len);
    case ISOB_ENTRY_ADD:
        return (long)(msg->arg[0] + msg->arg[1]);
    case ISOB_ENTRY_ECHO:
        if (msg->len > cap)
            return -22;
        for (uint32_t i = 0; i < msg->len; i++)
            msg->data[i] = (unsigned char)~msg->data[i];
        return (long)msg->len;
    case ISOB_ENTRY_FAIL:
        return -(long)msg->arg[0];
    case ISOB_ENTRY_SECRET_PLANT: {
        volatile uint64_t *slot = (volatile uint64_t *)(void *)(t->heap + SECRET_OFFSET);
        *slot = (uint64_t)msg->arg[0];
        t->secret = (uint64_t)msg->arg[0];
        msg->arg[1] = (int64_t)(uintptr_t)slot;
        return 0;
    }
    case ISOB_ENTRY_SECRET_CHECK: {
        volatile uint64_t *slot = (volatile uint64_t *)(void *)(t->heap + SECRET_OFFSET);
        return *slot == (uint64_t)msg->arg[0] ? 1 : 0;
    }
    case ISOB_ENTRY_COUNT_CALLS:
        return (long)t->calls;
    case ISOB_ENTRY_KV_SET:
        return kv_set(t, msg, cap);
    case ISOB_ENTRY_KV_GET:
        return kv_get(t, msg, cap);
    case ISOB_ENTRY_KV_DELETE:
        return kv_delete(t, msg, cap);
    case ISOB_ENTRY_KV_FLUSH:
        return kv_flush(t);
    case ISOB_ENTRY_KV_STATS:
        return kv_stats(t, msg);
    default:
        if (entry >= ISOB_ENTRY_WORK && entry < ISOB_ENTRY__COUNT)
            return isob_work_call(t, entry, msg, cap);
        return -38; /* ENOSYS: no such entry */
    }
}
