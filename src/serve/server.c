/* `isob serve`: the epoll loop around the connection state machine
 * (conn.c) and the command executor (exec.c).
 *
 * One thread, non-blocking sockets, level-triggered epoll.  A readable
 * socket is read into one scratch buffer shared by all connections, and
 * the complete commands in it run from there; a connection keeps its own
 * buffers only while it holds part of a command or replies not yet sent,
 * so idle connections cost no buffer memory.  A connection whose replies
 * back up is not read until they drain.  The only copy of a key or value
 * besides the socket's own is into or out of the compartment's shared
 * buffer, which the mechanism requires anyway, and into a connection's
 * own buffer for a command that arrived in pieces.
 *
 * --session says where a connection is served: here (shared), in a
 * prefork worker that rolls back to the state after start-up when the
 * session ends (rollback; prefork.c, rollback.c), in a light-weight context
 * made per connection from that state (rollback --per-connection), or in a
 * process forked per connection that starts up by itself (fork); session.c
 * has the last two, sock.c one socket's I/O. */
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "isobench/harness.h"
#include "isobench/loadgen.h"
#include "isobench/serve.h"
#include "server_impl.h"

#define EXIT_USAGE 2
#define EXIT_SKIP 4

/* Events taken from epoll per wait. */
#define EPOLL_BATCH 256
/* Descriptors kept beyond the connections: listener, epoll, signalfd, the
 * spare, stdio and whatever the mechanism opens. */
#define FD_RESERVE 32
/* Backlog of the listening socket. */
#define LISTEN_BACKLOG 1024
/* After SIGINT or SIGTERM the server has this long (microseconds) to stop
 * cleanly before it exits at once (see stop_signals_init). */
#define STOP_GRACE_US 900000
/* --preload-value when not given: loadgen's value size, the lwC paper's
 * 45-byte documents. */
#define PRELOAD_VALUE_DEFAULT 45
/* --workers when not given, and the most it takes.  A worker serves one
 * session at a time and sleeps while its client thinks: fewer workers than
 * concurrent clients leave clients waiting in the backlog and workers
 * waking once per request from an idle CPU. */
#define WORKERS_DEFAULT 16
#define WORKERS_MAX 4096
/* The most --preload-keys takes (loadgen's --keys bound). */
#define PRELOAD_KEYS_MAX 10000000

/* The least --buffer-mb allows, in units of the largest command a
 * connection may hold (input) and make (a reply to stream): room for a few
 * connections to do the largest thing at once. */
#define BUFFER_MIN_COMMANDS 4

/* A connection is over: out of epoll, closed, forgotten.  In rollback its
 * context goes with it. */
static void conn_close(struct server *sv, struct conn *c)
{
    epoll_ctl(sv->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (c->prev)
        c->prev->next = c->next;
    else
        sv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (sv->o->session == SESSION_ROLLBACK)
        session_context_destroy(c);
    else
        isob_conn_fini(&c->c);
    if (c->tls)
        serve_tls_conn_free(c);
    free(c);
    sv->s.st.curr_connections--;
}

/* Register the interest c->events asks for now (registered: what epoll
 * has).  0, or -1 after closing c. */
static int conn_watch(struct server *sv, struct conn *c, unsigned registered)
{
    if (c->events == registered)
        return 0;
    struct epoll_event ev = {.events = c->events, .data.ptr = c};
    if (epoll_ctl(sv->ep, EPOLL_CTL_MOD, c->fd, &ev) == 0)
        return 0;
    conn_close(sv, c);
    return -1;
}

/* Events on a connection's socket: served here, or by its context. */
static void conn_event(struct server *sv, struct conn *c, unsigned events)
{
    unsigned registered = c->events;
    int r = sv->o->session == SESSION_ROLLBACK ? session_context_step(sv, c, events)
                                               : serve_conn_step(sv, c, events);
    if (r != 0)
        conn_close(sv, c);
    else
        conn_watch(sv, c, registered);
}

static void refuse(struct server *sv, int fd)
{
    static const char mc[] = "SERVER_ERROR too many open connections\r\n";
    static const char web[] = "HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n"
                              "Connection: close\r\n\r\n";
    ssize_t n = sv->o->http ? send(fd, web, sizeof web - 1, MSG_NOSIGNAL | MSG_DONTWAIT)
                            : send(fd, mc, sizeof mc - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
    close(fd);
    sv->s.st.rejected_connections++;
}

/* A new connection in this process's loop (shared, rollback). */
static void conn_open(struct server *sv, int fd)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
    c->fd = fd;
    c->events = EPOLLIN;
    if (sv->o->session == SESSION_ROLLBACK) {
        int rc = session_context_create(sv, c);
        if (rc != 0) {
            fprintf(stderr, "isob serve: no context for a new connection: %s\n", isob_strerror(rc));
            free(c);
            refuse(sv, fd);
            return;
        }
    } else {
        isob_conn_init(&c->c, &sv->s);
    }
    if (sv->o->tls && serve_tls_conn_new(c) != 0) {
        isob_conn_fini(&c->c);
        free(c);
        refuse(sv, fd);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(sv->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        if (sv->o->session == SESSION_ROLLBACK)
            session_context_destroy(c);
        if (c->tls)
            serve_tls_conn_free(c);
        free(c);
        close(fd);
        return;
    }
    c->next = sv->conns;
    if (sv->conns)
        sv->conns->prev = c;
    sv->conns = c;
    sv->s.st.curr_connections++;
    sv->s.st.total_connections++;
}

static void accept_all(struct server *sv)
{
    for (;;) {
        int fd = accept4(sv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if ((errno == EMFILE || errno == ENFILE) && sv->spare_fd >= 0) {
                /* Out of descriptors: free the spare to take the waiting
                 * client, tell it why, and keep the spare again; otherwise
                 * the listener would stay readable and spin. */
                close(sv->spare_fd);
                fd = accept4(sv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd >= 0)
                    refuse(sv, fd);
                sv->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                continue;
            }
            return;
        }
        /* A fork session that ended is counted until it is reaped, which
         * the loop does only between batches: while clients keep coming,
         * reap here rather than refuse for sessions that are over. */
        if (sv->s.st.curr_connections >= sv->max_conns && sv->o->session == SESSION_FORK)
            session_fork_reap(sv);
        if (sv->s.st.curr_connections >= sv->max_conns) {
            refuse(sv, fd);
            continue;
        }
        int one = 1;
        /* Replies are whole: send them now, not after Nagle's delay. */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (sv->o->session != SESSION_FORK) {
            conn_open(sv, fd);
            continue;
        }
        int rc = session_fork(sv, fd);
        if (rc != 0) {
            fprintf(stderr, "isob serve: no process for a new connection: %s\n", isob_strerror(rc));
            continue;
        }
        sv->s.st.curr_connections++;
        sv->s.st.total_connections++;
    }
}

/* --- the command line ------------------------------------------------------ */

/* The least --buffer-mb: BUFFER_MIN_COMMANDS connections holding the
 * largest command and streaming the largest reply, in whole MiB. */
static size_t buffer_min_mb(size_t max_value)
{
    size_t one = isob_serve_in_max(max_value) + ISOB_CONN_OUT_HIGH + max_value + 4096;
    return (BUFFER_MIN_COMMANDS * one + (1u << 20) - 1) >> 20;
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: isob serve -m MECH [options]    a memcached text-protocol (or HTTP GET)\n"
        "                                       server whose store lives in one\n"
        "                                       compartment of MECH\n"
        "\n"
        "options (defaults in brackets):\n"
        "  -m, --mechanism M   mechanism of the store's compartment (see `isob list`)\n"
        "  --port P            TCP port; 0 picks a free one [%d]\n"
        "  --bind ADDR         IPv4 address to listen on [%s]\n"
        "  --max-value BYTES   largest value a client may store; larger ones get\n"
        "                      SERVER_ERROR object too large for cache [%zu, as\n"
        "                      memcached; at most %zu]\n"
        "  --heap-mb N         trusted heap (the store's memory) in MiB [%d]\n"
        "  --buffer-mb N       what all connections' buffers may hold together, in\n"
        "                      MiB; beyond, requests get SERVER_ERROR out of memory\n"
        "                      [--heap-mb, at least %zu]\n"
        "  -M, --no-evict      a full store refuses new items (SERVER_ERROR out of\n"
        "                      memory storing object) instead of evicting, as\n"
        "                      memcached -M\n"
        "  --cpu C             pin the server to CPU C [unpinned]\n"
        "  --comp-cpu C        CPU of the compartment's second context [--cpu, else unpinned]\n"
        "  --max-conns N       open connections at most; more are refused [%d]; with\n"
        "                      --session fork or rollback, a process each: more than\n"
        "                      the process or descriptor limits allow is refused, and\n"
        "                      with fork more than the memory can hold if every\n"
        "                      session fills its store\n"
        "  --memory-limit-mb N what fork sessions and their listener may take\n"
        "                      together, in MiB, at worst [MemAvailable + SwapFree,\n"
        "                      or less under the cgroup's memory.max]\n"
        "\n"
        "sessions (a session is one connection; docs/serve.md):\n"
        "  --session S         how sessions share the state start-up built [shared]:\n"
        "                        shared    one store; what a session set, the next sees\n"
        "                        fork      a fresh process per connection, which starts\n"
        "                                  up by itself and ends with the connection\n"
        "                        rollback  prefork workers: each snapshots itself after\n"
        "                                  start-up, serves one session at a time in\n"
        "                                  its own process and rolls back to the\n"
        "                                  snapshot when the session ends\n"
        "                        prefork   the same workers without the rollback: a\n"
        "                                  session sees what earlier ones in its worker\n"
        "                                  did (no isolation; the baseline of rollback)\n"
        "                      fork, rollback and prefork need a mechanism without a\n"
        "                      second context (direct, mprotect, ...): the store goes\n"
        "                      with the session\n"
        "  --workers N         rollback, prefork: worker processes, each serving one\n"
        "                      session at a time; more connections wait in the listen\n"
        "                      backlog: give at least the concurrent clients [%d]\n"
        "  --rollback-method M rollback: how a worker finds and undoes what a session\n"
        "                      wrote [uffd]; one that cannot run here falls back to\n"
        "                      the next, with a line saying why:\n"
        "                        uffd       userfaultfd write-protect (asynchronous,\n"
        "                                   Linux 6.7) finds the pages written\n"
        "                        softdirty  the kernel's soft-dirty bits find them\n"
        "                        fork       the worker exits after its session and a\n"
        "                                   fresh fork of the master replaces it\n"
        "  --rollback-verify   rollback: after each rollback compare all the worker's\n"
        "                      private memory with the snapshot (slow; for checking):\n"
        "                      stats' rollback_mismatched_pages counts what differed\n"
        "  --per-connection    one light-weight context per connection instead of\n"
        "                      workers (isolates connections open at once from each\n"
        "                      other; every request switches to its context and\n"
        "                      back): implies --session rollback\n"
        "  --http              serve HTTP/1.x GET instead of the memcached protocol:\n"
        "                      the document at / is the %d bytes isob loadgen checks\n"
        "  --startup-mb N      build N MiB of start-up state (items startup_000000...,\n"
        "                      %u bytes each) before serving; the store grows by it\n"
        "                      [0, at most %u]\n"
        "  --preload-keys K    store isob loadgen's keys key_00000000... at start-up,\n"
        "                      so that sessions that keep nothing still find them [0]\n"
        "  --preload-value B   bytes of each (loadgen --value-size) [%d]\n"
        "  --doc-bytes N       --http: the document at / is N bytes, %d to %d (isob\n"
        "                      loadgen --doc-bytes N checks it) [%d]\n"
        "  --monitor K         --http: each GET reads the document from a file\n"
        "                      (openat, pread64, close) whose openat and pread64 a\n"
        "                      reference monitor checks (lwC's Apache), in every\n"
        "                      process that serves sessions (each worker or fork\n"
        "                      session has a broker, or a context, of its own):\n"
        "                        none     the file, unchecked (the baseline)\n"
        "                        inline   checked in this process (no isolation)\n"
        "                        procsep  made by a broker process\n"
        "                        lwc      the server runs in a light-weight context\n"
        "                                 whose system calls trap to this process\n"
        "                      (docs/serve.md \"Reference monitors\")\n"
        "  --tls K             --http: HTTPS (TLS 1.3, a self-signed certificate,\n"
        "                      every connection a full handshake), the private key\n"
        "                      held by K:\n"
        "                        process  this process, as OpenSSL keeps it\n"
        "                        lwc      a light-weight context that only signs;\n"
        "                                 the serving process never has the key\n"
        "                                 (rollback, prefork: a context per worker,\n"
        "                                 each with a key of its own)\n"
        "                      a rollback worker reseeds OpenSSL's random generator\n"
        "                      after each rollback\n"
        "  --tls-key T         the key made at start-up: rsa2048 or ecdsa-p256\n"
        "                      [ecdsa-p256]\n"
        "  --tls-key-file FILE the key, a PEM RSA or EC P-256 private key, read by\n"
        "                      whoever holds it, instead of a fresh one\n"
        "\n"
        "Prints \"isob serve: listening on ADDR:PORT (mechanism M), session S, PROTO\"\n"
        "on stderr when ready (a compartment, or start-up, that fails is an error before\n"
        "that; under --session fork a line stating the memory bound comes first); stops\n"
        "within a second on SIGINT or SIGTERM (exit 0; 1 if a call into the compartment\n"
        "did not return), ending every session's process. A compartment that dies fails\n"
        "the request in flight, is logged and restarted empty.\n",
        ISOB_SERVE_DEFAULT_PORT, ISOB_SERVE_DEFAULT_BIND, isob_serve_value_limit(),
        isob_serve_value_max(), ISOB_SERVE_DEFAULT_HEAP_MB,
        buffer_min_mb(isob_serve_value_limit()), ISOB_SERVE_DEFAULT_MAX_CONNS, WORKERS_DEFAULT,
        ISOB_HTTP_DOC_BYTES, ISOB_SERVE_STARTUP_VALUE, ISOB_SERVE_STARTUP_MAX_MB,
        PRELOAD_VALUE_DEFAULT, ISOB_HTTP_DOC_BYTES, ISOB_HTTP_DOC_MAX, ISOB_HTTP_DOC_BYTES);
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "isob serve: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see isob serve --help)\n");
    return EXIT_USAGE;
}

/* A whole number in [lo, hi]; 0 or -1. */
static int parse_num(const char *s, unsigned long long lo, unsigned long long hi,
                     unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || s[0] == '+' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

enum { OPT_PORT = 256, OPT_BIND, OPT_MAX_VALUE, OPT_HEAP_MB, OPT_CPU, OPT_COMP_CPU,
       OPT_MAX_CONNS, OPT_BUFFER_MB, OPT_SESSION, OPT_PER_CONN, OPT_HTTP, OPT_STARTUP_MB,
       OPT_PRELOAD_KEYS, OPT_PRELOAD_VALUE, OPT_MEMORY_LIMIT_MB, OPT_DOC_BYTES, OPT_MONITOR,
       OPT_TLS, OPT_TLS_KEY, OPT_TLS_KEY_FILE, OPT_WORKERS, OPT_RB_METHOD, OPT_RB_VERIFY };

/* 0, or the exit status to return (-1: help was printed, exit 0). */
static int parse_opts(int argc, char **argv, struct serve_opts *o)
{
    static const struct option longopts[] = {
        {"mechanism", required_argument, 0, 'm'}, {"port", required_argument, 0, OPT_PORT},
        {"bind", required_argument, 0, OPT_BIND},
        {"max-value", required_argument, 0, OPT_MAX_VALUE},
        {"heap-mb", required_argument, 0, OPT_HEAP_MB}, {"cpu", required_argument, 0, OPT_CPU},
        {"comp-cpu", required_argument, 0, OPT_COMP_CPU},
        {"max-conns", required_argument, 0, OPT_MAX_CONNS},
        {"buffer-mb", required_argument, 0, OPT_BUFFER_MB},
        {"memory-limit-mb", required_argument, 0, OPT_MEMORY_LIMIT_MB},
        {"session", required_argument, 0, OPT_SESSION},
        {"per-connection", no_argument, 0, OPT_PER_CONN}, {"http", no_argument, 0, OPT_HTTP},
        {"workers", required_argument, 0, OPT_WORKERS},
        {"rollback-method", required_argument, 0, OPT_RB_METHOD},
        {"rollback-verify", no_argument, 0, OPT_RB_VERIFY},
        {"startup-mb", required_argument, 0, OPT_STARTUP_MB},
        {"preload-keys", required_argument, 0, OPT_PRELOAD_KEYS},
        {"preload-value", required_argument, 0, OPT_PRELOAD_VALUE},
        {"doc-bytes", required_argument, 0, OPT_DOC_BYTES},
        {"monitor", required_argument, 0, OPT_MONITOR},
        {"tls", required_argument, 0, OPT_TLS}, {"tls-key", required_argument, 0, OPT_TLS_KEY},
        {"tls-key-file", required_argument, 0, OPT_TLS_KEY_FILE},
        {"no-evict", no_argument, 0, 'M'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    *o = (struct serve_opts){
        .bind = ISOB_SERVE_DEFAULT_BIND, .port = ISOB_SERVE_DEFAULT_PORT,
        .max_value = isob_serve_value_limit(), .heap_mb = ISOB_SERVE_DEFAULT_HEAP_MB,
        .max_conns = ISOB_SERVE_DEFAULT_MAX_CONNS, .cpu = -1, .comp_cpu = -2,
        .startup = {.preload_value = PRELOAD_VALUE_DEFAULT},
    };
    int session_given = 0;
    unsigned long long v;
    int opt;
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":m:Mh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'm':
            if (o->mech) {
                fprintf(stderr, "isob serve: error: -m given twice ('%s', then '%s'): a server "
                        "has one compartment (see isob serve --help)\n", o->mech, optarg);
                return EXIT_USAGE;
            }
            o->mech = optarg;
            break;
        case 'M': o->no_evict = 1; break;
        case OPT_PORT:
            if (parse_num(optarg, 0, 65535, &v))
                return usage_error("--port: '%s' is not a port from 0 to 65535", optarg);
            o->port = (unsigned)v;
            break;
        case OPT_BIND: {
            struct in_addr a;
            if (inet_pton(AF_INET, optarg, &a) != 1)
                return usage_error("--bind: '%s' is not an IPv4 address", optarg);
            o->bind = optarg;
            break;
        }
        case OPT_MAX_VALUE:
            if (parse_num(optarg, 1, isob_serve_value_max(), &v)) {
                fprintf(stderr, "isob serve: error: --max-value: '%s' is not from 1 to %zu "
                        "(the store in the compartment holds values of at most %u bytes, "
                        "%d of them the client's flags)\n", optarg, isob_serve_value_max(),
                        ISOB_KV_MAX_VALUE, ISOB_SERVE_FLAGS_BYTES);
                return EXIT_USAGE;
            }
            o->max_value = (size_t)v;
            break;
        case OPT_HEAP_MB:
            if (parse_num(optarg, 1, 1u << 20, &v))
                return usage_error("--heap-mb: '%s' is not from 1 to 1048576", optarg);
            o->heap_mb = (size_t)v;
            break;
        case OPT_CPU:
        case OPT_COMP_CPU:
            if (parse_num(optarg, 0, CPU_SETSIZE - 1, &v) || !isob_cpu_allowed((int)v))
                return usage_error("--cpu/--comp-cpu: '%s' is not among the CPUs this process "
                                   "may use", optarg);
            if (opt == OPT_CPU)
                o->cpu = (int)v;
            else
                o->comp_cpu = (int)v;
            break;
        case OPT_MAX_CONNS:
            if (parse_num(optarg, 1, 1000000, &v))
                return usage_error("--max-conns: '%s' is not from 1 to 1000000", optarg);
            o->max_conns = (size_t)v;
            break;
        case OPT_BUFFER_MB:
            if (parse_num(optarg, 1, 1u << 20, &v))
                return usage_error("--buffer-mb: '%s' is not from 1 to 1048576", optarg);
            o->buffer_mb = (size_t)v;
            break;
        case OPT_MEMORY_LIMIT_MB:
            if (parse_num(optarg, 1, 1ull << 40, &v))
                return usage_error("--memory-limit-mb: '%s' is not from 1 to 1099511627776",
                                   optarg);
            o->memory_limit_mb = (size_t)v;
            break;
        case OPT_SESSION:
            if (strcmp(optarg, "shared") == 0)
                o->session = SESSION_SHARED;
            else if (strcmp(optarg, "fork") == 0)
                o->session = SESSION_FORK;
            else if (strcmp(optarg, "rollback") == 0)
                o->session = SESSION_ROLLBACK;
            else if (strcmp(optarg, "prefork") == 0)
                o->session = SESSION_ROLLBACK, o->prefork_plain = 1;
            else
                return usage_error("--session: '%s' is not shared, fork, rollback or prefork",
                                   optarg);
            session_given = 1;
            break;
        case OPT_PER_CONN: o->per_connection = 1; break;
        case OPT_WORKERS:
            if (parse_num(optarg, 1, WORKERS_MAX, &v))
                return usage_error("--workers: '%s' is not from 1 to 4096", optarg);
            o->workers = (size_t)v;
            break;
        case OPT_RB_METHOD:
            if (rb_method_parse(optarg, &o->rb_method) != 0)
                return usage_error("--rollback-method: '%s' is not uffd, softdirty or fork",
                                   optarg);
            o->rb_method_given = 1;
            break;
        case OPT_RB_VERIFY: o->rb_verify = 1; break;
        case OPT_HTTP: o->http = 1; break;
        case OPT_STARTUP_MB:
            if (parse_num(optarg, 0, ISOB_SERVE_STARTUP_MAX_MB, &v)) {
                char lim[160];
                snprintf(lim, sizeof lim, "--startup-mb: '%s' is not from 0 to %u", optarg,
                         ISOB_SERVE_STARTUP_MAX_MB);
                return usage_error("%s", lim);
            }
            o->startup.startup_mb = (size_t)v;
            break;
        case OPT_PRELOAD_KEYS:
            if (parse_num(optarg, 0, PRELOAD_KEYS_MAX, &v))
                return usage_error("--preload-keys: '%s' is not from 0 to 10000000", optarg);
            o->startup.preload_keys = (size_t)v;
            break;
        case OPT_PRELOAD_VALUE:
            if (parse_num(optarg, 1, 1u << 20, &v))
                return usage_error("--preload-value: '%s' is not from 1 to 1048576", optarg);
            o->startup.preload_value = (size_t)v;
            break;
        case OPT_DOC_BYTES:
            if (parse_num(optarg, ISOB_HTTP_DOC_BYTES, ISOB_HTTP_DOC_MAX, &v))
                return usage_error("--doc-bytes: '%s' is not from 45 to 65536", optarg);
            o->startup.doc_bytes = (size_t)v;
            break;
        case OPT_MONITOR:
            if (serve_monitor_parse(optarg, &o->monitor) != 0)
                return usage_error("--monitor: '%s' is not none, inline, procsep or lwc", optarg);
            break;
        case OPT_TLS:
            if (strcmp(optarg, "process") == 0)
                o->tls = TLS_KEY_PROCESS;
            else if (strcmp(optarg, "lwc") == 0)
                o->tls = TLS_KEY_LWC;
            else
                return usage_error("--tls: '%s' is neither process nor lwc", optarg);
            break;
        case OPT_TLS_KEY:
            if (strcmp(optarg, "rsa2048") == 0)
                o->tls_key_type = TLS_RSA2048;
            else if (strcmp(optarg, "ecdsa-p256") == 0)
                o->tls_key_type = TLS_ECDSA_P256;
            else
                return usage_error("--tls-key: '%s' is neither rsa2048 nor ecdsa-p256 (a key "
                                   "file is --tls-key-file)", optarg);
            o->tls_key_type_given = 1;
            break;
        case OPT_TLS_KEY_FILE: o->tls_key = optarg; break;
        case 'h': usage(stdout); return -1;
        case ':': return usage_error("option %s needs a value", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if (!o->mech)
        return usage_error("serve needs -m MECH%s", "");
    if (o->per_connection) {
        if (session_given && (o->session != SESSION_ROLLBACK || o->prefork_plain))
            return usage_error("--per-connection is a context per connection, which is --session "
                               "rollback, not --session %s", o->session == SESSION_FORK ? "fork"
                                                 : o->prefork_plain ? "prefork" : "shared");
        o->session = SESSION_ROLLBACK;
    }
    int prefork = o->session == SESSION_ROLLBACK && !o->per_connection;
    if (o->prefork_plain && (o->per_connection || o->rb_method_given || o->rb_verify))
        return usage_error("--session prefork does not roll back: it takes --workers, not "
                           "--per-connection, --rollback-method or --rollback-verify%s", "");
    if (o->prefork_plain)
        o->rb_method = RB_NONE;
    if ((o->workers || o->rb_method_given || o->rb_verify) && !prefork)
        return usage_error("--workers, --rollback-method and --rollback-verify are for the "
                           "workers of --session rollback%s", o->per_connection
                           ? ", not --per-connection" : "");
    if (prefork && !o->workers)
        o->workers = WORKERS_DEFAULT;
    if (o->startup.startup_mb && o->max_value < ISOB_SERVE_STARTUP_VALUE) {
        char need[48];
        snprintf(need, sizeof need, "%u", ISOB_SERVE_STARTUP_VALUE);
        return usage_error("--startup-mb stores items of %s bytes: --max-value must allow them",
                           need);
    }
    if (o->startup.preload_keys && o->startup.preload_value > o->max_value)
        return usage_error("--preload-value: larger than --max-value%s", "");
    if (o->http && o->startup.preload_keys)
        return usage_error("--preload-keys stores memcached keys: it does not go with --http%s", "");
    if (o->startup.doc_bytes && !o->http)
        return usage_error("--doc-bytes is the HTTP document's size: it needs --http%s", "");
    if (o->monitor && !o->http)
        return usage_error("--monitor checks the system calls of an HTTP GET: it needs --http%s", "");
    if (o->monitor == MONITOR_LWC && o->per_connection)
        return usage_error("--monitor lwc runs the serving process in a context whose system "
                           "calls trap to its creator; --per-connection's contexts would be "
                           "made inside it, which this emulation of lwC does not supervise: "
                           "give --monitor none, inline or procsep%s", "");
    int confined = o->monitor == MONITOR_LWC || o->monitor == MONITOR_PROCSEP;
    if (confined && prefork && !o->prefork_plain && o->rb_method_given && o->rb_method != RB_FORK)
        return usage_error("--monitor lwc and procsep with --session rollback roll back by fork: "
                           "a worker serving in the confined context or child cannot track its "
                           "own pages (/proc/self and process_vm_readv are the filter's to "
                           "refuse)%s", "");
    if (confined && prefork && !o->prefork_plain && o->rb_method != RB_FORK) {
        o->rb_method = RB_FORK;
        o->rb_forced_fork = 1;
    }
    if (o->tls && !o->http)
        return usage_error("--tls serves HTTPS: it needs --http%s", "");
    if (o->tls && o->per_connection)
        return usage_error("--tls with --per-connection is not built: the connection's TLS state "
                           "would be made in the root before its context%s", "");
    if (o->tls == TLS_KEY_LWC && o->session == SESSION_FORK)
        return usage_error("--tls lwc with --session fork would make a key, and a context to "
                           "hold it, per session: use --tls process, or --session rollback or "
                           "prefork (a key's context per worker)%s", "");
    if (o->tls && o->monitor)
        return usage_error("--tls and --monitor are measured apart: give one of them%s", "");
    if ((o->tls_key || o->tls_key_type_given) && !o->tls)
        return usage_error("--tls-key and --tls-key-file are the key of --tls: they need "
                           "--tls%s", "");
    if (o->tls_key && o->tls_key_type_given)
        return usage_error("--tls-key-file has a key of its own type: give --tls-key or "
                           "--tls-key-file%s", "");
    if (o->memory_limit_mb && o->session != SESSION_FORK)
        return usage_error("--memory-limit-mb bounds fork sessions: it needs --session fork%s", "");
    if (o->comp_cpu == -2)
        o->comp_cpu = o->cpu;
    size_t least = buffer_min_mb(o->max_value);
    if (o->buffer_mb && o->buffer_mb < least) {
        fprintf(stderr, "isob serve: error: --buffer-mb: %zu is less than %zu, the room for %d "
                "of the largest requests that --max-value %zu allows (see isob serve --help)\n",
                o->buffer_mb, least, BUFFER_MIN_COMMANDS, o->max_value);
        return EXIT_USAGE;
    }
    if (!o->buffer_mb)
        o->buffer_mb = o->heap_mb > least ? o->heap_mb : least;
    return 0;
}

/* As many descriptors as max_conns needs, if the hard limit allows;
 * otherwise max_conns shrinks to fit, with a warning. */
static void fit_fd_limit(size_t *max_conns)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t want = (rlim_t)*max_conns + FD_RESERVE;
    if (rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < want) {
        size_t fit = rl.rlim_cur > FD_RESERVE ? (size_t)(rl.rlim_cur - FD_RESERVE) : 1;
        fprintf(stderr, "isob serve: warning: %zu connections need %llu descriptors, the limit "
                "is %llu: at most %zu connections\n", *max_conns, (unsigned long long)want,
                (unsigned long long)rl.rlim_cur, fit);
        *max_conns = fit;
    }
}

static int listen_on(const char *addr, unsigned port, unsigned *bound_port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
        return -EINVAL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    /* A restarted benchmark must not wait out TIME_WAIT of the last run. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, LISTEN_BACKLOG) != 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    *bound_port = ntohs(sa.sin_port);
    return fd;
}

/* --- stopping ----------------------------------------------------------------
 *
 * SIGINT and SIGTERM must stop the server within a second, whatever it is
 * doing, including waiting on a compartment call that never returns (a
 * stopped or looping compartment; a dead one returns at once).  So they
 * are not blocked: a handler records the signal, wakes the epoll loop
 * through a pipe, and arms a timer.  The loop then stops cleanly; if it is
 * stuck, the timer's handler says so and exits, and the compartment's
 * server process dies with us (PR_SET_PDEATHSIG). */
static volatile sig_atomic_t stop_signo;
static int stop_pipe_w = -1;

static void on_stop_signal(int sig)
{
    int saved = errno;
    if (!stop_signo) {
        stop_signo = sig;
        struct itimerval grace = {.it_value = {.tv_sec = 0, .tv_usec = STOP_GRACE_US}};
        setitimer(ITIMER_REAL, &grace, NULL);
    }
    char b = (char)sig;
    ssize_t n = write(stop_pipe_w, &b, 1);
    (void)n;
    errno = saved;
}

static void on_stop_overdue(int sig)
{
    (void)sig;
    static const char msg[] = "isob serve: still not stopped after the signal (a compartment call "
                              "does not return); exiting without cleaning up\n";
    ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)n;
    _exit(1);
}

/* Install the stop handlers; the read end of the stop pipe, or -errno. */
static int stop_signals_init(void)
{
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
        return -errno;
    stop_pipe_w = fds[1];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_stop_overdue;
    sigaction(SIGALRM, &sa, NULL);
    /* Restarted, so that an interrupted system call elsewhere needs no
     * retry loop; epoll_wait is never restarted, and the pipe wakes it. */
    sa.sa_flags = SA_RESTART;
    sa.sa_handler = on_stop_signal;
    /* A shell starts background jobs with SIGINT ignored; sigaction takes
     * it back. */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGALRM);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    return fds[0];
}

/* --- fork sessions end: SIGCHLD wakes the loop through a pipe ------------- */
static int child_pipe_w = -1;

static void on_child(int sig)
{
    (void)sig;
    int saved = errno;
    char b = 0;
    ssize_t n = write(child_pipe_w, &b, 1);
    (void)n;
    errno = saved;
}

/* The read end of the child-exit pipe, or -errno. */
static int child_signal_init(void)
{
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
        return -errno;
    child_pipe_w = fds[1];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sa.sa_handler = on_child;
    sigaction(SIGCHLD, &sa, NULL);
    return fds[0];
}

static int add_tag(int ep, int fd, void *tag)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = tag};
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

static int run(struct server *sv)
{
    struct epoll_event evs[EPOLL_BATCH];
    for (;;) {
        int n = epoll_wait(sv->ep, evs, EPOLL_BATCH, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "isob serve: error: epoll_wait: %s\n", strerror(errno));
            return 1;
        }
        for (int i = 0; i < n; i++) {
            void *tag = evs[i].data.ptr;
            if (tag == &sv->signal_tag) {
                /* Under --monitor lwc this loop runs in a context the
                 * signal may not have reached: its monitor wrote the pipe. */
                if (stop_signo)
                    fprintf(stderr, "isob serve: %s, stopping\n", strsignal((int)stop_signo));
                else
                    fprintf(stderr, "isob serve: stopping (the monitor was signalled)\n");
                return 0;
            }
            if (tag == &sv->listen_tag) {
                accept_all(sv);
                continue;
            }
            if (tag == &sv->child_tag) {
                char drain[64];
                while (read(sv->cfd, drain, sizeof drain) > 0)
                    ;
                if (sv->rb) {
                    if (prefork_reap(sv) != 0)
                        return 1;
                } else {
                    session_fork_reap(sv);
                }
                continue;
            }
            /* A connection closed earlier in this batch cannot appear
             * again: closing removed it from epoll, and events for one
             * descriptor come once per wait. */
            conn_event(sv, tag, evs[i].events);
        }
    }
}

/* Fork: store the start-up state once in a throw-away process before
 * listening, so that a start-up that cannot work is an error now rather than
 * in every session.  0, or the exit status (the process said why on
 * stderr). */
static int fork_trial(struct server *sv)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "isob serve: error: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        int rc = serve_store_fill(sv);
        _exit(rc == 0 ? 0 : 1);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static const char *session_name(const struct serve_opts *o)
{
    return o->session == SESSION_FORK ? "fork"
           : o->session != SESSION_ROLLBACK ? "shared"
           : o->per_connection ? "per-connection"
           : o->prefork_plain ? "prefork" : "rollback";
}

/* The rollback method that works here: the one asked for, or the next one
 * down (uffd, softdirty, fork), with a line saying why.  0, or the exit
 * status. */
static int choose_rollback(struct serve_opts *o)
{
    char why[256];
    while (rb_probe(o->rb_method, why, sizeof why) != 0) {
        if (o->rb_method == RB_TEST_SKIP_RESTORE) {
            fprintf(stderr, "isob serve: --rollback-method %s cannot run here: %s\n",
                    rb_method_name(o->rb_method), why);
            return EXIT_SKIP;
        }
        enum rb_method next = o->rb_method == RB_UFFD ? RB_SOFTDIRTY : RB_FORK;
        fprintf(stderr, "isob serve: rollback method %s cannot run here: %s; using %s\n",
                rb_method_name(o->rb_method), why, rb_method_name(next));
        o->rb_method = next;
    }
    return 0;
}

int isob_serve_main(int argc, char **argv)
{
    static struct serve_opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    const struct isob_mechanism *m = isob_mechanism_find(o.mech);
    if (!m)
        return usage_error("unknown mechanism '%s' (see isob list)", o.mech);
    if (o.session != SESSION_SHARED && (m->props & ISOB_TWO_CONTEXTS)) {
        fprintf(stderr, "isob serve: error: --session %s gives each session its own copy of the "
                "store, which mechanism %s keeps in a second context the copies would share: use "
                "one without (direct, mprotect, ...) (see isob serve --help)\n",
                session_name(&o), m->name);
        return EXIT_USAGE;
    }
    char why[512] = "", bound[640] = "";
    if (o.session != SESSION_SHARED && session_check_limits(&o, why, sizeof why) != 0) {
        fprintf(stderr, "isob serve: error: %s (see isob serve --help)\n", why);
        return EXIT_USAGE;
    }
    if (o.session == SESSION_FORK && session_check_memory(&o, bound, sizeof bound) != 0) {
        fprintf(stderr, "isob serve: error: %s (see isob serve --help)\n", bound);
        return EXIT_USAGE;
    }
    if (m->probe(why, sizeof why) != 0) {
        fprintf(stderr, "isob serve: mechanism %s cannot run here: %s\n", m->name, why);
        return EXIT_SKIP;
    }
    if (o.tls && serve_tls_probe(why, sizeof why) != 0) {
        fprintf(stderr, "isob serve: --tls cannot run here: %s\n", why);
        return EXIT_SKIP;
    }
    int prefork = o.session == SESSION_ROLLBACK && !o.per_connection;
    if (prefork && (rc = choose_rollback(&o)) != 0)
        return rc;
    if (o.cpu >= 0) {
        int prc = isob_pin_self(o.cpu);
        if (prc) {
            fprintf(stderr, "isob serve: error: pin to CPU %d: %s\n", o.cpu, isob_strerror(prc));
            return 1;
        }
    }

    static struct server sv;
    sv.o = &o;
    sv.mech = m;
    sv.max_conns = o.max_conns;
    if (o.session == SESSION_SHARED)
        fit_fd_limit(&sv.max_conns);
    sv.lfd = sv.sfd = sv.ep = sv.spare_fd = sv.cfd = -1;
    /* Before the compartment, whose set-up (a large heap) may take time:
     * a stop signal is obeyed from here on. */
    sv.sfd = stop_signals_init();
    if (sv.sfd < 0) {
        fprintf(stderr, "isob serve: error: setting up signal handling: %s\n", isob_strerror(sv.sfd));
        return 1;
    }
    /* The state sessions start from, and an error before "listening" if it
     * cannot be made: a mechanism reports its server's failure at create.
     * A fork listener holds the empty store, which its sessions share until
     * they write: each stores its own start-up state. */
    if (o.session == SESSION_FORK) {
        sv.kids = calloc(sv.max_conns, sizeof *sv.kids);
        if (!sv.kids) {
            fprintf(stderr, "isob serve: error: %s\n", strerror(ENOMEM));
            return 1;
        }
        if (serve_store_create(&sv) != 0)
            return 1;
        if (fork_trial(&sv) != 0) {
            isob_serve_fini(&sv.s);
            return 1;
        }
        sv.cfd = child_signal_init();
        fprintf(stderr, "isob serve: %s\n", bound);
    } else if (serve_start_up(&sv) != 0) {
        return 1;
    }
    int status = 1;
    unsigned port = 0;
    sv.lfd = listen_on(o.bind, o.port, &port);
    if (sv.lfd < 0) {
        fprintf(stderr, "isob serve: error: listening on %s:%u: %s\n", o.bind, o.port,
                isob_strerror(sv.lfd));
        goto out;
    }
    sv.ep = epoll_create1(EPOLL_CLOEXEC);
    sv.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    /* The workers accept, not the master. */
    if (prefork)
        sv.cfd = child_signal_init();
    if (sv.ep < 0 || (!prefork && add_tag(sv.ep, sv.lfd, &sv.listen_tag) != 0) ||
        add_tag(sv.ep, sv.sfd, &sv.signal_tag) != 0 ||
        ((o.session == SESSION_FORK || prefork) &&
         (sv.cfd < 0 || add_tag(sv.ep, sv.cfd, &sv.child_tag) != 0))) {
        fprintf(stderr, "isob serve: error: setting up epoll: %s\n", strerror(errno));
        goto out;
    }
    /* Before the workers and sessions, which inherit them: the monitor's
     * document and counts (each serving process then adds its broker or
     * context), and the TLS context with its key, except a key in a
     * context, which each worker makes for itself. */
    if (o.monitor && serve_monitor_init(&sv) != 0)
        goto out;
    if (o.tls && !(prefork && o.tls == TLS_KEY_LWC) && serve_tls_init(&o) != 0)
        goto out;
    if (o.rb_forced_fork)
        fprintf(stderr, "isob serve: --monitor %s: the workers roll back by fork (a worker "
                "serving in the confined context or child cannot track its own pages)\n",
                serve_monitor_name(o.monitor));
    if (prefork && o.prefork_plain) {
        if (prefork_start(&sv) != 0)
            goto out;
        fprintf(stderr, "isob serve: %zu workers, serving sessions one after another without "
                "rolling back\n", o.workers);
    } else if (prefork) {
        if (prefork_start(&sv) != 0)
            goto out;
        fprintf(stderr, "isob serve: %zu workers, rolling back by %s after each session%s\n",
                o.workers, rb_method_name(o.rb_method),
                o.rb_verify ? ", each rollback verified against the snapshot" : "");
    }
    fprintf(stderr, "isob serve: listening on %s:%u (mechanism %s), session %s, %s%s%s%s%s\n", o.bind,
            port, m->name, session_name(&o), o.http ? "http" : "memcache",
            o.monitor ? ", monitor " : "", o.monitor ? serve_monitor_name(o.monitor) : "",
            o.tls == TLS_KEY_LWC ? ", tls key in lwc" : o.tls ? ", tls key in process" : "",
            !o.tls ? "" : o.tls_key ? " (from a file)" : o.tls_key_type == TLS_RSA2048
                                                          ? " (rsa2048)" : " (ecdsa-p256)");
    /* The loop serves only under shared and --per-connection: there it runs
     * under the monitor; workers and fork sessions have their own. */
    status = o.monitor && (o.session == SESSION_SHARED || o.per_connection)
                 ? serve_monitor_run(&sv, run, 0) : run(&sv);
out:
    while (sv.conns)
        conn_close(&sv, sv.conns);
    if (o.session == SESSION_FORK)
        session_fork_end_all(&sv);
    if (prefork)
        prefork_end_all(&sv);
    free(sv.kids);
    if (sv.lfd >= 0)
        close(sv.lfd);
    if (sv.sfd >= 0)
        close(sv.sfd);
    if (sv.cfd >= 0)
        close(sv.cfd);
    if (sv.ep >= 0)
        close(sv.ep);
    if (sv.spare_fd >= 0)
        close(sv.spare_fd);
    serve_monitor_fini(&sv);
    if (o.tls)
        serve_tls_fini();
    isob_serve_fini(&sv.s);
    return status;
}
