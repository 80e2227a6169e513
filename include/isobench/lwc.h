/* Light-weight contexts on stock Linux: an emulation of the semantics of
 * lwC (Litton et al., OSDI 2016), not of its in-kernel switch.
 *
 * lwC gives a process several isolated memory views, each with its own
 * descriptors and credentials, created as a copy-on-write snapshot of the
 * creator and entered with a coroutine switch.  Here a context is a
 * process: lwc_create forks, so the new context is the kernel's own
 * copy-on-write snapshot of memory, descriptors and credentials, and
 * lwc_switch is a handoff on a robust futex word (futex.h) in a page the
 * two share, so exactly one of them runs.  docs/lwc.md maps every call to
 * Linux and lists what the emulation cannot reproduce.
 *
 *     int caller;
 *     struct lwc_msg args;
 *     int h = lwc_create(spec, n, 0, &caller, &args);
 *     if (h == LWC_SWITCHED) {
 *         ... the new context, first entered with args ...
 *         lwc_switch(caller, &reply, &caller, &args);   back to the creator
 *     }
 *     ... the creator: h > 0 ...
 *     lwc_switch(h, &out, &from, &in);                  in: the reply
 *     lwc_destroy(h);
 *
 * Rules of the emulation:
 *   - Handles are small positive numbers local to a context, like file
 *     descriptors; a context knows its creator ("caller") and the contexts
 *     it created.  A switch goes to one of them: down to a context it
 *     created, which then runs until it switches back up (or down again,
 *     to one of its own).  The waits thus form one chain from the root to
 *     the running context, and each link is one futex word between a
 *     parent and a child process, which is what lets a context that dies
 *     wake exactly the one waiting for it.
 *   - Every call returns 0 (or a handle, or LWC_SWITCHED, LWC_TRAPPED) or a
 *     negative errno.  A handle that names nothing: -ESRCH.  A context that
 *     died: -EOWNERDEAD, and lwc_why() says how ("died: signal 11
 *     (Segmentation fault)").  A malformed spec: -EINVAL.
 *   - Every context dies with the thread that created it
 *     (PR_SET_PDEATHSIG); use the library from one thread of a process.
 *   - Not async-signal-safe; not thread-safe. */
#ifndef ISOBENCH_LWC_H
#define ISOBENCH_LWC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* lwc_create's return in the new context, as fork's 0 in a child. */
#define LWC_SWITCHED 0
/* lwc_switch's return when a LWC_SYSTRAP context made a trapped call. */
#define LWC_TRAPPED 1

/* Handles a context holds at once (its caller and its children): enough
 * for a server with a context per connection; the process and descriptor
 * limits of the machine usually bind first. */
#define LWC_MAX_HANDLES 65536
/* Spec entries one lwc_create takes. */
#define LWC_MAX_SPEC 64
/* Regions lwc_alloc_shared keeps track of per process: a table of
 * LWC_SHARED_FIRST slots that doubles as it fills, up to LWC_MAX_SHARED
 * (then lwc_alloc_shared fails with ENOSPC and lwc_limit_why says so).
 * Each region holds a descriptor, so RLIMIT_NOFILE usually binds first. */
#define LWC_SHARED_FIRST 64
#define LWC_MAX_SHARED 65536
/* Words of the arguments a switch carries. */
#define LWC_MSG_WORDS 8
/* Bytes of lwc_why's text. */
#define LWC_WHY_LEN 128

/* The arguments of a switch: what lwSwitch's args pointer would carry.
 * Larger data travels in memory from lwc_alloc_shared. */
struct lwc_msg {
    uint64_t w[LWC_MSG_WORDS];
};

/* What a spec entry names. */
enum lwc_res {
    LWC_RES_VM = 1,   /* a page-aligned range of addresses */
    LWC_RES_FD,       /* a range of descriptors */
    LWC_RES_CRED,     /* credentials of the new context */
    LWC_RES_SYSCALL,  /* a system call trapped under LWC_SYSTRAP */
};

/* How the new context gets a resource. */
enum lwc_how {
    LWC_COW = 0,  /* a snapshot: its own copy (memory), kept (descriptors); the default */
    LWC_SHARED,   /* memory only, and only whole regions of lwc_alloc_shared: the same pages */
    LWC_UNMAP,    /* not there at all: unmapped (memory), closed (descriptors) */
};

struct lwc_spec {
    enum lwc_res res;
    enum lwc_how how;
    union {
        struct {
            void *addr;  /* page-aligned */
            size_t len;  /* a multiple of the page size, > 0 */
        } vm;
        struct {
            int lo, hi;  /* inclusive, 0 <= lo <= hi */
        } fd;
        struct {
            uid_t uid;   /* real, effective and saved; supplementary groups dropped */
            gid_t gid;
        } cred;
        struct {
            int nr;      /* x86-64 system call number */
        } sys;
    };
};

/* Flags of lwc_create. */
enum {
    /* The system calls of LWC_RES_SYSCALL entries, made in the new context,
     * switch to its creator instead of running: lwc_switch returns
     * LWC_TRAPPED there, and lwc_syscall decides the call.  Seccomp user
     * notification, with the creator as supervisor.  Every other call runs
     * as made: a context that must not open files another way is confined
     * by a second filter of its own (src/monitor's rm_confine).  The
     * context makes itself dumpable, since the supervisor reads it; a
     * supervisor should hide its own memory (PR_SET_DUMPABLE 0) before it
     * creates the context. */
    LWC_SYSTRAP = 1u << 0,
};

/* Create a context: a copy-on-write snapshot of the caller, changed as
 * spec says (n entries; spec may be NULL when n is 0), blocked until the
 * first switch to it.  In the caller: its handle (> 0), or a negative
 * errno, the new context's own set-up error included (-EPERM for
 * credentials it could not take).  In the new context, once switched to:
 * LWC_SWITCHED, with *caller the creator's handle and *args the first
 * switch's arguments (either pointer may be NULL). */
int lwc_create(const struct lwc_spec *spec, size_t n, unsigned flags, int *caller,
               struct lwc_msg *args);

/* Switch to target with out (NULL: all zero), and sleep until a context
 * switches back.  Returns 0 with *from the handle of who switched in and
 * *in its arguments; LWC_TRAPPED when target trapped a system call (*from
 * is target, in->w[0] the call's number and w[1..6] its arguments; decide
 * it with lwc_syscall, then switch to target again to let it go on); or a
 * negative errno: -ESRCH for no such handle, -EOWNERDEAD when target died
 * (see lwc_why). */
int lwc_switch(int target, const struct lwc_msg *out, int *from, struct lwc_msg *in);

/* End a context this one created (SIGKILL, and reap it), or drop the
 * handle of the caller.  Its handle is then free: a later switch to it is
 * -ESRCH until lwc_create hands the number out again.  0 or -ESRCH. */
int lwc_destroy(int lwc);

/* The process of a context (its pid), or a negative errno. */
pid_t lwc_pid(int lwc);

/* How a context ended ("died: signal 9 (Killed)"), or NULL while it lives. */
const char *lwc_why(int lwc);
/* Why the last lwc_alloc_shared failed, where the cause was a limit (the
 * library's table, or the process's or system's descriptor limit): what
 * limit, where, how to raise it.  NULL after a success or another failure. */
const char *lwc_limit_why(void);
/* The most regions the table may grow to, LWC_SHARED_FIRST to
 * LWC_MAX_SHARED (the default); a table already larger keeps its slots.
 * 0 or -EINVAL. */
int lwc_shared_limit(size_t max);

/* The signal that ended a context, 0 if none did (or it lives). */
int lwc_termsig(int lwc);

/* Memory that contexts created later can share (LWC_SHARED): len bytes,
 * rounded up to pages, of a memfd mapped MAP_SHARED, since Linux cannot
 * make a private range shared after the fact.  NULL with errno set on
 * failure. */
void *lwc_alloc_shared(size_t len);
/* Unmap a region of lwc_alloc_shared and close its memfd; 0 or -EINVAL. */
int lwc_free_shared(void *addr);

/* How lwc_overlay brings a range over. */
enum lwc_overlay_how {
    LWC_OVERLAY_COPY_IN = 1,  /* target's bytes into ours (process_vm_readv) */
    LWC_OVERLAY_COPY_OUT,     /* our bytes into target's (process_vm_writev) */
    LWC_OVERLAY_SHARE,        /* map target's lwc_alloc_shared region here, same address */
};

struct lwc_overlay {
    void *addr;  /* the same address in both contexts */
    size_t len;
    enum lwc_overlay_how how;
};

/* Overlay n ranges of a context this one created.  0 or a negative errno,
 * the kernel's own: -EPERM once lwc_restrict took the access away. */
int lwc_overlay(int lwc, const struct lwc_overlay *ov, size_t n);

/* Take away the creator's access to a context it created, for good:
 *   - the target makes itself non-dumpable, and installs a seccomp filter
 *     that refuses it process_vm_readv, process_vm_writev, ptrace,
 *     pidfd_getfd and prctl(PR_SET_DUMPABLE) (EPERM);
 *   - the caller, if it holds CAP_SYS_PTRACE, drops it from its effective,
 *     permitted, inheritable, ambient and bounding sets: Linux has no right
 *     towards one process alone to give up, so this holds for every
 *     non-dumpable process, for the rest of the caller's life.
 * Afterwards the kernel refuses the caller process_vm_*, ptrace attach,
 * /proc/PID/mem and pidfd_getfd on the target, so lwc_overlay fails with
 * -EPERM.  0 or a negative errno. */
int lwc_restrict(int lwc);

/* What the supervisor does with a trapped call (lwc_syscall). */
enum lwc_sys_action {
    LWC_SYS_DENY = 1,  /* the call fails with errno value (EPERM when 0) */
    LWC_SYS_RETURN,    /* the call returns value without running */
    LWC_SYS_CONTINUE,  /* the kernel runs the call as made; refused (-EINVAL) for calls
                        * whose arguments point at memory the policy would read, such as a
                        * path: the context could change it between check and use */
    LWC_SYS_OPEN,      /* openat: the supervisor opens path (its own checked copy) with
                        * flags and mode and puts the descriptor into the context
                        * (SECCOMP_IOCTL_NOTIF_ADDFD); the call returns its number */
};

struct lwc_sysreply {
    enum lwc_sys_action action;
    long value;        /* DENY: errno; RETURN: the result */
    const char *path;  /* OPEN */
    int flags;         /* OPEN: open flags */
    mode_t mode;       /* OPEN */
};

/* Decide the call a LWC_SYSTRAP context trapped (lwc_switch returned
 * LWC_TRAPPED).  The answer reaches the context at the next switch to it;
 * a switch without one denies the call with EPERM.  Returns 0, or for
 * LWC_SYS_OPEN the descriptor's number in the context, or a negative
 * errno (-EINVAL: no trapped call pending, or CONTINUE on a call that
 * reads memory; an OPEN that failed in the supervisor makes the call fail
 * with that errno, and lwc_syscall returns it too). */
int lwc_syscall(int lwc, const struct lwc_sysreply *r);

/* Copy the NUL-terminated string that argument argi (0..5) of the trapped
 * call points at into buf (at most len bytes, NUL included), read from the
 * context's memory; then check that the call is still pending, so that
 * the string belongs to it.  The string's length, or -ENAMETOOLONG,
 * -EFAULT, -EINVAL (nothing pending), -ESRCH. */
int lwc_trap_string(int lwc, unsigned argi, char *buf, size_t len);

/* The number the trap handoff uses for a switch up from a LWC_SYSTRAP
 * context: a system call number Linux does not have, trapped like the
 * others, so that a context confined this way needs no other way out. */
#define LWC_SYSTRAP_SWITCH_NR 1023

#endif
