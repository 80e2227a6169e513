/* process-spin: a forked server process holds the trusted heap, like
 * process-futex, but both sides hand over by spinning on a shared word:
 * no system call on the round trip.  It is meant for cross-cpu placement,
 * where each side has a CPU to spin on.  On one CPU spinning is
 * pathological (the other side runs only once the spinner's time slice
 * ends), so after PS_SPINS_BEFORE_YIELD spins a waiter gives the CPU away
 * with sched_yield: same-cpu calls still complete, slowly. */
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

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
/* The entry that orders the server out; no trusted entry has it. */
#define PS_ENTRY_EXIT UINT32_MAX

/* The page shared by caller and server: the handoff word (the robust word
 * of futex.h, spun on instead of slept on) on its own cache line, then the
 * message.  A server that dies leaves the word marked by the kernel, which
 * ends the caller's spin at once: liveness costs the spin nothing. */
struct ps_shared {
    struct isob_phs hs __attribute__((aligned(64)));
    uint32_t entry;
    long ret;
    struct isob_msg msg __attribute__((aligned(64)));
};

struct ps_comp {
    struct isob_comp base;
    struct ps_shared *sh;
    size_t shared_size;
    uint32_t tid;               /* the handoff word's idle value: the server's thread id (the
                                 * server's own copy of this struct gets it from setup) */
    struct isob_server server;
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

static void ps_serve(struct ps_shared *sh, uint32_t tid, size_t cap, struct isob_trusted *t)
{
    for (;;) {
        unsigned spins = 0;
        while (isob_load(&sh->hs.word) == tid)
            ps_backoff(&spins);
        if (sh->entry == PS_ENTRY_EXIT)
            return;
        sh->ret = isob_trusted_call(t, sh->entry, &sh->msg, cap);
        isob_store(&sh->hs.word, tid);
    }
}

static int ps_setup(void *arg, struct isob_trusted *t)
{
    (void)t;
    struct ps_comp *p = arg;
    return isob_phs_serve_init(&p->sh->hs, &p->tid);
}

/* The server process's body: isob_server_start calls it once ready. */
static void ps_child(void *arg, struct isob_trusted *t)
{
    struct ps_comp *p = arg;
    ps_serve(p->sh, p->tid, p->base.data_cap, t);
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
    struct isob_server_spec ss = {.cpu = spec->server_cpu, .heap_size = spec->heap_size,
                                  .host_fds = spec->host_fds, .n_host_fds = spec->n_host_fds,
                                  .setup = ps_setup, .serve = ps_child, .arg = p,
                                  .keep_fd = {-1, -1}};
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

static __attribute__((noinline, cold)) long ps_died(struct ps_comp *p)
{
    return isob_server_ended(&p->server, p->base.why, sizeof p->base.why);
}

static long ps_call(struct isob_comp *c, unsigned entry)
{
    struct ps_comp *p = (struct ps_comp *)c;
    uint32_t *w = &p->sh->hs.word, tid = p->tid, v;
    p->sh->entry = entry;
    if (isob_phs_post(w, tid) != 0)
        return ps_died(p);
    unsigned spins = 0;
    while ((v = isob_load(w)) == (tid | ISOB_PHS_REQ))
        ps_backoff(&spins);
    if (v != tid)
        return ps_died(p);
    return p->sh->ret;
}

static struct isob_msg *ps_shared_msg(struct isob_comp *c)
{
    return &((struct ps_comp *)c)->sh->msg;
}

static void ps_destroy(struct isob_comp *c)
{
    struct ps_comp *p = (struct ps_comp *)c;
    p->sh->entry = PS_ENTRY_EXIT;
    isob_phs_post(&p->sh->hs.word, p->tid);
    isob_server_stop(&p->server, PS_REAP_TIMEOUT_MS);
    isob_unmap(p->sh, p->shared_size);
    free(p);
}

/* The trusted heap lives in the server process, at the address the
 * trusted code reports. */
static int ps_locate(struct isob_comp *c, uint64_t trusted_addr, struct isob_place *out)
{
    out->pid = ((struct ps_comp *)c)->server.pid;
    out->addr = (uintptr_t)trusted_addr;
    return 0;
}

const struct isob_mechanism isob_mech_process_spin = {
    .name = "process-spin",
    .summary = "forked server process, shared memory, both sides spin (for cross-cpu placement)",
    .props = ISOB_ISOLATES_MEMORY | ISOB_SEPARATE_AS | ISOB_TWO_CONTEXTS,
    .probe = isob_phs_probe,
    .create = ps_create,
    .call = ps_call,
    .shared = ps_shared_msg,
    .destroy = ps_destroy,
    .locate = ps_locate,
};
