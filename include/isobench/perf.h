/* perf_event counter group backend.
 *
 * The group is cycles (leader), instructions, dTLB-load-misses and
 * iTLB-load-misses.  Reads use rdpmc through the mmap'ed control page where
 * the kernel allows user-space reads (cap_user_rdpmc and a non-zero index),
 * and read(2) of the group otherwise.  Every system call goes through
 * struct isob_perf_sys so that tests can substitute fakes: this path must be
 * testable on machines without a PMU. */
#ifndef ISOBENCH_PERF_H
#define ISOBENCH_PERF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/perf_event.h>

#include "isobench/snap.h"

/* Counting scope: the calling thread only, or everything on one CPU (which
 * also counts another process's compartment running on that CPU). */
enum isob_scope { ISOB_SCOPE_THREAD = 0, ISOB_SCOPE_CPU = 1 };

/* The system interface the perf backend uses; isob_perf_sys_real() is the
 * kernel, tests pass fakes.  Errors come back as values, not errno, so that a
 * fake need not touch errno: open returns an fd or a negative errno, mmap a
 * read-only shared mapping or NULL, read a byte count or a negative errno,
 * munmap and close 0 or a negative errno, getcpu UINT32_MAX when unknown. */
struct isob_perf_sys {
    int (*open)(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd, unsigned long flags);
    void *(*mmap)(int fd, size_t len);
    int (*munmap)(void *addr, size_t len);
    ssize_t (*read)(int fd, void *buf, size_t len);
    int (*close)(int fd);
    uint64_t (*rdpmc)(uint32_t idx);
    uint32_t (*getcpu)(void);
};

const struct isob_perf_sys *isob_perf_sys_real(void);

struct isob_perf {
    const struct isob_perf_sys *sys;
    unsigned nev;                                /* events opened */
    const char *names[ISOB_MAX_EVENTS];          /* "cycles", "instructions", ... */
    int fd[ISOB_MAX_EVENTS];
    struct perf_event_mmap_page *page[ISOB_MAX_EVENTS];
    size_t page_len;
    int use_rdpmc;                               /* 1: rdpmc fast path; 0: read(2) */
    enum isob_scope scope;
    int cpu;                                     /* ISOB_SCOPE_CPU: the CPU counted; else -1 */
    int real_sys;                                /* 1: sys is the kernel, so snap inlines rdpmc */
};

/* Open the group.  Returns 0, or a negative errno with a one-line reason in
 * why (e.g. "perf_event_open(cycles): No such file or directory: no PMU"). */
int isob_perf_open(struct isob_perf *p, const struct isob_perf_sys *sys,
                   enum isob_scope scope, int cpu, char *why, size_t len);
void isob_perf_close(struct isob_perf *p);

/* Take a reading of every event into s (see snap.h).  Declared inline in
 * perf_impl.h because it sits inside measured regions. */
void isob_perf_snap_slow(struct isob_perf *p, struct isob_snap *s);

#include "isobench/perf_impl.h"

#endif
