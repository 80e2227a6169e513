/* The isolation matrix: who can reach a secret planted in the trusted heap.
 *
 * Four attackers, each a cell with a verdict, the method and the evidence:
 *
 *   in-process  the untrusted side reads and then writes the secret by its
 *               address, under a SIGSEGV/SIGBUS handler.  For a mechanism
 *               that claims ISOB_ISOLATES_MEMORY both must fault with the
 *               fault the mechanism declares (fault_code) and the secret
 *               must be intact; "no fault, other data" or another fault is
 *               not a pass.  A mechanism with an escape op (wasm) runs its
 *               own attempts instead.
 *   same-uid    the OS-level probes of osprobe.h, as the caller's uid
 *   other-uid   without capabilities, as another uid, and as root, against
 *   root        the process that holds the trusted heap (the compartment's
 *               server, or for in-process mechanisms the caller's own).
 *   pre-attached  a same-uid tracer attached to the caller before the
 *               compartment existed (osprobe.h, the pre-attached tracer),
 *               in a helper that stands for a freshly started caller;
 *               run twice, the naive tracer and the one that hides from
 *               TracerPid (ISOB_TRACER_HIDE), and the worse of the two
 *
 * Each cell also carries its condition: what it covers and under what it
 * was measured and holds (the same-uid cell of a separate address space:
 * for compartments created while no process traced the caller, with Yama's
 * ptrace_scope and the caller's TracerPid at creation in its evidence, and
 * by a caller non-dumpable at creation).
 *
 * The fork window.  The kernel checks /proc/PID/mem at open, so a same-uid
 * racer that opens a server between its fork and its hardening reads its
 * heap later (mechanism.h, isob_comp_create).  For a separate address
 * space the same-uid cell carries two racer runs, each in a helper that
 * stands for a freshly started caller (as root: uid ISOB_OSP_OTHER_UID):
 * the caller as isob_comp_create leaves it (non-dumpable before the fork),
 * and a dumpable caller (spec.allow_dumpable: the server hardens itself
 * after the fork).  The racer (osprobe.h) spins over the next process ids,
 * opens /proc/SERVER/mem, and reads the secret once it is planted.  The
 * cell is leaks when the racer read the secret from a caller as this
 * matrix's caller created it (a caller run with ISOB_ALLOW_DUMPABLE=1 is
 * the dumpable one).
 *
 * Measured, never declared: every cell comes from attempts on this
 * machine.  A cell that could not be tried is untested, with the reason.
 * The one-word summary is the Python side's (python/isobench/attackers.py,
 * rule in docs/mechanisms.md).  Faults are caught with a signal handler in
 * the calling process and the probes fork helpers, so run it in a child
 * process (isob and the tests do). */
#ifndef ISOBENCH_ISOLATION_H
#define ISOBENCH_ISOLATION_H

#include <stdio.h>

#include "isobench/isolation_cell.h"
#include "isobench/mechanism.h"
#include "isobench/osprobe.h"

/* Version of the matrix in `isob isolation` output.  History:
 *   1  the four attackers, per-probe details, Yama's ptrace_scope.
 *   2  a condition per cell, the pre-attached tracer, caller_tracer_pid
 *      and caller_closed (the caller made itself non-dumpable first).
 *   3  the fork-window racer: the same-uid cell's "fork_window" (a run per
 *      caller, non-dumpable and dumpable at creation) and
 *      "caller_dumpable" (the caller was allowed to stay dumpable). */
#define ISOB_MATRIX_VERSION 3

enum isob_attacker {
    ISOB_ATK_IN_PROCESS,
    ISOB_ATK_SAME_UID,
    ISOB_ATK_OTHER_UID,
    ISOB_ATK_ROOT,
    ISOB_ATK_PRE_ATTACHED,
    ISOB_ATK__COUNT
};

struct isob_isolation {
    int claims;           /* the mechanism claims ISOB_ISOLATES_MEMORY */
    /* The in-process test as words: "enforced", "leaked", "none",
     * "unexpected" (a fault other than the declared one, or no fault and
     * other data: the test did not reach the heap), "skipped", "failed". */
    const char *verdict;
    char read[160];       /* what the read attempt met */
    char write[160];      /* what the write attempt met */
    int intact;           /* 1 intact, 0 changed, -1 unknown */
    char reason[256];     /* why skipped/failed/leaked/unexpected */
    int expect_fault;     /* the si_code the in-process attempts must meet; 0 none */
    /* The matrix (isob_isolation_matrix only). */
    int os_target_self;   /* the OS-level probes targeted the caller's own process */
    int same_uid_self;    /* the same-uid probes did (as root they probe a compartment
                           * an unprivileged helper created) */
    long os_target_pid;
    uintptr_t os_target_addr;
    int yama;             /* Yama's ptrace_scope, -1 when absent */
    long same_uid_tracer_pid; /* the same for the caller of the same-uid cell (as root: a helper) */
    long caller_tracer_pid; /* TracerPid of the caller when it created the compartment
                             * (a negative errno when unreadable) */
    int caller_dumpable;  /* the caller was allowed to stay dumpable (ISOB_ALLOW_DUMPABLE=1) */
    int caller_closed;    /* 0: the caller made itself non-dumpable before creating it;
                           * 1: not taken (in-process: the secret is in the caller);
                           * else the negative errno of that step */
    int secret_intact_after; /* the secret was intact after every probe: 1, 0, -1 unknown */
    struct isob_cell cells[ISOB_ATK__COUNT];
};

const char *isob_attacker_name(enum isob_attacker a);
const char *isob_cell_verdict_name(int v);
/* "SEGV_MAPERR" and so on; "si_code N" for others. */
const char *isob_segv_code_name(int code);

/* The in-process test only (cells[ISOB_ATK_IN_PROCESS] and the words above);
 * returns 0 when it could run (see r->verdict). */
int isob_isolation_test(const struct isob_mechanism *m, struct isob_isolation *r);

/* The whole matrix; returns 0 when it could run (see the cells). */
int isob_isolation_matrix(const struct isob_mechanism *m, struct isob_isolation *r);

/* One racer run against m's fork window (see above): the caller as
 * isob_comp_create leaves it (dumpable 0) or allowed to stay dumpable
 * (1), in a helper.  Fills out (its verdict: leaks when the racer read
 * the secret; enforced only when it met the server's process id and was
 * refused every time; else untested with why); 0, or the helper's
 * negative errno. */
int isob_fork_race(const struct isob_mechanism *m, int dumpable, struct isob_race *out);

/* The matrix as one `isolation` JSON line (schema in docs/design.md). */
void isob_isolation_emit(FILE *f, const struct isob_mechanism *m, const struct isob_isolation *r);

#endif
