/* process-socket: a forked server process holds the trusted heap; the
 * message lives in a shared page as in process-futex, and an AF_UNIX
 * stream socketpair carries only a one-byte token each way.  A round trip
 * is one send and one receive per side, the bare socket ping-pong of the
 * pingpong benchmark, so any difference between the two is the
 * compartment's.  A dead server reads as end of stream, and the call
 * returns -EOWNERDEAD with the cause (mechanism.h, Liveness). */
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "isobench/mechanism.h"
#include "isobench/server.h"

/* How long destroy waits for the server to leave before killing it. */
#define SOCK_REAP_TIMEOUT_MS 2000

/* The tokens: a request to serve the entry in the shared page, the order
 * to leave, and the reply. */
enum { SOCK_TOK_CALL = 'c', SOCK_TOK_QUIT = 'q', SOCK_TOK_DONE = 'd' };

/* The page shared by caller and server: the entry and the result, then
 * the message on its own cache line. */
struct sock_shared {
    uint32_t entry;
    long ret;
    struct isob_msg msg __attribute__((aligned(64)));
};

struct sock_comp {
    struct isob_comp base;
    struct sock_shared *sh;
    size_t shared_size;
    struct isob_server server;
    int sv[2];  /* the caller's end [0], the server's end [1] */
};

/* Send one token; 0 or -errno.  MSG_NOSIGNAL: a dead peer is an error to
 * return, not a SIGPIPE that kills the caller. */
static inline int sock_put(int fd, char tok)
{
    ssize_t n;
    while ((n = send(fd, &tok, 1, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    return n == 1 ? 0 : n < 0 ? -errno : -EPIPE;
}

/* Receive one token; the token, or -errno (-EPIPE at end of stream: the
 * other side is gone). */
static inline int sock_get(int fd)
{
    unsigned char tok;
    ssize_t n;
    while ((n = recv(fd, &tok, 1, 0)) < 0 && errno == EINTR)
        ;
    return n == 1 ? tok : n < 0 ? -errno : -EPIPE;
}

static void sock_serve(struct sock_comp *s, struct isob_trusted *t)
{
    while (sock_get(s->sv[1]) == SOCK_TOK_CALL) {
        s->sh->ret = isob_trusted_call(t, s->sh->entry, &s->sh->msg, s->base.data_cap);
        if (sock_put(s->sv[1], SOCK_TOK_DONE) != 0)
            return;
    }
}

/* The server process's body; isob_server_start calls it once ready, with
 * only the server's end left open. */
static void sock_child(void *arg, struct isob_trusted *t)
{
    sock_serve(arg, t);
}

static int sock_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    if (spec->shared_size <= sizeof(struct sock_shared))
        return -EINVAL;
    struct sock_comp *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->sv[0] = s->sv[1] = -1;
    s->shared_size = spec->shared_size;
    s->base.data_cap = s->shared_size - sizeof(struct sock_shared);
    int err = -ENOMEM;
    s->sh = isob_map(s->shared_size, 1);
    if (!s->sh)
        goto fail;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s->sv) != 0) {
        err = -errno;
        goto fail;
    }
    struct isob_server_spec ss = {.cpu = spec->server_cpu, .heap_size = spec->heap_size,
                                  .host_fds = spec->host_fds, .n_host_fds = spec->n_host_fds,
                                  .serve = sock_child, .arg = s, .keep_fd = {s->sv[1], -1}};
    err = isob_server_start(&s->server, &ss);
    if (err != 0)
        goto fail;
    /* Without the server's end here, a dead server reads as end of stream
     * instead of a wait forever. */
    close(s->sv[1]);
    s->sv[1] = -1;
    *out = &s->base;
    return 0;
fail:
    for (int i = 0; i < 2; i++)
        if (s->sv[i] >= 0)
            close(s->sv[i]);
    isob_unmap(s->sh, s->shared_size);
    free(s);
    return err;
}

/* The channel broke (end of stream, an error): the server is gone, or is
 * made to be. */
static __attribute__((noinline, cold)) long sock_died(struct sock_comp *s)
{
    return isob_server_ended(&s->server, s->base.why, sizeof s->base.why);
}

static long sock_call(struct isob_comp *c, unsigned entry)
{
    struct sock_comp *s = (struct sock_comp *)c;
    s->sh->entry = entry;
    /* A server already seen dead fails the send at once (EPIPE). */
    int rc = sock_put(s->sv[0], SOCK_TOK_CALL);
    if (rc == 0)
        rc = sock_get(s->sv[0]);
    return rc < 0 ? sock_died(s) : s->sh->ret;
}

static struct isob_msg *sock_shared_msg(struct isob_comp *c)
{
    return &((struct sock_comp *)c)->sh->msg;
}

static void sock_destroy(struct isob_comp *c)
{
    struct sock_comp *s = (struct sock_comp *)c;
    /* An explicit order, because closing our end is not enough: a process
     * the caller forks for its own ends (a test's child, say) holds a copy
     * of it.  (Servers of other compartments close theirs.) */
    if (!s->server.ended)
        sock_put(s->sv[0], SOCK_TOK_QUIT);
    close(s->sv[0]);
    isob_server_stop(&s->server, SOCK_REAP_TIMEOUT_MS);
    isob_unmap(s->sh, s->shared_size);
    free(s);
}

/* The trusted heap lives in the server process, at the address the
 * trusted code reports. */
static int sock_locate(struct isob_comp *c, uint64_t trusted_addr, struct isob_place *out)
{
    out->pid = ((struct sock_comp *)c)->server.pid;
    out->addr = (uintptr_t)trusted_addr;
    return 0;
}

const struct isob_mechanism isob_mech_process_socket = {
    .name = "process-socket",
    .summary = "forked server process, shared memory, one-byte token over an AF_UNIX socketpair",
    .props = ISOB_ISOLATES_MEMORY | ISOB_SEPARATE_AS | ISOB_TWO_CONTEXTS,
    .probe = isob_probe_always,
    .create = sock_create,
    .call = sock_call,
    .shared = sock_shared_msg,
    .destroy = sock_destroy,
    .locate = sock_locate,
};
