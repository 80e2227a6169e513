/* uthread: the compartment runs on its own stack and is entered with a
 * hand-written context switch (uthread_<arch>.S) that saves only the
 * callee-saved registers and the stack pointer, with no system call.  It is
 * the floor for user-level switching, beside glibc's swapcontext
 * (ucontext), which also saves the signal mask.  It isolates nothing. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "isobench/mechanism.h"

/* Stack of the compartment's context, guard page included. */
#define UTHREAD_STACK_SIZE (256u * 1024u)

/* The architecture-specific part (uthread_<arch>.S). */
void isob_uthread_switch(void **save_sp, void *to_sp);
void *isob_uthread_init(void *stack_top, void (*fn)(void *), void *arg);

struct uthread_comp {
    struct isob_comp base;
    void *caller_sp, *callee_sp;
    struct isob_msg *msg;
    void *heap, *stack;
    size_t shared_size, heap_size;
    struct isob_trusted *t;
    unsigned entry;
    long ret;
};

__attribute__((noreturn)) static void uthread_serve(void *arg)
{
    struct uthread_comp *u = arg;
    for (;;) {
        u->ret = isob_trusted_call(u->t, u->entry, u->msg, u->base.data_cap);
        isob_uthread_switch(&u->callee_sp, u->caller_sp);
    }
}

static void uthread_destroy(struct isob_comp *c)
{
    /* The compartment's context is suspended inside its loop and owns
     * nothing but its stack, so dropping the stack ends it. */
    struct uthread_comp *u = (struct uthread_comp *)c;
    isob_unmap(u->msg, u->shared_size);
    isob_unmap(u->heap, u->heap_size);
    isob_unmap(u->stack, UTHREAD_STACK_SIZE);
    free(u);
}

static int uthread_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    if (spec->shared_size <= sizeof(struct isob_msg))
        return -EINVAL;
    struct uthread_comp *u = calloc(1, sizeof *u);
    if (!u)
        return -ENOMEM;
    u->shared_size = spec->shared_size;
    u->heap_size = spec->heap_size;
    u->msg = isob_map(u->shared_size, 0);
    u->heap = isob_map(u->heap_size, 0);
    u->stack = isob_map(UTHREAD_STACK_SIZE, 0);
    u->t = u->heap ? isob_trusted_init(u->heap, u->heap_size) : NULL;
    u->base.data_cap = spec->shared_size - sizeof(struct isob_msg);
    /* A guard page below the stack turns an overflow into a fault instead
     * of a silent write into whatever is mapped underneath. */
    if (!u->msg || !u->stack || !u->t ||
        mprotect(u->stack, (size_t)sysconf(_SC_PAGESIZE), PROT_NONE) != 0) {
        uthread_destroy(&u->base);
        return -ENOMEM;
    }
    u->callee_sp = isob_uthread_init((char *)u->stack + UTHREAD_STACK_SIZE, uthread_serve, u);
    *out = &u->base;
    return 0;
}

static long uthread_call(struct isob_comp *c, unsigned entry)
{
    struct uthread_comp *u = (struct uthread_comp *)c;
    u->entry = entry;
    isob_uthread_switch(&u->caller_sp, u->callee_sp);
    return u->ret;
}

static struct isob_msg *uthread_shared(struct isob_comp *c)
{
    return ((struct uthread_comp *)c)->msg;
}

const struct isob_mechanism isob_mech_uthread = {
    .name = "uthread",
    .summary = "hand-written user-level context switch, callee-saved registers only (no isolation)",
    .props = 0,
    .probe = isob_probe_always,
    .create = uthread_create,
    .call = uthread_call,
    .shared = uthread_shared,
    .destroy = uthread_destroy,
};
