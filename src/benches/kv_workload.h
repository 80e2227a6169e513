/* The kv benchmark's workload, on the untrusted side: which keys it
 * inserts, which value goes with each key, the order of the reads, and the
 * check of every value read back.  Header-only so that the benchmark
 * (src/benches/kv.c) and its tests use the very same definitions.
 *
 * Everything derives from one seed and an entry's index, so that the
 * verifier recomputes the expected value instead of keeping a copy of the
 * data (256 MiB of it at the top of the sweep). */
#ifndef ISOB_BENCHES_KV_WORKLOAD_H
#define ISOB_BENCHES_KV_WORKLOAD_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define KVW_KEY_BYTES 12     /* 'k' and 11 base-64 digits of a 64-bit number */
#define KVW_VALUE_BYTES 64   /* one entry per 64 bytes of data, as in the original benchmark */

/* splitmix64's finaliser: a bijection on 64-bit numbers with good
 * avalanche, so distinct inputs give distinct, random-looking outputs. */
static inline uint64_t kvw_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* The key of entry i.  Keys are pseudo-random under the seed yet never
 * collide: x = mix(i + mix(seed)) is a bijection of i, and the 11 digits
 * carry all 64 bits of x.  Digits come from memcached's safe alphabet (no
 * spaces or control characters). */
static inline void kvw_key(uint64_t seed, uint64_t i, unsigned char key[KVW_KEY_BYTES])
{
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint64_t x = kvw_mix(i + kvw_mix(seed ^ 0x6b6579736b657973ull));
    key[0] = 'k';
    for (int d = 1; d < KVW_KEY_BYTES; d++, x >>= 6)
        key[d] = (unsigned char)digits[x & 63];
}

/* The value of entry i: eight pseudo-random words, little-endian. */
static inline void kvw_value(uint64_t seed, uint64_t i, unsigned char val[KVW_VALUE_BYTES])
{
    uint64_t base = kvw_mix(seed ^ 0x76616c7565737373ull) + i * (KVW_VALUE_BYTES / 8);
    for (int w = 0; w < KVW_VALUE_BYTES / 8; w++) {
        uint64_t x = kvw_mix(base + (uint64_t)w);
        for (int b = 0; b < 8; b++)
            val[w * 8 + b] = (unsigned char)(x >> (8 * b));
    }
}

/* Check what a get of entry i returned: ret is the entry's result, got the
 * bytes the reply left in the shared buffer.  Returns 0 when length and
 * content are right; else nonzero with what was wrong in why. */
static inline int kvw_verify(uint64_t seed, uint64_t i, long ret, const unsigned char *got, char *why,
                             size_t len)
{
    if (ret != KVW_VALUE_BYTES) {
        snprintf(why, len, "get of entry %llu returned %ld, not the value's length %d",
                 (unsigned long long)i, ret, KVW_VALUE_BYTES);
        return 1;
    }
    unsigned char want[KVW_VALUE_BYTES];
    kvw_value(seed, i, want);
    if (memcmp(got, want, KVW_VALUE_BYTES) == 0)
        return 0;
    int at = 0;
    while (got[at] == want[at])
        at++;
    snprintf(why, len, "get of entry %llu returned a wrong value: byte %d is 0x%02x, not 0x%02x",
             (unsigned long long)i, at, got[at], want[at]);
    return 1;
}

/* A small seeded generator (splitmix64's stream) for the read orders. */
static inline uint64_t kvw_next(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ull;
    return kvw_mix(*state);
}

/* Shuffle order[0..n) (Fisher-Yates) with a stream seeded by the run's
 * seed and the pass number, so every pass reads in its own order and a
 * rerun with the same seed reads in the same orders.  The bound is taken
 * by a multiply-high: its bias, at most n / 2^64, is far below noise. */
static inline void kvw_shuffle(uint32_t *order, size_t n, uint64_t seed, uint64_t pass)
{
    uint64_t st = kvw_mix(seed ^ 0x6f72646572737373ull) ^ kvw_mix(pass + 1);
    for (size_t k = n; k > 1; k--) {
        size_t j = (size_t)(((unsigned __int128)kvw_next(&st) * k) >> 64);
        uint32_t tmp = order[k - 1];
        order[k - 1] = order[j];
        order[j] = tmp;
    }
}

/* Whether the kv sweep's size budget skips a size of `entries` entries:
 * its fill, `warmup` warm-up passes and one measured pass at `pace_ns` per
 * request (the last size's measured cost per request, not extrapolated: a
 * pace grown by its own growth squares a slowdown that load caused) would
 * take longer than budget_ns.  The baseline mechanism (`direct`) is never
 * skipped: every other mechanism's figure of a size is read against its
 * figure of the same size. */
static inline int kvw_size_over_budget(double pace_ns, size_t entries, unsigned warmup,
                                       uint64_t budget_ns, int baseline)
{
    if (baseline)
        return 0;
    return pace_ns * (double)entries * (double)(2 + warmup) > (double)budget_ns;
}

#endif
