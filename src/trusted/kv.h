/* The key-value store of the kv benchmark: a hash table that lives in the
 * trusted heap and is reached only through the ISOB_ENTRY_KV_* entries
 * (message layout in include/isobench/trusted.h).
 *
 * Header-only and freestanding, like the rest of src/trusted/: it is
 * included by trusted.c, so every build of the trusted component (native,
 * and wasm32 without any libc) carries the store.  No libc, no system
 * calls, no globals; all state is in the heap, at ISOB_KV_OFFSET.
 *
 * Layout of the store, from ISOB_KV_OFFSET to the end of the heap:
 *
 *     struct kv_store   counters and the free list heads, 64-byte aligned
 *     table             open addressing with linear probing; one 8-byte
 *                       slot per KV_BYTES_PER_SLOT bytes of the store:
 *                       high 32 bits the key's hash tag, low 32 bits a
 *                       reference to the record (0: empty)
 *     arena             records, bump-allocated in 16-byte units:
 *                       [key length: 1][value length: 3, little-endian]
 *                       [key][value]
 *
 * The tag in the slot lets a probe skip foreign keys without touching
 * their records, and it alone decides a key's home slot, so deleting can
 * shift entries back (no tombstones) without rereading records.  Freed
 * records go to one free list per size class; an overwrite with a value of
 * the same class happens in place.  Classes are exact (16-byte steps) up
 * to 4 KiB, where the benchmark's records and most memcached items are, and
 * four per doubling above: a record of up to 1 MiB is rounded up by at
 * most a quarter, and a free list keeps records of one size, so any freed
 * record fits any later record of its class.
 *
 * Sizing: the table is fixed at init from the heap size, so the store never
 * resizes.  With 12-byte keys and 64-byte values a record takes 80 bytes
 * and a heap from isob_kv_heap_size() fills to a load of about 0.7:
 * roughly 1.43 bytes of store per byte of values. */
#ifndef ISOB_TRUSTED_KV_H
#define ISOB_TRUSTED_KV_H

#include <stddef.h>
#include <stdint.h>

#include "isobench/trusted.h"

/* Error values, as negative errno numbers (no errno.h in a freestanding build). */
#define KV_ENOENT 2
#define KV_EINVAL 22
#define KV_ENOSPC 28
#define KV_EMSGSIZE 90

#define KV_ALIGN 64u           /* alignment of the header, table and arena */
#define KV_UNIT 16u            /* records are allocated in multiples of this */
#define KV_HDR 4u              /* record header bytes: key length, value length */
#define KV_BYTES_PER_SLOT 64u  /* the table takes 1/8 of the store: load ~0.7 at 80-byte records */
#define KV_LOAD_NUM 7u         /* the table refuses new keys beyond 7/8 full, */
#define KV_LOAD_DEN 8u         /* where linear probing would start to crawl */
/* Size classes (kv_class): records of up to KV_EXACT_UNITS units have a
 * class of their own size; larger ones KV_STEPS classes per doubling, up to
 * the largest record, below 2^21 units.  Index 0 is unused. */
#define KV_EXACT_UNITS 256u    /* 4 KiB */
#define KV_EXACT_LOG 8u        /* log2(KV_EXACT_UNITS) */
#define KV_STEPS 4u
#define KV_MAX_UNITS_LOG 21u   /* every record has fewer than 2^21 units */
#define KV_CLASSES (KV_EXACT_UNITS + 1 + KV_STEPS * (KV_MAX_UNITS_LOG - KV_EXACT_LOG))
/* References are 32-bit counts of units, plus one (0 is "none"). */
#define KV_MAX_ARENA ((size_t)0xfffffffeu * KV_UNIT)

struct kv_store {
    uint32_t slots;      /* table slots; 0 when the heap has no room for a store */
    uint32_t items;      /* live entries */
    uint32_t max_items;  /* slots * 7/8 */
    uint32_t reserved;
    size_t table_off;    /* offsets from the heap's start */
    size_t arena_off;
    size_t arena_size;   /* bytes of the arena */
    size_t arena_used;   /* bump pointer: bytes ever handed out (high-water mark) */
    uint32_t free_head[KV_CLASSES]; /* per size class: first free record's reference */
};

/* One read of a field of the shared message.  The untrusted side can
 * change the message while an entry runs, so each entry copies every
 * length and argument it uses into a local with one volatile load, and
 * checks and uses only the copy: a plain load could be repeated by the
 * compiler, and the second one would see a value nobody checked. */
#define ISOB_MSG_ONCE(field) (*(const volatile __typeof__(field) *)&(field))

/* Unaligned, aliasing-safe 8-byte access: keys and values sit at any byte
 * offset, and x86 and wasm32 both load them unaligned at full speed. */
typedef uint64_t kv_u64u __attribute__((aligned(1), may_alias));

/* An empty asm that claims to read the pointer and memory: it keeps the
 * compiler from recognising a copy or clear loop and replacing it by a
 * call to memcpy or memset, which a freestanding wasm32 build has not got. */
#define KV_NO_IDIOM(p) __asm__ __volatile__("" : : "r"(p) : "memory")

static inline size_t kv_align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

static inline size_t kv_header_end(void)
{
    return kv_align_up(ISOB_KV_OFFSET + sizeof(struct kv_store), KV_ALIGN);
}

/* floor(log2(v)) for v > 0. */
static inline uint32_t kv_log2(uint32_t v)
{
    return 31u - (uint32_t)__builtin_clz(v);
}

/* Units of a class's records (a record of n units is rounded up to this):
 * n itself up to KV_EXACT_UNITS, else n rounded up to a multiple of a
 * quarter of the power of two below it. */
static inline uint32_t kv_class_units(uint32_t n)
{
    if (n <= KV_EXACT_UNITS)
        return n;
    uint32_t step = 1u << (kv_log2(n - 1) - 2);
    return (n + step - 1) & ~(step - 1);
}

/* The free list of records of n units (n as kv_class_units returns it):
 * n itself up to KV_EXACT_UNITS; above, the classes (2^b, 2^(b+1)] of each
 * b >= KV_EXACT_LOG follow in order, KV_STEPS of them per b. */
static inline uint32_t kv_class(uint32_t n)
{
    if (n <= KV_EXACT_UNITS)
        return n;
    uint32_t b = kv_log2(n - 1);
    uint32_t quarter = n >> (b - 2);  /* 5..8: which quarter above 2^b */
    return KV_EXACT_UNITS + 1 + (b - KV_EXACT_LOG) * KV_STEPS + (quarter - 5);
}

/* Units allocated for a record with these lengths. */
static inline uint32_t kv_rec_units(uint32_t klen, uint32_t vlen)
{
    return kv_class_units((KV_HDR + klen + vlen + KV_UNIT - 1) / KV_UNIT);
}

/* Heap bytes (for isob_trusted_init) that hold `entries` entries of these
 * key and value lengths: enough table slots to stay within the load limit
 * and enough arena for every record, laid out as kv_init will lay them.
 * Used by the untrusted side to size the compartment. */
static inline size_t isob_kv_heap_size(size_t entries, size_t klen, size_t vlen)
{
    size_t rec = (size_t)kv_rec_units((uint32_t)klen, (uint32_t)vlen) * KV_UNIT;
    /* Slots to keep the load at or below 7/8 once every entry is in. */
    size_t slots = entries * KV_LOAD_DEN / KV_LOAD_NUM + 2;
    size_t by_slots = slots * KV_BYTES_PER_SLOT;
    /* The arena gets what the table leaves: 7/8 of the rest, less alignment. */
    size_t by_arena = (entries * rec + KV_ALIGN) / 7 * 8 + KV_BYTES_PER_SLOT;
    size_t rest = kv_align_up(by_slots > by_arena ? by_slots : by_arena, KV_BYTES_PER_SLOT);
    return kv_header_end() + rest + KV_ALIGN;
}

static inline struct kv_store *kv_store_of(struct isob_trusted *t)
{
    if (t->heap_size < kv_header_end())
        return 0;
    struct kv_store *s = (struct kv_store *)(void *)(t->heap + ISOB_KV_OFFSET);
    return s->slots ? s : 0;
}

static inline uint64_t *kv_table(struct isob_trusted *t, struct kv_store *s)
{
    return (uint64_t *)(void *)(t->heap + s->table_off);
}

static inline unsigned char *kv_rec(struct isob_trusted *t, struct kv_store *s, uint32_t ref)
{
    return t->heap + s->arena_off + (size_t)(ref - 1) * KV_UNIT;
}

static inline void kv_clear_table(uint64_t *tab, uint32_t slots)
{
    for (uint32_t i = 0; i < slots; i++) {
        tab[i] = 0;
        KV_NO_IDIOM(tab);
    }
}

static inline void kv_clear_free_lists(struct kv_store *s)
{
    for (uint32_t c = 0; c < KV_CLASSES; c++) {
        s->free_head[c] = 0;
        KV_NO_IDIOM(s);
    }
}

/* Lay the store out over heap[ISOB_KV_OFFSET..size).  A heap too small
 * for even a header leaves no store: sets then fail with -ENOSPC. */
static inline void kv_init(unsigned char *heap, size_t size)
{
    size_t start = kv_header_end();
    if (size < start)
        return;
    struct kv_store *s = (struct kv_store *)(void *)(heap + ISOB_KV_OFFSET);
    s->slots = 0;
    if (size < start + 2 * KV_ALIGN)
        return;
    size_t rest = size - start;
    size_t slots = rest / KV_BYTES_PER_SLOT;
    if (slots > 0xffffffffu)
        slots = 0xffffffffu;
    s->items = 0;
    s->max_items = (uint32_t)((uint64_t)slots * KV_LOAD_NUM / KV_LOAD_DEN);
    s->reserved = 0;
    s->table_off = start;
    s->arena_off = kv_align_up(start + slots * sizeof(uint64_t), KV_ALIGN);
    s->arena_size = s->arena_off < size ? size - s->arena_off : 0;
    if (s->arena_size > KV_MAX_ARENA)
        s->arena_size = KV_MAX_ARENA;
    s->arena_used = 0;
    kv_clear_free_lists(s);
    kv_clear_table((uint64_t *)(void *)(heap + start), (uint32_t)slots);
    s->slots = (uint32_t)slots;
}

/* A 64-bit hash of the key, eight bytes at a time; murmur3's finaliser
 * spreads the bits so that both the tag and the home slot are uniform. */
static inline uint64_t kv_hash(const unsigned char *k, uint32_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)n * 0xff51afd7ed558ccdull);
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = *(const kv_u64u *)(const void *)(k + i);
        h ^= w * 0xc4ceb9fe1a85ec53ull;
        h = (h << 27 | h >> 37) * 0x9e3779b97f4a7c15ull;
    }
    uint64_t w = 0;
    for (uint32_t sh = 0; i < n; i++, sh += 8)
        w |= (uint64_t)k[i] << sh;
    h ^= w * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

/* Home slot of a tag: the tag scaled onto [0, slots) by a multiply and a
 * shift, which takes any table size (no power of two needed). */
static inline uint32_t kv_home(uint32_t tag, uint32_t slots)
{
    return (uint32_t)(((uint64_t)tag * slots) >> 32);
}

static inline int kv_equal(const unsigned char *a, const unsigned char *b, uint32_t n)
{
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        if (*(const kv_u64u *)(const void *)(a + i) != *(const kv_u64u *)(const void *)(b + i))
            return 0;
    for (; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

static inline void kv_copy(unsigned char *dst, const unsigned char *src, uint32_t n)
{
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        *(kv_u64u *)(void *)(dst + i) = *(const kv_u64u *)(const void *)(src + i);
        KV_NO_IDIOM(dst);
    }
    for (; i < n; i++) {
        dst[i] = src[i];
        KV_NO_IDIOM(dst);
    }
}

/* Look the key up.  Returns the record's reference and its slot in *pos,
 * or 0 with *pos at the empty slot where the key would go. */
static inline uint32_t kv_find(struct isob_trusted *t, struct kv_store *s, const unsigned char *key,
                               uint32_t klen, uint32_t tag, uint32_t *pos)
{
    uint64_t *tab = kv_table(t, s);
    uint32_t i = kv_home(tag, s->slots);
    for (;;) {
        uint64_t e = tab[i];
        uint32_t ref = (uint32_t)e;
        if (ref == 0) {
            *pos = i;
            return 0;
        }
        if ((uint32_t)(e >> 32) == tag) {
            const unsigned char *r = kv_rec(t, s, ref);
            if (r[0] == klen && kv_equal(r + KV_HDR, key, klen)) {
                *pos = i;
                return ref;
            }
        }
        i = i + 1 == s->slots ? 0 : i + 1;
    }
}

/* A record of `units` units: from its class's free list, else from the
 * bump pointer.  0 when the arena is exhausted. */
static inline uint32_t kv_alloc(struct isob_trusted *t, struct kv_store *s, uint32_t units)
{
    uint32_t c = kv_class(units);
    uint32_t ref = s->free_head[c];
    if (ref) {
        s->free_head[c] = *(const uint32_t *)(const void *)kv_rec(t, s, ref);
        return ref;
    }
    size_t bytes = (size_t)units * KV_UNIT;
    if (s->arena_size - s->arena_used < bytes)
        return 0;
    ref = (uint32_t)(s->arena_used / KV_UNIT) + 1;
    s->arena_used += bytes;
    return ref;
}

static inline void kv_free(struct isob_trusted *t, struct kv_store *s, uint32_t ref, uint32_t units)
{
    uint32_t c = kv_class(units);
    *(uint32_t *)(void *)kv_rec(t, s, ref) = s->free_head[c];
    s->free_head[c] = ref;
}

static inline void kv_write(unsigned char *r, const unsigned char *key, uint32_t klen,
                            const unsigned char *val, uint32_t vlen)
{
    r[0] = (unsigned char)klen;
    r[1] = (unsigned char)vlen;
    r[2] = (unsigned char)(vlen >> 8);
    r[3] = (unsigned char)(vlen >> 16);
    kv_copy(r + KV_HDR, key, klen);
    kv_copy(r + KV_HDR + klen, val, vlen);
}

static inline uint32_t kv_vlen(const unsigned char *r)
{
    return (uint32_t)r[1] | (uint32_t)r[2] << 8 | (uint32_t)r[3] << 16;
}

/* Remove slot i; later entries of the same probe run move back into the
 * hole unless their home lies cyclically within (i, j], so that every
 * remaining key is still reachable from its home without tombstones. */
static inline void kv_remove_slot(uint64_t *tab, uint32_t slots, uint32_t i)
{
    uint32_t j = i;
    for (;;) {
        j = j + 1 == slots ? 0 : j + 1;
        uint64_t e = tab[j];
        if ((uint32_t)e == 0)
            break;
        uint32_t k = kv_home((uint32_t)(e >> 32), slots);
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays)
            continue;
        tab[i] = e;
        i = j;
    }
    tab[i] = 0;
}

/* The key of a request, checked: 1..ISOB_KV_MAX_KEY bytes, and with
 * `extra` bytes after it within len, which is within cap.  klen and len
 * are the entry's copies of the message's fields. */
static inline int kv_key_ok(int64_t klen, uint32_t len, size_t cap, uint64_t extra)
{
    if (klen < 1 || klen > ISOB_KV_MAX_KEY || len > cap)
        return 0;
    return (uint64_t)klen + extra <= len;
}

static inline long kv_set(struct isob_trusted *t, struct isob_msg *msg, size_t cap)
{
    int64_t klen64 = ISOB_MSG_ONCE(msg->arg[0]), vlen64 = ISOB_MSG_ONCE(msg->arg[1]);
    uint32_t len = ISOB_MSG_ONCE(msg->len);
    if (vlen64 < 0 || vlen64 > ISOB_KV_MAX_VALUE || !kv_key_ok(klen64, len, cap, (uint64_t)vlen64))
        return -KV_EINVAL;
    struct kv_store *s = kv_store_of(t);
    if (!s)
        return -KV_ENOSPC;
    uint32_t klen = (uint32_t)klen64, vlen = (uint32_t)vlen64;
    const unsigned char *key = msg->data, *val = msg->data + klen;
    uint32_t tag = (uint32_t)(kv_hash(key, klen) >> 32), pos;
    uint32_t units = kv_rec_units(klen, vlen);
    uint32_t ref = kv_find(t, s, key, klen, tag, &pos);
    if (ref) {
        unsigned char *r = kv_rec(t, s, ref);
        uint32_t old_units = kv_rec_units(klen, kv_vlen(r));
        if (old_units == units) {
            kv_write(r, key, klen, val, vlen);
            return 0;
        }
        /* A failed overwrite leaves the old value in place. */
        uint32_t nref = kv_alloc(t, s, units);
        if (!nref)
            return -KV_ENOSPC;
        kv_write(kv_rec(t, s, nref), key, klen, val, vlen);
        kv_table(t, s)[pos] = (uint64_t)tag << 32 | nref;
        kv_free(t, s, ref, old_units);
        return 0;
    }
    if (s->items >= s->max_items)
        return -KV_ENOSPC;
    ref = kv_alloc(t, s, units);
    if (!ref)
        return -KV_ENOSPC;
    kv_write(kv_rec(t, s, ref), key, klen, val, vlen);
    kv_table(t, s)[pos] = (uint64_t)tag << 32 | ref;
    s->items++;
    return 0;
}

static inline long kv_get(struct isob_trusted *t, struct isob_msg *msg, size_t cap)
{
    int64_t klen64 = ISOB_MSG_ONCE(msg->arg[0]);
    if (!kv_key_ok(klen64, ISOB_MSG_ONCE(msg->len), cap, 0))
        return -KV_EINVAL;
    struct kv_store *s = kv_store_of(t);
    if (!s)
        return -KV_ENOENT;
    uint32_t klen = (uint32_t)klen64, pos;
    uint32_t tag = (uint32_t)(kv_hash(msg->data, klen) >> 32);
    uint32_t ref = kv_find(t, s, msg->data, klen, tag, &pos);
    if (!ref)
        return -KV_ENOENT;
    const unsigned char *r = kv_rec(t, s, ref);
    uint32_t vlen = kv_vlen(r);
    if (vlen > cap)
        return -KV_EMSGSIZE;
    kv_copy(msg->data, r + KV_HDR + klen, vlen);
    msg->len = vlen;
    msg->arg[1] = vlen;
    return (long)vlen;
}

static inline long kv_delete(struct isob_trusted *t, struct isob_msg *msg, size_t cap)
{
    int64_t klen64 = ISOB_MSG_ONCE(msg->arg[0]);
    if (!kv_key_ok(klen64, ISOB_MSG_ONCE(msg->len), cap, 0))
        return -KV_EINVAL;
    struct kv_store *s = kv_store_of(t);
    if (!s)
        return -KV_ENOENT;
    uint32_t klen = (uint32_t)klen64, pos;
    uint32_t tag = (uint32_t)(kv_hash(msg->data, klen) >> 32);
    uint32_t ref = kv_find(t, s, msg->data, klen, tag, &pos);
    if (!ref)
        return -KV_ENOENT;
    kv_free(t, s, ref, kv_rec_units(klen, kv_vlen(kv_rec(t, s, ref))));
    kv_remove_slot(kv_table(t, s), s->slots, pos);
    s->items--;
    return 0;
}

static inline long kv_flush(struct isob_trusted *t)
{
    struct kv_store *s = kv_store_of(t);
    if (!s)
        return 0;
    kv_clear_table(kv_table(t, s), s->slots);
    kv_clear_free_lists(s);
    s->items = 0;
    s->arena_used = 0;
    return 0;
}

static inline long kv_stats(struct isob_trusted *t, struct isob_msg *msg)
{
    struct kv_store *s = kv_store_of(t);
    msg->arg[2] = (int64_t)t->heap_size;
    if (!s) {
        msg->arg[0] = msg->arg[1] = msg->arg[3] = 0;
        return 0;
    }
    /* Bytes in use: the header, the whole table (fixed at init) and the
     * arena up to its high-water mark; the state page and the secret's page
     * before ISOB_KV_OFFSET belong to the compartment, not to the store. */
    msg->arg[0] = s->items;
    msg->arg[1] = (int64_t)(s->arena_off - ISOB_KV_OFFSET + s->arena_used);
    msg->arg[3] = s->slots;
    return (long)s->items;
}

#endif
