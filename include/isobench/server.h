/* Helpers for mechanisms whose compartment is a forked server process. */
#ifndef ISOBENCH_SERVER_H
#define ISOBENCH_SERVER_H

#include <stddef.h>
#include <sys/types.h>

#include "isobench/trusted.h"

/* In the freshly forked server: die with the parent, pin to cpu (>= 0),
 * then map a private heap of heap_size bytes that exists only in this
 * process and set up the trusted component in it.  Returns the component,
 * or NULL (the server should then _exit). */
struct isob_trusted *isob_server_enter(int cpu, size_t heap_size);

/* Fork a server: the child enters (isob_server_enter with cpu and
 * heap_size), runs serve(arg, t) and exits (status 0, or 1 when it could
 * not enter).  Returns the child's pid to the parent, or a negative errno. */
pid_t isob_server_fork(int cpu, size_t heap_size,
                       void (*serve)(void *arg, struct isob_trusted *t), void *arg);

/* Reap a server: wait up to timeout_ms for it to exit, then SIGKILL it. */
void isob_server_reap(pid_t pid, int timeout_ms);

/* Close the calling process to OS-level readers without root
 * (PR_SET_DUMPABLE 0; src/mechanisms/server_close.c): 0 or a negative
 * errno.  isob_server_enter does it before mapping the heap. */
int isob_server_close_to_readers(void);

#endif
