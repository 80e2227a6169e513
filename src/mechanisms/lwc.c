/* lwc: the compartment is a light-weight context (include/isobench/lwc.h),
 * a copy-on-write snapshot of the caller entered with lwc_switch.
 *
 * create() makes the context with the message buffer SHARED (memory from
 * lwc_alloc_shared) and every descriptor but stdio closed there, then
 * switches to it once: the context sets itself up as every forked server
 * does (isob_server_enter: dies with the caller, non-dumpable, pinned, its
 * trusted heap mapped only now, so the caller never has it) and switches
 * back with 0 or its error.  A call is one switch down with the entry
 * number and one switch back with the result; the handoff is the robust
 * futex word of process-futex (futex.h), so a context that dies fails the
 * call with -EOWNERDEAD and the cause. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "isobench/lwc.h"
#include "isobench/futex.h"
#include "isobench/mechanism.h"
#include "isobench/server.h"

struct lwcm_comp {
    struct isob_comp base;
    int h;                  /* the context's handle */
    struct isob_msg *msg;   /* the shared buffer, a region of lwc_alloc_shared */
};

/* The context: set up, report, then serve calls for ever (it ends when
 * the caller destroys it or dies). */
static __attribute__((noreturn)) void lwcm_serve(pid_t parent, int caller, const struct lwc_msg *first,
                                                 struct isob_msg *msg, size_t cap)
{
    isob_server_default_signals();
    struct isob_trusted *t = NULL;
    int rc = isob_server_enter(parent, (int)(int64_t)first->w[0], (size_t)first->w[1], &t);
    struct lwc_msg out = {{(uint64_t)(int64_t)rc}}, in;
    lwc_switch(caller, &out, NULL, &in);
    if (rc != 0)
        _exit(1);
    for (;;) {
        out.w[0] = (uint64_t)isob_trusted_call(t, (unsigned)in.w[0], msg, cap);
        lwc_switch(caller, &out, NULL, &in);
    }
}

static void lwcm_free(struct lwcm_comp *p)
{
    if (p->h > 0)
        lwc_destroy(p->h);
    if (p->msg)
        lwc_free_shared(p->msg);
    free(p);
}

static int lwcm_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    if (spec->shared_size <= sizeof(struct isob_msg))
        return -EINVAL;
    struct lwcm_comp *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = (spec->shared_size + ps - 1) & ~(ps - 1);
    p->msg = lwc_alloc_shared(len);
    if (!p->msg) {
        int err = errno ? -errno : -ENOMEM;
        free(p);
        return err;
    }
    p->base.data_cap = spec->shared_size - sizeof(struct isob_msg);
    struct lwc_spec sp[2] = {
        {.res = LWC_RES_VM, .how = LWC_SHARED, .vm = {p->msg, len}},
        /* Another compartment's channel, a listening socket or a client
         * connection is none of this context's business. */
        {.res = LWC_RES_FD, .how = LWC_UNMAP, .fd = {3, INT_MAX}},
    };
    pid_t parent = getpid();
    int caller;
    struct lwc_msg in;
    int h = lwc_create(sp, 2, 0, &caller, &in);
    if (h == LWC_SWITCHED)
        lwcm_serve(parent, caller, &in, p->msg, p->base.data_cap);
    if (h < 0) {
        lwcm_free(p);
        return h;
    }
    p->h = h;
    struct lwc_msg setup = {{(uint64_t)(int64_t)spec->server_cpu, spec->heap_size}};
    int rc = lwc_switch(h, &setup, NULL, &in);
    if (rc == 0)
        rc = (int)(int64_t)in.w[0];
    if (rc != 0) {
        lwcm_free(p);
        return rc;
    }
    *out = &p->base;
    return 0;
}

static __attribute__((noinline, cold)) long lwcm_died(struct lwcm_comp *p, int rc)
{
    const char *why = lwc_why(p->h);
    if (why)
        snprintf(p->base.why, sizeof p->base.why, "%s", why);
    else
        snprintf(p->base.why, sizeof p->base.why, "switch failed: %s", isob_strerror(rc));
    return -EOWNERDEAD;
}

static long lwcm_call(struct isob_comp *c, unsigned entry)
{
    struct lwcm_comp *p = (struct lwcm_comp *)c;
    struct lwc_msg out, in;
    out.w[0] = entry;
    int rc = lwc_switch(p->h, &out, NULL, &in);
    if (rc != 0)
        return lwcm_died(p, rc);
    return (long)in.w[0];
}

static struct isob_msg *lwcm_shared(struct isob_comp *c)
{
    return ((struct lwcm_comp *)c)->msg;
}

static void lwcm_destroy(struct isob_comp *c)
{
    lwcm_free((struct lwcm_comp *)c);
}

/* The trusted heap lives in the context's process, at the address the
 * trusted code reports. */
static int lwcm_locate(struct isob_comp *c, uint64_t trusted_addr, struct isob_place *out)
{
    pid_t pid = lwc_pid(((struct lwcm_comp *)c)->h);
    if (pid < 0)
        return pid;
    out->pid = pid;
    out->addr = (uintptr_t)trusted_addr;
    return 0;
}

/* The lwC emulation's word on a create that failed at a limit (its table
 * of shared regions, the descriptor limit its memfds count against). */
static const char *lwcm_limit_why(void) { return lwc_limit_why(); }

const struct isob_mechanism isob_mech_lwc = {
    .name = "lwc",
    .summary = "light-weight context: fork snapshot, lwc_switch on a robust futex (lwc.h)",
    .props = ISOB_ISOLATES_MEMORY | ISOB_SEPARATE_AS | ISOB_TWO_CONTEXTS,
    .probe = isob_phs_probe,
    .create = lwcm_create,
    .call = lwcm_call,
    .shared = lwcm_shared,
    .destroy = lwcm_destroy,
    .locate = lwcm_locate,
    .limit_why = lwcm_limit_why,
};
