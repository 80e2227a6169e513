/* direct: a plain call through the entry table, in one address space.
 * The baseline of every comparison; it isolates nothing. */
#include <stdlib.h>

#include "isobench/mechanism.h"

struct direct_comp {
    struct isob_comp base;
    struct isob_msg *msg;
    void *heap;
    size_t shared_size, heap_size;
    struct isob_trusted *t;
};

static int direct_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    if (spec->shared_size <= sizeof(struct isob_msg))
        return -EINVAL;
    struct direct_comp *d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    d->shared_size = spec->shared_size;
    d->heap_size = spec->heap_size;
    d->msg = isob_map(d->shared_size, 0);
    d->heap = isob_map(d->heap_size, 0);
    d->t = d->heap ? isob_trusted_init(d->heap, d->heap_size) : NULL;
    if (!d->msg || !d->t) {
        isob_unmap(d->msg, d->shared_size);
        isob_unmap(d->heap, d->heap_size);
        free(d);
        return -ENOMEM;
    }
    d->base.data_cap = d->shared_size - sizeof(struct isob_msg);
    *out = &d->base;
    return 0;
}

static long direct_call(struct isob_comp *c, unsigned entry)
{
    struct direct_comp *d = (struct direct_comp *)c;
    return isob_trusted_call(d->t, entry, d->msg, c->data_cap);
}

static struct isob_msg *direct_shared(struct isob_comp *c)
{
    return ((struct direct_comp *)c)->msg;
}

static void direct_destroy(struct isob_comp *c)
{
    struct direct_comp *d = (struct direct_comp *)c;
    isob_unmap(d->msg, d->shared_size);
    isob_unmap(d->heap, d->heap_size);
    free(d);
}

const struct isob_mechanism isob_mech_direct = {
    .name = "direct",
    .summary = "plain call through the entry table (baseline; no isolation); switch variants: entry, "
               "and ERIM's call kinds inline, direct-call, indirect-call (the plain calls)",
    .props = 0,
    .probe = isob_probe_always,
    .create = direct_create,
    .call = direct_call,
    .shared = direct_shared,
    .destroy = direct_destroy,
};
