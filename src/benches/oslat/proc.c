/* proc: LMbench's process and system-call latencies (lat_syscall,
 * lat_sig, lat_proc; SEIMI's Table III), and the vDSO clock as the floor
 * of a call that never enters the kernel.  Each checks its own work:
 *
 *   null-syscall  getppid() through syscall(): every return is the parent's pid
 *   null-io       1-byte read of /dev/zero, 1-byte write to /dev/null: byte counts
 *   stat          stat() of a file in the test directory: its inode every time
 *   open-close    open() + close() of that file: always the same (lowest) fd
 *   sig-install   sigaction() alternating two handlers: the old one returned is
 *                 always the one installed before
 *   sig-catch     kill() of itself with SIGUSR1: the handler ran once per kill
 *   fork-exit     fork(), the child _exit(0)s, waitpid(): every status 0
 *   fork-exec     fork(), execve() of the tiny static binary, waitpid(): its status
 *   fork-sh       fork(), execve("/bin/sh", "-c", "exit 7"), waitpid(): status 7
 *   vdso-clock    clock_gettime(CLOCK_MONOTONIC): never decreasing, and advancing */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "oslat.h"

/* What fork-sh runs: the shell's start-up and a built-in, with a status
 * only a shell that ran could return. */
#define PROC_SH_COMMAND "exit 7"
#define PROC_SH_STATUS 7
/* The status of a child whose execve failed. */
#define PROC_EXEC_FAILED 127

static inline __attribute__((always_inline)) int one_fork_exit(int code)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(code);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 256 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static inline __attribute__((always_inline)) int one_fork_exec(const char *path, char *const argv[],
                                                                char *const envp[])
{
    pid_t pid = fork();
    if (pid == 0) {
        execve(path, argv, envp);
        _exit(PROC_EXEC_FAILED);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 256 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static int proc_null_syscall(struct oslat *o, const struct oslat_prim *p)
{
    struct oslat_cell c;
    int rc = oslat_cell_open(&c, o, p, "getppid");
    if (rc)
        return rc;
    const long want = getppid();
    /* Broken on purpose: a call that returns something else. */
    const long nr = o->sabotage ? SYS_getpid : SYS_getppid;
    long bad = 0;
    OSLAT_WARM(&c, (void)0, bad += syscall(nr) != want, (void)0);
    OSLAT_EACH(&c, (void)0, bad += syscall(nr) != want, (void)0);
    OSLAT_BATCHED(&c, bad += syscall(nr) != want);
    oslat_param(&c, "wrong_returns", "%ld", bad);
    if (bad)
        oslat_fail(&c, "%ld of %llu getppid() calls did not return the parent's pid %ld", bad,
                   (unsigned long long)c.ops, want);
    oslat_cell_close(&c);
    return 0;
}

static int proc_null_io(struct oslat *o, const struct oslat_prim *p)
{
    /* Broken on purpose: /dev/null reads nothing, a read-only fd writes nothing. */
    int rfd = open(o->sabotage ? "/dev/null" : "/dev/zero", O_RDONLY | O_CLOEXEC);
    int wfd = open(o->sabotage ? "/dev/zero" : "/dev/null", o->sabotage ? O_RDONLY : O_WRONLY | O_CLOEXEC);
    if (rfd < 0 || wfd < 0) {
        int rc = -errno;
        if (rfd >= 0)
            close(rfd);
        if (wfd >= 0)
            close(wfd);
        return rc;
    }
    for (int dir = 0; dir < 2; dir++) {
        struct oslat_cell c;
        int rc = oslat_cell_open(&c, o, p, dir ? "write /dev/null" : "read /dev/zero");
        if (rc)
            break;
        char b = 'x';
        long bytes = 0;
        if (dir) {
            OSLAT_WARM(&c, (void)0, bytes += write(wfd, &b, 1) == 1, (void)0);
            OSLAT_EACH(&c, (void)0, bytes += write(wfd, &b, 1) == 1, (void)0);
            OSLAT_BATCHED(&c, bytes += write(wfd, &b, 1) == 1);
        } else {
            OSLAT_WARM(&c, (void)0, bytes += read(rfd, &b, 1) == 1, (void)0);
            OSLAT_EACH(&c, (void)0, bytes += read(rfd, &b, 1) == 1, (void)0);
            OSLAT_BATCHED(&c, bytes += read(rfd, &b, 1) == 1);
        }
        oslat_param(&c, "bytes", "%ld", bytes);
        if ((uint64_t)bytes != c.ops)
            oslat_fail(&c, "%s moved %ld bytes in %llu one-byte calls", dir ? "write" : "read", bytes,
                       (unsigned long long)c.ops);
        oslat_cell_close(&c);
    }
    close(rfd);
    close(wfd);
    return 0;
}

/* The file stat and open-close work on: one byte, in the test directory. */
static int proc_target(struct oslat *o, char *path, size_t len, ino_t *ino)
{
    snprintf(path, len, "%s/stat-target", o->dir);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = (write(fd, "s", 1) == 1 && fstat(fd, &st) == 0) ? 0 : -EIO;
    close(fd);
    *ino = st.st_ino;
    return rc;
}

static int proc_stat(struct oslat *o, const struct oslat_prim *p)
{
    char path[4200];
    ino_t ino = 0;
    int rc = proc_target(o, path, sizeof path, &ino);
    if (rc)
        return rc;
    struct oslat_cell c;
    rc = oslat_cell_open(&c, o, p, "stat");
    if (rc)
        return rc;
    /* Broken on purpose: another file (the directory), another inode. */
    const char *target = o->sabotage ? o->dir : path;
    struct stat st;
    long bad = 0;
#define PROC_STAT_BODY bad += stat(target, &st) != 0 || st.st_ino != ino
    OSLAT_WARM(&c, (void)0, PROC_STAT_BODY, (void)0);
    OSLAT_EACH(&c, (void)0, PROC_STAT_BODY, (void)0);
    OSLAT_BATCHED(&c, PROC_STAT_BODY);
#undef PROC_STAT_BODY
    oslat_param(&c, "path", "\"%s\"", target);
    oslat_param(&c, "wrong", "%ld", bad);
    if (bad)
        oslat_fail(&c, "%ld of %llu stat() calls failed or named another inode", bad,
                   (unsigned long long)c.ops);
    oslat_cell_close(&c);
    unlink(path);
    return 0;
}

static inline __attribute__((always_inline)) int one_open_close(const char *path, int want, int leak,
                                                                 int *top)
{
    int fd = open(path, O_RDONLY);
    if (fd > *top)
        *top = fd;
    if (leak)
        return fd != want;
    return (close(fd) != 0) | (fd != want);
}

static int proc_open_close(struct oslat *o, const struct oslat_prim *p)
{
    char path[4200];
    ino_t ino = 0;
    int rc = proc_target(o, path, sizeof path, &ino);
    if (rc)
        return rc;
    /* The lowest free descriptor: what every open must return when every
     * close happened. */
    int want = open(path, O_RDONLY);
    if (want < 0)
        return -errno;
    close(want);
    struct oslat_cell c;
    rc = oslat_cell_open(&c, o, p, "open+close");
    if (rc)
        return rc;
    long bad = 0;
    int top = want;
    unsigned long it = 0;
    /* Broken on purpose: every other close is skipped. */
    const int sab = o->sabotage;
#define PROC_OC_BODY bad += one_open_close(path, want, sab && (it++ & 1), &top)
    OSLAT_WARM(&c, (void)0, PROC_OC_BODY, (void)0);
    OSLAT_EACH(&c, (void)0, PROC_OC_BODY, (void)0);
    OSLAT_BATCHED(&c, PROC_OC_BODY);
#undef PROC_OC_BODY
    for (int fd = want + 1; fd <= top; fd++)
        close(fd);
    oslat_param(&c, "fd", "%d", want);
    oslat_param(&c, "highest_fd", "%d", top);
    if (bad)
        oslat_fail(&c, "%ld of %llu open() calls did not return fd %d (highest %d): a close was missing",
                   bad, (unsigned long long)c.ops, want, top);
    oslat_cell_close(&c);
    unlink(path);
    return 0;
}

static volatile sig_atomic_t proc_caught;
static void proc_handler_a(int sig) { (void)sig; proc_caught++; }
static void proc_handler_b(int sig) { (void)sig; proc_caught++; }

static int proc_sig_install(struct oslat *o, const struct oslat_prim *p)
{
    struct sigaction sa[2], old, saved;
    memset(sa, 0, sizeof sa);
    sa[0].sa_handler = proc_handler_a;
    sa[1].sa_handler = proc_handler_b;
    sigaction(SIGUSR1, &sa[1], &saved);
    struct oslat_cell c;
    int rc = oslat_cell_open(&c, o, p, "sigaction");
    if (rc) {
        sigaction(SIGUSR1, &saved, NULL);
        return rc;
    }
    unsigned long it = 0;
    long bad = 0;
    /* Broken on purpose: only ask, never install. */
    const int sab = o->sabotage;
#define PROC_SI_BODY(SAB, SA, IT, OLD, BAD)                                         \
    do {                                                                            \
        sigaction(SIGUSR1, (SAB) ? NULL : &(SA)[(IT) & 1], &(OLD));                 \
        (BAD) += (OLD).sa_handler != (SA)[((IT) + 1) & 1].sa_handler;               \
        (IT)++;                                                                     \
    } while (0)
    OSLAT_WARM(&c, (void)0, PROC_SI_BODY(sab, sa, it, old, bad), (void)0);
    OSLAT_EACH(&c, (void)0, PROC_SI_BODY(sab, sa, it, old, bad), (void)0);
    OSLAT_BATCHED(&c, PROC_SI_BODY(sab, sa, it, old, bad));
#undef PROC_SI_BODY
    sigaction(SIGUSR1, &saved, NULL);
    oslat_param(&c, "wrong_old_handler", "%ld", bad);
    if (bad)
        oslat_fail(&c, "%ld of %llu sigaction() calls returned another old handler than the one "
                   "installed before", bad, (unsigned long long)c.ops);
    oslat_cell_close(&c);
    return 0;
}

static int proc_sig_catch(struct oslat *o, const struct oslat_prim *p)
{
    struct sigaction sa, saved;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = proc_handler_a;
    sigaction(SIGUSR1, &sa, &saved);
    sigset_t usr1, before;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    /* Broken on purpose: the signal is blocked, so no handler runs. */
    if (o->sabotage)
        sigprocmask(SIG_BLOCK, &usr1, &before);
    struct oslat_cell c;
    int rc = oslat_cell_open(&c, o, p, "kill SIGUSR1");
    if (rc) {
        sigaction(SIGUSR1, &saved, NULL);
        return rc;
    }
    const pid_t self = getpid();
    long bad = 0;
    proc_caught = 0;
    OSLAT_WARM(&c, (void)0, bad += kill(self, SIGUSR1) != 0, (void)0);
    OSLAT_EACH(&c, (void)0, bad += kill(self, SIGUSR1) != 0, (void)0);
    OSLAT_BATCHED(&c, bad += kill(self, SIGUSR1) != 0);
    long caught = proc_caught;
    if (o->sabotage)
        sigprocmask(SIG_SETMASK, &before, NULL);
    sigaction(SIGUSR1, &saved, NULL);
    oslat_param(&c, "handled", "%ld", caught);
    if (bad || (uint64_t)caught != c.ops)
        oslat_fail(&c, "the handler ran %ld times for %llu kills (%ld failed)", caught,
                   (unsigned long long)c.ops, bad);
    oslat_cell_close(&c);
    return 0;
}

static int proc_fork_exit(struct oslat *o, const struct oslat_prim *p)
{
    struct oslat_cell c;
    int rc = oslat_cell_open(&c, o, p, "fork+exit");
    if (rc)
        return rc;
    /* Broken on purpose: the child reports failure. */
    const int code = o->sabotage ? 3 : 0;
    long bad = 0;
    OSLAT_WARM(&c, (void)0, bad += one_fork_exit(code) != 0, (void)0);
    OSLAT_EACH(&c, (void)0, bad += one_fork_exit(code) != 0, (void)0);
    oslat_param(&c, "children_failed", "%ld", bad);
    if (bad)
        oslat_fail(&c, "%ld of %llu children did not exit with status 0", bad, (unsigned long long)c.ops);
    oslat_cell_close(&c);
    return 0;
}

static int proc_fork_exec(struct oslat *o, const struct oslat_prim *p)
{
    int sh = strcmp(p->name, "fork-sh") == 0;
    if (!sh && !o->tiny) {
        oslat_emit_bare(o, p, "fork+execve", "skipped",
                        "the tiny static binary isob-oslat-tiny was not found beside isob or in the "
                        "build directory");
        return 0;
    }
    struct oslat_cell c;
    int rc = oslat_cell_open(&c, o, p, sh ? "fork+/bin/sh -c" : "fork+execve");
    if (rc)
        return rc;
    char *const sh_argv[] = {"sh", "-c", PROC_SH_COMMAND, NULL};
    char *const tiny_argv[] = {"isob-oslat-tiny", NULL};
    char *const envp[] = {NULL};
    /* Broken on purpose: a path that does not exist, so execve fails. */
    const char *path = o->sabotage ? "/nonexistent/isob-oslat" : sh ? "/bin/sh" : o->tiny;
    char *const *argv = sh ? sh_argv : tiny_argv;
    const int want = sh ? PROC_SH_STATUS : OSLAT_TINY_STATUS;
    long bad = 0;
    OSLAT_WARM(&c, (void)0, bad += one_fork_exec(path, argv, envp) != want, (void)0);
    OSLAT_EACH(&c, (void)0, bad += one_fork_exec(path, argv, envp) != want, (void)0);
    oslat_param(&c, "path", "\"%s\"", path);
    oslat_param(&c, "expected_status", "%d", want);
    oslat_param(&c, "children_failed", "%ld", bad);
    if (bad)
        oslat_fail(&c, "%ld of %llu children of %s did not exit with status %d", bad,
                   (unsigned long long)c.ops, path, want);
    oslat_cell_close(&c);
    return 0;
}

static inline __attribute__((always_inline)) uint64_t now_mono(struct timespec *ts, int call)
{
    if (call)
        clock_gettime(CLOCK_MONOTONIC, ts);
    return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

static int proc_vdso_clock(struct oslat *o, const struct oslat_prim *p)
{
    struct oslat_cell c;
    int rc = oslat_cell_open(&c, o, p, "clock_gettime");
    if (rc)
        return rc;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    /* Broken on purpose: the clock is never read again. */
    const int call = !o->sabotage;
    const uint64_t first = now_mono(&ts, 0);
    uint64_t last = first, t = 0;
    long back = 0;
#define PROC_CLK_BODY(T, TS, CALL, BACK, LAST)                                      \
    do {                                                                            \
        (T) = now_mono(&(TS), (CALL));                                              \
        (BACK) += (T) < (LAST);                                                     \
        (LAST) = (T);                                                               \
    } while (0)
    OSLAT_WARM(&c, (void)0, PROC_CLK_BODY(t, ts, call, back, last), (void)0);
    OSLAT_EACH(&c, (void)0, PROC_CLK_BODY(t, ts, call, back, last), (void)0);
    OSLAT_BATCHED(&c, PROC_CLK_BODY(t, ts, call, back, last));
#undef PROC_CLK_BODY
    oslat_param(&c, "vdso", "%s", getauxval(AT_SYSINFO_EHDR) ? "true" : "false");
    oslat_param(&c, "went_back", "%ld", back);
    oslat_param(&c, "advanced_ns", "%llu", (unsigned long long)(last - first));
    if (back || last <= first)
        oslat_fail(&c, "CLOCK_MONOTONIC went back %ld times and advanced %llu ns over %llu calls", back,
                   (unsigned long long)(last - first), (unsigned long long)c.ops);
    oslat_cell_close(&c);
    return 0;
}

const struct oslat_prim oslat_proc[] = {
    {.name = "null-syscall", .family = "proc", .table = "III", .traps = OSLAT_TRAPS_EACH,
     .summary = "getppid() through syscall()", OSLAT_CALLS(SYS_getppid), .run = proc_null_syscall},
    {.name = "null-io", .family = "proc", .table = "III", .traps = OSLAT_TRAPS_EACH,
     .summary = "1-byte read of /dev/zero and write to /dev/null", OSLAT_CALLS(SYS_read, SYS_write),
     .run = proc_null_io},
    {.name = "stat", .family = "proc", .table = "III", .traps = OSLAT_TRAPS_EACH,
     .summary = "stat() of a file in the test directory",
     OSLAT_CALLS(SYS_newfstatat, SYS_stat, SYS_statx), .run = proc_stat},
    {.name = "open-close", .family = "proc", .table = "III", .traps = OSLAT_TRAPS_EACH,
     .summary = "open() and close() of a file in the test directory",
     OSLAT_CALLS(SYS_openat, SYS_open, SYS_close), .run = proc_open_close},
    {.name = "sig-install", .family = "proc", .table = "III", .traps = OSLAT_TRAPS_EACH,
     .summary = "sigaction() installing a SIGUSR1 handler", OSLAT_CALLS(SYS_rt_sigaction),
     .run = proc_sig_install},
    {.name = "sig-catch", .family = "proc", .table = "III", .traps = OSLAT_TRAPS_EACH,
     .summary = "kill() of itself with SIGUSR1, handled", OSLAT_CALLS(SYS_kill, SYS_rt_sigreturn),
     .run = proc_sig_catch},
    {.name = "fork-exit", .family = "proc", .table = "III", .traps = OSLAT_TRAPS_EACH,
     .summary = "fork(), the child exits, waitpid()",
     OSLAT_CALLS(SYS_clone, SYS_clone3, SYS_wait4, SYS_exit_group), .run = proc_fork_exit},
    {.name = "fork-exec", .family = "proc", .table = "III", .traps = OSLAT_TRAPS_EACH,
     .summary = "fork(), execve() of a tiny static binary, waitpid()",
     OSLAT_CALLS(SYS_clone, SYS_clone3, SYS_execve, SYS_wait4, SYS_exit_group), .run = proc_fork_exec},
    {.name = "fork-sh", .family = "proc", .table = "III", .traps = OSLAT_TRAPS_EACH,
     .summary = "fork(), execve() of /bin/sh -c 'exit 7', waitpid()",
     OSLAT_CALLS(SYS_clone, SYS_clone3, SYS_execve, SYS_wait4, SYS_exit_group), .run = proc_fork_exec},
    {.name = "vdso-clock", .family = "proc", .table = "III", .traps = OSLAT_TRAPS_NONE,
     .summary = "clock_gettime(CLOCK_MONOTONIC) through the vDSO: no mode switch",
     OSLAT_CALLS(SYS_clock_gettime), .run = proc_vdso_clock},
    {.name = NULL},
};
