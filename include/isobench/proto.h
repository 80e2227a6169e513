/* The memcached text protocol, parsed without any I/O.
 *
 * The parser looks at the unread bytes of one connection and says one of
 * two things: "need more bytes" (and, when it knows, how many in all), or
 * "here is one command, which used the first `consumed` bytes".  Errors are
 * commands too: ISOB_OP_ERROR carries the exact reply line, so the caller
 * never formats protocol errors itself.  Nothing is copied: keys and data
 * point into the caller's buffer and stay valid until it moves those bytes.
 *
 * Supported: get, gets, gat, gats, set, add, replace, append, prepend,
 * cas, incr, decr, touch, delete, flush_all (without a delay), version,
 * stats, verbosity, quit, noreply wherever memcached takes it, and the meta
 * commands mg, ms, md and mn with their common flags (docs/serve.md lists
 * them).  Every other command gets memcached's "ERROR", as does a wrong
 * number of arguments.  A binary-protocol request (first byte 0x80) gets
 * one binary "not supported" response and the connection is closed. */
#ifndef ISOBENCH_PROTO_H
#define ISOBENCH_PROTO_H

#include <stddef.h>
#include <stdint.h>

/* The version a client reads: memcached's protocol level first (clients
 * and conformance testers choose the rules they apply from it), then the
 * server's own name and version: "VERSION 1.6.0 isob-serve/<version>". */
#define ISOB_PROTO_COMPAT_VERSION "1.6.0"
#define ISOB_PROTO_SERVER_NAME "isob-serve/"

/* Longest key, as in memcached. */
#define ISOB_PROTO_KEY_MAX 250
/* A command line with no '\n' in this many bytes ends the connection, as in
 * memcached (whose limit is the same 2048 bytes). */
#define ISOB_PROTO_LINE_MAX 2048
/* get and gets lines may be longer (many keys); this is their bound. */
#define ISOB_PROTO_GET_LINE_MAX (64u * 1024u)
/* Largest value a client may store unless told otherwise (--max-value). */
#define ISOB_PROTO_DEFAULT_MAX_VALUE (1u << 20)
/* Largest --max-value accepted: the whole value must fit one message. */
#define ISOB_PROTO_MAX_VALUE_LIMIT (256u << 20)

enum isob_proto_op {
    ISOB_OP_NONE = 0,    /* bytes of a refused value skipped; nothing to reply */
    ISOB_OP_ERROR,       /* reply `reply` (unless noreply); close after if `close` */
    ISOB_OP_GET,
    ISOB_OP_GETS,
    ISOB_OP_SET,
    ISOB_OP_ADD,
    ISOB_OP_REPLACE,
    ISOB_OP_DELETE,
    ISOB_OP_FLUSH_ALL,
    ISOB_OP_VERSION,
    ISOB_OP_STATS,
    ISOB_OP_STATS_RESET,
    ISOB_OP_VERBOSITY,
    ISOB_OP_QUIT,
    ISOB_OP_CAS,
    ISOB_OP_TOUCH,
    ISOB_OP_GAT,
    ISOB_OP_GATS,
    ISOB_OP_HTTP_GET,    /* --http: GET of `key` (the path); keep_alive says what follows */
    ISOB_OP_APPEND,
    ISOB_OP_PREPEND,
    ISOB_OP_INCR,        /* delta in `delta` */
    ISOB_OP_DECR,
    ISOB_OP_MG,          /* meta commands: their flags in `meta` */
    ISOB_OP_MS,
    ISOB_OP_MD,
    ISOB_OP_MN,
};

/* Return flags a meta command may carry, at most (memcached's limit on a
 * line's tokens). */
#define ISOB_PROTO_META_MAX 24
/* Longest opaque token, its 'O' included, as in memcached. */
#define ISOB_PROTO_OPAQUE_MAX 32

/* A meta command's flags.  ret lists the flags whose values the reply
 * carries, in the client's order, as memcached writes them: for mg any of
 * f t c k s O, for ms and md any of c k O. */
struct isob_proto_meta {
    unsigned char ret[ISOB_PROTO_META_MAX];
    size_t nret;
    int value;                   /* mg v: the reply carries the value (VA) */
    int quiet;                   /* q: no reply for a miss (mg) or a success (ms, md) */
    int touch;                   /* mg T: exptime is the new expiry */
    int has_cas;                 /* ms, md C: cas is the unique the item must have */
    char mode;                   /* ms M: 'S' set, 'E' add, 'A' append, 'P' prepend, 'R' replace */
    const unsigned char *opaque; /* O: echoed as it came */
    size_t opaque_len;
};

/* One connection's parser state: what must survive between two reads. */
struct isob_proto {
    size_t max_value;    /* values larger than this are refused */
    uint64_t swallow;    /* bytes of a refused value still to be skipped */
    size_t scanned;      /* bytes of the line now arriving known to hold no '\n':
                            the caller passes the same unconsumed bytes again,
                            with more, until a command is consumed */
    int refuse;          /* set by the caller: refuse the next storage command's
                            value with "SERVER_ERROR out of memory storing
                            object" (it has no memory to hold it) */
};

struct isob_proto_cmd {
    enum isob_proto_op op;
    size_t consumed;             /* input bytes this command used (always > 0) */
    int noreply;                 /* the client asked for no reply */
    int close;                   /* ISOB_OP_ERROR: close the connection after the reply */
    int unlink;                  /* ISOB_OP_ERROR: delete `key` (a refused set must not
                                    leave the old value behind, as in memcached) */
    const char *reply;           /* ISOB_OP_ERROR: the reply, "\r\n" included */
    size_t reply_len;            /* ISOB_OP_ERROR: its length when it holds NUL bytes, else 0 */
    int refused;                 /* ISOB_OP_ERROR: a storage command whose value was
                                    refused, ISOB_PROTO_TOO_LARGE or ISOB_PROTO_NO_MEMORY */
    const unsigned char *key;    /* storage, delete, touch, get (first key) */
    size_t key_len;
    const unsigned char *keys;   /* get, gets, gat, gats: the keys, separated by spaces */
    size_t keys_len;
    uint32_t flags;              /* storage */
    int64_t exptime;             /* storage, touch, gat, gats: as the client sent it */
    uint64_t cas;                /* cas: the unique the item must still have */
    uint32_t bytes;              /* storage: bytes of data */
    const unsigned char *data;   /* storage: the data (its "\r\n" checked and excluded) */
    int keep_alive;              /* ISOB_OP_HTTP_GET: the connection stays open after it */
    uint64_t delta;              /* incr, decr */
    struct isob_proto_meta meta; /* mg, ms, md */
};

/* Why a storage command's value was refused (isob_proto_cmd.refused). */
enum { ISOB_PROTO_TOO_LARGE = 1, ISOB_PROTO_NO_MEMORY = 2 };

/* Results of isob_proto_parse. */
enum { ISOB_PROTO_MORE = 0, ISOB_PROTO_CMD = 1 };

void isob_proto_init(struct isob_proto *p, size_t max_value);

/* Parse the first command of in[0..len).  Returns ISOB_PROTO_CMD with *cmd
 * filled in, or ISOB_PROTO_MORE when the command is incomplete; then *need
 * is the number of bytes the whole command takes (so that the caller can
 * make room for it), or 0 when that is not known yet (a line in progress). */
int isob_proto_parse(struct isob_proto *p, const unsigned char *in, size_t len,
                     struct isob_proto_cmd *cmd, size_t *need);

/* --- HTTP/1.x GET (isob serve --http; src/serve/http.c) ---
 *
 * The same contract as isob_proto_parse, for requests instead of commands:
 * a whole request head gives ISOB_OP_HTTP_GET (key: the path, at most
 * ISOB_PROTO_KEY_MAX bytes) or ISOB_OP_ERROR with the status line to send
 * and close set (another method, a body, another version, a malformed or
 * too long head).  *need is always 0: a head is read until its empty line,
 * at most ISOB_HTTP_HEAD_MAX bytes. */
#define ISOB_HTTP_HEAD_MAX 8192
int isob_http_parse(struct isob_proto *p, const unsigned char *in, size_t len,
                    struct isob_proto_cmd *cmd, size_t *need);

/* Walk the keys of a get or gets: start with *pos = cmd->keys; each call
 * yields the next key and returns 1, or returns 0 at the end.  The parser
 * has already checked every key. */
int isob_proto_next_key(const struct isob_proto_cmd *cmd, const unsigned char **pos,
                        const unsigned char **key, size_t *key_len);

#endif
