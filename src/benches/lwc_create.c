/* lwc-create: what a snapshot context costs, against dirty pages and the
 * caller's resident memory (lwC's creation figure: create, switch to and
 * destroy; Litton et al., OSDI 2016: 87.7 us plus about 3.4 us per dirty
 * page).
 *
 * For each resident heap H (MiB, written page by page before, 4 KiB pages:
 * MADV_NOHUGEPAGE) and each count D of dirty pages (a region of D pages,
 * resident too), one sample is one whole operation, timed by the caller:
 *
 *   lwc          lwc_create, lwc_switch to it (it writes one byte on each
 *                of the D pages, counts its minor faults, switches back),
 *                lwc_destroy
 *   fork         fork, the child writes the D pages and _exits, waitpid:
 *                the emulation's floor (D = 0 is fork+exit+wait)
 *   soft-dirty   in-process rollback: clear_refs, the D writes, a pagemap
 *                scan of heap and region, the dirty pages copied back
 *   uffd-wp      in-process rollback: write-protect heap and region, the D
 *                writes (each saved by a userfaultfd handler thread on its
 *                first write), the saved pages copied back
 * and, once per H, the baselines
 *   vfork        vfork, _exit, waitpid
 *   posix_spawn  posix_spawn of /bin/true, waitpid
 *   pthread      pthread_create of an empty function, pthread_join
 *   cow-fault    the kernel's own copy-on-write fault: a forked child
 *                times its first write to each of COW_FAULT_PAGES pages
 *                of its parent's; one sample per page
 *
 * Every result carries D (dirty_pages), H (heap_mib), the THP setting and
 * the minor faults that prove the pages were dirtied (the run fails when
 * there are fewer faults than pages); the intercept and the cost per
 * dirty page are fitted later (least squares over D).  The clock is the
 * TSC or CLOCK_MONOTONIC_RAW (xclock.h): the work happens in other
 * processes and in the kernel. */
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/bench.h"
#include "isobench/lwc.h"
#include "rollback.h"
#include "xclock.h"

extern char **environ;

static const size_t cr_dirty[] = {0, 1, 16, 256, 4096, 65536};
static const size_t cr_dirty_quick[] = {0, 1, 16, 256, 4096};
static const size_t cr_heap_mib[] = {1, 64, 1024};
static const size_t cr_heap_mib_quick[] = {1, 64};
#define CR_N(a) (sizeof(a) / sizeof((a)[0]))

/* Operations timed per cell; the large cells (a GiB heap or 256 MiB of
 * dirty pages, tens of milliseconds each) take fewer. */
#define CR_REPS 20
#define CR_REPS_QUICK 8
#define CR_REPS_LARGE 8
#define CR_REPS_LARGE_QUICK 4
/* A cell counts as large from this many resident MiB. */
#define CR_LARGE_MIB 512
/* Pages of the COW fault measurement. */
#define COW_FAULT_PAGES 4096
/* A cell is refused when its memory would pass this share of
 * MemAvailable (the benchmark shares the machine). */
#define CR_MEM_SHARE 4
/* The program posix_spawn runs. */
#define CR_SPAWN_PATH "/bin/true"

struct cr_run {
    struct isob_xclock *x;
    size_t ps;
    size_t heap_mib;
    unsigned char *heap;
    size_t heap_pages;
    unsigned char *dirty;    /* the region the session writes */
    size_t ndirty;
    char thp[32];
    int reps;
    uint64_t *minflt;        /* per rep: faults counted where the pages were written */
    volatile uint64_t *shared_flt; /* fork: the child's count, in a shared page */
};

static long minflt_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static void thp_setting(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f)
        return;
    char line[128];
    if (fgets(line, sizeof line, f)) {
        char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
        if (a && b) {
            *b = 0;
            snprintf(buf, len, "%s", a + 1);
        }
    }
    fclose(f);
}

static long mem_available_mib(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib < 0 ? -1 : kib / 1024;
}

/* Resident, 4 KiB pages: every page written once, with its index. */
static unsigned char *resident(size_t pages, size_t ps)
{
    if (!pages)
        return NULL;
    unsigned char *p = mmap(NULL, pages * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    madvise(p, pages * ps, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < pages; i++)
        p[i * ps] = (unsigned char)i;
    return p;
}

static void cr_params(char *buf, size_t len, const struct cr_run *r, const char *variant, size_t dirty,
                      const char *extra)
{
    snprintf(buf, len,
             "{\"variant\":\"%s\",\"dirty_pages\":%zu,\"heap_mib\":%zu,\"page_bytes\":%zu,\"thp\":\"%s\","
             "\"thp_advice\":\"MADV_NOHUGEPAGE\",\"timebase\":\"%s\"%s%s}",
             variant, dirty, r->heap_mib, r->ps, r->thp, r->x->tsc ? "tsc" : "clock", extra ? "," : "",
             extra ? extra : "");
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Emit samples (n of them) with the fault counts as proof: failed when
 * any operation saw fewer faults than pages it dirtied. */
static void cr_emit(struct cr_run *r, const char *variant, size_t dirty, const uint64_t *t, size_t n,
                    const uint64_t *flt, const char *fault_what, const char *more, const char *failure)
{
    struct isob_bench_ctx *ctx = &r->x->ctx;
    char extra[512] = "", params[1024], reason[256];
    uint64_t lo = UINT64_MAX, hi = 0, med = 0;
    if (flt && n) {
        uint64_t *c = malloc(n * sizeof *c);
        if (c) {
            memcpy(c, flt, n * sizeof *c);
            qsort(c, n, sizeof *c, cmp_u64);
            lo = c[0];
            hi = c[n - 1];
            med = c[n / 2];
            free(c);
        }
        snprintf(extra, sizeof extra, "\"reps\":%zu,\"faults_counted\":\"%s\",\"minflt_min\":%llu,"
                 "\"minflt_median\":%llu,\"minflt_max\":%llu%s%s", n, fault_what,
                 (unsigned long long)lo, (unsigned long long)med, (unsigned long long)hi,
                 more ? "," : "", more ? more : "");
    } else {
        snprintf(extra, sizeof extra, "\"reps\":%zu%s%s", n, more ? "," : "", more ? more : "");
    }
    cr_params(params, sizeof params, r, variant, dirty, extra);
    if (failure) {
        isob_emit_result(ctx, "lwc-create", params, NULL, NULL, "failed", failure, NULL);
        return;
    }
    if (flt && n && lo < dirty) {
        snprintf(reason, sizeof reason, "pages were not dirtied: %llu minor faults for %zu pages",
                 (unsigned long long)lo, dirty);
        isob_emit_result(ctx, "lwc-create", params, NULL, NULL, "failed", reason, NULL);
        return;
    }
    struct isob_samples s;
    if (isob_samples_alloc(&s, n ? n : 1, 1) != 0) {
        isob_emit_result(ctx, "lwc-create", params, NULL, NULL, "failed", "out of memory", NULL);
        return;
    }
    memcpy(s.v, t, n * sizeof *t);
    s.n = n;
    isob_emit_result(ctx, "lwc-create", params, &s, NULL, "ok", NULL, NULL);
    isob_samples_free(&s);
}

/* The context of the lwc variant: write, count, switch back; it lives on
 * until destroyed. */
static __attribute__((noreturn)) void cr_context(struct cr_run *r, int caller, const struct lwc_msg *in)
{
    size_t d = (size_t)in->w[0];
    unsigned char v = (unsigned char)in->w[1];
    long f0 = minflt_now();
    for (size_t i = 0; i < d; i++)
        r->dirty[i * r->ps] = v;
    struct lwc_msg out = {{(uint64_t)(minflt_now() - f0)}};
    for (;;)
        lwc_switch(caller, &out, NULL, NULL);
}

static void cr_lwc(struct cr_run *r, uint64_t *t)
{
    int failed = 0;
    char why[256] = "";
    for (int rep = -1; rep < r->reps && !failed; rep++) {
        uint64_t t0 = isob_xclock_now(r->x);
        int caller;
        struct lwc_msg in;
        int h = lwc_create(NULL, 0, 0, &caller, &in);
        if (h == LWC_SWITCHED)
            cr_context(r, caller, &in);
        struct lwc_msg out = {{r->ndirty, (uint64_t)(rep + 2)}}, back;
        int rc = h < 0 ? h : lwc_switch(h, &out, NULL, &back);
        if (h > 0) {
            if (rc < 0 && lwc_why(h))
                snprintf(why, sizeof why, "the context %s", lwc_why(h));
            lwc_destroy(h);
        }
        uint64_t t1 = isob_xclock_now(r->x);
        if (rc < 0) {
            if (!why[0])
                snprintf(why, sizeof why, "%s: %s", h < 0 ? "lwc_create" : "lwc_switch", isob_strerror(rc));
            failed = 1;
        } else if (rep >= 0) {
            t[rep] = t1 - t0;
            r->minflt[rep] = back.w[0];
        }
    }
    cr_emit(r, "lwc", r->ndirty, t, failed ? 0 : (size_t)r->reps, r->minflt, "in the context", NULL,
            failed ? why : NULL);
}

static void cr_fork(struct cr_run *r, uint64_t *t)
{
    char why[256] = "";
    int failed = 0;
    for (int rep = -1; rep < r->reps && !failed; rep++) {
        uint64_t t0 = isob_xclock_now(r->x);
        pid_t pid = fork();
        if (pid == 0) {
            long f0 = minflt_now();
            for (size_t i = 0; i < r->ndirty; i++)
                r->dirty[i * r->ps] = (unsigned char)(rep + 2);
            *r->shared_flt = (uint64_t)(minflt_now() - f0);
            _exit(0);
        }
        int st = 0;
        if (pid > 0)
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        uint64_t t1 = isob_xclock_now(r->x);
        if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            snprintf(why, sizeof why, pid < 0 ? "fork: %s" : "the child did not exit with 0",
                     pid < 0 ? strerror(errno) : "");
            failed = 1;
        } else if (rep >= 0) {
            t[rep] = t1 - t0;
            r->minflt[rep] = *r->shared_flt;
        }
    }
    cr_emit(r, "fork", r->ndirty, t, failed ? 0 : (size_t)r->reps, r->minflt, "in the child", NULL,
            failed ? why : NULL);
}

/* soft-dirty or uffd-wp over heap and region. */
static void cr_inproc(struct cr_run *r, uint64_t *t, int uffd)
{
    const char *variant = uffd ? "uffd-wp" : "soft-dirty";
    char why[256] = "";
    if ((uffd ? rb_uffd_probe : rb_soft_dirty_probe)(why, sizeof why) != 0) {
        char params[1024];
        cr_params(params, sizeof params, r, variant, r->ndirty, NULL);
        isob_emit_result(&r->x->ctx, "lwc-create", params, NULL, NULL, "skipped", why, NULL);
        return;
    }
    struct rb_state s = {.nr = 0, .dirty = r->ndirty};
    s.r[s.nr++] = (struct rb_region){r->heap, r->heap_pages};
    s.r[s.nr++] = (struct rb_region){r->dirty, r->ndirty};
    int rc = uffd ? rb_uffd_open(&s) : rb_soft_dirty_open(&s);
    int failed = rc != 0;
    if (failed)
        snprintf(why, sizeof why, "set-up: %s", isob_strerror(rc));
    uint64_t *found = calloc((size_t)r->reps, sizeof *found);
    for (int rep = -1; rep < r->reps && !failed && found; rep++) {
        long f0 = minflt_now();
        uint64_t t0 = isob_xclock_now(r->x);
        long n = uffd ? rb_uffd_cycle(&s, (unsigned char)(0xa0 + rep)) : rb_soft_dirty_cycle(&s, (unsigned char)(0xa0 + rep));
        uint64_t t1 = isob_xclock_now(r->x);
        long f1 = minflt_now();
        if (n < 0) {
            snprintf(why, sizeof why, "%s", isob_strerror((int)n));
            failed = 1;
        } else if ((size_t)n != r->ndirty) {
            snprintf(why, sizeof why, "%ld pages %s for %zu written", n, uffd ? "saved" : "found dirty",
                     r->ndirty);
            failed = 1;
        } else if (!rb_restored(&s)) {
            snprintf(why, sizeof why, "rollback left the region changed");
            failed = 1;
        } else if (rep >= 0) {
            t[rep] = t1 - t0;
            r->minflt[rep] = (uint64_t)(f1 - f0);
            found[rep] = (uint64_t)n;
        }
    }
    if (!found && !failed) {
        snprintf(why, sizeof why, "out of memory");
        failed = 1;
    }
    rb_close(&s);
    char more[128];
    snprintf(more, sizeof more, "\"pages_%s\":%zu,\"scanned_pages\":%zu", uffd ? "saved" : "found",
             failed ? 0 : r->ndirty, r->heap_pages + r->ndirty);
    cr_emit(r, variant, r->ndirty, t, failed ? 0 : (size_t)r->reps, r->minflt, "in this process", more,
            failed ? why : NULL);
    free(found);
}

static void *cr_empty_thread(void *arg) { return arg; }

/* vfork, posix_spawn, pthread: D = 0. */
static void cr_baselines(struct cr_run *r, uint64_t *t)
{
    static const char *const names[] = {"vfork", "posix_spawn", "pthread"};
    for (int b = 0; b < 3; b++) {
        char why[256] = "";
        int failed = 0;
        if (b == 1 && access(CR_SPAWN_PATH, X_OK) != 0) {
            char params[1024];
            cr_params(params, sizeof params, r, names[b], 0, NULL);
            snprintf(why, sizeof why, "%s is not executable here", CR_SPAWN_PATH);
            isob_emit_result(&r->x->ctx, "lwc-create", params, NULL, NULL, "skipped", why, NULL);
            continue;
        }
        for (int rep = -1; rep < r->reps && !failed; rep++) {
            /* volatile: vfork's child shares this frame until it exits. */
            volatile uint64_t t0 = isob_xclock_now(r->x);
            int st = 0, rc = 0;
            if (b == 0) {
                pid_t pid = vfork();
                if (pid == 0)
                    _exit(0);
                rc = pid < 0 ? errno : 0;
                if (pid > 0)
                    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                        ;
            } else if (b == 1) {
                pid_t pid;
                char *argv[] = {(char *)CR_SPAWN_PATH, NULL};
                rc = posix_spawn(&pid, CR_SPAWN_PATH, NULL, NULL, argv, environ);
                if (rc == 0)
                    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                        ;
            } else {
                pthread_t th;
                rc = pthread_create(&th, NULL, cr_empty_thread, NULL);
                if (rc == 0)
                    pthread_join(th, NULL);
            }
            uint64_t t1 = isob_xclock_now(r->x);
            if (rc || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                snprintf(why, sizeof why, "%s: %s", names[b], rc ? strerror(rc) : "exit status not 0");
                failed = 1;
            } else if (rep >= 0) {
                t[rep] = t1 - t0;
            }
        }
        cr_emit(r, names[b], 0, t, failed ? 0 : (size_t)r->reps, NULL, NULL, NULL, failed ? why : NULL);
    }
}

/* The kernel's copy-on-write fault, in a forked child: one sample per page. */
static void cr_cow_fault(struct cr_run *r)
{
    size_t n = COW_FAULT_PAGES;
    char why[256] = "";
    char params[1024];
    unsigned char *pages = resident(n, r->ps);
    uint64_t *t = isob_map((n + 1) * sizeof(uint64_t), 1);
    if (!pages || !t) {
        cr_params(params, sizeof params, r, "cow-fault", n, NULL);
        isob_emit_result(&r->x->ctx, "lwc-create", params, NULL, NULL, "failed", "out of memory", NULL);
        if (pages)
            munmap(pages, n * r->ps);
        isob_unmap(t, (n + 1) * sizeof(uint64_t));
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        long f0 = minflt_now();
        for (size_t i = 0; i < n; i++) {
            uint64_t a = isob_xclock_now(r->x);
            pages[i * r->ps] = 0x5a;
            uint64_t b = isob_xclock_now(r->x);
            t[i] = b - a;
        }
        t[n] = (uint64_t)(minflt_now() - f0);
        _exit(0);
    }
    int st = 0;
    if (pid > 0)
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
    if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        snprintf(why, sizeof why, "the child that faults did not exit with 0");
    uint64_t flt = t[n];
    char more[160];
    snprintf(more, sizeof more, "\"pages\":%zu,\"faults_counted\":\"in the child\",\"minflt\":%llu,"
             "\"per\":\"page\"", n, (unsigned long long)flt);
    cr_params(params, sizeof params, r, "cow-fault", n, more);
    if (why[0]) {
        isob_emit_result(&r->x->ctx, "lwc-create", params, NULL, NULL, "failed", why, NULL);
    } else if (flt < n) {
        snprintf(why, sizeof why, "pages were not dirtied: %llu minor faults for %zu pages",
                 (unsigned long long)flt, n);
        isob_emit_result(&r->x->ctx, "lwc-create", params, NULL, NULL, "failed", why, NULL);
    } else {
        struct isob_samples s;
        if (isob_samples_alloc(&s, n, 1) == 0) {
            memcpy(s.v, t, n * sizeof *t);
            s.n = n;
            isob_emit_result(&r->x->ctx, "lwc-create", params, &s, NULL, "ok", NULL, NULL);
            isob_samples_free(&s);
        }
    }
    munmap(pages, n * r->ps);
    isob_unmap(t, (n + 1) * sizeof(uint64_t));
}

static int lwc_create_run(struct isob_bench_ctx *ctx)
{
    struct isob_xclock x;
    int rc = isob_xclock_open(&x, ctx);
    if (rc)
        return rc;
    int quick = ctx->opts.quick;
    const size_t *dl = quick ? cr_dirty_quick : cr_dirty, *hl = quick ? cr_heap_mib_quick : cr_heap_mib;
    size_t nd = quick ? CR_N(cr_dirty_quick) : CR_N(cr_dirty), nh = quick ? CR_N(cr_heap_mib_quick) : CR_N(cr_heap_mib);
    struct cr_run r = {.x = &x, .ps = (size_t)sysconf(_SC_PAGESIZE)};
    thp_setting(r.thp, sizeof r.thp);
    r.minflt = calloc(CR_REPS, sizeof *r.minflt);
    uint64_t *t = calloc(CR_REPS, sizeof *t);
    r.shared_flt = isob_map(r.ps, 1);
    if (!r.minflt || !t || !r.shared_flt) {
        free(r.minflt);
        free(t);
        isob_xclock_close(&x, ctx);
        return -ENOMEM;
    }
    char reason[256], params[1024];
    for (size_t hi = 0; hi < nh; hi++) {
        r.heap_mib = hl[hi];
        r.heap_pages = r.heap_mib * (1u << 20) / r.ps;
        long avail = mem_available_mib();
        size_t worst = r.heap_mib + 2 * dl[nd - 1] * r.ps / (1u << 20);
        if (avail >= 0 && (long)worst > avail / CR_MEM_SHARE) {
            snprintf(reason, sizeof reason,
                     "needs %zu MiB (heap %zu MiB and twice the largest dirty region), more than "
                     "a quarter of MemAvailable (%ld MiB)", worst, r.heap_mib, avail);
            cr_params(params, sizeof params, &r, "all", 0, NULL);
            isob_emit_result(&x.ctx, "lwc-create", params, NULL, NULL, "skipped", reason, NULL);
            continue;
        }
        r.heap = resident(r.heap_pages, r.ps);
        if (!r.heap) {
            cr_params(params, sizeof params, &r, "all", 0, NULL);
            isob_emit_result(&x.ctx, "lwc-create", params, NULL, NULL, "failed",
                             "cannot map the resident heap", NULL);
            continue;
        }
        for (size_t di = 0; di < nd; di++) {
            r.ndirty = dl[di];
            int large = r.heap_mib + r.ndirty * r.ps / (1u << 20) >= CR_LARGE_MIB;
            r.reps = large ? (quick ? CR_REPS_LARGE_QUICK : CR_REPS_LARGE) : (quick ? CR_REPS_QUICK : CR_REPS);
            r.dirty = resident(r.ndirty, r.ps);
            if (r.ndirty && !r.dirty) {
                cr_params(params, sizeof params, &r, "all", r.ndirty, NULL);
                isob_emit_result(&x.ctx, "lwc-create", params, NULL, NULL, "failed",
                                 "cannot map the dirty region", NULL);
                continue;
            }
            cr_lwc(&r, t);
            cr_fork(&r, t);
            cr_inproc(&r, t, 0);
            cr_inproc(&r, t, 1);
            if (r.dirty)
                munmap(r.dirty, r.ndirty * r.ps);
            r.dirty = NULL;
        }
        r.ndirty = 0;
        r.reps = quick ? CR_REPS_QUICK : CR_REPS;
        cr_baselines(&r, t);
        cr_cow_fault(&r);
        munmap(r.heap, r.heap_pages * r.ps);
        r.heap = NULL;
    }
    isob_unmap((void *)r.shared_flt, r.ps);
    free(r.minflt);
    free(t);
    isob_xclock_close(&x, ctx);
    return 0;
}

const struct isob_bench isob_bench_lwc_create = {
    .name = "lwc-create",
    .summary = "create + first switch + destroy of an lwc against dirty pages and resident heap; "
               "fork, vfork, posix_spawn, pthread, soft-dirty and uffd-wp beside it",
    .needs_mechanism = 0,
    .run = lwc_create_run,
};
