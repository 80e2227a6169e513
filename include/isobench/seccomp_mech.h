/* Self-tests of the seccomp mechanism (src/mechanisms/seccomp.c).
 *
 * The trusted code makes no system calls, so the ordinary entries cannot
 * show that the filter holds.  These functions reach a private entry of
 * the server that does make one, and report how the server ended.  They
 * never wait forever: the forbidden call either answers or finds the server
 * gone (the robust handoff of futex.h), and the order out is waited for
 * with a time-out.  Both return 0 when they could observe the outcome,
 * -ENOTSUP (or another probe error) when seccomp is unavailable, -ETIMEDOUT
 * when the server ordered out did not end in time (it is then killed), or
 * another negative errno. */
#ifndef ISOBENCH_SECCOMP_MECH_H
#define ISOBENCH_SECCOMP_MECH_H

/* Create a compartment, make its server attempt a forbidden system call
 * (getpid) and set *term_signal to the signal that ended the server:
 * SIGSYS when the filter held, 0 when the call was allowed (it answered). */
int isob_seccomp_selftest_forbidden(int *term_signal);

/* Create a compartment, serve one call, order the server out and set
 * *wstatus to its waitpid status: a clean exit shows that the allow-list
 * covers everything the server does until it leaves. */
int isob_seccomp_selftest_exit(int *wstatus);

#endif
