/* A compartment that runs on a stack of its own, in the caller's thread:
 * what ucontext and uthread share.  They differ only in how they switch
 * to that stack and back (glibc's swapcontext, or uthread_<arch>.S), so
 * each embeds struct isob_stack_comp first and adds its switch. */
#ifndef ISOB_STACK_COMP_H
#define ISOB_STACK_COMP_H

#include "isobench/mechanism.h"

/* Stack of the compartment's context (a guard page included where the
 * mechanism sets one). */
#define ISOB_STACK_COMP_STACK_SIZE (256u * 1024u)

struct isob_stack_comp {
    struct isob_comp base;
    struct isob_msg *msg;
    void *heap, *stack;
    size_t shared_size, heap_size;
    struct isob_trusted *t;
    unsigned entry;            /* the entry the caller asked for */
    long ret;                  /* its result, set on the compartment's stack */
};

/* A zeroed compartment of `size` bytes (the mechanism's own struct, which
 * begins with struct isob_stack_comp) with its shared buffer, heap, stack
 * and trusted side set up.  0, -EINVAL for a shared buffer too small for
 * a message, or -ENOMEM (nothing is left allocated). */
int isob_stack_comp_create(const struct isob_comp_spec *spec, size_t size,
                           struct isob_stack_comp **out);
/* Frees what isob_stack_comp_create made.  The compartment's context is
 * suspended inside its loop and owns nothing but its stack, so dropping
 * the stack ends it. */
void isob_stack_comp_destroy(struct isob_comp *c);
struct isob_msg *isob_stack_comp_shared(struct isob_comp *c);

/* The compartment's side of one call: run the entry asked for. */
static inline void isob_stack_comp_serve(struct isob_stack_comp *s)
{
    s->ret = isob_trusted_call(s->t, s->entry, s->msg, s->base.data_cap);
}

#endif
