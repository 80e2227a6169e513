/* Tests of the perf_event backend.
 *
 * Machines without a PMU (most VMs, and CI) cannot open hardware events, so
 * nearly every case runs against a fake system interface: open hands out
 * fake fds and records the attributes, mmap returns control pages in test
 * memory that the case programs, rdpmc and read return programmed values.
 * The last case tries the real kernel and skips with its reason where there
 * is no PMU. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "isobench/harness.h"
#include "isobench/perf.h"
#include "tap.h"

/* ---- A fake system interface -------------------------------------------- */

#define FAKE_FD0 100     /* fds handed out are FAKE_FD0, FAKE_FD0 + 1, ... */
#define FAKE_MAX_OPEN 8

struct open_call {
    struct perf_event_attr attr;
    pid_t pid;
    int cpu, group_fd, ret;
    unsigned long flags;
};

/* Each case runs in its own forked child, so this state starts fresh. */
static struct {
    struct open_call open[FAKE_MAX_OPEN];
    int n_open;
    int open_errno[FAKE_MAX_OPEN];   /* non-zero: the i-th open fails with it */
    int next_fd;
    struct perf_event_mmap_page page[FAKE_MAX_OPEN];
    int n_mmap, n_munmap, n_read, n_rdpmc;
    int closed[FAKE_MAX_OPEN];       /* times each fd was closed */
    int close_order[FAKE_MAX_OPEN];
    int n_close;
    uint64_t pmc[64];                /* rdpmc(i) returns pmc[i] */
    int bump_page;                   /* >= 0: the first rdpmc of this page's counter */
    int bumped;                      /* ... simulates a kernel update of the page */
    uint64_t read_enabled, read_running;
    uint64_t read_value[ISOB_MAX_EVENTS];
    uint32_t cpu;
} fk = {.bump_page = -1, .next_fd = FAKE_FD0, .read_enabled = 1000, .read_running = 1000};

static int fake_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
                     unsigned long flags)
{
    int i = fk.n_open++;
    CHECK(i < FAKE_MAX_OPEN);
    fk.open[i] = (struct open_call){*attr, pid, cpu, group_fd, 0, flags};
    fk.open[i].ret = fk.open_errno[i] ? -fk.open_errno[i] : fk.next_fd++;
    return fk.open[i].ret;
}

static void *fake_mmap(int fd, size_t len)
{
    CHECK(len >= sizeof(struct perf_event_mmap_page));
    CHECK(fd >= FAKE_FD0 && fd < fk.next_fd);
    fk.n_mmap++;
    return &fk.page[fd - FAKE_FD0];
}

static int fake_munmap(void *addr, size_t len)
{
    (void)len;
    CHECK((struct perf_event_mmap_page *)addr >= fk.page &&
          (struct perf_event_mmap_page *)addr < fk.page + FAKE_MAX_OPEN);
    fk.n_munmap++;
    return 0;
}

/* A group read: nr, time_enabled, time_running, then the values. */
static ssize_t fake_read(int fd, void *buf, size_t len)
{
    CHECK(fd == FAKE_FD0);   /* only the leader is ever read */
    int nr = fk.next_fd - FAKE_FD0;
    size_t want = (size_t)(3 + nr) * sizeof(uint64_t);
    if (len < want)
        return -ENOSPC;
    uint64_t *u = buf;
    u[0] = (uint64_t)nr;
    u[1] = fk.read_enabled;
    u[2] = fk.read_running;
    for (int e = 0; e < nr; e++)
        u[3 + e] = fk.read_value[e];
    fk.n_read++;
    return (ssize_t)want;
}

static int fake_close(int fd)
{
    CHECK(fd >= FAKE_FD0 && fd < fk.next_fd);
    fk.closed[fd - FAKE_FD0]++;
    fk.close_order[fk.n_close++] = fd;
    return 0;
}

static uint64_t fake_rdpmc(uint32_t idx)
{
    CHECK(idx < 64);
    fk.n_rdpmc++;
    if (fk.bump_page >= 0 && !fk.bumped && idx + 1 == fk.page[fk.bump_page].index) {
        /* As if the event were rescheduled between the first reads: the
         * kernel moved it to another counter and folded the count so far
         * into the offset, bumping the lock around the update. */
        struct perf_event_mmap_page *pc = &fk.page[fk.bump_page];
        fk.bumped = 1;
        pc->lock++;
        pc->index = 7;
        pc->offset = 5000;
        pc->lock++;
    }
    return fk.pmc[idx];
}

static uint32_t fake_getcpu(void) { return fk.cpu; }

static const struct isob_perf_sys fake_sys = {
    .open = fake_open,
    .mmap = fake_mmap,
    .munmap = fake_munmap,
    .read = fake_read,
    .close = fake_close,
    .rdpmc = fake_rdpmc,
    .getcpu = fake_getcpu,
};

/* Control pages as a kernel allowing rdpmc would leave them: event e on
 * counter e (index e + 1), 48-bit counters, never multiplexed. */
static void pages_allow_rdpmc(void)
{
    for (int e = 0; e < FAKE_MAX_OPEN; e++) {
        struct perf_event_mmap_page *pc = &fk.page[e];
        memset(pc, 0, sizeof *pc);
        pc->cap_bit0_is_deprecated = 1;
        pc->cap_user_rdpmc = 1;
        pc->index = (uint32_t)e + 1;
        pc->pmc_width = 48;
        pc->time_enabled = pc->time_running = 1000;
    }
}

static struct isob_perf open_ok(enum isob_scope scope, int cpu)
{
    struct isob_perf p;
    char why[256] = "";
    int r = isob_perf_open(&p, &fake_sys, scope, cpu, why, sizeof why);
    if (r != 0)
        fprintf(stderr, "# open: %d %s\n", r, why);
    CHECK_EQ_LONG(r, 0);
    return p;
}

/* ---- Opening ----------------------------------------------------------- */

static void check_attr(const struct open_call *c, uint32_t type, uint64_t config)
{
    CHECK_EQ_LONG(c->attr.type, type);
    CHECK_EQ_LONG(c->attr.config, config);
    CHECK_EQ_LONG(c->attr.size, sizeof(struct perf_event_attr));
    CHECK_EQ_LONG(c->attr.disabled, 0);
    CHECK_EQ_LONG(c->attr.exclude_user, 0);
    CHECK_EQ_LONG(c->attr.exclude_kernel, 0);
    CHECK_EQ_LONG(c->attr.exclude_hv, 1);
    CHECK_EQ_LONG(c->attr.read_format, PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED |
                                           PERF_FORMAT_TOTAL_TIME_RUNNING);
    CHECK(c->flags & PERF_FLAG_FD_CLOEXEC);
}

static const uint64_t dtlb_read_miss = PERF_COUNT_HW_CACHE_DTLB |
                                       (PERF_COUNT_HW_CACHE_OP_READ << 8) |
                                       (PERF_COUNT_HW_CACHE_RESULT_MISS << 16);
static const uint64_t itlb_read_miss = PERF_COUNT_HW_CACHE_ITLB |
                                       (PERF_COUNT_HW_CACHE_OP_READ << 8) |
                                       (PERF_COUNT_HW_CACHE_RESULT_MISS << 16);

static void t_open_thread_scope_wiring(void)
{
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 5);
    CHECK_EQ_LONG(fk.n_open, 4);
    CHECK_EQ_LONG(p.nev, 4);
    check_attr(&fk.open[0], PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES);
    check_attr(&fk.open[1], PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS);
    check_attr(&fk.open[2], PERF_TYPE_HW_CACHE, dtlb_read_miss);
    check_attr(&fk.open[3], PERF_TYPE_HW_CACHE, itlb_read_miss);
    /* The leader opens alone; every member joins the leader's group. */
    CHECK_EQ_LONG(fk.open[0].group_fd, -1);
    for (int i = 0; i < 4; i++) {
        if (i > 0)
            CHECK_EQ_LONG(fk.open[i].group_fd, FAKE_FD0);
        CHECK_EQ_LONG(fk.open[i].pid, 0);
        CHECK_EQ_LONG(fk.open[i].cpu, -1);   /* the thread, on whatever CPU */
        CHECK_EQ_LONG(p.fd[i], FAKE_FD0 + i);
    }
    CHECK(!strcmp(p.names[0], "cycles"));
    CHECK(!strcmp(p.names[1], "instructions"));
    CHECK(!strcmp(p.names[2], "dTLB-load-misses"));
    CHECK(!strcmp(p.names[3], "iTLB-load-misses"));
    CHECK_EQ_LONG(p.cpu, -1);
    CHECK_EQ_LONG(p.real_sys, 0);
    isob_perf_close(&p);
}

static void t_open_cpu_scope_wiring(void)
{
    struct isob_perf p = open_ok(ISOB_SCOPE_CPU, 1);
    CHECK_EQ_LONG(fk.n_open, 4);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_LONG(fk.open[i].pid, -1);   /* every process, on CPU 1 */
        CHECK_EQ_LONG(fk.open[i].cpu, 1);
    }
    CHECK_EQ_LONG(p.cpu, 1);
    isob_perf_close(&p);

    char why[256] = "";
    CHECK_EQ_LONG(isob_perf_open(&p, &fake_sys, ISOB_SCOPE_CPU, -1, why, sizeof why), -EINVAL);
    CHECK(why[0]);
}

static void t_open_picks_rdpmc_when_allowed(void)
{
    pages_allow_rdpmc();
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 0);
    CHECK_EQ_LONG(p.use_rdpmc, 1);
    CHECK_EQ_LONG(fk.n_mmap, 4);
    for (int e = 0; e < 4; e++)
        CHECK(p.page[e] == &fk.page[e]);
    isob_perf_close(&p);
}

static void t_open_falls_back_without_cap_user_rdpmc(void)
{
    pages_allow_rdpmc();
    fk.page[2].cap_user_rdpmc = 0;
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 0);
    CHECK_EQ_LONG(p.use_rdpmc, 0);

    /* The snap then reads the group with read(2). */
    fk.read_value[0] = 11;
    fk.read_value[3] = 44;
    int reads = fk.n_read;
    struct isob_snap s;
    isob_perf_snap(&p, &s);
    CHECK_EQ_LONG(fk.n_read, reads + 1);
    CHECK_EQ_LONG(fk.n_rdpmc, 0);
    CHECK_EQ_LONG(s.v[0], 11);
    CHECK_EQ_LONG(s.v[3], 44);
    CHECK_EQ_LONG(s.ok, 1);
    isob_perf_close(&p);
}

static void t_open_falls_back_with_index_0(void)
{
    pages_allow_rdpmc();
    fk.page[1].index = 0;
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 0);
    CHECK_EQ_LONG(p.use_rdpmc, 0);
    isob_perf_close(&p);
}

static void t_open_cycles_failure_is_reported(void)
{
    struct isob_perf p;
    char why[256] = "";
    fk.open_errno[0] = ENOENT;
    int r = isob_perf_open(&p, &fake_sys, ISOB_SCOPE_THREAD, 0, why, sizeof why);
    printf("# reason: %s\n", why);
    CHECK_EQ_LONG(r, -ENOENT);
    CHECK(strstr(why, "cycles"));
    CHECK(strstr(why, strerror(ENOENT)));
    CHECK_EQ_LONG(fk.n_open, 1);   /* no members without a leader */
    CHECK_EQ_LONG(fk.n_close, 0);
    isob_perf_close(&p);           /* harmless after a failed open */
    CHECK_EQ_LONG(fk.n_close, 0);
}

static void t_open_permission_failure_names_paranoid(void)
{
    struct isob_perf p;
    char why[256] = "";
    fk.open_errno[0] = EACCES;
    int r = isob_perf_open(&p, &fake_sys, ISOB_SCOPE_CPU, 0, why, sizeof why);
    printf("# reason: %s\n", why);
    CHECK_EQ_LONG(r, -EACCES);
    CHECK(strstr(why, strerror(EACCES)));
    CHECK(strstr(why, "perf_event_paranoid"));
}

static void t_open_secondary_failure_keeps_smaller_group(void)
{
    pages_allow_rdpmc();
    fk.open_errno[2] = EOPNOTSUPP;   /* no dTLB event on this PMU */
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 0);
    CHECK_EQ_LONG(fk.n_open, 4);
    CHECK_EQ_LONG(fk.open[3].group_fd, FAKE_FD0);
    CHECK_EQ_LONG(p.nev, 3);
    CHECK(!strcmp(p.names[0], "cycles"));
    CHECK(!strcmp(p.names[1], "instructions"));
    CHECK(!strcmp(p.names[2], "iTLB-load-misses"));
    CHECK_EQ_LONG(p.fd[2], FAKE_FD0 + 2);   /* the iTLB event got the third fd */
    CHECK_EQ_LONG(p.use_rdpmc, 1);

    /* Both paths read exactly the three events. */
    fk.page[0].offset = 10;
    fk.page[1].offset = 20;
    fk.page[2].offset = 30;
    struct isob_snap s;
    isob_perf_snap(&p, &s);
    CHECK_EQ_LONG(fk.n_rdpmc, 3);
    CHECK_EQ_LONG(s.v[0], 10);
    CHECK_EQ_LONG(s.v[1], 20);
    CHECK_EQ_LONG(s.v[2], 30);
    CHECK_EQ_LONG(s.ok, 1);

    fk.read_value[2] = 33;
    isob_perf_snap_slow(&p, &s);
    CHECK_EQ_LONG(s.v[2], 33);
    CHECK_EQ_LONG(s.ok, 1);
    isob_perf_close(&p);
    CHECK_EQ_LONG(fk.n_close, 3);
    CHECK_EQ_LONG(fk.n_munmap, 3);
}

static void t_close_releases_everything(void)
{
    pages_allow_rdpmc();
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 0);
    isob_perf_close(&p);
    CHECK_EQ_LONG(fk.n_close, 4);
    CHECK_EQ_LONG(fk.n_munmap, 4);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_LONG(fk.closed[i], 1);
    CHECK_EQ_LONG(fk.close_order[3], FAKE_FD0);   /* the leader goes last */
    isob_perf_close(&p);                          /* a second close does nothing */
    CHECK_EQ_LONG(fk.n_close, 4);
    CHECK_EQ_LONG(fk.n_munmap, 4);
}

/* ---- Reading with rdpmc ------------------------------------------------ */

static void t_value_is_offset_plus_sign_extended_pmc(void)
{
    pages_allow_rdpmc();
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 0);
    CHECK_EQ_LONG(p.use_rdpmc, 1);
    /* The kernel starts a 48-bit counter at a negative value and puts the
     * count so far, minus that start, into the offset. */
    fk.page[0].offset = 1000 + 0x100;
    fk.pmc[0] = 0x0000ffffffffff00ull;   /* -0x100 in 48 bits */
    fk.page[1].offset = -5000;
    fk.pmc[1] = 0x0000000000002000ull;   /* positive: no extension */
    fk.page[2].offset = 7;
    fk.pmc[2] = 0xabcd000000000005ull;   /* bits above 48 are ignored */
    fk.page[3].pmc_width = 64;
    fk.page[3].offset = 1;
    fk.pmc[3] = 41;
    struct isob_snap s;
    isob_perf_snap(&p, &s);
    CHECK_EQ_LONG(s.v[0], 1000);
    CHECK_EQ_LONG(s.v[1], 0x2000 - 5000);
    CHECK_EQ_LONG(s.v[2], 12);
    CHECK_EQ_LONG(s.v[3], 42);
    CHECK_EQ_LONG(s.ok, 1);
    CHECK_EQ_LONG(fk.n_rdpmc, 4);
    CHECK_EQ_LONG(fk.n_read, 1);   /* only the check at open */
    isob_perf_close(&p);
}

/* Whether two readings bracket a sample the harness keeps. */
static int pair_kept(const struct isob_snap *a, const struct isob_snap *b)
{
    return isob_sample_valid_as(ISOB_BACKEND_PERF, a, b);
}

static void t_multiplexed_between_readings_drops_the_sample(void)
{
    pages_allow_rdpmc();
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 0);
    struct isob_snap a, b;
    isob_perf_snap(&p, &a);
    isob_perf_snap(&p, &b);
    CHECK(pair_kept(&a, &b));
    /* Between a and b the kernel took event 3 off the PMU for 500 ns. */
    fk.page[3].time_enabled = 2000;
    fk.page[3].time_running = 1500;
    isob_perf_snap(&p, &b);
    CHECK(!pair_kept(&a, &b));
    isob_perf_close(&p);
}

static void t_multiplexed_before_a_sample_keeps_it(void)
{
    /* One multiplexing episode long before: the totals differ for good,
     * but nothing was lost between these two readings. */
    pages_allow_rdpmc();
    fk.page[3].time_enabled = 2000;
    fk.page[3].time_running = 1500;
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 0);
    struct isob_snap a, b;
    isob_perf_snap(&p, &a);
    fk.page[0].offset = 50;
    isob_perf_snap(&p, &b);
    CHECK(pair_kept(&a, &b));
    CHECK_EQ_LONG(b.v[0] - a.v[0], 50);
    /* And both times growing alike (scheduled out and back in, not
     * multiplexed) keeps it too. */
    for (int e = 0; e < 4; e++) {
        fk.page[e].time_enabled += 700;
        fk.page[e].time_running += 700;
    }
    isob_perf_snap(&p, &b);
    CHECK(pair_kept(&a, &b));
    isob_perf_close(&p);
}

static void t_multiplexed_group_read_between_readings_drops(void)
{
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 0);
    CHECK_EQ_LONG(p.use_rdpmc, 0);
    struct isob_snap a, b;
    isob_perf_snap(&p, &a);
    fk.read_enabled += 300;
    fk.read_running += 300;
    isob_perf_snap(&p, &b);
    CHECK(pair_kept(&a, &b));
    fk.read_enabled += 300;
    fk.read_running += 100;
    isob_perf_snap(&p, &b);
    CHECK(!pair_kept(&a, &b));
    isob_perf_close(&p);
}

static void t_multiplexed_group_read_before_keeps(void)
{
    fk.read_enabled = 5000;
    fk.read_running = 4000;   /* an episode before the sample */
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 0);
    struct isob_snap a, b;
    isob_perf_snap(&p, &a);
    fk.read_enabled += 300;
    fk.read_running += 300;
    fk.read_value[0] = 9;
    isob_perf_snap(&p, &b);
    CHECK(pair_kept(&a, &b));
    CHECK_EQ_LONG(b.v[0], 9);
    isob_perf_close(&p);
}

static void t_index_0_reads_the_group(void)
{
    pages_allow_rdpmc();
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 0);
    CHECK_EQ_LONG(p.use_rdpmc, 1);
    /* The event left its counter after open: the page keeps a stale
     * offset, which must not be taken for the count. */
    fk.page[1].index = 0;
    fk.page[1].offset = 1;
    fk.read_value[1] = 222;
    int reads = fk.n_read;
    struct isob_snap s;
    isob_perf_snap(&p, &s);
    CHECK_EQ_LONG(fk.n_read, reads + 1);
    CHECK_EQ_LONG(s.v[1], 222);
    CHECK_EQ_LONG(s.ok, 1);
    isob_perf_close(&p);
}

static void t_no_cap_user_rdpmc_reads_the_group(void)
{
    pages_allow_rdpmc();
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 0);
    CHECK_EQ_LONG(p.use_rdpmc, 1);
    fk.page[2].cap_user_rdpmc = 0;   /* the kernel withdrew user reads */
    fk.page[2].offset = 3;
    fk.read_value[2] = 333;
    int reads = fk.n_read;
    struct isob_snap s;
    isob_perf_snap(&p, &s);
    CHECK_EQ_LONG(fk.n_read, reads + 1);
    CHECK_EQ_LONG(s.v[2], 333);
    isob_perf_close(&p);
}

static void t_index_change_changes_sig(void)
{
    pages_allow_rdpmc();
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 0);
    struct isob_snap a, b, c;
    isob_perf_snap(&p, &a);
    isob_perf_snap(&p, &b);
    CHECK_EQ_LONG(a.sig, b.sig);
    fk.page[2].index = 9;
    isob_perf_snap(&p, &c);
    CHECK(c.sig != a.sig);
    /* Two events swapping counters must not cancel out either. */
    pages_allow_rdpmc();
    fk.page[0].index = 2;
    fk.page[1].index = 1;
    isob_perf_snap(&p, &c);
    CHECK(c.sig != a.sig);
    isob_perf_close(&p);
}

static void t_cpu_is_reported(void)
{
    pages_allow_rdpmc();
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 0);
    struct isob_snap s;
    fk.cpu = 3;
    isob_perf_snap(&p, &s);
    CHECK_EQ_LONG(s.cpu, 3);
    fk.cpu = 1;
    isob_perf_snap_slow(&p, &s);
    CHECK_EQ_LONG(s.cpu, 1);
    isob_perf_close(&p);
}

static void t_seqlock_race_retries(void)
{
    pages_allow_rdpmc();
    struct isob_perf p = open_ok(ISOB_SCOPE_THREAD, 0);
    fk.page[1].offset = 100;
    fk.pmc[1] = 10;      /* what the first, torn attempt reads */
    fk.pmc[6] = 20;      /* the counter the event moves to (index 7) */
    fk.bump_page = 1;
    struct isob_snap s;
    isob_perf_snap(&p, &s);
    /* Event 0's read, then event 1 twice (torn, then consistent), then 2, 3. */
    CHECK_EQ_LONG(fk.n_rdpmc, 5);
    CHECK_EQ_LONG(s.v[1], 5000 + 20);
    CHECK_EQ_LONG(fk.page[1].lock, 2);
    CHECK_EQ_LONG(s.ok, 1);

    /* The signature follows the index the consistent read saw. */
    struct isob_snap t;
    isob_perf_snap(&p, &t);
    CHECK_EQ_LONG(t.sig, s.sig);
    CHECK_EQ_LONG(t.v[1], s.v[1]);
    isob_perf_close(&p);
}

static void t_cpu_scope_from_another_cpu_uses_read(void)
{
    pages_allow_rdpmc();
    struct isob_perf p = open_ok(ISOB_SCOPE_CPU, 1);
    CHECK_EQ_LONG(p.use_rdpmc, 1);
    fk.read_value[0] = 77;
    struct isob_snap s;
    fk.cpu = 1;
    isob_perf_snap(&p, &s);
    CHECK_EQ_LONG(fk.n_rdpmc, 4);
    fk.cpu = 0;   /* rdpmc here would read CPU 0's counters */
    int reads = fk.n_read;
    isob_perf_snap(&p, &s);
    CHECK_EQ_LONG(fk.n_rdpmc, 4);
    CHECK_EQ_LONG(fk.n_read, reads + 1);
    CHECK_EQ_LONG(s.v[0], 77);
    CHECK_EQ_LONG(s.cpu, 0);
    isob_perf_close(&p);
}

/* ---- The real kernel --------------------------------------------------- */

static void t_real_kernel_counts_or_says_why(void)
{
    struct isob_perf p;
    char why[256] = "";
    int r = isob_perf_open(&p, isob_perf_sys_real(), ISOB_SCOPE_THREAD, 0, why, sizeof why);
    if (r != 0) {
        CHECK(r < 0);
        CHECK(why[0]);
        SKIP("%s", why);
    }
    CHECK_EQ_LONG(p.real_sys, 1);
    printf("# %u events, %s\n", p.nev, p.use_rdpmc ? "rdpmc" : "read(2)");
    struct isob_snap a, b;
    uint64_t sink = 0;
    isob_perf_snap(&p, &a);
    /* Work the compiler must keep, so that both counters have to move. */
    for (int i = 0; i < 100000; i++) {
        sink += (uint64_t)i;
        isob_keep(sink);
    }
    isob_perf_snap(&p, &b);
    if (!isob_perf_pair_valid(&a, &b)) {
        isob_perf_close(&p);
        SKIP("the two readings were not comparable (multiplexed by another user of the PMU, or moved)");
    }
    CHECK(b.v[0] > a.v[0]);
    CHECK(b.v[1] > a.v[1]);
    isob_perf_close(&p);
}

int main(void)
{
    TAP_CASE(t_open_thread_scope_wiring);
    TAP_CASE(t_open_cpu_scope_wiring);
    TAP_CASE(t_open_picks_rdpmc_when_allowed);
    TAP_CASE(t_open_falls_back_without_cap_user_rdpmc);
    TAP_CASE(t_open_falls_back_with_index_0);
    TAP_CASE(t_open_cycles_failure_is_reported);
    TAP_CASE(t_open_permission_failure_names_paranoid);
    TAP_CASE(t_open_secondary_failure_keeps_smaller_group);
    TAP_CASE(t_close_releases_everything);
    TAP_CASE(t_value_is_offset_plus_sign_extended_pmc);
    TAP_CASE(t_multiplexed_between_readings_drops_the_sample);
    TAP_CASE(t_multiplexed_before_a_sample_keeps_it);
    TAP_CASE(t_multiplexed_group_read_between_readings_drops);
    TAP_CASE(t_multiplexed_group_read_before_keeps);
    TAP_CASE(t_index_0_reads_the_group);
    TAP_CASE(t_no_cap_user_rdpmc_reads_the_group);
    TAP_CASE(t_index_change_changes_sig);
    TAP_CASE(t_cpu_is_reported);
    TAP_CASE(t_seqlock_race_retries);
    TAP_CASE(t_cpu_scope_from_another_cpu_uses_read);
    TAP_CASE(t_real_kernel_counts_or_says_why);
    return tap_done();
}
