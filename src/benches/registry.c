/* The one list of benchmarks: include/isobench/bench_list.h. */
#include <string.h>

#include "isobench/bench.h"

#define X(id) extern const struct isob_bench isob_bench_##id;
#include "isobench/bench_list.h"
#undef X

const struct isob_bench *const isob_benches[] = {
#define X(id) &isob_bench_##id,
#include "isobench/bench_list.h"
#undef X
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
