/* pingpong: the plainest round trip between two processes over one
 * primitive (futex on shared memory, a pipe pair, an AF_UNIX socketpair),
 * with no compartment and no message.  It is the floor that the process
 * mechanisms are held to: they may add nothing per round trip. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "isobench/bench.h"
#include "isobench/futex.h"
#include "isobench/server.h"

enum pp_primitive { PP_FUTEX, PP_PIPE, PP_SOCKET, PP__COUNT };
static const char *const pp_names[PP__COUNT] = {"futex", "pipe", "socket"};

/* How long stopping waits for the server to leave before killing it. */
#define PP_REAP_TIMEOUT_MS 2000
/* The server's heap: it serves nothing, but every server has one. */
#define PP_HEAP_BYTES (4096 * 2)

/* The futex primitive's shared page: the robust handoff word of the
 * process mechanisms (futex.h), so that this floor is their round trip
 * with nothing around it, and a dead server ends the wait as it does
 * theirs. */
struct pp_futex_page {
    struct isob_phs hs __attribute__((aligned(64)));
    uint32_t quit;
};

struct pp {
    enum pp_primitive prim;
    struct pp_futex_page *page; /* futex */
    uint32_t tid;               /* futex: the handoff word's idle value */
    int to_srv[2];              /* pipe: caller writes [1], server reads [0]; socket: the pair, caller [0] */
    int to_cli[2];              /* pipe: server writes [1], caller reads [0] */
    struct isob_server server;
};

static int pp_setup(void *arg, struct isob_trusted *t)
{
    (void)t;
    struct pp *p = arg;
    return p->prim == PP_FUTEX ? isob_phs_serve_init(&p->page->hs, &p->tid) : 0;
}

static void pp_serve(void *arg, struct isob_trusted *t)
{
    (void)t;
    struct pp *p = arg;
    char b;
    switch (p->prim) {
    case PP_FUTEX: {
        uint32_t *w = &p->page->hs.word, tid = p->tid;
        for (;;) {
            isob_phs_wait(w, tid);
            if (p->page->quit)
                return;
            isob_phs_reply(w, tid);
        }
    }
    case PP_PIPE:
        while (read(p->to_srv[0], &b, 1) == 1 && write(p->to_cli[1], &b, 1) == 1)
            ;
        break;
    case PP_SOCKET:
        while (recv(p->to_srv[1], &b, 1, 0) == 1 && send(p->to_srv[1], &b, 1, MSG_NOSIGNAL) == 1)
            ;
        break;
    default:
        break;
    }
}

static void pp_close(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Start the server.  Like process-pipe and process-socket, the caller then
 * holds no write end of what it reads, so a dead server reads as end of
 * file, and keeps the read end of what it writes, so that a write to a
 * dead server fails or lands in a buffer instead of raising SIGPIPE. */
static int pp_start(struct pp *p, int server_cpu)
{
    int rc = 0;
    p->to_srv[0] = p->to_srv[1] = p->to_cli[0] = p->to_cli[1] = -1;
    if (p->prim == PP_FUTEX) {
        p->page = isob_map(4096, 1);
        rc = p->page ? 0 : -ENOMEM;
    } else if (p->prim == PP_PIPE) {
        rc = (pipe2(p->to_srv, O_CLOEXEC) == 0 && pipe2(p->to_cli, O_CLOEXEC) == 0) ? 0 : -errno;
    } else {
        rc = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p->to_srv) == 0 ? 0 : -errno;
    }
    struct isob_server_spec ss = {.cpu = server_cpu, .heap_size = PP_HEAP_BYTES, .setup = pp_setup,
                                  .serve = pp_serve, .arg = p, .keep_fd = {-1, -1}};
    if (p->prim == PP_PIPE) {
        ss.keep_fd[0] = p->to_srv[0];
        ss.keep_fd[1] = p->to_cli[1];
    } else if (p->prim == PP_SOCKET) {
        ss.keep_fd[0] = p->to_srv[1];
    }
    if (rc == 0)
        rc = isob_server_start(&p->server, &ss);
    if (rc == 0) {
        if (p->prim == PP_FUTEX)
            p->tid = isob_phs_tid(&p->page->hs);
        else if (p->prim == PP_PIPE)
            pp_close(&p->to_cli[1]);
        else
            pp_close(&p->to_srv[1]);
    }
    return rc;
}

/* Order the server out and reap it.  0, or -ETIMEDOUT when it had to be
 * killed. */
static int pp_stop(struct pp *p)
{
    if (p->prim == PP_FUTEX && p->page) {
        p->page->quit = 1;
        if (isob_phs_post(&p->page->hs.word, p->tid) == 0)
            isob_futex_wake(&p->page->hs.word, 1, 0);
    }
    for (int i = 0; i < 2; i++) {
        pp_close(&p->to_srv[i]);
        pp_close(&p->to_cli[i]);
    }
    int rc = p->server.pid > 0 ? isob_server_stop(&p->server, PP_REAP_TIMEOUT_MS) : 0;
    if (p->page)
        isob_unmap(p->page, 4096);
    p->page = NULL;
    return rc;
}

static int pp_run(struct isob_bench_ctx *ctx)
{
    const char *want = ctx->opts.param ? ctx->opts.param : NULL;
    for (unsigned prim = 0; prim < PP__COUNT; prim++) {
        if (want && strcmp(want, pp_names[prim]) != 0)
            continue;
        for (unsigned pl = 0; pl < 3; pl++) {
            if (!(ctx->opts.placements & (1u << pl)))
                continue;
            char params[160];
            snprintf(params, sizeof params, "{\"placement\":\"%s\",\"primitive\":\"%s\"}",
                     isob_placement_name((enum isob_placement)pl), pp_names[prim]);
            int scpu = isob_server_cpu((enum isob_placement)pl, ctx->opts.client_cpu);
            if (pl == ISOB_PLACE_CROSS_CPU && scpu < 0) {
                isob_emit_result(ctx, "pingpong", params, NULL, NULL, "skipped",
                                 "cross-cpu placement needs two CPUs and a pinned client", NULL);
                continue;
            }
            char reason[ISOB_COMP_WHY_LEN + 64] = "";
            int rc = isob_place_self((enum isob_placement)pl, ctx->opts.client_cpu, reason, sizeof reason);
            if (rc) {
                isob_emit_result(ctx, "pingpong", params, NULL, NULL, "failed", reason, NULL);
                continue;
            }
            struct pp p = {.prim = (enum pp_primitive)prim};
            rc = pp_start(&p, scpu);
            if (rc) {
                snprintf(reason, sizeof reason, "start: %s", isob_strerror(rc));
                pp_stop(&p);
                isob_emit_result(ctx, "pingpong", params, NULL, NULL, "failed", reason, NULL);
                continue;
            }
            long bad = 0;
            char b = 'x';
            struct isob_samples s;
            struct isob_batched batched;
            if (isob_batched_alloc(&batched, ctx->opts.batch_reps) != 0) {
                pp_stop(&p);
                isob_emit_result(ctx, "pingpong", params, NULL, NULL, "failed", "out of memory", NULL);
                continue;
            }
            if (isob_samples_alloc(&s, ctx->opts.n, ctx->ctr->nev) != 0) {
                isob_batched_free(&batched);
                pp_stop(&p);
                isob_emit_result(ctx, "pingpong", params, NULL, NULL, "failed", "out of memory", NULL);
                continue;
            }
            /* After the first failure (the server died) nothing more is
             * sent: a pipe whose reader is gone would fill and block. */
#define PP_MEASURE(BODY)                                                                     \
    do {                                                                                     \
        for (size_t w = 0; w < ctx->opts.warmup; w++) {                                      \
            BODY;                                                                            \
        }                                                                                    \
        ISOB_MEASURE_EACH(ctx->ctr, &s, BODY);                                               \
        ISOB_MEASURE_BATCHED(ctx->ctr, ctx->opts.batch_k, &batched, BODY);                   \
    } while (0)
            switch (p.prim) {
            case PP_FUTEX:
                PP_MEASURE(if (!bad) bad += isob_phs_request(&p.page->hs.word, p.tid) != 0);
                break;
            case PP_PIPE:
                PP_MEASURE(if (!bad) {
                    bad += write(p.to_srv[1], &b, 1) != 1;
                    bad += read(p.to_cli[0], &b, 1) != 1;
                });
                break;
            default:
                PP_MEASURE(if (!bad) {
                    bad += send(p.to_srv[0], &b, 1, MSG_NOSIGNAL) != 1;
                    bad += recv(p.to_srv[0], &b, 1, 0) != 1;
                });
                break;
            }
#undef PP_MEASURE
            if (bad) {
                /* The round trip broke: say how the server ended. */
                char why[ISOB_COMP_WHY_LEN];
                isob_server_ended(&p.server, why, sizeof why);
                snprintf(reason, sizeof reason, "the round trip failed; the server %s", why);
            }
            pp_stop(&p);
            isob_emit_result(ctx, "pingpong", params, bad ? NULL : &s, bad ? NULL : &batched,
                             bad ? "failed" : "ok", bad ? reason : NULL, NULL);
            isob_samples_free(&s);
            isob_batched_free(&batched);
        }
    }
    return 0;
}

const struct isob_bench isob_bench_pingpong = {
    .name = "pingpong",
    .summary = "bare two-process ping-pong over futex, pipe and socket (the floor for process mechanisms)",
    .needs_mechanism = 0,
    .run = pp_run,
};
