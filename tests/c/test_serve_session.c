/* Sessions of `isob serve` (--session, --per-connection): what one session
 * did is gone in the next under rollback and fork and still there under
 * shared, and under rollback in the same worker process (--workers 1), by
 * each --rollback-method that runs here; the start-up state is intact after
 * every session; a rolled-back worker's memory equals its snapshot
 * (--rollback-verify), and a rollback that skips the restore (the test-only
 * method) fails both checks; connections served by contexts of their own
 * see none of each other's data; every session's process ends with the
 * server; bad options are refused.
 *
 * Each case runs the server (isob_serve_main) in a child process on a
 * loopback port it picks itself, and talks to it over real sockets.  This
 * process is a child subreaper, so a session's process that outlived the
 * server would come back here and be counted.  Nothing is timed: the
 * socket time-outs only keep a broken server from hanging a case. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/lwc.h"
#include "isobench/serve.h"
#include "../../src/serve/server_impl.h"
#include "tap.h"
#include "children.h"

/* Seconds a socket read may wait before the case fails. */
#define IO_TIMEOUT_S tap_limit(120)
/* Connections the isolation case holds open at once. */
#define CONNS 16

struct srv {
    pid_t pid;
    unsigned port;
    int err;      /* the server's stderr */
};

/* Orphans of the server come back to this process, to be counted (the
 * attribute is not inherited across the fork of each case). */
static void subreaper(void)
{
    CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
}

/* Run `isob serve ARGS` in a child with stderr to a pipe; with ready set,
 * wait for its ready line and take the port from it. */
static struct srv run_serve(const char *const *args, int ready)
{
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* The server ends with the case, whatever happens to the case; and
         * holds none of the runner's pipes, whose end the runner waits for. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (tap_skip_fd >= 0)
            close(tap_skip_fd);
        close(pfd[0]);
        dup2(pfd[1], 2);
        char *argv[32];
        int argc = 0;
        argv[argc++] = "serve";
        for (; args[argc - 1] && argc < 31; argc++)
            argv[argc] = (char *)args[argc - 1];
        argv[argc] = NULL;
        _exit(isob_serve_main(argc, argv));
    }
    close(pfd[1]);
    struct srv s = {pid, 0, pfd[0]};
    if (!ready)
        return s;
    /* Lines before the ready one (fork states its memory bound) are read
     * and passed over. */
    char line[1024];
    const char *at = NULL;
    for (int lines = 0; !at && lines < 8; lines++) {
        size_t n = 0;
        ssize_t r = 1;
        while (n < sizeof line - 1) {
            r = read(s.err, line + n, 1);
            if (r <= 0)
                break;
            n += (size_t)r;
            if (line[n - 1] == '\n')
                break;
        }
        line[n] = 0;
        at = strstr(line, "listening on 127.0.0.1:");
        if (r <= 0)
            break;
    }
    if (!at)
        fprintf(stderr, "# the server said: %s\n", line);
    CHECK(at != NULL);
    s.port = (unsigned)atoi(at + strlen("listening on 127.0.0.1:"));
    CHECK(s.port > 0);
    return s;
}

/* SIGTERM, then the server's exit status. */
static int stop_serve(struct srv *s)
{
    kill(s->pid, SIGTERM);
    int st = 0;
    CHECK(waitpid(s->pid, &st, 0) == s->pid);
    close(s->err);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int dial(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct timeval tv = {IO_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    return fd;
}

/* Send req on fd and read until the reply ends with `end` (found after
 * the bytes of the reply that precede it); a static buffer. */
static char *ask(int fd, const char *req, const char *end)
{
    static char buf[1u << 21];
    size_t n = 0, el = strlen(end);
    CHECK(send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req));
    while (n < el || memcmp(buf + n - el, end, el) != 0) {
        CHECK(n < sizeof buf - 1);
        ssize_t r = recv(fd, buf + n, sizeof buf - 1 - n, 0);
        if (r <= 0)
            fprintf(stderr, "# no more reply after %zu bytes: \"%.*s\"\n", n, (int)(n < 200 ? n : 200), buf);
        CHECK(r > 0);
        n += (size_t)r;
    }
    buf[n] = 0;
    return buf;
}

/* One whole session: connect, the requests, close. */
static char *session(unsigned port, const char *req, const char *end)
{
    int fd = dial(port);
    char *r = ask(fd, req, end);
    close(fd);
    return r;
}

static long stat_of(const char *stats, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "STAT %s ", name);
    const char *p = strstr(stats, key);
    CHECK(p != NULL);
    return atol(p + strlen(key));
}

/* The reply to a get of start-up item i, as start-up made it. */
static int startup_item_intact(const char *reply, size_t i)
{
    static unsigned char want[ISOB_SERVE_STARTUP_VALUE];
    char head[64];
    snprintf(head, sizeof head, "VALUE " ISOB_SERVE_STARTUP_KEY " 0 %u\r\n", i,
             ISOB_SERVE_STARTUP_VALUE);
    const char *p = strstr(reply, head);
    if (!p)
        return 0;
    isob_serve_startup_value(i, want, sizeof want);
    return memcmp(p + strlen(head), want, sizeof want) == 0;
}

/* Session one sets a key and destroys start-up state (deletes one item,
 * overwrites another, flushes the rest); session two looks for all of it.
 * forgets: whether the mode must have forgotten session one; same_pid:
 * whether one process (the one worker) serves both (-1: either way);
 * method: the --rollback-method, or NULL. */
/* The mechanism of the store in check_sessions. */
static const char *sessions_mech = "direct";

static void check_sessions(const char *mode, int forgets, int same_pid, const char *method)
{
    subreaper();
    const char *args[16] = {"-m", sessions_mech, "--port", "0", "--heap-mb", "4", "--startup-mb", "1",
                            "--session", mode, NULL};
    if (method) {
        enum rb_method m;
        char why[256];
        CHECK(rb_method_parse(method, &m) == 0);
        if (rb_probe(m, why, sizeof why) != 0)
            SKIP("--rollback-method %s cannot run here: %s", method, why);
        const char *more[] = {"--workers", "1", "--rollback-method", method, NULL};
        memcpy(args + 10, more, sizeof more);
    } else if (strcmp(mode, "prefork") == 0) {
        args[10] = "--workers";
        args[11] = "1";
    }
    struct srv s = run_serve(args, 1);
    if (method) {
        /* A method that cannot run here falls back to another: a skip. */
        char *r = session(s.port, "stats\r\n", "END\r\n");
        char want[64];
        snprintf(want, sizeof want, "STAT rollback_method %s\r\n", method);
        if (!strstr(r, want)) {
            stop_serve(&s);
            SKIP("--rollback-method %s cannot run here (the server fell back to another)",
                 method);
        }
    }
    long pids[2];
    for (int round = 0; round < 2; round++) {
        char *r = session(s.port, "stats\r\n", "END\r\n");
        pids[round] = stat_of(r, "pid");
        CHECK_EQ_LONG(stat_of(r, "startup_items"), 16);
        /* Each fresh session starts with the whole start-up state. */
        if (forgets || round == 0)
            CHECK_EQ_LONG(stat_of(r, "curr_items"), 16);
        r = session(s.port, "get mine startup_000000 startup_000001 startup_000002\r\n", "END\r\n");
        int intact = startup_item_intact(r, 0) && startup_item_intact(r, 1) &&
                     startup_item_intact(r, 2);
        int mine = strstr(r, "VALUE mine 0 3\r\nabc\r\n") != NULL;
        if (round == 0 || forgets) {
            CHECK(intact);
            CHECK(!mine);
        } else {
            /* shared: session one's doing is all still there. */
            CHECK(!intact);
            CHECK(mine);
        }
        if (round == 0) {
            r = session(s.port,
                        "delete startup_000000\r\n"
                        "set startup_000001 0 0 1\r\nx\r\n"
                        "get startup_000001\r\n"
                        "flush_all\r\n"
                        "get startup_000002\r\n"
                        "set mine 0 0 3\r\nabc\r\n"
                        "get mine\r\n",
                        "abc\r\nEND\r\n");
            const char want[] = "DELETED\r\nSTORED\r\n"
                                "VALUE startup_000001 0 1\r\nx\r\nEND\r\n"
                                "OK\r\nEND\r\n"
                                "STORED\r\nVALUE mine 0 3\r\nabc\r\nEND\r\n";
            if (strcmp(r, want) != 0)
                fprintf(stderr, "# got \"%s\"\n", r);
            CHECK(strcmp(r, want) == 0);
        }
    }
    /* A session is a process of its own, and a new one each time, except
     * under shared, where the server itself serves them all, and under
     * rollback, where the one worker serves them one after the other. */
    if (same_pid < 0) {
        CHECK(pids[0] != s.pid && pids[1] != s.pid);
    } else if (same_pid) {
        CHECK(pids[0] != s.pid);
        CHECK_EQ_LONG(pids[0], pids[1]);
    } else if (forgets) {
        CHECK(pids[0] != s.pid && pids[1] != s.pid);
        CHECK(pids[0] != pids[1]);
    } else {
        CHECK_EQ_LONG(pids[0], s.pid);
        CHECK_EQ_LONG(pids[1], s.pid);
    }
    CHECK_EQ_LONG(stop_serve(&s), 0);
    CHECK_EQ_LONG(tap_children(NULL, 0), 0);
}

/* The default method, by as many workers as CPUs. */
static void t_rollback_forgets_each_session(void) { check_sessions("rollback", 1, -1, NULL); }
static void t_rollback_uffd_forgets_in_one_worker(void)
{
    check_sessions("rollback", 1, 1, "uffd");
}
static void t_rollback_softdirty_forgets_in_one_worker(void)
{
    check_sessions("rollback", 1, 1, "softdirty");
}
/* mprotect keeps the store PROT_NONE between calls: a rollback must still
 * find and undo what a session wrote there. */
static void t_rollback_uffd_mprotect_store_forgets(void)
{
    sessions_mech = "mprotect";
    check_sessions("rollback", 1, 1, "uffd");
}
static void t_rollback_softdirty_mprotect_store_forgets(void)
{
    sessions_mech = "mprotect";
    check_sessions("rollback", 1, 1, "softdirty");
}
/* fork: the worker exits after its session, a fresh one takes its place. */
static void t_rollback_fork_forgets_each_session(void)
{
    check_sessions("rollback", 1, 0, "fork");
}
static void t_fork_forgets_each_session(void) { check_sessions("fork", 1, 0, NULL); }
static void t_shared_keeps_what_sessions_did(void) { check_sessions("shared", 0, 0, NULL); }
/* prefork, the workers without rollback: the one worker keeps what a
 * session did, for the next. */
static void t_prefork_keeps_what_sessions_did(void) { check_sessions("prefork", 0, 1, NULL); }

/* One worker, --rollback-verify: sessions that write the store, the
 * connection's buffers (a value of 600 KiB, in pieces) and the server's
 * counters; after each rollback the worker's private memory is compared
 * with its snapshot.  By the default method, the first that runs here
 * (fork, which keeps no snapshot to compare with, is a skip).  broken: the
 * test-only method that tracks the pages written as uffd does (softdirty
 * where uffd cannot run) but copies nothing back, which both checks must
 * catch. */
static void check_rollback_restores(int broken)
{
    subreaper();
    if (broken)
        setenv("ISOBENCH_TEST_MECHANISMS", "1", 1);
    const char *args[] = {"-m", "direct", "--port", "0", "--heap-mb", "4", "--preload-keys", "10",
                          "--session", "rollback", "--workers", "1", "--rollback-verify",
                          broken ? "--rollback-method" : NULL, "test-skip-restore", NULL};
    if (broken) {
        char why[256];
        if (rb_probe(RB_TEST_SKIP_RESTORE, why, sizeof why) != 0)
            SKIP("the rollback without restore tracks pages as uffd or softdirty does: %s", why);
    }
    struct srv s = run_serve(args, 1);
    char *r = session(s.port, "stats\r\n", "END\r\n");
    if (strstr(r, "STAT rollback_method fork\r\n")) {
        stop_serve(&s);
        SKIP("neither uffd nor softdirty runs here: fork keeps no snapshot to compare with");
    }
    {
        const char *m = strstr(r, "STAT rollback_method ");
        fprintf(stderr, "# method: %.*s\n", m ? (int)strcspn(m + 21, "\r") : 1, m ? m + 21 : "?");
    }
    static char big[700u << 10];
    size_t vlen = 600u << 10;
    int n = snprintf(big, sizeof big, "set big 0 0 %zu\r\n", vlen);
    memset(big + n, 'v', vlen);
    snprintf(big + n + vlen, sizeof big - n - vlen, "\r\nset mine 0 0 3\r\nabc\r\n");
    CHECK(strcmp(session(s.port, big, "STORED\r\nSTORED\r\n"), "STORED\r\nSTORED\r\n") == 0);
    r = session(s.port, "get mine key_00000003\r\n", "END\r\n");
    int kept = strstr(r, "VALUE mine 0 3\r\nabc\r\n") != NULL;
    CHECK(strstr(r, "VALUE key_00000003 0 45\r\n") != NULL);
    r = session(s.port, "stats\r\n", "END\r\n");
    long verified = stat_of(r, "rollback_verified");
    long mismatched = stat_of(r, "rollback_mismatched_pages");
    long pages = stat_of(r, "rollback_pages");
    /* stats, the sets, the get: each session rolled back and compared. */
    CHECK(stat_of(r, "rollback_sessions") >= 3);
    CHECK(verified >= 3);
    /* The sets wrote at least the 150 pages of the value. */
    CHECK(pages >= 150);
    if (broken) {
        CHECK(kept);
        CHECK(mismatched > 0);
    } else {
        CHECK(!kept);
        CHECK_EQ_LONG(mismatched, 0);
    }
    CHECK_EQ_LONG(stop_serve(&s), 0);
    CHECK_EQ_LONG(tap_children(NULL, 0), 0);
}

static void t_rollback_memory_equals_snapshot(void) { check_rollback_restores(0); }
static void t_rollback_without_restore_is_caught(void) { check_rollback_restores(1); }

/* --per-connection: CONNS connections open at once, each in its own
 * context; each sets its own key, and then finds only its own (and the
 * start-up state every context starts with). */
static void t_per_connection_sees_only_its_own(void)
{
    const char *args[] = {"-m", "direct", "--port", "0", "--heap-mb", "4", "--preload-keys", "10",
                          "--per-connection", NULL};
    subreaper();
    struct srv s = run_serve(args, 1);
    int fds[CONNS];
    long pids[CONNS];
    for (int i = 0; i < CONNS; i++)
        fds[i] = dial(s.port);
    for (int i = 0; i < CONNS; i++) {
        char req[64], want[64];
        snprintf(req, sizeof req, "set own%d 0 0 2\r\n%02d\r\n", i, i);
        snprintf(want, sizeof want, "STORED\r\n");
        CHECK(strcmp(ask(fds[i], req, "\r\n"), want) == 0);
    }
    char all[CONNS * 8 + 32] = "get key_00000009";
    for (int i = 0; i < CONNS; i++)
        snprintf(all + strlen(all), sizeof all - strlen(all), " own%d", i);
    strcat(all, "\r\n");
    for (int i = 0; i < CONNS; i++) {
        char *r = ask(fds[i], all, "END\r\n");
        char own[64];
        snprintf(own, sizeof own, "VALUE own%d 0 2\r\n%02d\r\n", i, i);
        CHECK(strstr(r, own) != NULL);
        CHECK(strstr(r, "VALUE key_00000009 0 45\r\n") != NULL);
        /* Exactly two values: its own and the preloaded one. */
        int values = 0;
        for (const char *p = r; (p = strstr(p, "VALUE ")); p++)
            values++;
        CHECK_EQ_LONG(values, 2);
        pids[i] = stat_of(ask(fds[i], "stats\r\n", "END\r\n"), "pid");
    }
    for (int i = 0; i < CONNS; i++)
        for (int j = 0; j < i; j++)
            CHECK(pids[i] != pids[j]);
    for (int i = 0; i < CONNS; i++)
        close(fds[i]);
    CHECK_EQ_LONG(stop_serve(&s), 0);
    CHECK_EQ_LONG(tap_children(NULL, 0), 0);
}

/* Sessions still open when the server is told to stop: their processes
 * end with it, none left behind. */
static void check_end_with_server(const char *mode)
{
    subreaper();
    /* rollback: a worker for each of the four sessions. */
    const char *args[] = {"-m", "direct", "--port", "0", "--heap-mb", "4", "--session", mode,
                          strcmp(mode, "rollback") ? NULL : "--workers", "4", NULL};
    struct srv s = run_serve(args, 1);
    int fds[4];
    for (int i = 0; i < 4; i++) {
        fds[i] = dial(s.port);
        CHECK(strcmp(ask(fds[i], "set a 0 0 1\r\n1\r\n", "\r\n"), "STORED\r\n") == 0);
    }
    CHECK_EQ_LONG(stop_serve(&s), 0);
    CHECK_EQ_LONG(tap_children(NULL, 0), 0);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
}

static void t_fork_sessions_end_with_server(void) { check_end_with_server("fork"); }
static void t_rollback_sessions_end_with_server(void) { check_end_with_server("rollback"); }

/* Bad options: one line on stderr, exit status 2, before listening. */
static void t_bad_options_refused(void)
{
    static const char *const cases[][12] = {
        {"-m", "direct", "--session", "bogus", NULL},
        {"-m", "direct", "--per-connection", "--session", "fork", NULL},
        {"-m", "process-futex", "--session", "rollback", NULL},
        {"-m", "direct", "--session", "fork", "--max-conns", "1000000", NULL},
        {"-m", "direct", "--startup-mb", "1", "--max-value", "100", NULL},
        {"-m", "direct", "--startup-mb", "999999", NULL},
        {"-m", "direct", "--http", "--preload-keys", "5", NULL},
        {"-m", "direct", "--session", "fork", "--memory-limit-mb", "1", NULL},
        {"-m", "direct", "--memory-limit-mb", "4096", NULL},
        {"-m", "direct", "--workers", "2", NULL},
        {"-m", "direct", "--per-connection", "--rollback-method", "fork", NULL},
        {"-m", "direct", "--session", "rollback", "--rollback-method", "bogus", NULL},
        {"-m", "direct", "--session", "rollback", "--rollback-method", "test-skip-restore", NULL},
        {"-m", "direct", "--session", "rollback", "--workers", "0", NULL},
        {"-m", "direct", "--session", "prefork", "--rollback-method", "fork", NULL},
    };
    static const char *const says[] = {"shared, fork, rollback or prefork", "--session rollback",
                                       "second context", "limit", "--max-value", "--startup-mb",
                                       "--http", "MiB for the listener, more than the 1.0 MiB",
                                       "needs --session fork", "workers of --session rollback",
                                       "not --per-connection", "uffd, softdirty or fork",
                                       "uffd, softdirty or fork", "--workers",
                                       "does not roll back"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct srv s = run_serve(cases[i], 0);
        char err[1024];
        size_t n = 0;
        ssize_t r;
        while (n < sizeof err - 1 && (r = read(s.err, err + n, sizeof err - 1 - n)) > 0)
            n += (size_t)r;
        err[n] = 0;
        int st = 0;
        CHECK(waitpid(s.pid, &st, 0) == s.pid);
        close(s.err);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 2 || !strstr(err, says[i]))
            fprintf(stderr, "# case %zu: status %d, said: %s", i, st, err);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
        CHECK(strstr(err, says[i]) != NULL);
        /* One line. */
        CHECK(n > 0 && err[n - 1] == '\n' && memchr(err, '\n', n - 1) == NULL);
    }
    CHECK_EQ_LONG(tap_children(NULL, 0), 0);
}

/* ISOB_TEST_CASES=A,B: only the cases whose names hold A or B (the guest
 * of tests/vm/run-vm-init.sh runs the rollback ones). */
static int wanted(const char *name)
{
    const char *only = getenv("ISOB_TEST_CASES");
    if (!only || !*only)
        return 1;
    char list[256];
    snprintf(list, sizeof list, "%s", only);
    for (char *save = NULL, *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save))
        if (strstr(name, w))
            return 1;
    return 0;
}
#define CASE(fn)            \
    do {                    \
        if (wanted(#fn))    \
            TAP_CASE(fn);   \
    } while (0)

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    CASE(t_rollback_forgets_each_session);
    CASE(t_rollback_uffd_forgets_in_one_worker);
    CASE(t_rollback_softdirty_forgets_in_one_worker);
    CASE(t_rollback_uffd_mprotect_store_forgets);
    CASE(t_rollback_softdirty_mprotect_store_forgets);
    CASE(t_rollback_fork_forgets_each_session);
    CASE(t_rollback_memory_equals_snapshot);
    CASE(t_rollback_without_restore_is_caught);
    CASE(t_fork_forgets_each_session);
    CASE(t_shared_keeps_what_sessions_did);
    CASE(t_prefork_keeps_what_sessions_did);
    CASE(t_per_connection_sees_only_its_own);
    CASE(t_fork_sessions_end_with_server);
    CASE(t_rollback_sessions_end_with_server);
    CASE(t_bad_options_refused);
    return tap_done();
}
