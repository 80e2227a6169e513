/* scale: how many compartments fit, and what each costs as they pile up.
 *
 * Compartments are created one after another until the limit: --limit
 * (default 1000), capped up front at what this machine can spare (a
 * quarter of MemAvailable, half of the pids still free for mechanisms that
 * start a thread or process per compartment, the address space for wasm's
 * 8 GiB reservations), or the first create that fails, whose errno is the
 * limit's cause (ENOSPC when MPK runs out of its 15 keys, ENOMEM, EAGAIN,
 * EMFILE).  Reported:
 *   create   every creation's time, in creation order; params: the limit
 *            reached, its cause and errno, compartments found dead;
 *   switch   at N = 1, 2, 5, 10, 20, 50, ... live compartments: calls to a
 *            compartment picked at random (seeded) among the N, each call
 *            verified (ADD); params: PSS of every process involved (this
 *            one and its children, from /proc/PID/smaps_rollup) and per
 *            compartment;
 *   destroy  every destruction's time; params: processes left after.
 * A compartment whose process dies is noticed before it is called (waitid
 * with WNOWAIT, which leaves the dead process for its mechanism to reap):
 * creating stops, the death is the limit's cause, and every compartment is
 * destroyed. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isob_wasm.h"
#include "workload.h"

#define SC_DEFAULT_LIMIT 1000           /* compartments, unless --limit */
#define SC_MEM_DIVISOR 4                /* at most a quarter of MemAvailable */
#define SC_PID_DIVISOR 2                /* at most half of the pids still free */
#define SC_SWITCH_CALLS 2000            /* timed calls per checkpoint */
#define SC_SWITCH_CALLS_QUICK 500
#define SC_SWITCH_WARMUP 100            /* untimed calls before them */
#define SC_MEM_CHECK_EVERY 16           /* creates between two looks at MemAvailable */
#define SC_USER_AS ((uint64_t)1 << 47)  /* x86-64 user address space */
#define SC_SEED 0x7363616c65ull

/* The limit of this run and why it is that. */
struct sc_cap {
    size_t n;
    char cause[256];
};

static void sc_cap_lower(struct sc_cap *c, size_t n, const char *why)
{
    if (n < c->n) {
        c->n = n;
        snprintf(c->cause, sizeof c->cause, "%s", why);
    }
}

/* Descriptors this process holds open, or -1. */
static long sc_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1;  /* the directory's own descriptor */
}

/* The cause of a create that failed: the errno, and the limit behind it
 * where one is known: the mechanism's own word (its table, say), else for
 * EMFILE the descriptor limit with the descriptors open, so that a reader
 * learns what limit, where, and how to raise it. */
static void sc_create_cause(const struct isob_mechanism *m, size_t number, int rc, char *out,
                            size_t len)
{
    const char *why = m->limit_why ? m->limit_why() : NULL;
    if (why) {
        snprintf(out, len, "create number %zu failed: %s: %s", number, isob_strerror(rc), why);
    } else if (rc == -EMFILE || rc == -ENFILE) {
        struct rlimit rl = {0, 0};
        getrlimit(RLIMIT_NOFILE, &rl);
        snprintf(out, len,
                 "create number %zu failed: %s: %ld descriptors open, RLIMIT_NOFILE soft %llu, "
                 "hard %llu%s (raise it with `ulimit -n`)",
                 number, isob_strerror(rc), sc_open_fds(), (unsigned long long)rl.rlim_cur,
                 (unsigned long long)rl.rlim_max, rc == -ENFILE ? ", and the system's fs.file-max" : "");
    } else {
        snprintf(out, len, "create number %zu failed: %s", number, isob_strerror(rc));
    }
}

/* One number from a file, or -1 ("max" counts as none). */
static long long sc_read_num(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long long v = -1;
    if (fscanf(f, "%lld", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

/* Tasks on the machine, and those of our real uid (what RLIMIT_NPROC counts). */
static void sc_count_tasks(long long *all, long long *mine)
{
    *all = *mine = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return;
    uid_t uid = getuid();
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[300], line[128];
        snprintf(path, sizeof path, "/proc/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        long long threads = 0;
        unsigned ruid = 0;
        int have_uid = 0;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "Uid: %u", &ruid) == 1)
                have_uid = 1;
            sscanf(line, "Threads: %lld", &threads);
        }
        fclose(f);
        *all += threads;
        if (have_uid && ruid == uid)
            *mine += threads;
    }
    closedir(d);
}

/* The pids cgroup's room, or -1 when there is no limit. */
static long long sc_cgroup_pids_free(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return -1;
    char line[512], dir[600] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!a || !b)
            continue;
        *b = 0;
        if (strcmp(a + 1, "pids") == 0)
            snprintf(dir, sizeof dir, "/sys/fs/cgroup/pids%s", b + 1);
        else if (a[1] == 0 && !dir[0])
            snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", b + 1);
    }
    fclose(f);
    char path[700];
    snprintf(path, sizeof path, "%s/pids.max", dir);
    long long max = sc_read_num(path);
    snprintf(path, sizeof path, "%s/pids.current", dir);
    long long cur = sc_read_num(path);
    return max > 0 && cur >= 0 ? max - cur : -1;
}

/* The caps this machine sets before anything is created. */
static void sc_caps(const struct isob_mechanism *m, size_t asked, struct sc_cap *cap)
{
    cap->n = asked;
    snprintf(cap->cause, sizeof cap->cause, "the limit asked for (--limit, default %d)", SC_DEFAULT_LIMIT);
    if (m->props & (ISOB_TWO_CONTEXTS | ISOB_SEPARATE_AS)) {
        long long all, mine, free = -1;
        sc_count_tasks(&all, &mine);
        struct rlimit rl;
        char why[256];
        if (getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            free = (long long)rl.rlim_cur - mine;
        long long pid_max = sc_read_num("/proc/sys/kernel/pid_max");
        long long threads_max = sc_read_num("/proc/sys/kernel/threads-max");
        long long cg = sc_cgroup_pids_free();
        long long lim[3] = {pid_max > 0 ? pid_max - all : -1, threads_max > 0 ? threads_max - all : -1, cg};
        for (int i = 0; i < 3; i++)
            if (lim[i] >= 0 && (free < 0 || lim[i] < free))
                free = lim[i];
        if (free >= 0) {
            snprintf(why, sizeof why, "half of the %lld pids still free (RLIMIT_NPROC, pid_max, threads-max, "
                     "pids cgroup): each compartment takes a task", free);
            sc_cap_lower(cap, free > 0 ? (size_t)(free / SC_PID_DIVISOR) : 0, why);
        }
    }
    if (strcmp(m->name, "wasm") == 0) {
        struct rlimit rl;
        uint64_t as = SC_USER_AS;
        if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < as)
            as = rl.rlim_cur;
        char why[256];
        snprintf(why, sizeof why, "the address space: %llu GiB holds that many %llu MiB guard reservations",
                 (unsigned long long)(as >> 30), (unsigned long long)(ISOB_WASM_GUARD_RESERVATION >> 20));
        sc_cap_lower(cap, (size_t)(as / ISOB_WASM_GUARD_RESERVATION), why);
    }
}

/* This process's children, read from /proc (no children file on every
 * kernel).  Fills up to max pids; returns how many there are; *zombies
 * counts those already dead. */
static size_t sc_children(pid_t *out, size_t max, size_t *zombies)
{
    size_t n = 0;
    *zombies = 0;
    pid_t self = getpid();
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = 0;
        /* pid (comm) state ppid: comm may hold anything but ends at the
         * last ')'. */
        char *p = strrchr(buf, ')');
        char state;
        int ppid;
        if (!p || sscanf(p + 1, " %c %d", &state, &ppid) != 2 || ppid != self)
            continue;
        if (state == 'Z')
            (*zombies)++;
        if (n < max)
            out[n] = (pid_t)atoi(e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

/* PSS in kB of pid (0: this process); -1 when unreadable. */
static long long sc_pss_kb(pid_t pid)
{
    char path[64], line[128];
    if (pid)
        snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
    else
        snprintf(path, sizeof path, "/proc/self/smaps_rollup");
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Pss: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* PSS of this process and all its children; *procs counts them. */
static long long sc_pss_total(pid_t *buf, size_t max, size_t *procs)
{
    size_t z, n = sc_children(buf, max, &z);
    long long total = sc_pss_kb(0);
    *procs = 1;
    for (size_t i = 0; i < n && i < max; i++) {
        long long kb = sc_pss_kb(buf[i]);
        if (kb >= 0) {
            total += kb;
            (*procs)++;
        }
    }
    return total;
}

/* 1 when a child of this process has died (and is left unreaped). */
static int sc_child_died(pid_t *pid, int *status)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0)
        return 0;
    *pid = si.si_pid;
    *status = si.si_status;
    return 1;
}

struct sc_run {
    struct wl *w;
    const char *placement;
    int server_cpu;
    struct isob_comp **comps;
    size_t n;                  /* live compartments */
    pid_t *pids;               /* scratch for /proc scans */
    size_t pid_cap;
    long long pss0;            /* kB before the first compartment */
    double kb_per_comp;        /* from the last checkpoint; 0 before */
    int dead;                  /* a compartment's process died */
    char dead_why[200];
    int separate;              /* compartments live in processes of their own */
};

/* A verified call to compartment i; 0, or -1 with the death noted. */
static int sc_check_alive(struct sc_run *r)
{
    pid_t pid;
    int st;
    if (!r->separate || !sc_child_died(&pid, &st))
        return 0;
    r->dead = 1;
    snprintf(r->dead_why, sizeof r->dead_why, "a compartment's process (pid %d) died (status %d)", (int)pid, st);
    return -1;
}

static void sc_switch(struct sc_run *r, uint64_t *rng)
{
    struct wl *w = r->w;
    const struct isob_bench_ctx *ctx = &w->wctx;
    size_t calls = ctx->opts.quick ? SC_SWITCH_CALLS_QUICK : SC_SWITCH_CALLS;
    struct isob_samples s;
    struct wl_params p;
    long bad = 0, done = 0;
    char reason[256] = "";
    size_t procs = 0;
    long long pss = sc_pss_total(r->pids, r->pid_cap, &procs);
    if (pss >= 0 && r->pss0 >= 0 && r->n)
        r->kb_per_comp = (double)(pss - r->pss0) / (double)r->n;
    if (isob_samples_alloc(&s, calls, ctx->ctr->nev) != 0) {
        snprintf(reason, sizeof reason, "out of memory for samples");
    } else {
        for (size_t i = 0; i < SC_SWITCH_WARMUP + calls && !r->dead; i++) {
            struct isob_comp *c = r->comps[wl_rand(rng) % r->n];
            struct isob_msg *msg = c->mech->shared(c);
            msg->arg[0] = (int64_t)i;
            msg->arg[1] = 7;
            if (sc_check_alive(r))
                break;
            uint64_t a = wl_read(w);
            long v = isob_call(c, ISOB_ENTRY_ADD);
            uint64_t b = wl_read(w);
            bad += v != (long)i + 7;
            done++;
            if (i >= SC_SWITCH_WARMUP)
                s.v[s.n++ * s.nev] = b - a;
        }
        if (r->dead)
            snprintf(reason, sizeof reason, "%s", r->dead_why);
        else if (bad)
            snprintf(reason, sizeof reason, "%ld of %ld calls returned a wrong sum", bad, done);
    }
    if (wl_params_begin(&p, r->placement) == 0) {
        isob_jw_str(&p.jw, "variant", "switch");
        isob_jw_int(&p.jw, "live", (long long)r->n);
        isob_jw_str(&p.jw, "target", "a compartment picked at random among the live ones, seeded");
        isob_jw_int(&p.jw, "pss_kb", pss);
        isob_jw_int(&p.jw, "pss_kb_before", r->pss0);
        isob_jw_double(&p.jw, "pss_kb_per_compartment", r->kb_per_comp);
        isob_jw_int(&p.jw, "processes", (long long)procs);
        isob_jw_int(&p.jw, "calls_verified", done - bad);
    }
    wl_emit(w, wl_params_end(&p, ctx->mech), reason[0] ? NULL : &s, NULL, SC_SWITCH_WARMUP,
            reason[0] ? "failed" : "ok", reason[0] ? reason : NULL);
    wl_params_free(&p);
    isob_samples_free(&s);
}

static int sc_is_checkpoint(size_t n)
{
    /* 1, 2, 5 times each power of ten. */
    while (n >= 10 && n % 10 == 0)
        n /= 10;
    return n == 1 || n == 2 || n == 5;
}

/* Create compartment r->n + 1 of spec, timed into cs, unless memory
 * would pass mem_cap (of avail0 available at the start), and check that
 * it answers and that the others still do at a checkpoint.  0 to go on;
 * 1 to stop, with the cause in words (and *err, the errno of a create
 * that failed). */
static int sc_grow(struct sc_run *r, const struct isob_comp_spec *spec, struct isob_samples *cs,
                   uint64_t avail0, uint64_t mem_cap, uint64_t *rng, char *cause, size_t len, int *err)
{
    const struct isob_mechanism *m = r->w->wctx.mech;
    /* Memory: the estimate per compartment from the last checkpoint
     * (the heap and buffer before the first), and MemAvailable itself
     * now and then, against a quarter of what was available. */
    double est = r->kb_per_comp > 0 ? r->kb_per_comp * 1024 : (double)(spec->heap_size + spec->shared_size);
    uint64_t avail = avail0;
    if (r->n % SC_MEM_CHECK_EVERY == 0)
        wl_mem_available("/proc/meminfo", &avail);
    if (est * (double)(r->n + 1) > (double)mem_cap || avail0 - (avail < avail0 ? avail : avail0) > mem_cap) {
        snprintf(cause, len, "a quarter of MemAvailable (%llu of %llu MiB): about %.0f KiB per "
                 "compartment", (unsigned long long)(mem_cap >> 20), (unsigned long long)(avail0 >> 20),
                 est / 1024);
        return 1;
    }
    uint64_t a = wl_read(r->w);
    int rc = isob_comp_create(m, spec, &r->comps[r->n]);
    uint64_t b = wl_read(r->w);
    if (rc) {
        *err = -rc;
        sc_create_cause(m, r->n + 1, rc, cause, len);
        return 1;
    }
    cs->v[cs->n++ * cs->nev] = b - a;
    struct isob_comp *c = r->comps[r->n++];
    c->mech->shared(c)->len = 0;
    if (sc_check_alive(r)) {
        snprintf(cause, len, "%s", r->dead_why);
        return 1;
    }
    struct isob_msg *msg = c->mech->shared(c);
    msg->arg[0] = (int64_t)r->n;
    msg->arg[1] = 7;
    long v = isob_call(c, ISOB_ENTRY_ADD);
    if (v != (long)r->n + 7) {
        r->dead = 1;
        snprintf(r->dead_why, sizeof r->dead_why, "compartment %zu answered %ld to its first call", r->n, v);
        snprintf(cause, len, "%s", r->dead_why);
        return 1;
    }
    if (sc_is_checkpoint(r->n))
        sc_switch(r, rng);
    if (r->dead) {
        snprintf(cause, len, "%s", r->dead_why);
        return 1;
    }
    return 0;
}

static void sc_placement(struct wl *w, const char *placement, int server_cpu, void *arg)
{
    (void)arg;
    const struct isob_bench_ctx *ctx = &w->wctx;
    const struct isob_mechanism *m = ctx->mech;
    size_t asked = ctx->opts.limit ? ctx->opts.limit : SC_DEFAULT_LIMIT;
    uint64_t avail0 = 0;
    wl_mem_available("/proc/meminfo", &avail0);
    uint64_t mem_cap = avail0 / SC_MEM_DIVISOR;
    struct sc_cap cap;
    sc_caps(m, asked, &cap);
    struct sc_run r = {.w = w, .placement = placement, .server_cpu = server_cpu,
                       .separate = (m->props & ISOB_SEPARATE_AS) != 0};
    r.comps = calloc(cap.n ? cap.n : 1, sizeof *r.comps);
    r.pid_cap = cap.n + 64;
    r.pids = calloc(r.pid_cap, sizeof *r.pids);
    struct isob_samples cs, ds;
    int ok = r.comps && r.pids && isob_samples_alloc(&cs, cap.n ? cap.n : 1, ctx->ctr->nev) == 0;
    ok = ok && isob_samples_alloc(&ds, cap.n ? cap.n : 1, ctx->ctr->nev) == 0;
    if (!ok) {
        struct wl_params p;
        if (wl_params_begin(&p, placement) == 0)
            isob_jw_str(&p.jw, "variant", "create");
        wl_emit(w, wl_params_end(&p, m), NULL, NULL, 0, "failed", "out of memory for the bookkeeping");
        wl_params_free(&p);
        free(r.comps);
        free(r.pids);
        return;
    }
    size_t procs;
    r.pss0 = sc_pss_total(r.pids, r.pid_cap, &procs);
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    spec.server_cpu = server_cpu;
    uint64_t rng = SC_SEED;
    char cause[640];
    snprintf(cause, sizeof cause, "%s", cap.cause);
    int err = 0;
    while (r.n < cap.n && !sc_grow(&r, &spec, &cs, avail0, mem_cap, &rng, cause, sizeof cause, &err))
        ;
    if (r.n && !sc_is_checkpoint(r.n) && !r.dead)
        sc_switch(&r, &rng);
    size_t zombies = 0;
    sc_children(r.pids, r.pid_cap, &zombies);

    struct wl_params p;
    if (wl_params_begin(&p, placement) == 0) {
        isob_jw_str(&p.jw, "variant", "create");
        isob_jw_int(&p.jw, "limit_asked", (long long)asked);
        isob_jw_int(&p.jw, "limit_cap", (long long)cap.n);
        isob_jw_int(&p.jw, "created", (long long)r.n);
        isob_jw_str(&p.jw, "cause", cause);
        if (err) {
            isob_jw_int(&p.jw, "errno", err);
            isob_jw_str(&p.jw, "errno_name", strerrorname_np(err));
        }
        isob_jw_int(&p.jw, "dead", r.dead ? (long long)(zombies ? zombies : 1) : 0);
        isob_jw_int(&p.jw, "heap_bytes", (long long)spec.heap_size);
        isob_jw_int(&p.jw, "shared_bytes", (long long)spec.shared_size);
        isob_jw_int(&p.jw, "mem_available_mib", (long long)(avail0 >> 20));
        isob_jw_str(&p.jw, "samples_order", "creation order");
    }
    wl_emit(w, wl_params_end(&p, m), cs.n ? &cs : NULL, NULL, 0, cs.n ? "ok" : "failed",
            cs.n ? NULL : cause);
    wl_params_free(&p);

    for (size_t i = r.n; i-- > 0;) {
        uint64_t a = wl_read(w);
        isob_comp_destroy(r.comps[i]);
        uint64_t b = wl_read(w);
        ds.v[ds.n++ * ds.nev] = b - a;
    }
    size_t left = sc_children(r.pids, r.pid_cap, &zombies);
    if (wl_params_begin(&p, placement) == 0) {
        isob_jw_str(&p.jw, "variant", "destroy");
        isob_jw_int(&p.jw, "destroyed", (long long)ds.n);
        isob_jw_int(&p.jw, "processes_left", (long long)left);
        isob_jw_str(&p.jw, "samples_order", "reverse creation order");
    }
    char why[160];
    snprintf(why, sizeof why, "%zu processes left after destroying every compartment", left);
    int good = ds.n && !left;
    wl_emit(w, wl_params_end(&p, m), good ? &ds : NULL, NULL, 0, good ? "ok" : ds.n ? "failed" : "skipped",
            good ? NULL : left ? why : "no compartment was created");
    wl_params_free(&p);
    isob_samples_free(&cs);
    isob_samples_free(&ds);
    free(r.comps);
    free(r.pids);
}

static int sc_run(struct isob_bench_ctx *ctx)
{
    struct wl w;
    int rc = wl_begin(&w, ctx, "scale");
    if (rc)
        return rc;
    wl_each_placement(&w, sc_placement, NULL);
    wl_end(&w);
    return 0;
}

const struct isob_bench isob_bench_scale = {
    .name = "scale",
    .summary = "compartments created until a limit: creation time, PSS, switch to a random one, destroy time",
    .needs_mechanism = 1,
    .run = sc_run,
};
