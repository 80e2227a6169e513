/* The code that runs inside a compartment, and the message format through
 * which the untrusted side talks to it.
 *
 * The trusted code in src/trusted/ is freestanding C (no libc, no system
 * calls), so that the very same source also compiles to wasm32 for the
 * WebAssembly mechanism.  Everything it knows comes from its heap and the
 * message. */
#ifndef ISOBENCH_TRUSTED_H
#define ISOBENCH_TRUSTED_H

#include <stddef.h>
#include <stdint.h>

/* Entry points of the trusted component.  Results >= 0 are values; results
 * < 0 are negative errno values and travel back to the caller unchanged. */
enum isob_entry {
    ISOB_ENTRY_EMPTY = 0,        /* returns 0; the switch benchmark's entry */
    ISOB_ENTRY_SINK = 1,         /* reads msg->len bytes of data, returns a 31-bit checksum */
    ISOB_ENTRY_ADD = 2,          /* returns arg[0] + arg[1] */
    ISOB_ENTRY_ECHO = 3,         /* data[i] = ~data[i] for i < len; returns len */
    ISOB_ENTRY_FAIL = 4,         /* returns -arg[0] (an error to propagate) */
    ISOB_ENTRY_SECRET_PLANT = 5, /* stores arg[0] in the heap; returns 0, arg[1] = its address */
    ISOB_ENTRY_SECRET_CHECK = 6, /* returns 1 if the planted secret still equals arg[0] */
    ISOB_ENTRY_COUNT_CALLS = 7,  /* returns how many calls this compartment has served */
    ISOB_ENTRY_KV_SET = 8,       /* key-value store (src/trusted/kv.h): layout below */
    ISOB_ENTRY_KV_GET = 9,
    ISOB_ENTRY_KV_DELETE = 10,
    ISOB_ENTRY_KV_FLUSH = 11,
    ISOB_ENTRY_KV_STATS = 12,
    /* The workloads' entries; layouts in isobench/work.h. */
    ISOB_ENTRY_WORK = 13,        /* worksweep: k iterations of the integer kernel */
    ISOB_ENTRY_CPU_INT = 14,     /* cpuwork: Morello's kernels, a whole trial each */
    ISOB_ENTRY_CPU_FLOAT = 15,
    ISOB_ENTRY_CPU_MATHS = 16,
    ISOB_ENTRY_CPU_ARRAY = 17,
    ISOB_ENTRY_MATH_SIN = 18,    /* cpuwork lib-in-compartment: one routine a call */
    ISOB_ENTRY_MATH_COS = 19,
    ISOB_ENTRY_MATH_TAN = 20,
    ISOB_ENTRY_MATH_SQRT = 21,
    ISOB_ENTRY_MATH_LOG = 22,
    ISOB_ENTRY_MEM_ALLOC = 23,   /* memops: a block in the compartment's heap */
    ISOB_ENTRY_MEM_WRITE = 24,
    ISOB_ENTRY_MEM_FILL = 25,
    ISOB_ENTRY_MEM_READ = 26,
    ISOB_ENTRY_MEM_FREE = 27,
    ISOB_ENTRY_HOST_FAULTS = 28, /* minor faults where the compartment runs */
    ISOB_ENTRY_IO_FILL = 29,     /* pipeio: the compartment does the I/O */
    ISOB_ENTRY_IO_WRITE = 30,
    ISOB_ENTRY_IO_READ = 31,
    ISOB_ENTRY_IO_ROUNDTRIP = 32,
    ISOB_ENTRY_IO_STREAM = 33,
    ISOB_ENTRY_IO_SUM = 34,      /* the checksum of what the last read brought in */
    ISOB_ENTRY__COUNT
};

/* The key-value store's messages.  Lengths travel in the arguments, bytes
 * in data; errors are the usual negative errno values.
 *
 *   KV_SET     arg[0] = key length (1..ISOB_KV_MAX_KEY), arg[1] = value length
 *              (0..ISOB_KV_MAX_VALUE), data = key bytes then value bytes,
 *              len = arg[0] + arg[1].  Stores (or overwrites) the value; returns
 *              0, -EINVAL for bad lengths, -ENOSPC when the store is full (an
 *              overwrite that fails keeps the old value).
 *   KV_GET     arg[0] = key length, data = key bytes, len = arg[0].  Returns the
 *              value length and leaves the value in data, with len = arg[1] =
 *              its length; -ENOENT when the key is missing, -EINVAL for a bad
 *              key length.
 *   KV_DELETE  arg[0] = key length, data = key bytes, len = arg[0].  Returns 0 or
 *              -ENOENT.
 *   KV_FLUSH   removes every entry; returns 0.
 *   KV_STATS   returns the number of entries; arg[0] = entries, arg[1] = bytes
 *              the store occupies in the heap (its header, the whole table and
 *              the arena up to its high-water mark), arg[2] = bytes of the whole
 *              heap, arg[3] = table slots.
 *
 * The store lives in the heap from ISOB_KV_OFFSET on, after the state header
 * and the secret's page; its table is sized from the heap at
 * isob_trusted_init, so a heap too small for it makes every KV_SET fail with
 * -ENOSPC. */
#define ISOB_KV_MAX_KEY 250      /* memcached's limit */
#define ISOB_KV_MAX_VALUE ((1u << 24) - 1) /* a record's 24-bit value length; a value
                                             * travels only in a shared buffer as
                                             * large as it (isob_serve_init) */
#define ISOB_KV_OFFSET 8192u     /* where the store starts in the heap */

#define ISOB_MSG_ARGS 4

/* The shared buffer starts with this header; data follows. */
struct isob_msg {
    uint32_t len;                 /* bytes of data in use */
    uint32_t entry;               /* set by mechanisms that carry the entry in the buffer */
    int64_t arg[ISOB_MSG_ARGS];   /* small arguments and results */
    int64_t ret;                  /* set by mechanisms that carry the result in the buffer */
    unsigned char data[];         /* payload, up to the buffer's capacity */
};

/* The trusted component's state; lives at the start of its heap. */
struct isob_trusted {
    uint64_t calls;
    uint64_t secret;
    unsigned char *heap;          /* the rest of the heap, after this header */
    size_t heap_size;
};

/* Set up the trusted component in heap[0..size).  Returns the state (placed
 * inside the heap), or NULL when the heap is too small. */
struct isob_trusted *isob_trusted_init(void *heap, size_t size);

/* Run one entry on msg, whose data area holds cap bytes. */
long isob_trusted_call(struct isob_trusted *t, unsigned entry, struct isob_msg *msg, size_t cap);

/* The checksum ISOB_ENTRY_SINK computes, for the caller to verify. */
uint32_t isob_checksum(const unsigned char *p, size_t n);

#endif
