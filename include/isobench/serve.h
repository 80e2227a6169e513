/* `isob serve`: a memcached text-protocol server whose store lives in one
 * compartment of a chosen mechanism.
 *
 * The server is the untrusted side.  Every set, get, delete and flush is
 * one isob_call with the message in the compartment's shared buffer, so
 * the throughput of `isob serve -m M` against `-m direct` (and against
 * memcached itself) is what mechanism M costs a real workload.
 *
 * The pieces, so that all but the last can be tested without sockets:
 *   proto.h              parse bytes into commands (pure; src/serve/proto.c)
 *   isob_serve_exec()    run one command against the store, append the reply
 *                        (src/serve/exec.c)
 *   struct isob_conn     one connection's state machine: bytes in, replies
 *                        out, back-pressure and bounded buffers
 *                        (src/serve/conn.c); the fuzzer drives it too
 *   isob_serve_main()    the epoll loop around them (src/serve/server.c) */
#ifndef ISOBENCH_SERVE_H
#define ISOBENCH_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "isobench/mechanism.h"
#include "isobench/proto.h"

/* The port memcached does not use, so both can run side by side. */
#define ISOB_SERVE_DEFAULT_PORT 11311
/* Loopback only unless told otherwise: this is a benchmark, not a service. */
#define ISOB_SERVE_DEFAULT_BIND "127.0.0.1"
/* Open connections at most; more are refused with a reply saying so. */
#define ISOB_SERVE_DEFAULT_MAX_CONNS 1024
/* Trusted heap of the compartment, in MiB (the store's memory). */
#define ISOB_SERVE_DEFAULT_HEAP_MB 64
/* Bytes a stored value carries in front of the client's data: the
 * client's 32-bit flags, little-endian, so that they round-trip. */
#define ISOB_SERVE_FLAGS_BYTES 4

/* Memory for connection buffers, shared by every connection of a server:
 * what they hold together is capped, so that no number of clients and no
 * request can make the server grow without bound (memcached's values live
 * in its item memory; ours wait in these buffers until they are complete).
 * Buffers of ISOB_SERVE_BUF_SMALL bytes are kept in a small pool for the
 * next connection; larger ones go back to the system when released. */
#define ISOB_SERVE_BUF_SMALL (16u * 1024u)
#define ISOB_SERVE_POOL 32   /* small buffers kept for reuse, at most */
/* Buffers larger than small may use all but this fraction of the cap
 * (1/8): the rest stays for replies, so that a request refused for want of
 * memory is told so instead of having its connection ended. */
#define ISOB_SERVE_MEM_RESERVE 8

struct isob_serve_mem {
    size_t limit;        /* bytes all connection buffers may hold together */
    size_t used;         /* bytes they hold now, the pool included */
    size_t peak;         /* the most they ever held */
    uint64_t refusals;   /* requests refused, or connections ended, for want of it */
    unsigned pooled;
    unsigned char *pool[ISOB_SERVE_POOL];
};

/* A growable byte buffer (a connection's replies), charged to mem (none:
 * not counted, not capped). */
struct isob_buf {
    unsigned char *p;
    size_t len, cap;
    struct isob_serve_mem *mem;
};

/* 0, or -ENOMEM (the system's, or mem's limit); on success at least n more
 * bytes fit after len. */
int isob_buf_reserve(struct isob_buf *b, size_t n);
/* Give the memory back (to the pool when it is a small buffer). */
void isob_buf_free(struct isob_buf *b);

/* Resize the buffer *p of capacity *cap, whose first `keep` bytes are in
 * use, to hold `want` bytes (0: release it), charged to m (may be NULL).
 * 0, or -ENOMEM with the buffer as it was. */
int isob_serve_buf_resize(struct isob_serve_mem *m, unsigned char **p, size_t *cap, size_t keep,
                          size_t want);

void isob_serve_mem_init(struct isob_serve_mem *m, size_t limit);
/* Free the pool; every buffer must have been released. */
void isob_serve_mem_fini(struct isob_serve_mem *m);

/* What the server counts; `stats` reports these (and the store's own). */
struct isob_serve_stats {
    uint64_t cmd_get, cmd_set, cmd_flush, cmd_touch;
    uint64_t get_hits, get_misses, delete_hits, delete_misses;
    uint64_t touch_hits, touch_misses, cas_hits, cas_misses, cas_badval;
    uint64_t incr_hits, incr_misses, decr_hits, decr_misses;
    uint64_t total_items;
    uint64_t store_too_large, store_no_memory;
    uint64_t curr_connections, total_connections, rejected_connections;
    uint64_t bytes_read, bytes_written;
};

/* What the store in the compartment reports through its stats entry. */
struct isob_kv_stats {
    uint64_t items, bytes, limit_bytes;
    uint64_t evictions, reclaimed;
};

struct isob_serve;

/* How the server reaches the store: one entry of trusted.h, with its
 * message already laid out in s->msg; returns the entry's result.  The
 * default (isob_serve_call_comp) is isob_call into the compartment; tests
 * substitute their own to provoke errors the real store rarely gives. */
typedef long (*isob_serve_call_fn)(struct isob_serve *s, unsigned entry);

/* The time, for expiry: monotonic nanoseconds (the store's clock counts
 * seconds from the server's start with them) and Unix seconds (for the
 * absolute exptimes of the protocol).  Tests substitute a fake. */
struct isob_serve_time {
    uint64_t mono_ns;
    int64_t unix_s;
};
typedef void (*isob_serve_clock_fn)(struct isob_serve_time *now);

/* The store's clock reads this at the server's start, so that 1 is always
 * in the past (a negative exptime) and 0 keeps its meaning of "never". */
#define ISOB_SERVE_TIME_BASE 2
/* memcached's bound between relative and absolute exptimes: 30 days. */
#define ISOB_SERVE_RELATIVE_MAX (60 * 60 * 24 * 30)

/* --session rollback: what the workers' rollbacks did, summed over every
 * worker (src/serve/rollback.c), in memory the workers share. */
struct isob_serve_rollback {
    char method[24];                /* uffd, softdirty or fork */
    uint64_t workers;
    uint64_t sessions;              /* sessions rolled back (fork: workers replaced) */
    uint64_t pages, ranges;         /* pages copied back, in ranges of adjacent pages */
    uint64_t ns;                    /* CPU time spent rolling back (fork: in fork()) */
    uint64_t map_ns;                /* of which closing descriptors and checking the map */
    uint64_t unmapped;              /* mappings a session made, undone */
    uint64_t failed;                /* workers that could not roll back, replaced */
    uint64_t verified, mismatched;  /* --rollback-verify: rollbacks compared, pages unequal */
};

struct isob_serve {
    struct isob_comp *comp;
    struct isob_msg *msg;           /* the compartment's shared buffer */
    /* A compartment that dies under a request is replaced by a fresh one
     * made from this spec (its stored data is lost, and stderr says so);
     * the request gets "SERVER_ERROR compartment " + comp_died. */
    struct isob_comp_spec spec;
    char comp_died[ISOB_COMP_WHY_LEN];
    int restart_failing;            /* the last restart failed (logged once) */
    isob_serve_call_fn call;
    void *store_ctx;                /* for a substituted call */
    isob_serve_clock_fn clock;
    size_t max_value;               /* largest value a client may store */
    int evict;                      /* a full store evicts (1) or refuses (0) */
    struct isob_serve_stats st;
    struct isob_serve_mem mem;      /* connection buffers */
    uint64_t started_ns;            /* monotonic time at start, for uptime and expiry */
    int64_t epoch_unix;             /* the Unix time the store's clock counts from */
    uint32_t store_now;             /* the time last given to the store */
    uint64_t evictions_base, reclaimed_base; /* the store's counters at stats reset */
    int http;                       /* requests are HTTP/1.x GETs (--http), else memcached's */
    const char *session;            /* how sessions share this state (--session), for stats */
    const struct isob_serve_rollback *rollback; /* --session rollback's totals, for stats */
    uint64_t startup_items;         /* start-up state stored (isob_serve_startup) */
    uint64_t preloaded;             /* loadgen's keys stored at start-up */
    uint64_t startup_ns;            /* how long isob_serve_startup took */
    /* --http --monitor (src/serve/monitor.c): a GET reads its document from
     * a file through this, as a web server does, instead of from the store:
     * the document's bytes into buf (at most cap), or -errno (-ENOENT: no
     * such document; -EPERM: the monitor refused). */
    long (*doc_read)(void *ctx, const char *path, size_t path_len, unsigned char *buf, size_t cap);
    void *doc_ctx;
    unsigned char *doc_buf;         /* its buffer, doc_cap bytes */
    size_t doc_cap;
};

/* --- start-up (src/serve/startup.c) ---------------------------------------
 *
 * What a server holds before its first client: the state every session
 * starts from, which --session says how sessions share.  It is stored
 * through the executor, as a client's sets would be, so that a session
 * can change it as it could change anything else it was given. */

/* --startup-mb: state built at start-up, as an interpreter builds its own
 * (the PHP case of lwC): items "startup_NNNNNN" that fill one record of
 * ISOB_SERVE_STARTUP_RECORD bytes of the store each, so that N MiB of it
 * are N * 16 items. */
#define ISOB_SERVE_STARTUP_RECORD 65536u
#define ISOB_SERVE_STARTUP_KEY "startup_%06zu"
#define ISOB_SERVE_STARTUP_KEY_LEN 14u
/* A start-up item's value: the record less its header (16 bytes, see
 * src/trusted/kv.h), key and flags. */
#define ISOB_SERVE_STARTUP_VALUE (ISOB_SERVE_STARTUP_RECORD - 16u - ISOB_SERVE_STARTUP_KEY_LEN - \
                                  ISOB_SERVE_FLAGS_BYTES)
/* The most --startup-mb takes (the keys have six digits). */
#define ISOB_SERVE_STARTUP_MAX_MB 16384u

struct isob_serve_startup {
    size_t preload_keys;   /* loadgen's keys (isob_lg_key) to store, with its values */
    size_t preload_value;  /* bytes of each (loadgen --value-size) */
    size_t startup_mb;     /* MiB of start-up items */
    size_t doc_bytes;      /* --http: bytes of the document at / (isob_http_doc); 0: 45 */
};

/* Heap the store needs for what su stores, beyond --heap-mb. */
size_t isob_serve_startup_heap(const struct isob_serve_startup *su);

/* Byte j of start-up item i, j from 0 to n - 1: a function a client can
 * recompute, to check that the item is as start-up made it. */
void isob_serve_startup_value(size_t i, unsigned char *v, size_t n);

/* Store what su says, and for --http (s->http) the document of
 * su->doc_bytes (isob_http_doc; ISOB_HTTP_DOC by default) under "/".
 * 0 or a negative errno (-ENOSPC: the store had no room). */
int isob_serve_startup(struct isob_serve *s, const struct isob_serve_startup *su);

/* What isob_serve_exec asks of its caller. */
enum {
    ISOB_SERVE_CONTINUE = 0,  /* done; go on with the next command */
    ISOB_SERVE_CLOSE = 1,     /* send what is in out, then close */
    ISOB_SERVE_PAUSE = 2,     /* a get stopped with replies to send first: run the same
                                 command again, with *resume as it was left, once out
                                 holds no more than out_limit */
    ISOB_SERVE_DRAIN = 3,     /* as PAUSE, but out could not grow for the next value:
                                 run it again once out is empty */
};

/* The default call: isob_call into s->comp. */
long isob_serve_call_comp(struct isob_serve *s, unsigned entry);

/* The largest value the server can be told to take: the store's limit
 * less the flags (a little under 16 MiB).  The upper bound of --max-value. */
size_t isob_serve_value_max(void);

/* The default of --max-value: memcached's 1 MiB
 * (ISOB_PROTO_DEFAULT_MAX_VALUE), or isob_serve_value_max() if smaller. */
size_t isob_serve_value_limit(void);

/* The input a connection may hold at most: the longest get line, or a
 * storage command's line with the largest value. */
size_t isob_serve_in_max(size_t max_value);

/* Create the compartment of mechanism m with a heap of heap_size bytes and
 * a shared buffer large enough for one max_value value; server_cpu places
 * its second context (-1: unpinned).  Connection buffers are capped at
 * buffer_limit bytes (SIZE_MAX: no cap).  Evicts when full; set s->evict to
 * 0 before the first command to refuse instead.  0 or -errno. */
int isob_serve_init(struct isob_serve *s, const struct isob_mechanism *m, size_t heap_size,
                    size_t max_value, int server_cpu, size_t buffer_limit);
void isob_serve_fini(struct isob_serve *s);

/* Run one parsed command; its reply (if any) is appended to out.  A get
 * (gets, gat, gats) stops early with ISOB_SERVE_PAUSE once out holds more
 * than out_limit bytes and keys remain, or with ISOB_SERVE_DRAIN when out
 * cannot grow for the next value while it holds replies to send; *resume
 * (0 for a new command) says where to go on.  Returns one of those, or
 * ISOB_SERVE_CONTINUE, ISOB_SERVE_CLOSE, or -ENOMEM when not even an error
 * reply fitted in out. */
int isob_serve_exec(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out,
                    size_t out_limit, size_t *resume);

/* --- one connection, without sockets (src/serve/conn.c) -------------------- */

/* Replies waiting to be sent beyond this stop a connection: its input is
 * not read and a multi-get does not fetch its next value until they drain,
 * so a client that sends without reading cannot make the server grow.  A
 * connection holds at most this plus one reply (a value of up to
 * --max-value) of output. */
#define ISOB_CONN_OUT_HIGH (64u * 1024u)

struct isob_conn {
    struct isob_serve *s;
    struct isob_proto proto;
    unsigned char *in;        /* input not yet run (the start of a command, or commands
                                 waiting behind replies); NULL when there is none */
    size_t in_len, in_cap;
    struct isob_buf out;      /* replies not yet sent, from out_sent on */
    size_t out_sent;
    int paused;               /* the command at in[0] is a get stopped at resume:
                                 ISOB_SERVE_PAUSE or ISOB_SERVE_DRAIN, else 0 */
    size_t resume;
    const char *last;         /* a reply that needs no memory, sent after out; then close */
    size_t last_sent;
    int closing;              /* run nothing more: send what is left, then close */
};

/* What a connection waits for (isob_conn_wants). */
enum { ISOB_CONN_READ = 1, ISOB_CONN_WRITE = 2, ISOB_CONN_DONE = 4 };

void isob_conn_init(struct isob_conn *c, struct isob_serve *s);
/* Release every buffer; the connection holds nothing afterwards. */
void isob_conn_fini(struct isob_conn *c);

/* Whether to read now, and where.  0: not now (replies are backed up, or
 * the connection is closing).  1: read at most *room bytes, into *buf when
 * it is not NULL (the connection's own buffer, which holds the start of a
 * command, so that a large value is read in place), else into any memory
 * of the caller's; then pass them to isob_conn_input. */
int isob_conn_reading(struct isob_conn *c, unsigned char **buf, size_t *room);

/* n bytes arrived at p, which isob_conn_reading gave or which is the
 * caller's (it is not kept).  Runs every complete command. */
void isob_conn_input(struct isob_conn *c, const unsigned char *p, size_t n);

/* The client closed its side: an unfinished command is dropped. */
void isob_conn_eof(struct isob_conn *c);

/* The bytes to send next; NULL (and *n = 0) when there are none. */
const unsigned char *isob_conn_output(struct isob_conn *c, size_t *n);

/* n of the bytes isob_conn_output gave were sent; commands that waited for
 * the replies to drain run now. */
void isob_conn_sent(struct isob_conn *c, size_t n);

/* ISOB_CONN_READ and/or ISOB_CONN_WRITE, or ISOB_CONN_DONE when all is
 * sent and the connection is to be closed. */
unsigned isob_conn_wants(const struct isob_conn *c);

/* `isob serve ...`: argv[0] is "serve".  Returns the exit status. */
int isob_serve_main(int argc, char **argv);

#endif
