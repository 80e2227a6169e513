/* Harness arithmetic against a fake clock of known cost: no real time is
 * ever asserted.  The fake clock advances by read_cost at every reading,
 * and each measured body advances it by what it "costs". */
#include <stdlib.h>

#include "isobench/bench.h"
#include "tap.h"

/* What one fake reading costs, and what the fake body costs. */
#define READ_COST 7
#define BODY_COST 100

static void t_empty_region_is_read_cost(void)
{
    struct isob_fake_clock fk = {.now = 1000, .read_cost = READ_COST};
    struct isob_counter c;
    isob_counter_init_fake(&c, &fk);
    struct isob_bench_ctx ctx = {.ctr = &c, .opts = {.empty_n = 101}};
    CHECK_EQ_LONG(isob_measure_empty(&ctx), 0);
    /* An empty region spans exactly the second reading. */
    CHECK(ctx.empty_median == READ_COST);
    CHECK_EQ_LONG(ctx.empty_min, READ_COST);
    CHECK_EQ_LONG(ctx.empty_n, 101);
}

static void t_each_sample_is_body_plus_read(void)
{
    struct isob_fake_clock fk = {.read_cost = READ_COST};
    struct isob_counter c;
    isob_counter_init_fake(&c, &fk);
    struct isob_samples s;
    CHECK_EQ_LONG(isob_samples_alloc(&s, 50, 1), 0);
    ISOB_MEASURE_EACH(&c, &s, fk.now += BODY_COST);
    CHECK_EQ_LONG(s.n, 50);
    CHECK_EQ_LONG(s.dropped, 0);
    for (size_t i = 0; i < s.n; i++)
        CHECK_EQ_LONG(s.v[i], BODY_COST + READ_COST);
    /* 50 bodies and 100 readings, nothing else touched the clock. */
    CHECK_EQ_LONG(fk.now, 50 * (BODY_COST + 2 * READ_COST));
    isob_samples_free(&s);
}

static void t_batched_cancels_read_cost(void)
{
    struct isob_fake_clock fk = {.read_cost = READ_COST};
    struct isob_counter c;
    isob_counter_init_fake(&c, &fk);
    struct isob_batched b;
    CHECK_EQ_LONG(isob_batched_alloc(&b, 9), 0);
    ISOB_MEASURE_BATCHED(&c, 10, &b, fk.now += BODY_COST);
    CHECK(b.est == BODY_COST);
    /* Every pair is kept, each one exactly the body's cost. */
    CHECK_EQ_LONG(b.n, 9);
    for (size_t i = 0; i < b.n; i++)
        CHECK(b.reps[i] == BODY_COST);
    isob_batched_free(&b);
}

static void t_batched_median_ignores_one_outlier(void)
{
    /* Every 7th body is slow: the median over pairs stays on the body cost. */
    struct isob_fake_clock fk = {.read_cost = READ_COST};
    struct isob_counter c;
    isob_counter_init_fake(&c, &fk);
    struct isob_batched b;
    CHECK_EQ_LONG(isob_batched_alloc(&b, 11), 0);
    unsigned i = 0;
    ISOB_MEASURE_BATCHED(&c, 4, &b, fk.now += (++i % 97 == 0) ? 100000 : BODY_COST);
    CHECK(b.est == BODY_COST);
    /* The slow bodies stay visible in the pairs they fell into, in
     * measuring order: reps is not the sorted copy the median used. */
    size_t slow = 0, first_slow = b.n;
    for (size_t k = 0; k < b.n; k++) {
        if (b.reps[k] != BODY_COST) {
            slow++;
            if (first_slow == b.n)
                first_slow = k;
        }
    }
    CHECK(slow > 0 && slow < b.n / 2);
    CHECK(first_slow > 0);
    isob_batched_free(&b);
}

static void t_medians(void)
{
    uint64_t odd[] = {5, 1, 3};
    uint64_t even[] = {4, 1, 3, 2};
    double d[] = {2.5, -1, 9};
    CHECK(isob_median_u64(odd, 3) == 3);
    CHECK(isob_median_u64(even, 4) == 2.5);
    CHECK(isob_median_double(d, 3) == 2.5);
    struct isob_samples s;
    CHECK_EQ_LONG(isob_samples_alloc(&s, 4, 2), 0);
    uint64_t rows[] = {10, 1, 30, 2, 20, 3, 40, 4};
    for (int i = 0; i < 8; i++)
        s.v[i] = rows[i];
    s.n = 4;
    CHECK(isob_samples_median(&s, 0) == 25);
    CHECK(isob_samples_median(&s, 1) == 2.5);
    isob_samples_free(&s);
}

static void t_sample_validity_rules(void)
{
    struct isob_counter c = {.backend = ISOB_BACKEND_PERF};
    struct isob_snap a = {.cpu = 1, .sig = 7, .ok = 1}, b = a;
    CHECK(isob_sample_valid(&c, &a, &b));
    b.cpu = 0;
    CHECK(!isob_sample_valid(&c, &a, &b)); /* migrated */
    b = a;
    b.sig = 8;
    CHECK(!isob_sample_valid(&c, &a, &b)); /* counter index changed */
    b = a;
    b.ok = 0;
    CHECK(!isob_sample_valid(&c, &a, &b)); /* the reading failed */
    b = a;
    a.enabled = a.running = 100;
    b.enabled = 300;
    b.running = 250;
    CHECK(!isob_sample_valid(&c, &a, &b)); /* multiplexed in between */
    b.running = 300;
    CHECK(isob_sample_valid(&c, &a, &b));
    b.enabled = b.running = 100;
    c.backend = ISOB_BACKEND_TIMER;
    CHECK(isob_sample_valid(&c, &a, &b));  /* the timer never drops */
}

static void t_placement_names_round_trip(void)
{
    for (unsigned p = 0; p < 3; p++) {
        enum isob_placement q;
        CHECK_EQ_LONG(isob_placement_parse(isob_placement_name((enum isob_placement)p), &q), 0);
        CHECK_EQ_LONG(q, p);
    }
    enum isob_placement q;
    CHECK(isob_placement_parse("sideways", &q) < 0);
    CHECK_EQ_LONG(isob_server_cpu(ISOB_PLACE_SAME_CPU, 1), 1);
    CHECK_EQ_LONG(isob_server_cpu(ISOB_PLACE_UNPINNED, 1), -1);
    int first = isob_first_cpu();
    CHECK(isob_cpu_allowed(first));
    int next = isob_server_cpu(ISOB_PLACE_CROSS_CPU, first);
    if (isob_ncpus() > 1)
        CHECK(isob_cpu_allowed(next) && next != first);
    else
        CHECK_EQ_LONG(next, -1);
}

static void t_cpus_come_from_the_affinity_mask(void)
{
    /* The next CPU is the next one in the set, wrapping around, never a
     * CPU outside it. */
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(2, &set);
    CPU_SET(5, &set);
    CHECK_EQ_LONG(isob_next_cpu_in(&set, -1), 2);
    CHECK_EQ_LONG(isob_next_cpu_in(&set, 2), 5);
    CHECK_EQ_LONG(isob_next_cpu_in(&set, 5), 2);
    CHECK_EQ_LONG(isob_next_cpu_in(&set, 3), 5);
    CPU_CLR(5, &set);
    CHECK_EQ_LONG(isob_next_cpu_in(&set, 2), -1);
    /* This process's own count is its mask's, whatever is online. */
    cpu_set_t mine;
    CHECK_EQ_LONG(sched_getaffinity(0, sizeof mine, &mine), 0);
    CHECK_EQ_LONG(isob_ncpus(), CPU_COUNT(&mine));
}

static void t_narrowed_mask_is_respected(void)
{
    /* Started on one CPU only (as under taskset -c N): one CPU, cross-cpu
     * has no server CPU, and unpinning stays inside the mask. */
    cpu_set_t one;
    CPU_ZERO(&one);
    int cpu = sched_getcpu();
    CHECK(cpu >= 0);
    CPU_SET(cpu, &one);
    CHECK_EQ_LONG(sched_setaffinity(0, sizeof one, &one), 0);
    /* This case's process has asked pin.c nothing yet, so pin.c reads the
     * narrowed mask now, as it would at a start under taskset. */
    CHECK_EQ_LONG(isob_ncpus(), 1);
    CHECK_EQ_LONG(isob_first_cpu(), cpu);
    CHECK_EQ_LONG(isob_server_cpu(ISOB_PLACE_CROSS_CPU, cpu), -1);
    CHECK_EQ_LONG(isob_pin_self(-1), 0);
    cpu_set_t now;
    CHECK_EQ_LONG(sched_getaffinity(0, sizeof now, &now), 0);
    CHECK(CPU_EQUAL(&now, &one));
    /* A CPU outside the mask is an error, not a silent run elsewhere. */
    int other = cpu == CPU_SETSIZE - 1 ? 0 : CPU_SETSIZE - 1;
    CHECK(!isob_cpu_allowed(other));
    CHECK(isob_pin_self(other) < 0);
}

static void t_real_backend_choice_is_explained(void)
{
    struct isob_counter c;
    CHECK_EQ_LONG(isob_counter_init(&c, NULL), 0);
    CHECK(c.why[0] != 0);
    CHECK(c.nev >= 1);
    struct isob_snap a, b;
    isob_read(&c, &a);
    isob_read(&c, &b);
    CHECK(b.v[0] >= a.v[0]);
    isob_counter_close(&c);
    /* A forced clock backend always opens and says so. */
    struct isob_counter_opts o = {.force = "clock"};
    CHECK_EQ_LONG(isob_counter_init(&c, &o), 0);
    CHECK(c.backend == ISOB_BACKEND_CLOCK);
}

/* The timer's frequency is in Hz: the ticks it counts while
 * CLOCK_MONOTONIC_RAW advances by TIMER_CHECK_NS agree with it within a
 * factor of two.  That checks the unit (a frequency off by a factor of
 * 1000 fails), not any speed.  The timer brackets the clock, so a
 * preemption at an edge can only add ticks; each try is independent. */
#define TIMER_CHECK_NS 50000000ull
#define TIMER_CHECK_TRIES 5

static void t_timer_frequency_when_usable(void)
{
    char why[256];
    if (isob_timer_usable(why, sizeof why) != 0)
        SKIP("%s", why);
    double hz = 0;
    const char *src = NULL;
    CHECK_EQ_LONG(isob_timer_hz(&hz, &src), 0);
    /* Any real timer runs between 1 MHz (slow generic timers) and 10 GHz. */
    CHECK(hz > 1e6 && hz < 1e10);
    CHECK(src != NULL);
    int agreed = 0;
    for (int i = 0; i < TIMER_CHECK_TRIES && !agreed; i++) {
        uint64_t t0 = isob_timer_read(), c0 = isob_clock_ns(), c1;
        do
            c1 = isob_clock_ns();
        while (c1 - c0 < TIMER_CHECK_NS);
        uint64_t t1 = isob_timer_read();
        double ratio = (double)(t1 - t0) * 1e9 / (double)(c1 - c0) / hz;
        agreed = ratio > 0.5 && ratio < 2.0;
        if (!agreed)
            fprintf(stderr, "# try %d: %.0f ticks/s counted, %.0f Hz reported\n", i,
                    ratio * hz, hz);
    }
    CHECK(agreed);
}

int main(void)
{
    TAP_CASE(t_empty_region_is_read_cost);
    TAP_CASE(t_each_sample_is_body_plus_read);
    TAP_CASE(t_batched_cancels_read_cost);
    TAP_CASE(t_batched_median_ignores_one_outlier);
    TAP_CASE(t_medians);
    TAP_CASE(t_sample_validity_rules);
    TAP_CASE(t_placement_names_round_trip);
    TAP_CASE(t_cpus_come_from_the_affinity_mask);
    TAP_CASE(t_narrowed_mask_is_respected);
    TAP_CASE(t_real_backend_choice_is_explained);
    TAP_CASE(t_timer_frequency_when_usable);
    return tap_done();
}
