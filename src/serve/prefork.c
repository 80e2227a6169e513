/* --session rollback: prefork workers that roll back after each session, as
 * lwC's Apache ran (Litton et al., OSDI 2016, section 5: a worker takes a
 * snapshot of itself once its start-up is done and rolls back to it at the
 * end of each session, so that a session sees nothing of the ones before).
 *
 * The master starts up once (the store, the preloaded keys, the start-up
 * state), listens, and serves nothing: it forks --workers workers and
 * replaces those that end.  A worker takes a snapshot of itself
 * (rollback.c), accepts one connection, serves it to its end in its own
 * process (a request crosses no process boundary but the socket's), and
 * rolls back: the next session it accepts starts from the state after
 * start-up again.  The workers block in accept(2) on the one listening
 * socket, and the kernel hands each connection to one of them; connections
 * beyond the workers wait in the listen backlog.
 *
 * --rollback-method fork: a worker serves one session and exits; the
 * master, which holds the state after start-up untouched, forks a fresh one
 * in its place.  The snapshot is the master, and a rollback is an exit and
 * a fork.
 *
 * Before the first worker, a trial worker takes a snapshot and rolls back
 * once, so that a method that cannot work here fails before "listening". */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isobench/harness.h"
#include "server_impl.h"

/* Workers that may fail (die, or fail to roll back) before the master
 * gives up: beyond twice the workers and this, something is wrong with
 * every one of them. */
#define FAILURES_SLACK 8

/* The worker's snapshot: set before the snapshot, so kept by rollbacks. */
static struct rb_snap *worker_snap;

int serve_worker_index = -1;

/* The first workers' "ready" pipe (its write end, in a worker until it is
 * ready; -1 otherwise): prefork_start waits for every worker to have made
 * what it makes of its own (a key's context, a broker, a key) before the
 * server says it listens. */
static int ready_w = -1;

static void say_ready(void)
{
    if (ready_w < 0)
        return;
    char b = 1;
    ssize_t n = write(ready_w, &b, 1);
    (void)n;
    close(ready_w);
    ready_w = -1;
}

static uint64_t clock_ns(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t mono_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

/* One connection from the listening socket (blocking). */
static int accept_one(struct server *sv)
{
    for (;;) {
        /* Blocking: the worker waits for a request in the read itself
         * (sock.c sends and reads without blocking where it must not). */
        int fd = accept4(sv->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            return fd;
        }
        if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN || errno == EPROTO)
            continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            /* Out of something for now: the connection waits in the backlog. */
            poll(NULL, 0, 10);
            continue;
        }
        fprintf(stderr, "isob serve: a worker cannot accept: %s\n", strerror(errno));
        _exit(1);
    }
}

/* One session, accepted here. */
static int serve_once(struct server *sv)
{
    int fd = accept_one(sv);
    session_serve_one(sv, fd, 1);
    close(fd);
    return 0;
}

/* --session prefork: one session after another on whatever the earlier
 * ones left. */
static int serve_forever(struct server *sv)
{
    for (;;)
        serve_once(sv);
    return 0;
}

/* What a worker needs of its own before it serves: its monitor's broker
 * (procsep), and under --tls lwc its key's context (a context is one
 * process's: the master's cannot sign for a worker).  Exits on failure. */
static void worker_own(struct server *sv)
{
    if (sv->o->monitor && serve_monitor_enter(sv) != 0)
        _exit(3);
    if (sv->o->tls == TLS_KEY_LWC && serve_tls_init(sv->o) != 0)
        _exit(3);
    /* Part of the state after start-up, so part of the snapshot (and
     * reseeded after each rollback: worker_main). */
    if (sv->o->tls)
        serve_tls_warm();
    say_ready();
}

/* A worker: snapshot, then one session after another, each from the
 * snapshot.  trial: snapshot, one rollback, exit 0. */
static __attribute__((noreturn)) void worker_main(struct server *sv, int trial,
                                                  struct isob_serve_rollback *totals)
{
    session_signals();
    /* The master's descriptors but the listener. */
    close(sv->ep);
    close(sv->sfd);
    close(sv->cfd);
    close(sv->spare_fd);
    sv->ep = sv->sfd = sv->cfd = sv->spare_fd = -1;
    /* Under --monitor lwc the worker supervises and a context it made
     * serves (its slot: the worker's index, after the master's 0). */
    int slot = 1 + serve_worker_index;
    if (sv->o->rb_method == RB_FORK || sv->o->rb_method == RB_NONE) {
        if (trial)
            _exit(0);
        worker_own(sv);
        int (*fn)(struct server *) = sv->o->rb_method == RB_FORK ? serve_once : serve_forever;
        _exit(sv->o->monitor ? serve_monitor_run(sv, fn, slot) : fn(sv));
    }
    /* Before the snapshot, so that every session starts with them. */
    worker_own(sv);
    char why[256];
    /* A store kept closed between calls is at most the heap with its
     * start-up state; a closed mapping of more than twice that, and 64 MiB,
     * is a reservation. */
    size_t heap = (sv->o->heap_mb << 20) + isob_serve_startup_heap(&sv->o->startup);
    worker_snap = rb_prepare(sv->o->rb_method, totals, sv->o->rb_verify || trial,
                             2 * heap + (64u << 20), why, sizeof why);
    if (!worker_snap) {
        fprintf(stderr, "isob serve: a worker cannot prepare its snapshot: %s\n", why);
        _exit(3);
    }
    if (__builtin_setjmp(rb_jmpbuf(worker_snap)) == 0) {
        if (rb_take(worker_snap, why, sizeof why) != 0) {
            fprintf(stderr, "isob serve: a worker cannot take its snapshot (--rollback-method "
                    "%s): %s\n", rb_method_name(sv->o->rb_method), why);
            _exit(3);
        }
        if (trial)
            rb_rollback(worker_snap);
    } else if (trial) {
        rb_end(worker_snap);
        _exit(0);
    }
    if (sv->o->tls)
        serve_tls_reseed();
    int fd = accept_one(sv);
    session_serve_one(sv, fd, 1);
    close(fd);
    rb_rollback(worker_snap);
}

static pid_t fork_worker(struct server *sv, int trial, struct isob_serve_rollback *totals,
                         size_t index)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        serve_worker_index = (int)index;
        worker_main(sv, trial, totals);
    }
    return pid < 0 ? -errno : pid;
}

int prefork_start(struct server *sv)
{
    const struct serve_opts *o = sv->o;
    sv->rb = mmap(NULL, sizeof *sv->rb, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    sv->kids = calloc(o->workers, sizeof *sv->kids);
    if (sv->rb == MAP_FAILED || !sv->kids) {
        sv->rb = NULL;
        fprintf(stderr, "isob serve: error: %s\n", strerror(ENOMEM));
        return -ENOMEM;
    }
    snprintf(sv->rb->method, sizeof sv->rb->method, "%s", rb_method_name(o->rb_method));
    sv->rb->workers = o->workers;
    sv->s.rollback = o->rb_method == RB_NONE ? NULL : sv->rb;
    /* The holders of the workers' snapshots, orphaned when a worker dies,
     * come back here to be reaped. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* The workers block in accept. */
    int fl = fcntl(sv->lfd, F_GETFL);
    if (fl < 0 || fcntl(sv->lfd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        fprintf(stderr, "isob serve: error: the listening socket: %s\n", strerror(errno));
        return -errno;
    }
    /* The trial: its rollback compared with its snapshot, on the totals
     * (cleared after). */
    pid_t t = fork_worker(sv, 1, sv->rb, 0);
    int st = 0;
    if (t < 0 || waitpid(t, &st, 0) != t || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (t > 0 && WIFSIGNALED(st))
            fprintf(stderr, "isob serve: error: the trial worker died: signal %d (%s)\n",
                    WTERMSIG(st), strsignal(WTERMSIG(st)));
        else
            fprintf(stderr, "isob serve: error: the trial worker (a snapshot and a rollback with "
                    "--rollback-method %s) failed%s%s\n", rb_method_name(o->rb_method),
                    t < 0 ? ": " : "", t < 0 ? strerror((int)-t) : "");
        return -EIO;
    }
    if (sv->rb->mismatched && o->rb_method != RB_TEST_SKIP_RESTORE) {
        fprintf(stderr, "isob serve: error: the trial worker's rollback (--rollback-method %s) "
                "left %llu pages unequal to its snapshot\n", rb_method_name(o->rb_method),
                (unsigned long long)sv->rb->mismatched);
        return -EIO;
    }
    memset(&sv->rb->workers, 0, sizeof *sv->rb - offsetof(struct isob_serve_rollback, workers));
    sv->rb->workers = o->workers;
    int rp[2];
    if (pipe2(rp, O_CLOEXEC) != 0) {
        fprintf(stderr, "isob serve: error: pipe: %s\n", strerror(errno));
        return -errno;
    }
    ready_w = rp[1];
    for (size_t i = 0; i < o->workers; i++) {
        pid_t pid = fork_worker(sv, 0, sv->rb, i);
        if (pid < 0) {
            close(rp[0]);
            close(rp[1]);
            ready_w = -1;
            fprintf(stderr, "isob serve: error: forking worker %zu: %s\n", i, strerror((int)-pid));
            return (int)pid;
        }
        sv->kids[sv->nkids++] = pid;
    }
    /* Replacements do not wait: their pipe end is closed. */
    close(rp[1]);
    ready_w = -1;
    /* One byte per worker that got ready; the end of file once every
     * worker (and what it started before it was ready) wrote or died. */
    size_t ready = 0;
    char buf[64];
    while (ready < o->workers) {
        ssize_t n = read(rp[0], buf, sizeof buf);
        if (n > 0)
            ready += (size_t)n;
        else if (n == 0 || errno != EINTR)
            break;
    }
    close(rp[0]);
    if (ready < o->workers) {
        fprintf(stderr, "isob serve: error: %zu of %zu workers did not get ready (see above)\n",
                o->workers - ready, o->workers);
        return -EIO;
    }
    return 0;
}

int prefork_reap(struct server *sv)
{
    for (;;) {
        int st;
        pid_t r = waitpid(-1, &st, WNOHANG);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        size_t i = 0;
        while (i < sv->nkids && sv->kids[i] != r)
            i++;
        if (i == sv->nkids)
            continue;   /* an orphaned holder of a snapshot */
        int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (WIFSIGNALED(st) && (WTERMSIG(st) == SIGTERM || WTERMSIG(st) == SIGINT)) {
            /* A stop signal to the server's process group: the master has
             * it too and is stopping. */
            sv->stopping = 1;
            sv->kids[i] = 0;
            continue;
        }
        if (!ok) {
            if (WIFSIGNALED(st))
                fprintf(stderr, "isob serve: a worker died: signal %d (%s); a fresh one "
                        "replaces it\n", WTERMSIG(st), strsignal(WTERMSIG(st)));
            uint64_t failed = __atomic_add_fetch(&sv->rb->failed, 1, __ATOMIC_RELAXED);
            if (failed > 2 * sv->nkids + FAILURES_SLACK) {
                fprintf(stderr, "isob serve: error: %llu workers failed; stopping\n",
                        (unsigned long long)failed);
                sv->kids[i] = 0;
                return -1;
            }
        }
        if (sv->stopping) {
            sv->kids[i] = 0;
            continue;
        }
        /* The master's CPU time in fork(), as a rollback's is its CPU time. */
        uint64_t t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        pid_t pid = fork_worker(sv, 0, sv->rb, i);
        uint64_t t1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        sv->kids[i] = pid > 0 ? pid : 0;
        if (pid < 0) {
            fprintf(stderr, "isob serve: error: no process for a worker: %s\n",
                    strerror((int)-pid));
            return -1;
        }
        if (ok && sv->o->rb_method == RB_FORK) {
            /* A fork rollback: the session's process gone, a fresh copy of
             * the master in its place. */
            __atomic_fetch_add(&sv->rb->sessions, 1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&sv->rb->ns, t1 - t0, __ATOMIC_RELAXED);
        }
    }
}

void prefork_end_all(struct server *sv)
{
    sv->stopping = 1;
    for (size_t i = 0; i < sv->nkids; i++)
        if (sv->kids[i] > 0)
            kill(sv->kids[i], SIGKILL);
    for (size_t i = 0; i < sv->nkids; i++)
        if (sv->kids[i] > 0)
            while (waitpid(sv->kids[i], NULL, 0) < 0 && errno == EINTR)
                ;
    /* The holders die with their workers (PR_SET_PDEATHSIG) and come back
     * here, the subreaper: reap them, for a while at most. */
    uint64_t until = mono_ns() + 500000000ull;
    while (mono_ns() < until) {
        pid_t r = waitpid(-1, NULL, WNOHANG);
        if (r < 0 && errno == ECHILD)
            break;
        if (r == 0)
            poll(NULL, 0, 1);
    }
    const struct isob_serve_rollback *t = sv->rb;
    if (!t || sv->o->rb_method == RB_NONE)
        return;
    double n = t->sessions ? (double)t->sessions : 1.0;
    fprintf(stderr, "isob serve: rollback by %s: %llu sessions rolled back, %.1f us and %.1f "
            "pages copied back per session%s\n", t->method, (unsigned long long)t->sessions,
            (double)t->ns / 1e3 / n, (double)t->pages / n,
            sv->o->rb_method == RB_FORK ? " (fork: the master's fork() per session; pages not "
                                          "counted)" : "");
    fprintf(stderr, "isob serve: rollback {\"type\": \"rollback\", \"method\": \"%s\", "
            "\"workers\": %llu, \"sessions\": %llu, \"pages\": %llu, \"ranges\": %llu, "
            "\"ns\": %llu, \"map_ns\": %llu, \"unmapped\": %llu, \"failed\": %llu, \"verified\": %llu, "
            "\"mismatched\": %llu}\n", t->method, (unsigned long long)t->workers,
            (unsigned long long)t->sessions, (unsigned long long)t->pages,
            (unsigned long long)t->ranges, (unsigned long long)t->ns,
            (unsigned long long)t->map_ns,
            (unsigned long long)t->unmapped, (unsigned long long)t->failed,
            (unsigned long long)t->verified, (unsigned long long)t->mismatched);
}
