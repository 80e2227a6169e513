/* mprotect: the trusted heap lives in the caller's address space but is
 * PROT_NONE whenever no call is running.  A call opens it with mprotect,
 * runs the entry and closes it again: two system calls per round trip,
 * each rewriting every present page-table entry of the heap and flushing
 * the TLB, so the cost grows with the heap's resident pages.  This is the
 * page-table way of doing what MPK does with one register write. */
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "isobench/mechanism.h"

struct mprot_comp {
    struct isob_comp base;
    struct isob_msg *msg;
    void *heap;
    size_t shared_size, heap_size;
    struct isob_trusted *t;
};

static void mprot_destroy(struct isob_comp *c)
{
    struct mprot_comp *m = (struct mprot_comp *)c;
    isob_unmap(m->msg, m->shared_size);
    isob_unmap(m->heap, m->heap_size);
    free(m);
}

static int mprot_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    if (spec->shared_size <= sizeof(struct isob_msg))
        return -EINVAL;
    struct mprot_comp *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->shared_size = spec->shared_size;
    m->heap_size = spec->heap_size;
    m->msg = isob_map(m->shared_size, 0);
    m->heap = isob_map(m->heap_size, 0);
    m->t = m->heap ? isob_trusted_init(m->heap, m->heap_size) : NULL;
    m->base.data_cap = spec->shared_size - sizeof(struct isob_msg);
    if (!m->msg || !m->t) {
        mprot_destroy(&m->base);
        return -ENOMEM;
    }
    /* MADV_DONTDUMP keeps the secrets out of core dumps, and it gives the
     * heap's mapping flags no neighbour has: opening the heap then never
     * merges it with an adjacent read-write mapping, and closing it never
     * splits it off again, which would double the cost of every call.
     * The trusted state sits at the start of the heap, so closing the
     * whole heap hides the state as well as the data. */
    if (madvise(m->heap, m->heap_size, MADV_DONTDUMP) != 0 ||
        mprotect(m->heap, m->heap_size, PROT_NONE) != 0) {
        int err = -errno;
        mprot_destroy(&m->base);
        return err;
    }
    *out = &m->base;
    return 0;
}

static long mprot_call(struct isob_comp *c, unsigned entry)
{
    struct mprot_comp *m = (struct mprot_comp *)c;
    if (mprotect(m->heap, m->heap_size, PROT_READ | PROT_WRITE) != 0)
        return -errno;
    long ret = isob_trusted_call(m->t, entry, m->msg, c->data_cap);
    /* If closing fails the heap would stay open to the caller: report it
     * rather than return a result as if isolation had held. */
    if (mprotect(m->heap, m->heap_size, PROT_NONE) != 0)
        return -errno;
    return ret;
}

static struct isob_msg *mprot_shared(struct isob_comp *c)
{
    return ((struct mprot_comp *)c)->msg;
}

const struct isob_mechanism isob_mech_mprotect = {
    .name = "mprotect",
    .summary = "in-process trusted heap kept PROT_NONE outside calls, opened with mprotect per call",
    .props = ISOB_ISOLATES_MEMORY,
    .fault_code = SEGV_ACCERR,
    .probe = isob_probe_always,
    .create = mprot_create,
    .call = mprot_call,
    .shared = mprot_shared,
    .destroy = mprot_destroy,
};
