/* Helpers shared by the workload benchmarks (workload.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "workload.h"

int wl_begin(struct wl *w, struct isob_bench_ctx *ctx, const char *bench)
{
    memset(w, 0, sizeof *w);
    w->ctx = ctx;
    w->wctx = *ctx;
    w->bench = bench;
    if (ctx->ctr->backend != ISOB_BACKEND_PERF)
        return 0;
    struct isob_counter_opts o = {.force = "tsc", .scope = ISOB_SCOPE_THREAD, .cpu = -1};
    if (isob_counter_init(&w->wall, &o) != 0) {
        o.force = "clock";
        int rc = isob_counter_init(&w->wall, &o);
        if (rc)
            return rc;
    }
    w->wctx.ctr = &w->wall;
    /* The empty region reported with each result must be in the unit of
     * the result's samples. */
    return isob_measure_empty(&w->wctx);
}

void wl_end(struct wl *w)
{
    w->ctx->failed |= w->wctx.failed;
    if (w->wctx.ctr == &w->wall)
        isob_counter_close(&w->wall);
}

double wl_ns(const struct wl *w, double d)
{
    const struct isob_counter *c = w->wctx.ctr;
    if (c->backend == ISOB_BACKEND_TIMER && c->tsc_hz > 0)
        return d * 1e9 / c->tsc_hz;
    return d;  /* clock: ns already; fake: its own ticks */
}

uint64_t wl_read(struct wl *w)
{
    struct isob_snap s;
    isob_read(w->wctx.ctr, &s);
    return s.v[0];
}

int wl_params_begin(struct wl_params *p, const char *placement)
{
    memset(p, 0, sizeof *p);
    p->f = open_memstream(&p->buf, &p->len);
    if (!p->f)
        return -ENOMEM;
    p->jw.f = p->f;
    p->jw.comma = 0;
    fputc('{', p->f);
    if (placement)
        isob_jw_str(&p->jw, "placement", placement);
    return 0;
}

const char *wl_params_end(struct wl_params *p, const struct isob_mechanism *m)
{
    if (!p->f)
        return NULL;
    if (m && m->result_params)
        fprintf(p->f, "%s%s", p->jw.comma ? "," : "", m->result_params);
    fputc('}', p->f);
    if (fclose(p->f) != 0) {
        free(p->buf);
        p->buf = NULL;
    }
    p->f = NULL;
    return p->buf;
}

void wl_params_free(struct wl_params *p)
{
    if (p->f)
        fclose(p->f);
    free(p->buf);
    memset(p, 0, sizeof *p);
}

void wl_jw_u64(struct isob_jw *jw, const char *key, uint64_t v)
{
    char num[24];
    snprintf(num, sizeof num, "%llu", (unsigned long long)v);
    isob_jw_raw(jw, key, num);
}

void wl_emit(struct wl *w, const char *params, const struct isob_samples *s,
             const struct isob_batched *batched,
             size_t warmup, const char *status, const char *reason)
{
    size_t saved = w->wctx.opts.warmup;
    w->wctx.opts.warmup = warmup;
    isob_emit_result(&w->wctx, w->bench, params ? params : "{}", s, batched, status, reason, NULL);
    w->wctx.opts.warmup = saved;
}

void wl_each_placement(struct wl *w, wl_placement_fn *fn, void *arg)
{
    const struct isob_bench_opts *o = &w->ctx->opts;
    int two = (w->ctx->mech->props & ISOB_TWO_CONTEXTS) != 0;
    if (!two && o->placements == (1u << ISOB_PLACE_CROSS_CPU)) {
        struct wl_params pp;
        if (wl_params_begin(&pp, "cross-cpu") == 0)
            wl_emit(w, wl_params_end(&pp, w->ctx->mech), NULL, NULL, 0, "skipped",
                    "one execution context: cross-cpu placement does not apply");
        wl_params_free(&pp);
        return;
    }
    for (unsigned p = 0; p < 3; p++) {
        if (!(o->placements & (1u << p)))
            continue;
        if (!two && p == ISOB_PLACE_CROSS_CPU)
            continue;
        const char *name = isob_placement_name((enum isob_placement)p);
        int server_cpu = isob_server_cpu((enum isob_placement)p, o->client_cpu);
        if (p == ISOB_PLACE_CROSS_CPU && server_cpu < 0) {
            struct wl_params pp;
            if (wl_params_begin(&pp, name) == 0)
                wl_emit(w, wl_params_end(&pp, w->ctx->mech), NULL, NULL, 0, "skipped",
                        "cross-cpu placement needs two CPUs and a pinned client");
            wl_params_free(&pp);
            continue;
        }
        isob_pin_self(p == ISOB_PLACE_UNPINNED ? -1 : o->client_cpu);
        fn(w, name, server_cpu, arg);
        /* One context: nothing to place.  Two: the first placement unless
         * more were asked for by name. */
        if (!two || !o->placement_given)
            return;
    }
}

int wl_mem_available(const char *meminfo, uint64_t *bytes)
{
    FILE *f = fopen(meminfo, "r");
    if (!f)
        return -errno;
    char line[256];
    int rc = -ENOENT;
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
            *bytes = (uint64_t)kb * 1024;
            rc = 0;
            break;
        }
    }
    fclose(f);
    return rc;
}

const char *wl_thp_mode(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f)
        return buf;
    char line[128];
    if (fgets(line, sizeof line, f)) {
        char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
        if (a && b)
            snprintf(buf, len, "%.*s", (int)(b - a - 1), a + 1);
    }
    fclose(f);
    return buf;
}
