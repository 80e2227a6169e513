/* The host calls of native mechanisms (isobench/work.h).  This code runs
 * in whatever process runs the trusted code: the caller's for in-process
 * mechanisms, the server for process mechanisms, so the system call is
 * made where the compartment lives, as a library inside it would make it.
 * wasm guests reach their own implementation in wasm.c instead. */
#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "isob_wasm.h"
#include "isobench/host.h"
#include "isobench/work.h"

int64_t isob_host_call(uint32_t op, int64_t a0, int64_t a1, int64_t a2)
{
    switch (op) {
    case ISOB_HOST_WRITE: {
        ssize_t r = write((int)a0, (const void *)(uintptr_t)a1, (size_t)a2);
        return r < 0 ? -errno : (int64_t)r;
    }
    case ISOB_HOST_READ: {
        ssize_t r = read((int)a0, (void *)(uintptr_t)a1, (size_t)a2);
        return r < 0 ? -errno : (int64_t)r;
    }
    case ISOB_HOST_DISCARD:
        if (a1 % ISOB_WORK_PAGE || a2 % ISOB_WORK_PAGE || a2 < 0)
            return -EINVAL;
        return madvise((void *)(uintptr_t)a1, (size_t)a2, MADV_DONTNEED) == 0 ? 0 : -errno;
    case ISOB_HOST_MINFLT: {
        struct rusage ru;
        if (getrusage(RUSAGE_SELF, &ru) != 0)
            return -errno;
        return (int64_t)ru.ru_minflt;
    }
    default:
        return -ENOSYS;
    }
}

extern const struct isob_mechanism isob_mech_wasm, isob_mech_wasm_bounds;

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
    return 1;
}
