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
 * same way.
 *
 * The second half is the outside reader of `isob scrape` (scrape.h): a
 * plan of what to read, made from the target's own /proc/PID/smaps
 * (isob_scan_plan_*), and three readers that read it through
 * /proc/PID/mem, process_vm_readv or ptrace PEEKDATA and look for a
 * canary (isob_scan).  They only read, and only inside the plan. */
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
    int userns;         /* it ran in a user namespace of its own (its capabilities count there only) */
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

/* What a helper becomes before it runs fn, in this order. */
enum {
    ISOB_CRED_DROP_ALL_CAPS = 1u << 0,   /* no capability in any set, the bounding set
                                          * included: an unprivileged process */
    ISOB_CRED_DROP_SYS_PTRACE = 1u << 1, /* CAP_SYS_PTRACE out of every set (bounding,
                                          * permitted, effective, inheritable, ambient);
                                          * the other capabilities stay */
    ISOB_CRED_NEW_USERNS = 1u << 2,      /* last, unshare(CLONE_NEWUSER): every capability,
                                          * but in a user namespace of its own only */
};

/* How long a helper may take to report when timeout_ms is 0. */
#define ISOB_HELPER_TIMEOUT_MS 10000

struct isob_cred {
    long uid;          /* become this uid and gid, no groups, dumpable (root only); -1: keep */
    unsigned flags;    /* ISOB_CRED_* */
    int timeout_ms;    /* how long the helper may take to report; 0: ISOB_HELPER_TIMEOUT_MS */
};

/* isob_osprobe_helper with the credentials of cred.  A change that fails
 * (unshare refused, capabilities that will not go) is the helper's error:
 * fn does not run, and why says what failed. */
int isob_osprobe_helper_cred(const struct isob_cred *cred, void (*fn)(void *arg, void *out), void *arg,
                             void *out, size_t len, char *why, size_t whylen);

/* Who the calling thread is: uid, gid and CAP_SYS_PTRACE (available = 1). */
void isob_identity_self(struct isob_identity_info *info);

/* Yama's ptrace_scope (0-3), or -1 when Yama is absent. */
int isob_yama_ptrace_scope(void);

/* The TracerPid of /proc/PID/status (pid 0: the calling process): the
 * pid of the process tracing it, 0 when none, or a negative errno. */
long isob_tracer_pid(pid_t pid);

/* ---- The pre-attached tracer (src/osprobe/tracer.c) ----
 *
 * A process of the caller's uid without capabilities that attaches to the
 * caller with PTRACE_SEIZE (PTRACE_O_TRACEFORK, VFORK, CLONE) before the
 * caller goes on, as any process of the user may where Yama is absent or
 * at 0, and follows every process the caller starts from then on.  It
 * rewrites prctl(PR_SET_DUMPABLE, 0) to 1 at its entry and makes
 * prctl(PR_GET_DUMPABLE) return 0, in every tracee, so that a process
 * believes itself closed to readers when it is not; on request it reads a
 * target with process_vm_readv and /proc/PID/mem.  The naive mode does not
 * hide itself: TracerPid in /proc/PID/status names it, which is what a
 * server's check finds.  The hiding mode (ISOB_TRACER_HIDE) also rewrites
 * that number to 0 in every buffer its tracees read (read, pread64, readv,
 * preadv, preadv2), so that the check finds no tracer (tracer.c lists each
 * check and what the tracer does to it).  It dies with the caller;
 * stopping it detaches every tracee, which goes on. */

#define ISOB_TRACER_PROBES 2
enum { ISOB_TRACER_VM_READV, ISOB_TRACER_MEM_READ };

struct isob_tracer_stats {
    int attached;       /* the caller was seized and stopped */
    int followed;       /* processes traced: the caller and those it started since */
    int set_rewritten;  /* prctl(PR_SET_DUMPABLE, 0) turned into 1 */
    int get_faked;      /* prctl(PR_GET_DUMPABLE) made to return 0 */
    int hides;          /* the hiding mode (ISOB_TRACER_HIDE) */
    int tracerpid_hidden; /* TracerPid numbers rewritten to 0 in what tracees read */
};

/* isob_tracer_attach_mode's flags. */
#define ISOB_TRACER_HIDE 1u

struct isob_tracer {
    pid_t pid;
    int cmd_fd, reply_fd;
    struct isob_tracer_stats stats;
};

/* "process_vm_readv", "/proc/PID/mem read". */
const char *isob_tracer_probe_name(int p);

/* Start the tracer and wait until it has attached to the calling process
 * and stopped it once.  0, or a negative errno with why (the kernel's
 * refusal of PTRACE_SEIZE: EPERM under Yama 1 or more, or when the caller
 * is not dumpable; -ENOTSUP where the probe is not built). */
int isob_tracer_attach(struct isob_tracer *t, char *why, size_t len);

/* The same, with flags: 0 is isob_tracer_attach's naive tracer;
 * ISOB_TRACER_HIDE the one that also hides from TracerPid. */
int isob_tracer_attach_mode(struct isob_tracer *t, unsigned flags, char *why, size_t len);

/* Have the tracer read target (process_vm_readv, /proc/PID/mem); res as
 * the probes of isob_osprobe_run fill theirs.  0 or a negative errno. */
int isob_tracer_probe(struct isob_tracer *t, const struct isob_osprobe_target *target,
                      struct isob_osprobe_result res[ISOB_TRACER_PROBES]);

/* End the tracer (every tracee is detached and goes on) and wait for it;
 * stats (may be NULL): what it did. */
void isob_tracer_stop(struct isob_tracer *t, struct isob_tracer_stats *stats);

/* ---- The outside reader: scanning a process's memory for a canary ----
 *
 * What is read comes from the target's own /proc/PID/smaps (or maps): every
 * mapping but those a reader must not or need not touch (enum
 * isob_map_class), in address order, up to a budget of bytes.  Reading a
 * device's registers can hang or crash a machine (the Morello study
 * crashed its OS that way), so I/O and PFN mappings, device files and the
 * kernel's [vvar] and [vsyscall] are never read. */

/* Bytes each reader may read of one target, in total. */
#define ISOB_SCAN_DEFAULT_BUDGET (1ull << 30)
/* PEEKDATA reads 8 bytes per system call, so the ptrace reader reads only
 * the first pages of each planned range, and the canary's page. */
#define ISOB_SCAN_DEFAULT_PTRACE_PAGES 4u
/* Bytes asked for by one read. */
#define ISOB_SCAN_CHUNK (64u * 1024u)
#define ISOB_SCAN_PAGE 4096u

/* Why a mapping is, or is not, read. */
enum isob_map_class {
    ISOB_MAP_READ = 0,     /* planned */
    ISOB_MAP_SPECIAL,      /* [vvar], [vvar_vclock], [vsyscall]: the kernel's pages */
    ISOB_MAP_IO,           /* VmFlags io or pf (VM_IO, VM_PFNMAP): device memory */
    ISOB_MAP_DEVICE,       /* a file under /dev/ (but /dev/zero and /dev/shm/) */
    ISOB_MAP_EMPTY,        /* private, nothing resident or swapped: only zeroes or the file */
    ISOB_MAP_BUDGET,       /* beyond the budget */
    ISOB_MAP__COUNT
};

/* One mapping as /proc/PID/smaps (or maps) describes it. */
struct isob_map {
    uintptr_t start, end;
    char perms[5];
    char path[256];
    uint64_t offset;       /* of start in the mapped file */
    unsigned long inode;   /* the file's inode, 0 for none */
    long rss_kb, swap_kb;  /* -1: unknown (a maps file has no Rss or Swap) */
    int vm_io, vm_pfnmap;  /* VmFlags io, pf (0 when the file has no VmFlags) */
};

struct isob_scan_range {
    uintptr_t start, end;
};

/* What a reader reads of one target. */
struct isob_scan_plan {
    struct isob_scan_range *ranges;  /* in address order, page-aligned, within the maps */
    size_t n, cap;
    uint64_t bytes;                  /* their total, at most budget */
    uint64_t budget;
    size_t mappings;                 /* mappings in the maps text */
    size_t skipped[ISOB_MAP__COUNT]; /* mappings left out, by class (skipped[0] unused) */
    int truncated;                   /* the budget left out part of a mapping, or more */
};

const char *isob_map_class_name(enum isob_map_class c);

/* One header line of a maps or smaps file ("start-end perms offset dev
 * inode [path]"); 0 or -EINVAL.  Rss and Swap are then unknown (-1). */
int isob_map_parse(const char *line, struct isob_map *m);

/* The class of one mapping, budget aside. */
enum isob_map_class isob_map_classify(const struct isob_map *m);

/* Plan from the text of a smaps or maps file.  0, -EINVAL for text that is
 * not one (the line in why), -ENOMEM.  isob_scan_plan_free releases it. */
int isob_scan_plan_parse(const char *text, uint64_t budget, struct isob_scan_plan *plan, char *why,
                         size_t whylen);

/* Plan from /proc/PID/smaps, read by the calling thread.  0 or a negative
 * errno (EACCES: the caller may not read it) with why. */
int isob_scan_plan_pid(pid_t pid, uint64_t budget, struct isob_scan_plan *plan, char *why, size_t whylen);

/* Add [start, end) to a plan (page-aligned outward); 0 or -ENOMEM.  For a
 * plan made by hand, when the maps cannot be read. */
int isob_scan_plan_add(struct isob_scan_plan *plan, uintptr_t start, uintptr_t end);

/* 1 when addr lies in one of the plan's ranges. */
int isob_scan_plan_covers(const struct isob_scan_plan *plan, uintptr_t addr);

void isob_scan_plan_free(struct isob_scan_plan *plan);

/* A canary kept only in two halves that XOR to it, so that the process
 * that looks for it never holds it whole: a reader that scanned its own
 * process, or a process forked from it, would otherwise find the needle
 * rather than the target's copy. */
struct isob_canary {
    unsigned char masked[32];   /* canary ^ mask */
    unsigned char mask[32];
};

/* A fresh random canary (getrandom); 0 or a negative errno. */
int isob_canary_new(struct isob_canary *c);

/* Write the canary into dst (32 bytes), straight from its halves. */
void isob_canary_put(const struct isob_canary *c, volatile unsigned char *dst);

enum isob_scan_method {
    ISOB_SCAN_MEM,       /* pread of /proc/PID/mem over the plan */
    ISOB_SCAN_VM_READV,  /* process_vm_readv over the plan */
    ISOB_SCAN_PTRACE,    /* PTRACE_SEIZE, INTERRUPT, PEEKDATA over the first pages of each
                          * range and the canary's page, DETACH */
    ISOB_SCAN__COUNT
};

const char *isob_scan_method_name(enum isob_scan_method m);  /* "mem", "vm_readv", "ptrace" */
const char *isob_scan_method_how(enum isob_scan_method m);   /* "/proc/PID/mem", ... */

struct isob_scan_result {
    int outcome;            /* enum isob_osprobe_outcome */
    int err;                /* the denial's errno, or what kept it untested */
    uint64_t bytes;         /* bytes read */
    uint64_t planned;       /* bytes this reader set out to read */
    uint32_t ranges;        /* ranges tried */
    uint32_t pages_failed;  /* pages a read failed on (PROT_NONE to process_vm_readv: EFAULT) */
    int fail_err;           /* the errno of the first such page */
    uint32_t found;         /* places the canary was found */
    int at_canary;          /* one of them is the planted canary's address */
    uintptr_t first_found;  /* the first place */
    char note[96];
};

/* The reading primitive of isob_scan_ranges: read len bytes at addr of
 * the target into buf; the count read (short at an unreadable page), or a
 * negative errno. */
typedef ssize_t (*isob_scan_read_fn)(void *ctx, uintptr_t addr, void *buf, size_t len);

/* Read every range of plan with rd, chunk by chunk, and look for the
 * canary, also across the edges of chunks.  A page that fails to read is
 * counted and skipped; EPERM, EACCES or ESRCH end the scan (a denial when
 * nothing was read before it).  Reads nothing outside the plan. */
void isob_scan_ranges(const struct isob_scan_plan *plan, isob_scan_read_fn rd, void *ctx,
                      const struct isob_canary *c, uintptr_t canary_addr, struct isob_scan_result *r);

/* The plan of the ptrace reader: the first `pages` pages of each range of
 * plan, and the page of canary_addr where plan covers it.  0 or -ENOMEM. */
int isob_scan_plan_ptrace(const struct isob_scan_plan *plan, unsigned pages, uintptr_t canary_addr,
                          struct isob_scan_plan *out);

/* Read process pid with method m as the calling thread is, and look for
 * the canary.  Always fills r; returns 0. */
int isob_scan(enum isob_scan_method m, pid_t pid, const struct isob_scan_plan *plan, unsigned ptrace_pages,
              const struct isob_canary *c, uintptr_t canary_addr, struct isob_scan_result *r);

/* The fork-window racer (src/osprobe/racer.c).  The kernel checks access
 * to /proc/PID/mem at open, not at read: a same-uid process without
 * capabilities that opens a compartment's server between its fork and its
 * PR_SET_DUMPABLE 0 reads the trusted heap through that descriptor later.
 * The racer is a forked child of the caller (so as root, start it from an
 * unprivileged helper): armed before a creation, it spins over the process
 * ids the next forks take, opens /proc/PID/mem of each new child of the
 * caller, and once collected reads the secret through what it opened. */
struct isob_racer_try {
    int seen;         /* the racer met the server's process id while it spun */
    int opened;       /* and opened its /proc/PID/mem */
    int read;         /* a read through that descriptor returned 8 bytes */
    int secret_seen;  /* which were the secret */
    int err;          /* the errno of the refused open (seen, not opened) or of the read */
    pid_t found_pid;  /* the needle search: the process it was found in */
    char note[96];    /* why it could not spin */
};

/* The longest needle isob_racer_collect_needle looks for. */
#define ISOB_RACER_NEEDLE_MAX 64

struct isob_racer {
    pid_t pid;
    void *page;       /* shared with the racer */
};

/* Fork the racer; 0, or a negative errno with the reason in why (no
 * /proc/sys/kernel/ns_last_pid to predict process ids from). */
int isob_racer_start(struct isob_racer *r, char *why, size_t len);
/* The same, for the new children of caller (a process this one started,
 * e.g. an `isob serve` it forked) rather than its own. */
int isob_racer_start_for(struct isob_racer *r, pid_t caller, char *why, size_t len);
/* Before a creation: returns once the racer spins.  0 or -ETIMEDOUT. */
int isob_racer_arm(struct isob_racer *r);
/* After the creation and the planting: what the racer got of server, read
 * at addr and compared with expect.  0 or -ETIMEDOUT. */
int isob_racer_collect(struct isob_racer *r, pid_t server, uintptr_t addr, uint64_t expect,
                       struct isob_racer_try *out);
/* After the creation: whether the racer finds needle (at most
 * ISOB_RACER_NEEDLE_MAX bytes) in a private writable mapping of any new
 * child of the caller it opened (secret_seen, found_pid).  0 or a negative
 * errno. */
int isob_racer_collect_needle(struct isob_racer *r, const void *needle, size_t len, struct isob_racer_try *out);
void isob_racer_stop(struct isob_racer *r);

#endif
