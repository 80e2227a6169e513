/* process-pipe: a forked server process holds the trusted heap; the
 * message lives in a shared page as in process-futex, and a pipe pair
 * carries only a one-byte token each way.  A round trip is one write and
 * one read per side, exactly the bare pipe ping-pong of the pingpong
 * benchmark, so any difference between the two is the compartment's.
 * A dead server reads as end of file on the reply pipe, and the call
 * returns -EOWNERDEAD with the cause (mechanism.h, Liveness). */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "isobench/mechanism.h"
#include "isobench/server.h"

/* How long destroy waits for the server to leave before killing it. */
#define PIPE_REAP_TIMEOUT_MS 2000

/* The tokens: a request to serve the entry in the shared page, the order
 * to leave, and the reply. */
enum { PIPE_TOK_CALL = 'c', PIPE_TOK_QUIT = 'q', PIPE_TOK_DONE = 'd' };

/* The page shared by caller and server: the entry and the result, then
 * the message on its own cache line. */
struct pipe_shared {
    uint32_t entry;
    long ret;
    struct isob_msg msg __attribute__((aligned(64)));
};

struct pipe_comp {
    struct isob_comp base;
    struct pipe_shared *sh;
    size_t shared_size;
    struct isob_server server;
    int req[2];  /* caller -> server; the caller keeps both ends (see create) */
    int rep[2];  /* server -> caller; the caller keeps only rep[0] */
};

/* Write one token; 0 or -errno (-EPIPE when nothing was written). */
static inline int pipe_put(int fd, char tok)
{
    ssize_t n;
    while ((n = write(fd, &tok, 1)) < 0 && errno == EINTR)
        ;
    return n == 1 ? 0 : n < 0 ? -errno : -EPIPE;
}

/* Read one token; the token, or -errno (-EPIPE at end of file: the other
 * side is gone). */
static inline int pipe_get(int fd)
{
    unsigned char tok;
    ssize_t n;
    while ((n = read(fd, &tok, 1)) < 0 && errno == EINTR)
        ;
    return n == 1 ? tok : n < 0 ? -errno : -EPIPE;
}

static void pipe_serve(struct pipe_comp *p, struct isob_trusted *t)
{
    while (pipe_get(p->req[0]) == PIPE_TOK_CALL) {
        p->sh->ret = isob_trusted_call(t, p->sh->entry, &p->sh->msg, p->base.data_cap);
        if (pipe_put(p->rep[1], PIPE_TOK_DONE) != 0)
            return;
    }
}

/* The server process's body; isob_server_start calls it once ready, with
 * only the server's pipe ends left open. */
static void pipe_child(void *arg, struct isob_trusted *t)
{
    pipe_serve(arg, t);
}

static void pipe_close_all(struct pipe_comp *p)
{
    for (int i = 0; i < 2; i++) {
        if (p->req[i] >= 0)
            close(p->req[i]);
        if (p->rep[i] >= 0)
            close(p->rep[i]);
    }
}

static int pipe_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    if (spec->shared_size <= sizeof(struct pipe_shared))
        return -EINVAL;
    struct pipe_comp *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->req[0] = p->req[1] = p->rep[0] = p->rep[1] = -1;
    p->shared_size = spec->shared_size;
    p->base.data_cap = p->shared_size - sizeof(struct pipe_shared);
    int err = -ENOMEM;
    p->sh = isob_map(p->shared_size, 1);
    if (!p->sh)
        goto fail;
    if (pipe2(p->req, O_CLOEXEC) != 0 || pipe2(p->rep, O_CLOEXEC) != 0) {
        err = -errno;
        goto fail;
    }
    struct isob_server_spec ss = {.cpu = spec->server_cpu, .heap_size = spec->heap_size,
                                  .host_fds = spec->host_fds, .n_host_fds = spec->n_host_fds,
                                  .serve = pipe_child, .arg = p,
                                  .keep_fd = {p->req[0], p->rep[1]}};
    err = isob_server_start(&p->server, &ss);
    if (err != 0)
        goto fail;
    /* The caller holds no write end of the reply pipe, so a dead server
     * reads as end of file there instead of a wait forever.  It keeps the
     * read end of the request pipe, so a request to a dead server lands in
     * the pipe's buffer instead of raising SIGPIPE in the caller. */
    close(p->rep[1]);
    p->rep[1] = -1;
    *out = &p->base;
    return 0;
fail:
    pipe_close_all(p);
    isob_unmap(p->sh, p->shared_size);
    free(p);
    return err;
}

/* The channel broke (end of file, an error): the server is gone, or is
 * made to be; every later call fails at once. */
static __attribute__((noinline, cold)) long pipe_died(struct pipe_comp *p)
{
    return isob_server_ended(&p->server, p->base.why, sizeof p->base.why);
}

static long pipe_call(struct isob_comp *c, unsigned entry)
{
    struct pipe_comp *p = (struct pipe_comp *)c;
    /* A request to a server already seen dead would only fill the pipe's
     * buffer, and then block. */
    if (p->server.ended)
        return -EOWNERDEAD;
    p->sh->entry = entry;
    int rc = pipe_put(p->req[1], PIPE_TOK_CALL);
    if (rc == 0)
        rc = pipe_get(p->rep[0]);
    return rc < 0 ? pipe_died(p) : p->sh->ret;
}

static struct isob_msg *pipe_shared_msg(struct isob_comp *c)
{
    return &((struct pipe_comp *)c)->sh->msg;
}

static void pipe_destroy(struct isob_comp *c)
{
    struct pipe_comp *p = (struct pipe_comp *)c;
    /* An explicit order, because closing our end is not enough: a process
     * the caller forks for its own ends (a test's child, say) holds a copy
     * of it.  (Servers of other compartments close theirs.) */
    if (!p->server.ended)
        pipe_put(p->req[1], PIPE_TOK_QUIT);
    pipe_close_all(p);
    isob_server_stop(&p->server, PIPE_REAP_TIMEOUT_MS);
    isob_unmap(p->sh, p->shared_size);
    free(p);
}

/* The trusted heap lives in the server process, at the address the
 * trusted code reports. */
static int pipe_locate(struct isob_comp *c, uint64_t trusted_addr, struct isob_place *out)
{
    out->pid = ((struct pipe_comp *)c)->server.pid;
    out->addr = (uintptr_t)trusted_addr;
    return 0;
}

const struct isob_mechanism isob_mech_process_pipe = {
    .name = "process-pipe",
    .summary = "forked server process, shared memory, one-byte token over a pipe pair",
    .props = ISOB_ISOLATES_MEMORY | ISOB_SEPARATE_AS | ISOB_TWO_CONTEXTS,
    .probe = isob_probe_always,
    .create = pipe_create,
    .call = pipe_call,
    .shared = pipe_shared_msg,
    .destroy = pipe_destroy,
    .locate = pipe_locate,
};
