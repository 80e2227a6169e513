/* Choosing a counter backend, and what the TSC is worth on this machine. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/perf_event.h>

#include "isobench/harness.h"

/* How long the fallback calibration of the TSC against CLOCK_MONOTONIC_RAW
 * runs; 100 ms gives a frequency good to a few parts per million. */
#define ISOB_TSC_CALIBRATE_NS 100000000ull

static int cpuinfo_has_flag(const char *flag)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return -errno;
    char line[8192];
    int found = 0;
    size_t fl = strlen(flag);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0)
            continue;
        for (char *p = strstr(line, flag); p; p = strstr(p + 1, flag)) {
            if ((p == line || p[-1] == ' ' || p[-1] == '\t') &&
                (p[fl] == ' ' || p[fl] == '\n' || p[fl] == 0)) {
                found = 1;
                break;
            }
        }
        break; /* the first CPU's flags speak for all */
    }
    fclose(f);
    return found;
}

int isob_tsc_usable(char *why, size_t len)
{
    int c = cpuinfo_has_flag("constant_tsc"), n = cpuinfo_has_flag("nonstop_tsc");
    if (c < 0 || n < 0) {
        snprintf(why, len, "cannot read /proc/cpuinfo");
        return -EIO;
    }
    if (!c || !n) {
        snprintf(why, len, "TSC is not %s%s%s: it does not count at a fixed rate",
                 c ? "" : "constant", (!c && !n) ? " and " : "", n ? "" : "nonstop");
        return -ENOTSUP;
    }
    return 0;
}

/* The kernel publishes its TSC-to-nanoseconds conversion in the mmap page
 * of any perf event (time_mult, time_shift), which is the frequency it
 * knows; software events work even without a PMU. */
static int tsc_hz_from_kernel(double *hz)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_DUMMY;
    attr.exclude_kernel = 1;
    int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    if (fd < 0)
        return -errno;
    long pg = sysconf(_SC_PAGESIZE);
    struct perf_event_mmap_page *pc = mmap(NULL, (size_t)pg, PROT_READ, MAP_SHARED, fd, 0);
    int rc = -ENOTSUP;
    if (pc != MAP_FAILED) {
        if (pc->cap_user_time && pc->time_mult) {
            /* ns = cycles * mult >> shift, so hz = 1e9 * 2^shift / mult. */
            *hz = 1e9 * (double)(1ull << pc->time_shift) / (double)pc->time_mult;
            rc = 0;
        }
        munmap(pc, (size_t)pg);
    } else {
        rc = -errno;
    }
    close(fd);
    return rc;
}

/* The frequency the kernel printed at boot ("tsc: Refined TSC clocksource
 * calibration: N MHz" or, with tsc_known_freq, "tsc: Detected N MHz").  Needs
 * the kernel log to be readable and to still hold the boot messages. */
static int tsc_hz_from_klog(double *hz)
{
    int len = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
    if (len <= 0)
        return -ENOENT;
    char *buf = malloc((size_t)len + 1);
    if (!buf)
        return -ENOMEM;
    int got = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, len);
    int rc = -ENOENT;
    if (got > 0) {
        buf[got] = 0;
        static const char *const keys[] = {"tsc: Refined TSC clocksource calibration: ",
                                           "tsc: Detected "};
        for (size_t k = 0; k < 2 && rc; k++) {
            char *p = strstr(buf, keys[k]);
            double mhz;
            if (p && sscanf(p + strlen(keys[k]), "%lf MHz", &mhz) == 1 && mhz > 0) {
                *hz = mhz * 1e6;
                rc = 0;
            }
        }
    }
    free(buf);
    return rc;
}

static double tsc_hz_calibrate(void)
{
    uint64_t c0 = isob_clock_ns(), t0 = isob_rdtsc_fenced(), c1, t1;
    do {
        c1 = isob_clock_ns();
        t1 = isob_rdtsc_fenced();
    } while (c1 - c0 < ISOB_TSC_CALIBRATE_NS);
    return (double)(t1 - t0) * 1e9 / (double)(c1 - c0);
}

int isob_tsc_hz(double *hz, const char **source)
{
    if (tsc_hz_from_kernel(hz) == 0) {
        *source = "kernel (perf mmap page time_mult/time_shift)";
        return 0;
    }
    if (tsc_hz_from_klog(hz) == 0) {
        *source = "kernel (boot log)";
        return 0;
    }
    *hz = tsc_hz_calibrate();
    *source = "calibrated against CLOCK_MONOTONIC_RAW";
    return 0;
}

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
    case ISOB_BACKEND_TSC:
        c->name = "tsc";
        c->unit = "tsc_ticks";
        c->nev = 1;
        c->event_names[0] = "tsc";
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

    /* The TSC frequency is recorded whatever the backend, so that cycles and
     * ticks can be related to time. */
    char tsc_why[256];
    int tsc_ok = isob_tsc_usable(tsc_why, sizeof tsc_why) == 0;
    if (tsc_ok)
        isob_tsc_hz(&c->tsc_hz, &c->tsc_hz_source);

    if (!force || strcmp(force, "perf") == 0) {
        int rc = isob_perf_open(&c->perf, isob_perf_sys_real(), opts ? opts->scope : ISOB_SCOPE_THREAD,
                                opts ? opts->cpu : -1, why, sizeof why);
        if (rc == 0) {
            set_backend(c, ISOB_BACKEND_PERF);
            append_why(c, "%s", c->perf.use_rdpmc ? "perf_event group, read with rdpmc"
                                                  : "perf_event group, read with read(2): rdpmc not allowed");
            return 0;
        }
        if (force) {
            snprintf(c->why, sizeof c->why, "perf: %s", why);
            return rc;
        }
        append_why(c, "perf unavailable (%s); ", why);
    }
    if (!force || strcmp(force, "tsc") == 0) {
        if (tsc_ok) {
            set_backend(c, ISOB_BACKEND_TSC);
            append_why(c, "%s", "TSC: constant and nonstop, read with lfence;rdtsc;lfence");
            return 0;
        }
        if (force) {
            snprintf(c->why, sizeof c->why, "tsc: %s", tsc_why);
            return -ENOTSUP;
        }
        append_why(c, "TSC unusable (%s); ", tsc_why);
    }
    if (!force || strcmp(force, "clock") == 0) {
        set_backend(c, ISOB_BACKEND_CLOCK);
        append_why(c, "%s", "clock_gettime(CLOCK_MONOTONIC_RAW)");
        return 0;
    }
    snprintf(c->why, sizeof c->why, "unknown counter backend '%s' (perf, tsc, clock)", force);
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
