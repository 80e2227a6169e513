/* process-futex: a forked server process holds the trusted heap; calls are
 * handed over through shared memory with a futex.  The heap is mapped only
 * after the fork, so it does not exist in the caller's address space. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "isobench/futex.h"
#include "isobench/mechanism.h"
#include "isobench/server.h"

/* How long destroy waits for the server to leave before killing it. */
#define PF_REAP_TIMEOUT_MS 2000

/* The page shared by caller and server: the handoff word on its own cache
 * line, then the message. */
struct pf_shared {
    uint32_t state __attribute__((aligned(64)));
    uint32_t entry;
    long ret;
    struct isob_msg msg __attribute__((aligned(64)));
};

struct pf_comp {
    struct isob_comp base;
    struct pf_shared *sh;
    size_t shared_size;
    pid_t server;
};

static void pf_serve(void *arg, struct isob_trusted *t)
{
    struct pf_comp *p = arg;
    struct pf_shared *sh = p->sh;
    size_t cap = p->base.data_cap;
    while (isob_handoff_wait(&sh->state, 0) == ISOB_HS_REQ) {
        sh->ret = isob_trusted_call(t, sh->entry, &sh->msg, cap);
        isob_handoff_reply(&sh->state, 0);
    }
}

static int pf_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    if (spec->shared_size <= sizeof(struct pf_shared))
        return -EINVAL;
    struct pf_comp *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->shared_size = spec->shared_size;
    p->sh = isob_map(p->shared_size, 1);
    if (!p->sh) {
        free(p);
        return -ENOMEM;
    }
    p->base.data_cap = p->shared_size - sizeof(struct pf_shared);
    p->server = isob_server_fork(spec->server_cpu, spec->heap_size, pf_serve, p);
    if (p->server < 0) {
        int err = (int)p->server;
        isob_unmap(p->sh, p->shared_size);
        free(p);
        return err;
    }
    *out = &p->base;
    return 0;
}

static long pf_call(struct isob_comp *c, unsigned entry)
{
    struct pf_comp *p = (struct pf_comp *)c;
    p->sh->entry = entry;
    isob_handoff_request(&p->sh->state, 0);
    return p->sh->ret;
}

static struct isob_msg *pf_shared_msg(struct isob_comp *c)
{
    return &((struct pf_comp *)c)->sh->msg;
}

static void pf_destroy(struct isob_comp *c)
{
    struct pf_comp *p = (struct pf_comp *)c;
    isob_handoff_exit(&p->sh->state, 0);
    isob_server_reap(p->server, PF_REAP_TIMEOUT_MS);
    isob_unmap(p->sh, p->shared_size);
    free(p);
}

/* The trusted heap lives in the server process, at the address the
 * trusted code reports. */
static int pf_locate(struct isob_comp *c, uint64_t trusted_addr, struct isob_place *out)
{
    out->pid = ((struct pf_comp *)c)->server;
    out->addr = (uintptr_t)trusted_addr;
    return 0;
}

const struct isob_mechanism isob_mech_process_futex = {
    .name = "process-futex",
    .summary = "forked server process, shared memory and futex handoff",
    .props = ISOB_ISOLATES_MEMORY | ISOB_SEPARATE_AS | ISOB_TWO_CONTEXTS,
    .probe = isob_probe_always,
    .create = pf_create,
    .call = pf_call,
    .shared = pf_shared_msg,
    .destroy = pf_destroy,
    .locate = pf_locate,
};
