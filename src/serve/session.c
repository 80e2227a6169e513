/* Sessions of `isob serve` in processes of their own (--session fork and
 * --per-connection, server_impl.h), ways lwC's servers isolate one client's
 * session from the next (Litton et al., OSDI 2016, the Apache and nginx
 * cases); --session rollback's prefork workers are in prefork.c.
 *
 * --per-connection: the server starts up once and then serves nothing
 * itself.  Each accepted connection gets a light-weight context
 * (include/isobench/lwc.h) made from the server as start-up left it,
 * holding that connection's socket and no other descriptor.  The server's epoll loop hands the
 * socket's events to the context with lwc_switch; the context runs the
 * connection until it would block and switches back with the interest it
 * has now.  When the connection ends the context is destroyed, and with it
 * whatever the session changed: the next session is made from the same
 * state again.  Contexts are coroutines: one of them or the server runs at
 * a time, as in lwC's event-driven nginx.
 *
 * fork: the listener makes the compartment with its empty store and
 * serves nothing.  Each accepted connection gets a forked process that
 * starts up by itself (the preloaded keys, the start-up state), serves that
 * one connection and exits: the stock way to give each session a fresh
 * server, paying the start-up per session (a CGI program, PHP's start-up
 * per request).  The empty store comes from the listener copy-on-write: a
 * session holds a page of its own only once it writes there, so a session
 * that stores little costs little, and none costs more than a whole heap
 * (session_check_memory).  The sessions run side by side, scheduled by the
 * kernel.
 *
 * Either way a session's process dies with the server (PR_SET_PDEATHSIG),
 * and the server ends every one before it exits. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "isobench/harness.h"
#include "isobench/lwc.h"
#include "isobench/mechanism.h"
#include "isobench/proto.h"
#include "isobench/trusted.h"
#include "server_impl.h"
#include "../benches/ukernel.h"

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

/* Descriptors the rollback root keeps beyond one per connection: listener,
 * epoll, stop pipe, spare, stdio and what the mechanism opens. */
#define ROOT_FD_RESERVE 32

/* How a context answers its root (lwc_msg words). */
enum { MSG_EVENTS = 0, MSG_OVER = 1 };

int serve_store_create(struct server *sv)
{
    const struct serve_opts *o = sv->o;
    size_t heap = (o->heap_mb << 20) + isob_serve_startup_heap(&o->startup);
    int rc = isob_serve_init(&sv->s, sv->mech, heap, o->max_value, o->comp_cpu, o->buffer_mb << 20);
    if (rc) {
        const char *why = isob_comp_create_why();
        fprintf(stderr, "isob serve: error: creating the %s compartment (heap %zu MiB): %s\n",
                sv->mech->name, heap >> 20, why ? why : isob_strerror(rc));
        return 1;
    }
    return 0;
}

int serve_store_fill(struct server *sv)
{
    const struct serve_opts *o = sv->o;
    sv->s.evict = !o->no_evict;
    sv->s.http = o->http;
    sv->s.session = o->session == SESSION_FORK       ? "fork"
                    : o->session != SESSION_ROLLBACK ? "shared"
                    : o->per_connection              ? "per-connection"
                    : o->prefork_plain               ? "prefork"
                                                     : "rollback";
    int rc = isob_serve_startup(&sv->s, &o->startup);
    if (rc) {
        fprintf(stderr, "isob serve: error: storing the start-up state (%zu keys, %zu MiB) in "
                "the %s compartment: %s\n", o->startup.preload_keys, o->startup.startup_mb,
                sv->mech->name, rc == -ENOSPC ? "the store is full (raise --heap-mb)"
                                              : isob_strerror(rc));
        return 1;
    }
    return 0;
}

int serve_start_up(struct server *sv)
{
    if (serve_store_create(sv) != 0)
        return 1;
    if (serve_store_fill(sv) != 0) {
        isob_serve_fini(&sv->s);
        return 1;
    }
    return 0;
}

/* In a session's process: signals as a plain process has them, so that a
 * signal to the server's process group ends it at once (the server's
 * handlers would write to a pipe this process does not have). */
void session_signals(void)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGALRM, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
}

/* --- rollback ---------------------------------------------------------------- */

/* The context of one connection, from its first switch on: it serves c and
 * switches back to its root after each step.  It never returns; its root
 * destroys it when the connection is over. */
static __attribute__((noreturn)) void context_main(struct server *sv, struct conn *c, int caller,
                                                    struct lwc_msg in)
{
    session_signals();
    /* The root's list of connections is the root's; here there is one. */
    sv->conns = c;
    c->prev = c->next = NULL;
    sv->s.st.curr_connections = 1;
    isob_conn_init(&c->c, &sv->s);
    for (;;) {
        struct lwc_msg out = {{0}};
        if (serve_conn_step(sv, c, (unsigned)in.w[MSG_EVENTS]) != 0)
            out.w[MSG_OVER] = 1;
        else
            out.w[MSG_EVENTS] = c->events;
        lwc_switch(caller, &out, NULL, &in);
    }
}

int session_context_create(struct server *sv, struct conn *c)
{
    /* Every descriptor but stdio, the connection's own and the monitor's
     * broker goes: the listener, the epoll set, other clients' sockets. */
    int keep[2] = {c->fd, serve_monitor_keep_fd()};
    if (keep[1] >= 0 && keep[1] < keep[0]) {
        int t = keep[0];
        keep[0] = keep[1];
        keep[1] = t;
    }
    struct lwc_spec sp[3];
    size_t n = 0;
    int from = 3;
    for (int i = 0; i < 2; i++) {
        if (keep[i] < from)
            continue;
        if (keep[i] > from)
            sp[n++] = (struct lwc_spec){.res = LWC_RES_FD, .how = LWC_UNMAP,
                                        .fd = {from, keep[i] - 1}};
        from = keep[i] + 1;
    }
    sp[n++] = (struct lwc_spec){.res = LWC_RES_FD, .how = LWC_UNMAP, .fd = {from, INT_MAX}};
    int caller;
    struct lwc_msg first;
    int h = lwc_create(sp, n, 0, &caller, &first);
    if (h == LWC_SWITCHED)
        context_main(sv, c, caller, first);
    if (h < 0)
        return h;
    c->lwc = h;
    return 0;
}

void session_context_destroy(struct conn *c)
{
    if (c->lwc > 0)
        lwc_destroy(c->lwc);
    c->lwc = 0;
}

int session_context_step(struct server *sv, struct conn *c, unsigned events)
{
    (void)sv;
    struct lwc_msg out = {{0}}, in;
    out.w[MSG_EVENTS] = events;
    int rc = lwc_switch(c->lwc, &out, NULL, &in);
    if (rc != 0) {
        const char *why = lwc_why(c->lwc);
        fprintf(stderr, "isob serve: the context of a connection %s; the connection is closed, "
                "and the other sessions go on\n", why ? why : isob_strerror(rc));
        session_context_destroy(c);
        return -1;
    }
    if (in.w[MSG_OVER]) {
        session_context_destroy(c);
        return -1;
    }
    c->events = (unsigned)in.w[MSG_EVENTS];
    return 0;
}

/* --- fork -------------------------------------------------------------------- */

/* The refusal a session sends when its start-up failed. */
static void refuse_session(int fd, int http)
{
    static const char mc[] = "SERVER_ERROR the session could not start up\r\n";
    static const char web[] = "HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n"
                              "Connection: close\r\n\r\n";
    ssize_t n = http ? send(fd, web, sizeof web - 1, MSG_NOSIGNAL)
                     : send(fd, mc, sizeof mc - 1, MSG_NOSIGNAL);
    (void)n;
}

/* The connection a fork session serves (fork_serve's). */
static int fork_fd = -1;

static int fork_serve(struct server *sv)
{
    session_serve_one(sv, fork_fd, 0);
    return 0;
}

/* A fork session's process: start up in its copy of the listener's empty
 * store, serve fd until it is over, exit.  Under --monitor it has its
 * monitor of its own (a broker, or a context it supervises). */
static __attribute__((noreturn)) void fork_main(struct server *sv, int fd)
{
    session_signals();
    /* Nothing but the connection: not the listener, not the epoll set.
     * (The compartment holds no descriptor: fork sessions take only
     * mechanisms without a second context, whose store is memory of this
     * process.) */
    if (fd > 3)
        syscall(SYS_close_range, 3, fd - 1, 0);
    syscall(SYS_close_range, fd + 1, ~0u, 0);
    sv->ep = sv->lfd = sv->sfd = sv->cfd = sv->spare_fd = -1;
    if (serve_store_fill(sv) != 0 || (sv->o->monitor && serve_monitor_enter(sv) != 0)) {
        refuse_session(fd, sv->o->http);
        _exit(1);
    }
    sv->s.st.total_connections = 0;
    fork_fd = fd;
    int rc = sv->o->monitor ? serve_monitor_run(sv, fork_serve, -1) : fork_serve(sv);
    serve_monitor_leave();
    close(fd);
    _exit(rc == 0 ? 0 : 1);
}

void session_serve_one(struct server *sv, int fd, int blocking)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c)
        _exit(1);
    c->fd = fd;
    sv->conns = c;
    sv->s.st.curr_connections = 1;
    sv->s.st.total_connections++;
    isob_conn_init(&c->c, &sv->s);
    if (sv->o->tls) {
        /* TLS reads on: a blocking read after a whole record would wait
         * for the next request before this one's reply goes out. */
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 || serve_tls_conn_new(c) != 0) {
            isob_conn_fini(&c->c);
            sv->conns = NULL;
            sv->s.st.curr_connections = 0;
            free(c);
            return;
        }
        blocking = 0;
    }
    unsigned events = EPOLLIN;
    int over = blocking ? serve_conn_wait_input(sv, c) : serve_conn_step(sv, c, events);
    while (!over) {
        if (blocking && c->events == EPOLLIN && !c->draining) {
            over = serve_conn_wait_input(sv, c);
            continue;
        }
        struct pollfd p = {fd, (short)((c->events & EPOLLIN ? POLLIN : 0) |
                                       (c->events & EPOLLOUT ? POLLOUT : 0)), 0};
        while (poll(&p, 1, -1) < 0 && errno == EINTR)
            ;
        events = (p.revents & POLLIN ? EPOLLIN : 0) | (p.revents & POLLOUT ? EPOLLOUT : 0) |
                 (p.revents & POLLHUP ? EPOLLHUP : 0) | (p.revents & POLLERR ? EPOLLERR : 0);
        over = serve_conn_step(sv, c, events);
    }
    if (c->tls)
        serve_tls_conn_free(c);
    sv->conns = NULL;
    sv->s.st.curr_connections = 0;
    free(c);
}

int session_fork(struct server *sv, int fd)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* The listener died between fork and prctl: nobody would end us. */
        if (getppid() != parent)
            _exit(1);
        fork_main(sv, fd);
    }
    int err = pid < 0 ? -errno : 0;
    close(fd);
    if (err)
        return err;
    sv->kids[sv->nkids++] = pid;
    return 0;
}

void session_fork_reap(struct server *sv)
{
    /* The listener's only children are its sessions. */
    for (;;) {
        int st;
        pid_t r = waitpid(-1, &st, WNOHANG);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return;
        if (sv->o->monitor)
            serve_monitor_reaped(r);
        if (WIFSIGNALED(st))
            fprintf(stderr, "isob serve: a session's process died: signal %d (%s)\n",
                    WTERMSIG(st), strsignal(WTERMSIG(st)));
        for (size_t i = 0; i < sv->nkids; i++)
            if (sv->kids[i] == r) {
                sv->kids[i] = sv->kids[--sv->nkids];
                sv->s.st.curr_connections--;
                break;
            }
    }
}

void session_fork_end_all(struct server *sv)
{
    for (size_t i = 0; i < sv->nkids; i++)
        kill(sv->kids[i], SIGKILL);
    for (size_t i = 0; i < sv->nkids; i++) {
        while (waitpid(sv->kids[i], NULL, 0) < 0 && errno == EINTR)
            ;
        if (sv->o->monitor)
            serve_monitor_reaped(sv->kids[i]);
    }
    sv->nkids = 0;
}

/* --- limits ------------------------------------------------------------------ */

int session_check_limits(const struct serve_opts *o, char *why, size_t len)
{
    char what[128];
    if (o->session == SESSION_ROLLBACK && !o->per_connection) {
        /* Each worker and the holder of its snapshot, and the master. */
        snprintf(what, sizeof what, "--workers %zu with --session rollback (two processes per "
                 "worker)", o->workers);
        return uk_check_tasks(what, 2 * (uint64_t)o->workers + 3, why, len);
    }
    snprintf(what, sizeof what, "--max-conns %zu with --session %s (a process per connection)",
             o->max_conns, o->session == SESSION_FORK ? "fork" : "rollback --per-connection");
    /* The server itself, a compartment's server and a trial start-up. */
    int rc = uk_check_tasks(what, (uint64_t)o->max_conns + 3, why, len);
    if (rc || o->session != SESSION_ROLLBACK)
        return rc;
    /* The rollback root holds every connection's socket. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    return uk_check_fds(what, (uint64_t)o->max_conns + ROOT_FD_RESERVE, why, len);
}

/* --- memory ------------------------------------------------------------------
 *
 * What --session fork may come to hold, against what the machine can give.
 * A session's process shares the listener's pages until it writes them, so
 * one that stores little holds little; but a client may fill its store, and
 * the store is one compartment's whole heap, so the worst case of a session
 * is the heap (start-up state included: it lives there), the compartment's
 * shared buffer, its one connection's buffers and the process's own pages.
 * The listener holds the store once (populated: the mechanisms map it so) and
 * serves nothing. */

/* A session's process beyond the store and the connection's buffers: its
 * stack, its copies of the server's static state (the 64 KiB read buffer),
 * libc's and malloc's pages.  Measured at about 0.3 MiB in a session that
 * served a set and a get; this leaves room for the pages it may write later. */
#define SESSION_PROCESS_BYTES (2u << 20)

/* The shared buffer isob_serve_init asks of the mechanism: one message with
 * the longest key and the largest value, and a page for its header. */
static uint64_t shared_bytes(size_t max_value)
{
    uint64_t need = sizeof(struct isob_msg) + ISOB_PROTO_KEY_MAX + ISOB_SERVE_FLAGS_BYTES +
                    (uint64_t)max_value;
    uint64_t dflt = ISOB_DEFAULT_SHARED_SIZE;
    return dflt < need + 4096 ? (need + 4096 + 4095) / 4096 * 4096 : dflt;
}

/* What one connection's buffers may hold at most: the largest command it
 * may hold (input) and the replies waiting beyond the high mark plus the
 * largest value (output), each with a capacity up to twice what it holds,
 * and the idle small buffers kept for reuse; never more than the cap on
 * every buffer (--buffer-mb). */
static uint64_t conn_bytes(const struct serve_opts *o)
{
    uint64_t one = isob_serve_in_max(o->max_value) + ISOB_CONN_OUT_HIGH + o->max_value + 4096;
    uint64_t worst = 2 * one + 32 * (uint64_t)ISOB_SERVE_BUF_SMALL;
    uint64_t cap = (uint64_t)o->buffer_mb << 20;
    return worst < cap ? worst : cap;
}

/* A number from a line "Name:   N kB" of /proc/meminfo, in bytes; -1 if
 * absent. */
static int64_t meminfo(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, name, n) == 0 && p[n] == ':')
            return strtoll(p + n + 1, NULL, 10) * 1024;
    return -1;
}

static int read_text(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = 0;
    return 0;
}

/* The room under this process's cgroup (v2) memory.max, in bytes; -1 where
 * there is no such limit. */
static int64_t cgroup_room(void)
{
    char line[512], path[640], num[64];
    if (read_text("/proc/self/cgroup", line, sizeof line) != 0 || strncmp(line, "0::", 3) != 0)
        return -1;
    line[strcspn(line, "\n")] = 0;
    const char *cg = line + 3;
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", strcmp(cg, "/") ? cg : "");
    if (read_text(path, num, sizeof num) != 0 || strncmp(num, "max", 3) == 0)
        return -1;
    int64_t max = strtoll(num, NULL, 10);
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.current", strcmp(cg, "/") ? cg : "");
    int64_t cur = read_text(path, num, sizeof num) == 0 ? strtoll(num, NULL, 10) : 0;
    return max > cur ? max - cur : 0;
}

/* What the machine can give now: MemAvailable + SwapFree, or the room under
 * the cgroup's memory.max where that is less.  0 or -errno. */
static int machine_memory(uint64_t *bytes, const char **what)
{
    char text[8192];
    if (read_text("/proc/meminfo", text, sizeof text) != 0)
        return -errno;
    int64_t avail = meminfo(text, "MemAvailable"), swap = meminfo(text, "SwapFree");
    if (avail < 0)
        return -ENOENT;
    *bytes = (uint64_t)avail + (uint64_t)(swap > 0 ? swap : 0);
    *what = "MemAvailable + SwapFree";
    int64_t room = cgroup_room();
    if (room >= 0 && (uint64_t)room < *bytes) {
        *bytes = (uint64_t)room;
        *what = "this cgroup's memory.max less its memory.current";
    }
    return 0;
}

int session_memory(const struct serve_opts *o, struct session_memory *m)
{
    memset(m, 0, sizeof *m);
    uint64_t heap = ((uint64_t)o->heap_mb << 20) + isob_serve_startup_heap(&o->startup);
    uint64_t store = heap + shared_bytes(o->max_value);
    /* And the page tables that map the store: 8 bytes a page. */
    store += store / 512;
    m->per_session = store + conn_bytes(o) + SESSION_PROCESS_BYTES;
    m->listener = store + SESSION_PROCESS_BYTES + o->max_conns * sizeof(pid_t);
    m->total = m->listener + (uint64_t)o->max_conns * m->per_session;
    int rc = machine_memory(&m->machine, &m->machine_what);
    if (o->memory_limit_mb) {
        m->limit = (uint64_t)o->memory_limit_mb << 20;
        m->limit_what = "--memory-limit-mb";
    } else if (rc) {
        return rc;
    } else {
        m->limit = m->machine;
        m->limit_what = m->machine_what;
    }
    m->fit = m->limit > m->listener ? (m->limit - m->listener) / m->per_session : 0;
    return 0;
}

static double mib(uint64_t b)
{
    return (double)b / (1024.0 * 1024.0);
}

int session_check_memory(const struct serve_opts *o, char *line, size_t len)
{
    struct session_memory m;
    int rc = session_memory(o, &m);
    if (rc) {
        snprintf(line, len, "--session fork: cannot read how much memory this machine has "
                 "(/proc/meminfo: %s); state it with --memory-limit-mb", isob_strerror(rc));
        return rc;
    }
    if (m.total > m.limit) {
        snprintf(line, len, "--session fork with --max-conns %zu may need %.1f MiB: %zu sessions "
                 "of at most %.1f MiB each (a session can fill its store: --heap-mb %zu%s) and "
                 "%.1f MiB for the listener, more than the %.1f MiB it may take (%s); lower "
                 "--max-conns (%llu fit) or --heap-mb, or set the limit with --memory-limit-mb",
                 o->max_conns, mib(m.total), o->max_conns, mib(m.per_session), o->heap_mb,
                 o->startup.startup_mb || o->startup.preload_keys ? " and the start-up state" : "",
                 mib(m.listener), mib(m.limit), m.limit_what, (unsigned long long)m.fit);
        return -ENOMEM;
    }
    int n = snprintf(line, len, "fork sessions may take %.1f MiB: %zu sessions of at most %.1f "
                     "MiB each and %.1f MiB for the listener, within %.1f MiB (%s)",
                     mib(m.total), o->max_conns, mib(m.per_session), mib(m.listener),
                     mib(m.limit), m.limit_what);
    /* A limit stated beyond what the machine has: said, not refused. */
    if (m.machine_what && m.total > m.machine && n > 0 && (size_t)n < len)
        snprintf(line + n, len - (size_t)n, "; more than the %.1f MiB this machine can give now "
                 "(%s): sessions that fill their stores may run it out of memory",
                 mib(m.machine), m.machine_what);
    return 0;
}
