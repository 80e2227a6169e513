/* The tiny static binary of oslat's fork-exec primitive: no C library, no
 * dynamic loader, one system call.  What fork+execve costs beyond fork is
 * then the kernel's loading of an executable, not a program's start-up.
 * It exits with OSLAT_TINY_STATUS so that the parent can tell that it ran. */
#include "isobench/arch.h"
#include "oslat.h"

void _start(void);

void _start(void)
{
    isob_raw_exit(OSLAT_TINY_STATUS);
}
