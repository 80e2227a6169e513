/* The key-value store (src/trusted/kv.h) against a reference model, through
 * `direct` and through `process-futex`; its sizing; the kv benchmark's
 * verifier; and the benchmark itself end to end on a fake clock, including
 * a mechanism that corrupts one reply (which must fail the run).  No test
 * asserts a duration. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isobench/bench.h"
#include "isobench/mechanism.h"
#include "../../src/trusted/kv.h"
#include "../../src/benches/kv_workload.h"
#include "tap.h"

/* The mechanisms every store case runs through: the reference, and one
 * whose store lives in another process. */
static const char *const store_mechs[] = {"direct", "process-futex"};
static const struct isob_mechanism *cur;

/* A tiny deterministic generator for the tests' own choices. */
static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state += 0x9e3779b97f4a7c15ull;
    return kvw_mix(rng_state);
}
static size_t rnd_below(size_t n) { return (size_t)(rnd() % n); }

static struct isob_comp *make_sized(size_t heap_size, size_t shared_size)
{
    char why[256] = "";
    if (cur->probe(why, sizeof why) != 0)
        SKIP("%s: %s", cur->name, why);
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    if (heap_size)
        spec.heap_size = heap_size;
    if (shared_size)
        spec.shared_size = shared_size;
    struct isob_comp *c = NULL;
    int rc = isob_comp_create(cur, &spec, &c);
    if (rc)
        fprintf(stderr, "# create %s: %s\n", cur->name, isob_strerror(rc));
    CHECK_EQ_LONG(rc, 0);
    return c;
}

static struct isob_comp *make(size_t heap_size)
{
    return make_sized(heap_size, 0);
}

/* One request with the layout of trusted.h: key then value in data. */
static long op(struct isob_comp *c, unsigned entry, const void *key, size_t klen, const void *val,
               size_t vlen)
{
    struct isob_msg *m = c->mech->shared(c);
    memcpy(m->data, key, klen);
    if (val)
        memcpy(m->data + klen, val, vlen);
    m->arg[0] = (int64_t)klen;
    m->arg[1] = (int64_t)vlen;
    m->arg[2] = 0;  /* no expiry */
    m->arg[3] = 0;
    m->len = (uint32_t)(klen + vlen);
    return isob_call(c, entry);
}

static long stats(struct isob_comp *c, int64_t out[4])
{
    long r = isob_call(c, ISOB_ENTRY_KV_STATS);
    memcpy(out, c->mech->shared(c)->arg, 4 * sizeof *out);
    return r;
}

/* The reference model: keys of every length, values of many size classes. */
#define REF_KEYS 300
#define REF_CAP 400       /* keys the model holds at most */
#define REF_MAX_VALUE 200
#define REF_OPS 30000
#define REF_FLUSH_EVERY 7000

struct ref {
    unsigned char key[REF_CAP][ISOB_KV_MAX_KEY];
    size_t klen[REF_CAP];
    unsigned char *val;   /* REF_CAP values of val_cap bytes each */
    size_t val_cap;
    size_t vlen[REF_CAP];
    int present[REF_CAP];
    size_t live;
};

static struct ref *ref_new(size_t val_cap)
{
    struct ref *r = calloc(1, sizeof *r);
    CHECK(r != NULL);
    r->val = malloc(REF_CAP * val_cap);
    CHECK(r->val != NULL);
    r->val_cap = val_cap;
    return r;
}

static void ref_free(struct ref *r)
{
    free(r->val);
    free(r);
}

static unsigned char *ref_val(struct ref *r, size_t k)
{
    return r->val + k * r->val_cap;
}

/* Distinct keys of random lengths: the index in the first two bytes keeps
 * them apart whatever the random rest holds. */
static void ref_keys(struct ref *r, size_t nkeys, size_t min_len, size_t max_len)
{
    for (size_t k = 0; k < nkeys; k++) {
        r->klen[k] = min_len + rnd_below(max_len - min_len + 1);
        for (size_t b = 0; b < r->klen[k]; b++)
            r->key[k][b] = (unsigned char)('!' + rnd_below(90));
        r->key[k][0] = (unsigned char)('A' + k % 50);
        if (r->klen[k] > 1)
            r->key[k][1] = (unsigned char)('A' + k / 50);
    }
}

/* Check the store's answer for key k against the model. */
static void ref_check(struct isob_comp *c, struct ref *r, size_t k)
{
    long got = op(c, ISOB_ENTRY_KV_GET, r->key[k], r->klen[k], NULL, 0);
    struct isob_msg *m = c->mech->shared(c);
    if (!r->present[k]) {
        CHECK_EQ_LONG(got, -ENOENT);
        return;
    }
    CHECK_EQ_LONG(got, (long)r->vlen[k]);
    CHECK_EQ_LONG(m->len, r->vlen[k]);
    CHECK_EQ_LONG(m->arg[1], r->vlen[k]);
    CHECK(memcmp(m->data, ref_val(r, k), r->vlen[k]) == 0);
}

/* Random sets (new keys and overwrites, values changing size class),
 * gets, deletes and flushes, each answer compared with the model.
 * max_live bounds the live keys so that a tight heap never fills. */
static void ref_run(struct isob_comp *c, struct ref *r, size_t nkeys, size_t min_value, size_t max_value,
                    size_t max_live, size_t ops, size_t flush_every)
{
    CHECK(max_value <= r->val_cap);
    unsigned char *val = malloc(max_value + 1);
    CHECK(val != NULL);
    for (size_t i = 1; i <= ops; i++) {
        size_t k = rnd_below(nkeys);
        unsigned what = (unsigned)rnd_below(100);
        if (flush_every && i % flush_every == 0) {
            CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_KV_FLUSH), 0);
            memset(r->present, 0, sizeof r->present);
            r->live = 0;
        } else if (what < 40 && (r->present[k] || r->live < max_live)) {
            size_t vlen = min_value + rnd_below(max_value - min_value + 1);
            for (size_t b = 0; b < vlen; b++)
                val[b] = (unsigned char)rnd();
            CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_SET, r->key[k], r->klen[k], val, vlen), 0);
            memcpy(ref_val(r, k), val, vlen);
            r->vlen[k] = vlen;
            r->live += !r->present[k];
            r->present[k] = 1;
        } else if (what < 60) {
            long got = op(c, ISOB_ENTRY_KV_DELETE, r->key[k], r->klen[k], NULL, 0);
            CHECK_EQ_LONG(got, r->present[k] ? 0 : -ENOENT);
            r->live -= r->present[k];
            r->present[k] = 0;
        } else {
            ref_check(c, r, k);
        }
    }
    /* Every key, present or not, answers as the model says. */
    for (size_t k = 0; k < nkeys; k++)
        ref_check(c, r, k);
    int64_t st[4];
    CHECK_EQ_LONG(stats(c, st), (long)r->live);
    CHECK_EQ_LONG(st[0], (long)r->live);
    free(val);
}

static void t_store_matches_reference(void)
{
    rng_state = 1;
    struct ref *r = ref_new(REF_MAX_VALUE);
    struct isob_comp *c = make(0);
    ref_keys(r, REF_KEYS, 1, ISOB_KV_MAX_KEY);
    ref_run(c, r, REF_KEYS, 0, REF_MAX_VALUE, REF_KEYS, REF_OPS, REF_FLUSH_EVERY);
    isob_comp_destroy(c);
    ref_free(r);
}

/* Values from empty to 96 KiB, across the exact classes and the coarse
 * ones above 4 KiB: overwrites move records between classes and reuse
 * freed ones, and every answer still matches the model. */
#define BIG_KEYS 40
#define BIG_MAX_VALUE (96u << 10)
#define BIG_OPS 4000
static void t_store_large_values_match_reference(void)
{
    rng_state = 4;
    struct ref *r = ref_new(BIG_MAX_VALUE);
    struct isob_comp *c = make_sized((size_t)16 << 20, BIG_MAX_VALUE + 8192);
    ref_keys(r, BIG_KEYS, 1, 40);
    ref_run(c, r, BIG_KEYS, 0, BIG_MAX_VALUE, BIG_KEYS, BIG_OPS, 1500);
    isob_comp_destroy(c);
    ref_free(r);
}

/* The size classes: every record fits its class, a class is never more
 * than a quarter larger than the record above 4 KiB (exact below), class
 * indices grow with size and stay below KV_CLASSES up to the largest record. */
static void t_size_classes(void)
{
    uint32_t largest = (KV_HDR + ISOB_KV_MAX_KEY + ISOB_KV_MAX_VALUE + KV_UNIT - 1) / KV_UNIT;
    CHECK(largest < (1u << KV_MAX_UNITS_LOG));
    uint32_t prev_units = 0, prev_class = 0, classes = 0;
    for (uint32_t n = 1; n <= largest; n++) {
        uint32_t u = kv_class_units(n);
        CHECK(u >= n);
        if (n <= KV_EXACT_UNITS)
            CHECK_EQ_LONG(u, n);
        else
            CHECK((uint64_t)u * 4 <= (uint64_t)n * 5);
        CHECK_EQ_LONG(kv_class_units(u), u);
        uint32_t c = kv_class(u);
        CHECK(c >= 1 && c < KV_CLASSES);
        if (u == prev_units) {
            CHECK_EQ_LONG(c, prev_class);
        } else {
            CHECK(c > prev_class);
            classes++;
        }
        prev_units = u;
        prev_class = c;
    }
    fprintf(stderr, "# %u size classes for records of 1..%u units; KV_CLASSES %u\n", classes, largest,
            (unsigned)KV_CLASSES);
    /* KV_CLASSES wastes no more than a doubling's classes past the largest. */
    CHECK(prev_class + KV_STEPS >= KV_CLASSES - 1);
    CHECK_EQ_LONG(kv_rec_units(12, 64), 6);    /* the benchmark's records: 16 + 12 + 64 bytes, in 96 */
}

/* A table near its load limit: long probe runs, so that deletes shift many
 * entries back.  Records all have one size, so the heap never runs short. */
#define DENSE_LIVE 200
static void t_store_dense_table_deletes(void)
{
    rng_state = 2;
    struct ref *r = ref_new(8);
    struct isob_comp *c = make(isob_kv_heap_size(DENSE_LIVE, 12, 8));
    ref_keys(r, 2 * DENSE_LIVE, 12, 12);
    /* Values of 1..8 bytes: with a 12-byte key every record is 2 units. */
    ref_run(c, r, 2 * DENSE_LIVE, 1, 8, DENSE_LIVE, REF_OPS, 0);
    int64_t st[4];
    stats(c, st);
    fprintf(stderr, "# %s: %lld live entries in %lld slots\n", cur->name, (long long)st[0],
            (long long)st[3]);
    CHECK(st[3] < 2 * DENSE_LIVE); /* the table really was small */
    isob_comp_destroy(c);
    ref_free(r);
}

static void t_store_limits_and_errors(void)
{
    /* Room for the longest key and the longest value. */
    size_t big = (size_t)ISOB_KV_MAX_VALUE + ISOB_KV_MAX_KEY + 8192;
    struct isob_comp *c = make_sized(2 * big, big);
    struct isob_msg *m = c->mech->shared(c);
    unsigned char key[ISOB_KV_MAX_KEY + 1], *val = malloc(ISOB_KV_MAX_VALUE + 1);
    CHECK(val != NULL);
    memset(key, 'k', sizeof key);
    memset(val, 'v', ISOB_KV_MAX_VALUE + 1);
    /* The longest key and the longest value work; one byte more does not. */
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_SET, key, ISOB_KV_MAX_KEY, val, ISOB_KV_MAX_VALUE), 0);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_GET, key, ISOB_KV_MAX_KEY, NULL, 0), ISOB_KV_MAX_VALUE);
    CHECK(memcmp(m->data, val, ISOB_KV_MAX_VALUE) == 0);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_SET, key, ISOB_KV_MAX_KEY + 1, val, 1), -EINVAL);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_GET, key, ISOB_KV_MAX_KEY + 1, NULL, 0), -EINVAL);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_DELETE, key, ISOB_KV_MAX_KEY + 1, NULL, 0), -EINVAL);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_SET, key, 1, val, ISOB_KV_MAX_VALUE + 1), -EINVAL);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_SET, key, 0, val, 1), -EINVAL);
    /* Lengths that claim more than the message holds, or a negative value. */
    op(c, ISOB_ENTRY_KV_SET, key, 5, val, 5);
    m->len = 9;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_KV_SET), -EINVAL);
    m->arg[1] = -1;
    m->len = 5;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_KV_SET), -EINVAL);
    m->arg[0] = 5;
    m->len = (uint32_t)c->data_cap + 1;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_KV_GET), -EINVAL);
    /* Missing keys. */
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_GET, "nope", 4, NULL, 0), -ENOENT);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_DELETE, "nope", 4, NULL, 0), -ENOENT);
    /* Overwrite, in place and into another size class; an empty value. */
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_SET, "a", 1, "one", 3), 0);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_SET, "a", 1, "two", 3), 0);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_GET, "a", 1, NULL, 0), 3);
    CHECK(memcmp(m->data, "two", 3) == 0);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_SET, "a", 1, val, 100), 0);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_GET, "a", 1, NULL, 0), 100);
    CHECK(memcmp(m->data, val, 100) == 0);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_SET, "e", 1, NULL, 0), 0);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_GET, "e", 1, NULL, 0), 0);
    /* Keys are compared by length too: "a" is not "aa". */
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_GET, "aa", 2, NULL, 0), -ENOENT);
    /* Delete, then flush everything; the store serves again afterwards. */
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_DELETE, "a", 1, NULL, 0), 0);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_GET, "a", 1, NULL, 0), -ENOENT);
    int64_t st[4];
    CHECK_EQ_LONG(stats(c, st), 3); /* the longest key, "kkkkk" and "e" */
    CHECK(st[1] > 0);
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_KV_FLUSH), 0);
    CHECK_EQ_LONG(stats(c, st), 0);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_GET, "e", 1, NULL, 0), -ENOENT);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_SET, "b", 1, "x", 1), 0);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_GET, "b", 1, NULL, 0), 1);
    CHECK_EQ_LONG(m->data[0], 'x');
    isob_comp_destroy(c);
    free(val);
}

/* A request with an expiry and a cas unique (KV_SET..KV_CAS, KV_TOUCH, KV_GAT). */
static long op_x(struct isob_comp *c, unsigned entry, const char *key, const char *val,
                 uint32_t expiry, uint64_t cas)
{
    struct isob_msg *m = c->mech->shared(c);
    size_t klen = strlen(key), vlen = val ? strlen(val) : 0;
    memcpy(m->data, key, klen);
    memcpy(m->data + klen, val ? val : "", vlen);
    m->arg[0] = (int64_t)klen;
    m->arg[1] = (int64_t)vlen;
    m->arg[2] = expiry;
    m->arg[3] = (int64_t)cas;
    m->len = (uint32_t)(klen + vlen);
    return isob_call(c, entry);
}

static long set_clock(struct isob_comp *c, int64_t now, int64_t evict)
{
    struct isob_msg *m = c->mech->shared(c);
    m->arg[0] = now;
    m->arg[1] = evict;
    return isob_call(c, ISOB_ENTRY_KV_CLOCK);
}

/* The value of key as a string, or NULL when the store says -ENOENT. */
static const char *get_str(struct isob_comp *c, const char *key, uint64_t *cas)
{
    static char v[256];
    long r = op_x(c, ISOB_ENTRY_KV_GET, key, NULL, 0, 0);
    if (r == -ENOENT)
        return NULL;
    CHECK(r >= 0 && (size_t)r < sizeof v);
    struct isob_msg *m = c->mech->shared(c);
    memcpy(v, m->data, (size_t)r);
    v[r] = 0;
    if (cas)
        *cas = (uint64_t)m->arg[3];
    return v;
}

static void check_value(struct isob_comp *c, const char *key, const char *want)
{
    const char *got = get_str(c, key, NULL);
    if (!want) {
        if (got)
            fprintf(stderr, "# %s: want absent, got '%s'\n", key, got);
        CHECK(got == NULL);
        return;
    }
    if (!got || strcmp(got, want) != 0)
        fprintf(stderr, "# %s: want '%s', got '%s'\n", key, want, got ? got : "(absent)");
    CHECK(got && strcmp(got, want) == 0);
}

/* The store's counters from KV_STATS: evictions, reclaimed, last cas. */
static void kv_counters(struct isob_comp *c, uint64_t out[3])
{
    CHECK(isob_call(c, ISOB_ENTRY_KV_STATS) >= 0);
    struct isob_msg *m = c->mech->shared(c);
    CHECK_EQ_LONG(m->len, 24);
    memcpy(out, m->data, 24);
}

/* Conditional stores and cas uniques, as memcached's add, replace and cas. */
static void t_store_conditions_and_cas(void)
{
    struct isob_comp *c = make(0);
    uint64_t cas_a, cas_b, cas;
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_REPLACE, "a", "r", 0, 0), -ENOENT);
    CHECK_EQ_LONG(c->mech->shared(c)->arg[3], 0);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_ADD, "a", "one", 0, 0), 0);
    cas_a = (uint64_t)c->mech->shared(c)->arg[3];
    CHECK_EQ_LONG(cas_a, 1);  /* the first unique is 1, as memcached's */
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_ADD, "a", "two", 0, 0), -EEXIST);
    check_value(c, "a", "one");
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, "b", "bee", 0, 0), 0);
    cas_b = (uint64_t)c->mech->shared(c)->arg[3];
    CHECK_EQ_LONG(cas_b, 2);
    CHECK(strcmp(get_str(c, "a", &cas), "one") == 0);
    CHECK_EQ_LONG(cas, cas_a);
    /* cas: a stale unique is refused, the current one stores and changes it. */
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_CAS, "a", "three", 0, cas_b), -EEXIST);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_CAS, "zz", "three", 0, cas_a), -ENOENT);
    check_value(c, "a", "one");
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_CAS, "a", "three", 0, cas_a), 0);
    CHECK_EQ_LONG(c->mech->shared(c)->arg[3], 3);
    CHECK(strcmp(get_str(c, "a", &cas), "three") == 0);
    CHECK_EQ_LONG(cas, 3);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_CAS, "a", "four", 0, cas_a), -EEXIST);
    /* Into another size class, the unique still changes. */
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_REPLACE, "a",
                       "a value long enough for another size class", 0, 0), 0);
    CHECK_EQ_LONG(c->mech->shared(c)->arg[3], 4);
    /* Refusals and failures take no unique; a flush does not reset them. */
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_KV_FLUSH), 0);
    check_value(c, "a", NULL);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_CAS, "a", "x", 0, 4), -ENOENT);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, "a", "five", 0, 0), 0);
    CHECK_EQ_LONG(c->mech->shared(c)->arg[3], 5);
    uint64_t k[3];
    kv_counters(c, k);
    CHECK_EQ_LONG(k[2], 5);
    /* Bad expiries and clocks. */
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, "a", "x", 0, 0), 0);
    struct isob_msg *m = c->mech->shared(c);
    m->arg[2] = -1;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_KV_TOUCH), -EINVAL);
    m->arg[2] = (int64_t)1 << 32;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_KV_TOUCH), -EINVAL);
    CHECK_EQ_LONG(set_clock(c, -1, 0), -EINVAL);
    CHECK_EQ_LONG(set_clock(c, 5, 2), -EINVAL);
    isob_comp_destroy(c);
}

/* KV_INCR: delta, and 2 * prefix + decr. */
static long incr(struct isob_comp *c, const char *key, uint64_t delta, int64_t how)
{
    struct isob_msg *m = c->mech->shared(c);
    size_t klen = strlen(key);
    memcpy(m->data, key, klen);
    m->arg[0] = (int64_t)klen;
    m->arg[1] = (int64_t)delta;
    m->arg[2] = how;
    m->arg[3] = 0;
    m->len = (uint32_t)klen;
    return isob_call(c, ISOB_ENTRY_KV_INCR);
}

/* KV_APPEND: the bytes, 2 * prefix + prepend, the longest value allowed. */
static long append(struct isob_comp *c, const char *key, const char *val, int64_t how, int64_t max)
{
    struct isob_msg *m = c->mech->shared(c);
    size_t klen = strlen(key), vlen = strlen(val);
    memcpy(m->data, key, klen);
    memcpy(m->data + klen, val, vlen);
    m->arg[0] = (int64_t)klen;
    m->arg[1] = (int64_t)vlen;
    m->arg[2] = how;
    m->arg[3] = max;
    m->len = (uint32_t)(klen + vlen);
    return isob_call(c, ISOB_ENTRY_KV_APPEND);
}

/* incr, decr, append and prepend inside the store, as memcached's: the
 * value's first bytes (the protocol's flags) kept, its expiry kept, a new
 * cas unique each time, a record that outgrows its size class moved. */
static void t_store_incr_append(void)
{
    struct isob_comp *c = make(0);
    struct isob_msg *m = c->mech->shared(c);
    uint64_t cas;
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, "n", "FFFF10", 500, 0), 0);
    CHECK_EQ_LONG(incr(c, "n", 5, 2 * 4), 0);
    CHECK_EQ_LONG(m->arg[1], 15);
    CHECK_EQ_LONG(m->arg[3], 2);
    check_value(c, "n", "FFFF15");
    CHECK_EQ_LONG(m->arg[2], 500);  /* KV_GET's expiry: kept */
    /* decr stops at 0; the shorter number is padded to the old length. */
    CHECK_EQ_LONG(incr(c, "n", 20, 2 * 4 + 1), 0);
    CHECK_EQ_LONG(m->arg[1], 0);
    check_value(c, "n", "FFFF0 ");
    /* A longer result lengthens the value (into another size class), and
     * incr wraps at 2^64. */
    CHECK_EQ_LONG(incr(c, "n", UINT64_MAX, 2 * 4), 0);
    CHECK_EQ_LONG((uint64_t)m->arg[1], UINT64_MAX);
    check_value(c, "n", "FFFF18446744073709551615");
    CHECK_EQ_LONG(m->arg[2], 500);
    CHECK_EQ_LONG(incr(c, "n", 2, 2 * 4), 0);
    CHECK_EQ_LONG(m->arg[1], 1);
    check_value(c, "n", "FFFF1                   ");
    CHECK(strcmp(get_str(c, "n", &cas), "FFFF1                   ") == 0);
    CHECK_EQ_LONG(cas, 5);
    /* What is not a number, as memcached reads it; misses; bad requests. */
    static const char *const not_numbers[] = {"FFFF", "FFFF ", "FFFFx", "FFFF12a", "FFFF-5",
                                              "FFFF18446744073709551616", "FFF"};
    for (size_t i = 0; i < sizeof not_numbers / sizeof not_numbers[0]; i++) {
        CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, "x", not_numbers[i], 0, 0), 0);
        CHECK_EQ_LONG(incr(c, "x", 1, 2 * 4), -EDOM);
        check_value(c, "x", not_numbers[i]);
    }
    static const struct { const char *v, *after; } numbers[] = {
        {"FFFF 7", "FFFF8 "}, {"FFFF+7", "FFFF8 "}, {"FFFF-0", "FFFF1 "}, {"FFFF9 z", "FFFF10 "},
        {"FFFF9\r\n", "FFFF10 "},
    };
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, "x", numbers[i].v, 0, 0), 0);
        CHECK_EQ_LONG(incr(c, "x", 1, 2 * 4), 0);
        check_value(c, "x", numbers[i].after);
    }
    CHECK_EQ_LONG(incr(c, "nope", 1, 2 * 4), -ENOENT);
    CHECK_EQ_LONG(incr(c, "n", 1, -1), -EINVAL);
    CHECK_EQ_LONG(incr(c, "n", 1, 2 * 65), -EINVAL);

    /* append and prepend after the first four bytes, growing through many
     * size classes; the model is a plain string. */
    static char model[8192], add[128];
    strcpy(model, "FLGSab");
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, "a", model, 700, 0), 0);
    for (int i = 0; i < 60; i++) {
        size_t n = (size_t)(i * 7 % 100) + 1;
        for (size_t j = 0; j < n; j++)
            add[j] = (char)('a' + (i + (int)j) % 26);
        add[n] = 0;
        int pre = i % 2;
        CHECK_EQ_LONG(append(c, "a", add, 2 * 4 + pre, 8000), 0);
        if (pre) {
            memmove(model + 4 + n, model + 4, strlen(model + 4) + 1);
            memcpy(model + 4, add, n);
        } else {
            strcat(model, add);
        }
    }
    long r = op_x(c, ISOB_ENTRY_KV_GET, "a", NULL, 0, 0);
    CHECK_EQ_LONG(r, (long)strlen(model));
    CHECK(memcmp(m->data, model, strlen(model)) == 0);
    CHECK_EQ_LONG(m->arg[2], 700);
    CHECK_EQ_LONG(append(c, "a", "z", 2 * 4, (int64_t)strlen(model)), -EMSGSIZE);
    CHECK_EQ_LONG(append(c, "nope", "z", 2 * 4, 8000), -ENOENT);
    CHECK_EQ_LONG(append(c, "a", "z", -2, 8000), -EINVAL);
    CHECK_EQ_LONG(append(c, "a", "z", 2 * 4, -1), -EINVAL);

    /* KV_DELETE_CAS: only the item with that unique. */
    CHECK(get_str(c, "n", &cas) != NULL);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_DELETE_CAS, "n", NULL, 0, cas + 1), -EEXIST);
    check_value(c, "n", "FFFF1                   ");
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_DELETE_CAS, "n", NULL, 0, cas), 0);
    check_value(c, "n", NULL);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_DELETE_CAS, "n", NULL, 0, cas), -ENOENT);
    isob_comp_destroy(c);
}

/* A full store that may evict: an append that outgrows its record makes
 * room by evicting a record of the size class it grows into (one of each
 * is stored first: a class with none refuses, as a memcached slab class
 * with nothing to evict does), never the record it grows. */
static void t_store_append_evicts_others(void)
{
    size_t heap = isob_kv_heap_size(2000, 8, 32);
    struct isob_comp *c = make(heap);
    char key[16], val[33];
    static char big[1400];
    for (int i = 1; i <= 41; i++) {
        snprintf(key, sizeof key, "big%05d", i);
        memset(big, 'b', (size_t)(32 * (i + 1)));
        big[32 * (i + 1)] = 0;
        CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, key, big, 0, 0), 0);
    }
    memset(val, 'v', 32);
    val[32] = 0;
    size_t fitted = 0;
    for (;; fitted++) {
        snprintf(key, sizeof key, "k%07zu", fitted);
        long r = op_x(c, ISOB_ENTRY_KV_SET, key, val, 0, 0);
        if (r == -ENOSPC)
            break;
        CHECK_EQ_LONG(r, 0);
        CHECK(fitted < 8000);
    }
    CHECK_EQ_LONG(set_clock(c, 1000, 1), 0);
    static char model[4096];
    strcpy(model, val);
    for (int i = 0; i < 40; i++) {
        CHECK_EQ_LONG(append(c, "k0000000", "0123456789abcdef0123456789abcdef", 0, 4000), 0);
        strcat(model, "0123456789abcdef0123456789abcdef");
    }
    long r = op_x(c, ISOB_ENTRY_KV_GET, "k0000000", NULL, 0, 0);
    CHECK_EQ_LONG(r, (long)strlen(model));
    CHECK(memcmp(c->mech->shared(c)->data, model, strlen(model)) == 0);
    uint64_t k[3];
    kv_counters(c, k);
    CHECK(k[0] > 0);
    fprintf(stderr, "# %s: %llu evicted for one value grown to %zu bytes\n", cur->name,
            (unsigned long long)k[0], strlen(model));
    isob_comp_destroy(c);
}

/* Expiry on the store's clock, which only KV_CLOCK moves. */
static void t_store_expiry(void)
{
    struct isob_comp *c = make(0);
    /* Without a clock (0) nothing expires. */
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, "early", "e", 5, 0), 0);
    check_value(c, "early", "e");
    CHECK_EQ_LONG(set_clock(c, 100, 0), 0);
    check_value(c, "early", NULL);  /* 5 is past at 100 */
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, "t", "tee", 110, 0), 0);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, "forever", "f", 0, 0), 0);
    CHECK_EQ_LONG(set_clock(c, 109, 0), 0);
    check_value(c, "t", "tee");
    CHECK_EQ_LONG(set_clock(c, 110, 0), 0);  /* expiry at the clock: gone */
    check_value(c, "t", NULL);
    check_value(c, "forever", "f");
    /* An expired key is absent for every entry, and can be added again. */
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, "x", "1", 111, 0), 0);
    CHECK_EQ_LONG(set_clock(c, 111, 0), 0);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_REPLACE, "x", "2", 0, 0), -ENOENT);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_TOUCH, "x", NULL, 0, 0), -ENOENT);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_DELETE, "x", NULL, 0, 0), -ENOENT);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_ADD, "x", "3", 0, 0), 0);
    check_value(c, "x", "3");
    /* Touch moves the expiry either way; gat moves it and reads. */
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_TOUCH, "x", NULL, 200, 0), 0);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_TOUCH, "nope", NULL, 200, 0), -ENOENT);
    CHECK_EQ_LONG(set_clock(c, 150, 0), 0);
    check_value(c, "x", "3");
    uint64_t cas_before;
    get_str(c, "x", &cas_before);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_GAT, "x", NULL, 151, 0), 1);
    CHECK_EQ_LONG(c->mech->shared(c)->data[0], '3');
    CHECK_EQ_LONG(c->mech->shared(c)->arg[3], (long long)cas_before);  /* touch keeps the unique */
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_GAT, "nope", NULL, 151, 0), -ENOENT);
    CHECK_EQ_LONG(set_clock(c, 151, 0), 0);
    check_value(c, "x", NULL);
    /* An expiry already past stores (and takes a unique) but is never seen. */
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, "forever", "g", 1, 0), 0);
    CHECK(c->mech->shared(c)->arg[3] > 0);
    check_value(c, "forever", NULL);
    int64_t st[4];
    CHECK_EQ_LONG(stats(c, st), 0);  /* every record above was unlinked on lookup */
    isob_comp_destroy(c);
}

/* A full store: refuses by default (the kv benchmark must see -ENOSPC),
 * evicts within the size class once asked to, reclaims expired records
 * first, and refuses a class it finds nothing of. */
#define EVICT_KEYS 64
static void t_store_evicts_when_asked(void)
{
    size_t heap = isob_kv_heap_size(EVICT_KEYS, 8, 32);
    struct isob_comp *c = make(heap);
    char key[16], val[33];
    memset(val, 'v', 32);
    val[32] = 0;
    size_t fitted = 0;
    for (;; fitted++) {
        snprintf(key, sizeof key, "k%07zu", fitted);
        long r = op_x(c, ISOB_ENTRY_KV_SET, key, val, 0, 0);
        if (r == -ENOSPC)
            break;
        CHECK_EQ_LONG(r, 0);
        CHECK(fitted < 4 * EVICT_KEYS);
    }
    int64_t st[4];
    CHECK_EQ_LONG(stats(c, st), (long)fitted);
    fprintf(stderr, "# %s: %zu entries fitted in a heap sized for %d; %lld slots, %lld bytes\n",
            cur->name, fitted, EVICT_KEYS, (long long)st[3], (long long)st[1]);
    CHECK(fitted >= EVICT_KEYS);
    uint64_t k[3];
    kv_counters(c, k);
    CHECK_EQ_LONG(k[0], 0);
    /* Evicting: every store now succeeds, each evicting one entry. */
    CHECK_EQ_LONG(set_clock(c, 1000, 1), 0);
    for (size_t i = 0; i < 3 * fitted; i++) {
        snprintf(key, sizeof key, "n%07zu", i);
        CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, key, val, 0, 0), 0);
        check_value(c, key, val);
    }
    kv_counters(c, k);
    CHECK_EQ_LONG(k[0], 3 * fitted);
    CHECK_EQ_LONG(k[1], 0);
    CHECK_EQ_LONG(stats(c, st), (long)fitted);
    /* Expired records are reclaimed before anything live is evicted: every
     * entry still there expires at 1001. */
    size_t touched = 0;
    for (size_t i = 0; i < fitted; i++) {
        snprintf(key, sizeof key, "k%07zu", i);
        touched += op_x(c, ISOB_ENTRY_KV_TOUCH, key, NULL, 1001, 0) == 0;
    }
    for (size_t i = 0; i < 3 * fitted; i++) {
        snprintf(key, sizeof key, "n%07zu", i);
        touched += op_x(c, ISOB_ENTRY_KV_TOUCH, key, NULL, 1001, 0) == 0;
    }
    CHECK_EQ_LONG(touched, fitted);
    CHECK_EQ_LONG(set_clock(c, 1001, 1), 0);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, "fresh", val, 0, 0), 0);
    kv_counters(c, k);
    CHECK_EQ_LONG(k[0], 3 * fitted);  /* no more evictions */
    CHECK(k[1] >= 1);
    /* A size class with no record in the store cannot evict: refused, and
     * an overwrite into it keeps the old value (and never evicts the key it
     * overwrites).  The arena has less left than the big record needs. */
    static char big[4000];
    memset(big, 'b', sizeof big - 1);
    CHECK_EQ_LONG(stats(c, st), (long)fitted);
    CHECK((int64_t)heap - (int64_t)ISOB_KV_OFFSET - st[1] < (int64_t)sizeof big);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, "big", big, 0, 0), -ENOSPC);
    check_value(c, "big", NULL);
    CHECK_EQ_LONG(op_x(c, ISOB_ENTRY_KV_SET, "fresh", big, 0, 0), -ENOSPC);
    check_value(c, "fresh", val);
    kv_counters(c, k);
    CHECK_EQ_LONG(k[0], 3 * fitted);
    isob_comp_destroy(c);
}

/* A heap without room for a store: sets fail with -ENOSPC, nothing else breaks. */
static void t_store_absent_in_small_heap(void)
{
    struct isob_comp *c = make(ISOB_KV_OFFSET);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_SET, "a", 1, "b", 1), -ENOSPC);
    CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_GET, "a", 1, NULL, 0), -ENOENT);
    int64_t st[4];
    CHECK_EQ_LONG(stats(c, st), 0);
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_EMPTY), 0);
    isob_comp_destroy(c);
}

/* Fill a heap sized by isob_kv_heap_size with the benchmark's own entries:
 * all fit, all read back, the store stays under twice the data, and
 * inserting beyond the target ends in -ENOSPC with everything intact. */
#define FILL_ENTRIES 16384 /* 1 MiB of values */
static void t_store_fills_to_sizing_target(void)
{
    size_t heap = isob_kv_heap_size(FILL_ENTRIES, KVW_KEY_BYTES, KVW_VALUE_BYTES);
    struct isob_comp *c = make(heap);
    struct isob_msg *m = c->mech->shared(c);
    unsigned char key[KVW_KEY_BYTES], val[KVW_VALUE_BYTES];
    char why[200];
    for (uint64_t i = 0; i < FILL_ENTRIES; i++) {
        kvw_key(9, i, key);
        kvw_value(9, i, val);
        CHECK_EQ_LONG(op(c, ISOB_ENTRY_KV_SET, key, sizeof key, val, sizeof val), 0);
    }
    int64_t st[4];
    CHECK_EQ_LONG(stats(c, st), FILL_ENTRIES);
    size_t data = (size_t)FILL_ENTRIES * KVW_VALUE_BYTES;
    fprintf(stderr, "# %s: data %zu, store %lld, heap %lld\n", cur->name, data, (long long)st[1],
            (long long)st[2]);
    CHECK(st[1] > (int64_t)data);
    CHECK(st[1] < 2 * (int64_t)data);
    CHECK_EQ_LONG(st[2], heap);
    for (uint64_t i = 0; i < FILL_ENTRIES; i++) {
        kvw_key(9, i, key);
        long got = op(c, ISOB_ENTRY_KV_GET, key, sizeof key, NULL, 0);
        CHECK_EQ_LONG(kvw_verify(9, i, got, m->data, why, sizeof why), 0);
    }
    long last = 0;
    uint64_t extra = 0;
    for (; extra < FILL_ENTRIES && last == 0; extra++) {
        kvw_key(9, FILL_ENTRIES + extra, key);
        kvw_value(9, FILL_ENTRIES + extra, val);
        last = op(c, ISOB_ENTRY_KV_SET, key, sizeof key, val, sizeof val);
    }
    fprintf(stderr, "# %s: %llu more entries fitted\n", cur->name, (unsigned long long)extra - 1);
    CHECK_EQ_LONG(last, -ENOSPC);
    for (uint64_t i = 0; i < FILL_ENTRIES; i += 97) {
        kvw_key(9, i, key);
        long got = op(c, ISOB_ENTRY_KV_GET, key, sizeof key, NULL, 0);
        CHECK_EQ_LONG(kvw_verify(9, i, got, m->data, why, sizeof why), 0);
    }
    isob_comp_destroy(c);
}

/* The sweep's sizes, filled in process (no mechanism) up to 16 MiB, and
 * by the layout's own arithmetic beyond: every store stays within 2x, not
 * counting its fixed header (free-list heads and counters, about 1.3 KiB,
 * a third of the smallest size on its own). */
static void t_sizing_within_twice_the_data(void)
{
    for (size_t data = 4096; data <= ((size_t)256 << 20); data *= 4) {
        size_t n = data / KVW_VALUE_BYTES;
        size_t heap = isob_kv_heap_size(n, KVW_KEY_BYTES, KVW_VALUE_BYTES);
        unsigned char *h = calloc(1, heap);
        CHECK(h != NULL);
        struct isob_trusted *t = isob_trusted_init(h, heap);
        CHECK(t != NULL);
        struct isob_msg *m = calloc(1, sizeof *m + 4096);
        CHECK(m != NULL);
        size_t filled = data <= ((size_t)16 << 20) ? n : 0;
        for (uint64_t i = 0; i < filled; i++) {
            kvw_key(3, i, m->data);
            kvw_value(3, i, m->data + KVW_KEY_BYTES);
            m->arg[0] = KVW_KEY_BYTES;
            m->arg[1] = KVW_VALUE_BYTES;
            m->len = KVW_KEY_BYTES + KVW_VALUE_BYTES;
            CHECK_EQ_LONG(isob_trusted_call(t, ISOB_ENTRY_KV_SET, m, 4096), 0);
        }
        CHECK_EQ_LONG(isob_trusted_call(t, ISOB_ENTRY_KV_STATS, m, 4096), (long)filled);
        /* Unfilled: the records that n sets would add, 96 bytes each. */
        int64_t rec = (int64_t)kv_rec_units(KVW_KEY_BYTES, KVW_VALUE_BYTES) * KV_UNIT;
        int64_t store = m->arg[1] + (int64_t)(n - filled) * rec;
        int64_t fixed = (int64_t)(kv_header_end() - ISOB_KV_OFFSET);
        int64_t slots = m->arg[3];
        fprintf(stderr, "# %zu bytes: store %lld (%.2fx), heap %zu, load %.2f\n", data, (long long)store,
                (double)store / (double)data, heap, (double)n / (double)slots);
        CHECK(store - fixed < 2 * (int64_t)data);
        CHECK((uint64_t)n * KV_LOAD_DEN <= (uint64_t)slots * KV_LOAD_NUM);
        free(m);
        free(h);
    }
}

/* The verifier fails every wrong reply: a wrong length, an error, any
 * single flipped byte, another entry's value; and passes the right one. */
static void t_verifier_detects_corruption(void)
{
    unsigned char v[KVW_VALUE_BYTES], other[KVW_VALUE_BYTES];
    char why[200];
    kvw_value(5, 42, v);
    CHECK_EQ_LONG(kvw_verify(5, 42, KVW_VALUE_BYTES, v, why, sizeof why), 0);
    CHECK(kvw_verify(5, 42, KVW_VALUE_BYTES - 1, v, why, sizeof why) != 0);
    CHECK(strstr(why, "returned 63") != NULL);
    CHECK(kvw_verify(5, 42, KVW_VALUE_BYTES + 1, v, why, sizeof why) != 0);
    CHECK(kvw_verify(5, 42, -ENOENT, v, why, sizeof why) != 0);
    for (int b = 0; b < KVW_VALUE_BYTES; b++) {
        for (int bit = 0; bit < 8; bit++) {
            v[b] ^= (unsigned char)(1u << bit);
            CHECK(kvw_verify(5, 42, KVW_VALUE_BYTES, v, why, sizeof why) != 0);
            v[b] ^= (unsigned char)(1u << bit);
        }
        char want[32];
        snprintf(want, sizeof want, "byte %d ", b);
        v[b] ^= 0x80;
        kvw_verify(5, 42, KVW_VALUE_BYTES, v, why, sizeof why);
        CHECK(strstr(why, want) != NULL);
        v[b] ^= 0x80;
    }
    kvw_value(5, 43, other);
    CHECK(kvw_verify(5, 42, KVW_VALUE_BYTES, other, why, sizeof why) != 0);
    kvw_value(6, 42, other);
    CHECK(kvw_verify(5, 42, KVW_VALUE_BYTES, other, why, sizeof why) != 0);
    /* Keys are distinct across many entries (the bijection at work). */
    enum { NK = 4096 };
    static unsigned char keys[NK][KVW_KEY_BYTES];
    for (uint64_t i = 0; i < NK; i++)
        kvw_key(5, i, keys[i]);
    for (size_t i = 0; i < NK; i++)
        for (size_t j = i + 1; j < NK; j++)
            CHECK(memcmp(keys[i], keys[j], KVW_KEY_BYTES) != 0);
}

/* ---- the benchmark end to end, on a fake clock ----
 * A mechanism like direct whose every call costs CALL_COST fake ticks and
 * which can corrupt the reply of one chosen get. */
#define READ_COST 7
#define CALL_COST 100

extern const struct isob_mechanism isob_mech_direct;
static struct isob_fake_clock fake;
static long gets_seen, corrupt_get = -1;
/* --reading for run_kv (NULL: the default). */
static const char *kv_reading;

/* A fake perf group read through read(2), for the PMU branch: every
 * reading advances the events by PF_READ, every call by PF_CALL, and every
 * PF_MUX_EVERY-th reading comes back multiplexed (so its sample is dropped). */
static const uint64_t PF_READ[4] = {10, 5, 1, 0}, PF_CALL[4] = {100, 40, 2, 1};
#define PF_FD0 200
#define PF_MUX_EVERY 50
static struct {
    uint64_t v[4];
    unsigned reads;
    int next_fd;
    struct perf_event_mmap_page page[4];
} pf = {.next_fd = PF_FD0};

static int pf_open(struct perf_event_attr *a, pid_t pid, int cpu, int group, unsigned long flags)
{
    (void)a, (void)pid, (void)cpu, (void)group, (void)flags;
    CHECK(pf.next_fd < PF_FD0 + 4);
    return pf.next_fd++;
}
/* A zeroed control page does not allow rdpmc: readings take read(2). */
static void *pf_mmap(int fd, size_t len) { (void)len; return &pf.page[fd - PF_FD0]; }
static int pf_munmap(void *a, size_t len) { (void)a, (void)len; return 0; }
static int pf_close(int fd) { (void)fd; return 0; }
static uint64_t pf_rdpmc(uint32_t idx) { (void)idx; return 0; }
static uint32_t pf_getcpu(void) { return 0; }
static ssize_t pf_read(int fd, void *buf, size_t len)
{
    (void)fd;
    uint64_t *u = buf;
    CHECK(len >= 7 * sizeof *u);
    u[0] = 4;
    u[1] = 1000;
    u[2] = ++pf.reads % PF_MUX_EVERY == 0 ? 999 : 1000;
    for (int e = 0; e < 4; e++)
        u[3 + e] = pf.v[e] += PF_READ[e];
    return 7 * sizeof *u;
}
static const struct isob_perf_sys pf_sys = {
    .open = pf_open, .mmap = pf_mmap, .munmap = pf_munmap, .read = pf_read,
    .close = pf_close, .rdpmc = pf_rdpmc, .getcpu = pf_getcpu,
};

static long fake_call(struct isob_comp *c, unsigned entry)
{
    fake.now += CALL_COST;
    for (int e = 0; e < 4; e++)
        pf.v[e] += PF_CALL[e];
    long r = isob_mech_direct.call(c, entry);
    if (entry == ISOB_ENTRY_KV_GET && gets_seen++ == corrupt_get)
        isob_mech_direct.shared(c)->data[17] ^= 0x04;
    return r;
}

static int fake_probe(char *why, size_t len)
{
    (void)why;
    (void)len;
    return 0;
}
static int fake_create(const struct isob_comp_spec *s, struct isob_comp **o) { return isob_mech_direct.create(s, o); }
static struct isob_msg *fake_shared(struct isob_comp *c) { return isob_mech_direct.shared(c); }
static void fake_destroy(struct isob_comp *c) { isob_mech_direct.destroy(c); }

static const struct isob_mechanism fake_mech = {
    .name = "test-kv-fake", .summary = "direct at a fake cost", .props = ISOB_TEST_ONLY,
    .probe = fake_probe, .create = fake_create, .call = fake_call, .shared = fake_shared,
    .destroy = fake_destroy,
};

/* Run the kv benchmark on fake_mech with one data size; returns its
 * output (malloc'ed) and whether it failed.  perf: count with the fake
 * perf group instead of the fake clock. */
static char *run_kv(size_t data, size_t n, int *failed, int perf)
{
    const struct isob_bench *b = isob_bench_find("kv");
    CHECK(b != NULL);
    fake.now = 0;
    fake.read_cost = READ_COST;
    gets_seen = 0;
    struct isob_counter ctr;
    isob_counter_init_fake(&ctr, &fake);
    if (perf) {
        char why[256] = "";
        int rc = isob_perf_open(&ctr.perf, &pf_sys, ISOB_SCOPE_THREAD, -1, why, sizeof why);
        if (rc)
            fprintf(stderr, "# perf open: %s\n", why);
        CHECK_EQ_LONG(rc, 0);
        CHECK_EQ_LONG(ctr.perf.nev, 4);
        ctr.backend = ISOB_BACKEND_PERF;
        ctr.name = "perf";
        ctr.unit = "cycles";
        ctr.nev = ctr.perf.nev;
        for (unsigned e = 0; e < ctr.nev; e++)
            ctr.event_names[e] = ctr.perf.names[e];
    }
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    CHECK(f != NULL);
    struct isob_bench_ctx ctx = {
        .ctr = &ctr, .mech = &fake_mech, .out = f,
        .opts = {.n = n, .placements = 1u << ISOB_PLACE_SAME_CPU, .client_cpu = -1, .nsizes = 1,
                 .sizes = {data}, .seed = 11, .reading = kv_reading},
    };
    CHECK_EQ_LONG(b->run(&ctx), 0);
    fclose(f);
    *failed = ctx.failed;
    return out;
}

/* The line of the result with this variant. */
static char *line_of(char *out, const char *variant)
{
    char want[64];
    snprintf(want, sizeof want, "\"variant\":\"%s\"", variant);
    char *p = strstr(out, want);
    CHECK(p != NULL);
    char *start = p;
    while (start > out && start[-1] != '\n')
        start--;
    char *end = strchr(p, '\n');
    CHECK(end != NULL);
    *end = 0;
    return start;
}

static void t_bench_measures_and_verifies(void)
{
    int failed = 1;
    /* 64 entries and --n 200: ceil(200 / 64) = 4 measured passes. */
    char *out = run_kv(4096, 200, &failed, 0);
    CHECK_EQ_LONG(failed, 0);
    char *set = line_of(out, "set"), *warm = line_of(set + strlen(set) + 1, "warmup");
    char *get = line_of(warm + strlen(warm) + 1, "get");
    CHECK(strstr(set, "\"status\":\"ok\"") && strstr(set, "\"verified\":64,"));
    CHECK(strstr(warm, "\"status\":\"ok\"") && strstr(warm, "\"requests\":64,"));
    CHECK(strstr(get, "\"status\":\"ok\""));
    CHECK(strstr(get, "\"iterations\":4,") && strstr(get, "\"requests\":256,"));
    CHECK(strstr(get, "\"verified\":256,") && strstr(get, "\"n\":256,"));
    /* The warm-up's gets are counted as warm-up, not as measured. */
    CHECK(strstr(get, "\"warmup\":64,"));
    /* A sample spans the call and one reading: exactly CALL_COST + READ_COST. */
    CHECK(strstr(get, "\"mean\":107,"));
    CHECK(strstr(get, "\"samples\":[107,107,"));
    CHECK(strstr(get, "\"pmu_reason\":\"fake clock for tests\""));
    CHECK(strstr(get, "\"data_bytes\":4096,") && strstr(get, "\"store_bytes\":"));
    free(out);
}

static void t_bench_fails_on_a_corrupted_value(void)
{
    int failed = 0;
    /* Get number 64 + 10 is in the first measured pass. */
    corrupt_get = 64 + 10;
    char *out = run_kv(4096, 200, &failed, 0);
    CHECK_EQ_LONG(failed, 1);
    char *warm = line_of(out, "warmup");
    CHECK(strstr(warm, "\"status\":\"ok\""));
    char *get = line_of(warm + strlen(warm) + 1, "get");
    CHECK(strstr(get, "\"status\":\"failed\""));
    CHECK(strstr(get, "1 of 64 requests wrong") && strstr(get, "wrong value: byte 17"));
    /* Nothing of a failed result is offered as a measurement. */
    CHECK(strstr(get, "\"n\":0,") && !strstr(get, "\"samples\""));
    free(out);
}

/* --reading per-pass: one sample per pass, the pass's count over its 64
 * gets, so the reading's cost is shared out: (64 * CALL_COST + READ_COST)
 * / 64 rounds to CALL_COST, where per-request counts CALL_COST + READ_COST.
 * Both readings on one store: a get phase each, the other phases once. */
static void t_bench_reads_per_pass(void)
{
    int failed = 1;
    corrupt_get = -1;
    kv_reading = "per-pass";
    char *out = run_kv(4096, 200, &failed, 0);
    CHECK_EQ_LONG(failed, 0);
    char *set = line_of(out, "set");
    CHECK(strstr(set, "\"reading\":\"per-request\""));
    char *get = line_of(set + strlen(set) + 1, "get");
    CHECK(strstr(get, "\"status\":\"ok\"") && strstr(get, "\"reading\":\"per-pass\""));
    CHECK(strstr(get, "\"iterations\":4,") && strstr(get, "\"requests\":256,"));
    CHECK(strstr(get, "\"n\":4,") && strstr(get, "\"samples\":[100,100,100,100]"));
    /* The exact mean: 4 passes of 64 gets and one reading each, over 256 gets. */
    CHECK(strstr(get, "\"mean\":100.109375,"));
    free(out);

    kv_reading = "per-request,per-pass";
    out = run_kv(4096, 200, &failed, 0);
    CHECK_EQ_LONG(failed, 0);
    char *each = line_of(out, "get");
    char *whole = line_of(each + strlen(each) + 1, "get");
    CHECK(strstr(each, "\"reading\":\"per-request\"") && strstr(each, "\"mean\":107,"));
    CHECK(strstr(whole, "\"reading\":\"per-pass\"") && strstr(whole, "\"n\":4,"));
    /* set and warmup ran once: before line_of cut the lines, out held one each. */
    CHECK(strstr(whole + strlen(whole) + 1, "\"variant\":\"get\"") == NULL);
    free(out);

    /* A wrong reply in a per-pass pass fails the phase, no sample offered. */
    kv_reading = "per-pass";
    corrupt_get = 64 + 10;
    out = run_kv(4096, 200, &failed, 0);
    CHECK_EQ_LONG(failed, 1);
    get = line_of(out, "get");
    CHECK(strstr(get, "\"status\":\"failed\"") && strstr(get, "1 of 64 requests wrong"));
    CHECK(strstr(get, "\"n\":0,") && !strstr(get, "\"samples\""));
    corrupt_get = -1;
    kv_reading = NULL;
    free(out);
}

/* More requests than the sample cap: every stride-th is kept, the mean
 * still covers all of them. */
static void t_bench_samples_are_bounded(void)
{
    int failed = 1;
    /* 70000 entries, 3 passes: 210000 gets, every 4th kept. */
    char *out = run_kv((size_t)70000 * 64, 1, &failed, 0);
    CHECK_EQ_LONG(failed, 0);
    char *get = line_of(out, "get");
    CHECK(strstr(get, "\"requests\":210000,") && strstr(get, "\"sample_stride\":4,"));
    CHECK(strstr(get, "\"n\":52500,") && strstr(get, "\"mean\":107,"));
    free(out);
}

/* With a PMU, samples carry the other events, params their means and
 * the CPI, and a dropped (multiplexed) sample is left out of every mean. */
static void t_bench_reports_pmu_events(void)
{
    int failed = 1;
    char *out = run_kv(4096, 200, &failed, 1);
    CHECK_EQ_LONG(failed, 0);
    char *get = line_of(out, "get");
    CHECK(strstr(get, "\"status\":\"ok\"") && strstr(get, "\"unit\":\"cycles\""));
    CHECK(strstr(get, "\"mean\":110,"));
    CHECK(strstr(get, "\"instructions_per_request\":45,"));
    CHECK(strstr(get, "\"dTLB-load-misses_per_request\":3,"));
    CHECK(strstr(get, "\"iTLB-load-misses_per_request\":1,"));
    CHECK(strstr(get, "\"cpi\":2.44444"));
    CHECK(!strstr(get, "pmu_reason"));
    CHECK(strstr(get, "\"samples\":[110,"));
    CHECK(strstr(get, "\"instructions\":[45,45,"));
    /* 256 measured gets make 512 readings, about ten of them multiplexed:
     * their requests are verified but not measured. */
    CHECK(strstr(get, "\"verified\":256,") && strstr(get, "\"requests\":256,"));
    CHECK(strstr(get, "\"n\":246,\"dropped\":10,"));
    free(out);
}

/* The size budget of the kv sweep (kvw_size_over_budget, as kv.c applies
 * it): the baseline is never skipped, and a size is judged at the last
 * size's measured pace, not at that pace grown by its own growth. */
static void t_size_budget(void)
{
    const uint64_t quick = 15000000000ull;
    size_t mib16 = (16u << 20) / KVW_VALUE_BYTES;
    /* 16 MiB at 100 us a request: 79 s, over 15 s; skipped for a
     * mechanism, never for `direct`, whatever its prediction says. */
    CHECK(kvw_size_over_budget(100000.0, mib16, 1, quick, 0));
    CHECK(!kvw_size_over_budget(100000.0, mib16, 1, quick, 1));
    /* 4 MiB measured at 15 us a request under load (3x the 5 us of 1 MiB):
     * 16 MiB at 15 us is 11.8 s and runs; the pace grown by its growth
     * (45 us: 35 s) skipped it. */
    double at_1mib = 5000.0, at_4mib = 15000.0;
    CHECK(!kvw_size_over_budget(at_4mib, mib16, 1, quick, 0));
    CHECK(kvw_size_over_budget(at_4mib * (at_4mib / at_1mib), mib16, 1, quick, 0));
    /* No size measured yet: nothing is predicted, the first size runs. */
    CHECK(!kvw_size_over_budget(0.0, mib16, 1, quick, 0));
}

int main(void)
{
    char name[128];
    for (size_t i = 0; i < sizeof store_mechs / sizeof store_mechs[0]; i++) {
        cur = isob_mechanism_find(store_mechs[i]);
        if (!cur) {
            printf("ok %d - %s # SKIP not built\n", ++tap_n, store_mechs[i]);
            continue;
        }
#define RUN(fn)                                                  \
        snprintf(name, sizeof name, "%s: %s", cur->name, #fn);   \
        tap_run(name, fn)
        RUN(t_store_matches_reference);
        RUN(t_store_large_values_match_reference);
        RUN(t_store_dense_table_deletes);
        RUN(t_store_limits_and_errors);
        RUN(t_store_conditions_and_cas);
        RUN(t_store_incr_append);
        RUN(t_store_append_evicts_others);
        RUN(t_store_expiry);
        RUN(t_store_evicts_when_asked);
        RUN(t_store_absent_in_small_heap);
        RUN(t_store_fills_to_sizing_target);
#undef RUN
    }
    TAP_CASE(t_size_classes);
    TAP_CASE(t_sizing_within_twice_the_data);
    TAP_CASE(t_verifier_detects_corruption);
    TAP_CASE(t_bench_measures_and_verifies);
    TAP_CASE(t_bench_fails_on_a_corrupted_value);
    TAP_CASE(t_bench_samples_are_bounded);
    TAP_CASE(t_bench_reads_per_pass);
    TAP_CASE(t_bench_reports_pmu_events);
    TAP_CASE(t_size_budget);
    return tap_done();
}
