/* uthread: the compartment runs on its own stack and is entered with a
 * hand-written context switch (uthread_<arch>.S) that saves only the
 * callee-saved registers and the stack pointer, with no system call.  It is
 * the floor for user-level switching, beside glibc's swapcontext
 * (ucontext), which also saves the signal mask.  It isolates nothing.  The
 * compartment itself (stack, heap, shared buffer) is stack_comp.c's. */
#include <sys/mman.h>
#include <unistd.h>

#include "stack_comp.h"

/* The architecture-specific part (uthread_<arch>.S). */
void isob_uthread_switch(void **save_sp, void *to_sp);
void *isob_uthread_init(void *stack_top, void (*fn)(void *), void *arg);

struct uthread_comp {
    struct isob_stack_comp s;
    void *caller_sp, *callee_sp;
};

__attribute__((noreturn)) static void uthread_serve(void *arg)
{
    struct uthread_comp *u = arg;
    for (;;) {
        isob_stack_comp_serve(&u->s);
        isob_uthread_switch(&u->callee_sp, u->caller_sp);
    }
}

static int uthread_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    struct isob_stack_comp *s;
    int rc = isob_stack_comp_create(spec, sizeof(struct uthread_comp), &s);
    if (rc)
        return rc;
    struct uthread_comp *u = (struct uthread_comp *)s;
    /* A guard page below the stack turns an overflow into a fault instead
     * of a silent write into whatever is mapped underneath. */
    if (mprotect(s->stack, (size_t)sysconf(_SC_PAGESIZE), PROT_NONE) != 0) {
        isob_stack_comp_destroy(&s->base);
        return -ENOMEM;
    }
    u->callee_sp =
        isob_uthread_init((char *)s->stack + ISOB_STACK_COMP_STACK_SIZE, uthread_serve, u);
    *out = &s->base;
    return 0;
}

static long uthread_call(struct isob_comp *c, unsigned entry)
{
    struct uthread_comp *u = (struct uthread_comp *)c;
    u->s.entry = entry;
    isob_uthread_switch(&u->caller_sp, u->callee_sp);
    return u->s.ret;
}

const struct isob_mechanism isob_mech_uthread = {
    .name = "uthread",
    .summary = "hand-written user-level context switch, callee-saved registers only (no isolation)",
    .props = 0,
    .probe = isob_probe_always,
    .create = uthread_create,
    .call = uthread_call,
    .shared = isob_stack_comp_shared,
    .destroy = isob_stack_comp_destroy,
};
