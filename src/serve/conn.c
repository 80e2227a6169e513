/* One connection of `isob serve` as a state machine without sockets
 * (serve.h): bytes in, replies out.  The epoll loop (server.c) and the
 * fuzzer (tests/fuzz) drive these same calls, so what the fuzzer finds is
 * what a client could reach.
 *
 * Memory is bounded per connection and in all:
 * - a connection holds input only for the start of a command (at most the
 *   longest get line, or a storage line with its value) or for commands
 *   that wait behind backed-up replies; bytes that form whole commands are
 *   run straight from the caller's read buffer and never copied;
 * - a storage command's whole size is taken from the server's buffer cap
 *   when its line arrives (as memcached allocates the item), and refused
 *   with "SERVER_ERROR out of memory storing object" when the cap has no
 *   room, its data then skipped as it arrives;
 * - replies stop being made once more than ISOB_CONN_OUT_HIGH bytes wait
 *   to be sent: input is no longer read, and a multi-get fetches its next
 *   value only after they drained, so its replies stream one value at a
 *   time instead of being built whole;
 * - buffers go back as soon as they are empty, so an idle connection holds
 *   none, and a closed one nothing at all. */
#include <string.h>

#include "isobench/serve.h"

/* Last replies of a connection that has no memory left even for an error
 * line in its output buffer; they need none. */
static const char R_READ_OOM[] = "SERVER_ERROR out of memory reading request\r\n";
static const char R_OOM[] = "SERVER_ERROR out of memory\r\n";

static size_t pending(const struct isob_conn *c)
{
    return c->out.len - c->out_sent;
}

/* Replies wait to be sent before anything more may run: more than the
 * high mark of them, or any at all while a get waits for room. */
static int blocked(const struct isob_conn *c)
{
    return pending(c) > ISOB_CONN_OUT_HIGH || (c->paused == ISOB_SERVE_DRAIN && pending(c));
}

static void release_input(struct isob_conn *c)
{
    isob_serve_buf_resize(&c->s->mem, &c->in, &c->in_cap, 0, 0);
    c->in_len = 0;
    c->paused = 0;
}

/* End the connection with a reply that needs no memory, after what is
 * already in its output.  Its input is released by the caller once it no
 * longer walks it (conn_process, isob_conn_input, isob_conn_reading). */
static void conn_fail(struct isob_conn *c, const char *last)
{
    c->s->mem.refusals++;
    c->last = last;
    c->last_sent = 0;
    c->closing = 1;
}

/* Input capacity for at least `want` bytes, the bytes held kept. */
static int conn_hold(struct isob_conn *c, size_t want)
{
    if (want <= c->in_cap)
        return 0;
    return isob_serve_buf_resize(&c->s->mem, &c->in, &c->in_cap, c->in_len, want);
}

void isob_conn_init(struct isob_conn *c, struct isob_serve *s)
{
    memset(c, 0, sizeof *c);
    c->s = s;
    c->out.mem = &s->mem;
    isob_proto_init(&c->proto, s->max_value);
}

void isob_conn_fini(struct isob_conn *c)
{
    release_input(c);
    isob_buf_free(&c->out);
    c->out_sent = 0;
}

/* Run the commands of p[0..n) until the first incomplete one (*need then
 * as the parser said), or until replies back up, a get pauses or the
 * connection is to close.  Returns the bytes used. */
static size_t conn_run(struct isob_conn *c, const unsigned char *p, size_t n, size_t *need)
{
    size_t off = 0;
    *need = 0;
    /* What was sent leaves the output buffer, so that it never holds more
     * than the high mark and one reply. */
    if (c->out_sent) {
        memmove(c->out.p, c->out.p + c->out_sent, pending(c));
        c->out.len -= c->out_sent;
        c->out_sent = 0;
    }
    while (off < n && !c->closing && !blocked(c)) {
        struct isob_proto_cmd cmd;
        int got = c->s->http ? isob_http_parse(&c->proto, p + off, n - off, &cmd, need)
                             : isob_proto_parse(&c->proto, p + off, n - off, &cmd, need);
        if (got == ISOB_PROTO_MORE)
            break;
        size_t resume = c->paused ? c->resume : 0;
        int r = isob_serve_exec(c->s, &cmd, &c->out, ISOB_CONN_OUT_HIGH, &resume);
        if (r == ISOB_SERVE_PAUSE || r == ISOB_SERVE_DRAIN) {
            /* The get stays at the front of the input, to be parsed again
             * and go on from resume. */
            c->paused = r;
            c->resume = resume;
            break;
        }
        c->paused = 0;
        off += cmd.consumed;
        if (r == ISOB_SERVE_CLOSE) {
            c->closing = 1;
        } else if (r < 0) {
            conn_fail(c, R_OOM);
            return off;
        }
    }
    return off;
}

/* After a run stopped at an incomplete command: room for the rest of it.
 * Returns 1 when the commands must run again (a value refused for want of
 * memory: the parser now says so and skips it), else 0. */
static int conn_make_room(struct isob_conn *c, size_t need)
{
    if (need) {
        if (conn_hold(c, need) == 0)
            return 0;
        c->s->mem.refusals++;
        c->proto.refuse = 1;
        return 1;
    }
    /* A line still arriving: the parser ends it at ISOB_PROTO_GET_LINE_MAX,
     * so this doubling stays below twice that. */
    if (c->in_len == c->in_cap && conn_hold(c, c->in_cap ? 2 * c->in_cap : 1) != 0)
        conn_fail(c, R_READ_OOM);
    return 0;
}

/* Run what the connection's own buffer holds. */
static void conn_process(struct isob_conn *c)
{
    size_t need = 0;
    for (;;) {
        size_t used = conn_run(c, c->in, c->in_len, &need);
        if (used) {
            c->in_len -= used;
            memmove(c->in, c->in + used, c->in_len);
        }
        if (c->closing || c->paused || blocked(c) || c->in_len == 0)
            break;
        if (!conn_make_room(c, need))
            break;
    }
    if (c->closing && !c->paused) {
        release_input(c);
        return;
    }
    /* Give back what is not needed now: all of it when empty, and a large
     * buffer (grown for a value) once only a small command start is left. */
    if (c->in_len == 0)
        release_input(c);
    if (c->out.p && c->out.len == 0 && !c->paused)
        isob_buf_free(&c->out);
    else if (c->in_cap > ISOB_SERVE_BUF_SMALL && c->in_len <= ISOB_SERVE_BUF_SMALL / 2 &&
             need <= ISOB_SERVE_BUF_SMALL / 2)
        isob_serve_buf_resize(&c->s->mem, &c->in, &c->in_cap, c->in_len, c->in_len);
}

int isob_conn_reading(struct isob_conn *c, unsigned char **buf, size_t *room)
{
    *buf = NULL;
    *room = 0;
    if (c->closing || c->paused || blocked(c))
        return 0;
    if (c->in_len == 0) {
        *room = SIZE_MAX;
        return 1;
    }
    if (c->in_len == c->in_cap) {
        conn_make_room(c, 0);
        if (c->closing) {
            release_input(c);
            return 0;
        }
    }
    *buf = c->in + c->in_len;
    *room = c->in_cap - c->in_len;
    return 1;
}

void isob_conn_input(struct isob_conn *c, const unsigned char *p, size_t n)
{
    c->s->st.bytes_read += n;
    if (c->closing || n == 0)
        return;
    if (c->in && p == c->in + c->in_len) {
        c->in_len += n;
        conn_process(c);
        return;
    }
    if (c->in_len) {
        if (conn_hold(c, c->in_len + n) != 0) {
            conn_fail(c, R_READ_OOM);
            release_input(c);
            return;
        }
        memcpy(c->in + c->in_len, p, n);
        c->in_len += n;
        conn_process(c);
        return;
    }
    /* Nothing held: run straight from the caller's bytes, and keep only
     * what is left. */
    for (;;) {
        size_t need;
        size_t used = conn_run(c, p, n, &need);
        p += used;
        n -= used;
        if (n == 0 || c->closing)
            return;
        if (need && !c->paused && !blocked(c)) {
            /* The start of a storage command: hold all of it, or refuse
             * its value and run again. */
            if (conn_hold(c, need) != 0) {
                c->s->mem.refusals++;
                c->proto.refuse = 1;
                continue;
            }
        } else if (conn_hold(c, n) != 0) {
            conn_fail(c, R_READ_OOM);
            return;
        }
        memcpy(c->in, p, n);
        c->in_len = n;
        return;
    }
}

void isob_conn_eof(struct isob_conn *c)
{
    /* Input is read only when nothing waits, and all that was complete has
     * run: what is held is an unfinished command, dropped as memcached
     * drops it.  Replies already made still go out. */
    c->closing = 1;
    release_input(c);
}

const unsigned char *isob_conn_output(struct isob_conn *c, size_t *n)
{
    if (pending(c)) {
        *n = pending(c);
        return c->out.p + c->out_sent;
    }
    if (c->last && c->last[c->last_sent]) {
        *n = strlen(c->last + c->last_sent);
        return (const unsigned char *)c->last + c->last_sent;
    }
    *n = 0;
    return NULL;
}

void isob_conn_sent(struct isob_conn *c, size_t n)
{
    c->s->st.bytes_written += n;
    if (pending(c)) {
        c->out_sent += n;
        if (c->out_sent == c->out.len) {
            c->out.len = c->out_sent = 0;
            /* Commands waiting (a paused get, or input behind the replies)
             * fill it again at once; otherwise give it back. */
            if (!c->paused && !c->in_len)
                isob_buf_free(&c->out);
        }
    } else if (c->last) {
        c->last_sent += n;
    }
    if (!c->closing && !blocked(c) && (c->paused || c->in_len))
        conn_process(c);
}

unsigned isob_conn_wants(const struct isob_conn *c)
{
    if (pending(c) || (c->last && c->last[c->last_sent]))
        return ISOB_CONN_WRITE | (c->closing || c->paused || blocked(c) ? 0 : ISOB_CONN_READ);
    if (c->closing)
        return ISOB_CONN_DONE;
    return ISOB_CONN_READ;
}
