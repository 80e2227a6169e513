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
    ISOB_ENTRY_KV_ADD = 13,      /* the memcached protocol's conditional stores, */
    ISOB_ENTRY_KV_REPLACE = 14,  /* expiry and cas uniques: layout below */
    ISOB_ENTRY_KV_CAS = 15,
    ISOB_ENTRY_KV_TOUCH = 16,
    ISOB_ENTRY_KV_GAT = 17,
    ISOB_ENTRY_KV_CLOCK = 18,
    ISOB_ENTRY_CANARY = 19,      /* the outside reader's canary (isob scrape): layout below */
    /* The workloads' entries; layouts in isobench/work.h. */
    ISOB_ENTRY_WORK = 20,        /* worksweep: k iterations of the integer kernel */
    ISOB_ENTRY_CPU_INT = 21,     /* cpuwork: Morello's kernels, a whole trial each */
    ISOB_ENTRY_CPU_FLOAT = 22,
    ISOB_ENTRY_CPU_MATHS = 23,
    ISOB_ENTRY_CPU_ARRAY = 24,
    ISOB_ENTRY_MATH_SIN = 25,    /* cpuwork lib-in-compartment: one routine a call */
    ISOB_ENTRY_MATH_COS = 26,
    ISOB_ENTRY_MATH_TAN = 27,
    ISOB_ENTRY_MATH_SQRT = 28,
    ISOB_ENTRY_MATH_LOG = 29,
    ISOB_ENTRY_MEM_ALLOC = 30,   /* memops: a block in the compartment's heap */
    ISOB_ENTRY_MEM_WRITE = 31,
    ISOB_ENTRY_MEM_FILL = 32,
    ISOB_ENTRY_MEM_READ = 33,
    ISOB_ENTRY_MEM_FREE = 34,
    ISOB_ENTRY_HOST_FAULTS = 35, /* minor faults where the compartment runs */
    ISOB_ENTRY_IO_FILL = 36,     /* pipeio: the compartment does the I/O */
    ISOB_ENTRY_IO_WRITE = 37,
    ISOB_ENTRY_IO_READ = 38,
    ISOB_ENTRY_IO_ROUNDTRIP = 39,
    ISOB_ENTRY_IO_STREAM = 40,
    ISOB_ENTRY_IO_SUM = 41,      /* the checksum of what the last read brought in */
    ISOB_ENTRY_KV_INCR = 42,     /* the memcached protocol's changes to a stored */
    ISOB_ENTRY_KV_APPEND = 43,   /* value, and its conditional delete: layout below */
    ISOB_ENTRY_KV_DELETE_CAS = 44,
    ISOB_ENTRY__COUNT
};

/* The canary of `isob scrape` (include/isobench/scrape.h): 32 random bytes
 * in the trusted heap, in the middle of a guard region of a known pattern,
 * so that a reader that wrote anywhere near it would be seen.
 *
 *   CANARY  arg[0] = ISOB_CANARY_PLANT: len >= ISOB_CANARY_LEN, data = the
 *           canary.  Fills the guard region with its pattern, copies the
 *           canary into its middle and zeroes the message's copy (so that
 *           the canary is left in the heap only, not in the shared
 *           buffer); returns 0 with arg[1] = the canary's address.
 *           arg[0] = ISOB_CANARY_SUM: returns isob_checksum() of the whole
 *           region (guard and canary), for the caller to compare before
 *           and after the readers.  Anything else: -EINVAL. */
#define ISOB_CANARY_LEN 32u
#define ISOB_CANARY_REGION 2048u /* the guard region, canary included */
#define ISOB_CANARY_AT 1024u     /* the canary's offset in the region */
#define ISOB_CANARY_PLANT 1
#define ISOB_CANARY_SUM 2

/* The key-value store's messages.  Lengths travel in the arguments, bytes
 * in data; errors are the usual negative errno values.  Times are seconds
 * of the store's clock, which only KV_CLOCK sets (the store makes no
 * system calls); an expiry of 0 is "never", and a record whose expiry is
 * not after the clock is gone for every entry.
 *
 *   KV_SET     arg[0] = key length (1..ISOB_KV_MAX_KEY), arg[1] = value length
 *              (0..ISOB_KV_MAX_VALUE), arg[2] = expiry (0..2^32-1), data = key
 *              bytes then value bytes, len = arg[0] + arg[1].  Stores (or
 *              overwrites) the value with a new cas unique; returns 0, -EINVAL
 *              for bad lengths, -ENOSPC when the store is full (an overwrite
 *              that fails keeps the old value).  On return arg[3] = the new
 *              cas unique (0 when nothing was stored); the other arguments
 *              are left as they were.
 *   KV_ADD     as KV_SET, only if the key is absent: else -EEXIST.
 *   KV_REPLACE as KV_SET, only if the key is present: else -ENOENT.
 *   KV_CAS     as KV_SET, only if the key is present (else -ENOENT) with the
 *              cas unique in arg[3] (else -EEXIST).
 *   KV_GET     arg[0] = key length, data = key bytes, len = arg[0].  Returns the
 *              value length and leaves the value in data, with len = arg[1] =
 *              its length and arg[3] = its cas unique; -ENOENT when the key is
 *              missing, -EINVAL for a bad key length; arg[2] = its expiry.
 *   KV_GAT     as KV_GET, after setting the record's expiry to arg[2].
 *   KV_TOUCH   arg[0] = key length, arg[2] = expiry, data = key bytes, len =
 *              arg[0].  Sets the expiry; returns 0 or -ENOENT.
 *   KV_DELETE  arg[0] = key length, data = key bytes, len = arg[0].  Returns 0 or
 *              -ENOENT.
 *   KV_DELETE_CAS as KV_DELETE, only if the record's cas unique is arg[3]
 *              (else -EEXIST).
 *   KV_INCR    arg[0] = key length, arg[1] = delta (an unsigned 64-bit number),
 *              arg[2] = 2 * P + d, data = key bytes, len = arg[0].  The value's
 *              bytes after its first P (at most 64, kept as they are) must be
 *              a decimal number as memcached's incr reads it (else -EDOM);
 *              the delta is added to it (d = 0, wrapping at 2^64) or taken
 *              from it (d = 1, stopping at 0).  A result with fewer digits
 *              keeps the value's length, padded with spaces, as memcached.
 *              Returns 0 with arg[1] = the result and arg[3] = the new cas
 *              unique; -ENOENT, -ENOSPC (a longer value did not fit).  The
 *              record keeps its expiry.
 *   KV_APPEND  arg[0] = key length, arg[1] = length of the bytes to add,
 *              arg[2] = 2 * P + p, arg[3] = the longest value allowed, data =
 *              key bytes then the bytes to add.  Adds them after the value
 *              (p = 0) or after its first P bytes (p = 1, prepend), keeping
 *              its expiry; returns 0 with arg[3] = the new cas unique,
 *              -ENOENT, -EMSGSIZE (the value would pass arg[3], the data area
 *              or ISOB_KV_MAX_VALUE), -ENOSPC.
 *   KV_FLUSH   removes every entry; returns 0.
 *   KV_STATS   returns the number of entries; arg[0] = entries, arg[1] = bytes
 *              the store occupies in the heap (its header, the whole table and
 *              the arena up to its high-water mark), arg[2] = bytes of the whole
 *              heap, arg[3] = table slots; and, when the data area holds 24
 *              bytes, data = three little-endian uint64: live records evicted,
 *              expired records reclaimed by the eviction scan, the last cas
 *              unique handed out (len = 24; else len = 0).
 *   KV_CLOCK   arg[0] = the time now (0..2^32-1), arg[1] = 1 if a store that
 *              finds the store full may evict records of its size class, 0 (the
 *              state after init) if it fails with -ENOSPC.  Returns 0.
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

/* One read of a field of the shared message.  The untrusted side can
 * change the message while an entry runs, so each entry copies every
 * length and argument it uses into a local with one volatile load, and
 * checks and uses only the copy: a plain load could be repeated by the
 * compiler, and the second one would see a value nobody checked. */
#define ISOB_MSG_ONCE(field) (*(const volatile __typeof__(field) *)&(field))

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

/* Fill a canary region (ISOB_CANARY_REGION bytes) with the guard pattern,
 * the canary's place included; the trusted side and the plain target
 * processes of `isob scrape` lay out their canary the same way. */
void isob_canary_guard(unsigned char *region);

#endif
