/* process-pipe: a forked server process holds the trusted heap; the
 * message lives in a shared page as in process-futex, and a pipe pair
 * carries only a one-byte token each way.  A round trip is one write and
 * one read per side, exactly the bare pipe ping-pong of the pingpong
 * benchmark, so any difference between the two is the compartment's. */
#include <fcntl.h>
#include <stdio.h>
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
    pid_t server;
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

/* The server process's body: drop the caller's pipe ends, then serve.
 * isob_server_fork calls it after entering. */
static void pipe_child(void *arg, struct isob_trusted *t)
{
    struct pipe_comp *p = arg;
    close(p->req[1]);
    close(p->rep[0]);
    pipe_serve(p, t);
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
    p->server = isob_server_fork(spec->server_cpu, spec->heap_size, pipe_child, p);
    if (p->server < 0) {
        err = (int)p->server;
        goto fail;
    }
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

static long pipe_call(struct isob_comp *c, unsigned entry)
{
    struct pipe_comp *p = (struct pipe_comp *)c;
    p->sh->entry = entry;
    int rc = pipe_put(p->req[1], PIPE_TOK_CALL);
    if (rc == 0)
        rc = pipe_get(p->rep[0]);
    return rc < 0 ? rc : p->sh->ret;
}

static struct isob_msg *pipe_shared_msg(struct isob_comp *c)
{
    return &((struct pipe_comp *)c)->sh->msg;
}

static void pipe_destroy(struct isob_comp *c)
{
    struct pipe_comp *p = (struct pipe_comp *)c;
    /* An explicit order, because closing our end is not enough: servers
     * forked later for other compartments inherit copies of it. */
    pipe_put(p->req[1], PIPE_TOK_QUIT);
    pipe_close_all(p);
    isob_server_reap(p->server, PIPE_REAP_TIMEOUT_MS);
    isob_unmap(p->sh, p->shared_size);
    free(p);
}

/* The trusted heap lives in the server process, at the address the
 * trusted code reports. */
static int pipe_locate(struct isob_comp *c, uint64_t trusted_addr, struct isob_place *out)
{
    out->pid = ((struct pipe_comp *)c)->server;
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
