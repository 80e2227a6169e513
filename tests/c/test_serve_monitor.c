/* `isob serve --http --monitor`: under every monitor a GET gets the
 * document (of --doc-bytes) read from its file; a path that climbs out of
 * the document directory ("/../../etc/passwd") is refused (403) by inline,
 * procsep and lwc, while without a check (none) it really reads
 * /etc/passwd, which is the attack the monitors stop; the monitor's count
 * at exit is two checked calls (openat, pread64) per GET plus the refused
 * open; procsep and lwc serve from a process under the monitors' seccomp
 * filters, and keep the monitor's memory closed to a process of the same
 * uid (inline does neither); bad combinations are refused.
 *
 * Each case runs the server (isob_serve_main) in a child process on a
 * loopback port it picks, and talks to it over real sockets.  Nothing is
 * timed: the socket time-outs only keep a broken server from hanging. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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

#include "isobench/loadgen.h"
#include "isobench/serve.h"
#include "tap.h"
#include "children.h"
#include "nocap.h"

#define IO_TIMEOUT_S tap_limit(120)
/* GETs each monitor case sends before the refused one. */
#define GETS 20
#define DOC 900

struct srv {
    pid_t pid;
    unsigned port;
    int err;
};

static struct srv run_serve(const char *const *args, int ready)
{
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
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
    char line[1024];
    const char *at = NULL;
    /* Lines before the ready one (workers started, a fork session's
     * memory bound) are passed over. */
    for (int lines = 0; !at && lines < 16; lines++) {
        size_t n = 0;
        while (n < sizeof line - 1 && read(s.err, line + n, 1) == 1 && line[n++] != '\n')
            ;
        line[n] = 0;
        at = strstr(line, "listening on 127.0.0.1:");
        if (!n)
            break;
    }
    if (!at)
        fprintf(stderr, "# the server said: %s\n", line);
    CHECK(at != NULL);
    s.port = (unsigned)atoi(at + strlen("listening on 127.0.0.1:"));
    CHECK(s.port > 0);
    return s;
}

/* SIGTERM; the server's exit status, and what it said after its ready line. */
static int stop_serve(struct srv *s, char *said, size_t len)
{
    kill(s->pid, SIGTERM);
    int st = 0;
    CHECK(waitpid(s->pid, &st, 0) == s->pid);
    size_t n = 0;
    ssize_t r;
    while (n < len - 1 && (r = read(s->err, said + n, len - 1 - n)) > 0)
        n += (size_t)r;
    said[n] = 0;
    close(s->err);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* One HTTP/1.0 GET of path on a connection of its own: the whole reply
 * (the server closes), in a static buffer. */
static char *get(unsigned port, const char *path)
{
    static char buf[1u << 16];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct timeval tv = {IO_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    char req[512];
    int rn = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\n\r\n", path);
    CHECK(send(fd, req, (size_t)rn, MSG_NOSIGNAL) == rn);
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = recv(fd, buf + n, sizeof buf - 1 - n, 0)) > 0)
        n += (size_t)r;
    buf[n] = 0;
    close(fd);
    return buf;
}

/* mon under the session mode of the arguments `session` (NULL-ended; none:
 * shared): every serving process (worker, fork session, context) has the
 * monitor, and their counts add up to the one line at exit. */
static void check_monitor_in(const char *mon, int refuses, const char *const *session)
{
    const char *args[24] = {"-m", "direct", "--port", "0", "--heap-mb", "4", "--http",
                            "--doc-bytes", "900", "--monitor", mon, NULL};
    int na = 11;
    for (int i = 0; session && session[i] && na < 23; i++)
        args[na++] = session[i];
    args[na] = NULL;
    struct srv s = run_serve(args, 1);
    static char doc[DOC + 1];
    CHECK(isob_http_doc(DOC, doc) == 0);
    for (int i = 0; i < GETS; i++) {
        char *r = get(s.port, "/");
        if (strncmp(r, "HTTP/1.0 200 ", 13) != 0)
            fprintf(stderr, "# %s: %.200s\n", mon, r);
        CHECK(strncmp(r, "HTTP/1.0 200 ", 13) == 0);
        CHECK(strstr(r, "Content-Length: 900\r\n") != NULL);
        char *body = strstr(r, "\r\n\r\n");
        CHECK(body && strcmp(body + 4, doc) == 0);
    }
    /* Out of the document directory, whatever it is (mkdtemp's, a few
     * levels below /). */
    char *r = get(s.port, "/../../../../../../../../etc/passwd");
    if (refuses) {
        CHECK(strncmp(r, "HTTP/1.0 403 ", 13) == 0);
        CHECK(strstr(r, "root:") == NULL);
    } else {
        CHECK(strncmp(r, "HTTP/1.0 200 ", 13) == 0);
        CHECK(strstr(r, "root:") != NULL);
    }
    char said[4096];
    CHECK_EQ_LONG(stop_serve(&s, said, sizeof said), 0);
    char want[160];
    snprintf(want, sizeof want, "monitor %s: %d system calls checked, %d refused\n", mon,
             refuses ? 2 * GETS + 1 : 0, refuses ? 1 : 0);
    if (!strstr(said, want))
        fprintf(stderr, "# wanted \"%s\", the server said: %s", want, said);
    CHECK(strstr(said, want) != NULL);
}

/* The number of seccomp filters of process pid (/proc/PID/status). */
static int filters_of(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Seccomp_filters: %d", &n) == 1)
            break;
    fclose(f);
    CHECK(n >= 0);
    return n;
}

/* 0 when this process opens /proc/PID/mem, else -errno. */
static int mem_opens(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    close(fd);
    return 0;
}

/* The server's confinement as the processes show it: under procsep the
 * serving loop runs in a child under one filter (the broker, another
 * child, has none); under lwc in the context under two (the trap filter
 * and the default-deny one).  The monitor's memory (the server process;
 * under procsep the broker's too) does not open for a process of the same
 * uid without CAP_SYS_PTRACE, this test; inline's does. */
static void check_confined(const char *mon, int filters)
{
    tap_drop_ptrace_cap();
    const char *args[] = {"-m", "direct", "--port", "0", "--heap-mb", "4", "--http",
                          "--monitor", mon, NULL};
    struct srv s = run_serve(args, 1);
    CHECK(strncmp(get(s.port, "/"), "HTTP/1.0 200 ", 13) == 0);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)s.pid, (int)s.pid);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    int pid, confined = 0, others = 0;
    while (fscanf(f, "%d", &pid) == 1) {
        int n = filters_of(pid);
        fprintf(stderr, "# %s: child %d has %d seccomp filters; its memory: %s\n", mon, pid, n,
                n ? "-" : mem_opens(pid) == 0 ? "opens" : strerror(-mem_opens(pid)));
        if (n == filters && n > 0) {
            confined++;
        } else {
            others++;
            CHECK_EQ_LONG(n, 0);
            if (filters)
                CHECK_EQ_LONG(mem_opens(pid), -EACCES);
        }
    }
    fclose(f);
    int own = mem_opens(s.pid);
    fprintf(stderr, "# %s: the server's own memory: %s\n", mon, own == 0 ? "opens" : strerror(-own));
    CHECK_EQ_LONG(filters_of(s.pid), 0);
    if (filters) {
        CHECK_EQ_LONG(confined, 1);
        CHECK_EQ_LONG(own, -EACCES);
    } else {
        CHECK_EQ_LONG(confined + others, 0);
        CHECK_EQ_LONG(own, 0);
    }
    char said[4096];
    CHECK_EQ_LONG(stop_serve(&s, said, sizeof said), 0);
}

static void t_procsep_serves_confined(void) { check_confined("procsep", 1); }
static void t_lwc_serves_confined(void) { check_confined("lwc", 2); }
static void t_inline_serves_unconfined(void) { check_confined("inline", 0); }

static void check_monitor(const char *mon, int refuses)
{
    check_monitor_in(mon, refuses, NULL);
}

static void t_none_serves_what_the_path_names(void) { check_monitor("none", 0); }
static void t_inline_refuses_outside(void) { check_monitor("inline", 1); }
static void t_procsep_refuses_outside(void) { check_monitor("procsep", 1); }
static void t_lwc_refuses_outside(void) { check_monitor("lwc", 1); }

/* lwC's Apache: prefork workers (with and without rollback), each with
 * its monitor; fork sessions; nginx's context per connection. */
static const char *const PREFORK[] = {"--session", "prefork", "--workers", "3", NULL};
static const char *const ROLLBACK[] = {"--session", "rollback", "--workers", "3", NULL};
static const char *const FORK[] = {"--session", "fork", "--max-conns", "8", NULL};
static const char *const PER_CONN[] = {"--per-connection", "--max-conns", "8", NULL};

static void t_prefork_none_serves_what_the_path_names(void)
{
    check_monitor_in("none", 0, PREFORK);
}
static void t_prefork_inline_refuses_outside(void) { check_monitor_in("inline", 1, PREFORK); }
static void t_prefork_procsep_refuses_outside(void) { check_monitor_in("procsep", 1, PREFORK); }
static void t_prefork_lwc_refuses_outside(void) { check_monitor_in("lwc", 1, PREFORK); }
static void t_rollback_procsep_refuses_outside(void) { check_monitor_in("procsep", 1, ROLLBACK); }
static void t_rollback_lwc_refuses_outside(void) { check_monitor_in("lwc", 1, ROLLBACK); }
static void t_fork_procsep_refuses_outside(void) { check_monitor_in("procsep", 1, FORK); }
static void t_fork_lwc_refuses_outside(void) { check_monitor_in("lwc", 1, FORK); }
static void t_per_connection_procsep_refuses_outside(void)
{
    check_monitor_in("procsep", 1, PER_CONN);
}
static void t_per_connection_inline_refuses_outside(void)
{
    check_monitor_in("inline", 1, PER_CONN);
}

/* Without --monitor, --doc-bytes sizes the document the store holds. */
static void t_doc_bytes_from_the_store(void)
{
    const char *args[] = {"-m", "direct", "--port", "0", "--heap-mb", "4", "--http",
                          "--doc-bytes", "900", NULL};
    struct srv s = run_serve(args, 1);
    static char doc[DOC + 1];
    CHECK(isob_http_doc(DOC, doc) == 0);
    char *r = get(s.port, "/");
    char *body = strstr(r, "\r\n\r\n");
    CHECK(strncmp(r, "HTTP/1.0 200 ", 13) == 0 && body && strcmp(body + 4, doc) == 0);
    char said[1024];
    CHECK_EQ_LONG(stop_serve(&s, said, sizeof said), 0);
    CHECK(strstr(said, "monitor") == NULL);
}

/* The document of 45 bytes is the one every client already checks. */
static void t_doc_45_is_the_document(void)
{
    char doc[ISOB_HTTP_DOC_MAX + 1];
    CHECK(isob_http_doc(45, doc) == 0);
    CHECK(strcmp(doc, ISOB_HTTP_DOC) == 0);
    CHECK(isob_http_doc(65536, doc) == 0);
    CHECK_EQ_LONG((long)strlen(doc), 65536);
    CHECK(isob_http_doc(44, doc) != 0);
    CHECK(isob_http_doc(65537, doc) != 0);
}

static void t_bad_options_refused(void)
{
    static const char *const cases[][12] = {
        {"-m", "direct", "--monitor", "inline", NULL},
        {"-m", "direct", "--http", "--monitor", "seccomp", NULL},
        {"-m", "direct", "--http", "--monitor", "lwc", "--per-connection", NULL},
        {"-m", "direct", "--doc-bytes", "900", NULL},
        {"-m", "direct", "--http", "--doc-bytes", "44", NULL},
    };
    static const char *const says[] = {"needs --http", "none, inline, procsep or lwc",
                                       "give --monitor none, inline or procsep", "needs --http",
                                       "45 to 65536"};
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
        CHECK(n > 0 && err[n - 1] == '\n' && memchr(err, '\n', n - 1) == NULL);
    }
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    TAP_CASE(t_doc_45_is_the_document);
    TAP_CASE(t_doc_bytes_from_the_store);
    TAP_CASE(t_none_serves_what_the_path_names);
    TAP_CASE(t_inline_refuses_outside);
    TAP_CASE(t_procsep_refuses_outside);
    TAP_CASE(t_lwc_refuses_outside);
    TAP_CASE(t_inline_serves_unconfined);
    TAP_CASE(t_procsep_serves_confined);
    TAP_CASE(t_lwc_serves_confined);
    TAP_CASE(t_prefork_none_serves_what_the_path_names);
    TAP_CASE(t_prefork_inline_refuses_outside);
    TAP_CASE(t_prefork_procsep_refuses_outside);
    TAP_CASE(t_prefork_lwc_refuses_outside);
    TAP_CASE(t_rollback_procsep_refuses_outside);
    TAP_CASE(t_rollback_lwc_refuses_outside);
    TAP_CASE(t_fork_procsep_refuses_outside);
    TAP_CASE(t_fork_lwc_refuses_outside);
    TAP_CASE(t_per_connection_procsep_refuses_outside);
    TAP_CASE(t_per_connection_inline_refuses_outside);
    TAP_CASE(t_bad_options_refused);
    return tap_done();
}
