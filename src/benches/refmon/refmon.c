/* refmon: what a reference monitor costs per monitored system call
 * (lwC's reference monitor figure: 10,000 calls each of open, 4 KiB and
 * 128 KiB read and write, under an inline monitor, a separate process and
 * lwc-mon; Litton et al., OSDI 2016).
 *
 * One sample is the time of RM_CALLS calls of one kind, timed in the
 * monitored process; a result has RM_REPS samples (after one warm-up
 * batch).  Kinds (params.call): open+close (openat of an existing file,
 * then close, which is not monitored), read-4k, write-4k, read-128k and
 * write-128k (pread64 and pwrite64 at offset 0 of a 128 KiB file), on
 * tmpfs (params.fs).  Configurations (params.config): native, inline,
 * seccomp, broker, ptrace, lwc-mon, described in monitors.h; params.isolation
 * says in words what each protects, and inline says that it protects
 * nothing.
 *
 * Every result proves its work: each call returned what it must (a
 * descriptor, the byte count; the bytes read equal the file's), a
 * forbidden call made first failed with EPERM under every configuration
 * but native (the policy was in force), the ways around a monitor of
 * openat (open(2), openat2 of the forbidden path) failed under every
 * isolating configuration (params.bypass; inline lets them through, as
 * its isolation says), and a monitor that sees calls saw every one of
 * them (params.monitored_calls). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "isobench/bench.h"
#include "isobench/lwc.h"
#include "../xclock.h"
#include "../../monitor/monitors.h"

/* Calls per sample, as the published figure. */
#define RM_CALLS 10000
/* Samples per result. */
#define RM_REPS 10
#define RM_REPS_QUICK 3
/* The file the calls read and write. */
#define RM_FILE_BYTES (128u * 1024u)
/* tmpfs's f_type (linux/magic.h). */
#define RM_TMPFS_MAGIC 0x01021994
/* A path no policy allows: opening it is the check that one is in force. */
#define RM_FORBIDDEN "/proc/self/status"

enum rm_call { RC_OPEN, RC_READ4K, RC_WRITE4K, RC_READ128K, RC_WRITE128K, RC__COUNT };
static const char *const rc_names[RC__COUNT] = {"open+close", "read-4k", "write-4k", "read-128k",
                                                "write-128k"};
static const size_t rc_bytes[RC__COUNT] = {0, 4096, 4096, RM_FILE_BYTES, RM_FILE_BYTES};

enum rm_config { CF_NATIVE, CF_INLINE, CF_SECCOMP, CF_BROKER, CF_PTRACE, CF_LWCMON, CF__COUNT };
static const char *const cf_names[CF__COUNT] = {"native", "inline", "seccomp", "broker", "ptrace",
                                                "lwc-mon"};
/* What each configuration stops and what it does not; the attacks named
 * are those tests/c/test_monitors.c makes against each (open(2) and
 * openat2 of a file outside the directory, a write over the policy through
 * /proc/MONITOR/mem).  Every isolating one confines the workload with a
 * default-deny filter (monitors.h, rm_confine). */
static const char *const cf_isolation[CF__COUNT] = {
    "none: no policy",
    "none: the check runs in the monitored process, which could skip it (open(2), openat2 and "
    "/proc/PID/mem all get through)",
    "kernel filter in the monitored process, default-deny: descriptors checked; no open at all "
    "(a filter cannot read a path), so open+close is not measured; stops open(2), openat2, "
    "io_uring, exec, mmap of a file; does not stop reads of descriptors it already holds",
    "a separate process makes every call; the workload's default-deny filter refuses it every file "
    "call; stops open(2), openat2, /proc/PID/mem; does not stop signals to processes of its uid",
    "a separate, non-dumpable tracer checks each openat, pread64, pwrite64 under a default-deny "
    "filter; stops open(2), openat2, /proc/PID/mem; does not stop a second thread changing a path "
    "after the check",
    "a separate, non-dumpable supervisor (seccomp user notification) opens from its own copy of "
    "the path; default-deny filter; stops open(2), openat2, /proc/PID/mem; does not stop signals "
    "to processes of its uid",
};

/* The job, in memory the monitored process shares (lwc_alloc_shared). */
struct rm_job {
    enum rm_config config;
    int tsc;
    size_t calls, reps;
    char path[RM_PATH_MAX];
    struct rm_policy policy;
    struct rm_broker *broker;     /* CF_BROKER; the workload then runs in this process */
    uint64_t t[RC__COUNT][RM_REPS];
    uint64_t bad[RC__COUNT];      /* calls that did not return what they must */
    int64_t bad_first[RC__COUNT]; /* the first such return value */
    int64_t probe_ret;            /* the forbidden call's result (-errno) */
    int64_t bypass_ret[2];        /* open(2) and openat2 of the forbidden path: fd or -errno */
    int pre_fd;                   /* CF_SECCOMP: the file, opened before the filter */
    int finished;
    unsigned char pattern[RM_FILE_BYTES];
    unsigned char buf[RM_FILE_BYTES] __attribute__((aligned(64)));
};

static inline uint64_t job_now(const struct rm_job *j)
{
    return j->tsc ? isob_timer_read() : isob_clock_ns();
}

/* The calls, as each configuration makes them.  In the monitored
 * configurations (seccomp, ptrace, lwc-mon) they are the plain calls: the
 * monitor is outside the process. */
static int job_open(struct rm_job *j, const char *path, int flags)
{
    switch (j->config) {
    case CF_INLINE:
        if (!rm_policy_path_ok(&j->policy, path))
            return -EPERM;
        break;
    case CF_BROKER:
        return rm_broker_open(j->broker, path, flags);
    default:
        break;
    }
    int fd = openat(AT_FDCWD, path, flags | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static long job_rw(struct rm_job *j, int write, int fd, size_t len)
{
    switch (j->config) {
    case CF_INLINE:
        if (!rm_policy_fd_ok(fd))
            return -EPERM;
        break;
    case CF_BROKER:
        return write ? rm_broker_pwrite(j->broker, fd, len, 0) : rm_broker_pread(j->broker, fd, len, 0);
    default:
        break;
    }
    ssize_t n = write ? pwrite(fd, j->buf, len, 0) : pread(fd, j->buf, len, 0);
    return n < 0 ? -errno : n;
}

static unsigned char *job_data(struct rm_job *j)
{
    return j->config == CF_BROKER ? j->broker->buf : j->buf;
}

static void job_bad(struct rm_job *j, enum rm_call k, int64_t got)
{
    if (!j->bad[k]++)
        j->bad_first[k] = got;
}

/* The ways around a monitor of openat (open(2) where the architecture
 * has it, and openat2) tried on the forbidden path: the descriptor (closed
 * again) or -errno. */
static void try_bypass(struct rm_job *j)
{
#ifdef SYS_open
    long fd = syscall(SYS_open, RM_FORBIDDEN, O_RDONLY | O_CLOEXEC, 0);
#else
    long fd = -1;
    errno = ENOSYS;
#endif
    j->bypass_ret[0] = fd < 0 ? -errno : fd;
    if (fd >= 0)
        close((int)fd);
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC};
    fd = syscall(SYS_openat2, AT_FDCWD, RM_FORBIDDEN, &how, sizeof how);
    j->bypass_ret[1] = fd < 0 ? -errno : fd;
    if (fd >= 0)
        close((int)fd);
}

/* The workload: the probe, then every kind of call, timed. */
static void rm_workload(void *arg)
{
    struct rm_job *j = arg;
    /* The probe: what the policy forbids.  seccomp sees no paths, so its
     * probe is a read on a descriptor below 3. */
    if (j->config == CF_SECCOMP) {
        ssize_t n = pread(1, j->buf, 1, 0);
        j->probe_ret = n < 0 ? -errno : 0;
    } else {
        int fd = job_open(j, RM_FORBIDDEN, O_RDONLY);
        j->probe_ret = fd < 0 ? fd : 0;
        if (fd >= 0)
            close(fd);
    }
    try_bypass(j);
    int fd = j->config == CF_BROKER    ? rm_broker_open_kept(j->broker, j->path, O_RDWR)
             : j->config == CF_SECCOMP ? j->pre_fd
                                       : job_open(j, j->path, O_RDWR);
    if (fd < 0) {
        for (int k = 0; k < RC__COUNT; k++)
            job_bad(j, (enum rm_call)k, fd);
        return;
    }
    unsigned char *data = job_data(j);
    memcpy(data, j->pattern, RM_FILE_BYTES);
    for (int k = 0; k < RC__COUNT; k++) {
        size_t len = rc_bytes[k];
        int write = k == RC_WRITE4K || k == RC_WRITE128K;
        /* Under seccomp every open is refused: nothing to time. */
        if (k == RC_OPEN && j->config == CF_SECCOMP)
            continue;
        for (long rep = -1; rep < (long)j->reps; rep++) {
            uint64_t t0 = job_now(j);
            for (size_t i = 0; i < j->calls; i++) {
                if (k == RC_OPEN) {
                    int f = job_open(j, j->path, O_RDONLY);
                    if (f < 0)
                        job_bad(j, (enum rm_call)k, f);
                    else
                        close(f);
                } else {
                    long n = job_rw(j, write, fd, len);
                    if (n != (long)len)
                        job_bad(j, (enum rm_call)k, n);
                }
            }
            uint64_t t1 = job_now(j);
            if (rep >= 0)
                j->t[k][rep] = t1 - t0;
        }
        /* What was read is the file (writes wrote the same bytes back). */
        if (!write && len && memcmp(data, j->pattern, len) != 0)
            job_bad(j, (enum rm_call)k, -EIO);
    }
    if (j->config != CF_BROKER && j->config != CF_SECCOMP)
        close(fd);
    j->finished = 1;
}

/* A directory on tmpfs for the file; fs gets the file system's name. */
static int make_dir(char *dir, size_t len, char *fs, size_t fslen)
{
    static const char *const bases[] = {"/dev/shm", "/tmp"};
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
            struct statfs sf;
            if (statfs(bases[i], &sf) != 0)
                continue;
            int tmpfs = (unsigned long)sf.f_type == RM_TMPFS_MAGIC;
            /* tmpfs first; any writable directory on the second pass. */
            if (!tmpfs && pass == 0)
                continue;
            snprintf(dir, len, "%s/isob-refmon-XXXXXX", bases[i]);
            if (!mkdtemp(dir))
                continue;
            if (tmpfs)
                snprintf(fs, fslen, "tmpfs");
            else
                snprintf(fs, fslen, "not tmpfs (f_type 0x%lx)", (unsigned long)sf.f_type);
            return 0;
        }
    return -ENOENT;
}

static int make_file(struct rm_job *j)
{
    for (size_t i = 0; i < RM_FILE_BYTES; i++)
        j->pattern[i] = (unsigned char)(i * 7 + 3);
    int fd = open(j->path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, j->pattern, RM_FILE_BYTES);
    close(fd);
    return n == (ssize_t)RM_FILE_BYTES ? 0 : -EIO;
}

static void rm_emit(struct isob_xclock *x, struct rm_job *j, const char *fs, int rc,
                    const struct rm_tally *tally, int counts)
{
    uint64_t expected = (uint64_t)j->calls * (j->reps + 1) * RC__COUNT + 2;
    for (int k = 0; k < RC__COUNT; k++) {
        char params[2048], reason[256] = "", mon[160] = "", bypass[2][64];
        for (int b = 0; b < 2; b++)
            snprintf(bypass[b], sizeof bypass[b], "%s",
                     j->bypass_ret[b] >= 0 ? "opened" : isob_strerror((int)j->bypass_ret[b]));
        if (counts)
            snprintf(mon, sizeof mon, ",\"monitored_calls\":%llu,\"monitored_expected\":%llu,\"denied\":%llu",
                     (unsigned long long)tally->checked, (unsigned long long)expected,
                     (unsigned long long)tally->denied);
        snprintf(params, sizeof params,
                 "{\"config\":\"%s\",\"call\":\"%s\",\"calls\":%zu,\"bytes_per_call\":%zu,\"fs\":\"%s\","
                 "\"syscalls\":\"%s\",\"isolation\":\"%s\",\"probe\":\"%s\","
                 "\"bypass\":\"open(2) of the forbidden path: %s; openat2: %s\",\"timebase\":\"%s\"%s}",
                 cf_names[j->config], rc_names[k], j->calls, rc_bytes[k], fs,
                 k == RC_OPEN ? "openat (monitored), close" : (k == RC_READ4K || k == RC_READ128K) ? "pread64" : "pwrite64",
                 cf_isolation[j->config], j->probe_ret ? isob_strerror((int)j->probe_ret) : "allowed",
                 bypass[0], bypass[1], x->tsc ? "tsc" : "clock", mon);
        if (rc == 0 && j->config == CF_SECCOMP && k == RC_OPEN) {
            isob_emit_result(&x->ctx, "refmon", params, NULL, NULL, "skipped",
                             "a seccomp filter cannot read a path, so this monitor refuses every "
                             "open; there is no allowed open to time", NULL);
            continue;
        }
        if (rc == -ENOTSUP) {
            isob_emit_result(&x->ctx, "refmon", params, NULL, NULL, "skipped",
                             "this monitor is not built for this architecture (the ptrace "
                             "monitor reads and rewrites x86-64 registers)", NULL);
            continue;
        }
        if (rc)
            snprintf(reason, sizeof reason, "the monitored run failed: %s", isob_strerror(rc));
        else if (!j->finished)
            snprintf(reason, sizeof reason, "the workload did not finish");
        else if (j->bad[k])
            snprintf(reason, sizeof reason, "%llu calls failed, the first with %s",
                     (unsigned long long)j->bad[k], isob_strerror((int)j->bad_first[k]));
        else if (j->config != CF_NATIVE && j->probe_ret != -EPERM)
            snprintf(reason, sizeof reason, "the policy was not in force: the forbidden call returned %s",
                     j->probe_ret ? isob_strerror((int)j->probe_ret) : "success");
        else if (j->config != CF_NATIVE && j->config != CF_INLINE &&
                 (j->bypass_ret[0] >= 0 || j->bypass_ret[1] >= 0))
            snprintf(reason, sizeof reason, "the workload walked around the monitor: %s of %s opened",
                     j->bypass_ret[0] >= 0 ? "open(2)" : "openat2", RM_FORBIDDEN);
        else if (counts && tally->checked != expected)
            snprintf(reason, sizeof reason, "the monitor saw %llu calls of %llu",
                     (unsigned long long)tally->checked, (unsigned long long)expected);
        if (reason[0]) {
            isob_emit_result(&x->ctx, "refmon", params, NULL, NULL, "failed", reason, NULL);
            continue;
        }
        struct isob_samples s;
        if (isob_samples_alloc(&s, j->reps, 1) != 0) {
            isob_emit_result(&x->ctx, "refmon", params, NULL, NULL, "failed", "out of memory", NULL);
            continue;
        }
        memcpy(s.v, j->t[k], j->reps * sizeof(uint64_t));
        s.n = j->reps;
        isob_emit_result(&x->ctx, "refmon", params, &s, NULL, "ok", NULL, NULL);
        isob_samples_free(&s);
    }
}

static int refmon_run(struct isob_bench_ctx *ctx)
{
    struct isob_xclock x;
    int rc = isob_xclock_open(&x, ctx);
    if (rc)
        return rc;
    char dir[RM_PATH_MAX - 16], fs[64];
    if (make_dir(dir, sizeof dir, fs, sizeof fs) != 0) {
        isob_emit_result(&x.ctx, "refmon", "{}", NULL, NULL, "failed",
                         "no writable directory in /dev/shm or /tmp", NULL);
        isob_xclock_close(&x, ctx);
        return 0;
    }
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    size_t job_len = (sizeof(struct rm_job) + ps - 1) & ~(ps - 1);
    struct rm_job *j = lwc_alloc_shared(job_len);
    if (!j) {
        rmdir(dir);
        isob_xclock_close(&x, ctx);
        return -ENOMEM;
    }
    for (int c = 0; c < CF__COUNT; c++) {
        memset(j, 0, sizeof *j);
        j->config = (enum rm_config)c;
        j->tsc = x.tsc;
        j->calls = RM_CALLS;
        j->reps = ctx->opts.quick ? RM_REPS_QUICK : RM_REPS;
        snprintf(j->policy.dir, sizeof j->policy.dir, "%s", dir);
        snprintf(j->path, sizeof j->path, "%s/data", dir);
        if ((rc = make_file(j)) != 0) {
            rm_emit(&x, j, fs, rc, NULL, 0);
            continue;
        }
        struct rm_tally tally = {0, 0};
        struct rm_broker broker;
        int counts = 0;
        switch (j->config) {
        case CF_NATIVE:
        case CF_INLINE:
            rm_workload(j);
            break;
        case CF_SECCOMP:
            j->pre_fd = open(j->path, O_RDWR | O_CLOEXEC);
            rc = j->pre_fd < 0 ? -errno : rm_run_seccomp(rm_workload, j);
            if (j->pre_fd >= 0)
                close(j->pre_fd);
            break;
        case CF_BROKER:
            rc = rm_broker_start(&broker, &j->policy, RM_FILE_BYTES);
            if (rc == 0) {
                j->broker = &broker;
                rc = rm_run_brokered(rm_workload, j);
                tally = *broker.tally;
                rm_broker_stop(&broker);
                counts = 1;
            }
            break;
        case CF_PTRACE:
            rc = rm_run_ptrace(&j->policy, rm_workload, j, &tally);
            counts = 1;
            break;
        case CF_LWCMON:
            rc = rm_run_lwcmon(&j->policy, rm_workload, j, j, job_len, &tally);
            counts = 1;
            break;
        default:
            break;
        }
        rm_emit(&x, j, fs, rc, &tally, counts);
        unlink(j->path);
    }
    lwc_free_shared(j);
    rmdir(dir);
    isob_xclock_close(&x, ctx);
    return 0;
}

const struct isob_bench isob_bench_refmon = {
    .name = "refmon",
    .summary = "10,000 monitored open, read and write calls: native, inline, seccomp, broker, ptrace, "
               "lwc-mon",
    .needs_mechanism = 0,
    .run = refmon_run,
};
