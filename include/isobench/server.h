/* Helpers for mechanisms whose compartment is a forked server process.
 *
 * The life of a server, as its caller sees it:
 *
 *     isob_server_start   fork; the server detaches from what it inherited,
 *                         enters (isob_server_enter), runs the mechanism's
 *                         set-up and reports 0 or -errno through a pipe;
 *                         start returns that report, so create() fails at
 *                         once with the server's own error (-ENOMEM for a
 *                         heap it could not map, the pinning error) and no
 *                         caller ever waits for a time-out to learn it
 *     ... calls ...       the mechanism sees the server's end on its own
 *                         channel (the robust handoff word of futex.h turns
 *                         to ISOB_PHS_DIED, a pipe or socket reads end of
 *                         file) and calls isob_server_ended
 *     isob_server_stop    after the mechanism ordered the server out */
#ifndef ISOBENCH_SERVER_H
#define ISOBENCH_SERVER_H

#include <stddef.h>
#include <sys/types.h>

#include "isobench/trusted.h"

/* How long isob_server_ended waits for a server that was seen to end (its
 * handoff word marked, its pipe closed) to become a zombie before it kills
 * it: the kernel marks the word and closes the pipe on the way out, so this
 * is only a bound, never a wait that happens. */
#define ISOB_SERVER_END_WAIT_MS 500

/* A server process, as its caller knows it. */
struct isob_server {
    pid_t pid;    /* the server; 0 when there is none */
    int ended;    /* 1 once it was waited for; status is then its waitpid status */
    int status;
};

/* What a server runs and keeps. */
struct isob_server_spec {
    int cpu;              /* pin the server here; -1: unpinned */
    size_t heap_size;     /* bytes of its private trusted heap */
    /* In the server, after it entered, before it reports ready: whatever
     * the first call needs (e.g. isob_phs_serve_init).  0 or -errno, which
     * start then returns.  NULL: nothing. */
    int (*setup)(void *arg, struct isob_trusted *t);
    /* In the server: serve calls until ordered out; the server then exits
     * with status 0. */
    void (*serve)(void *arg, struct isob_trusted *t);
    void *arg;
    /* Descriptors the server keeps besides stdin, stdout and stderr (its
     * ends of a pipe or socket); -1 for none.  Every other descriptor it
     * inherited is closed, so a server holds no other compartment's
     * channel, no listening socket and no client connection. */
    int keep_fd[2];
    /* More descriptors it keeps: the compartment's host calls' (see
     * struct isob_comp_spec), n_host_fds of them. */
    const int *host_fds;
    unsigned n_host_fds;
    /* Test mechanisms only: the server accepts any tracer (see
     * isob_server_accept_tracer). */
    int test_any_tracer;
};

/* In the freshly forked server: die with the caller (PR_SET_PDEATHSIG, then
 * a check that the parent is still the process `parent` recorded before the
 * fork, since it may have died before the first step), pin to cpu (>= 0),
 * then map a private heap of heap_size bytes that exists only in this
 * process and set up the trusted component in it.  0 with *out set, or
 * -errno. */
int isob_server_enter(pid_t parent, int cpu, size_t heap_size, struct isob_trusted **out);

/* In a new server: the caller's signal handlers (e.g. serve's stop
 * handler, which writes to the caller's own pipe) are not the server's,
 * and signals the caller blocks must still reach the server: every
 * handler back to its default, nothing blocked.  isob_server_start does
 * it; a server started otherwise (the lwc mechanism) calls it itself. */
void isob_server_default_signals(void);

/* Fork a server and wait for its report.  0 once it is ready to serve; else
 * -errno: fork's, the server's own (enter's or setup's), or -EOWNERDEAD
 * when it died before reporting.  On failure no process is left. */
int isob_server_start(struct isob_server *s, const struct isob_server_spec *spec);

/* The caller saw the server end (or its channel break): wait for it
 * (ISOB_SERVER_END_WAIT_MS at most, then SIGKILL), write why into why (a
 * mechanism passes its compartment's why, see isob_comp_why) and return
 * -EOWNERDEAD.  Once the server was waited for, it only returns
 * -EOWNERDEAD. */
int isob_server_ended(struct isob_server *s, char *why, size_t len);

/* After the mechanism ordered the server out: wait up to timeout_ms for it
 * to exit, then SIGKILL it, and reap it.  0, or -ETIMEDOUT when it had to
 * be killed.  Nothing happens (0) when it was already waited for. */
int isob_server_stop(struct isob_server *s, int timeout_ms);

/* A waitpid status in words: "died: signal 9 (Killed)", "died: exit status 1". */
void isob_server_describe(int status, char *buf, size_t len);

/* Close the calling process to OS-level readers without root
 * (PR_SET_DUMPABLE 0, then PR_GET_DUMPABLE must say 0;
 * src/mechanisms/server_close.c), and refuse to go on while traced: a
 * tracer other than the one accepted (isob_server_accept_tracer) in
 * TracerPid is -ISOB_ETRACED.  0 or a negative errno.  isob_server_enter
 * does it before mapping the heap. */
int isob_server_close_to_readers(void);

/* The errno of a server that found itself traced: it holds no trusted
 * heap, and the compartment's creation fails with -ISOB_ETRACED. */
#define ISOB_ETRACED EPERM

/* The caller's step before it creates compartments: PR_SET_DUMPABLE 0,
 * verified with PR_GET_DUMPABLE.  It shuts out every same-uid attacher
 * from then on, and the servers it forks are closed from their first
 * instruction.  A tracer attached before it can fake both calls, which is
 * why the matrix's same-uid verdicts carry their condition.  0 or a
 * negative errno. */
int isob_caller_close_to_readers(void);

/* The one tracer servers of this process accept: the tracer of isob's
 * own confinement (confine ptrace), which isob started itself.  0: none.
 * ISOB_ANY_TRACER: any (test mechanisms only: the deliberately open
 * variant that shows the check is what closes the pre-attached tracer). */
#define ISOB_ANY_TRACER ((pid_t)-1)
void isob_server_accept_tracer(pid_t pid);

/* End this process with exit_group itself, not _exit(): for a forked
 * process that may be confined (a server, a measuring process).  A
 * sanitizer hooks _exit for its leak check, whose system calls (ptrace,
 * clone) a confined process may not make.  Output buffers are not flushed:
 * flush them first. */
void isob_exit_raw(int status) __attribute__((noreturn));

#endif
