/* Closing a forked server, and the process that creates compartments, to
 * OS-level readers (see server.h). */
#include <errno.h>
#include <sys/prctl.h>

#include "isobench/osprobe.h"
#include "isobench/server.h"

/* The tracer a server accepts besides none (isob_server_accept_tracer). */
static pid_t accepted_tracer;

int isob_caller_close_to_readers(void)
{
    /* A non-dumpable process passes the kernel's ptrace access check only
     * for a caller with CAP_SYS_PTRACE: without it, process_vm_readv and
     * process_vm_writev, /proc/PID/mem, ptrace attach and pidfd_getfd are
     * all refused, even to the same uid and to the parent that forked it.
     * It also leaves no core dump, and makes /proc/PID's files root's.  A
     * fork inherits it, so a server is closed from its first instruction,
     * before its own step below. */
    if (prctl(PR_SET_DUMPABLE, 0) != 0)
        return -errno;
    if (prctl(PR_GET_DUMPABLE) != 0)
        return -EPERM;
    return 0;
}

void isob_server_accept_tracer(pid_t pid)
{
    accepted_tracer = pid;
}

int isob_server_close_to_readers(void)
{
    int rc = isob_caller_close_to_readers();
    if (rc)
        return rc;
    /* Non-dumpable shuts out attachers from now on, not a tracer already
     * attached: that one came through the fork with the server (or was
     * attached to the caller before) and could have turned the step above
     * into a no-op.  So a traced server holds no trusted heap.  This
     * holds against a tracer that does not hide only: one that rewrites
     * TracerPid in what this read returns gets past it (src/osprobe/
     * tracer.c, ISOB_TRACER_HIDE; the matrix's pre-attached cell).  Without
     * /proc there is nothing to read: the check is skipped. */
    long tracer = isob_tracer_pid(0);
    if (tracer == -ENOENT)
        return 0;
    if (tracer < 0)
        return (int)tracer;
    if (tracer == 0 || accepted_tracer == ISOB_ANY_TRACER || tracer == (long)accepted_tracer)
        return 0;
    return -ISOB_ETRACED;
}
