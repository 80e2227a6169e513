/* none: nothing is imposed.  The baseline every other confinement's
 * slowdown is taken against, in the same run and the same binary.  It
 * still verifies something: that the process is not traced, since a
 * debugger or strace in the baseline would make every slowdown a lie, and
 * it records any seccomp filter the environment (a container) imposed on
 * every confinement alike. */
#include <stdio.h>

#include "isobench/confine.h"

static const char *const none_variants[] = {"default", NULL};

static int none_probe(char *why, size_t len)
{
    (void)why;
    (void)len;
    return 0;
}

static int none_apply(struct isob_confine_state *st, const struct isob_confine_req *req, char *why,
                      size_t len)
{
    (void)st;
    (void)req;
    (void)why;
    (void)len;
    return 0;
}

static int none_verify(struct isob_confine_state *st, char *why, size_t len)
{
    long tracer = -1, mode = -1, filters = -1;
    int rc = isob_status_field("TracerPid", &tracer);
    if (rc) {
        snprintf(why, len, "cannot read TracerPid from /proc/self/status: %s", isob_strerror(rc));
        return rc;
    }
    isob_evidence(st, "tracer_pid", "%ld", tracer);
    /* What the environment imposed before isob ran, on every confinement. */
    if (isob_status_field("Seccomp", &mode) == 0)
        isob_evidence(st, "ambient_seccomp_mode", "%ld", mode);
    if (isob_status_field("Seccomp_filters", &filters) == 0)
        isob_evidence(st, "ambient_seccomp_filters", "%ld", filters);
    if (tracer != 0) {
        snprintf(why, len, "the process is traced by pid %ld: no unconfined baseline", tracer);
        return -EPERM;
    }
    return 0;
}

const struct isob_confinement isob_confine_none = {
    .name = "none",
    .summary = "nothing imposed: the baseline (verified untraced; ambient seccomp recorded)",
    .threat = "none: the process may make every system call its credentials allow",
    .variants = none_variants,
    .probe = none_probe,
    .apply = none_apply,
    .verify = none_verify,
};
