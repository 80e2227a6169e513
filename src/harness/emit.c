/* JSON-lines output of the native driver. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "isobench/bench.h"

static void sep(struct isob_jw *w, const char *key)
{
    if (w->comma)
        fputc(',', w->f);
    w->comma = 1;
    if (key) {
        fputc('"', w->f);
        fputs(key, w->f);
        fputs("\":", w->f);
    }
}

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

void isob_jw_begin(struct isob_jw *w, FILE *f, const char *type)
{
    w->f = f;
    w->comma = 0;
    fputc('{', f);
    isob_jw_int(w, "schema_version", ISOB_SCHEMA_VERSION);
    isob_jw_str(w, "type", type);
}

void isob_jw_end(struct isob_jw *w)
{
    fputs("}\n", w->f);
    fflush(w->f);
}

void isob_jw_str(struct isob_jw *w, const char *key, const char *v)
{
    sep(w, key);
    if (v)
        put_string(w->f, v);
    else
        fputs("null", w->f);
}

void isob_jw_int(struct isob_jw *w, const char *key, long long v)
{
    sep(w, key);
    fprintf(w->f, "%lld", v);
}

void isob_jw_double(struct isob_jw *w, const char *key, double v)
{
    sep(w, key);
    if (isfinite(v))
        fprintf(w->f, "%.17g", v);
    else
        fputs("null", w->f);
}

void isob_jw_bool(struct isob_jw *w, const char *key, int v)
{
    sep(w, key);
    fputs(v ? "true" : "false", w->f);
}

void isob_jw_raw(struct isob_jw *w, const char *key, const char *json)
{
    sep(w, key);
    fputs(json, w->f);
}

void isob_jw_obj(struct isob_jw *w, const char *key)
{
    sep(w, key);
    fputc('{', w->f);
    w->comma = 0;
}

void isob_jw_arr(struct isob_jw *w, const char *key)
{
    sep(w, key);
    fputc('[', w->f);
    w->comma = 0;
}

void isob_jw_close(struct isob_jw *w, char bracket)
{
    fputc(bracket, w->f);
    w->comma = 1;
}

void isob_jw_u64_column(struct isob_jw *w, const char *key, const uint64_t *v, size_t n,
                        unsigned stride, unsigned e)
{
    isob_jw_arr(w, key);
    for (size_t i = 0; i < n; i++)
        fprintf(w->f, i ? ",%llu" : "%llu", (unsigned long long)v[i * stride + e]);
    isob_jw_close(w, ']');
}

/* The 5th and 95th percentiles of the empty region (nearest rank): the
 * range in which the cost of the two readings inside any measured sample
 * lies nine times in ten.  Python uses it to judge whether the batched
 * estimate agrees with the median less the empty region. */
static void empty_percentiles(struct isob_bench_ctx *ctx, const struct isob_samples *s)
{
    ctx->empty_p5 = ctx->empty_p95 = ctx->empty_median;
    if (s->n == 0)
        return;
    uint64_t *tmp = malloc(s->n * sizeof *tmp);
    if (!tmp)
        return;
    for (size_t i = 0; i < s->n; i++)
        tmp[i] = s->v[i * s->nev];
    isob_median_u64(tmp, s->n); /* sorts */
    ctx->empty_p5 = (double)tmp[(s->n - 1) * 5 / 100];
    ctx->empty_p95 = (double)tmp[(s->n - 1) * 95 / 100];
    free(tmp);
}

int isob_measure_empty(struct isob_bench_ctx *ctx)
{
    struct isob_samples s;
    int rc = isob_samples_alloc(&s, ctx->opts.empty_n, ctx->ctr->nev);
    if (rc)
        return rc;
    ISOB_MEASURE_EACH(ctx->ctr, &s, (void)0);
    ctx->empty_median = isob_samples_median(&s, 0);
    empty_percentiles(ctx, &s);
    uint64_t mn = UINT64_MAX;
    double sum = 0;
    for (size_t i = 0; i < s.n; i++) {
        sum += (double)s.v[i * s.nev];
        if (s.v[i * s.nev] < mn)
            mn = s.v[i * s.nev];
    }
    ctx->empty_mean = s.n ? sum / (double)s.n : 0;
    /* The counter's step: some clocks (the TSC of many VMs among them)
     * advance in increments of several ticks, which quantizes every
     * per-iteration sample; the batched estimate and the means do not
     * suffer from it.  The step is the greatest common divisor of the
     * empty-region samples. */
    uint64_t step = 0;
    for (size_t i = 0; i < s.n; i++) {
        uint64_t a = step, b = s.v[i * s.nev];
        while (b) {
            uint64_t t = a % b;
            a = b;
            b = t;
        }
        step = a;
    }
    ctx->step = step;
    ctx->empty_min = s.n ? mn : 0;
    ctx->empty_n = s.n;
    isob_samples_free(&s);
    return 0;
}

void isob_emit_header(struct isob_bench_ctx *ctx, const char *bench)
{
    struct isob_jw w;
    struct isob_counter *c = ctx->ctr;
    isob_jw_begin(&w, ctx->out, "header");
    isob_jw_str(&w, "benchmark", bench);
    isob_jw_str(&w, "mechanism", ctx->mech ? ctx->mech->name : NULL);
    isob_jw_str(&w, "counter", c->name);
    isob_jw_str(&w, "unit", c->unit);
    isob_jw_str(&w, "counter_why", c->why);
    isob_jw_arr(&w, "events");
    for (unsigned e = 0; e < c->nev; e++)
        isob_jw_str(&w, NULL, c->event_names[e]);
    isob_jw_close(&w, ']');
    if (c->tsc_hz > 0)
        isob_jw_double(&w, "tsc_hz", c->tsc_hz);
    else
        isob_jw_raw(&w, "tsc_hz", "null");
    isob_jw_str(&w, "tsc_hz_source", c->tsc_hz_source);
    isob_jw_obj(&w, "empty_region");
    isob_jw_double(&w, "median", ctx->empty_median);
    isob_jw_double(&w, "mean", ctx->empty_mean);
    isob_jw_int(&w, "min", (long long)ctx->empty_min);
    isob_jw_double(&w, "p5", ctx->empty_p5);
    isob_jw_double(&w, "p95", ctx->empty_p95);
    isob_jw_int(&w, "n", (long long)ctx->empty_n);
    isob_jw_close(&w, '}');
    isob_jw_int(&w, "counter_step", (long long)ctx->step);
    isob_jw_int(&w, "cpu", ctx->opts.client_cpu);
    isob_jw_int(&w, "ncpus", isob_ncpus());
    isob_jw_int(&w, "n", (long long)ctx->opts.n);
    isob_jw_int(&w, "warmup", (long long)ctx->opts.warmup);
    isob_jw_int(&w, "batch_k", (long long)ctx->opts.batch_k);
    isob_jw_int(&w, "batch_reps", (long long)ctx->opts.batch_reps);
    isob_jw_bool(&w, "quick", ctx->opts.quick);
    isob_jw_end(&w);
}

void isob_emit_result(struct isob_bench_ctx *ctx, const char *bench, const char *params_json,
                      const struct isob_samples *s, const struct isob_batched *batched,
                      const char *status, const char *reason, const char *unit_override)
{
    struct isob_jw w;
    struct isob_counter *c = ctx->ctr;
    isob_jw_begin(&w, ctx->out, "result");
    isob_jw_str(&w, "benchmark", bench);
    isob_jw_str(&w, "mechanism", ctx->mech ? ctx->mech->name : NULL);
    isob_jw_raw(&w, "params", params_json ? params_json : "{}");
    isob_jw_str(&w, "unit", unit_override ? unit_override : c->unit);
    isob_jw_str(&w, "counter", c->name);
    isob_jw_str(&w, "status", status);
    isob_jw_str(&w, "reason", reason);
    isob_jw_int(&w, "n", s ? (long long)s->n : 0);
    isob_jw_int(&w, "dropped", s ? (long long)s->dropped : 0);
    isob_jw_int(&w, "warmup", (long long)ctx->opts.warmup);
    /* A batched estimate may be negative (noise around a body that costs
     * nothing): it is printed as measured, never hidden. */
    int have_batched = batched && batched->n > 0;
    isob_jw_double(&w, "batched", have_batched ? batched->est : NAN);
    isob_jw_arr(&w, "batched_reps");
    for (size_t i = 0; have_batched && i < batched->n; i++)
        isob_jw_double(&w, NULL, batched->reps[i]);
    isob_jw_close(&w, ']');
    isob_jw_double(&w, "empty_region", ctx->empty_median);
    if (s) {
        isob_jw_u64_column(&w, "samples", s->v, s->n, s->nev, 0);
        if (s->nev > 1) {
            isob_jw_obj(&w, "events");
            for (unsigned e = 1; e < s->nev; e++)
                isob_jw_u64_column(&w, c->event_names[e], s->v, s->n, s->nev, e);
            isob_jw_close(&w, '}');
        }
    }
    isob_jw_end(&w);
    if (status && strcmp(status, "failed") == 0)
        ctx->failed = 1;
}
