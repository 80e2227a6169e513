/* Reference monitors for the refmon benchmark and `isob serve --monitor`,
 * each behind a few small functions so that other workloads can run
 * under them.
 *
 * The policy is the same for all (rm_policy_*): openat only of paths
 * under one directory (no ".." component); pread64 and pwrite64 only on
 * descriptors 3 and up.  The open check reads the path from memory; the
 * read and write checks read registers only.  What differs is where the
 * check runs and who makes the call:
 *
 *   inline    in the monitored process itself, before the call (a wrapper:
 *             no isolation, the workload could skip it)
 *   seccomp   a seccomp-bpf filter in the monitored process: the fd rule;
 *             every open refused, since a filter cannot read a path (the
 *             workload's file is opened before the filter); no monitor
 *   broker    a separate process makes every call: opens (the descriptor
 *             comes back over SCM_RIGHTS), reads and writes into a buffer
 *             both share; requests over a socketpair; the workload runs
 *             in a child whose filter refuses every file call
 *   ptrace    a tracer: SECCOMP_RET_TRACE stops the monitored process at
 *             each call, the tracer reads the registers (and the path with
 *             process_vm_readv) and lets it run or skips it with EPERM
 *   lwc-mon   an lwc context under LWC_SYSTRAP: its creator is the
 *             supervisor; an allowed open is performed by the supervisor
 *             and the descriptor injected, reads and writes continue
 *             (their policy reads no memory) */
#ifndef ISOBENCH_REFMON_MONITORS_H
#define ISOBENCH_REFMON_MONITORS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "isobench/server.h"

#define RM_PATH_MAX 256

struct rm_policy {
    char dir[RM_PATH_MAX];  /* absolute, without a trailing slash */
};

/* 1 when path may be opened: absolute, under dir, no ".." component. */
int rm_policy_path_ok(const struct rm_policy *p, const char *path);
/* 1 when reads and writes on fd are allowed. */
static inline int rm_policy_fd_ok(long fd) { return fd >= 3 && fd < 65536; }

/* What a monitor saw: calls it checked and calls it refused. */
struct rm_tally {
    uint64_t checked, denied;
};

/* A workload: runs in the monitored process and returns when done. */
typedef void (*rm_workload_fn)(void *arg);

/* How a workload is confined (rm_confine): a default-deny seccomp filter
 * whose allow-list holds the calls that open no file, reach no other
 * process's memory and run no program; open, creat, openat2,
 * open_by_handle_at, io_uring_*, execve*, process_vm_*, ptrace, seccomp
 * and mmap of a file are refused (EPERM), unknown numbers fail (ENOSYS),
 * another ABI's calls kill the process.  What differs is the monitored
 * calls (openat, pread64, pwrite64):
 *   FD      pread64 and pwrite64 only on descriptors 3 to 65535; openat
 *           refused (a filter cannot read the path)
 *   TRACE   the three stop for the tracer (SECCOMP_RET_TRACE)
 *   LWC     the three pass to the lwc trap filter beneath (and its switch
 *           number)
 *   BROKER  the three refused: a broker makes them */
enum rm_confinement { RM_CONFINE_FD = 1, RM_CONFINE_TRACE, RM_CONFINE_LWC, RM_CONFINE_BROKER };

/* Install that filter in this process, for good (no_new_privs).  0 or
 * -errno. */
int rm_confine(enum rm_confinement how);

/* Every rm_run_* makes this process non-dumpable while its workload
 * lives (restoring the setting after), so the workload cannot reach the
 * policy in the monitor's memory through /proc/PID/mem. */

/* seccomp: fork, confine the child (FD), run fn there, wait.  0 or -errno
 * (the child's failure to install its filter included). */
int rm_run_seccomp(rm_workload_fn fn, void *arg);

/* broker: fork, confine the child (BROKER), run fn there, wait: fn makes
 * its file calls through a broker (rm_broker_*) started before.  0 or
 * -errno. */
int rm_run_brokered(rm_workload_fn fn, void *arg);

/* ptrace: fork a tracee that runs fn confined (TRACE); trace it to its
 * end.  0 or -errno. */
int rm_run_ptrace(const struct rm_policy *p, rm_workload_fn fn, void *arg, struct rm_tally *t);

/* lwc-mon: an lwc context under LWC_SYSTRAP, confined (LWC), runs fn;
 * this process supervises it to its end.  shared/shared_len: memory of
 * lwc_alloc_shared the workload reports into (LWC_SHARED there).  0 or
 * -errno. */
int rm_run_lwcmon(const struct rm_policy *p, rm_workload_fn fn, void *arg, void *shared,
                  size_t shared_len, struct rm_tally *t);

/* The broker: a separate process that makes the calls. */
struct rm_broker {
    struct isob_server server;
    int sock;                /* this side of the socketpair */
    int peer;                /* the broker's side, until it started */
    unsigned char *buf;      /* the data buffer both share */
    size_t buf_len;
    struct rm_tally *tally;  /* in shared memory: the broker's count */
    struct rm_policy policy;
};

int rm_broker_start(struct rm_broker *b, const struct rm_policy *p, size_t buf_len);
void rm_broker_stop(struct rm_broker *b);
/* open path and hand the descriptor over (SCM_RIGHTS): fd or -errno. */
int rm_broker_open(struct rm_broker *b, const char *path, int flags);
/* open path in the broker and keep it there: a handle (>= 0) or -errno. */
int rm_broker_open_kept(struct rm_broker *b, const char *path, int flags);
/* pread/pwrite of len bytes at off on a kept handle, through b->buf:
 * bytes or -errno. */
long rm_broker_pread(struct rm_broker *b, int handle, size_t len, off_t off);
long rm_broker_pwrite(struct rm_broker *b, int handle, size_t len, off_t off);
/* close a kept handle in the broker: 0 or -errno. */
int rm_broker_close(struct rm_broker *b, int handle);

#endif
