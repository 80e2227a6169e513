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

/* --monitor: which reference monitor checks a GET's file system calls
 * (monitor.c); MONITOR_OFF: no --monitor, the document comes from the store. */
enum serve_monitor {
    MONITOR_OFF = 0,
    MONITOR_NONE,     /* from a file, unchecked */
    MONITOR_INLINE,   /* checked in this process before each call */
    MONITOR_PROCSEP,  /* made by a broker process */
    MONITOR_LWC,      /* trapped from a light-weight context to this process */
};

/* --tls-key: the key made at start-up. */
enum serve_tls_key {
    TLS_ECDSA_P256 = 0,
    TLS_RSA2048,
};

/* --tls: where the private key is (tls.c); TLS_OFF: plain HTTP. */
enum serve_tls {
    TLS_OFF = 0,
    TLS_KEY_PROCESS,  /* in the server's memory */
    TLS_KEY_LWC,      /* only in a light-weight context that signs */
};

struct conn {
    int fd;
    void *tls;                /* --tls: the connection's SSL, else NULL */
    int tls_ready;            /* its handshake is done */
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
    int rb_forced_fork;       /* --monitor lwc made rollback's method fork */
    int prefork_plain;        /* --session prefork: the workers without rollback */
    int http;                 /* --http: HTTP/1.x GET instead of memcached's protocol */
    enum serve_monitor monitor;  /* --monitor */
    enum serve_tls tls;       /* --tls */
    const char *tls_key;      /* --tls-key-file: a PEM key file; NULL: a fresh key */
    enum serve_tls_key tls_key_type; /* --tls-key: the fresh key's type */
    int tls_key_type_given;
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
/* In a prefork worker, its index (0 up; -1 elsewhere), set before it
 * serves: its monitor counts in slot 1 + index (monitor.c). */
extern int serve_worker_index;
/* Fork, in the listener: reap the session processes that ended. */
void session_fork_reap(struct server *sv);
/* Fork, in the listener: end every session process, and wait for them. */
void session_fork_end_all(struct server *sv);

/* --- monitor.c: --monitor ------------------------------------------------ */

const char *serve_monitor_name(enum serve_monitor m);
/* 0 with *m, or -1 for a name that is no monitor. */
int serve_monitor_parse(const char *s, enum serve_monitor *m);
/* After start-up: the document's directory and file, the monitor (the
 * broker of procsep) and sv->s.doc_read.  0, or the exit status after a
 * line on stderr. */
int serve_monitor_init(struct server *sv);
/* In a process that serves sessions of its own (a worker, a fork
 * session), before it serves: procsep starts this process's broker.  0, or
 * the exit status after a line on stderr. */
int serve_monitor_enter(struct server *sv);
/* Fork, in the listener: the session pid was reaped (its counts go to
 * the total, its slot is free). */
void serve_monitor_reaped(pid_t pid);
/* A fork session at its end: its broker stopped. */
void serve_monitor_leave(void);
/* The descriptor a context serving a connection must keep (the loop's
 * broker), or -1. */
int serve_monitor_keep_fd(void);
/* fn (the epoll loop, a worker's sessions) under the monitor: lwc runs it
 * in a LWC_SYSTRAP context this process supervises, counting into slot
 * (0: the server's loop; 1 + i: prefork worker i; -1: a fork session's,
 * added to slot 0 at the end); the others call it.  fn's status. */
int serve_monitor_run(struct server *sv, int (*fn)(struct server *), int slot);
/* Print what the monitor checked; stop it; remove the document. */
void serve_monitor_fini(struct server *sv);

/* --- tls.c: --tls ---------------------------------------------------------- */

/* 0 where this build has libssl, else -ENOTSUP with why. */
int serve_tls_probe(char *why, size_t len);
/* The key (in this process or in its context), the certificate and the
 * SSL context.  0, or the exit status after a line on stderr. */
int serve_tls_init(const struct serve_opts *o);
void serve_tls_fini(void);
/* c->tls for c->fd, in the accepting state: 0 or -errno. */
int serve_tls_conn_new(struct conn *c);
void serve_tls_conn_free(struct conn *c);
/* One step of c's handshake: 1 done, 0 waiting (c->events says for what),
 * -1 failed. */
int serve_tls_handshake(struct conn *c);
/* recv and send on c's socket, through TLS where c->tls: as recv(2) with
 * flags (MSG_DONTWAIT, or 0 for a rollback worker's blocking wait; TLS
 * sockets are non-blocking and ignore them) and as send(2), which never
 * blocks (-1 with errno EAGAIN when they would block, c->events then
 * saying for what under TLS). */
ssize_t serve_io_read(struct conn *c, void *buf, size_t n, int flags);
ssize_t serve_io_send(struct conn *c, const void *p, size_t n);
/* Under TLS, the close_notify before our side shuts. */
void serve_tls_close_notify(struct conn *c);
/* Fresh entropy into OpenSSL's random generators: after a rollback, whose
 * copy back also restored their state, the next session would otherwise
 * draw the same random numbers (server random, key share) as the last. */
void serve_tls_reseed(void);
/* OpenSSL's random generators made now (they are made on first use): a
 * worker does it before its snapshot, so that its sessions do not each
 * make them again. */
void serve_tls_warm(void);

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
