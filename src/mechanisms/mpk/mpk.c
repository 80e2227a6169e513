/* mpk and mpk-bridge: Intel Memory Protection Keys call gates (ERIM).
 *
 * The compartment lives in the caller's address space.  Its trusted memory
 * (one page of gate state, then the trusted heap with the trusted
 * component's state at its start) is tagged with a protection key of its
 * own; outside calls the thread's PKRU denies that key both access and
 * write.  A call opens the key with WRPKRU, runs the entry, closes the key
 * with WRPKRU, and then reads PKRU back and compares it with the closed
 * value kept in the protected gate state, aborting on a mismatch: the
 * complete ERIM gate, whose published benchmark left the check out.  The
 * message buffer keeps pkey 0, so both sides can reach it.
 *
 * `mpk` inlines the gate into the call op; `mpk-bridge` calls a separate,
 * never-inlined bridge function that holds the gate, as ERIM's "overlay"
 * call kind does when the trusted code sits behind a library boundary.
 *
 * Threat model: the untrusted side may read and write any memory it can
 * address, but it does not run WRPKRU itself (ERIM ensures that with a
 * binary inspection that isobench does not do) and the kernel is trusted. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "isobench/mechanism.h"
#include "mpk.h"

#if defined(__x86_64__)

#include <cpuid.h>
#include <sys/syscall.h>

#include "isobench/arch_x86.h"

/* CPUID leaf 7, subleaf 0, ECX: the CPU has protection keys (PKU), and the
 * OS has set CR4.PKE so that RDPKRU and WRPKRU work (OSPKE). */
#define MPK_CPUID_LEAF 7
#define MPK_ECX_PKU (1u << 3)
#define MPK_ECX_OSPKE (1u << 4)

/* PKRU holds two bits per key: access disable (AD) and write disable (WD). */
#define MPK_PKRU_AD 1u
#define MPK_PKRU_WD 2u
#define MPK_PKRU_DENY(key) ((MPK_PKRU_AD | MPK_PKRU_WD) << (2 * (key)))

/* glibc has wrapped the pkey system calls since 2.27; older C libraries get
 * the raw system calls, whose numbers the kernel headers provide. */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 27))
#define mpk_pkey_alloc(flags, rights) pkey_alloc(flags, rights)
#define mpk_pkey_free(key) pkey_free(key)
#define mpk_pkey_mprotect(p, len, prot, key) pkey_mprotect(p, len, prot, key)
#else
#define PKEY_DISABLE_ACCESS 0x1
#define PKEY_DISABLE_WRITE 0x2
#define mpk_pkey_alloc(flags, rights) ((int)syscall(SYS_pkey_alloc, flags, rights))
#define mpk_pkey_free(key) ((int)syscall(SYS_pkey_free, key))
#define mpk_pkey_mprotect(p, len, prot, key) ((int)syscall(SYS_pkey_mprotect, p, len, prot, key))
#endif

/* The bridge must stay a real call: noipa also keeps GCC from cloning it
 * or specialising it for its one caller, which would make it an inlined
 * gate in disguise. */
#if defined(__has_attribute)
#if __has_attribute(noipa)
#define MPK_BRIDGE_FN __attribute__((noipa))
#endif
#endif
#ifndef MPK_BRIDGE_FN
#define MPK_BRIDGE_FN __attribute__((noinline))
#endif

/* The first page of the protected region.  It holds what the gate trusts:
 * the untrusted side can corrupt the compartment descriptor, which lives
 * in ordinary memory, but not this. */
struct mpk_state {
    uint32_t pkru_closed;    /* the PKRU value every call must end with */
};

struct mpk_comp {
    struct isob_comp base;
    /* What the gate reads on every call, together. */
    uint32_t pkru_open;      /* the caller's PKRU with the key allowed */
    uint32_t pkru_closed;    /* the caller's PKRU with the key denied */
    struct isob_trusted *t;
    struct isob_msg *msg;
    struct mpk_state *st;
    /* Set-up and tear-down only. */
    int pkey;
    void *region;            /* gate state page + trusted heap, under pkey */
    size_t region_size, shared_size;
};

/* The gate.  The "memory" clobbers of isob_wrpkru keep the compiler from
 * moving accesses to the trusted memory out of the open window, and the
 * expected closed value is loaded inside it, from protected memory. */
static inline __attribute__((always_inline)) long mpk_gate(struct mpk_comp *m, unsigned entry)
{
    isob_wrpkru(m->pkru_open);
    long ret = isob_trusted_call(m->t, entry, m->msg, m->base.data_cap);
    uint32_t expect = m->st->pkru_closed;
    isob_wrpkru(m->pkru_closed);
    /* A gate that returned with the key open would silently give the
     * untrusted side the trusted memory; dying is the only safe answer. */
    if (__builtin_expect(isob_rdpkru() != expect, 0))
        abort();
    return ret;
}

static MPK_BRIDGE_FN long mpk_bridge(struct mpk_comp *m, unsigned entry)
{
    return mpk_gate(m, entry);
}

static int mpk_probe(char *why, size_t len)
{
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(MPK_CPUID_LEAF, 0, &a, &b, &c, &d) || !(c & MPK_ECX_PKU)) {
        snprintf(why, len, "CPU has no PKU (CPUID.7:ECX.PKU=0)");
        return -ENOTSUP;
    }
    if (!(c & MPK_ECX_OSPKE)) {
        snprintf(why, len, "kernel has not enabled PKU (CPUID.7:ECX.OSPKE=0)");
        return -ENOTSUP;
    }
    /* A CPU with PKU is not enough: the kernel may be built without pkeys
     * support or booted with nopku (EINVAL), or have none left (ENOSPC). */
    int key = mpk_pkey_alloc(0, 0);
    if (key < 0) {
        snprintf(why, len, "kernel refuses pkeys: pkey_alloc: %s", strerror(errno));
        return -ENOTSUP;
    }
    mpk_pkey_free(key);
    return 0;
}

static void mpk_free(struct mpk_comp *m)
{
    /* Unmap before freeing the key, so that a later pkey_alloc never hands
     * out a key that still tags pages. */
    isob_unmap(m->region, m->region_size);
    isob_unmap(m->msg, m->shared_size);
    if (m->pkey >= 0)
        mpk_pkey_free(m->pkey);
    free(m);
}

static int mpk_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    if (spec->shared_size <= sizeof(struct isob_msg))
        return -EINVAL;
    struct mpk_comp *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    /* The key is born denied in this thread, so the trusted memory is
     * never open outside the gate, not even during set-up. */
    m->pkey = mpk_pkey_alloc(0, PKEY_DISABLE_ACCESS | PKEY_DISABLE_WRITE);
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
        mpk_free(m);
        return -ENOMEM;
    }
    m->st = m->region;
    m->t = isob_trusted_init((unsigned char *)m->region + page, heap_size);
    if (!m->t) {
        mpk_free(m);
        return -EINVAL;
    }
    m->pkru_closed = isob_rdpkru() | MPK_PKRU_DENY(m->pkey);
    m->pkru_open = m->pkru_closed & ~MPK_PKRU_DENY(m->pkey);
    m->st->pkru_closed = m->pkru_closed;
    /* Written while the region still has pkey 0; from here on only the
     * gate can reach it. */
    if (mpk_pkey_mprotect(m->region, m->region_size, PROT_READ | PROT_WRITE, m->pkey) != 0) {
        int err = -errno;
        mpk_free(m);
        return err;
    }
    m->base.data_cap = m->shared_size - sizeof(struct isob_msg);
    *out = &m->base;
    return 0;
}

static long mpk_call(struct isob_comp *c, unsigned entry)
{
    return mpk_gate((struct mpk_comp *)c, entry);
}

static long mpk_bridge_call(struct isob_comp *c, unsigned entry)
{
    return mpk_bridge((struct mpk_comp *)c, entry);
}

static struct isob_msg *mpk_shared(struct isob_comp *c)
{
    return ((struct mpk_comp *)c)->msg;
}

static void mpk_destroy(struct isob_comp *c)
{
    mpk_free((struct mpk_comp *)c);
}

static int mpk_is_ours(struct isob_comp *c);

int isob_mpk_test_pkey(struct isob_comp *c)
{
    return mpk_is_ours(c) ? ((struct mpk_comp *)c)->pkey : -1;
}

void isob_mpk_test_corrupt_gate(struct isob_comp *c)
{
    if (mpk_is_ours(c))
        ((struct mpk_comp *)c)->pkru_closed = ((struct mpk_comp *)c)->pkru_open;
}

#else /* !__x86_64__ */

/* Protection keys of other architectures (arm64 POE, POWER) need their own
 * gate; until one is written the mechanisms say so and do nothing. */
static int mpk_probe(char *why, size_t len)
{
    snprintf(why, len, "Intel MPK needs x86-64");
    return -ENOTSUP;
}

static int mpk_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    (void)spec;
    (void)out;
    return -ENOTSUP;
}

static long mpk_call(struct isob_comp *c, unsigned entry)
{
    (void)c;
    (void)entry;
    return -ENOTSUP;
}

#define mpk_bridge_call mpk_call

static struct isob_msg *mpk_shared(struct isob_comp *c)
{
    (void)c;
    return NULL;
}

static void mpk_destroy(struct isob_comp *c)
{
    (void)c;
}

int isob_mpk_test_pkey(struct isob_comp *c)
{
    (void)c;
    return -1;
}

void isob_mpk_test_corrupt_gate(struct isob_comp *c)
{
    (void)c;
}

#endif

/* What an access to a page whose key PKRU denies raises (older C
 * libraries lack the name; the kernel's value is 4). */
#ifndef SEGV_PKUERR
#define SEGV_PKUERR 4
#endif

const struct isob_mechanism isob_mech_mpk = {
    .name = "mpk",
    .summary = "Intel MPK: trusted heap under its own pkey; WRPKRU call gate inlined in the call",
    .props = ISOB_ISOLATES_MEMORY,
    .result_params = "\"gate\":\"inline\"",
    .fault_code = SEGV_PKUERR,
    .probe = mpk_probe,
    .create = mpk_create,
    .call = mpk_call,
    .shared = mpk_shared,
    .destroy = mpk_destroy,
};

const struct isob_mechanism isob_mech_mpk_bridge = {
    .name = "mpk-bridge",
    .summary = "Intel MPK: as mpk, but the gate is a separate noinline bridge function (ERIM overlay)",
    .props = ISOB_ISOLATES_MEMORY,
    .result_params = "\"gate\":\"bridge\"",
    .fault_code = SEGV_PKUERR,
    .probe = mpk_probe,
    .create = mpk_create,
    .call = mpk_bridge_call,
    .shared = mpk_shared,
    .destroy = mpk_destroy,
};

#if defined(__x86_64__)
static int mpk_is_ours(struct isob_comp *c)
{
    return c && (c->mech == &isob_mech_mpk || c->mech == &isob_mech_mpk_bridge);
}
#endif
