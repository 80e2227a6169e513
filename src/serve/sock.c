/* One connection's socket (server_impl.h): reading into the state machine
 * of conn.c, sending its replies, and the lingering close.  The same code
 * serves a connection in the shared server's epoll loop, in a rollback
 * session's context (its root holds the epoll loop and hands the events
 * over) and in a fork session's process (which polls its one socket). */
#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server_impl.h"

/* After its last reply, a closing connection reads and drops at most this
 * much of what the client still sends before it is closed outright. */
#define LINGER_MAX (1u << 20)

static int conn_over(struct conn *c)
{
    isob_conn_fini(&c->c);
    return -1;
}

/* Send what is pending and choose what to wait for next. */
static int conn_flush(struct conn *c)
{
    for (;;) {
        size_t len;
        const unsigned char *p = isob_conn_output(&c->c, &len);
        if (!p)
            break;
        ssize_t n = serve_io_send(c, p, len);
        if (n > 0) {
            isob_conn_sent(&c->c, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* TLS may wait to read before it can write (tls.c set it). */
            if (c->tls && c->events == EPOLLIN)
                return 0;
            break;
        }
        return conn_over(c);
    }
    unsigned wants = isob_conn_wants(&c->c);
    if (wants & ISOB_CONN_DONE) {
        if (c->peer_done)
            return conn_over(c);
        /* A lingering close: closing a socket with unread input makes the
         * kernel send a reset, which can destroy the last reply (an error
         * message) before the client reads it.  So shut our side, which
         * the client sees as the end, and close once the client has closed
         * too. */
        serve_tls_close_notify(c);
        shutdown(c->fd, SHUT_WR);
        c->draining = 1;
        c->events = EPOLLIN;
        return 0;
    }
    c->events = (wants & ISOB_CONN_WRITE ? EPOLLOUT : 0) | (wants & ISOB_CONN_READ ? EPOLLIN : 0);
    return 0;
}

/* A draining connection: drop what arrives until the client closes. */
static int conn_drain(struct server *sv, struct conn *c)
{
    for (;;) {
        ssize_t n = serve_io_read(c, sv->scratch, sizeof sv->scratch, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->events = EPOLLIN;
            return 0;
        }
        if (n > 0 && (c->drained += (size_t)n) <= LINGER_MAX)
            continue;
        return conn_over(c);
    }
}

/* wait: the first read may block (a blocking socket), the others not. */
static int conn_readable(struct server *sv, struct conn *c, int wait)
{
    if (c->draining)
        return conn_drain(sv, c);
    for (;;) {
        unsigned char *buf;
        size_t room;
        if (!isob_conn_reading(&c->c, &buf, &room))
            break;
        if (!buf) {
            buf = sv->scratch;
            if (room > sizeof sv->scratch)
                room = sizeof sv->scratch;
        }
        ssize_t n = serve_io_read(c, buf, room, wait ? 0 : MSG_DONTWAIT);
        wait = 0;
        if (n == 0) {
            /* The client is done sending: a half-received command is
             * dropped, replies already made still go out. */
            c->peer_done = 1;
            isob_conn_eof(&c->c);
            break;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            return conn_over(c);
        }
        isob_conn_input(&c->c, buf, (size_t)n);
        /* A short read drained the socket: another read would only
         * return EAGAIN, which costs a system call per request.  (Not
         * under TLS: a record's bytes may wait in the SSL's buffer.) */
        if ((size_t)n < room && !c->tls)
            break;
    }
    return conn_flush(c);
}

int serve_conn_step(struct server *sv, struct conn *c, unsigned events)
{
    if (c->tls && !c->tls_ready) {
        int r = serve_tls_handshake(c);
        if (r <= 0)
            return r < 0 ? conn_over(c) : 0;
        events |= EPOLLIN;  /* the request may have come with the handshake's end */
    }
    if ((events & EPOLLOUT) && !c->draining && conn_flush(c) != 0)
        return -1;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
        return conn_readable(sv, c, 0);
    return 0;
}

int serve_conn_wait_input(struct server *sv, struct conn *c)
{
    return conn_readable(sv, c, 1);
}
