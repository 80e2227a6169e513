/* What the files of `isob serve` that touch sockets share (server.c: the
 * options and the epoll loop; sock.c: one connection's socket; session.c:
 * the fork and per-connection sessions; prefork.c and rollback.c: the
 * rollback and prefork workers).  Not a public header. */
#ifndef ISOBENCH_SERVE_SERVER_IMPL_H
#define ISOBENCH_SERVE_SERVER_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "isobench/serve.h"

/* The shared read buffer: most requests arrive whole within it. */
#define SERVE_SCRATCH_BYTES (64u * 1024u)

/* How sessions (connections) share the state built at start-up. */
enum serve_session {
    SESSION_SHARED = 0,  /* one process, one store: what a session did, the next one sees */
    SESSION_FORK,        /* a fresh process per connection, which starts up by itself */
    SESSION_ROLLBACK,    /* prefork workers, each serving one session at a time and rolling
                            back to its snapshot after start-up when it ends; with
                            --per-connection, a light-weight context per connection */
};

/* How a rollback worker rolls back (--rollback-method, rollback.c). */
enum rb_method {
    RB_UFFD = 0,         /* userfaultfd asynchronous write-protect finds the pages written */
    RB_SOFTDIRTY,        /* soft-dirty bits find them */
    RB_FORK,             /* no rollback: the worker exits, a fresh fork of the master replaces it */
    RB_TEST_SKIP_RESTORE,/* tests only: uffd's tracking (else softdirty's), nothing copied back */
    RB_NONE              /* --session prefork: no rollback, a worker's sessions share its state */
};

struct conn {
    int fd;
    unsigned events;          /* epoll interest wanted (registered, in the loop's process) */
    int peer_done;            /* the client has closed its side */
    int draining;             /* all sent and our side shut: wait for the client's close */
    size_t drained;           /* bytes dropped while draining */
    int lwc;                  /* rollback, in the root: the context serving it */
    struct isob_conn c;       /* the protocol state, where the connection is served */
    struct conn *prev, *next; /* every open connection, to close them at exit */
};

struct serve_opts {
    const char *mech;
    const char *bind;
    unsigned port;
    size_t max_value, heap_mb, max_conns, buffer_mb;  /* buffer_mb 0: the default */
    size_t memory_limit_mb;   /* fork: what sessions may take together; 0: what the machine has */
    int cpu, comp_cpu, no_evict;
    enum serve_session session;
    int per_connection;       /* --per-connection: one context per connection (rollback) */
    size_t workers;           /* rollback: prefork workers */
    enum rb_method rb_method; /* rollback: how the workers roll back */
    int rb_method_given, rb_verify;
    int prefork_plain;        /* --session prefork: the workers without rollback */
    int http;                 /* --http: HTTP/1.x GET instead of memcached's protocol */
    struct isob_serve_startup startup;
};

struct server {
    struct isob_serve s;      /* the store and its state (none in a fork listener) */
    const struct isob_mechanism *mech;
    const struct serve_opts *o;
    int ep, lfd, sfd;         /* sfd: the read end of the stop pipe */
    int cfd;                  /* fork: the read end of the child-exit pipe, else -1 */
    int spare_fd;             /* closed to accept-and-refuse when out of descriptors */
    size_t max_conns;
    struct conn *conns;
    pid_t *kids;              /* fork: the session processes alive; rollback: the workers */
    size_t nkids;
    struct isob_serve_rollback *rb; /* rollback: the workers' totals (shared memory) */
    int stopping;             /* rollback: workers that end are not replaced */
    unsigned char scratch[SERVE_SCRATCH_BYTES];
    /* Tags for epoll's data.ptr that are not connections. */
    char listen_tag, signal_tag, child_tag;
};

/* --- sock.c: one connection's socket, whichever process serves it ------- */

/* What a connection's socket reported (EPOLLIN, EPOLLOUT, EPOLLHUP,
 * EPOLLERR, as epoll and poll name them) is handled: input read and run,
 * replies sent, a lingering close carried on.  Returns 0 with c->events
 * the interest from now on, or -1 when the connection is over (its
 * protocol state released; the descriptor is the caller's to close). */
int serve_conn_step(struct server *sv, struct conn *c, unsigned events);
/* A connection that waits for input only, on a blocking socket (a rollback
 * worker's): block in the read itself rather than in poll and then read,
 * one system call less per request.  As serve_conn_step. */
int serve_conn_wait_input(struct server *sv, struct conn *c);

/* --- session.c: sessions in processes of their own ------------------------ */

/* The state every session starts from: the compartment and what start-up
 * stores.  0, or the exit status after a line on stderr.  It is the two
 * steps below, which fork takes apart: the listener creates the
 * compartment, and each session stores the start-up state in its copy. */
int serve_start_up(struct server *sv);
int serve_store_create(struct server *sv);
int serve_store_fill(struct server *sv);

/* Rollback, in the root: a fresh context for the connection c->fd, made
 * from the root (which has served nothing), into c->lwc.  0 or -errno. */
int session_context_create(struct server *sv, struct conn *c);
/* Rollback, in the root: hand the events of c's socket to its context.
 * 0 with c->events updated, or -1 when the connection is over (the
 * context is destroyed; a context that died is logged). */
int session_context_step(struct server *sv, struct conn *c, unsigned events);
/* Rollback: end c's context. */
void session_context_destroy(struct conn *c);

/* In a session's process: serve the connection fd until it is over (fd
 * not closed).  blocking: fd is a blocking socket. */
void session_serve_one(struct server *sv, int fd, int blocking);
/* In a session's process: signals as a plain process has them. */
void session_signals(void);

/* Fork, in the listener: a process that starts up and serves fd alone.
 * 0 (the listener keeps no copy of fd) or -errno. */
int session_fork(struct server *sv, int fd);
/* Fork, in the listener: reap the session processes that ended. */
void session_fork_reap(struct server *sv);
/* Fork, in the listener: end every session process, and wait for them. */
void session_fork_end_all(struct server *sv);

/* What --session and --max-conns need of the machine: one process per
 * connection, and in rollback the root's descriptors.  0, or -errno with
 * why filled in. */
int session_check_limits(const struct serve_opts *o, char *why, size_t len);

/* The memory --session fork may take, in bytes: a session's worst case
 * (its store filled, start-up state included, its connection's buffers
 * full), the listener's, and max_conns sessions and the listener together;
 * against the limit (--memory-limit-mb, else MemAvailable + SwapFree, or
 * the room under the cgroup's memory.max where that is less). */
struct session_memory {
    uint64_t per_session, listener, total, limit;
    uint64_t fit;             /* sessions that fit under the limit beside the listener */
    const char *limit_what;   /* where the limit came from */
    uint64_t machine;         /* what the machine can give now, where machine_what */
    const char *machine_what;
};
int session_memory(const struct serve_opts *o, struct session_memory *m);
/* One line into line: the refusal (-ENOMEM: the worst case exceeds the
 * limit; another -errno: the limit could not be read), or with 0 the bound
 * the server holds to. */
int session_check_memory(const struct serve_opts *o, char *line, size_t len);

/* --- prefork.c: --session rollback's workers ------------------------------- */

/* In the master, started up and listening: the workers, forked.  0 or
 * -errno (a line on stderr). */
int prefork_start(struct server *sv);
/* In the master: reap the children that ended, and replace the workers
 * among them.  0, or -1 when workers keep failing (the master stops). */
int prefork_reap(struct server *sv);
/* In the master: end every worker (and its snapshot), wait for them, and
 * print the rollbacks' totals. */
void prefork_end_all(struct server *sv);

/* --- rollback.c: a process's memory rolled back to a snapshot ------------- */

const char *rb_method_name(enum rb_method m);
/* 0, or -1 for a name that is not a method (the test-only one needs
 * ISOBENCH_TEST_MECHANISMS=1). */
int rb_method_parse(const char *s, enum rb_method *m);
/* Whether m works on this kernel: 0, or -errno with why filled in. */
int rb_probe(enum rb_method m, char *why, size_t len);

/* In a worker, before the snapshot: its state outside the snapshot, or
 * NULL with why.  Then, in the function that serves sessions:
 *     if (__builtin_setjmp(rb_jmpbuf(s)) == 0 && rb_take(s, ...) != 0) fail;
 * rb_take takes the snapshot; every rb_rollback(s) later comes back from
 * that __builtin_setjmp (returning 1) with the memory as it was. */
struct rb_snap;
/* closed_max: the largest anonymous mapping tracked while not writable at
 * the snapshot (a store kept PROT_NONE between calls); larger ones are
 * reservations that no call writes. */
struct rb_snap *rb_prepare(enum rb_method m, struct isob_serve_rollback *totals, int verify,
                           size_t closed_max, char *why, size_t len);
void **rb_jmpbuf(struct rb_snap *s);
int rb_take(struct rb_snap *s, char *why, size_t len);
__attribute__((noreturn)) void rb_rollback(struct rb_snap *s);
/* End the snapshot (its holder). */
void rb_end(struct rb_snap *s);

#endif
