/* The minimal HTTP/1.x of `isob serve --http` (see include/isobench/proto.h):
 * GET requests only, parsed without I/O into the same command records as
 * the memcached protocol, so that the connection state machine, its
 * bounds on memory and the fuzzer serve both.
 *
 * A request is its head: the request line and header lines up to an empty
 * line.  What a GET needs is read from it (the path, and whether the
 * connection stays open); everything the server does not serve is refused
 * with a status line and the connection closed, so that the stream never
 * goes out of step: a method other than GET, a body, a head longer than
 * ISOB_HTTP_HEAD_MAX, a version other than 1.0 and 1.1. */
#include <string.h>
#include <strings.h>

#include "isobench/proto.h"

/* The refusals; each closes the connection. */
static const char R_BAD_REQUEST[] =
    "HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
static const char R_METHOD[] = "HTTP/1.0 405 Method Not Allowed\r\nAllow: GET\r\nContent-Length: 0\r\n"
                               "Connection: close\r\n\r\n";
static const char R_URI_TOO_LONG[] =
    "HTTP/1.0 414 URI Too Long\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
static const char R_HEAD_TOO_LARGE[] = "HTTP/1.0 431 Request Header Fields Too Large\r\n"
                                       "Content-Length: 0\r\nConnection: close\r\n\r\n";
static const char R_VERSION[] =
    "HTTP/1.0 505 HTTP Version Not Supported\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

static int refuse(struct isob_proto_cmd *cmd, const char *reply, size_t consumed)
{
    cmd->op = ISOB_OP_ERROR;
    cmd->reply = reply;
    cmd->close = 1;
    cmd->consumed = consumed;
    return ISOB_PROTO_CMD;
}

/* The end of the head in in[0..len): the byte after its empty line, or 0.
 * A line ends at "\n", with or without "\r" before it. */
static size_t head_end(const unsigned char *in, size_t len, size_t from)
{
    for (size_t i = from; i < len; i++) {
        if (in[i] != '\n')
            continue;
        if (i >= 1 && in[i - 1] == '\n')
            return i + 1;
        if (i >= 2 && in[i - 1] == '\r' && in[i - 2] == '\n')
            return i + 1;
    }
    return 0;
}

/* The next line of [*p, end), without its "\r\n"; 0 at the end. */
static int next_line(const unsigned char **p, const unsigned char *end, const unsigned char **line,
                     size_t *n)
{
    if (*p >= end)
        return 0;
    const unsigned char *eol = memchr(*p, '\n', (size_t)(end - *p));
    if (!eol)
        eol = end;
    *line = *p;
    *n = (size_t)(eol - *p);
    if (*n && (*line)[*n - 1] == '\r')
        (*n)--;
    *p = eol < end ? eol + 1 : end;
    return 1;
}

static int word_is(const unsigned char *p, size_t n, const char *w)
{
    return n == strlen(w) && strncasecmp((const char *)p, w, n) == 0;
}

/* The tokens of a Connection header: keep-alive and close, by the rules of
 * RFC 9110 (a comma-separated list, case-insensitive). */
static void connection_tokens(const unsigned char *v, size_t n, int *keep, int *close)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
            i++;
        if (word_is(v + s, i - s, "keep-alive"))
            *keep = 1;
        else if (word_is(v + s, i - s, "close"))
            *close = 1;
    }
}

int isob_http_parse(struct isob_proto *p, const unsigned char *in, size_t len,
                    struct isob_proto_cmd *cmd, size_t *need)
{
    memset(cmd, 0, sizeof *cmd);
    *need = 0;
    /* Resume the search a little before where the last one stopped, so
     * that an empty line split across two reads is found. */
    size_t from = p->scanned > 3 ? p->scanned - 3 : 0;
    size_t end = head_end(in, len < ISOB_HTTP_HEAD_MAX ? len : ISOB_HTTP_HEAD_MAX, from);
    if (!end) {
        if (len >= ISOB_HTTP_HEAD_MAX) {
            p->scanned = 0;
            return refuse(cmd, R_HEAD_TOO_LARGE, len);
        }
        p->scanned = len;
        return ISOB_PROTO_MORE;
    }
    p->scanned = 0;
    const unsigned char *q = in, *stop = in + end, *line;
    size_t n;
    /* Empty lines before the request line are skipped, as RFC 9112 asks. */
    do {
        if (!next_line(&q, stop, &line, &n))
            return refuse(cmd, R_BAD_REQUEST, end);
    } while (n == 0);
    /* method SP target SP version, single spaces. */
    const unsigned char *sp1 = memchr(line, ' ', n);
    const unsigned char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(line + n - sp1 - 1)) : NULL;
    if (!sp1 || !sp2 || sp2 == sp1 + 1 || sp1 == line)
        return refuse(cmd, R_BAD_REQUEST, end);
    const unsigned char *target = sp1 + 1, *version = sp2 + 1;
    size_t target_len = (size_t)(sp2 - target), version_len = (size_t)(line + n - version);
    if (memchr(version, ' ', version_len))
        return refuse(cmd, R_BAD_REQUEST, end);
    int minor;
    if (version_len == 8 && memcmp(version, "HTTP/1.0", 8) == 0)
        minor = 0;
    else if (version_len == 8 && memcmp(version, "HTTP/1.1", 8) == 0)
        minor = 1;
    else if (version_len >= 5 && memcmp(version, "HTTP/", 5) == 0)
        return refuse(cmd, R_VERSION, end);
    else
        return refuse(cmd, R_BAD_REQUEST, end);
    if ((size_t)(sp1 - line) != 3 || memcmp(line, "GET", 3) != 0)
        return refuse(cmd, R_METHOD, end);
    if (target[0] != '/')
        return refuse(cmd, R_BAD_REQUEST, end);
    if (target_len > ISOB_PROTO_KEY_MAX)
        return refuse(cmd, R_URI_TOO_LONG, end);
    for (size_t i = 0; i < target_len; i++)
        if (target[i] < 0x21 || target[i] == 0x7f)
            return refuse(cmd, R_BAD_REQUEST, end);
    int keep = 0, close = 0;
    while (next_line(&q, stop, &line, &n) && n) {
        const unsigned char *colon = memchr(line, ':', n);
        if (!colon || colon == line)
            return refuse(cmd, R_BAD_REQUEST, end);
        size_t name_len = (size_t)(colon - line);
        const unsigned char *v = colon + 1;
        size_t vn = (size_t)(line + n - v);
        while (vn && (*v == ' ' || *v == '\t')) {
            v++;
            vn--;
        }
        while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
            vn--;
        if (word_is(line, name_len, "Connection")) {
            connection_tokens(v, vn, &keep, &close);
        } else if (word_is(line, name_len, "Transfer-Encoding") ||
                   (word_is(line, name_len, "Content-Length") && !(vn == 1 && v[0] == '0'))) {
            /* A GET with a body: its bytes would be read as the next
             * request, so the connection ends here. */
            return refuse(cmd, R_BAD_REQUEST, end);
        }
    }
    cmd->op = ISOB_OP_HTTP_GET;
    cmd->key = target;
    cmd->key_len = target_len;
    cmd->keep_alive = !close && (minor == 1 || keep);
    cmd->consumed = end;
    return ISOB_PROTO_CMD;
}
