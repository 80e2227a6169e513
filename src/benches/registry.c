/* The one list of benchmarks. */
#include <string.h>

#include "isobench/bench.h"

extern const struct isob_bench isob_bench_switch;
extern const struct isob_bench isob_bench_pingpong;
extern const struct isob_bench isob_bench_kv;
extern const struct isob_bench isob_bench_lwc_switch;
extern const struct isob_bench isob_bench_lwc_create;
extern const struct isob_bench isob_bench_refmon;
extern const struct isob_bench isob_bench_lwc_sign;

const struct isob_bench *const isob_benches[] = {
    &isob_bench_switch,
    &isob_bench_pingpong,
    &isob_bench_kv,
    &isob_bench_lwc_switch,
    &isob_bench_lwc_create,
    &isob_bench_refmon,
    &isob_bench_lwc_sign,
    NULL,
};

const struct isob_bench *isob_bench_find(const char *name)
{
    for (const struct isob_bench *const *b = isob_benches; *b; b++)
        if (strcmp((*b)->name, name) == 0)
            return *b;
    return NULL;
}
