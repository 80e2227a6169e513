/* The x86-64 timer, the TSC: whether it counts at a fixed rate, and its
 * frequency.  The reading itself is in arch_x86.h. */
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

int isob_timer_usable(char *why, size_t len)
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
    uint64_t c0 = isob_clock_ns(), t0 = isob_timer_read(), c1, t1;
    do {
        c1 = isob_clock_ns();
        t1 = isob_timer_read();
    } while (c1 - c0 < ISOB_TSC_CALIBRATE_NS);
    return (double)(t1 - t0) * 1e9 / (double)(c1 - c0);
}

int isob_timer_hz(double *hz, const char **source)
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

