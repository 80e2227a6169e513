/* The host calls of native mechanisms (isobench/work.h).  This code runs
 * in whatever process runs the trusted code: the caller's for in-process
 * mechanisms, the server for process mechanisms, so the system call is
 * made where the compartment lives, as a library inside it would make it.
 * wasm guests reach their own implementation in wasm.c instead, and the
 * MPK gate's window copy of the trusted code its own system calls
 * (src/trusted/window.c), with the same results.  What the
 * untrusted side grants host calls is in host_grant.c. */
#include <errno.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

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
        /* -1 marks "not written": a getrusage that reports success
         * without filling the buffer (answered by a seccomp filter) gives
         * -EIO, not what the stack held (the window copy does the same). */
        struct rusage ru;
        ru.ru_minflt = -1;
        if (getrusage(RUSAGE_SELF, &ru) != 0)
            return -errno;
        return ru.ru_minflt < 0 ? -EIO : (int64_t)ru.ru_minflt;
    }
    default:
        return -ENOSYS;
    }
}
