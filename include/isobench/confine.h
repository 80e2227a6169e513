/* Confinements: a restriction imposed on the measuring process, and on
 * every process it starts, before it measures an OS primitive.  Where a
 * mechanism (mechanism.h) is a compartment that code is called into, a
 * confinement is ambient: the same system calls, made by the same binary,
 * with a seccomp filter, a tracer, a Landlock domain or new namespaces in
 * force.  The oslat benchmark measures each primitive once per confinement.
 *
 * Every confinement verifies itself after it is applied, from what the
 * kernel reports (/proc/self/status, TracerPid, a denied open, uid_map),
 * never from a flag it set: a result is measured under a confinement's
 * name only after that check passed, and is skipped with the reason
 * otherwise.  A confinement cannot be lifted again; the process it was
 * applied to ends when it has measured.  Helper processes (a seccomp
 * supervisor, a tracer) die with that process.
 *
 * One confinement, in pseudo-code:
 *
 *     isob_confine_init(st, conf, variant)   -- records the state before
 *     isob_confine_enter(st, req)            -- apply, then verify; evidence
 *     measure; isob_confine_events(st)       -- calls a helper saw, per cell
 *     isob_confine_verify(st)                -- still in force after measuring */
#ifndef ISOBENCH_CONFINE_H
#define ISOBENCH_CONFINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <linux/filter.h>

#include "isobench/error.h"

/* System calls by number, for the confinements' filters and the lists of
 * calls a measurement makes.  Architectures that never had the old calls (arm64 has no open,
 * creat, unlink, stat, poll or select) make the newer forms instead, which
 * the lists name too; there the old names stand for them. */
#ifndef SYS_open
#define SYS_open SYS_openat
#endif
#ifndef SYS_creat
#define SYS_creat SYS_openat
#endif
#ifndef SYS_unlink
#define SYS_unlink SYS_unlinkat
#endif
#ifndef SYS_stat
#define SYS_stat SYS_newfstatat
#endif
#ifndef SYS_poll
#define SYS_poll SYS_ppoll
#endif
#ifndef SYS_select
#define SYS_select SYS_pselect6
#endif

/* Bytes of a confinement's evidence: JSON object members, no braces. */
#define ISOB_CONFINE_EVIDENCE_MAX 1536

/* The call every verification makes to see a filter act on it:
 * personality(0xffffffff) only reads the process's execution domain, so it
 * is harmless wherever it is allowed to run.  A benchmark measured under a
 * confinement must never make it itself. */
#define ISOB_CONFINE_PROBE_NR SYS_personality
#define ISOB_CONFINE_PROBE_ARG 0xffffffffUL

/* What the benchmark tells a confinement about itself. */
struct isob_confine_req {
    const int *calls;          /* system calls its measured regions make */
    size_t ncalls;
    const char *dir;           /* the one directory it creates files in (landlock) */
    const char *const *exec;   /* files it executes, NULL-terminated, or NULL (landlock) */
    int helper_cpu;            /* CPU of a supervisor or tracer; -1 unpinned */
};

/* The shared page of a confinement with a helper process. */
struct isob_confine_page {
    uint32_t word;             /* futex: the helper's progress (ISOB_CONFINE_HELPER_*) */
    int32_t err;               /* the helper's set-up error, 0 or -errno */
    int32_t fd;                /* seccomp-notify: a descriptor number in the measurer */
    uint64_t events;           /* calls the helper saw (notifications, seccomp stops) */
};

enum {
    ISOB_CONFINE_HELPER_STARTED = 0,
    ISOB_CONFINE_HELPER_GO = 1,        /* the measurer allows the helper to attach */
    ISOB_CONFINE_HELPER_ATTACHED = 2,  /* the helper reached the measurer (or failed: err) */
    ISOB_CONFINE_HELPER_FD = 3,        /* the listener is installed: take it */
    ISOB_CONFINE_HELPER_READY = 4,     /* the helper serves (or failed: err) */
};

struct isob_confinement;

/* One confinement of one process. */
struct isob_confine_state {
    const struct isob_confinement *conf;
    unsigned variant;                  /* index into conf->variants */
    /* What the kernel reported before apply, for verification. */
    long seccomp_mode_before, filters_before;
    unsigned long long ns_user, ns_mnt, ns_net;
    /* Set by apply. */
    int applied;
    pid_t helper;                      /* supervisor or tracer, 0 if none */
    struct isob_confine_page *page;    /* shared with the helper, NULL if none */
    int rules;                         /* filter rules or Landlock rules */
    int traps_calls;                   /* the helper sees every call of req->calls */
    int abi;                           /* Landlock ABI version */
    uid_t uid;                         /* userns: the outside uid mapped to 0 */
    char probe_path[128];              /* landlock: a file outside the domain */
    char inside_path[512];             /* landlock: a file it may create */
    /* Set by verify: JSON object members ("k":v,...) without braces. */
    char evidence[ISOB_CONFINE_EVIDENCE_MAX];
};

struct isob_confinement {
    const char *name;
    const char *summary;               /* one line for `isob list` */
    /* The threat model: who is confined, against what, and what it does
     * not stop.  Every result measured under it carries this text. */
    const char *threat;
    const char *const *variants;       /* NULL-terminated, at least one */
    /* 0 if it can be applied here; else -ENOTSUP (or another -errno) with a
     * one-line reason in why. */
    int (*probe)(char *why, size_t len);
    /* Impose it on the calling process (single-threaded).  0 or -errno with
     * the reason in why; a failure may leave part of it in force. */
    int (*apply)(struct isob_confine_state *st, const struct isob_confine_req *req, char *why,
                 size_t len);
    /* Check from the kernel's own reports that it is in force; fill
     * st->evidence.  0, or -errno with what did not hold in why. */
    int (*verify)(struct isob_confine_state *st, char *why, size_t len);
};

/* The registry (include/isobench/confine_list.h). */
extern const struct isob_confinement *const isob_confinements[];
const struct isob_confinement *isob_confine_find(const char *name);
/* "NAME" or "NAME:VARIANT": *variant is the index, or -1 for every
 * variant.  0, or -EINVAL with a one-line reason in why. */
int isob_confine_parse(const char *spec, const struct isob_confinement **c, int *variant,
                       char *why, size_t len);

/* Record the process's state before applying conf's variant. */
void isob_confine_init(struct isob_confine_state *st, const struct isob_confinement *c,
                       unsigned variant);
/* Probe, apply and verify: 0, or -errno with the reason in why. */
int isob_confine_enter(struct isob_confine_state *st, const struct isob_confine_req *req,
                       char *why, size_t len);
int isob_confine_verify(struct isob_confine_state *st, char *why, size_t len);
/* Calls the helper has seen so far (notifications or seccomp stops), or
 * UINT64_MAX where the confinement has no helper to count them. */
uint64_t isob_confine_events(const struct isob_confine_state *st);
const char *isob_confine_variant(const struct isob_confine_state *st);

/* ---- helpers for confinements (src/confine/common.c) ---- */

/* A numeric field of /proc/self/status ("Seccomp", "TracerPid", ...):
 * 0 or -errno (-ENOENT when the kernel has no such field). */
int isob_status_field(const char *key, long *out);
/* The inode of /proc/self/ns/<name>: 0 or -errno. */
int isob_ns_inode(const char *name, unsigned long long *out);
/* Append `"key":value` (value already JSON) to st->evidence. */
void isob_evidence(struct isob_confine_state *st, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Seccomp mode and filter count now, into the evidence, and checked
 * against the state before: exactly `added` more filters, mode 2. */
int isob_confine_check_filters(struct isob_confine_state *st, long added, char *why, size_t len);

/* A classic-BPF seccomp program under construction. */
struct isob_bpf {
    struct sock_filter *insn;
    size_t n, cap;
    int err;                           /* -ENOMEM once an append failed */
};
void isob_bpf_stmt(struct isob_bpf *b, unsigned short code, unsigned k);
void isob_bpf_jump(struct isob_bpf *b, unsigned short code, unsigned k, unsigned char jt,
                   unsigned char jf);
/* The prologue every filter starts with: kill a call from another
 * architecture or the x32 ABI, then load the call's number. */
void isob_bpf_prologue(struct isob_bpf *b);
/* `action` for each of calls[0..n) and for the probe call, `dflt` for the rest. */
void isob_bpf_match(struct isob_bpf *b, const int *calls, size_t n, unsigned action,
                    unsigned dflt);
void isob_bpf_free(struct isob_bpf *b);
/* Load b with flags after setting no_new_privs: the listener fd (with
 * SECCOMP_FILTER_FLAG_NEW_LISTENER), 0, or -errno. */
int isob_bpf_load(struct isob_bpf *b, unsigned flags);

/* Fork a helper process that dies with the caller: it is pinned to cpu
 * (>= 0) and runs fn(st); its exit status is fn's.  The pid, or -errno. */
pid_t isob_confine_helper(struct isob_confine_state *st, int cpu,
                          int (*fn)(struct isob_confine_state *st));
/* Kill the helper and reap it (after a failed apply). */
void isob_confine_helper_stop(struct isob_confine_state *st);
/* Wait until page->word reaches `want` or the helper dies, at most
 * timeout_ms: 0, -ESRCH (it died), -ETIMEDOUT. */
int isob_confine_wait(struct isob_confine_state *st, uint32_t want, int timeout_ms);
void isob_confine_post(struct isob_confine_page *pg, uint32_t word);

#endif
