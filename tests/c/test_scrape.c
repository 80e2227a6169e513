/* The outside reader (isob scrape): its plan of what to read, its readers,
 * and the matrix against the plain target.
 *
 * The plan is checked on synthetic smaps text, whose every mapping is
 * known; the readers on a fake address space that records every read, so
 * that a read outside the plan fails the test; the canary's halves in the
 * searching process itself; and the matrix on a plain process, whose
 * outcome the kernel's rules fix: the same uid finds the canary while the
 * target is dumpable and is refused when it is not, another uid is
 * refused, and nothing is written.  Each case forks (tap.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/osprobe.h"
#include "isobench/scrape.h"
#include "isobench/trusted.h"
#include "tap.h"

/* A process as /proc/PID/smaps shows it, one mapping of every class.  The
 * unnamed smaps fields a real file has in between are left out; the
 * parser skips what it does not know. */
static const char SMAPS[] =
    "555555554000-555555556000 r--p 00000000 fd:01 1234   /usr/bin/target\n"
    "Size:                  8 kB\n"
    "Rss:                   8 kB\n"
    "Swap:                  0 kB\n"
    "VmFlags: rd mr mw me dw sd\n"
    "555555556000-555555558000 rw-p 00000000 00:00 0      [heap]\n"
    "Rss:                   8 kB\n"
    "Swap:                  0 kB\n"
    "VmFlags: rd wr mr mw me ac sd\n"
    "7f0000000000-7f0000001000 ---p 00000000 00:00 0 \n"           /* a guard page: empty */
    "Rss:                   0 kB\n"
    "Swap:                  0 kB\n"
    "VmFlags: mr mw me sd\n"
    "7f0000001000-7f0000003000 ---p 00000000 00:00 0 \n"           /* PROT_NONE, populated: read */
    "Rss:                   8 kB\n"
    "Swap:                  0 kB\n"
    "VmFlags: mr mw me ac sd\n"
    "7f0000003000-7f0000004000 rw-p 00000000 00:00 0 \n"           /* swapped out: read */
    "Rss:                   0 kB\n"
    "Swap:                  4 kB\n"
    "VmFlags: rd wr mr mw me ac sd\n"
    "7f0000004000-7f0000005000 rw-s 00000000 00:05 99     /dev/dri/card0\n" /* io, pf */
    "Rss:                   4 kB\n"
    "Swap:                  0 kB\n"
    "VmFlags: rd wr sh mr mw me ms io pf dd sd\n"
    "7f0000005000-7f0000006000 rw-s 00000000 00:05 98     /dev/fb0\n" /* a device, no flags */
    "Rss:                   4 kB\n"
    "Swap:                  0 kB\n"
    "VmFlags: rd wr sh mr mw me ms sd\n"
    "7f0000006000-7f0000007000 rw-s 00000000 00:01 97     /dev/zero (deleted)\n" /* shared anon: read */
    "Rss:                   4 kB\n"
    "Swap:                  0 kB\n"
    "VmFlags: rd wr sh mr mw me ms sd\n"
    "7f0000007000-7f0000008000 rw-s 00000000 00:1a 96     /dev/shm/isob\n" /* POSIX shm: read */
    "Rss:                   0 kB\n"
    "Swap:                  0 kB\n"
    "VmFlags: rd wr sh mr mw me ms sd\n"
    "7f0000008000-7f0200008000 ---p 00000000 00:00 0 \n"           /* an 8 GiB reservation: empty */
    "Rss:                   0 kB\n"
    "Swap:                  0 kB\n"
    "VmFlags: mr mw me nr sd\n"
    "7ffff7fc1000-7ffff7fc5000 r--p 00000000 00:00 0      [vvar]\n"
    "Rss:                   0 kB\n"
    "Swap:                  0 kB\n"
    "VmFlags: rd mr pf io de dd sd\n"
    "7ffff7fc5000-7ffff7fc7000 r--p 00000000 00:00 0      [vvar_vclock]\n"
    "Rss:                   0 kB\n"
    "Swap:                  0 kB\n"
    "VmFlags: rd mr pf io de dd sd\n"
    "7ffff7fc7000-7ffff7fc9000 r-xp 00000000 00:00 0      [vdso]\n"
    "Rss:                   8 kB\n"
    "Swap:                  0 kB\n"
    "VmFlags: rd ex mr mw me de sd\n"
    "7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0      [stack]\n"
    "Rss:                  16 kB\n"
    "Swap:                  0 kB\n"
    "VmFlags: rd wr mr mw me gd ac\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  [vsyscall]\n"
    "Rss:                   0 kB\n"
    "Swap:                  0 kB\n"
    "VmFlags: ex\n";

/* What the plan of SMAPS must be, in address order. */
static const struct isob_scan_range PLANNED[] = {
    {0x555555554000, 0x555555556000}, /* the binary */
    {0x555555556000, 0x555555558000}, /* [heap] */
    {0x7f0000001000, 0x7f0000003000}, /* PROT_NONE, populated */
    {0x7f0000003000, 0x7f0000004000}, /* swapped */
    {0x7f0000006000, 0x7f0000007000}, /* /dev/zero (deleted) */
    {0x7f0000007000, 0x7f0000008000}, /* /dev/shm */
    {0x7ffff7fc7000, 0x7ffff7fc9000}, /* [vdso] */
    {0x7ffffffde000, 0x7ffffffff000}, /* [stack] */
};
#define NPLANNED (sizeof PLANNED / sizeof PLANNED[0])

/* A process of the sanitized build carries AddressSanitizer's shadow
 * memory, much of it resident: a whole-process scan spends the reader's
 * budget there before it reaches the heap.  The plain build runs these. */
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_UNDER_ASAN() SKIP("AddressSanitizer's resident shadow fills the scan's budget; the plain build runs this")
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SKIP_UNDER_ASAN() SKIP("AddressSanitizer's resident shadow fills the scan's budget; the plain build runs this")
#endif
#endif
#ifndef SKIP_UNDER_ASAN
#define SKIP_UNDER_ASAN() ((void)0)
#endif

static void t_plan_keeps_to_ordinary_memory(void)
{
    struct isob_scan_plan p;
    char why[160] = "";
    CHECK_EQ_LONG(isob_scan_plan_parse(SMAPS, ISOB_SCAN_DEFAULT_BUDGET, &p, why, sizeof why), 0);
    CHECK_EQ_LONG(p.mappings, 15);
    CHECK_EQ_LONG(p.n, NPLANNED);
    uint64_t bytes = 0;
    for (size_t i = 0; i < NPLANNED; i++) {
        CHECK(p.ranges[i].start == PLANNED[i].start && p.ranges[i].end == PLANNED[i].end);
        bytes += PLANNED[i].end - PLANNED[i].start;
    }
    CHECK_EQ_LONG(p.bytes, bytes);
    CHECK_EQ_LONG(p.skipped[ISOB_MAP_SPECIAL], 3);
    CHECK_EQ_LONG(p.skipped[ISOB_MAP_IO], 1);
    CHECK_EQ_LONG(p.skipped[ISOB_MAP_DEVICE], 1);
    CHECK_EQ_LONG(p.skipped[ISOB_MAP_EMPTY], 2);
    CHECK_EQ_LONG(p.skipped[ISOB_MAP_BUDGET], 0);
    CHECK(!p.truncated);
    /* Nothing of the device, I/O or kernel mappings is in the plan. */
    CHECK(!isob_scan_plan_covers(&p, 0x7f0000004000) && !isob_scan_plan_covers(&p, 0x7f0000005000));
    CHECK(!isob_scan_plan_covers(&p, 0x7ffff7fc1000) && !isob_scan_plan_covers(&p, 0xffffffffff600000));
    isob_scan_plan_free(&p);
}

/* The budget cuts the mapping it runs out in at a page, and the ones after
 * it are left out and counted. */
static void t_plan_stops_at_the_budget(void)
{
    struct isob_scan_plan p;
    char why[160] = "";
    uint64_t budget = 5 * ISOB_SCAN_PAGE;  /* the binary (2 pages), [heap] (2), 1 of the next */
    CHECK_EQ_LONG(isob_scan_plan_parse(SMAPS, budget, &p, why, sizeof why), 0);
    CHECK(p.bytes <= budget);
    CHECK_EQ_LONG(p.bytes, budget);
    CHECK_EQ_LONG(p.n, 3);
    CHECK(p.ranges[2].start == 0x7f0000001000 && p.ranges[2].end == 0x7f0000002000);
    CHECK(p.truncated);
    CHECK_EQ_LONG(p.skipped[ISOB_MAP_BUDGET], NPLANNED - 3);
    isob_scan_plan_free(&p);
}

/* A maps file has no Rss, Swap or VmFlags: nothing is taken for empty,
 * and the names still keep the kernel's and the devices' mappings out. */
static void t_plan_from_a_maps_file(void)
{
    static const char maps[] =
        "555555556000-555555558000 rw-p 00000000 00:00 0      [heap]\n"
        "7f0000000000-7f0000001000 ---p 00000000 00:00 0 \n"
        "7f0000005000-7f0000006000 rw-s 00000000 00:05 98     /dev/fb0\n"
        "7ffff7fc1000-7ffff7fc5000 r--p 00000000 00:00 0      [vvar]\n"
        "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  [vsyscall]\n";
    struct isob_scan_plan p;
    char why[160] = "";
    CHECK_EQ_LONG(isob_scan_plan_parse(maps, ISOB_SCAN_DEFAULT_BUDGET, &p, why, sizeof why), 0);
    CHECK_EQ_LONG(p.mappings, 5);
    CHECK_EQ_LONG(p.n, 2);
    CHECK_EQ_LONG(p.skipped[ISOB_MAP_SPECIAL], 2);
    CHECK_EQ_LONG(p.skipped[ISOB_MAP_DEVICE], 1);
    isob_scan_plan_free(&p);
}

static void t_plan_refuses_other_text(void)
{
    struct isob_scan_plan p;
    char why[160] = "";
    CHECK_EQ_LONG(isob_scan_plan_parse("Rss: 4 kB\n", ISOB_SCAN_DEFAULT_BUDGET, &p, why, sizeof why), -EINVAL);
    CHECK(strstr(why, "line 1") != NULL);
    CHECK_EQ_LONG(isob_scan_plan_parse("1000-0800 rw-p 0 00:00 0\n", ISOB_SCAN_DEFAULT_BUDGET, &p, why,
                                       sizeof why), -EINVAL);
    CHECK(strstr(why, "not a mapping") != NULL);
}

/* ---- the readers, against a fake address space ---- */

/* Memory from BASE on; pages listed in bad[] fail to read (EFAULT); after
 * deny_after bytes every read is refused (EPERM).  Every read is checked
 * against the plan, so a reader that strayed fails the case. */
#define FAKE_BASE 0x10000000u
#define FAKE_PAGES 64u
struct fake {
    unsigned char mem[FAKE_PAGES * ISOB_SCAN_PAGE];
    const struct isob_scan_plan *plan;
    uintptr_t bad[4];
    uint64_t served, deny_after;
    unsigned reads;
};

static ssize_t fake_read(void *ctx, uintptr_t addr, void *buf, size_t len)
{
    struct fake *f = ctx;
    f->reads++;
    /* The whole read must lie in one planned range. */
    int inside = 0;
    for (size_t i = 0; i < f->plan->n; i++)
        inside |= addr >= f->plan->ranges[i].start && addr + len <= f->plan->ranges[i].end;
    CHECK(inside);
    CHECK(addr >= FAKE_BASE && addr + len <= FAKE_BASE + sizeof f->mem);
    if (f->deny_after && f->served >= f->deny_after)
        return -EPERM;
    size_t n = 0;
    while (n < len) {
        uintptr_t page = (addr + n) & ~(uintptr_t)(ISOB_SCAN_PAGE - 1);
        int bad = 0;
        for (int i = 0; i < 4; i++)
            bad |= f->bad[i] && f->bad[i] == page;
        if (bad)
            break;
        size_t step = ISOB_SCAN_PAGE - ((addr + n) & (ISOB_SCAN_PAGE - 1));
        if (step > len - n)
            step = len - n;
        memcpy((unsigned char *)buf + n, f->mem + (addr + n - FAKE_BASE), step);
        n += step;
    }
    f->served += n;
    return n ? (ssize_t)n : -EFAULT;
}

static struct fake *fake_new(void)
{
    struct fake *f = calloc(1, sizeof *f);
    CHECK(f != NULL);
    return f;
}

static void plan_pages(struct isob_scan_plan *p, unsigned first, unsigned last)
{
    CHECK_EQ_LONG(isob_scan_plan_add(p, FAKE_BASE + first * ISOB_SCAN_PAGE, FAKE_BASE + last * ISOB_SCAN_PAGE), 0);
}

/* Two ranges with a hole between; the canary straddles a chunk's edge in
 * the second, a page of the first cannot be read.  The reader finds the
 * canary once, at its address, counts the bad page, reads every other
 * planned byte, and never asks for a byte outside the plan. */
static void t_reader_finds_across_chunks_inside_the_plan(void)
{
    struct isob_canary c;
    CHECK_EQ_LONG(isob_canary_new(&c), 0);
    struct fake *f = fake_new();
    memset(f->mem, 0x5a, sizeof f->mem);
    struct isob_scan_plan p;
    memset(&p, 0, sizeof p);
    p.budget = ISOB_SCAN_DEFAULT_BUDGET;
    plan_pages(&p, 0, 8);
    plan_pages(&p, 12, 48);  /* 36 pages: more than two chunks */
    f->plan = &p;
    f->bad[0] = FAKE_BASE + 3 * ISOB_SCAN_PAGE;
    uintptr_t at = FAKE_BASE + 12 * ISOB_SCAN_PAGE + ISOB_SCAN_CHUNK - 10;
    isob_canary_put(&c, f->mem + (at - FAKE_BASE));
    /* Outside the plan, a second copy that no reader may reach. */
    isob_canary_put(&c, f->mem + 10 * ISOB_SCAN_PAGE);
    struct isob_scan_result r;
    memset(&r, 0, sizeof r);
    isob_scan_ranges(&p, fake_read, f, &c, at, &r);
    CHECK_EQ_LONG(r.outcome, ISOB_OSP_GRANTED);
    CHECK_EQ_LONG(r.found, 1);
    CHECK(r.at_canary && r.first_found == at);
    CHECK_EQ_LONG(r.pages_failed, 1);
    CHECK_EQ_LONG(r.fail_err, EFAULT);
    CHECK_EQ_LONG(r.bytes, p.bytes - ISOB_SCAN_PAGE);
    CHECK_EQ_LONG(r.planned, p.bytes);
    CHECK_EQ_LONG(r.ranges, 2);
    free(f);
    isob_scan_plan_free(&p);
}

/* 31 of the 32 bytes are not the canary, however they are placed. */
static void t_reader_needs_every_byte(void)
{
    struct isob_canary c;
    CHECK_EQ_LONG(isob_canary_new(&c), 0);
    struct fake *f = fake_new();
    struct isob_scan_plan p;
    memset(&p, 0, sizeof p);
    plan_pages(&p, 0, 4);
    f->plan = &p;
    unsigned char *at = f->mem + 100;
    isob_canary_put(&c, at);
    at[31] ^= 1;
    struct isob_scan_result r;
    memset(&r, 0, sizeof r);
    isob_scan_ranges(&p, fake_read, f, &c, FAKE_BASE + 100, &r);
    CHECK_EQ_LONG(r.outcome, ISOB_OSP_GRANTED);
    CHECK_EQ_LONG(r.found, 0);
    CHECK_EQ_LONG(r.bytes, 4 * ISOB_SCAN_PAGE);
    free(f);
    isob_scan_plan_free(&p);
}

/* A refusal before anything was read is a denial; after, the scan stops
 * and says so, and what was read stays counted. */
static void t_reader_denied_and_stopped(void)
{
    struct isob_canary c;
    CHECK_EQ_LONG(isob_canary_new(&c), 0);
    struct fake *f = fake_new();
    struct isob_scan_plan p;
    memset(&p, 0, sizeof p);
    plan_pages(&p, 0, 40);
    f->plan = &p;
    f->deny_after = 1;
    f->served = 1;
    struct isob_scan_result r;
    memset(&r, 0, sizeof r);
    isob_scan_ranges(&p, fake_read, f, &c, 0, &r);
    CHECK_EQ_LONG(r.outcome, ISOB_OSP_DENIED);
    CHECK_EQ_LONG(r.err, EPERM);
    CHECK_EQ_LONG(r.bytes, 0);
    CHECK_EQ_LONG(f->reads, 1);

    f->served = 0;
    f->deny_after = ISOB_SCAN_CHUNK;
    f->reads = 0;
    memset(&r, 0, sizeof r);
    isob_scan_ranges(&p, fake_read, f, &c, 0, &r);
    CHECK_EQ_LONG(r.outcome, ISOB_OSP_GRANTED);
    CHECK_EQ_LONG(r.bytes, ISOB_SCAN_CHUNK);
    CHECK(strstr(r.note, "stopped after") != NULL);
    CHECK_EQ_LONG(f->reads, 2);
    free(f);
    isob_scan_plan_free(&p);
}

/* ptrace's plan: the head of each range, and the canary's page in order,
 * merged with a head it touches; never a page outside the plan. */
static void t_ptrace_plan(void)
{
    struct isob_scan_plan p, h;
    memset(&p, 0, sizeof p);
    plan_pages(&p, 0, 10);
    plan_pages(&p, 20, 22);
    uintptr_t canary = FAKE_BASE + 7 * ISOB_SCAN_PAGE + 64;
    CHECK_EQ_LONG(isob_scan_plan_ptrace(&p, 2, canary, &h), 0);
    CHECK_EQ_LONG(h.n, 3);
    CHECK(h.ranges[0].start == FAKE_BASE && h.ranges[0].end == FAKE_BASE + 2 * ISOB_SCAN_PAGE);
    CHECK(h.ranges[1].start == FAKE_BASE + 7 * ISOB_SCAN_PAGE && h.ranges[1].end == FAKE_BASE + 8 * ISOB_SCAN_PAGE);
    CHECK(h.ranges[2].start == FAKE_BASE + 20 * ISOB_SCAN_PAGE && h.ranges[2].end == FAKE_BASE + 22 * ISOB_SCAN_PAGE);
    isob_scan_plan_free(&h);
    /* The canary's page right after the head: one range. */
    CHECK_EQ_LONG(isob_scan_plan_ptrace(&p, 2, FAKE_BASE + 2 * ISOB_SCAN_PAGE, &h), 0);
    CHECK_EQ_LONG(h.n, 2);
    CHECK(h.ranges[0].end == FAKE_BASE + 3 * ISOB_SCAN_PAGE);
    isob_scan_plan_free(&h);
    /* A canary the plan does not cover adds nothing. */
    CHECK_EQ_LONG(isob_scan_plan_ptrace(&p, 2, FAKE_BASE + 15 * ISOB_SCAN_PAGE, &h), 0);
    CHECK_EQ_LONG(h.n, 2);
    CHECK(!isob_scan_plan_covers(&h, FAKE_BASE + 15 * ISOB_SCAN_PAGE));
    isob_scan_plan_free(&h);
    isob_scan_plan_free(&p);
}

/* The searcher never holds the canary whole: a scan of its own process
 * finds nothing, until the test itself writes the canary out; then
 * exactly that copy. */
static void t_searcher_holds_no_canary(void)
{
    SKIP_UNDER_ASAN();
    struct isob_canary c;
    CHECK_EQ_LONG(isob_canary_new(&c), 0);
    struct isob_scan_plan p;
    char why[160] = "";
    CHECK_EQ_LONG(isob_scan_plan_pid(getpid(), ISOB_SCAN_DEFAULT_BUDGET, &p, why, sizeof why), 0);
    struct isob_scan_result r;
    isob_scan(ISOB_SCAN_MEM, getpid(), &p, 0, &c, 0, &r);
    CHECK_EQ_LONG(r.outcome, ISOB_OSP_GRANTED);
    CHECK(r.bytes > 0);
    CHECK_EQ_LONG(r.found, 0);
    isob_scan_plan_free(&p);

    /* A page of its own, so that the copy is not beside the scan's buffer
     * (which holds the copy too once it has read it). */
    volatile unsigned char *copy = mmap(NULL, ISOB_SCAN_PAGE, PROT_READ | PROT_WRITE,
                                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(copy != MAP_FAILED);
    isob_canary_put(&c, copy + 8);
    CHECK_EQ_LONG(isob_scan_plan_pid(getpid(), ISOB_SCAN_DEFAULT_BUDGET, &p, why, sizeof why), 0);
    isob_scan(ISOB_SCAN_MEM, getpid(), &p, 0, &c, (uintptr_t)(copy + 8), &r);
    CHECK(r.found >= 1);
    CHECK(r.at_canary);
    isob_scan_plan_free(&p);
}

/* The guard region's checksum sees a change of one byte, so an unchanged
 * checksum after the readers means they wrote nothing there. */
static void t_guard_checksum_sees_a_write(void)
{
    unsigned char region[ISOB_CANARY_REGION];
    isob_canary_guard(region);
    uint32_t before = isob_checksum(region, sizeof region);
    for (unsigned at = 0; at < sizeof region; at += 97) {
        region[at] ^= 0x40;
        CHECK(isob_checksum(region, sizeof region) != before);
        region[at] ^= 0x40;
    }
    CHECK(isob_checksum(region, sizeof region) == before);
}

/* ---- the matrix, on the plain target ---- */

static void run_plain(struct isob_scrape_report *rep)
{
    struct isob_scrape_opts o = {0, 0};
    CHECK_EQ_LONG(isob_scrape_run("plain", &o, rep), 0);
    fprintf(stderr, "# plain: %s %s, pid %ld, %zu ranges, %llu bytes planned\n", rep->status, rep->reason,
            rep->pid, rep->plan.n, (unsigned long long)rep->plan.bytes);
    CHECK(strcmp(rep->status, "ok") == 0);
    CHECK(rep->maps_read && rep->canary_in_plan);
}

static void show_cell(const struct isob_scrape_report *rep, enum isob_scrape_id id)
{
    const struct isob_scrape_cell *cell = &rep->cells[id];
    for (int m = 0; m < ISOB_SCAN__COUNT; m++)
        fprintf(stderr, "# %s %s: outcome %d, %s, %llu bytes, found %u%s %s\n", isob_scrape_id_name(id),
                isob_scan_method_name((enum isob_scan_method)m), cell->res[m].outcome,
                cell->res[m].err ? strerror(cell->res[m].err) : "-", (unsigned long long)cell->res[m].bytes,
                cell->res[m].found, cell->res[m].at_canary ? " at the canary" : "", cell->why);
}

/* Yama's ptrace_scope 1 and above keep the same uid out of a process that
 * is not its descendant, which every target is here. */
static void need_classic_ptrace(void)
{
    int y = isob_yama_ptrace_scope();
    if (y > 0)
        SKIP("Yama's ptrace_scope is %d: the same uid may not read a non-descendant", y);
}

static void t_same_uid_finds_in_a_dumpable_process(void)
{
    SKIP_UNDER_ASAN();
    need_classic_ptrace();
    struct isob_scrape_report rep;
    run_plain(&rep);
    const struct isob_scrape_cell *cell = &rep.cells[ISOB_SCR_SAME_UID];
    show_cell(&rep, ISOB_SCR_SAME_UID);
    CHECK(cell->available && !cell->who.cap_sys_ptrace);
    CHECK_EQ_LONG(cell->who.uid, rep.target_uid);
    CHECK_EQ_LONG(cell->target_dumpable, 1);
    for (int m = 0; m < ISOB_SCAN__COUNT; m++) {
        CHECK_EQ_LONG(cell->res[m].outcome, ISOB_OSP_GRANTED);
        CHECK_EQ_LONG(cell->res[m].found, 1);
        CHECK(cell->res[m].at_canary);
        CHECK(cell->res[m].bytes > 0 && cell->res[m].bytes <= rep.plan.bytes);
    }
    /* The mem and vm_readv readers read all of the plan. */
    CHECK_EQ_LONG(cell->res[ISOB_SCAN_MEM].bytes, rep.plan.bytes);
    CHECK_EQ_LONG(cell->res[ISOB_SCAN_VM_READV].bytes, rep.plan.bytes);
    isob_scrape_report_free(&rep);
}

static void check_denied(const struct isob_scrape_cell *cell)
{
    CHECK(cell->available);
    for (int m = 0; m < ISOB_SCAN__COUNT; m++) {
        CHECK_EQ_LONG(cell->res[m].outcome, ISOB_OSP_DENIED);
        CHECK(cell->res[m].err == EPERM || cell->res[m].err == EACCES);
        CHECK_EQ_LONG(cell->res[m].bytes, 0);
        CHECK_EQ_LONG(cell->res[m].found, 0);
    }
}

static void t_same_uid_denied_by_a_non_dumpable_process(void)
{
    SKIP_UNDER_ASAN();
    struct isob_scrape_report rep;
    run_plain(&rep);
    show_cell(&rep, ISOB_SCR_SAME_UID_NONDUMPABLE);
    CHECK_EQ_LONG(rep.cells[ISOB_SCR_SAME_UID_NONDUMPABLE].target_dumpable, 0);
    check_denied(&rep.cells[ISOB_SCR_SAME_UID_NONDUMPABLE]);
    /* The target is dumpable again for the identities after it. */
    CHECK_EQ_LONG(rep.cells[ISOB_SCR_OTHER_UID + 0].target_dumpable, geteuid() == 0 ? 1 : -1);
    isob_scrape_report_free(&rep);
}

static void t_other_uid_denied(void)
{
    SKIP_UNDER_ASAN();
    if (geteuid() != 0)
        SKIP("switching to another uid needs root (running as uid %ld)", (long)geteuid());
    struct isob_scrape_report rep;
    run_plain(&rep);
    show_cell(&rep, ISOB_SCR_OTHER_UID);
    CHECK_EQ_LONG(rep.cells[ISOB_SCR_OTHER_UID].who.uid, ISOB_OSP_OTHER_UID);
    CHECK(rep.cells[ISOB_SCR_OTHER_UID].who.uid != rep.target_uid);
    check_denied(&rep.cells[ISOB_SCR_OTHER_UID]);
    isob_scrape_report_free(&rep);
}

/* Not root: the identities that need it say so and read nothing. */
static void t_identities_that_need_root_are_untested(void)
{
    SKIP_UNDER_ASAN();
    if (geteuid() == 0) {
        /* Become an ordinary user first, as an unprivileged caller is. */
        CHECK(setresgid(ISOB_OSP_OTHER_UID, ISOB_OSP_OTHER_UID, ISOB_OSP_OTHER_UID) == 0);
        CHECK(setresuid(ISOB_OSP_OTHER_UID, ISOB_OSP_OTHER_UID, ISOB_OSP_OTHER_UID) == 0);
    }
    struct isob_scrape_report rep;
    run_plain(&rep);
    static const enum isob_scrape_id rooted[] = {ISOB_SCR_ROOT, ISOB_SCR_ROOT_NO_PTRACE, ISOB_SCR_OTHER_UID};
    for (int i = 0; i < 3; i++) {
        const struct isob_scrape_cell *cell = &rep.cells[rooted[i]];
        CHECK(!cell->available && strstr(cell->why, "needs root") != NULL);
        for (int m = 0; m < ISOB_SCAN__COUNT; m++)
            CHECK(cell->res[m].outcome == ISOB_OSP_UNTESTED && cell->res[m].bytes == 0);
    }
    CHECK_EQ_LONG(rep.target_uid, getuid());
    isob_scrape_report_free(&rep);
}

/* Root without CAP_SYS_PTRACE really lacks it, and is refused by a process
 * of another uid; root with it finds the canary. */
static void t_root_with_and_without_ptrace(void)
{
    SKIP_UNDER_ASAN();
    if (geteuid() != 0)
        SKIP("needs root (running as uid %ld)", (long)geteuid());
    struct isob_scrape_report rep;
    run_plain(&rep);
    show_cell(&rep, ISOB_SCR_ROOT);
    show_cell(&rep, ISOB_SCR_ROOT_NO_PTRACE);
    CHECK(!rep.cells[ISOB_SCR_ROOT_NO_PTRACE].who.cap_sys_ptrace);
    CHECK_EQ_LONG(rep.cells[ISOB_SCR_ROOT_NO_PTRACE].who.uid, 0);
    check_denied(&rep.cells[ISOB_SCR_ROOT_NO_PTRACE]);
    if (!rep.cells[ISOB_SCR_ROOT].who.cap_sys_ptrace || isob_yama_ptrace_scope() == 3) {
        isob_scrape_report_free(&rep);
        SKIP("root without CAP_SYS_PTRACE, or Yama's ptrace_scope 3, here");
    }
    for (int m = 0; m < ISOB_SCAN__COUNT; m++)
        CHECK(rep.cells[ISOB_SCR_ROOT].res[m].found == 1 && rep.cells[ISOB_SCR_ROOT].res[m].at_canary);
    isob_scrape_report_free(&rep);
}

/* Nothing is written: the canary's region has the checksum it had when
 * planted after every identity, for a plain process, an in-process
 * compartment and a compartment's server. */
static void t_nothing_is_written(void)
{
    static const char *const targets[] = {"plain", "pipe-reader", "mprotect", "process-futex"};
    for (int t = 0; t < 4; t++) {
        struct isob_scrape_report rep;
        struct isob_scrape_opts o = {0, 0};
        CHECK_EQ_LONG(isob_scrape_run(targets[t], &o, &rep), 0);
        fprintf(stderr, "# %s: %s %s\n", targets[t], rep.status, rep.reason);
        CHECK(strcmp(rep.status, "ok") == 0);
        for (int id = 0; id < ISOB_SCR__COUNT; id++) {
            if (!rep.cells[id].available)
                continue;
            CHECK_EQ_LONG(rep.cells[id].intact_after, 1);
        }
        isob_scrape_report_free(&rep);
    }
}

/* Every process a scrape starts is gone when it returns: holders, readers,
 * and the compartments' servers, which this case collects as a subreaper
 * if they outlive their holder. */
static void t_nothing_is_left_running(void)
{
    CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
    static const char *const targets[] = {"pipe-writer", "process-futex", "seccomp"};
    for (int t = 0; t < 3; t++) {
        struct isob_scrape_report rep;
        CHECK_EQ_LONG(isob_scrape_run(targets[t], NULL, &rep), 0);
        CHECK(strcmp(rep.status, "ok") == 0);
        isob_scrape_report_free(&rep);
        int st;
        errno = 0;
        CHECK_EQ_LONG(waitpid(-1, &st, WNOHANG), -1);
        CHECK_EQ_LONG(errno, ECHILD);
    }
}

static void t_unknown_target(void)
{
    struct isob_scrape_report rep;
    CHECK_EQ_LONG(isob_scrape_target_valid("no-such-target"), -ENOENT);
    CHECK_EQ_LONG(isob_scrape_run("no-such-target", NULL, &rep), -ENOENT);
    CHECK_EQ_LONG(isob_scrape_target_valid("plain"), 0);
    CHECK_EQ_LONG(isob_scrape_target_valid("process-futex"), 0);
}

int main(void)
{
    TAP_CASE(t_plan_keeps_to_ordinary_memory);
    TAP_CASE(t_plan_stops_at_the_budget);
    TAP_CASE(t_plan_from_a_maps_file);
    TAP_CASE(t_plan_refuses_other_text);
    TAP_CASE(t_reader_finds_across_chunks_inside_the_plan);
    TAP_CASE(t_reader_needs_every_byte);
    TAP_CASE(t_reader_denied_and_stopped);
    TAP_CASE(t_ptrace_plan);
    TAP_CASE(t_searcher_holds_no_canary);
    TAP_CASE(t_guard_checksum_sees_a_write);
    TAP_CASE(t_same_uid_finds_in_a_dumpable_process);
    TAP_CASE(t_same_uid_denied_by_a_non_dumpable_process);
    TAP_CASE(t_other_uid_denied);
    TAP_CASE(t_identities_that_need_root_are_untested);
    TAP_CASE(t_root_with_and_without_ptrace);
    TAP_CASE(t_nothing_is_written);
    TAP_CASE(t_nothing_is_left_running);
    TAP_CASE(t_unknown_target);
    return tap_done();
}
