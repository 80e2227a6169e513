/* Closing a forked server to OS-level readers (see server.h). */
#include <errno.h>
#include <sys/prctl.h>

#include "isobench/server.h"

int isob_server_close_to_readers(void)
{
    /* A non-dumpable process passes the kernel's ptrace access check only
     * for a caller with CAP_SYS_PTRACE: without it, process_vm_readv and
     * process_vm_writev, /proc/PID/mem, ptrace attach and pidfd_getfd are
     * all refused, even to the same uid and to the parent that forked it.
     * It also leaves no core dump, and makes /proc/PID's files root's. */
    if (prctl(PR_SET_DUMPABLE, 0) != 0)
        return -errno;
    if (prctl(PR_GET_DUMPABLE) != 0)
        return -EPERM;
    return 0;
}
