/* process-futex: a forked server process holds the trusted heap; calls are
 * handed over through shared memory with a futex.  The heap is mapped only
 * after the fork, so it does not exist in the caller's address space.
 *
 * The handoff word is the robust one of futex.h: if the server dies, the
 * kernel marks the word and wakes the caller, whose call then returns
 * -EOWNERDEAD with the cause (mechanism.h, Liveness). */
#include <stdint.h>
#include <stdlib.h>

#include "isobench/futex.h"
#include "isobench/mechanism.h"
#include "isobench/server.h"

/* How long destroy waits for the server to leave before killing it. */
#define PF_REAP_TIMEOUT_MS 2000
/* The entry that orders the server out; no trusted entry has it. */
#define PF_ENTRY_EXIT UINT32_MAX

/* The page shared by caller and server: the handoff word on its own cache
 * line, then the message. */
struct pf_shared {
    struct isob_phs hs __attribute__((aligned(64)));
    uint32_t entry;
    long ret;
    struct isob_msg msg __attribute__((aligned(64)));
};

struct pf_comp {
    struct isob_comp base;
    struct pf_shared *sh;
    size_t shared_size;
    uint32_t tid;               /* the handoff word's idle value: the server's thread id (the
                                 * server's own copy of this struct gets it from setup) */
    struct isob_server server;
};

static int pf_setup(void *arg, struct isob_trusted *t)
{
    (void)t;
    struct pf_comp *p = arg;
    return isob_phs_serve_init(&p->sh->hs, &p->tid);
}

static void pf_serve(void *arg, struct isob_trusted *t)
{
    struct pf_comp *p = arg;
    struct pf_shared *sh = p->sh;
    size_t cap = p->base.data_cap;
    uint32_t tid = p->tid;
    for (;;) {
        isob_phs_wait(&sh->hs.word, tid);
        if (sh->entry == PF_ENTRY_EXIT)
            return;
        sh->ret = isob_trusted_call(t, sh->entry, &sh->msg, cap);
        isob_phs_reply(&sh->hs.word, tid);
    }
}

static int pf_create_server(const struct isob_comp_spec *spec, struct isob_comp **out, int any_tracer)
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
    struct isob_server_spec ss = {.cpu = spec->server_cpu, .heap_size = spec->heap_size,
                                  .host_fds = spec->host_fds, .n_host_fds = spec->n_host_fds,
                                  .setup = pf_setup, .serve = pf_serve, .arg = p,
                                  .keep_fd = {-1, -1}, .test_any_tracer = any_tracer};
    int rc = isob_server_start(&p->server, &ss);
    if (rc != 0) {
        isob_unmap(p->sh, p->shared_size);
        free(p);
        return rc;
    }
    p->tid = isob_phs_tid(&p->sh->hs);
    *out = &p->base;
    return 0;
}

static int pf_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    return pf_create_server(spec, out, 0);
}

static int pf_create_traceable(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    return pf_create_server(spec, out, 1);
}

static __attribute__((noinline, cold)) long pf_died(struct pf_comp *p)
{
    return isob_server_ended(&p->server, p->base.why, sizeof p->base.why);
}

static long pf_call(struct isob_comp *c, unsigned entry)
{
    struct pf_comp *p = (struct pf_comp *)c;
    p->sh->entry = entry;
    if (isob_phs_request(&p->sh->hs.word, p->tid) != 0)
        return pf_died(p);
    return p->sh->ret;
}

static struct isob_msg *pf_shared_msg(struct isob_comp *c)
{
    return &((struct pf_comp *)c)->sh->msg;
}

static void pf_destroy(struct isob_comp *c)
{
    struct pf_comp *p = (struct pf_comp *)c;
    /* The order out is posted, not waited for: a server that does not
     * leave is killed after the time-out. */
    p->sh->entry = PF_ENTRY_EXIT;
    if (isob_phs_post(&p->sh->hs.word, p->tid) == 0)
        isob_futex_wake(&p->sh->hs.word, 1, 0);
    isob_server_stop(&p->server, PF_REAP_TIMEOUT_MS);
    isob_unmap(p->sh, p->shared_size);
    free(p);
}

/* The trusted heap lives in the server process, at the address the
 * trusted code reports. */
static int pf_locate(struct isob_comp *c, uint64_t trusted_addr, struct isob_place *out)
{
    out->pid = ((struct pf_comp *)c)->server.pid;
    out->addr = (uintptr_t)trusted_addr;
    return 0;
}

const struct isob_mechanism isob_mech_process_futex = {
    .name = "process-futex",
    .summary = "forked server process, shared memory and futex handoff",
    .props = ISOB_ISOLATES_MEMORY | ISOB_SEPARATE_AS | ISOB_TWO_CONTEXTS,
    .probe = isob_phs_probe,
    .create = pf_create,
    .call = pf_call,
    .shared = pf_shared_msg,
    .destroy = pf_destroy,
    .locate = pf_locate,
};

/* process-futex with its server's refusal to run traced switched off: the
 * deliberately open variant the tests use to show that this refusal is
 * what closes the compartment to a tracer attached before it existed
 * (server.h, isob_server_accept_tracer). */
const struct isob_mechanism isob_mech_test_traceable = {
    .name = "test-traceable",
    .summary = "TEST ONLY: process-futex whose server does not refuse to run traced",
    .props = ISOB_ISOLATES_MEMORY | ISOB_SEPARATE_AS | ISOB_TWO_CONTEXTS | ISOB_TEST_ONLY,
    .probe = isob_phs_probe,
    .create = pf_create_traceable,
    .call = pf_call,
    .shared = pf_shared_msg,
    .destroy = pf_destroy,
    .locate = pf_locate,
};
