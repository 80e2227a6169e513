/* ucontext: the compartment runs on its own stack and is entered with
 * glibc's swapcontext, which also saves and restores the signal mask (a
 * system call each way).  A user-level switch; it isolates nothing.  The
 * compartment itself (stack, heap, shared buffer) is stack_comp.c's. */
#include <stdint.h>
#include <ucontext.h>

#include "stack_comp.h"

struct uctx_comp {
    struct isob_stack_comp s;
    ucontext_t caller, callee;
};

static void uctx_serve(unsigned lo, unsigned hi)
{
    /* makecontext passes int arguments only: the pointer comes in halves. */
    struct uctx_comp *u = (struct uctx_comp *)(((uintptr_t)hi << 32) | (uintptr_t)lo);
    for (;;) {
        isob_stack_comp_serve(&u->s);
        swapcontext(&u->callee, &u->caller);
    }
}

static int uctx_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    struct isob_stack_comp *s;
    int rc = isob_stack_comp_create(spec, sizeof(struct uctx_comp), &s);
    if (rc)
        return rc;
    struct uctx_comp *u = (struct uctx_comp *)s;
    if (getcontext(&u->callee) != 0) {
        isob_stack_comp_destroy(&s->base);
        return -ENOMEM;
    }
    u->callee.uc_stack.ss_sp = s->stack;
    u->callee.uc_stack.ss_size = ISOB_STACK_COMP_STACK_SIZE;
    u->callee.uc_link = NULL;
    uintptr_t p = (uintptr_t)u;
    makecontext(&u->callee, (void (*)(void))uctx_serve, 2, (unsigned)(p & 0xffffffffu),
                (unsigned)(p >> 32));
    *out = &s->base;
    return 0;
}

static long uctx_call(struct isob_comp *c, unsigned entry)
{
    struct uctx_comp *u = (struct uctx_comp *)c;
    u->s.entry = entry;
    swapcontext(&u->caller, &u->callee);
    return u->s.ret;
}

const struct isob_mechanism isob_mech_ucontext = {
    .name = "ucontext",
    .summary = "user-level context switch with glibc swapcontext (no isolation)",
    .props = 0,
    .probe = isob_probe_always,
    .create = uctx_create,
    .call = uctx_call,
    .shared = isob_stack_comp_shared,
    .destroy = isob_stack_comp_destroy,
};
