/* thread: a kernel thread of the same process serves calls; futex handoff.
 * Two execution contexts, one address space: it isolates nothing, and it is
 * the reference for what the process mechanisms add. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "isobench/futex.h"
#include "isobench/mechanism.h"

struct thread_comp {
    struct isob_comp base;
    uint32_t state __attribute__((aligned(64)));  /* own cache line */
    unsigned entry;
    long ret;
    struct isob_msg *msg;
    void *heap;
    size_t shared_size, heap_size;
    struct isob_trusted *t;
    pthread_t server;
};

static void *thread_serve(void *arg)
{
    struct thread_comp *tc = arg;
    while (isob_handoff_wait(&tc->state, FUTEX_PRIVATE_FLAG) == ISOB_HS_REQ) {
        tc->ret = isob_trusted_call(tc->t, tc->entry, tc->msg, tc->base.data_cap);
        isob_handoff_reply(&tc->state, FUTEX_PRIVATE_FLAG);
    }
    return NULL;
}

static int thread_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    if (spec->shared_size <= sizeof(struct isob_msg))
        return -EINVAL;
    struct thread_comp *tc = aligned_alloc(64, (sizeof *tc + 63) & ~(size_t)63);
    if (!tc)
        return -ENOMEM;
    *tc = (struct thread_comp){0};
    tc->shared_size = spec->shared_size;
    tc->heap_size = spec->heap_size;
    tc->msg = isob_map(tc->shared_size, 0);
    tc->heap = isob_map(tc->heap_size, 0);
    tc->t = tc->heap ? isob_trusted_init(tc->heap, tc->heap_size) : NULL;
    tc->base.data_cap = spec->shared_size - sizeof(struct isob_msg);
    int rc = -ENOMEM;
    if (tc->msg && tc->t) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (spec->server_cpu >= 0) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(spec->server_cpu, &set);
            pthread_attr_setaffinity_np(&attr, sizeof set, &set);
        }
        rc = -pthread_create(&tc->server, &attr, thread_serve, tc);
        pthread_attr_destroy(&attr);
        if (rc == 0) {
            *out = &tc->base;
            return 0;
        }
    }
    isob_unmap(tc->msg, tc->shared_size);
    isob_unmap(tc->heap, tc->heap_size);
    free(tc);
    return rc;
}

static long thread_call(struct isob_comp *c, unsigned entry)
{
    struct thread_comp *tc = (struct thread_comp *)c;
    tc->entry = entry;
    isob_handoff_request(&tc->state, FUTEX_PRIVATE_FLAG);
    return tc->ret;
}

static struct isob_msg *thread_shared(struct isob_comp *c)
{
    return ((struct thread_comp *)c)->msg;
}

static void thread_destroy(struct isob_comp *c)
{
    struct thread_comp *tc = (struct thread_comp *)c;
    isob_handoff_exit(&tc->state, FUTEX_PRIVATE_FLAG);
    pthread_join(tc->server, NULL);
    isob_unmap(tc->msg, tc->shared_size);
    isob_unmap(tc->heap, tc->heap_size);
    free(tc);
}

const struct isob_mechanism isob_mech_thread = {
    .name = "thread",
    .summary = "kernel thread in the same process serves calls, futex handoff (no isolation)",
    .props = ISOB_TWO_CONTEXTS,
    .probe = isob_probe_always,
    .create = thread_create,
    .call = thread_call,
    .shared = thread_shared,
    .destroy = thread_destroy,
};
