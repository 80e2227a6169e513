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
 *   isob_serve_feed()    parse and run everything complete in a buffer
 *                        (both src/serve/exec.c)
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

/* A growable byte buffer (a connection's replies). */
struct isob_buf {
    unsigned char *p;
    size_t len, cap;
};

/* 0, or -ENOMEM; on success at least n more bytes fit after len. */
int isob_buf_reserve(struct isob_buf *b, size_t n);
void isob_buf_free(struct isob_buf *b);

/* What the server counts; `stats` reports these (and the store's own). */
struct isob_serve_stats {
    uint64_t cmd_get, cmd_set, cmd_flush;
    uint64_t get_hits, get_misses, delete_hits, delete_misses;
    uint64_t total_items;
    uint64_t curr_connections, total_connections, rejected_connections;
    uint64_t bytes_read, bytes_written;
};

/* What the store in the compartment reports through its stats entry. */
struct isob_kv_stats {
    uint64_t items, bytes, limit_bytes;
};

struct isob_serve;

/* How the server reaches the store.  Each operation finds its message
 * already laid out in s->msg (key, then value, as trusted.h describes for
 * the KV entries) and returns the entry's result.  The default goes
 * through isob_call into the compartment; tests substitute their own to
 * provoke errors the real store rarely gives. */
struct isob_serve_store {
    /* Store or overwrite.  0, or -errno (-ENOSPC: the store is full). */
    long (*set)(struct isob_serve *s, size_t key_len, size_t value_len);
    /* The value's length, with the value at the start of data; or -ENOENT. */
    long (*get)(struct isob_serve *s, size_t key_len);
    /* 0, or -ENOENT. */
    long (*del)(struct isob_serve *s, size_t key_len);
    long (*flush)(struct isob_serve *s);
    long (*stats)(struct isob_serve *s, struct isob_kv_stats *out);
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
    const struct isob_serve_store *store;
    void *store_ctx;                /* for a substituted store */
    size_t max_value;               /* largest value a client may store */
    struct isob_serve_stats st;
    uint64_t started_ns;            /* CLOCK_MONOTONIC at start, for uptime */
};

/* What isob_serve_exec asks of its caller. */
enum { ISOB_SERVE_CONTINUE = 0, ISOB_SERVE_CLOSE = 1 };

/* The store reached through isob_call: the KV entries of trusted.h. */
extern const struct isob_serve_store isob_serve_store_comp;

/* The largest value the server can be told to take: the store's limit
 * less the flags (a little under 16 MiB).  The upper bound of --max-value. */
size_t isob_serve_value_max(void);

/* The default of --max-value: memcached's 1 MiB
 * (ISOB_PROTO_DEFAULT_MAX_VALUE), or isob_serve_value_max() if smaller. */
size_t isob_serve_value_limit(void);

/* Create the compartment of mechanism m with a heap of heap_size bytes and
 * a shared buffer large enough for one max_value value; server_cpu places
 * its second context (-1: unpinned).  0 or -errno. */
int isob_serve_init(struct isob_serve *s, const struct isob_mechanism *m, size_t heap_size,
                    size_t max_value, int server_cpu);
void isob_serve_fini(struct isob_serve *s);

/* Run one parsed command; its reply (if any) is appended to out.  Returns
 * ISOB_SERVE_CONTINUE, ISOB_SERVE_CLOSE (flush out, then close), or
 * -ENOMEM when out could not grow. */
int isob_serve_exec(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out);

/* Parse and run every complete command in in[0..len), stopping early when
 * out holds more than out_limit bytes.  Returns the bytes consumed; sets
 * *close when the connection must end, and *need to the bytes the next
 * command takes in all when that is known (0 otherwise). */
size_t isob_serve_feed(struct isob_serve *s, struct isob_proto *p, const unsigned char *in,
                       size_t len, struct isob_buf *out, size_t out_limit, int *close,
                       size_t *need);

/* `isob serve ...`: argv[0] is "serve".  Returns the exit status. */
int isob_serve_main(int argc, char **argv);

#endif
