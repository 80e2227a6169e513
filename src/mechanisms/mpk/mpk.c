/* mpk and mpk-bridge: Intel Memory Protection Keys with ERIM's call gate.
 *
 * The compartment lives in the caller's address space.  Its trusted memory
 * (a stack for the trusted side, then the trusted heap with the trusted
 * component's state at its start) and its gate state (one page of the
 * isob_mpk_slots array, see gate.h) are tagged with a protection key of
 * its own, which the caller's PKRU denies outside calls.  The gate itself
 * is assembly (gate_x86.S): it opens the key, checks inside the window that
 * exactly the key it computed is open and that the slot is live, runs the
 * entry on the trusted stack with the trusted state, buffer and size from
 * the slot, closes with an immediate and checks that too.  The untrusted
 * side gives it only the slot index and the entry number.  The message
 * buffer keeps pkey 0, so both sides reach it.
 *
 * `mpk` is the gate in the call op's own body; `mpk-bridge`'s call op calls
 * the gate as a separate function, as ERIM's call through a function does.
 * Both are reached, like every mechanism, through the ops table's pointer.
 * `mpk` also has ERIM's call kinds (call_kind: the same gate around an
 * empty function inlined, called directly, or called through a pointer in
 * the slot page); `mpk-bridge` has not, as the kinds differ only behind
 * the gate, which both share: one set of them maps each of ERIM's rows to
 * one local configuration.
 *
 * The trusted code the gate runs is the window copy (src/trusted/window.c):
 * it calls nothing outside itself and the kernel, so that no instruction
 * outside the trusted text runs while the key is open (no PLT, no GOT
 * slot; tests/callgraph checks the built binary).
 *
 * Threat model: the untrusted side may write any memory it can address,
 * from any thread, jump to any instruction of the gate, and call any
 * function of the process.  Every create first closes the process's stray
 * WRPKRUs (strays.c: glibc's pkey_set is one call that opens a key): each
 * becomes a trap, as ERIM rewrites what its inspection finds.  XRSTOR
 * sites are left (the dynamic loader's lazy binding runs one; no call
 * reaches it with PKRU selected, only a jump into its middle with chosen
 * registers, which is not defended; `isob inspect` lists each), and the
 * untrusted side replaces no C library
 * function before it creates a compartment: set-up (mpk_create) runs with
 * the new key open from pkey_alloc to isob_mpk_close and calls sysconf,
 * mmap, mprotect and pkey_mprotect meanwhile, and a thread started from a
 * replaced one inherits the open key (tests/vm/mpk_window.c, c_setup).
 * System calls on the key's pages or on keys (pkey_mprotect to key 0,
 * madvise, a key another thread allocated, freed and keeps open) are not
 * filtered either (tests/vm/mpk_kernel.c, c_syscall_undo).  Signals that
 * arrive inside the window, rt_sigreturn of a frame whose PKRU a handler
 * rewrote, and a restartable sequence (rseq) whose abort handler the kernel
 * jumps to, key open, after a preemption inside the window, and io_uring
 * work the kernel finishes as the thread's task work inside the window are
 * not defended against (tests/vm/mpk_kernel.c shows each succeed), and the
 * kernel is trusted.  docs/mechanisms.md says the same at more length. */
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gate.h"
#include "isobench/mechanism.h"
#include "mpk.h"

/* Why the last create failed closing the stray WRPKRUs, "" otherwise. */
static char mpk_why[200];

static const char *mpk_limit_why(void)
{
    return mpk_why[0] ? mpk_why : NULL;
}

#if defined(__x86_64__)

#include <cpuid.h>
#include <sys/syscall.h>

#include "isobench/arch_x86.h"

/* CPUID leaf 7, subleaf 0, ECX: the CPU has protection keys (PKU), and the
 * OS has set CR4.PKE so that RDPKRU and WRPKRU work (OSPKE). */
#define MPK_CPUID_LEAF 7
#define MPK_ECX_PKU (1u << 3)
#define MPK_ECX_OSPKE (1u << 4)

/* Bytes of the trusted stack.  The trusted component's deepest path (a kv
 * entry) needs well under 1 KiB; the rest is margin. */
#define MPK_STACK_SIZE (64u * 1024u)

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

/* The gate state of one compartment: what the gate trusts, in a page that
 * only the compartment's key opens. */
struct mpk_slot {
    uint32_t pkru_open;        /* PKRU inside this compartment's window */
    uint32_t busy;             /* 1 while a call runs on the trusted stack */
    struct isob_trusted *t;
    struct isob_msg *msg;
    uint64_t cap;              /* bytes of msg->data */
    void *stack_top;
    uint64_t calls;            /* calls of ERIM's call kinds */
    long (*fn)(uint64_t *);    /* what the indirect-call kind calls */
};
_Static_assert(offsetof(struct mpk_slot, pkru_open) == MPK_SLOT_PKRU_OPEN, "gate.h");
_Static_assert(offsetof(struct mpk_slot, busy) == MPK_SLOT_BUSY, "gate.h");
_Static_assert(offsetof(struct mpk_slot, t) == MPK_SLOT_TABLE, "gate.h");
_Static_assert(offsetof(struct mpk_slot, msg) == MPK_SLOT_MSG, "gate.h");
_Static_assert(offsetof(struct mpk_slot, cap) == MPK_SLOT_CAP, "gate.h");
_Static_assert(offsetof(struct mpk_slot, stack_top) == MPK_SLOT_STACK, "gate.h");
_Static_assert(offsetof(struct mpk_slot, calls) == MPK_SLOT_CALLS, "gate.h");
_Static_assert(offsetof(struct mpk_slot, fn) == MPK_SLOT_FN, "gate.h");

/* The compartment descriptor, in ordinary memory: the gate reads only
 * `slot` from it; the rest serves shared() and destroy(). */
struct mpk_comp {
    struct isob_comp base;
    uint32_t slot;             /* the index of the gate state; equals pkey */
    int pkey;
    struct isob_msg *msg;
    void *region;              /* guard page, trusted stack, trusted heap */
    size_t region_size, shared_size;
};
_Static_assert(offsetof(struct mpk_comp, slot) == MPK_COMP_SLOT, "gate.h");

/* The gate states, one page per key, addressed by the gate relative to its
 * own code, are defined in gate_x86.S (isob_mpk_slots, declared in mpk.h).
 * mpk_slots_seal makes every page PROT_NONE before main runs, so that no
 * slot can be written, by anyone, before a compartment owns it. */

/* 0, or the negative errno of sealing the slots; the probe reports it. */
static int mpk_slots_err;

__attribute__((constructor)) static void mpk_slots_seal(void)
{
    if (mprotect(isob_mpk_slots, sizeof isob_mpk_slots, PROT_NONE) != 0)
        mpk_slots_err = -errno;
}

/* gate_x86.S. */
long isob_mpk_op_inline(struct isob_comp *c, unsigned entry);
long isob_mpk_gate(unsigned slot, unsigned entry);
long isob_mpk_kind_inline(struct isob_comp *c);
long isob_mpk_kind_direct(struct isob_comp *c);
long isob_mpk_kind_indirect(struct isob_comp *c);
void isob_mpk_close(void);
/* The window copy's empty function (src/trusted/window.c), the only value
 * the slot's indirect-call pointer ever holds. */
__attribute__((visibility("hidden"))) long isob_window_kind_empty(uint64_t *calls);
extern const unsigned char isob_mpk_gate_text[], isob_mpk_gate_text_end[];
extern const struct isob_mpk_site __start_isob_mpk_sites[], __stop_isob_mpk_sites[];

/* The PKRU value inside key k's window, computed as the gate computes it. */
static uint32_t mpk_pkru_open(int key)
{
    return (uint32_t)MPK_PKRU_CLOSED & ~(3u << (2 * key));
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
    if (mpk_slots_err) {
        snprintf(why, len, "cannot seal the gate state pages: mprotect: %s",
                 strerror(-mpk_slots_err));
        return -ENOTSUP;
    }
    /* A CPU with PKU is not enough: the kernel may be built without pkeys
     * support or booted with nopku (EINVAL), or have none left (ENOSPC). */
    int key = mpk_pkey_alloc(0, PKEY_DISABLE_ACCESS);
    if (key < 0) {
        snprintf(why, len, "kernel refuses pkeys: pkey_alloc: %s", strerror(errno));
        return -ENOTSUP;
    }
    mpk_pkey_free(key);
    return 0;
}

static void mpk_free(struct mpk_comp *m)
{
    /* The slot goes back to PROT_NONE under key 0 before the key is
     * freed, so that a later pkey_alloc never hands out a key that still
     * tags a page, and so that the gate faults on the slot until a new
     * owner has written it. */
    if (m->pkey > 0)
        mpk_pkey_mprotect(isob_mpk_slots[m->pkey], MPK_SLOT_SIZE, PROT_NONE, 0);
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
    if (mpk_slots_err)
        return mpk_slots_err;
    /* Before the key exists: a WRPKRU outside the gate (glibc's pkey_set)
     * would let one call of the untrusted side open it (strays.c). */
    mpk_why[0] = 0;
    int closed = isob_mpk_close_strays(mpk_why, sizeof mpk_why);
    if (closed)
        return closed;
    struct mpk_comp *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    /* Rights 0: the kernel opens the new key in this thread only (other
     * threads keep it denied, as Linux starts every thread with all keys
     * but 0 denied), so set-up can write the tagged pages without a WRPKRU
     * of its own; isob_mpk_close ends the set-up with the gate's checked
     * closing sequence. */
    m->pkey = mpk_pkey_alloc(0, 0);
    if (m->pkey < 0) {
        int err = -errno;
        free(m);
        return err;
    }
    if (m->pkey == 0 || m->pkey >= MPK_SLOTS) {
        isob_mpk_close();
        mpk_pkey_free(m->pkey);
        free(m);
        return -ENOSPC;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t heap_size = (spec->heap_size + page - 1) / page * page;
    m->shared_size = spec->shared_size;
    m->region_size = page + MPK_STACK_SIZE + heap_size;
    m->msg = isob_map(m->shared_size, 0);
    m->region = isob_map(m->region_size, 0);
    unsigned char *stack = (unsigned char *)m->region + page;
    unsigned char *heap = stack + MPK_STACK_SIZE;
    struct mpk_slot *slot = (struct mpk_slot *)(void *)isob_mpk_slots[m->pkey];
    /* The guard page under the trusted stack turns an overflow into a
     * fault instead of a write below it. */
    int rc = !m->msg || !m->region ? -ENOMEM : 0;
    if (rc == 0 && (mprotect(m->region, page, PROT_NONE) != 0 ||
                    mpk_pkey_mprotect(stack, MPK_STACK_SIZE + heap_size,
                                      PROT_READ | PROT_WRITE, m->pkey) != 0 ||
                    mpk_pkey_mprotect(slot, MPK_SLOT_SIZE, PROT_READ | PROT_WRITE, m->pkey) != 0))
        rc = -errno;
    struct isob_trusted *t = rc == 0 ? isob_trusted_init(heap, heap_size) : NULL;
    if (rc == 0 && !t)
        rc = -EINVAL;
    if (rc == 0) {
        m->base.data_cap = m->shared_size - sizeof(struct isob_msg);
        m->slot = (uint32_t)m->pkey;
        memset(slot, 0, MPK_SLOT_SIZE);
        slot->t = t;
        slot->msg = m->msg;
        slot->cap = m->base.data_cap;
        slot->stack_top = heap;
        slot->calls = 0;
        slot->fn = isob_window_kind_empty;
        slot->busy = 0;
        /* Last: until this value is in place the gate's check fails and
         * loops back to a read that cannot pass either. */
        __atomic_store_n(&slot->pkru_open, mpk_pkru_open(m->pkey), __ATOMIC_RELEASE);
    }
    isob_mpk_close();
    if (rc != 0) {
        mpk_free(m);
        return rc;
    }
    *out = &m->base;
    return 0;
}

static long mpk_bridge_call(struct isob_comp *c, unsigned entry)
{
    return isob_mpk_gate(((struct mpk_comp *)c)->slot, entry);
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

size_t isob_mpk_test_sites(const struct isob_mpk_site **sites)
{
    *sites = __start_isob_mpk_sites;
    return (size_t)(__stop_isob_mpk_sites - __start_isob_mpk_sites);
}

const void *isob_mpk_test_text(size_t *len)
{
    *len = (size_t)(isob_mpk_gate_text_end - isob_mpk_gate_text);
    return isob_mpk_gate_text;
}

int isob_mpk_test_view(struct isob_comp *c, struct isob_mpk_view *v)
{
    memset(v, 0, sizeof *v);
    if (!mpk_is_ours(c))
        return -EINVAL;
    struct mpk_comp *m = (struct mpk_comp *)c;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    v->pkey = m->pkey;
    v->pkru_open = mpk_pkru_open(m->pkey);
    v->msg = m->msg;
    v->table = (struct isob_trusted *)(void *)((unsigned char *)m->region + page + MPK_STACK_SIZE);
    v->d_slot = &m->slot;
    v->gate_state = isob_mpk_slots[m->pkey];
    v->gate_state_len = MPK_SLOT_SIZE;
    v->stack_lo = (unsigned char *)m->region + page;
    v->stack_hi = (unsigned char *)v->stack_lo + MPK_STACK_SIZE;
    v->descriptor = m;
    v->descriptor_len = sizeof *m;
    v->gate = c->mech->call == isob_mpk_op_inline ? MPK_GATE_INLINE : MPK_GATE_BRIDGE;
    v->kind_calls = (uint64_t *)(void *)((unsigned char *)v->gate_state + MPK_SLOT_CALLS);
    v->kind_fn = (void **)(void *)((unsigned char *)v->gate_state + MPK_SLOT_FN);
    v->sites = __start_isob_mpk_sites;
    v->n_sites = (size_t)(__stop_isob_mpk_sites - __start_isob_mpk_sites);
    return 0;
}

#define MPK_CALL isob_mpk_op_inline
#define MPK_KINDS {isob_mpk_kind_inline, isob_mpk_kind_direct, isob_mpk_kind_indirect}

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

#define MPK_CALL mpk_call
#define mpk_bridge_call mpk_call
/* No gate, no call kinds: switch skips them with the probe's reason. */
#define MPK_KINDS {NULL, NULL, NULL}

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

size_t isob_mpk_test_sites(const struct isob_mpk_site **sites)
{
    *sites = NULL;
    return 0;
}

const void *isob_mpk_test_text(size_t *len)
{
    *len = 0;
    return NULL;
}

int isob_mpk_test_view(struct isob_comp *c, struct isob_mpk_view *v)
{
    (void)c;
    memset(v, 0, sizeof *v);
    return -ENOTSUP;
}

#endif

/* What an access to a page whose key PKRU denies raises (older C
 * libraries lack the name; the kernel's value is 4). */
#ifndef SEGV_PKUERR
#define SEGV_PKUERR 4
#endif

const struct isob_mechanism isob_mech_mpk = {
    .name = "mpk",
    .summary = "Intel MPK: trusted heap and stack under their own pkey; ERIM's checked WRPKRU gate in the call op "
               "(switch variants: entry, and ERIM's call kinds inline, direct-call, indirect-call behind the gate)",
    .props = ISOB_ISOLATES_MEMORY,
    .result_params = "\"gate\":\"inline\"",
    .fault_code = SEGV_PKUERR,
    .probe = mpk_probe,
    .create = mpk_create,
    .call = MPK_CALL,
    .shared = mpk_shared,
    .destroy = mpk_destroy,
    .call_kind = MPK_KINDS,
    .limit_why = mpk_limit_why,
};

const struct isob_mechanism isob_mech_mpk_bridge = {
    .name = "mpk-bridge",
    .summary = "Intel MPK: as mpk, but the call op calls the gate as a separate function (ERIM's direct call)",
    .props = ISOB_ISOLATES_MEMORY,
    .result_params = "\"gate\":\"bridge\"",
    .fault_code = SEGV_PKUERR,
    .probe = mpk_probe,
    .create = mpk_create,
    .call = mpk_bridge_call,
    .shared = mpk_shared,
    .destroy = mpk_destroy,
    .limit_why = mpk_limit_why,
};

#if defined(__x86_64__)
static int mpk_is_ours(struct isob_comp *c)
{
    return c && (c->mech == &isob_mech_mpk || c->mech == &isob_mech_mpk_bridge);
}
#endif
