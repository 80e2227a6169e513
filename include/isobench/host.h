/* The host side of the host-call interface (isobench/work.h): what the
 * untrusted side grants a compartment's host calls. */
#ifndef ISOBENCH_HOST_H
#define ISOBENCH_HOST_H

#include "isobench/mechanism.h"

/* Let compartment c's host calls read and write fd.  Native mechanisms'
 * trusted code may already use any descriptor its process has (the host
 * call is a plain system call there), so this is 0 and does nothing; a
 * wasm guest may use only descriptors granted this way.  0 or -errno. */
int isob_host_grant_fd(struct isob_comp *c, int fd);

/* 1 when compartment entries of mechanism m can make host calls: not when
 * it filters the compartment's system calls (seccomp kills the server on
 * the first one).  why says so otherwise. */
int isob_host_calls_ok(const struct isob_mechanism *m, char *why, size_t len);

#endif
