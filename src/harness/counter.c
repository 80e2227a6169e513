/* Choosing a counter backend.  What the architecture's timer is worth on
 * this machine is asked of src/harness/timer_<arch>.c. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "isobench/harness.h"

static void set_backend(struct isob_counter *c, enum isob_backend b)
{
    c->backend = b;
    switch (b) {
    case ISOB_BACKEND_PERF:
        c->name = "perf";
        c->unit = "cycles";
        c->nev = c->perf.nev;
        for (unsigned e = 0; e < c->nev; e++)
            c->event_names[e] = c->perf.names[e];
        break;
    case ISOB_BACKEND_TIMER:
        c->name = ISOB_TIMER_NAME;
        c->unit = ISOB_TIMER_UNIT;
        c->nev = 1;
        c->event_names[0] = ISOB_TIMER_NAME;
        break;
    case ISOB_BACKEND_FAKE:
        c->name = "fake";
        c->unit = "ticks";
        c->nev = 1;
        c->event_names[0] = "fake";
        break;
    case ISOB_BACKEND_CLOCK:
        c->name = "clock";
        c->unit = "ns";
        c->nev = 1;
        c->event_names[0] = "CLOCK_MONOTONIC_RAW";
        break;
    }
}

static void append_why(struct isob_counter *c, const char *fmt, const char *detail)
{
    size_t used = strlen(c->why);
    if (used + 2 >= sizeof c->why)
        return;
    snprintf(c->why + used, sizeof c->why - used, fmt, detail);
}

int isob_counter_init(struct isob_counter *c, const struct isob_counter_opts *opts)
{
    const char *force = opts ? opts->force : NULL;
    char why[256];
    memset(c, 0, sizeof *c);
    if (opts) {
        c->opts = *opts;
    } else {
        c->opts.scope = ISOB_SCOPE_THREAD;
        c->opts.cpu = -1;
    }

    /* The timer's frequency is recorded whatever the backend, so that
     * cycles and ticks can be related to time. */
    char timer_why[256];
    int timer_ok = isob_timer_usable(timer_why, sizeof timer_why) == 0;
    if (timer_ok)
        isob_timer_hz(&c->tsc_hz, &c->tsc_hz_source);

    if (!force || strcmp(force, "perf") == 0) {
        int rc = isob_perf_open(&c->perf, isob_perf_sys_real(), opts ? opts->scope : ISOB_SCOPE_THREAD,
                                opts ? opts->cpu : -1, why, sizeof why);
        if (rc == 0) {
            set_backend(c, ISOB_BACKEND_PERF);
            append_why(c, "%s", c->perf.use_rdpmc ? "perf_event group, read with rdpmc"
                                : ISOB_ARCH_USER_PMC ? "perf_event group, read with read(2): rdpmc not allowed"
                                : "perf_event group, read with read(2): no user-space reading on this architecture");
            return 0;
        }
        if (force) {
            snprintf(c->why, sizeof c->why, "perf: %s", why);
            return rc;
        }
        append_why(c, "perf unavailable (%s); ", why);
    }
    if (!force || strcmp(force, ISOB_TIMER_NAME) == 0) {
        if (timer_ok) {
            set_backend(c, ISOB_BACKEND_TIMER);
            append_why(c, "%s", ISOB_TIMER_LABEL ": " ISOB_TIMER_HOW);
            return 0;
        }
        if (force) {
            snprintf(c->why, sizeof c->why, ISOB_TIMER_NAME ": %s", timer_why);
            return -ENOTSUP;
        }
        append_why(c, ISOB_TIMER_LABEL " unusable (%s); ", timer_why);
    }
    if (!force || strcmp(force, "clock") == 0) {
        set_backend(c, ISOB_BACKEND_CLOCK);
        append_why(c, "%s", "clock_gettime(CLOCK_MONOTONIC_RAW)");
        return 0;
    }
    snprintf(c->why, sizeof c->why, "unknown counter backend '%s' (perf, " ISOB_TIMER_NAME ", clock)",
             force);
    return -EINVAL;
}

void isob_counter_init_fake(struct isob_counter *c, struct isob_fake_clock *fake)
{
    memset(c, 0, sizeof *c);
    c->fake = fake;
    set_backend(c, ISOB_BACKEND_FAKE);
    snprintf(c->why, sizeof c->why, "fake clock for tests");
}

void isob_counter_close(struct isob_counter *c)
{
    if (c->backend == ISOB_BACKEND_PERF)
        isob_perf_close(&c->perf);
}

int isob_counter_reopen(struct isob_counter *c)
{
    /* Only a perf group belongs to a thread; the TSC and the clock read
     * the same in every process. */
    if (c->backend != ISOB_BACKEND_PERF)
        return 0;
    struct isob_counter_opts o = c->opts;
    o.force = "perf";
    isob_counter_close(c);
    return isob_counter_init(c, &o);
}
