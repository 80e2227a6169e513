/* The lwc API (include/isobench/lwc.h): every call's semantics and every
 * property the emulation claims, each checked by what the other side
 * actually sees.  A context reports what it saw through the arguments of
 * its switch back, and the creator checks; a context never asserts on its
 * own, since its exit would read as a crash.
 *
 * Each case forks (tap.h) and arms an alarm: a switch that waited past a
 * context's death would end the case with SIGALRM.  Nothing is timed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isobench/lwc.h"
#include "tap.h"
#include "children.h"

/* The alarm of one case: far above anything that works. */
#define CASE_ALARM_S tap_limit(300)
/* Create/destroy cycles of the leak check. */
#define LEAK_CYCLES 200
/* A value each side writes, so that a stale one is told from a fresh one. */
#define V_BEFORE 0x1111
#define V_CHILD 0x2222
#define V_AFTER 0x3333

static size_t page(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static void *anon_pages(size_t n)
{
    void *p = mmap(NULL, n * page(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    return p;
}

static struct lwc_msg msg1(uint64_t a)
{
    struct lwc_msg m = {{0}};
    m.w[0] = a;
    return m;
}

static long open_fds(void)
{
    long n = 0;
    for (int fd = 0; fd < 4096; fd++)
        n += fcntl(fd, F_GETFD) != -1;
    return n;
}

static long vm_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %ld", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* ---- create and switch ---- */

/* Arguments round trip both ways, "from" names who switched in, and the
 * context keeps running between switches (a counter in its memory). */
static void t_switch_arguments_round_trip(void)
{
    alarm(CASE_ALARM_S);
    int caller = -1;
    struct lwc_msg in;
    int h = lwc_create(NULL, 0, 0, &caller, &in);
    if (h == LWC_SWITCHED) {
        uint64_t count = 0;
        for (;;) {
            struct lwc_msg out = in;
            for (int i = 0; i < LWC_MSG_WORDS; i++)
                out.w[i] = ~in.w[i];
            out.w[0] = ++count;
            lwc_switch(caller, &out, &caller, &in);
        }
    }
    CHECK(h > 0);
    for (uint64_t k = 1; k <= 100; k++) {
        struct lwc_msg out, back;
        for (int i = 0; i < LWC_MSG_WORDS; i++)
            out.w[i] = k * 1000003u + (uint64_t)i;
        int from = -1;
        CHECK_EQ_LONG(lwc_switch(h, &out, &from, &back), 0);
        CHECK_EQ_LONG(from, h);
        CHECK_EQ_LONG(back.w[0], k);
        for (int i = 1; i < LWC_MSG_WORDS; i++)
            CHECK(back.w[i] == ~out.w[i]);
    }
    CHECK(lwc_pid(h) > 0 && lwc_pid(h) != getpid());
    CHECK(lwc_why(h) == NULL);
    CHECK_EQ_LONG(lwc_destroy(h), 0);
    CHECK_EQ_LONG(tap_children(NULL, 0), 0);
}

/* Two contexts: each switch returns from the one switched to, with its
 * own reply; they are separate snapshots. */
static void t_two_contexts_answer_for_themselves(void)
{
    alarm(CASE_ALARM_S);
    int hs[2];
    for (int k = 0; k < 2; k++) {
        int caller;
        struct lwc_msg in;
        int h = lwc_create(NULL, 0, 0, &caller, &in);
        if (h == LWC_SWITCHED) {
            for (;;) {
                struct lwc_msg out = msg1(in.w[0] * 10 + (uint64_t)k);
                lwc_switch(caller, &out, &caller, &in);
            }
        }
        CHECK(h > 0);
        hs[k] = h;
    }
    CHECK(hs[0] != hs[1]);
    for (int round = 1; round <= 5; round++)
        for (int k = 0; k < 2; k++) {
            struct lwc_msg out = msg1((uint64_t)round), back;
            int from = -1;
            CHECK_EQ_LONG(lwc_switch(hs[k], &out, &from, &back), 0);
            CHECK_EQ_LONG(from, hs[k]);
            CHECK_EQ_LONG(back.w[0], (uint64_t)round * 10 + (uint64_t)k);
        }
    lwc_destroy(hs[0]);
    lwc_destroy(hs[1]);
    CHECK_EQ_LONG(tap_children(NULL, 0), 0);
}

/* Shared anonymous mappings of this process: the link pages of the lwc
 * library are such mappings, and nothing else in these tests makes one. */
static uint64_t shared_zero_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return UINT64_MAX;
    char line[512];
    uint64_t n = 0;
    while (fgets(line, sizeof line, f)) {
        char perms[8] = "";
        if (sscanf(line, "%*s %7s", perms) == 1 && perms[3] == 's' && strstr(line, "/dev/zero"))
            n++;
    }
    fclose(f);
    return n;
}

/* More contexts than one chunk of link pages holds, each answering for
 * itself, each holding its own link page and no sibling's; handles freed
 * in the middle are reused, and every process is gone at the end. */
#define MANY 200
static void t_many_contexts_each_alone(void)
{
    alarm(CASE_ALARM_S);
    static int hs[MANY];
    uint64_t base = shared_zero_maps();
    CHECK(base != UINT64_MAX);
    for (int round = 0; round < 2; round++) {
        for (int k = round ? MANY / 2 : 0; k < MANY; k++) {
            int caller;
            struct lwc_msg in;
            int h = lwc_create(NULL, 0, 0, &caller, &in);
            if (h == LWC_SWITCHED) {
                for (;;) {
                    struct lwc_msg out = msg1(in.w[0] * 1000 + (uint64_t)k);
                    out.w[1] = shared_zero_maps();
                    lwc_switch(caller, &out, &caller, &in);
                }
            }
            CHECK(h > 0);
            hs[k] = h;
        }
        for (int k = 0; k < MANY; k++) {
            struct lwc_msg out = msg1((uint64_t)round + 1), back;
            int from = -1;
            CHECK_EQ_LONG(lwc_switch(hs[k], &out, &from, &back), 0);
            CHECK_EQ_LONG(from, hs[k]);
            CHECK_EQ_LONG(back.w[0], (uint64_t)(round + 1) * 1000 + (uint64_t)k);
            /* Its own link, and none of its siblings' (nor its creator's
             * chunks of them). */
            CHECK_EQ_LONG(back.w[1], base + 1);
        }
        if (round == 0)
            for (int k = MANY / 2; k < MANY; k++)
                CHECK_EQ_LONG(lwc_destroy(hs[k]), 0);
    }
    for (int k = 0; k < MANY; k++)
        CHECK_EQ_LONG(lwc_destroy(hs[k]), 0);
    CHECK_EQ_LONG(tap_children(NULL, 0), 0);
}

/* A context blocks until its first switch: it has run none of its own
 * code before (a shared flag it sets first thing stays 0). */
static void t_blocked_until_first_switch(void)
{
    alarm(CASE_ALARM_S);
    volatile uint64_t *flag = lwc_alloc_shared(page());
    CHECK(flag != NULL);
    *flag = 0;
    struct lwc_spec sp = {.res = LWC_RES_VM, .how = LWC_SHARED, .vm = {(void *)flag, page()}};
    int caller;
    int h = lwc_create(&sp, 1, 0, &caller, NULL);
    if (h == LWC_SWITCHED) {
        *flag = 1;
        lwc_switch(caller, NULL, NULL, NULL);
        _exit(0);
    }
    CHECK(h > 0);
    struct timespec ms = {0, 20000000};
    nanosleep(&ms, NULL);
    CHECK_EQ_LONG(*flag, 0);
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, NULL), 0);
    CHECK_EQ_LONG(*flag, 1);
    lwc_destroy(h);
}

/* ---- memory ---- */

/* COW: the context sees the creator's memory as it was at creation; its
 * writes stay its own, and the creator's later writes stay the creator's. */
static void t_cow_snapshot_isolation(void)
{
    alarm(CASE_ALARM_S);
    volatile uint64_t *heap = anon_pages(1);
    static volatile uint64_t global;
    heap[0] = V_BEFORE;
    global = V_BEFORE;
    int caller;
    struct lwc_msg in;
    int h = lwc_create(NULL, 0, 0, &caller, &in);
    if (h == LWC_SWITCHED) {
        /* First: what the snapshot holds, after the creator wrote more. */
        struct lwc_msg out = {{heap[0], global}};
        heap[0] = V_CHILD;
        global = V_CHILD;
        lwc_switch(caller, &out, &caller, &in);
        /* Second: its own writes survived the creator's running. */
        out = (struct lwc_msg){{heap[0], global}};
        lwc_switch(caller, &out, &caller, &in);
        _exit(0);
    }
    CHECK(h > 0);
    heap[0] = V_AFTER;
    global = V_AFTER;
    struct lwc_msg back;
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    CHECK_EQ_LONG(back.w[0], V_BEFORE);
    CHECK_EQ_LONG(back.w[1], V_BEFORE);
    CHECK_EQ_LONG(heap[0], V_AFTER);
    CHECK_EQ_LONG(global, V_AFTER);
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    CHECK_EQ_LONG(back.w[0], V_CHILD);
    CHECK_EQ_LONG(back.w[1], V_CHILD);
    CHECK_EQ_LONG(heap[0], V_AFTER);
    lwc_destroy(h);
}

/* SHARED: one region, seen both ways, at every switch. */
static void t_shared_visible_both_ways(void)
{
    alarm(CASE_ALARM_S);
    volatile uint64_t *sh = lwc_alloc_shared(3 * page());
    CHECK(sh != NULL);
    sh[0] = V_BEFORE;
    struct lwc_spec sp = {.res = LWC_RES_VM, .how = LWC_SHARED, .vm = {(void *)sh, 3 * page()}};
    int caller;
    struct lwc_msg in;
    int h = lwc_create(&sp, 1, 0, &caller, &in);
    if (h == LWC_SWITCHED) {
        for (;;) {
            struct lwc_msg out = msg1(sh[0]);
            sh[0] = in.w[0] + 1;
            sh[3 * page() / 8 - 1] = in.w[0] + 2;
            lwc_switch(caller, &out, &caller, &in);
        }
    }
    CHECK(h > 0);
    sh[0] = V_AFTER;
    for (uint64_t k = 10; k < 20; k++) {
        struct lwc_msg back;
        uint64_t before = sh[0];
        CHECK_EQ_LONG(lwc_switch(h, &(struct lwc_msg){{k}}, NULL, &back), 0);
        CHECK_EQ_LONG(back.w[0], before);         /* the creator's write, seen there */
        CHECK_EQ_LONG(sh[0], k + 1);              /* the context's writes, seen here */
        CHECK_EQ_LONG(sh[3 * page() / 8 - 1], k + 2);
    }
    lwc_destroy(h);
    CHECK_EQ_LONG(lwc_free_shared((void *)sh), 0);
}

/* The table of shared regions grows past its first LWC_SHARED_FIRST slots:
 * a region far beyond them is shared with a new context like the first
 * one, and a context's own grown table is read by lwc_overlay.  At the
 * limit (lowered here to 100) lwc_alloc_shared fails with ENOSPC and
 * lwc_limit_why names the table and its limit; a success clears it. */
static void t_shared_table_grows_and_names_its_limit(void)
{
    alarm(CASE_ALARM_S);
    enum { LIMIT = 100, THEIRS = 3 * LWC_SHARED_FIRST / 2 };
    CHECK_EQ_LONG(lwc_shared_limit(LWC_SHARED_FIRST - 1), -EINVAL);
    CHECK_EQ_LONG(lwc_shared_limit(LIMIT), 0);
    static volatile uint64_t *got[LIMIT + 1];
    int n = 0;
    while (n <= LIMIT && (got[n] = lwc_alloc_shared(page())) != NULL) {
        got[n][0] = (uint64_t)n;
        n++;
    }
    /* Other cases free their regions: the table is ours alone here. */
    CHECK_EQ_LONG(n, LIMIT);
    CHECK_EQ_LONG(errno, ENOSPC);
    const char *why = lwc_limit_why();
    CHECK(why != NULL && strstr(why, "table of shared regions is full (100 regions") &&
          strstr(why, "LWC_MAX_SHARED") && strstr(why, "raise the limit"));
    for (int i = 0; i < n; i++)
        CHECK_EQ_LONG(got[i][0], (uint64_t)i);

    /* The last region, far past the first slots, shared with a context
     * that makes THEIRS regions of its own and hands one back. */
    volatile uint64_t *last = got[n - 1];
    /* A slot given back is taken again, and the limit's word is gone. */
    CHECK_EQ_LONG(lwc_free_shared((void *)got[0]), 0);
    got[0] = lwc_alloc_shared(page());
    CHECK(got[0] != NULL);
    CHECK(lwc_limit_why() == NULL);
    struct lwc_spec sp = {.res = LWC_RES_VM, .how = LWC_SHARED, .vm = {(void *)last, page()}};
    int caller;
    struct lwc_msg in;
    CHECK_EQ_LONG(lwc_shared_limit(LWC_MAX_SHARED), 0);
    int h = lwc_create(&sp, 1, 0, &caller, &in);
    if (h == LWC_SWITCHED) {
        volatile uint64_t *mine = NULL;
        for (int i = 0; i < THEIRS; i++)
            mine = lwc_alloc_shared(page());
        if (mine)
            mine[0] = 0xfeed;
        last[0] = 0xbeef;
        struct lwc_msg out = msg1((uint64_t)(uintptr_t)mine);
        lwc_switch(caller, &out, &caller, &in);
        out = msg1(mine ? mine[0] : 0);
        lwc_switch(caller, &out, &caller, &in);
        _exit(0);
    }
    CHECK(h > 0);
    struct lwc_msg back;
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    CHECK_EQ_LONG(last[0], 0xbeef);  /* the context's write, seen here */
    void *theirs = (void *)(uintptr_t)back.w[0];
    CHECK(theirs != NULL);
    struct lwc_overlay share = {theirs, page(), LWC_OVERLAY_SHARE};
    CHECK_EQ_LONG(lwc_overlay(h, &share, 1), 0);
    volatile uint64_t *s = theirs;
    CHECK_EQ_LONG(s[0], 0xfeed);
    s[0] = 0xcafe;
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    CHECK_EQ_LONG(back.w[0], 0xcafe);
    lwc_destroy(h);
    CHECK_EQ_LONG(lwc_free_shared(theirs), 0);
    /* Every region of ours back. */
    for (int i = 0; i < n; i++)
        CHECK_EQ_LONG(lwc_free_shared((void *)got[i]), 0);
}

/* A shared region the spec does not name is a snapshot like the rest:
 * neither side sees the other's writes. */
static void t_unnamed_shared_region_is_cow(void)
{
    alarm(CASE_ALARM_S);
    volatile uint64_t *sh = lwc_alloc_shared(page());
    CHECK(sh != NULL);
    sh[0] = V_BEFORE;
    int caller;
    struct lwc_msg in;
    int h = lwc_create(NULL, 0, 0, &caller, &in);
    if (h == LWC_SWITCHED) {
        struct lwc_msg out = msg1(sh[0]);
        sh[0] = V_CHILD;
        lwc_switch(caller, &out, &caller, &in);
        out = msg1(sh[0]);
        lwc_switch(caller, &out, &caller, &in);
        _exit(0);
    }
    CHECK(h > 0);
    sh[0] = V_AFTER;
    struct lwc_msg back;
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    CHECK_EQ_LONG(back.w[0], V_BEFORE);
    CHECK_EQ_LONG(sh[0], V_AFTER);
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    CHECK_EQ_LONG(back.w[0], V_CHILD);
    lwc_destroy(h);
    lwc_free_shared((void *)sh);
}

static sigjmp_buf probe_jmp;
static volatile int probe_code;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    probe_code = si->si_code;
    siglongjmp(probe_jmp, 1);
}

/* Read one byte at p: 0 if it was readable, else the SIGSEGV si_code. */
static int probe_read(volatile const char *p)
{
    struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old);
    probe_code = 0;
    if (sigsetjmp(probe_jmp, 1) == 0)
        (void)*p;
    sigaction(SIGSEGV, &old, NULL);
    return probe_code;
}

/* Is [p, p+len) mapped in this process, according to /proc/self/maps? */
static int in_maps(const void *p)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)p >= lo && (uintptr_t)p < hi)
            found = 1;
    }
    fclose(f);
    return found;
}

/* UNMAP: the range is not mapped in the context (its read meets
 * SEGV_MAPERR, /proc/self/maps lacks it) and still is in the creator. */
static void t_unmap_really_unmapped(void)
{
    alarm(CASE_ALARM_S);
    char *r = anon_pages(4);
    memset(r, 7, 4 * page());
    struct lwc_spec sp = {.res = LWC_RES_VM, .how = LWC_UNMAP, .vm = {r + page(), 2 * page()}};
    int caller;
    struct lwc_msg in;
    int h = lwc_create(&sp, 1, 0, &caller, &in);
    if (h == LWC_SWITCHED) {
        struct lwc_msg out = {{(uint64_t)probe_read(r), (uint64_t)probe_read(r + page()),
                               (uint64_t)probe_read(r + 3 * page() - 1), (uint64_t)probe_read(r + 3 * page()),
                               (uint64_t)in_maps(r + page()), (uint64_t)in_maps(r)}};
        lwc_switch(caller, &out, &caller, &in);
        _exit(0);
    }
    CHECK(h > 0);
    struct lwc_msg back;
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    CHECK_EQ_LONG(back.w[0], 0);            /* the page before: there */
    CHECK_EQ_LONG(back.w[1], SEGV_MAPERR);  /* the range: not mapped */
    CHECK_EQ_LONG(back.w[2], SEGV_MAPERR);
    CHECK_EQ_LONG(back.w[3], 0);            /* the page after: there */
    CHECK_EQ_LONG(back.w[4], 0);
    CHECK_EQ_LONG(back.w[5], 1);
    CHECK_EQ_LONG(r[page()], 7);            /* the creator keeps it */
    lwc_destroy(h);
}

/* A context that touches what it does not have dies, and its death is a
 * failed switch in its creator with the signal, never a hang. */
static void t_crash_is_failed_switch(void)
{
    alarm(CASE_ALARM_S);
    char *r = anon_pages(1);
    struct lwc_spec sp = {.res = LWC_RES_VM, .how = LWC_UNMAP, .vm = {r, page()}};
    int caller;
    int h = lwc_create(&sp, 1, 0, &caller, NULL);
    if (h == LWC_SWITCHED) {
        *(volatile char *)r = 1;
        lwc_switch(caller, NULL, NULL, NULL);
        _exit(0);
    }
    CHECK(h > 0);
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, NULL), -EOWNERDEAD);
    const char *why = lwc_why(h);
    CHECK(why != NULL);
    fprintf(stderr, "# %s\n", why);
    CHECK(strstr(why, "signal 11") != NULL);
    CHECK_EQ_LONG(lwc_termsig(h), SIGSEGV);
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, NULL), -EOWNERDEAD);
    CHECK_EQ_LONG(lwc_destroy(h), 0);
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, NULL), -ESRCH);
    CHECK_EQ_LONG(tap_children(NULL, 0), 0);
}

/* Killed while idle: the next switch fails at once with the cause. */
static void t_killed_idle_is_failed_switch(void)
{
    alarm(CASE_ALARM_S);
    int caller;
    int h = lwc_create(NULL, 0, 0, &caller, NULL);
    if (h == LWC_SWITCHED)
        for (;;)
            lwc_switch(caller, NULL, NULL, NULL);
    CHECK(h > 0);
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, NULL), 0);
    CHECK_EQ_LONG(kill(lwc_pid(h), SIGKILL), 0);
    /* Until the kernel has ended it, a switch may still find it idle;
     * the switch after its death must fail. */
    int rc;
    while ((rc = lwc_switch(h, NULL, NULL, NULL)) == 0)
        ;
    CHECK_EQ_LONG(rc, -EOWNERDEAD);
    CHECK(strstr(lwc_why(h), "signal 9") != NULL);
    lwc_destroy(h);
}

/* ---- descriptors and credentials ---- */

static void t_descriptors_kept_or_closed(void)
{
    alarm(CASE_ALARM_S);
    int a[2], b[2];
    CHECK_EQ_LONG(pipe(a), 0);
    CHECK_EQ_LONG(pipe(b), 0);
    /* a stays (default), b's two ends go. */
    int lo = b[0] < b[1] ? b[0] : b[1], hi = b[0] < b[1] ? b[1] : b[0];
    CHECK(a[0] < lo && a[1] < lo);
    struct lwc_spec sp = {.res = LWC_RES_FD, .how = LWC_UNMAP, .fd = {lo, hi}};
    int caller;
    struct lwc_msg in;
    int h = lwc_create(&sp, 1, 0, &caller, &in);
    if (h == LWC_SWITCHED) {
        struct lwc_msg out = {{(uint64_t)(fcntl(a[0], F_GETFD) != -1), (uint64_t)(fcntl(a[1], F_GETFD) != -1),
                               (uint64_t)(fcntl(b[0], F_GETFD) != -1), (uint64_t)(fcntl(b[1], F_GETFD) != -1),
                               (uint64_t)(write(a[1], "k", 1) == 1)}};
        lwc_switch(caller, &out, &caller, &in);
        _exit(0);
    }
    CHECK(h > 0);
    struct lwc_msg back;
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    CHECK_EQ_LONG(back.w[0], 1);
    CHECK_EQ_LONG(back.w[1], 1);
    CHECK_EQ_LONG(back.w[2], 0);
    CHECK_EQ_LONG(back.w[3], 0);
    CHECK_EQ_LONG(back.w[4], 1);
    char c = 0;
    CHECK_EQ_LONG(read(a[0], &c, 1), 1);  /* the kept pipe is the same pipe */
    CHECK_EQ_LONG(c, 'k');
    CHECK(fcntl(b[0], F_GETFD) != -1);    /* the creator keeps its own */
    lwc_destroy(h);
}

static void t_credentials_dropped(void)
{
    alarm(CASE_ALARM_S);
    if (geteuid() != 0)
        SKIP("dropping to another uid needs root");
    struct lwc_spec sp = {.res = LWC_RES_CRED, .cred = {65534, 65534}};
    int caller;
    struct lwc_msg in;
    int h = lwc_create(&sp, 1, 0, &caller, &in);
    if (h == LWC_SWITCHED) {
        uid_t r, e, s;
        getresuid(&r, &e, &s);
        struct lwc_msg out = {{r, e, s, getgid(), (uint64_t)getgroups(0, NULL),
                               (uint64_t)(setuid(0) == 0)}};
        lwc_switch(caller, &out, &caller, &in);
        _exit(0);
    }
    CHECK(h > 0);
    struct lwc_msg back;
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    CHECK_EQ_LONG(back.w[0], 65534);
    CHECK_EQ_LONG(back.w[1], 65534);
    CHECK_EQ_LONG(back.w[2], 65534);
    CHECK_EQ_LONG(back.w[3], 65534);
    CHECK_EQ_LONG(back.w[4], 0);
    CHECK_EQ_LONG(back.w[5], 0);  /* no way back */
    CHECK_EQ_LONG(getuid(), 0);
    lwc_destroy(h);
}

/* A credential the context cannot take is create's error. */
static void t_credentials_refused_at_create(void)
{
    alarm(CASE_ALARM_S);
    if (geteuid() == 0)
        SKIP("root may take any uid");
    struct lwc_spec sp = {.res = LWC_RES_CRED, .cred = {0, 0}};
    CHECK_EQ_LONG(lwc_create(&sp, 1, 0, NULL, NULL), -EPERM);
    CHECK_EQ_LONG(tap_children(NULL, 0), 0);
}

/* ---- bad input ---- */

static void t_malformed_spec_is_einval(void)
{
    alarm(CASE_ALARM_S);
    char *r = anon_pages(2);
    struct lwc_spec bad[] = {
        {.res = LWC_RES_VM, .how = LWC_UNMAP, .vm = {r + 1, page()}},       /* unaligned */
        {.res = LWC_RES_VM, .how = LWC_UNMAP, .vm = {r, page() + 1}},       /* partial page */
        {.res = LWC_RES_VM, .how = LWC_UNMAP, .vm = {r, 0}},                /* empty */
        {.res = LWC_RES_VM, .how = LWC_SHARED, .vm = {r, page()}},          /* private memory */
        {.res = LWC_RES_VM, .how = (enum lwc_how)9, .vm = {r, page()}},
        {.res = LWC_RES_FD, .how = LWC_UNMAP, .fd = {5, 4}},
        {.res = LWC_RES_FD, .how = LWC_SHARED, .fd = {3, 4}},
        {.res = LWC_RES_FD, .how = LWC_UNMAP, .fd = {-1, 4}},
        {.res = LWC_RES_CRED, .how = LWC_COW, .cred = {(uid_t)-1, 0}},
        {.res = (enum lwc_res)77},
        {.res = LWC_RES_SYSCALL, .sys = {SYS_openat}},                      /* without LWC_SYSTRAP */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = lwc_create(&bad[i], 1, 0, NULL, NULL);
        if (rc != -EINVAL)
            fprintf(stderr, "# spec %zu: %d\n", i, rc);
        CHECK_EQ_LONG(rc, -EINVAL);
    }
    CHECK_EQ_LONG(lwc_create(NULL, 1, 0, NULL, NULL), -EINVAL);
    CHECK_EQ_LONG(lwc_create(NULL, 0, 1u << 7, NULL, NULL), -EINVAL);
    CHECK_EQ_LONG(lwc_create(NULL, 0, LWC_SYSTRAP, NULL, NULL), -EINVAL);  /* traps nothing */
    struct lwc_spec futex_trap = {.res = LWC_RES_SYSCALL, .sys = {SYS_futex}};
    CHECK_EQ_LONG(lwc_create(&futex_trap, 1, LWC_SYSTRAP, NULL, NULL), -EINVAL);
    CHECK_EQ_LONG(tap_children(NULL, 0), 0);
    /* Handles that name nothing. */
    CHECK_EQ_LONG(lwc_switch(0, NULL, NULL, NULL), -ESRCH);
    CHECK_EQ_LONG(lwc_switch(17, NULL, NULL, NULL), -ESRCH);
    CHECK_EQ_LONG(lwc_switch(LWC_MAX_HANDLES + 1, NULL, NULL, NULL), -ESRCH);
    CHECK_EQ_LONG(lwc_destroy(3), -ESRCH);
    CHECK_EQ_LONG(lwc_restrict(3), -ESRCH);
    CHECK_EQ_LONG(lwc_overlay(3, NULL, 0), -ESRCH);
    CHECK_EQ_LONG(lwc_free_shared(r), -EINVAL);
}

/* ---- overlay and restrict ---- */

/* Copy in, copy out and share, each seen by the other side. */
static void t_overlay_copy_and_share(void)
{
    alarm(CASE_ALARM_S);
    volatile uint64_t *r = anon_pages(2);
    r[0] = V_BEFORE;
    int caller;
    struct lwc_msg in;
    int h = lwc_create(NULL, 0, 0, &caller, &in);
    if (h == LWC_SWITCHED) {
        r[0] = V_CHILD;
        /* A region made after the fork, for the creator to share. */
        volatile uint64_t *mine = lwc_alloc_shared(page());
        mine[0] = 0xabcdef;
        struct lwc_msg out = msg1((uint64_t)(uintptr_t)mine);
        lwc_switch(caller, &out, &caller, &in);
        out = (struct lwc_msg){{r[0], r[page() / 8], mine[0]}};
        lwc_switch(caller, &out, &caller, &in);
        _exit(0);
    }
    CHECK(h > 0);
    struct lwc_msg back;
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    void *theirs = (void *)(uintptr_t)back.w[0];
    struct lwc_overlay in_ov = {(void *)r, page(), LWC_OVERLAY_COPY_IN};
    CHECK_EQ_LONG(lwc_overlay(h, &in_ov, 1), 0);
    CHECK_EQ_LONG(r[0], V_CHILD);
    r[page() / 8] = V_AFTER;
    struct lwc_overlay out_ov = {(void *)(r + page() / 8), page(), LWC_OVERLAY_COPY_OUT};
    CHECK_EQ_LONG(lwc_overlay(h, &out_ov, 1), 0);
    struct lwc_overlay share = {theirs, page(), LWC_OVERLAY_SHARE};
    CHECK_EQ_LONG(lwc_overlay(h, &share, 1), 0);
    volatile uint64_t *s = theirs;
    CHECK_EQ_LONG(s[0], 0xabcdef);
    s[0] = 0x123456;  /* seen by the context: the same pages */
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    CHECK_EQ_LONG(back.w[0], V_CHILD);
    CHECK_EQ_LONG(back.w[1], V_AFTER);
    CHECK_EQ_LONG(back.w[2], 0x123456);
    struct lwc_overlay not_shared = {(void *)r, page(), LWC_OVERLAY_SHARE};
    CHECK_EQ_LONG(lwc_overlay(h, &not_shared, 1), -EINVAL);
    lwc_destroy(h);
    CHECK_EQ_LONG(lwc_free_shared(theirs), 0);
}

/* Restrict: overlay, process_vm_readv and /proc/PID/mem fail with the
 * kernel's EPERM (they worked just before); the context is non-dumpable
 * and can no longer read its creator. */
static void t_restrict_makes_overlay_eperm(void)
{
    alarm(CASE_ALARM_S);
    static volatile uint64_t secret = 0x5ec2e7;
    static volatile uint64_t mine = 42;
    int caller;
    struct lwc_msg in;
    int h = lwc_create(NULL, 0, 0, &caller, &in);
    if (h == LWC_SWITCHED) {
        for (;;) {
            uint64_t v = 0;
            struct iovec l = {&v, sizeof v}, r = {(void *)&mine, sizeof v};
            ssize_t n = process_vm_readv(getppid(), &l, 1, &r, 1, 0);
            struct lwc_msg out = {{(uint64_t)prctl(PR_GET_DUMPABLE), (uint64_t)(n == sizeof v ? 0 : errno),
                                   v, (uint64_t)(prctl(PR_SET_DUMPABLE, 1) == 0 ? 0 : errno)}};
            lwc_switch(caller, &out, &caller, &in);
        }
    }
    CHECK(h > 0);
    struct lwc_msg back;
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    CHECK_EQ_LONG(back.w[0], 1);   /* dumpable before */
    CHECK_EQ_LONG(back.w[1], 0);   /* and could read its creator */
    CHECK_EQ_LONG(back.w[2], 42);
    struct lwc_overlay ov = {(void *)&secret, sizeof secret, LWC_OVERLAY_COPY_IN};
    secret = 0;
    CHECK_EQ_LONG(lwc_overlay(h, &ov, 1), 0);
    CHECK_EQ_LONG(secret, 0x5ec2e7);
    CHECK_EQ_LONG(lwc_restrict(h), 0);
    CHECK_EQ_LONG(lwc_overlay(h, &ov, 1), -EPERM);
    ov.how = LWC_OVERLAY_COPY_OUT;
    CHECK_EQ_LONG(lwc_overlay(h, &ov, 1), -EPERM);
    uint64_t v;
    struct iovec l = {&v, sizeof v}, r = {(void *)&secret, sizeof v};
    CHECK_EQ_LONG(process_vm_readv(lwc_pid(h), &l, 1, &r, 1, 0), -1);
    CHECK_EQ_LONG(errno, EPERM);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)lwc_pid(h));
    int fd = open(path, O_RDONLY);
    CHECK_EQ_LONG(fd, -1);
    CHECK(errno == EACCES || errno == EPERM);
    CHECK_EQ_LONG(syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, lwc_pid(h), 0, 0), -1);
    CHECK_EQ_LONG(errno, EPERM);
    /* The context still serves, restricted. */
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    CHECK_EQ_LONG(back.w[0], 0);       /* non-dumpable */
    CHECK_EQ_LONG(back.w[1], EPERM);   /* its filter refuses process_vm_readv */
    CHECK_EQ_LONG(back.w[3], EPERM);   /* and dumpability back */
    lwc_destroy(h);
}

/* UNMAP hides, it does not protect: a context reads the range its creator
 * unmapped from it through process_vm_readv and /proc/CREATOR/mem, as any
 * process of the uid reads a dumpable one.  lwc_restrict takes away the
 * first (the context's filter) but not the second; only a non-dumpable
 * creator (isob_caller_close_to_readers, what isob's matrix does before it
 * creates compartments) closes both.  As root the case first becomes an
 * ordinary uid: a context that holds CAP_SYS_PTRACE reads anything. */
static void t_unmap_hides_but_does_not_protect(void)
{
    alarm(CASE_ALARM_S);
    if (geteuid() == 0) {
        gid_t g = 65534;
        uid_t u = 65534;
        CHECK(setgroups(0, NULL) == 0 && setresgid(g, g, g) == 0 && setresuid(u, u, u) == 0);
        CHECK(prctl(PR_SET_DUMPABLE, 1) == 0);
    }
    volatile uint64_t *r = (volatile uint64_t *)anon_pages(1);
    r[0] = 0x5ec2e75ec2e7ull;
    struct lwc_spec sp = {.res = LWC_RES_VM, .how = LWC_UNMAP, .vm = {(void *)r, page()}};
    int caller;
    struct lwc_msg in;
    int h = lwc_create(&sp, 1, 0, &caller, &in);
    if (h == LWC_SWITCHED) {
        for (;;) {
            uint64_t v = 0, w = 0;
            struct iovec l = {&v, sizeof v}, rr = {(void *)r, sizeof v};
            ssize_t n = process_vm_readv(getppid(), &l, 1, &rr, 1, 0);
            long vm_err = n == sizeof v ? 0 : errno;
            char path[64];
            snprintf(path, sizeof path, "/proc/%d/mem", (int)getppid());
            int fd = open(path, O_RDONLY);
            long mem_err = fd < 0 ? errno : pread(fd, &w, sizeof w, (off_t)(uintptr_t)r) == sizeof w ? 0 : errno;
            if (fd >= 0)
                close(fd);
            struct lwc_msg out = {{(uint64_t)vm_err, v, (uint64_t)mem_err, w}};
            lwc_switch(caller, &out, &caller, &in);
        }
    }
    CHECK(h > 0);
    struct lwc_msg back;
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    fprintf(stderr, "# unrestricted: process_vm_readv %s, /proc/CREATOR/mem %s\n",
            back.w[0] ? strerror((int)back.w[0]) : "read it", back.w[2] ? strerror((int)back.w[2]) : "read it");
    CHECK_EQ_LONG(back.w[0], 0);
    CHECK(back.w[1] == 0x5ec2e75ec2e7ull);
    CHECK_EQ_LONG(back.w[2], 0);
    CHECK(back.w[3] == 0x5ec2e75ec2e7ull);
    CHECK_EQ_LONG(lwc_restrict(h), 0);
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    fprintf(stderr, "# restricted: process_vm_readv %s, /proc/CREATOR/mem %s\n",
            back.w[0] ? strerror((int)back.w[0]) : "read it", back.w[2] ? strerror((int)back.w[2]) : "read it");
    CHECK_EQ_LONG(back.w[0], EPERM);
    CHECK_EQ_LONG(back.w[2], 0);
    CHECK(back.w[3] == 0x5ec2e75ec2e7ull);
    /* The creator non-dumpable: the kernel refuses the context too. */
    CHECK_EQ_LONG(prctl(PR_SET_DUMPABLE, 0), 0);
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    fprintf(stderr, "# creator non-dumpable: /proc/CREATOR/mem %s\n",
            back.w[2] ? strerror((int)back.w[2]) : "read it");
    CHECK(back.w[2] == EACCES || back.w[2] == EPERM);
    CHECK(back.w[3] == 0);
    lwc_destroy(h);
}

/* ---- SYSTRAP ---- */

static char tmpdir[64];

static void make_file(const char *name, const char *text, char *path, size_t len)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/isob-lwc-XXXXXX");
    CHECK(mkdtemp(tmpdir) != NULL);
    snprintf(path, len, "%s/%s", tmpdir, name);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK_EQ_LONG(write(fd, text, strlen(text)), (long)strlen(text));
    close(fd);
}

static void remove_file(const char *path)
{
    unlink(path);
    rmdir(tmpdir);
}

/* Does this process hold a seccomp listener?  readlink only: in a trapped
 * context, opening /proc/self/fd would be a trapped openat itself. */
static int holds_listener(void)
{
    int found = 0;
    for (int fd = 0; fd < 1024; fd++) {
        char path[64], target[256];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n > 0) {
            target[n] = 0;
            found |= strstr(target, "seccomp") != NULL;
        }
    }
    return found;
}

/* The context opens twice (the first allowed, performed by the creator
 * and injected; the second denied) and reads; it reports what it got. */
static void t_systrap_allows_denies_injects(void)
{
    alarm(CASE_ALARM_S);
    char path[128];
    make_file("allowed", "lwc-payload", path, sizeof path);
    struct lwc_spec sp[] = {{.res = LWC_RES_SYSCALL, .sys = {SYS_openat}},
                            {.res = LWC_RES_SYSCALL, .sys = {SYS_read}}};
    int caller;
    struct lwc_msg in;
    int h = lwc_create(sp, 2, LWC_SYSTRAP, &caller, &in);
    if (h == LWC_SWITCHED) {
        int listener = holds_listener();
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        char buf[32] = "";
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        int fd2 = open(path, O_RDONLY);
        int err2 = fd2 < 0 ? errno : 0;
        struct lwc_msg out = {{(uint64_t)fd, (uint64_t)n, (uint64_t)(n == 11 && memcmp(buf, "lwc-payload", 11) == 0),
                               (uint64_t)fd2, (uint64_t)err2, (uint64_t)(fcntl(fd, F_GETFD) & FD_CLOEXEC),
                               (uint64_t)listener}};
        lwc_switch(caller, &out, &caller, &in);
        _exit(0);
    }
    CHECK(h > 0);
    int from = -1;
    struct lwc_msg t;
    /* First trap: the allowed open. */
    CHECK_EQ_LONG(lwc_switch(h, NULL, &from, &t), LWC_TRAPPED);
    CHECK_EQ_LONG(from, h);
    CHECK_EQ_LONG(t.w[0], SYS_openat);
    char seen[256];
    int len = lwc_trap_string(h, 1, seen, sizeof seen);
    CHECK_EQ_LONG(len, (long)strlen(path));
    CHECK(strcmp(seen, path) == 0);
    /* CONTINUE on a path call is refused: its policy read memory. */
    struct lwc_sysreply cont = {.action = LWC_SYS_CONTINUE};
    CHECK_EQ_LONG(lwc_syscall(h, &cont), -EINVAL);
    struct lwc_sysreply open_r = {.action = LWC_SYS_OPEN, .path = seen, .flags = (int)t.w[3], .mode = 0};
    int child_fd = lwc_syscall(h, &open_r);
    CHECK(child_fd >= 0);
    /* Second trap: the read, let through as made. */
    CHECK_EQ_LONG(lwc_switch(h, NULL, &from, &t), LWC_TRAPPED);
    CHECK_EQ_LONG(t.w[0], SYS_read);
    CHECK_EQ_LONG(t.w[1], child_fd);
    CHECK_EQ_LONG(lwc_syscall(h, &cont), 0);
    /* Third trap: the second open, denied. */
    CHECK_EQ_LONG(lwc_switch(h, NULL, &from, &t), LWC_TRAPPED);
    CHECK_EQ_LONG(t.w[0], SYS_openat);
    struct lwc_sysreply deny = {.action = LWC_SYS_DENY, .value = EPERM};
    CHECK_EQ_LONG(lwc_syscall(h, &deny), 0);
    /* Then the switch back with the report. */
    struct lwc_msg back;
    CHECK_EQ_LONG(lwc_switch(h, NULL, &from, &back), 0);
    CHECK_EQ_LONG(from, h);
    CHECK_EQ_LONG(back.w[0], child_fd);
    CHECK_EQ_LONG(back.w[1], 11);
    CHECK_EQ_LONG(back.w[2], 1);
    CHECK_EQ_LONG((int64_t)back.w[3], -1);
    CHECK_EQ_LONG(back.w[4], EPERM);
    CHECK_EQ_LONG(back.w[5], FD_CLOEXEC);
    CHECK_EQ_LONG(back.w[6], 0);  /* the context holds no listener of its own */
    /* Nothing is pending now. */
    CHECK_EQ_LONG(lwc_syscall(h, &deny), -EINVAL);
    lwc_destroy(h);
    remove_file(path);
    CHECK_EQ_LONG(tap_children(NULL, 0), 0);
}

/* A switch without an answer denies the call with EPERM; a trapped
 * context that dies is a failed switch. */
static void t_systrap_default_deny_and_death(void)
{
    alarm(CASE_ALARM_S);
    struct lwc_spec sp = {.res = LWC_RES_SYSCALL, .sys = {SYS_getpid}};
    int caller;
    struct lwc_msg in;
    /* A page nobody may touch, made before the context (which may make no
     * mmap of its own once trapped). */
    volatile int *dead = mmap(NULL, page(), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(dead != MAP_FAILED);
    int h = lwc_create(&sp, 1, LWC_SYSTRAP, &caller, &in);
    if (h == LWC_SWITCHED) {
        long r = syscall(SYS_getpid);
        struct lwc_msg out = {{(uint64_t)r, (uint64_t)(r < 0 ? errno : 0)}};
        lwc_switch(caller, &out, &caller, &in);
        /* Not raise(): it asks getpid, which is trapped here. */
        *dead = 0;
        _exit(0);
    }
    CHECK(h > 0);
    struct lwc_msg t, back;
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &t), LWC_TRAPPED);
    CHECK_EQ_LONG(t.w[0], SYS_getpid);
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), 0);
    CHECK_EQ_LONG((int64_t)back.w[0], -1);
    CHECK_EQ_LONG(back.w[1], EPERM);
    CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, &back), -EOWNERDEAD);
    CHECK(strstr(lwc_why(h), "signal 11") != NULL);
    lwc_destroy(h);
    CHECK_EQ_LONG(tap_children(NULL, 0), 0);
}

/* ---- nesting, lifetime, leaks ---- */

/* A context creates its own: the switch chain root -> a -> b -> a -> root. */
static void t_nested_contexts(void)
{
    alarm(CASE_ALARM_S);
    int caller;
    struct lwc_msg in;
    int h = lwc_create(NULL, 0, 0, &caller, &in);
    if (h == LWC_SWITCHED) {
        int c2;
        struct lwc_msg in2;
        int g = lwc_create(NULL, 0, 0, &c2, &in2);
        if (g == LWC_SWITCHED) {
            struct lwc_msg out = msg1(in2.w[0] * 3);
            lwc_switch(c2, &out, NULL, NULL);
            _exit(0);
        }
        struct lwc_msg back = {{0}};
        int rc = g > 0 ? lwc_switch(g, &in, NULL, &back) : g;
        struct lwc_msg out = {{back.w[0] + 1, (uint64_t)rc, (uint64_t)lwc_pid(g)}};
        lwc_destroy(g);
        lwc_switch(caller, &out, NULL, NULL);
        _exit(0);
    }
    CHECK(h > 0);
    struct lwc_msg back;
    CHECK_EQ_LONG(lwc_switch(h, &(struct lwc_msg){{14}}, NULL, &back), 0);
    CHECK_EQ_LONG(back.w[1], 0);
    CHECK_EQ_LONG(back.w[0], 43);
    CHECK((pid_t)back.w[2] != lwc_pid(h) && (pid_t)back.w[2] > 0);
    lwc_destroy(h);
}

/* Every context dies with its creator. */
static void t_contexts_die_with_creator(void)
{
    alarm(CASE_ALARM_S);
    int p[2], go[2];
    CHECK_EQ_LONG(pipe(p), 0);
    CHECK_EQ_LONG(pipe(go), 0);
    pid_t creator = fork();
    CHECK(creator >= 0);
    if (creator == 0) {
        int caller;
        int h = lwc_create(NULL, 0, 0, &caller, NULL);
        if (h == LWC_SWITCHED)
            for (;;)
                pause();
        pid_t pid = lwc_pid(h);
        if (write(p[1], &pid, sizeof pid) != sizeof pid)
            _exit(2);
        char c;
        if (read(go[0], &c, 1) != 1)
            _exit(3);
        _exit(0);  /* without destroying it */
    }
    pid_t ctx;
    CHECK_EQ_LONG(read(p[0], &ctx, sizeof ctx), (long)sizeof ctx);
    int pfd = (int)syscall(SYS_pidfd_open, ctx, 0);
    CHECK(pfd >= 0);
    CHECK_EQ_LONG(write(go[1], "x", 1), 1);
    int st;
    CHECK_EQ_LONG(waitpid(creator, &st, 0), creator);
    struct pollfd pf = {pfd, POLLIN, 0};
    /* Bounded only by the case's alarm. */
    CHECK_EQ_LONG(poll(&pf, 1, -1), 1);
    close(pfd);
}

/* Create, switch and destroy leave no descriptor, mapping or process. */
static void t_create_destroy_leaks_nothing(void)
{
    alarm(CASE_ALARM_S);
    void *sh = lwc_alloc_shared(page());
    CHECK(sh != NULL);
    struct lwc_spec sp = {.res = LWC_RES_VM, .how = LWC_SHARED, .vm = {sh, page()}};
    for (int round = 0; round < 2; round++) {
        long fds = open_fds(), kib = vm_kib();
        for (int i = 0; i < LEAK_CYCLES; i++) {
            int caller;
            unsigned flags = (i & 1) ? LWC_SYSTRAP : 0;
            struct lwc_spec both[2] = {sp, {.res = LWC_RES_SYSCALL, .sys = {SYS_getpid}}};
            int h = lwc_create(both, flags ? 2 : 1, flags, &caller, NULL);
            if (h == LWC_SWITCHED)
                for (;;)
                    lwc_switch(caller, NULL, NULL, NULL);
            CHECK(h > 0);
            CHECK_EQ_LONG(lwc_switch(h, NULL, NULL, NULL), 0);
            CHECK_EQ_LONG(lwc_destroy(h), 0);
        }
        if (round == 0)
            continue;  /* the first round may set up lazily-made state */
        CHECK_EQ_LONG(open_fds(), fds);
        CHECK(vm_kib() - kib < 64);
        CHECK_EQ_LONG(tap_children(NULL, 0), 0);
        CHECK(waitpid(-1, NULL, WNOHANG) <= 0);
    }
    lwc_free_shared(sh);
}

int main(void)
{
    TAP_CASE(t_switch_arguments_round_trip);
    TAP_CASE(t_two_contexts_answer_for_themselves);
    TAP_CASE(t_many_contexts_each_alone);
    TAP_CASE(t_blocked_until_first_switch);
    TAP_CASE(t_cow_snapshot_isolation);
    TAP_CASE(t_shared_visible_both_ways);
    TAP_CASE(t_unnamed_shared_region_is_cow);
    TAP_CASE(t_shared_table_grows_and_names_its_limit);
    TAP_CASE(t_unmap_really_unmapped);
    TAP_CASE(t_crash_is_failed_switch);
    TAP_CASE(t_killed_idle_is_failed_switch);
    TAP_CASE(t_descriptors_kept_or_closed);
    TAP_CASE(t_credentials_dropped);
    TAP_CASE(t_credentials_refused_at_create);
    TAP_CASE(t_malformed_spec_is_einval);
    TAP_CASE(t_overlay_copy_and_share);
    TAP_CASE(t_restrict_makes_overlay_eperm);
    TAP_CASE(t_unmap_hides_but_does_not_protect);
    TAP_CASE(t_systrap_allows_denies_injects);
    TAP_CASE(t_systrap_default_deny_and_death);
    TAP_CASE(t_nested_contexts);
    TAP_CASE(t_contexts_die_with_creator);
    TAP_CASE(t_create_destroy_leaks_nothing);
    return tap_done();
}
