/* The cross-process clock of the lwc benchmarks (xclock.h). */
#include <string.h>

#include "xclock.h"

int isob_xclock_open(struct isob_xclock *x, struct isob_bench_ctx *ctx)
{
    memset(x, 0, sizeof *x);
    x->ctx = *ctx;
    x->ctx.failed = 0;
    enum isob_backend b = ctx->ctr->backend;
    if (b == ISOB_BACKEND_TIMER || b == ISOB_BACKEND_CLOCK) {
        x->tsc = b == ISOB_BACKEND_TIMER;
        return 0;
    }
    struct isob_counter_opts o = {.force = ISOB_TIMER_NAME, .scope = ISOB_SCOPE_THREAD, .cpu = -1};
    if (isob_counter_init(&x->ctr, &o) != 0) {
        o.force = "clock";
        int rc = isob_counter_init(&x->ctr, &o);
        if (rc)
            return rc;
    }
    x->own = 1;
    x->tsc = x->ctr.backend == ISOB_BACKEND_TIMER;
    x->ctx.ctr = &x->ctr;
    /* The empty region in this clock's unit, as every result carries one. */
    return isob_measure_empty(&x->ctx);
}

void isob_xclock_close(struct isob_xclock *x, struct isob_bench_ctx *ctx)
{
    ctx->failed |= x->ctx.failed;
    if (x->own)
        isob_counter_close(&x->ctr);
    x->own = 0;
}

double isob_xclock_per_us(const struct isob_xclock *x)
{
    if (!x->tsc)
        return 1000.0;
    return x->ctx.ctr->tsc_hz > 0 ? x->ctx.ctr->tsc_hz / 1e6 : 0;
}
