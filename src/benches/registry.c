/* The one list of benchmarks. */
#include <string.h>

#include "isobench/bench.h"

extern const struct isob_bench isob_bench_switch;
extern const struct isob_bench isob_bench_pingpong;
extern const struct isob_bench isob_bench_kv;
extern const struct isob_bench isob_bench_oslat;
extern const struct isob_bench isob_bench_worksweep;
extern const struct isob_bench isob_bench_cpuwork;
extern const struct isob_bench isob_bench_memops;
extern const struct isob_bench isob_bench_pipeio;
extern const struct isob_bench isob_bench_scale;
extern const struct isob_bench isob_bench_delegate;
extern const struct isob_bench isob_bench_sched;
extern const struct isob_bench isob_bench_lwc_switch;
extern const struct isob_bench isob_bench_lwc_create;
extern const struct isob_bench isob_bench_refmon;
extern const struct isob_bench isob_bench_lwc_sign;
extern const struct isob_bench isob_bench_inspect;
extern const struct isob_bench isob_bench_vmcall;

const struct isob_bench *const isob_benches[] = {
    &isob_bench_switch,
    &isob_bench_pingpong,
    &isob_bench_kv,
    &isob_bench_oslat,
    &isob_bench_worksweep,
    &isob_bench_cpuwork,
    &isob_bench_memops,
    &isob_bench_pipeio,
    &isob_bench_scale,
    &isob_bench_delegate,
    &isob_bench_sched,
    &isob_bench_lwc_switch,
    &isob_bench_lwc_create,
    &isob_bench_refmon,
    &isob_bench_lwc_sign,
    &isob_bench_inspect,
    &isob_bench_vmcall,
    NULL,
};

const struct isob_bench *isob_bench_find(const char *name)
{
    for (const struct isob_bench *const *b = isob_benches; *b; b++)
        if (strcmp((*b)->name, name) == 0)
            return *b;
    return NULL;
}

int isob_bench_takes(const struct isob_bench *b, const char *name)
{
    for (const struct isob_bench_option *o = b->options; o && o->name; o++)
        if (strcmp(o->name, name) == 0)
            return 1;
    return 0;
}
