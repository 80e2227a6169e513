/* A test-only copy of the MPK gate that isobench had before its gate was
 * made complete, kept so that the attacks of mpk_attacks.c can be shown to
 * catch what they are there to catch.  It is not in the mechanism registry
 * (the VM test reaches it through mpk_legacy_mech), and nothing but
 * tests/vm builds it.
 *
 * Its flaws, each of which an attack exploits: the values the WRPKRUs
 * write, the pointer to the expected closed value, the trusted-state
 * pointer and the message pointer all live in the descriptor, which is
 * ordinary memory; the expected value is loaded into a register before the
 * closing WRPKRU, so a jump to that WRPKRU with chosen registers passes the
 * check; and the trusted code runs on the caller's stack. */
#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "isobench/arch_x86.h"
#include "mpk_vm.h"

/* The first page of the protected region: the expected closed value. */
struct legacy_state {
    uint32_t pkru_closed;
};

struct legacy_comp {
    struct isob_comp base;
    uint32_t pkru_open;
    uint32_t pkru_closed;
    struct isob_trusted *t;
    struct isob_msg *msg;
    struct legacy_state *st;
    int pkey;
    void *region;            /* gate state page + trusted heap, under pkey */
    size_t region_size, shared_size;
};

/* The gate, as it was: the values and pointers come from the descriptor,
 * and the expected value is read inside the window but before the
 * closing WRPKRU. */
static inline __attribute__((always_inline)) long legacy_gate(struct legacy_comp *m, unsigned entry)
{
    isob_wrpkru(m->pkru_open);
    long ret = isob_trusted_call(m->t, entry, m->msg, m->base.data_cap);
    uint32_t expect = m->st->pkru_closed;
    isob_wrpkru(m->pkru_closed);
    if (__builtin_expect(isob_rdpkru() != expect, 0))
        abort();
    return ret;
}

static int legacy_probe(char *why, size_t len)
{
    return isob_mechanism_find("mpk")->probe(why, len);
}

static void legacy_free(struct legacy_comp *m)
{
    isob_unmap(m->region, m->region_size);
    isob_unmap(m->msg, m->shared_size);
    if (m->pkey >= 0)
        pkey_free(m->pkey);
    free(m);
}

static int legacy_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    struct legacy_comp *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->pkey = pkey_alloc(0, PKEY_DISABLE_ACCESS | PKEY_DISABLE_WRITE);
    if (m->pkey < 0) {
        int err = -errno;
        free(m);
        return err;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t heap_size = (spec->heap_size + page - 1) / page * page;
    m->shared_size = spec->shared_size;
    m->region_size = page + heap_size;
    m->msg = isob_map(m->shared_size, 0);
    m->region = isob_map(m->region_size, 0);
    if (!m->msg || !m->region) {
        legacy_free(m);
        return -ENOMEM;
    }
    m->st = m->region;
    m->t = isob_trusted_init((unsigned char *)m->region + page, heap_size);
    if (!m->t) {
        legacy_free(m);
        return -EINVAL;
    }
    m->pkru_closed = isob_rdpkru() | (3u << (2 * m->pkey));
    m->pkru_open = m->pkru_closed & ~(3u << (2 * m->pkey));
    m->st->pkru_closed = m->pkru_closed;
    if (pkey_mprotect(m->region, m->region_size, PROT_READ | PROT_WRITE, m->pkey) != 0) {
        int err = -errno;
        legacy_free(m);
        return err;
    }
    m->base.data_cap = m->shared_size - sizeof(struct isob_msg);
    *out = &m->base;
    return 0;
}

/* The gate must stay in this one function, whose WRPKRUs the view finds
 * by scanning its code: noipa (GCC) also forbids clones of it. */
#if defined(__has_attribute)
#if __has_attribute(noipa)
#define LEGACY_FN __attribute__((noipa))
#endif
#endif
#ifndef LEGACY_FN
#define LEGACY_FN __attribute__((noinline))
#endif

LEGACY_FN static long legacy_call(struct isob_comp *c, unsigned entry)
{
    return legacy_gate((struct legacy_comp *)c, entry);
}

static struct isob_msg *legacy_shared(struct isob_comp *c)
{
    return ((struct legacy_comp *)c)->msg;
}

static void legacy_destroy(struct isob_comp *c)
{
    legacy_free((struct legacy_comp *)c);
}

const struct isob_mechanism mpk_legacy_mech = {
    .name = "mpk-legacy",
    .summary = "test fixture: the MPK gate before it was made complete",
    .props = ISOB_ISOLATES_MEMORY | ISOB_TEST_ONLY,
    .probe = legacy_probe,
    .create = legacy_create,
    .call = legacy_call,
    .shared = legacy_shared,
    .destroy = legacy_destroy,
};

/* The gate's two WRPKRUs are the first two WRPKRU encodings from the start
 * of legacy_call: it has exactly those two, and nothing before them. */
#define LEGACY_SCAN_BYTES 512

static struct isob_mpk_site legacy_sites[2];

int mpk_legacy_view(struct isob_comp *c, struct isob_mpk_view *v)
{
    memset(v, 0, sizeof *v);
    if (c->mech != &mpk_legacy_mech)
        return -EINVAL;
    struct legacy_comp *m = (struct legacy_comp *)c;
    const unsigned char *code = (const unsigned char *)(uintptr_t)legacy_call;
    size_t found = 0;
    for (size_t i = 0; i + 3 <= LEGACY_SCAN_BYTES && found < 2; i++) {
        if (code[i] == 0x0f && code[i + 1] == 0x01 && code[i + 2] == 0xef) {
            legacy_sites[found].addr = code + i;
            legacy_sites[found].gate = MPK_GATE_INLINE;
            legacy_sites[found].role = found == 0 ? MPK_ROLE_OPEN : MPK_ROLE_CLOSE;
            found++;
        }
    }
    if (found != 2)
        return -ENOENT;
    v->pkey = m->pkey;
    v->pkru_open = m->pkru_open;
    v->msg = m->msg;
    v->table = m->t;
    v->d_pkru_open = &m->pkru_open;
    v->d_pkru_closed = &m->pkru_closed;
    v->d_expect = (void **)&m->st;
    v->d_table = (void **)&m->t;
    v->d_msg = (void **)&m->msg;
    v->gate_state = m->st;
    v->gate_state_len = (size_t)sysconf(_SC_PAGESIZE);
    v->descriptor = m;
    v->descriptor_len = sizeof *m;
    v->gate = MPK_GATE_INLINE;
    v->sites = legacy_sites;
    v->n_sites = 2;
    return 0;
}
