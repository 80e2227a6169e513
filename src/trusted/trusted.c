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
/* The canary's region shares the secret's page, which nothing else uses
 * (the key-value store starts at ISOB_KV_OFFSET, the next page). */
#define CANARY_REGION_OFFSET (SECRET_OFFSET + 1024u)

struct isob_trusted *isob_trusted_init(void *heap, size_t size)
{
    if (size < CANARY_REGION_OFFSET + ISOB_CANARY_REGION || size < sizeof(struct isob_trusted))
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

void isob_canary_guard(unsigned char *region)
{
    /* A pattern that no run of zeroes, and no 8-byte value a probe could
     * write, matches by chance over the whole region. */
    for (uint32_t i = 0; i < ISOB_CANARY_REGION; i++)
        region[i] = (unsigned char)(0xa5u ^ (i * 31u) ^ (i >> 8));
}

static long canary(struct isob_trusted *t, struct isob_msg *msg, size_t cap)
{
    unsigned char *region = t->heap + CANARY_REGION_OFFSET;
    int64_t op = ISOB_MSG_ONCE(msg->arg[0]);
    if (op == ISOB_CANARY_SUM)
        return (long)isob_checksum(region, ISOB_CANARY_REGION);
    if (op != ISOB_CANARY_PLANT)
        return -22; /* EINVAL */
    uint32_t len = ISOB_MSG_ONCE(msg->len);
    if (len < ISOB_CANARY_LEN || cap < ISOB_CANARY_LEN)
        return -22;
    isob_canary_guard(region);
    volatile unsigned char *slot = region + ISOB_CANARY_AT;
    /* Byte by byte through volatile pointers: the canary goes from the
     * message to the heap and nowhere else (no copy in a buffer of the
     * compiler's), and the message's copy is really cleared. */
    volatile unsigned char *data = msg->data;
    for (uint32_t i = 0; i < ISOB_CANARY_LEN; i++) {
        slot[i] = data[i];
        data[i] = 0;
    }
    msg->arg[1] = (int64_t)(uintptr_t)slot;
    return 0;
}

long isob_trusted_call(struct isob_trusted *t, unsigned entry, struct isob_msg *msg, size_t cap)
{
    t->calls++;
    switch (entry) {
    case ISOB_ENTRY_EMPTY:
        return 0;
    /* Lengths and arguments are read from the shared message once, into
     * locals, and only the copies are checked and used (ISOB_MSG_ONCE). */
    case ISOB_ENTRY_SINK: {
        uint32_t len = ISOB_MSG_ONCE(msg->len);
        if (len > cap)
            return -22; /* EINVAL */
        return (long)isob_checksum(msg->data, len);
    }
    case ISOB_ENTRY_ADD:
        return (long)((uint64_t)ISOB_MSG_ONCE(msg->arg[0]) + (uint64_t)ISOB_MSG_ONCE(msg->arg[1]));
    case ISOB_ENTRY_ECHO: {
        uint32_t len = ISOB_MSG_ONCE(msg->len);
        if (len > cap)
            return -22;
        for (uint32_t i = 0; i < len; i++)
            msg->data[i] = (unsigned char)~msg->data[i];
        return (long)len;
    }
    case ISOB_ENTRY_FAIL:
        return -(long)ISOB_MSG_ONCE(msg->arg[0]);
    case ISOB_ENTRY_SECRET_PLANT: {
        uint64_t secret = (uint64_t)ISOB_MSG_ONCE(msg->arg[0]);
        volatile uint64_t *slot = (volatile uint64_t *)(void *)(t->heap + SECRET_OFFSET);
        *slot = secret;
        t->secret = secret;
        msg->arg[1] = (int64_t)(uintptr_t)slot;
        return 0;
    }
    case ISOB_ENTRY_SECRET_CHECK: {
        volatile uint64_t *slot = (volatile uint64_t *)(void *)(t->heap + SECRET_OFFSET);
        return *slot == (uint64_t)ISOB_MSG_ONCE(msg->arg[0]) ? 1 : 0;
    }
    case ISOB_ENTRY_COUNT_CALLS:
        return (long)t->calls;
    case ISOB_ENTRY_KV_SET:
    case ISOB_ENTRY_KV_ADD:
    case ISOB_ENTRY_KV_REPLACE:
    case ISOB_ENTRY_KV_CAS:
        return kv_store_op(t, msg, cap, entry);
    case ISOB_ENTRY_KV_GET:
        return kv_get(t, msg, cap, 0);
    case ISOB_ENTRY_KV_GAT:
        return kv_get(t, msg, cap, 1);
    case ISOB_ENTRY_KV_TOUCH:
        return kv_touch(t, msg, cap);
    case ISOB_ENTRY_KV_CLOCK:
        return kv_clock(t, msg);
    case ISOB_ENTRY_KV_DELETE:
        return kv_delete(t, msg, cap, 0);
    case ISOB_ENTRY_KV_DELETE_CAS:
        return kv_delete(t, msg, cap, 1);
    case ISOB_ENTRY_KV_INCR:
        return kv_incr(t, msg, cap);
    case ISOB_ENTRY_KV_APPEND:
        return kv_append(t, msg, cap);
    case ISOB_ENTRY_KV_FLUSH:
        return kv_flush(t);
    case ISOB_ENTRY_KV_STATS:
        return kv_stats(t, msg, cap);
    case ISOB_ENTRY_CANARY:
        return canary(t, msg, cap);
    default:
        if (entry >= ISOB_ENTRY_WORK && entry < ISOB_ENTRY__COUNT)
            return isob_work_call(t, entry, msg, cap);
        return -38; /* ENOSYS: no such entry */
    }
}
