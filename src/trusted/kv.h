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
 *                       [expiry: 4][cas unique: 8][key][value]
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
 * Expiry and cas (the memcached protocol's): the store has a clock that the
 * untrusted side sets (ISOB_ENTRY_KV_CLOCK; no system calls here), and a
 * record whose expiry is non-zero and not after it is gone for every
 * entry.  Such records are unlinked when a lookup meets them, and reclaimed
 * by the eviction scan.  Every successful store takes the next cas unique
 * from a counter that nothing resets, as memcached's.
 *
 * Eviction, only once the untrusted side asked for it (the kv benchmark
 * never does, and must see -ENOSPC): a store that finds no free record of
 * its size class, or no free slot, scans the table from a rotating hand
 * for at most KV_EVICT_SCAN slots, reclaims the expired records it meets
 * and evicts the first live record of that class (of any class when a slot
 * is what is missing).  It is a clock sweep without reference bits, not
 * memcached's LRU: the store keeps no access order, so that a get never
 * writes to it.  A class with no record within the scan refuses the store
 * with -ENOSPC, as a memcached slab class with nothing to evict does.
 *
 * Sizing: the table is fixed at init from the heap size, so the store never
 * resizes.  With 12-byte keys and 64-byte values a record takes 96 bytes
 * (16 of header, rounded up to 16-byte units) and a heap from
 * isob_kv_heap_size() fills to a load of about 0.7: roughly 1.68 bytes of
 * store per byte of values. */
#ifndef ISOB_TRUSTED_KV_H
#define ISOB_TRUSTED_KV_H

#include <stddef.h>
#include <stdint.h>

#include "isobench/trusted.h"

/* Error values, as negative errno numbers (no errno.h in a freestanding build). */
#define KV_ENOENT 2
#define KV_EEXIST 17
#define KV_EINVAL 22
#define KV_ENOSPC 28
#define KV_EDOM 33
#define KV_EMSGSIZE 90

#define KV_ALIGN 64u           /* alignment of the header, table and arena */
#define KV_UNIT 16u            /* records are allocated in multiples of this */
#define KV_HDR 16u             /* record header bytes: lengths, expiry, cas unique */
#define KV_EXPIRY_AT 4u        /* where a record's expiry (uint32) sits in its header */
#define KV_CAS_AT 8u           /* where its cas unique (uint64) sits */
#define KV_STATS_DATA 24u      /* bytes of counters KV_STATS leaves in data */
#define KV_EVICT_SCAN 4096u    /* slots one eviction looks at, at most: a bound on the
                                * cost of a store into a full store */
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
    uint64_t last_cas;   /* the cas unique handed out last (never reset) */
    uint32_t now;        /* the clock (KV_CLOCK): expiries at or before it are past */
    uint32_t evict;      /* 1: a store with no room evicts (KV_CLOCK); 0: -ENOSPC */
    uint32_t hand;       /* the slot the next eviction scan starts at */
    uint32_t reserved2;
    uint64_t evictions;  /* live records evicted to make room */
    uint64_t reclaimed;  /* expired records the eviction scan freed */
    uint32_t free_head[KV_CLASSES]; /* per size class: first free record's reference */
};

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
    s->last_cas = 0;
    s->now = 0;
    s->evict = 0;
    s->hand = 0;
    s->reserved2 = 0;
    s->evictions = 0;
    s->reclaimed = 0;
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
                            const unsigned char *val, uint32_t vlen, uint32_t expiry, uint64_t cas)
{
    r[0] = (unsigned char)klen;
    r[1] = (unsigned char)vlen;
    r[2] = (unsigned char)(vlen >> 8);
    r[3] = (unsigned char)(vlen >> 16);
    *(uint32_t *)(void *)(r + KV_EXPIRY_AT) = expiry;
    *(uint64_t *)(void *)(r + KV_CAS_AT) = cas;
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

/* --- expiry, cas and eviction: the memcached protocol's state ------------- */

/* A request's lengths, read from the message once: the untrusted side may
 * rewrite the shared buffer while the store works, so every check and
 * every use must see the same values. */
struct kv_req {
    const unsigned char *key, *val;
    uint32_t klen, vlen, tag;
};

/* Fill q from msg: a key of 1..ISOB_KV_MAX_KEY bytes and (with has_value)
 * a value of at most ISOB_KV_MAX_VALUE bytes, both within len and len
 * within cap.  0, or -EINVAL. */
static inline long kv_req_read(const struct isob_msg *msg, size_t cap, int has_value,
                               struct kv_req *q)
{
    int64_t klen = ISOB_MSG_ONCE(msg->arg[0]);
    int64_t vlen = has_value ? ISOB_MSG_ONCE(msg->arg[1]) : 0;
    uint32_t len = ISOB_MSG_ONCE(msg->len);
    if (klen < 1 || klen > ISOB_KV_MAX_KEY || vlen < 0 || vlen > ISOB_KV_MAX_VALUE || len > cap ||
        (uint64_t)klen + (uint64_t)vlen > len)
        return -KV_EINVAL;
    q->klen = (uint32_t)klen;
    q->vlen = (uint32_t)vlen;
    q->key = msg->data;
    q->val = msg->data + q->klen;
    q->tag = (uint32_t)(kv_hash(q->key, q->klen) >> 32);
    return 0;
}

/* An expiry argument: 0 (never) or a time of the store's clock. */
static inline long kv_expiry_arg(const struct isob_msg *msg, uint32_t *out)
{
    int64_t e = ISOB_MSG_ONCE(msg->arg[2]);
    if (e < 0 || e > 0xffffffffll)
        return -KV_EINVAL;
    *out = (uint32_t)e;
    return 0;
}

static inline uint32_t kv_expiry(const unsigned char *r)
{
    return *(const uint32_t *)(const void *)(r + KV_EXPIRY_AT);
}

static inline uint64_t kv_cas(const unsigned char *r)
{
    return *(const uint64_t *)(const void *)(r + KV_CAS_AT);
}

/* A record is gone once its expiry is set and not after the clock. */
static inline int kv_expired(const struct kv_store *s, const unsigned char *r)
{
    uint32_t e = kv_expiry(r);
    return e != 0 && e <= s->now;
}

static inline uint32_t kv_units_of(const unsigned char *r)
{
    return kv_rec_units(r[0], kv_vlen(r));
}

/* Remove the entry in slot pos, whose record is ref, and free the record. */
static inline void kv_unlink(struct isob_trusted *t, struct kv_store *s, uint32_t ref, uint32_t pos)
{
    kv_free(t, s, ref, kv_units_of(kv_rec(t, s, ref)));
    kv_remove_slot(kv_table(t, s), s->slots, pos);
    s->items--;
}

/* kv_find for a live record: an expired one is unlinked on the way and the
 * key reported absent, with *pos where it would go. */
static inline uint32_t kv_lookup(struct isob_trusted *t, struct kv_store *s, const struct kv_req *q,
                                 uint32_t *pos)
{
    uint32_t ref = kv_find(t, s, q->key, q->klen, q->tag, pos);
    if (ref && kv_expired(s, kv_rec(t, s, ref))) {
        kv_unlink(t, s, ref, *pos);
        ref = kv_find(t, s, q->key, q->klen, q->tag, pos);
    }
    return ref;
}

/* kv_lookup with the store found first: the live record of q's key, or 0
 * when there is no store or no such record (every caller answers both as
 * -KV_ENOENT). */
static inline uint32_t kv_live(struct isob_trusted *t, const struct kv_req *q,
                               struct kv_store **s, uint32_t *pos)
{
    *s = kv_store_of(t);
    return *s ? kv_lookup(t, *s, q, pos) : 0;
}

/* Make room by the clock sweep described at the top: look at up to
 * KV_EVICT_SCAN slots from the hand, reclaim every expired record met, and
 * stop at the first record of `units` units (of any size when units is 0)
 * other than `keep`, evicting it if it is live.  1 when such a record was
 * freed.  Slots shift back as entries are removed, so a slot is looked at
 * again after a removal. */
static inline int kv_make_room(struct isob_trusted *t, struct kv_store *s, uint32_t units,
                               uint32_t keep)
{
    uint64_t *tab = kv_table(t, s);
    uint32_t i = s->hand < s->slots ? s->hand : 0;
    for (uint32_t n = 0; n < KV_EVICT_SCAN && n < s->slots; n++) {
        uint32_t ref = (uint32_t)tab[i];
        if (ref && ref != keep) {
            const unsigned char *r = kv_rec(t, s, ref);
            int fits = units == 0 || kv_units_of(r) == units;
            int expired = kv_expired(s, r);
            if (fits || expired) {
                kv_unlink(t, s, ref, i);
                if (expired)
                    s->reclaimed++;
                else
                    s->evictions++;
                if (fits) {
                    s->hand = i;
                    return 1;
                }
                continue;
            }
        }
        i = i + 1 == s->slots ? 0 : i + 1;
    }
    s->hand = i;
    return 0;
}

/* A record of `units` units, making room when the store may evict.  After
 * room was made, entries may have moved: the caller finds its key again
 * (*moved is set). */
static inline uint32_t kv_alloc_room(struct isob_trusted *t, struct kv_store *s, uint32_t units,
                                     uint32_t keep, int *moved)
{
    uint32_t ref = kv_alloc(t, s, units);
    if (ref || !s->evict)
        return ref;
    *moved = 1;
    return kv_make_room(t, s, units, keep) ? kv_alloc(t, s, units) : 0;
}

/* What a store tells the caller: its result, and the new cas unique in
 * arg[3] (0 when nothing was stored). */
static inline long kv_stored(struct isob_msg *msg, long rc, uint64_t cas)
{
    msg->arg[3] = (int64_t)cas;
    return rc;
}

/* KV_SET, KV_ADD, KV_REPLACE and KV_CAS (trusted.h): one store with the
 * memcached command's condition. */
static inline long kv_store_op(struct isob_trusted *t, struct isob_msg *msg, size_t cap,
                               unsigned entry)
{
    struct kv_req q;
    uint32_t expiry;
    uint64_t want_cas = (uint64_t)ISOB_MSG_ONCE(msg->arg[3]);
    if (kv_req_read(msg, cap, 1, &q) != 0 || kv_expiry_arg(msg, &expiry) != 0)
        return -KV_EINVAL;
    struct kv_store *s = kv_store_of(t);
    if (!s)
        return kv_stored(msg, -KV_ENOSPC, 0);
    uint32_t pos;
    int moved = 0;
    uint32_t ref = kv_lookup(t, s, &q, &pos);
    if (entry == ISOB_ENTRY_KV_ADD && ref)
        return kv_stored(msg, -KV_EEXIST, 0);
    if ((entry == ISOB_ENTRY_KV_REPLACE || entry == ISOB_ENTRY_KV_CAS) && !ref)
        return kv_stored(msg, -KV_ENOENT, 0);
    if (entry == ISOB_ENTRY_KV_CAS && kv_cas(kv_rec(t, s, ref)) != want_cas)
        return kv_stored(msg, -KV_EEXIST, 0);
    uint64_t cas = s->last_cas + 1;
    uint32_t units = kv_rec_units(q.klen, q.vlen);
    if (ref) {
        uint32_t old_units = kv_units_of(kv_rec(t, s, ref));
        if (old_units == units) {
            kv_write(kv_rec(t, s, ref), q.key, q.klen, q.val, q.vlen, expiry, cas);
            s->last_cas = cas;
            return kv_stored(msg, 0, cas);
        }
        /* A failed overwrite leaves the old value in place. */
        uint32_t nref = kv_alloc_room(t, s, units, ref, &moved);
        if (!nref)
            return kv_stored(msg, -KV_ENOSPC, 0);
        if (moved)
            kv_find(t, s, q.key, q.klen, q.tag, &pos);
        kv_write(kv_rec(t, s, nref), q.key, q.klen, q.val, q.vlen, expiry, cas);
        kv_table(t, s)[pos] = (uint64_t)q.tag << 32 | nref;
        kv_free(t, s, ref, old_units);
    } else {
        if (s->items >= s->max_items) {
            if (!s->evict || !kv_make_room(t, s, 0, 0))
                return kv_stored(msg, -KV_ENOSPC, 0);
            moved = 1;
        }
        ref = kv_alloc_room(t, s, units, 0, &moved);
        if (!ref)
            return kv_stored(msg, -KV_ENOSPC, 0);
        if (moved)
            kv_find(t, s, q.key, q.klen, q.tag, &pos);
        kv_write(kv_rec(t, s, ref), q.key, q.klen, q.val, q.vlen, expiry, cas);
        kv_table(t, s)[pos] = (uint64_t)q.tag << 32 | ref;
        s->items++;
    }
    s->last_cas = cas;
    return kv_stored(msg, 0, cas);
}

/* KV_GET, and KV_GAT (touch = 1: the expiry in arg[2] is set first). */
static inline long kv_get(struct isob_trusted *t, struct isob_msg *msg, size_t cap, int touch)
{
    struct kv_req q;
    uint32_t expiry = 0;
    if (kv_req_read(msg, cap, 0, &q) != 0 || (touch && kv_expiry_arg(msg, &expiry) != 0))
        return -KV_EINVAL;
    struct kv_store *s;
    uint32_t pos;
    uint32_t ref = kv_live(t, &q, &s, &pos);
    if (!ref)
        return -KV_ENOENT;
    unsigned char *r = kv_rec(t, s, ref);
    uint32_t vlen = kv_vlen(r);
    if (vlen > cap)
        return -KV_EMSGSIZE;
    if (touch)
        *(uint32_t *)(void *)(r + KV_EXPIRY_AT) = expiry;
    kv_copy(msg->data, r + KV_HDR + q.klen, vlen);
    msg->len = vlen;
    msg->arg[1] = vlen;
    msg->arg[2] = kv_expiry(r);
    msg->arg[3] = (int64_t)kv_cas(r);
    return (long)vlen;
}

static inline long kv_touch(struct isob_trusted *t, struct isob_msg *msg, size_t cap)
{
    struct kv_req q;
    uint32_t expiry;
    if (kv_req_read(msg, cap, 0, &q) != 0 || kv_expiry_arg(msg, &expiry) != 0)
        return -KV_EINVAL;
    struct kv_store *s;
    uint32_t pos;
    uint32_t ref = kv_live(t, &q, &s, &pos);
    if (!ref)
        return -KV_ENOENT;
    *(uint32_t *)(void *)(kv_rec(t, s, ref) + KV_EXPIRY_AT) = expiry;
    return 0;
}

/* KV_DELETE, and KV_DELETE_CAS (with_cas = 1: only a record whose cas
 * unique is arg[3]). */
static inline long kv_delete(struct isob_trusted *t, struct isob_msg *msg, size_t cap, int with_cas)
{
    struct kv_req q;
    uint64_t want_cas = with_cas ? (uint64_t)ISOB_MSG_ONCE(msg->arg[3]) : 0;
    if (kv_req_read(msg, cap, 0, &q) != 0)
        return -KV_EINVAL;
    struct kv_store *s;
    uint32_t pos;
    uint32_t ref = kv_live(t, &q, &s, &pos);
    if (!ref)
        return -KV_ENOENT;
    if (with_cas && kv_cas(kv_rec(t, s, ref)) != want_cas)
        return -KV_EEXIST;
    kv_unlink(t, s, ref, pos);
    return 0;
}

/* --- incr, decr, append, prepend: changes to a value in place ------------ */

/* The bytes a value starts with that these entries keep as they are (the
 * protocol's flags): at most this many. */
#define KV_PREFIX_MAX 64u

static inline int kv_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* The number at v[0..n), read as memcached's incr and decr read a value:
 * optional leading white space, an optional sign, at least one decimal
 * digit, then white space or the value's end; no overflow past 2^64-1, and
 * a '-' only where the negated number is still below 2^63 (so "-0" is 0
 * and "-5" is refused).  0, or -1 for anything else. */
static inline int kv_parse_number(const unsigned char *v, uint32_t n, uint64_t *out)
{
    uint32_t i = 0;
    while (i < n && kv_space(v[i]))
        i++;
    int neg = 0;
    if (i < n && (v[i] == '+' || v[i] == '-')) {
        neg = v[i] == '-';
        i++;
    }
    uint32_t start = i;
    uint64_t x = 0;
    for (; i < n && v[i] >= '0' && v[i] <= '9'; i++) {
        uint64_t d = (uint64_t)(v[i] - '0');
        if (x > (0xffffffffffffffffull - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    if (i == start || (i < n && !kv_space(v[i])))
        return -1;
    if (neg) {
        x = 0 - x;
        if (x >> 63)
            return -1;
    }
    *out = x;
    return 0;
}

/* v in decimal at d (room for 20 digits); returns the count. */
static inline uint32_t kv_format_number(uint64_t v, unsigned char *d)
{
    unsigned char tmp[20];
    uint32_t n = 0;
    do {
        tmp[n++] = (unsigned char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (uint32_t i = 0; i < n; i++) {
        d[i] = tmp[n - 1 - i];
        KV_NO_IDIOM(d);
    }
    return n;
}

static inline void kv_set_vlen(unsigned char *r, uint32_t vlen)
{
    r[1] = (unsigned char)vlen;
    r[2] = (unsigned char)(vlen >> 8);
    r[3] = (unsigned char)(vlen >> 16);
}

/* dst[0..n) = src[0..n) where dst is after src in the same record: copied
 * from the end, so that the overlap is read before it is written. */
static inline void kv_copy_up(unsigned char *dst, const unsigned char *src, uint32_t n)
{
    while (n) {
        n--;
        dst[n] = src[n];
        KV_NO_IDIOM(dst);
    }
}

/* Room for the value of record ref (key q, in slot *pos) to become vlen
 * bytes: ref itself when its size class holds that many, else a new record
 * with ref's key and expiry, ref left as it is (the caller copies the value
 * over, then calls kv_resize_done).  0 when the store has no room. */
static inline uint32_t kv_resize(struct isob_trusted *t, struct kv_store *s, const struct kv_req *q,
                                 uint32_t ref, uint32_t *pos, uint32_t vlen)
{
    uint32_t units = kv_rec_units(q->klen, vlen);
    if (units == kv_units_of(kv_rec(t, s, ref)))
        return ref;
    int moved = 0;
    uint32_t nref = kv_alloc_room(t, s, units, ref, &moved);
    if (!nref)
        return 0;
    const unsigned char *r = kv_rec(t, s, ref);
    /* The record's own key: the message's may have changed since. */
    if (moved)
        kv_find(t, s, r + KV_HDR, q->klen, q->tag, pos);
    unsigned char *n = kv_rec(t, s, nref);
    n[0] = (unsigned char)q->klen;
    *(uint32_t *)(void *)(n + KV_EXPIRY_AT) = kv_expiry(r);
    kv_copy(n + KV_HDR, r + KV_HDR, q->klen);
    return nref;
}

/* The value of nref is complete: give it its length and a new cas unique,
 * and when it replaces ref, put it in ref's slot and free ref. */
static inline uint64_t kv_resize_done(struct isob_trusted *t, struct kv_store *s,
                                      const struct kv_req *q, uint32_t ref, uint32_t nref,
                                      uint32_t pos, uint32_t vlen)
{
    unsigned char *n = kv_rec(t, s, nref);
    uint64_t cas = s->last_cas + 1;
    kv_set_vlen(n, vlen);
    *(uint64_t *)(void *)(n + KV_CAS_AT) = cas;
    s->last_cas = cas;
    if (nref != ref) {
        kv_free(t, s, ref, kv_units_of(kv_rec(t, s, ref)));
        kv_table(t, s)[pos] = (uint64_t)q->tag << 32 | nref;
    }
    return cas;
}

/* KV_INCR (trusted.h): the number after the value's first arg[2] / 2 bytes,
 * plus arg[1], or (arg[2] odd) minus arg[1] and at least 0, as memcached's
 * incr and decr: the sum wraps at 2^64; a result with fewer digits keeps
 * the value's length, padded with spaces; one with more lengthens it. */
static inline long kv_incr(struct isob_trusted *t, struct isob_msg *msg, size_t cap)
{
    struct kv_req q;
    uint64_t delta = (uint64_t)ISOB_MSG_ONCE(msg->arg[1]);
    int64_t how = ISOB_MSG_ONCE(msg->arg[2]);
    if (kv_req_read(msg, cap, 0, &q) != 0 || how < 0 || how > 2 * (int64_t)KV_PREFIX_MAX + 1)
        return kv_stored(msg, -KV_EINVAL, 0);
    uint32_t prefix = (uint32_t)(how >> 1);
    int decr = (int)(how & 1);
    struct kv_store *s;
    uint32_t pos;
    uint32_t ref = kv_live(t, &q, &s, &pos);
    if (!ref)
        return kv_stored(msg, -KV_ENOENT, 0);
    unsigned char *r = kv_rec(t, s, ref);
    uint32_t vlen = kv_vlen(r);
    uint64_t v;
    if (vlen < prefix || kv_parse_number(r + KV_HDR + q.klen + prefix, vlen - prefix, &v) != 0)
        return kv_stored(msg, -KV_EDOM, 0);
    v = decr ? (delta > v ? 0 : v - delta) : v + delta;
    unsigned char digits[20];
    uint32_t nd = kv_format_number(v, digits);
    uint32_t old = vlen - prefix, len = nd > old ? prefix + nd : vlen;
    uint32_t nref = kv_resize(t, s, &q, ref, &pos, len);
    if (!nref)
        return kv_stored(msg, -KV_ENOSPC, 0);
    unsigned char *o = kv_rec(t, s, ref) + KV_HDR + q.klen;
    unsigned char *d = kv_rec(t, s, nref) + KV_HDR + q.klen;
    if (nref != ref)
        kv_copy(d, o, prefix);
    kv_copy(d + prefix, digits, nd);
    for (uint32_t i = prefix + nd; i < len; i++) {
        d[i] = ' ';
        KV_NO_IDIOM(d);
    }
    uint64_t cas = kv_resize_done(t, s, &q, ref, nref, pos, len);
    msg->arg[1] = (int64_t)v;
    return kv_stored(msg, 0, cas);
}

/* KV_APPEND (trusted.h): the message's value after the stored value, or
 * (arg[2] odd) between its first arg[2] / 2 bytes and the rest; the
 * record keeps its expiry.  The result may not pass arg[3] bytes. */
static inline long kv_append(struct isob_trusted *t, struct isob_msg *msg, size_t cap)
{
    struct kv_req q;
    int64_t how = ISOB_MSG_ONCE(msg->arg[2]), max = ISOB_MSG_ONCE(msg->arg[3]);
    if (kv_req_read(msg, cap, 1, &q) != 0 || how < 0 || how > 2 * (int64_t)KV_PREFIX_MAX + 1 ||
        max < 0)
        return kv_stored(msg, -KV_EINVAL, 0);
    uint32_t prefix = (uint32_t)(how >> 1);
    int prepend = (int)(how & 1);
    struct kv_store *s;
    uint32_t pos;
    uint32_t ref = kv_live(t, &q, &s, &pos);
    if (!ref)
        return kv_stored(msg, -KV_ENOENT, 0);
    uint32_t old = kv_vlen(kv_rec(t, s, ref));
    if (old < prefix)
        return kv_stored(msg, -KV_EINVAL, 0);
    uint64_t len = (uint64_t)old + q.vlen;
    if (len > ISOB_KV_MAX_VALUE || len > (uint64_t)max || len > cap)
        return kv_stored(msg, -KV_EMSGSIZE, 0);
    uint32_t nref = kv_resize(t, s, &q, ref, &pos, (uint32_t)len);
    if (!nref)
        return kv_stored(msg, -KV_ENOSPC, 0);
    unsigned char *o = kv_rec(t, s, ref) + KV_HDR + q.klen;
    unsigned char *d = kv_rec(t, s, nref) + KV_HDR + q.klen;
    uint32_t rest = old - prefix;
    if (nref == ref) {
        if (prepend) {
            kv_copy_up(o + prefix + q.vlen, o + prefix, rest);
            kv_copy(o + prefix, q.val, q.vlen);
        } else {
            kv_copy(o + old, q.val, q.vlen);
        }
    } else {
        kv_copy(d, o, prefix);
        if (prepend) {
            kv_copy(d + prefix, q.val, q.vlen);
            kv_copy(d + prefix + q.vlen, o + prefix, rest);
        } else {
            kv_copy(d + prefix, o + prefix, rest);
            kv_copy(d + old, q.val, q.vlen);
        }
    }
    return kv_stored(msg, 0, kv_resize_done(t, s, &q, ref, nref, pos, (uint32_t)len));
}

/* KV_CLOCK: the time now (arg[0]) and whether stores may evict (arg[1]). */
static inline long kv_clock(struct isob_trusted *t, const struct isob_msg *msg)
{
    int64_t now = ISOB_MSG_ONCE(msg->arg[0]), evict = ISOB_MSG_ONCE(msg->arg[1]);
    if (now < 0 || now > 0xffffffffll || (evict != 0 && evict != 1))
        return -KV_EINVAL;
    struct kv_store *s = kv_store_of(t);
    if (s) {
        s->now = (uint32_t)now;
        s->evict = (uint32_t)evict;
    }
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
    s->hand = 0;
    return 0;
}

static inline long kv_stats(struct isob_trusted *t, struct isob_msg *msg, size_t cap)
{
    struct kv_store *s = kv_store_of(t);
    msg->arg[2] = (int64_t)t->heap_size;
    msg->len = 0;
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
    /* The eviction counters, where the message has room for them. */
    if (cap >= KV_STATS_DATA) {
        *(kv_u64u *)(void *)msg->data = s->evictions;
        *(kv_u64u *)(void *)(msg->data + 8) = s->reclaimed;
        *(kv_u64u *)(void *)(msg->data + 16) = s->last_cas;
        msg->len = KV_STATS_DATA;
    }
    return (long)s->items;
}

#endif
