/* What the untrusted side grants a compartment's host calls
 * (isobench/host.h). */
#include <errno.h>
#include <stdio.h>

#include "isob_wasm.h"
#include "isobench/host.h"

extern const struct isob_mechanism isob_mech_wasm, isob_mech_wasm_bounds, isob_mech_kvm;

int isob_host_grant_fd(struct isob_comp *c, int fd)
{
    if (c->mech == &isob_mech_wasm || c->mech == &isob_mech_wasm_bounds)
        return isob_wasm_grant_fd(c, fd);
    return fd < 0 ? -EBADF : 0;
}

int isob_host_calls_ok(const struct isob_mechanism *m, char *why, size_t len)
{
    if (m->props & ISOB_FILTERS_SYSCALLS) {
        snprintf(why, len, "%s filters the compartment's system calls: its trusted code cannot "
                 "make the host calls (read, write, madvise, getrusage) this placement needs", m->name);
        return 0;
    }
    if (m == &isob_mech_kvm) {
        snprintf(why, len, "kvm runs the trusted code in a guest without a kernel: it cannot make the "
                 "host calls (read, write, madvise, getrusage) this placement needs");
        return 0;
    }
    return 1;
}
