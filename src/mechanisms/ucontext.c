/* ucontext: the compartment runs on its own stack and is entered with
 * glibc's swapcontext, which also saves and restores the signal mask (a
 * system call each way).  A user-level switch; it isolates nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <ucontext.h>

#include "isobench/mechanism.h"

/* Stack of the compartment's context. */
#define UCTX_STACK_SIZE (256u * 1024u)

struct uctx_comp {
    struct isob_comp base;
    ucontext_t caller, callee;
    struct isob_msg *msg;
    void *heap, *stack;
    size_t shared_size, heap_size;
    struct isob_trusted *t;
    unsigned entry;
    long ret;
};

static void uctx_serve(unsigned lo, unsigned hi)
{
    /* makecontext passes int arguments only: the pointer comes in halves. */
    struct uctx_comp *u = (struct uctx_comp *)(((uintptr_t)hi << 32) | (uintptr_t)lo);
    for (;;) {
        u->ret = isob_trusted_call(u->t, u->entry, u->msg, u->base.data_cap);
        swapcontext(&u->callee, &u->caller);
    }
}

static void uctx_destroy(struct isob_comp *c)
{
    struct uctx_comp *u = (struct uctx_comp *)c;
    isob_unmap(u->msg, u->shared_size);
    isob_unmap(u->heap, u->heap_size);
    isob_unmap(u->stack, UCTX_STACK_SIZE);
    free(u);
}

static int uctx_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    if (spec->shared_size <= sizeof(struct isob_msg))
        return -EINVAL;
    struct uctx_comp *u = calloc(1, sizeof *u);
    if (!u)
        return -ENOMEM;
    u->shared_size = spec->shared_size;
    u->heap_size = spec->heap_size;
    u->msg = isob_map(u->shared_size, 0);
    u->heap = isob_map(u->heap_size, 0);
    u->stack = isob_map(UCTX_STACK_SIZE, 0);
    u->t = u->heap ? isob_trusted_init(u->heap, u->heap_size) : NULL;
    u->base.data_cap = spec->shared_size - sizeof(struct isob_msg);
    if (!u->msg || !u->stack || !u->t || getcontext(&u->callee) != 0) {
        uctx_destroy(&u->base);
        return -ENOMEM;
    }
    u->callee.uc_stack.ss_sp = u->stack;
    u->callee.uc_stack.ss_size = UCTX_STACK_SIZE;
    u->callee.uc_link = NULL;
    uintptr_t p = (uintptr_t)u;
    makecontext(&u->callee, (void (*)(void))uctx_serve, 2, (unsigned)(p & 0xffffffffu),
                (unsigned)(p >> 32));
    *out = &u->base;
    return 0;
}

static long uctx_call(struct isob_comp *c, unsigned entry)
{
    struct uctx_comp *u = (struct uctx_comp *)c;
    u->entry = entry;
    swapcontext(&u->caller, &u->callee);
    return u->ret;
}

static struct isob_msg *uctx_shared(struct isob_comp *c)
{
    return ((struct uctx_comp *)c)->msg;
}

const struct isob_mechanism isob_mech_ucontext = {
    .name = "ucontext",
    .summary = "user-level context switch with glibc swapcontext (no isolation)",
    .props = 0,
    .probe = isob_probe_always,
    .create = uctx_create,
    .call = uctx_call,
    .shared = uctx_shared,
    .destroy = uctx_destroy,
};
