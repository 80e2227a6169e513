/* lwc-switch: the switch of light-weight contexts against the switches lwC
 * was compared with (Litton et al., OSDI 2016, switch table), one-way and
 * round trip, never mixed.
 *
 * Variants (params.variant), each a bare handoff between two execution
 * contexts A (this thread) and B, with nothing else around it:
 *   lwc            lwc_switch between a creator and its context (lwc.h)
 *   process        two processes, POSIX semaphores in shared memory (the
 *                  paper's process switch; semaphores on FreeBSD, futexes
 *                  underneath in glibc)
 *   process-futex  two processes, the robust futex handoff of futex.h
 *   thread         two threads of this process, POSIX semaphores (the
 *                  paper's kernel-thread switch)
 *   ucontext       glibc's swapcontext, which also saves the signal mask
 *                  with a system call (FreeBSD's getcontext/setcontext are
 *                  system calls; glibc's swapcontext is one rt_sigprocmask)
 *   uthread        the hand-written user-level switch of uthread_x86.S
 *
 * params.per says what one sample is:
 *   round-trip  A to B and back, timed by A (per-iteration samples and the
 *               batched estimate of the harness);
 *   one-way     one switch, A to B or B to A: the side that switches
 *               writes a timestamp into shared memory just before, the
 *               side switched to reads the clock first thing; a sample is
 *               the difference (one clock reading included, as the empty
 *               region is).  Samples alternate A->B and B->A; both medians
 *               are in params.
 * The paper's figures are one-way.  Round trip / 2 is not a one-way
 * figure and is not reported as one.  Every result checks that B ran
 * exactly once per switch to it. */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "isobench/bench.h"
#include "isobench/futex.h"
#include "isobench/lwc.h"
#include "isobench/server.h"
#include "xclock.h"

/* How long A waits on a semaphore before it asks whether B still lives:
 * only a bound for a B that died, never reached while B serves. */
#define SW_SEM_DEADLINE_S 60
/* How long stopping waits for a server process to leave before killing it. */
#define SW_REAP_TIMEOUT_MS 2000
/* The trusted heap every server process maps, unused here. */
#define SW_SERVER_HEAP_BYTES (4096 * 2)
/* Stack of B for ucontext and uthread, guard page included. */
#define SW_STACK_BYTES (256u * 1024u)

enum sw_variant { SW_LWC, SW_PROCESS, SW_PROCESS_FUTEX, SW_THREAD, SW_UCONTEXT, SW_UTHREAD, SW__COUNT };
static const char *const sw_names[SW__COUNT] = {"lwc", "process", "process-futex", "thread", "ucontext",
                                                "uthread"};
static const char *const sw_primitive[SW__COUNT] = {
    "lwc_switch (robust futex)", "POSIX semaphores, shared memory", "robust futex (futex.h)",
    "POSIX semaphores", "swapcontext (one rt_sigprocmask)", "register switch, no system call",
};

/* What B does when switched to. */
enum sw_mode { SW_ECHO = 0, SW_STAMP = 1, SW_EXIT = 2 };

/* Memory A and B share (MAP_SHARED, so also across fork). */
struct sw_page {
    struct isob_phs hs __attribute__((aligned(64)));
    sem_t to_b __attribute__((aligned(64)));
    sem_t to_a;
    uint32_t mode;
    uint32_t tid;      /* process-futex: the handoff word's idle value */
    uint64_t count;    /* switches B received */
    uint64_t stamp;    /* the timestamp of the switch in flight */
    uint64_t idx;      /* next slot of down[] */
    int tsc;           /* B's clock: as A's */
    uint64_t down[];   /* one-way samples A->B, written by B */
};

struct sw_run {
    struct isob_xclock *x;
    enum sw_variant v;
    struct sw_page *pg;
    size_t pg_bytes;
    int server_cpu;
    /* lwc */
    int h;
    /* process, process-futex */
    struct isob_server server;
    /* thread */
    pthread_t thr;
    int thr_started;
    /* ucontext, uthread */
    ucontext_t uc_a, uc_b;
    void *sp_a, *sp_b;
    void *stack;
};

void isob_uthread_switch(void **save_sp, void *to_sp);
void *isob_uthread_init(void *stack_top, void (*fn)(void *), void *arg);

static inline uint64_t pg_now(const struct sw_page *pg)
{
    return pg->tsc ? isob_timer_read() : isob_clock_ns();
}

/* B's work on each switch to it: count, and in STAMP mode take the
 * arrival time first and stamp last.  Returns 0 when ordered out. */
static inline int b_arrive(struct sw_page *pg)
{
    uint64_t t = pg_now(pg);
    uint32_t mode = pg->mode;
    if (mode == SW_EXIT)
        return 0;
    pg->count++;
    if (mode == SW_STAMP)
        pg->down[pg->idx++] = t - pg->stamp;
    return 1;
}

static inline void b_depart(struct sw_page *pg)
{
    if (pg->mode == SW_STAMP)
        pg->stamp = pg_now(pg);
}

/* ---- B, per variant ---- */

static int b_futex_setup(void *arg, struct isob_trusted *t)
{
    (void)t;
    struct sw_run *r = arg;
    uint32_t tid;
    int rc = isob_phs_serve_init(&r->pg->hs, &tid);
    r->pg->tid = tid;
    return rc;
}

static void b_futex_serve(void *arg, struct isob_trusted *t)
{
    (void)t;
    struct sw_page *pg = ((struct sw_run *)arg)->pg;
    uint32_t *w = &pg->hs.word, tid = pg->tid;
    for (;;) {
        isob_phs_wait(w, tid);
        if (!b_arrive(pg))
            return;
        b_depart(pg);
        isob_phs_reply(w, tid);
    }
}

static void b_sem_loop(struct sw_page *pg)
{
    for (;;) {
        while (sem_wait(&pg->to_b) != 0)
            ;
        if (!b_arrive(pg)) {
            sem_post(&pg->to_a);
            return;
        }
        b_depart(pg);
        sem_post(&pg->to_a);
    }
}

static void b_sem_serve(void *arg, struct isob_trusted *t)
{
    (void)t;
    b_sem_loop(((struct sw_run *)arg)->pg);
}

static void *b_thread(void *arg)
{
    struct sw_run *r = arg;
    if (r->server_cpu >= 0)
        isob_pin_self(r->server_cpu);
    b_sem_loop(r->pg);
    return NULL;
}

static struct sw_run *uc_run;

static void b_ucontext(void)
{
    struct sw_run *r = uc_run;
    for (;;) {
        if (!b_arrive(r->pg))
            setcontext(&r->uc_a);
        b_depart(r->pg);
        swapcontext(&r->uc_b, &r->uc_a);
    }
}

static void b_uthread(void *arg)
{
    struct sw_run *r = arg;
    for (;;) {
        /* Ordered out, it still switches back: a uthread has no way to
         * end on its own, and dropping its stack ends it. */
        if (b_arrive(r->pg))
            b_depart(r->pg);
        isob_uthread_switch(&r->sp_b, r->sp_a);
    }
}

/* ---- A: start, one switch there and back, stop ---- */

static int sw_start(struct sw_run *r)
{
    struct sw_page *pg = r->pg;
    switch (r->v) {
    case SW_LWC: {
        struct lwc_spec sp = {.res = LWC_RES_VM, .how = LWC_SHARED, .vm = {pg, r->pg_bytes}};
        int caller;
        struct lwc_msg in;
        int h = lwc_create(&sp, 1, 0, &caller, &in);
        if (h == LWC_SWITCHED) {
            /* The first switch carries B's CPU. */
            if ((int64_t)in.w[0] >= 0 && isob_pin_self((int)in.w[0]) != 0)
                _exit(1);
            for (;;) {
                b_depart(pg);
                lwc_switch(caller, NULL, NULL, NULL);
                if (!b_arrive(pg))
                    _exit(0);
            }
        }
        if (h < 0)
            return h;
        r->h = h;
        struct lwc_msg first = {{(uint64_t)(int64_t)r->server_cpu}};
        return lwc_switch(h, &first, NULL, NULL);
    }
    case SW_PROCESS:
    case SW_PROCESS_FUTEX: {
        if (r->v == SW_PROCESS && (sem_init(&pg->to_b, 1, 0) != 0 || sem_init(&pg->to_a, 1, 0) != 0))
            return -errno;
        struct isob_server_spec ss = {.cpu = r->server_cpu, .heap_size = SW_SERVER_HEAP_BYTES,
                                      .setup = r->v == SW_PROCESS_FUTEX ? b_futex_setup : NULL,
                                      .serve = r->v == SW_PROCESS_FUTEX ? b_futex_serve : b_sem_serve,
                                      .arg = r, .keep_fd = {-1, -1}};
        int rc = isob_server_start(&r->server, &ss);
        if (rc == 0 && r->v == SW_PROCESS_FUTEX)
            pg->tid = isob_phs_tid(&pg->hs);
        return rc;
    }
    case SW_THREAD: {
        if (sem_init(&pg->to_b, 0, 0) != 0 || sem_init(&pg->to_a, 0, 0) != 0)
            return -errno;
        int rc = pthread_create(&r->thr, NULL, b_thread, r);
        r->thr_started = rc == 0;
        return -rc;
    }
    case SW_UCONTEXT:
    case SW_UTHREAD: {
        r->stack = isob_map(SW_STACK_BYTES, 0);
        if (!r->stack)
            return -ENOMEM;
        if (r->v == SW_UTHREAD) {
            r->sp_b = isob_uthread_init((char *)r->stack + SW_STACK_BYTES, b_uthread, r);
            return 0;
        }
        if (getcontext(&r->uc_b) != 0)
            return -errno;
        r->uc_b.uc_stack.ss_sp = r->stack;
        r->uc_b.uc_stack.ss_size = SW_STACK_BYTES;
        r->uc_b.uc_link = &r->uc_a;
        uc_run = r;
        makecontext(&r->uc_b, b_ucontext, 0);
        return 0;
    }
    default:
        return -EINVAL;
    }
}

static void sw_stop(struct sw_run *r)
{
    struct sw_page *pg = r->pg;
    pg->mode = SW_EXIT;
    switch (r->v) {
    case SW_LWC:
        if (r->h > 0)
            lwc_destroy(r->h);
        break;
    case SW_PROCESS:
        if (r->server.pid > 0) {
            sem_post(&pg->to_b);
            isob_server_stop(&r->server, SW_REAP_TIMEOUT_MS);
        }
        break;
    case SW_PROCESS_FUTEX:
        if (r->server.pid > 0) {
            if (isob_phs_post(&pg->hs.word, pg->tid) == 0)
                isob_futex_wake(&pg->hs.word, 1, 0);
            isob_server_stop(&r->server, SW_REAP_TIMEOUT_MS);
        }
        break;
    case SW_THREAD:
        if (r->thr_started) {
            sem_post(&pg->to_b);
            pthread_join(r->thr, NULL);
        }
        break;
    case SW_UCONTEXT:
    case SW_UTHREAD:
        isob_unmap(r->stack, SW_STACK_BYTES);
        break;
    default:
        break;
    }
}

/* One switch from A to B and back; 0, or non-zero when B is gone.  A
 * macro, so that the measured regions hold the switch and nothing else. */
#define SW_ROUND_TRIP(R, DEADLINE, FAILED)                                                         \
    switch ((R)->v) {                                                                              \
    case SW_LWC:                                                                                   \
        FAILED = lwc_switch((R)->h, NULL, NULL, NULL) != 0;                                        \
        break;                                                                                     \
    case SW_PROCESS_FUTEX:                                                                         \
        FAILED = isob_phs_request(&(R)->pg->hs.word, (R)->pg->tid) != 0;                           \
        break;                                                                                     \
    case SW_PROCESS:                                                                               \
    case SW_THREAD:                                                                                \
        sem_post(&(R)->pg->to_b);                                                                  \
        while ((FAILED = sem_clockwait(&(R)->pg->to_a, CLOCK_MONOTONIC, (DEADLINE)) != 0) &&      \
               errno == EINTR)                                                                     \
            ;                                                                                      \
        break;                                                                                     \
    case SW_UCONTEXT:                                                                              \
        swapcontext(&(R)->uc_a, &(R)->uc_b);                                                       \
        FAILED = 0;                                                                                \
        break;                                                                                     \
    default:                                                                                       \
        isob_uthread_switch(&(R)->sp_a, (R)->sp_b);                                                \
        FAILED = 0;                                                                                \
        break;                                                                                     \
    }

/* Why a measurement broke, in words. */
static void sw_broken(struct sw_run *r, char *why, size_t len)
{
    if (r->v == SW_LWC && lwc_why(r->h))
        snprintf(why, len, "the context %s", lwc_why(r->h));
    else if (r->v == SW_PROCESS || r->v == SW_PROCESS_FUTEX) {
        char w[ISOB_COMP_WHY_LEN];
        isob_server_ended(&r->server, w, sizeof w);
        snprintf(why, len, "the other process %s", w);
    } else
        snprintf(why, len, "a switch failed");
}

static void sw_params(char *buf, size_t len, const struct sw_run *r, const char *placement,
                      const char *per, const char *extra)
{
    snprintf(buf, len,
             "{\"placement\":\"%s\",\"variant\":\"%s\",\"per\":\"%s\",\"primitive\":\"%s\","
             "\"timebase\":\"%s\"%s%s}",
             placement, sw_names[r->v], per, sw_primitive[r->v], r->x->tsc ? "tsc" : "clock",
             extra ? "," : "", extra ? extra : "");
}

/* Round trips: warm-up, per-iteration samples, batched estimate. */
static void sw_measure_round_trip(struct sw_run *r, const char *placement)
{
    struct isob_bench_ctx *ctx = &r->x->ctx;
    char params[512], reason[256];
    struct isob_samples s;
    struct isob_batched b;
    int have_b = isob_batched_alloc(&b, ctx->opts.batch_reps) == 0;
    if (!have_b || isob_samples_alloc(&s, ctx->opts.n, ctx->ctr->nev) != 0) {
        if (have_b)
            isob_batched_free(&b);
        sw_params(params, sizeof params, r, placement, "round-trip", NULL);
        isob_emit_result(ctx, "lwc-switch", params, NULL, NULL, "failed", "out of memory", NULL);
        return;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += SW_SEM_DEADLINE_S;
    uint64_t made = 0, base = r->pg->count;
    int failed = 0;
    r->pg->mode = SW_ECHO;
    for (size_t w = 0; w < ctx->opts.warmup && !failed; w++) {
        SW_ROUND_TRIP(r, &deadline, failed);
        made++;
    }
#define SW_BODY(R, DEADLINE, FAILED, MADE)                                          \
    {                                                                               \
        SW_ROUND_TRIP((R), &(DEADLINE), (FAILED));                                  \
        (MADE)++;                                                                   \
        if ((FAILED))                                                               \
            break;                                                                  \
    }
    if (!failed)
        ISOB_MEASURE_EACH(ctx->ctr, &s, SW_BODY(r, deadline, failed, made));
    if (!failed)
        ISOB_MEASURE_BATCHED(ctx->ctr, ctx->opts.batch_k, &b, SW_BODY(r, deadline, failed, made));
#undef SW_BODY
    uint64_t got = r->pg->count - base;
    char extra[128];
    snprintf(extra, sizeof extra, "\"round_trips\":%llu,\"b_ran\":%llu", (unsigned long long)made,
             (unsigned long long)got);
    sw_params(params, sizeof params, r, placement, "round-trip", extra);
    if (failed) {
        sw_broken(r, reason, sizeof reason);
        isob_emit_result(ctx, "lwc-switch", params, NULL, NULL, "failed", reason, NULL);
    } else if (got != made) {
        snprintf(reason, sizeof reason, "B ran %llu times for %llu switches to it",
                 (unsigned long long)got, (unsigned long long)made);
        isob_emit_result(ctx, "lwc-switch", params, NULL, NULL, "failed", reason, NULL);
    } else {
        isob_emit_result(ctx, "lwc-switch", params, &s, &b, "ok", NULL, NULL);
    }
    isob_samples_free(&s);
    isob_batched_free(&b);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static double median_of(uint64_t *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmp_u64);
    return n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2;
}

/* One-way switches, timestamps handed across. */
static void sw_measure_one_way(struct sw_run *r, const char *placement, size_t iters)
{
    struct isob_bench_ctx *ctx = &r->x->ctx;
    struct sw_page *pg = r->pg;
    char params[640], reason[256];
    struct isob_samples s;
    uint64_t *up = calloc(iters ? iters : 1, sizeof *up);
    if (!up || isob_samples_alloc(&s, 2 * iters, 1) != 0) {
        free(up);
        sw_params(params, sizeof params, r, placement, "one-way", NULL);
        isob_emit_result(ctx, "lwc-switch", params, NULL, NULL, "failed", "out of memory", NULL);
        return;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += SW_SEM_DEADLINE_S;
    uint64_t base = pg->count;
    int failed = 0;
    size_t i;
    pg->idx = 0;
    pg->mode = SW_STAMP;
    for (i = 0; i < iters; i++) {
        pg->stamp = isob_xclock_now(r->x);
        SW_ROUND_TRIP(r, &deadline, failed);
        uint64_t t = isob_xclock_now(r->x);
        if (failed)
            break;
        up[i] = t - pg->stamp;
    }
    pg->mode = SW_ECHO;
    uint64_t got = pg->count - base;
    if (!failed && got == iters && pg->idx == iters) {
        for (size_t k = 0; k < iters; k++) {
            s.v[2 * k] = pg->down[k];
            s.v[2 * k + 1] = up[k];
        }
        s.n = 2 * iters;
    }
    char extra[256];
    double md = median_of(pg->down, pg->idx < iters ? pg->idx : iters), mu = median_of(up, i);
    snprintf(extra, sizeof extra,
             "\"method\":\"timestamps handed across\",\"round_trips\":%zu,\"b_ran\":%llu,"
             "\"median_a_to_b\":%.1f,\"median_b_to_a\":%.1f",
             i, (unsigned long long)got, md, mu);
    sw_params(params, sizeof params, r, placement, "one-way", extra);
    if (failed) {
        sw_broken(r, reason, sizeof reason);
        isob_emit_result(ctx, "lwc-switch", params, NULL, NULL, "failed", reason, NULL);
    } else if (got != iters || pg->idx != iters) {
        snprintf(reason, sizeof reason, "B ran %llu times (%llu stamps) for %zu switches to it",
                 (unsigned long long)got, (unsigned long long)pg->idx, iters);
        isob_emit_result(ctx, "lwc-switch", params, NULL, NULL, "failed", reason, NULL);
    } else {
        isob_emit_result(ctx, "lwc-switch", params, &s, NULL, "ok", NULL, NULL);
    }
    isob_samples_free(&s);
    free(up);
}

static void sw_run_one(struct isob_xclock *x, enum sw_variant v, enum isob_placement pl)
{
    struct isob_bench_ctx *ctx = &x->ctx;
    const char *placement = isob_placement_name(pl);
    int two_processes = v == SW_LWC || v == SW_PROCESS || v == SW_PROCESS_FUTEX;
    int one_context = v == SW_UCONTEXT || v == SW_UTHREAD;
    struct sw_run r = {.x = x, .v = v, .h = -1};
    char params[512], reason[256];
    sw_params(params, sizeof params, &r, placement, "round-trip,one-way", NULL);
    if (one_context && pl != ISOB_PLACE_SAME_CPU) {
        isob_emit_result(ctx, "lwc-switch", params, NULL, NULL, "skipped",
                         "one execution context: only same-cpu applies", NULL);
        return;
    }
    r.server_cpu = isob_server_cpu(pl, ctx->opts.client_cpu);
    if (pl == ISOB_PLACE_CROSS_CPU && r.server_cpu < 0) {
        isob_emit_result(ctx, "lwc-switch", params, NULL, NULL, "skipped",
                         "cross-cpu placement needs two CPUs and a pinned client", NULL);
        return;
    }
    if (isob_place_self(pl, ctx->opts.client_cpu, reason, sizeof reason) != 0) {
        isob_emit_result(ctx, "lwc-switch", params, NULL, NULL, "failed", reason, NULL);
        return;
    }
    size_t iters = ctx->opts.n / 2 ? ctx->opts.n / 2 : 1;
    r.pg_bytes = sizeof(struct sw_page) + iters * sizeof(uint64_t);
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    r.pg_bytes = (r.pg_bytes + ps - 1) & ~(ps - 1);
    /* The lwc variant shares its page as lwc memory (LWC_SHARED); the
     * other processes inherit a MAP_SHARED mapping. */
    r.pg = v == SW_LWC ? lwc_alloc_shared(r.pg_bytes) : isob_map(r.pg_bytes, two_processes);
    if (!r.pg) {
        isob_emit_result(ctx, "lwc-switch", params, NULL, NULL, "failed", "out of memory", NULL);
        return;
    }
    memset(r.pg, 0, r.pg_bytes);
    r.pg->tsc = x->tsc;
    int rc = sw_start(&r);
    if (rc != 0) {
        snprintf(reason, sizeof reason, "start: %s", isob_strerror(rc));
        isob_emit_result(ctx, "lwc-switch", params, NULL, NULL, "failed", reason, NULL);
    } else {
        sw_measure_round_trip(&r, placement);
        sw_measure_one_way(&r, placement, iters);
    }
    sw_stop(&r);
    if (v == SW_LWC)
        lwc_free_shared(r.pg);
    else
        isob_unmap(r.pg, r.pg_bytes);
}

static int sw_select(const char *want, enum sw_variant v)
{
    if (!want)
        return 1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", want);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (strcmp(tok, sw_names[v]) == 0)
            return 1;
    return 0;
}

static int lwc_switch_run(struct isob_bench_ctx *ctx)
{
    const char *want = ctx->opts.param;
    if (want) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", want);
        for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            int known = 0;
            for (unsigned v = 0; v < SW__COUNT; v++)
                known |= strcmp(tok, sw_names[v]) == 0;
            if (!known) {
                /* Bad usage, found only here: one line and exit status 2,
                 * as isob gives for every other bad option. */
                fprintf(stderr, "isob: error: lwc-switch: unknown variant '%s' (lwc, process, "
                        "process-futex, thread, ucontext, uthread; see isob --help)\n", tok);
                exit(2);
            }
        }
    }
    struct isob_xclock x;
    int rc = isob_xclock_open(&x, ctx);
    if (rc)
        return rc;
    for (unsigned v = 0; v < SW__COUNT; v++) {
        if (!sw_select(want, (enum sw_variant)v))
            continue;
        for (unsigned pl = 0; pl < 3; pl++)
            if (ctx->opts.placements & (1u << pl))
                sw_run_one(&x, (enum sw_variant)v, (enum isob_placement)pl);
    }
    isob_xclock_close(&x, ctx);
    return 0;
}

const struct isob_bench isob_bench_lwc_switch = {
    .name = "lwc-switch",
    .summary = "one-way and round-trip switch: lwc vs process (semaphores), process-futex, thread, "
               "ucontext, uthread",
    .needs_mechanism = 0,
    .run = lwc_switch_run,
};
