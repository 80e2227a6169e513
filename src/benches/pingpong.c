/* pingpong: the plainest round trip between two processes over one
 * primitive (futex on shared memory, a pipe pair, an AF_UNIX socketpair),
 * with no compartment and no message.  It is the floor that the process
 * mechanisms are held to: they may add nothing per round trip. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/bench.h"
#include "isobench/futex.h"
#include "isobench/server.h"

enum pp_primitive { PP_FUTEX, PP_PIPE, PP_SOCKET, PP__COUNT };
static const char *const pp_names[PP__COUNT] = {"futex", "pipe", "socket"};

struct pp {
    enum pp_primitive prim;
    uint32_t *word;   /* futex: shared handoff word */
    int to_srv[2];    /* pipe/socket: caller writes [1], server reads [0] (socket: one pair) */
    int to_cli[2];
    pid_t server;
};

static void pp_serve(struct pp *p)
{
    char b;
    switch (p->prim) {
    case PP_FUTEX:
        while (isob_handoff_wait(p->word, 0) == ISOB_HS_REQ)
            isob_handoff_reply(p->word, 0);
        break;
    case PP_PIPE:
        while (read(p->to_srv[0], &b, 1) == 1 && write(p->to_cli[1], &b, 1) == 1)
            ;
        break;
    case PP_SOCKET:
        while (read(p->to_srv[1], &b, 1) == 1 && write(p->to_srv[1], &b, 1) == 1)
            ;
        break;
    default:
        break;
    }
}

static int pp_start(struct pp *p, int server_cpu)
{
    int rc = 0;
    if (p->prim == PP_FUTEX) {
        p->word = isob_map(4096, 1);
        rc = p->word ? 0 : -ENOMEM;
    } else if (p->prim == PP_PIPE) {
        rc = (pipe(p->to_srv) == 0 && pipe(p->to_cli) == 0) ? 0 : -errno;
    } else {
        rc = socketpair(AF_UNIX, SOCK_STREAM, 0, p->to_srv) == 0 ? 0 : -errno;
    }
    if (rc)
        return rc;
    fflush(NULL);
    p->server = fork();
    if (p->server < 0)
        return -errno;
    if (p->server == 0) {
        if (!isob_server_enter(server_cpu, 4096 * 2))
            _exit(1);
        pp_serve(p);
        _exit(0);
    }
    return 0;
}

static void pp_stop(struct pp *p)
{
    if (p->prim == PP_FUTEX) {
        isob_handoff_exit(p->word, 0);
    } else if (p->prim == PP_PIPE) {
        close(p->to_srv[1]);
        close(p->to_srv[0]);
        close(p->to_cli[0]);
        close(p->to_cli[1]);
    } else {
        close(p->to_srv[0]);
        close(p->to_srv[1]);
    }
    isob_server_reap(p->server, 2000);
    if (p->word)
        isob_unmap(p->word, 4096);
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
            isob_pin_self(pl == ISOB_PLACE_UNPINNED ? -1 : ctx->opts.client_cpu);
            struct pp p = {.prim = (enum pp_primitive)prim};
            int rc = pp_start(&p, scpu);
            if (rc) {
                char reason[128];
                snprintf(reason, sizeof reason, "start: %s", isob_strerror(rc));
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
                PP_MEASURE(isob_handoff_request(p.word, 0));
                break;
            case PP_PIPE:
                PP_MEASURE({
                    bad += write(p.to_srv[1], &b, 1) != 1;
                    bad += read(p.to_cli[0], &b, 1) != 1;
                });
                break;
            default:
                PP_MEASURE({
                    bad += write(p.to_srv[0], &b, 1) != 1;
                    bad += read(p.to_srv[0], &b, 1) != 1;
                });
                break;
            }
#undef PP_MEASURE
            pp_stop(&p);
            isob_emit_result(ctx, "pingpong", params, &s, &batched, bad ? "failed" : "ok",
                             bad ? "a read or write failed" : NULL, NULL);
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
