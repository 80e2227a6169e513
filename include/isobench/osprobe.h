/* OS-level probes: what the kernel lets one process do to another's memory.
 *
 * Each probe tries one way in (process_vm_readv, process_vm_writev,
 * /proc/PID/mem read and write, ptrace PEEKDATA, pidfd_getfd) against one
 * 8-byte secret at a known address of a target process, and says what
 * happened: granted or denied, the errno, whether the secret was seen and
 * whether it was changed.  Writes go to the secret's 8 bytes only, and
 * write the secret back at once; nothing else of the target is touched.
 *
 * The probes run as an identity (isob_osprobe_as): the caller's uid
 * without capabilities, another uid, or root.  Nothing here knows about
 * mechanisms: the isolation matrix (isolation.h) points the probes at a
 * compartment, and any other target (a pid, an address, a value) works the
 * same way. */
#ifndef ISOBENCH_OSPROBE_H
#define ISOBENCH_OSPROBE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum isob_osprobe {
    ISOB_OSP_VM_READV,    /* process_vm_readv of the secret */
    ISOB_OSP_VM_WRITEV,   /* process_vm_writev over it, then back */
    ISOB_OSP_MEM_READ,    /* pread of /proc/PID/mem */
    ISOB_OSP_MEM_WRITE,   /* pwrite of /proc/PID/mem, then back */
    ISOB_OSP_PTRACE_PEEK, /* PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_PEEKDATA, PTRACE_DETACH */
    ISOB_OSP_PIDFD_GETFD, /* pidfd_open, then pidfd_getfd of one descriptor */
    ISOB_OSP__COUNT
};

enum isob_osprobe_outcome {
    ISOB_OSP_UNTESTED = 0, /* could not be tried here (err says why: ENOSYS, ...) */
    ISOB_OSP_DENIED,       /* the kernel refused (err) */
    ISOB_OSP_GRANTED,      /* the kernel let it through */
};

/* Who probes. */
enum isob_identity {
    ISOB_ID_SAME_UID,  /* the caller's uid and gids, every capability dropped (note: a
                        * process holding capabilities stays closed to it even so) */
    ISOB_ID_OTHER_UID, /* an unprivileged uid (ISOB_OSP_OTHER_UID), no groups, no capabilities */
    ISOB_ID_ROOT,      /* uid 0 with the caller's capabilities (only when the caller is root) */
    ISOB_ID__COUNT
};

/* The uid and gid of the other-uid prober: "nobody" on Linux distributions. */
#define ISOB_OSP_OTHER_UID 65534

struct isob_osprobe_target {
    pid_t pid;        /* the process that holds the secret */
    uintptr_t addr;   /* the secret's address in it */
    uint64_t secret;  /* its value; writes put ~secret there, then secret again */
    int fd;           /* the descriptor pidfd_getfd asks for */
};

struct isob_osprobe_result {
    int outcome;        /* enum isob_osprobe_outcome */
    int err;            /* errno of a denial or of what kept it untested; 0 when granted */
    int secret_seen;    /* a read returned the secret */
    int secret_changed; /* a write landed on the secret */
    int restored;       /* after a landed write: the secret was written back */
    char note[96];      /* what else is worth saying ("read other data", a step that failed) */
};

struct isob_identity_info {
    int available;      /* the probes could run as this identity */
    char why[160];      /* why not */
    char how[96];       /* how the identity was made ("a thread of the caller, capabilities dropped") */
    long uid, gid;      /* the prober's real uid and gid */
    int cap_sys_ptrace; /* it held CAP_SYS_PTRACE in its effective set */
};

const char *isob_osprobe_name(enum isob_osprobe p);
const char *isob_identity_name(enum isob_identity id);

/* Run probe p against t from the calling thread, as it is.  Always fills r;
 * returns 0. */
int isob_osprobe_run(enum isob_osprobe p, const struct isob_osprobe_target *t,
                     struct isob_osprobe_result *r);

/* Run every probe against t as identity id, in a thread of the caller
 * (same uid: its capabilities dropped for that thread only) or in a forked
 * helper (other uid, root) that dies with the caller.  The caller keeps its
 * own credentials.  Returns 0 with res[ISOB_OSP__COUNT] filled, or a
 * negative errno when the identity is not available here (info->why). */
int isob_osprobe_as(enum isob_identity id, const struct isob_osprobe_target *t,
                    struct isob_osprobe_result res[ISOB_OSP__COUNT], struct isob_identity_info *info);

/* Run fn(arg, out) in a forked helper process that dies with the caller
 * and hand its len bytes of out (at most PIPE_BUF) back to the caller.
 * With uid >= 0 (root only) the helper first becomes that uid and gid with
 * no groups and no capabilities, and dumpable, as an ordinary process of
 * that user is.  0, or a negative errno with the reason in why. */
int isob_osprobe_helper(long uid, void (*fn)(void *arg, void *out), void *arg, void *out, size_t len,
                        char *why, size_t whylen);

/* Yama's ptrace_scope (0-3), or -1 when Yama is absent. */
int isob_yama_ptrace_scope(void);

#endif
