/* The mechanism contract: one ops table per isolation mechanism.
 *
 * A compartment has a private trusted heap, a shared buffer (a struct
 * isob_msg followed by data) and the entry points of trusted.h.  The
 * untrusted side reaches it only through call().  Errors are negative errno
 * values everywhere; isob_strerror() turns them into text. */
#ifndef ISOBENCH_MECHANISM_H
#define ISOBENCH_MECHANISM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "isobench/error.h"
#include "isobench/trusted.h"

/* Properties a mechanism claims. */
enum {
    ISOB_ISOLATES_MEMORY = 1u << 0,  /* the untrusted side cannot read or write the trusted heap */
    ISOB_SEPARATE_AS = 1u << 1,      /* the compartment runs in another address space */
    ISOB_FILTERS_SYSCALLS = 1u << 2, /* the compartment's system calls are filtered */
    ISOB_TWO_CONTEXTS = 1u << 3,     /* a second execution context serves calls (placement matters) */
    ISOB_TEST_ONLY = 1u << 4,        /* misbehaves on purpose; listed only with ISOBENCH_TEST_MECHANISMS=1 */
};

/* Defaults for a compartment. */
#define ISOB_DEFAULT_SHARED_SIZE (64u * 1024u)  /* shared buffer bytes, header included */
#define ISOB_DEFAULT_HEAP_SIZE (1u << 20)       /* trusted heap bytes */

/* Descriptors a compartment's host calls may use (isobench/host.h), at most. */
#define ISOB_SPEC_HOST_FDS 4

struct isob_comp_spec {
    size_t shared_size;  /* bytes of the shared buffer, header included */
    size_t heap_size;    /* bytes of the trusted heap */
    int server_cpu;      /* CPU of the second context, -1 for unpinned */
    /* Descriptors the compartment's host calls work on, open before it is
     * created: a forked server keeps these (and closes every other one it
     * inherited), so that the same numbers name the same files there. */
    int host_fds[ISOB_SPEC_HOST_FDS];
    unsigned n_host_fds;
    /* 1: create even while the caller is dumpable (see isob_comp_create);
     * the compartment's server is then open to a same-uid reader from its
     * fork to its own hardening.  0 (isob_spec_defaults): not. */
    int allow_dumpable;
};

/* Liveness.  A compartment whose second context is a process can die
 * (killed, crashed, out of memory) while its caller waits for an answer.
 * The contract, for every mechanism:
 *
 *   - create() returns the server's own error at once (-ENOMEM for a heap
 *     it could not map, the pinning error, -EOWNERDEAD when it died during
 *     set-up); it never leaves the caller to find out at the first call.
 *   - call() on a compartment whose server has died returns -EOWNERDEAD,
 *     promptly: no wait on the other side lasts past its death (the futex
 *     and spinning handoffs use a robust futex word that the kernel marks
 *     when the server ends; the pipe and socket ones read end of file).
 *     isob_comp_why() then says why ("died: signal 9 (Killed)"), and every
 *     later call returns -EOWNERDEAD at once; destroy() still works.
 *   - A trusted entry may return -EOWNERDEAD too (ISOB_ENTRY_FAIL can
 *     return anything), so a caller tells death by isob_comp_why(), not by
 *     the value alone.
 *   - The fast path pays nothing for this: no timed wait, no extra system
 *     call per call.
 *   - thread: its server thread ends only with its process (a fault there
 *     kills the caller too), so it has nothing to watch.  In-process
 *     mechanisms have no second context.  A second context that lives but
 *     never answers is waited for; the runner's time-out and serve's stop
 *     handling bound that. */
#define ISOB_COMP_WHY_LEN 128

/* Every mechanism's compartment begins with this. */
struct isob_comp {
    const struct isob_mechanism *mech;
    size_t data_cap;     /* bytes available in shared()->data */
    /* Why the compartment stopped serving, empty while it serves.  Written
     * by the mechanism (isob_server_ended); read with isob_comp_why. */
    char why[ISOB_COMP_WHY_LEN];
};

struct isob_cell;

/* Where something of the trusted side lives, for a reader outside the
 * mechanism (the OS-level probes of isolation.h). */
struct isob_place {
    pid_t pid;        /* the process that holds it; 0 for the caller's own */
    uintptr_t addr;   /* its address in that process */
};

/* ERIM's call kinds (Vahldiek-Oberwagner et al., USENIX Security 2019,
 * section 6; Konrad 2023, Table 5.1): how the code behind a gate is called.
 * The switch benchmark's variants inline, direct-call and indirect-call. */
enum isob_call_kind { ISOB_KIND_INLINE, ISOB_KIND_DIRECT_CALL, ISOB_KIND_INDIRECT_CALL, ISOB_CALL_KINDS };

struct isob_mechanism {
    const char *name;
    const char *summary;  /* one line for `isobench list` */
    unsigned props;
    /* Extra members for the params of every result, as JSON object members
     * without braces (e.g. "\"checks\":\"bounds\""), or NULL. Used to record
     * how the mechanism was configured (safety checks, gate kind). */
    const char *result_params;
    /* 0 if the mechanism can run here; else -ENOTSUP (or another negative
     * errno) with a one-line reason in why. */
    int (*probe)(char *why, size_t len);
    int (*create)(const struct isob_comp_spec *spec, struct isob_comp **out);
    /* Run entry inside the compartment; arguments and results travel in the
     * shared buffer.  Returns the entry's result, or -EOWNERDEAD when the
     * compartment died (see Liveness above). */
    long (*call)(struct isob_comp *c, unsigned entry);
    struct isob_msg *(*shared)(struct isob_comp *c);
    void (*destroy)(struct isob_comp *c);
    /* The isolation matrix (isolation.h).  All three are optional. */
    /* The si_code of the SIGSEGV an access from the caller to the trusted
     * heap must meet (SEGV_ACCERR for page protections, SEGV_PKUERR for
     * protection keys).  0: SEGV_MAPERR when the mechanism claims
     * ISOB_SEPARATE_AS, else none declared (the in-process cell of a
     * mechanism that claims isolation then stays untested). */
    int fault_code;
    /* Where trusted_addr, an address as the trusted code sees it (the one
     * ISOB_ENTRY_SECRET_PLANT returns), lives for a reader outside the
     * mechanism: 0 or a negative errno.  NULL: in the caller's own process,
     * at trusted_addr itself. */
    int (*locate)(struct isob_comp *c, uint64_t trusted_addr, struct isob_place *out);
    /* The in-process cell, for mechanisms whose untrusted side is not the
     * caller (wasm: the guest is untrusted, the host trusted): escape
     * attempts by the untrusted side against the secret planted at
     * trusted_addr.  Fills the cell's verdict, method and evidence; 0 or a
     * negative errno.  NULL: the caller reads and writes the secret by
     * address. */
    int (*escape)(struct isob_comp *c, uint64_t trusted_addr, struct isob_cell *cell);
    /* Optional: ERIM's call kinds through this mechanism's gate, indexed by
     * enum isob_call_kind: the gate around an empty function that counts
     * its calls in trusted memory, inlined into the gate, called directly,
     * or called through a pointer the untrusted side cannot write.  Each
     * returns 0, or a negative errno for a refused call.  NULL where the
     * mechanism has no such form (the switch benchmark then skips the
     * variant and says so). */
    long (*call_kind[ISOB_CALL_KINDS])(struct isob_comp *c);
    /* Optional: why the last create failed, where it failed at a limit the
     * mechanism knows of (a table of its own, the descriptor limit): what
     * limit, where, how to raise it.  NULL: the errno says all it knows. */
    const char *(*limit_why)(void);
};

/* The registry. */
extern const struct isob_mechanism *const isob_mechanisms[];
const struct isob_mechanism *isob_mechanism_find(const char *name);
/* 1 when the mechanism is listed (test-only ones need ISOBENCH_TEST_MECHANISMS=1). */
int isob_mechanism_listed(const struct isob_mechanism *m);

/* Create a compartment of mechanism m (sets c->mech); 0 or -errno.
 *
 * The fork window.  The kernel checks access to /proc/PID/mem and
 * /proc/PID/maps when they are opened, not when they are read, so a
 * same-uid process that opens a server between its fork and its own
 * PR_SET_DUMPABLE 0 reads its trusted heap later.  A fork inherits
 * non-dumpability, so for a mechanism whose compartment is another process
 * (ISOB_SEPARATE_AS) create first makes the caller non-dumpable
 * (isob_caller_harden), and the server is closed from its first
 * instruction.  A caller that must stay dumpable says so explicitly:
 * spec->allow_dumpable, or ISOB_ALLOW_DUMPABLE=1 in the environment; its
 * servers then have the window.  A caller that cannot be made
 * non-dumpable gets create's error, with the reason in
 * isob_comp_create_why(). */
int isob_comp_create(const struct isob_mechanism *m, const struct isob_comp_spec *spec,
                     struct isob_comp **out);

/* Why the last isob_comp_create or isob_server_start of this thread failed
 * before the mechanism ran (the caller could not be made non-dumpable), or
 * NULL. */
const char *isob_comp_create_why(void);

/* The environment variable that lets every creation of this process go on
 * while the caller is dumpable ("1"); see isob_comp_create. */
#define ISOB_ALLOW_DUMPABLE_ENV "ISOB_ALLOW_DUMPABLE"

/* The caller's step before a process compartment's fork: nothing when it
 * is non-dumpable already (one PR_GET_DUMPABLE); else, unless allowed
 * (allow, or ISOB_ALLOW_DUMPABLE=1), isob_caller_close_to_readers.  0 (with
 * *stays_dumpable = 1 when it was allowed to stay dumpable), or a negative
 * errno with the reason in why. */
int isob_caller_harden(int allow, int *stays_dumpable, char *why, size_t len);
void isob_comp_destroy(struct isob_comp *c);

/* Why the compartment stopped serving ("died: signal 9 (Killed)"), or NULL
 * while it serves. */
static inline const char *isob_comp_why(const struct isob_comp *c)
{
    return c->why[0] ? c->why : NULL;
}

static inline long isob_call(struct isob_comp *c, unsigned entry)
{
    return c->mech->call(c, entry);
}

/* Helpers shared by mechanisms. */
/* The probe of a mechanism that needs nothing beyond what every Linux
 * machine isobench builds on has: always 0. */
int isob_probe_always(char *why, size_t len);
void isob_spec_defaults(struct isob_comp_spec *spec);
/* An anonymous mapping (shared across fork when shared != 0); NULL on error. */
void *isob_map(size_t len, int shared);
void isob_unmap(void *p, size_t len);

#endif
