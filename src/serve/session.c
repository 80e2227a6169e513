/* Sessions of `isob serve` in processes of their own (--session fork and
 * rollback, server_impl.h), the two ways lwC's servers isolate one client's
 * session from the next (Litton et al., OSDI 2016, the Apache and nginx
 * cases).
 *
 * rollback: the server starts up once and then serves nothing itself.  Each
 * accepted connection gets a light-weight context (include/isobench/lwc.h)
 * made from the server as start-up left it, holding that connection's
 * socket and no other descriptor.  The server's epoll loop hands the
 * socket's events to the context with lwc_switch; the context runs the
 * connection until it would block and switches back with the interest it
 * has now.  When the connection ends the context is destroyed, and with it
 * whatever the session changed: the next session is made from the same
 * state again.  Contexts are coroutines: one of them or the server runs at
 * a time, as in lwC's event-driven nginx.
 *
 * fork: the listener holds no state.  Each accepted connection gets a
 * forked process that starts up by itself (the compartment, the preloaded
 * keys, the start-up state), serves that one connection and exits: the
 * stock way to give each session a fresh server, paying the start-up per
 * session (a CGI program, PHP's start-up per request).  The sessions run
 * side by side, scheduled by the kernel.
 *
 * Either way a session's process dies with the server (PR_SET_PDEATHSIG),
 * and the server ends every one before it exits. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include "isobench/harness.h"
#include "isobench/lwc.h"
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

int serve_start_up(struct server *sv)
{
    const struct serve_opts *o = sv->o;
    size_t heap = (o->heap_mb << 20) + isob_serve_startup_heap(&o->startup);
    int rc = isob_serve_init(&sv->s, sv->mech, heap, o->max_value, o->comp_cpu, o->buffer_mb << 20);
    if (rc) {
        fprintf(stderr, "isob serve: error: creating the %s compartment (heap %zu MiB): %s\n",
                sv->mech->name, heap >> 20, isob_strerror(rc));
        return 1;
    }
    sv->s.evict = !o->no_evict;
    sv->s.http = o->http;
    sv->s.session = o->session == SESSION_FORK       ? "fork"
                    : o->session == SESSION_ROLLBACK ? "rollback"
                                                     : "shared";
    rc = isob_serve_startup(&sv->s, &o->startup);
    if (rc) {
        fprintf(stderr, "isob serve: error: storing the start-up state (%zu keys, %zu MiB) in "
                "the %s compartment: %s\n", o->startup.preload_keys, o->startup.startup_mb,
                sv->mech->name, rc == -ENOSPC ? "the store is full (raise --heap-mb)"
                                              : isob_strerror(rc));
        isob_serve_fini(&sv->s);
        return 1;
    }
    return 0;
}

/* In a session's process: signals as a plain process has them, so that a
 * signal to the server's process group ends it at once (the server's
 * handlers would write to a pipe this process does not have). */
static void session_signals(void)
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
    /* Every descriptor but stdio and the connection's own goes: the
     * listener, the epoll set, other clients' sockets. */
    struct lwc_spec sp[2];
    size_t n = 0;
    if (c->fd > 3)
        sp[n++] = (struct lwc_spec){.res = LWC_RES_FD, .how = LWC_UNMAP, .fd = {3, c->fd - 1}};
    sp[n++] = (struct lwc_spec){.res = LWC_RES_FD, .how = LWC_UNMAP, .fd = {c->fd + 1, INT_MAX}};
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

/* A fork session's process: start up, serve fd until it is over, exit. */
static __attribute__((noreturn)) void fork_main(struct server *sv, int fd)
{
    session_signals();
    /* Nothing but the connection: not the listener, not the epoll set. */
    if (fd > 3)
        syscall(SYS_close_range, 3, fd - 1, 0);
    syscall(SYS_close_range, fd + 1, ~0u, 0);
    sv->ep = sv->lfd = sv->sfd = sv->cfd = sv->spare_fd = -1;
    if (serve_start_up(sv) != 0) {
        refuse_session(fd, sv->o->http);
        _exit(1);
    }
    struct conn *c = calloc(1, sizeof *c);
    if (!c)
        _exit(1);
    c->fd = fd;
    sv->conns = c;
    sv->s.st.curr_connections = sv->s.st.total_connections = 1;
    isob_conn_init(&c->c, &sv->s);
    unsigned events = EPOLLIN;
    while (serve_conn_step(sv, c, events) == 0) {
        struct pollfd p = {fd, (short)((c->events & EPOLLIN ? POLLIN : 0) |
                                       (c->events & EPOLLOUT ? POLLOUT : 0)), 0};
        while (poll(&p, 1, -1) < 0 && errno == EINTR)
            ;
        events = (p.revents & POLLIN ? EPOLLIN : 0) | (p.revents & POLLOUT ? EPOLLOUT : 0) |
                 (p.revents & POLLHUP ? EPOLLHUP : 0) | (p.revents & POLLERR ? EPOLLERR : 0);
    }
    close(fd);
    _exit(0);
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
    for (size_t i = 0; i < sv->nkids; i++)
        while (waitpid(sv->kids[i], NULL, 0) < 0 && errno == EINTR)
            ;
    sv->nkids = 0;
}

/* --- limits ------------------------------------------------------------------ */

int session_check_limits(const struct serve_opts *o, char *why, size_t len)
{
    char what[128];
    snprintf(what, sizeof what, "--max-conns %zu with --session %s (a process per connection)",
             o->max_conns, o->session == SESSION_FORK ? "fork" : "rollback");
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
