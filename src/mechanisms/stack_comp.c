/* What ucontext and uthread share: see stack_comp.h. */
#include <stdlib.h>

#include "stack_comp.h"

void isob_stack_comp_destroy(struct isob_comp *c)
{
    struct isob_stack_comp *s = (struct isob_stack_comp *)c;
    isob_unmap(s->msg, s->shared_size);
    isob_unmap(s->heap, s->heap_size);
    isob_unmap(s->stack, ISOB_STACK_COMP_STACK_SIZE);
    free(s);
}

int isob_stack_comp_create(const struct isob_comp_spec *spec, size_t size,
                           struct isob_stack_comp **out)
{
    if (spec->shared_size <= sizeof(struct isob_msg))
        return -EINVAL;
    struct isob_stack_comp *s = calloc(1, size);
    if (!s)
        return -ENOMEM;
    s->shared_size = spec->shared_size;
    s->heap_size = spec->heap_size;
    s->msg = isob_map(s->shared_size, 0);
    s->heap = isob_map(s->heap_size, 0);
    s->stack = isob_map(ISOB_STACK_COMP_STACK_SIZE, 0);
    s->t = s->heap ? isob_trusted_init(s->heap, s->heap_size) : NULL;
    s->base.data_cap = spec->shared_size - sizeof(struct isob_msg);
    if (!s->msg || !s->stack || !s->t) {
        isob_stack_comp_destroy(&s->base);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

struct isob_msg *isob_stack_comp_shared(struct isob_comp *c)
{
    return ((struct isob_stack_comp *)c)->msg;
}
