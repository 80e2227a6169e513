/* Shared by the probes (osprobe.c) and the scanning readers (scan.c). */
#ifndef ISOBENCH_OSPROBE_INTERNAL_H
#define ISOBENCH_OSPROBE_INTERNAL_H

#include <stddef.h>
#include <sys/types.h>

/* PTRACE_SEIZE pid, PTRACE_INTERRUPT it and wait until it stops.  0 when
 * stopped (*status is its stop), a negative errno when the attach was
 * refused, 1 when attached but it did not stop (note says so; the
 * attachment ends with the calling process or thread). */
int isob_ptrace_stop(pid_t pid, int *status, char *note, size_t notelen);

/* PTRACE_DETACH a target stopped by isob_ptrace_stop, handing back a signal
 * that arrived meanwhile. */
void isob_ptrace_release(pid_t pid, int status);

#endif
