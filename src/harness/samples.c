/* Sample buffers and medians. */
#include <stdlib.h>
#include <string.h>

#include "isobench/harness.h"

int isob_samples_alloc(struct isob_samples *s, size_t cap, unsigned nev)
{
    memset(s, 0, sizeof *s);
    if (nev == 0 || nev > ISOB_MAX_EVENTS)
        return -EINVAL;
    s->v = calloc(cap ? cap : 1, nev * sizeof *s->v);
    if (!s->v)
        return -ENOMEM;
    /* Touch every page now so that no page fault lands in a measured region. */
    memset(s->v, 0, (cap ? cap : 1) * nev * sizeof *s->v);
    s->cap = cap;
    s->nev = nev;
    return 0;
}

void isob_samples_free(struct isob_samples *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double isob_median_u64(uint64_t *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_u64);
    return n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0;
}

double isob_median_double(double *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

double isob_samples_median(const struct isob_samples *s, unsigned e)
{
    if (s->n == 0 || e >= s->nev)
        return 0;
    uint64_t *tmp = malloc(s->n * sizeof *tmp);
    if (!tmp)
        return 0;
    for (size_t i = 0; i < s->n; i++)
        tmp[i] = s->v[i * s->nev + e];
    double m = isob_median_u64(tmp, s->n);
    free(tmp);
    return m;
}

int isob_batched_alloc(struct isob_batched *b, size_t reps)
{
    memset(b, 0, sizeof *b);
    b->est = -1;
    b->reps = calloc(reps ? reps : 1, sizeof *b->reps);
    b->sort = calloc(reps ? reps : 1, sizeof *b->sort);
    if (!b->reps || !b->sort) {
        isob_batched_free(b);
        return -ENOMEM;
    }
    /* Written once now, like the samples, so that no page fault can land
     * in a measured region. */
    memset(b->reps, 0, (reps ? reps : 1) * sizeof *b->reps);
    b->cap = reps;
    return 0;
}

void isob_batched_free(struct isob_batched *b)
{
    free(b->reps);
    free(b->sort);
    memset(b, 0, sizeof *b);
    b->est = -1;
}

void isob_batched_finish(struct isob_batched *b)
{
    if (b->n == 0) {
        b->est = -1;
        return;
    }
    /* The median is taken on a copy, so that reps stays in the order the
     * pairs were measured (drift within a result shows there). */
    memcpy(b->sort, b->reps, b->n * sizeof *b->sort);
    b->est = isob_median_double(b->sort, b->n);
}
