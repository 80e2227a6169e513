/* process-spin: a forked server process holds the trusted heap, like
 * process-futex, but both sides hand over by spinning on a shared word:
 * no system call on the round trip.  It is meant for cross-cpu placement,
 * where each side has a CPU to spin on.  On one CPU spinning is
 * pathological (the other side runs only once the spinner's time slice
 * ends), so after PS_SPINS_BEFORE_YIELD spins a waiter gives the CPU away
 * with sched_yield: same-cpu calls still complete, slowly. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "isobench/arch.h"
#include "isobench/futex.h"
#include "isobench/mechanism.h"
#include "isobench/server.h"

/* How long destroy waits for the server to leave before killing it. */
#define PS_REAP_TIMEOUT_MS 2000
/* Pause-spins a waiter makes before it starts yielding the CPU: about
 * 16k cycles where PAUSE takes some 65 (AMD Zen), twenty times a cross-cpu
 * round trip carrying 4 KiB, yet a same-cpu round trip (two such budgets
 * and two yields) costs a few futex handoffs rather than time slices. */
#define PS_SPINS_BEFORE_YIELD 256u

/* The page shared by caller and server: the handoff word (the states of
 * futex.h) on its own cache line, then the message. */
struct ps_shared {
    uint32_t state __attribute__((aligned(64)));
    uint32_t entry;
    long ret;
    struct isob_msg msg __attribute__((aligned(64)));
};

struct ps_comp {
    struct isob_comp base;
    struct ps_shared *sh;
    size_t shared_size;
    pid_t server;
};

/* One step of waiting: pause while the spin budget lasts, then yield. */
static inline void ps_backoff(unsigned *spins)
{
    if (*spins < PS_SPINS_BEFORE_YIELD) {
        (*spins)++;
        isob_cpu_relax();
    } else {
        sched_yield();
    }
}

static void ps_serve(struct ps_shared *sh, size_t cap, struct isob_trusted *t)
{
    for (;;) {
        uint32_t s;
        unsigned spins = 0;
        while ((s = isob_load(&sh->state)) != ISOB_HS_REQ && s != ISOB_HS_EXIT)
            ps_backoff(&spins);
        if (s == ISOB_HS_EXIT)
            return;
        sh->ret = isob_trusted_call(t, sh->entry, &sh->msg, cap);
        isob_store(&sh->state, ISOB_HS_DONE);
    }
}

/* The server process's body: isob_server_fork calls it after entering. */
static void ps_child(void *arg, struct isob_trusted *t)
{
    struct ps_comp *p = arg;
    ps_serve(p->sh, p->base.data_cap, t);
}

static int ps_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    if (spec->shared_size <= sizeof(struct ps_shared))
        return -EINVAL;
    struct ps_comp *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->shared_size = spec->shared_size;
    p->sh = isob_map(p->shared_size, 1);
    if (!p->sh) {
        free(p);
        return -ENOMEM;
    }
    p->base.data_cap = p->shared_size - sizeof(struct ps_shared);
    p->server = isob_server_fork(spec->server_cpu, spec->heap_size, ps_child, p);
    if (p->server < 0) {
        int err = (int)p->server;
        isob_unmap(p->sh, p->shared_size);
        free(p);
        return err;
    }
    *out = &p->base;
    return 0;
}

static long ps_call(struct isob_comp *c, unsigned entry)
{
    struct ps_comp *p = (struct ps_comp *)c;
    p->sh->entry = entry;
    isob_store(&p->sh->state, ISOB_HS_REQ);
    unsigned spins = 0;
    while (isob_load(&p->sh->state) == ISOB_HS_REQ)
        ps_backoff(&spins);
    return p->sh->ret;
}

static struct isob_msg *ps_shared_msg(struct isob_comp *c)
{
    return &((struct ps_comp *)c)->sh->msg;
}

static void ps_destroy(struct isob_comp *c)
{
    struct ps_comp *p = (struct ps_comp *)c;
    isob_store(&p->sh->state, ISOB_HS_EXIT);
    isob_server_reap(p->server, PS_REAP_TIMEOUT_MS);
    isob_unmap(p->sh, p->shared_size);
    free(p);
}

const struct isob_mechanism isob_mech_process_spin = {
    .name = "process-spin",
    .summary = "forked server process, shared memory, both sides spin (for cross-cpu placement)",
    .props = ISOB_ISOLATES_MEMORY | ISOB_SEPARATE_AS | ISOB_TWO_CONTEXTS,
    .probe = isob_probe_always,
    .create = ps_create,
    .call = ps_call,
    .shared = ps_shared_msg,
    .destroy = ps_destroy,
};
