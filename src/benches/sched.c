/* sched: many workers, each with the same fixed amount of work, and what
 * the scheduler makes of them -- the microkernel benchmark that runs many
 * threads and reschedules them while they work (docs/microkernel.md).
 *
 *   kind      threads (of the measuring process), processes, seccomp
 *             (processes under seccomp-allow's 300-args filter, each
 *             verifying it in force), userns (processes in new user, mount
 *             and network namespaces, each verifying them)
 *   workers   N in 1, 2, 4, 16, 64, 256
 *   work      W = 1 ms of a calibrated integer loop per worker, in slices
 *             of 10 or 100 us
 *   mode      yield (sched_yield after every slice) or preempt (the slices
 *             back to back: only the kernel's preemption switches)
 *   cpus      one (every worker pinned to the measuring CPU) or all (worker
 *             i pinned to the i-th allowed CPU, round robin)
 *
 * One repetition: every worker waits at a barrier; the measuring process
 * stamps t0 and releases them all; the makespan is from t0 to the last
 * worker's end.  The ideal is ceil(N / CPUs used) * W_solo, where W_solo is
 * the same work run alone on the measuring CPU just before (the median of
 * a few runs): N * W / CPUs wherever N divides among the CPUs, and never
 * less than one worker's W.  Each worker counts its own voluntary and
 * involuntary context switches over its work (getrusage); the cost per
 * switch is the time lost over the ideal, on the CPUs used, per switch.
 * The measuring process's RUSAGE_CHILDREN (processes) or RUSAGE_SELF
 * (threads) over the configuration is reported beside them: whole lives,
 * set-up included.
 *
 * Checks: every worker's slice count, and the loop's final state against
 * its jump-ahead (the LCG's state after N steps, computed in O(log N)), so
 * the work done must equal N * W exactly.  A worker that dies is counted
 * and reported, the others are ended. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isobench/futex.h"
#include "isobench/mechanism.h"
#include "isobench/server.h"
#include "sched.h"

const char *const sc_kind_names[SC__KINDS + 1] = {"threads", "processes", "seccomp", "userns", NULL};
const char *const sc_mode_names[SC__MODES + 1] = {"yield", "preempt", NULL};
const char *const sc_cpus_names[SC__CPUS + 1] = {"one", "all", NULL};
static const uint64_t sc_default_workers[] = {1, 2, 4, 16, 64, 256};
static const uint64_t sc_default_slices[] = {10, 100};

/* The work loop: a 64-bit linear congruential generator (Knuth's MMIX
 * constants), one dependent multiply-add per step. */
#define SC_LCG_A 6364136223846793005ull
#define SC_LCG_C 1442695040888963407ull
/* Steps of one calibration run, and how many runs (the fastest counts). */
#define SC_CALIBRATE_STEPS 2000000ull
#define SC_CALIBRATE_RUNS 7
/* The seed of the workers' starting states. */
#define SC_SEED 0x5c4edull
/* A worker thread's stack: it only loops. */
#define SC_THREAD_STACK (64 * 1024)
/* How often the waiting measuring process looks for dead workers. */
#define SC_TICK_NS 50000000L
/* The barrier's value that sends the workers home. */
#define SC_QUIT UINT32_MAX
/* How long a measuring process may take before the parent ends it. */
#define SC_CHILD_TIMEOUT_S 1200
#define SC_CHILD_TIMEOUT_S_QUICK 170

uint64_t sc_spin(uint64_t x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        x = x * SC_LCG_A + SC_LCG_C;
        /* The compiler must run every step, not fold the loop. */
        __asm__ __volatile__("" : "+r"(x));
    }
    return x;
}

uint64_t sc_expect(uint64_t x, uint64_t n)
{
    /* x -> a*x + c, composed with itself by squaring: (a, c)^2 = (a*a, a*c + c). */
    uint64_t a = SC_LCG_A, c = SC_LCG_C, ra = 1, rc = 0;
    while (n) {
        if (n & 1) {
            rc = a * rc + c;
            ra = a * ra;
        }
        c = a * c + c;
        a = a * a;
        n >>= 1;
    }
    return ra * x + rc;
}

void sc_calibrate(struct sc_config *cfg)
{
    double best = 0;
    for (int r = 0; r < SC_CALIBRATE_RUNS; r++) {
        uint64_t t0 = isob_clock_ns();
        uint64_t x = sc_spin(r, SC_CALIBRATE_STEPS);
        uint64_t dt = isob_clock_ns() - t0;
        isob_keep(x);
        double ns = (double)dt / (double)SC_CALIBRATE_STEPS;
        if (r == 0 || ns < best)
            best = ns;
    }
    cfg->ns_per_iter = best > 0 ? best : 1;
}

/* What one worker did in one repetition. */
struct sc_slot {
    uint64_t final;            /* the loop's state at the end */
    uint64_t slices;           /* slices run */
    uint64_t t_start, t_end;   /* its work, in CLOCK_MONOTONIC_RAW ns */
    int64_t vcsw, ivcsw;       /* its context switches over the work */
} __attribute__((aligned(64)));

/* The page the measuring process and its workers share. */
struct sc_page {
    uint32_t go;               /* the repetition released (1, 2, ...), SC_QUIT */
    uint32_t ready;            /* workers set up and verified */
    uint32_t done;             /* workers done with this repetition */
    int32_t verify_rc;         /* the first failed verification of the confinement, or 0 */
    char verify_why[384];
    char evidence[ISOB_CONFINE_EVIDENCE_MAX]; /* worker 0's verification */
    char died[160];            /* the first worker seen dead, in words */
    struct sc_slot slot[];
};

struct sc_thread_arg;

struct sc_cell {
    const struct sc_config *cfg;
    enum sc_kind kind;
    enum sc_mode mode;
    unsigned n;
    uint64_t slices, iters;    /* per worker; steps per slice */
    struct sc_page *pg;
    size_t pg_bytes;
    struct isob_confine_state *cs;
    int *cpu;                  /* worker i's CPU */
    pid_t *pid;
    pthread_t *th;
    struct sc_thread_arg *args; /* the threads' arguments, freed once they are joined */
    unsigned started;
};

struct sc_thread_arg {
    struct sc_cell *c;
    unsigned i;
};

static void sc_worker(struct sc_cell *c, unsigned i)
{
    struct sc_page *pg = c->pg;
    if (c->cs && c->kind != SC_THREADS) {
        /* Each process verifies the confinement itself: it is an endpoint. */
        char why[384] = "";
        int rc = isob_confine_verify(c->cs, why, sizeof why);
        int32_t none = 0;
        if (rc && __atomic_compare_exchange_n(&pg->verify_rc, &none, rc, 0, __ATOMIC_ACQ_REL,
                                              __ATOMIC_ACQUIRE))
            snprintf(pg->verify_why, sizeof pg->verify_why, "worker %u: %s", i, why);
        if (i == 0)
            snprintf(pg->evidence, sizeof pg->evidence, "%s", c->cs->evidence);
    }
    __atomic_add_fetch(&pg->ready, 1, __ATOMIC_ACQ_REL);
    isob_futex_wake(&pg->ready, 1, 0);
    const int who = c->kind == SC_THREADS ? RUSAGE_THREAD : RUSAGE_SELF;
    const uint64_t seed = uk_word(SC_SEED, i);
    uint32_t seen = 0;
    for (;;) {
        uint32_t g;
        while ((g = isob_load(&pg->go)) == seen)
            isob_futex_wait(&pg->go, seen, 0);
        if (g == SC_QUIT)
            return;
        seen = g;
        if (c->cfg->sabotage == SC_SABOTAGE_KILL && c->kind != SC_THREADS && i == c->n / 2)
            raise(SIGKILL);
        uint64_t slices = c->slices;
        /* Broken on purpose: one slice less of work. */
        if (c->cfg->sabotage == SC_SABOTAGE_SKIP_SLICE && i == 0)
            slices--;
        struct rusage r0, r1;
        getrusage(who, &r0);
        uint64_t t_start = isob_clock_ns();
        uint64_t x = seed, done = 0;
        for (uint64_t s = 0; s < slices; s++) {
            x = sc_spin(x, c->iters);
            done++;
            if (c->mode == SC_YIELD)
                sched_yield();
        }
        uint64_t t_end = isob_clock_ns();
        getrusage(who, &r1);
        struct sc_slot *sl = &pg->slot[i];
        sl->final = x;
        sl->slices = done;
        sl->t_start = t_start;
        sl->t_end = t_end;
        sl->vcsw = r1.ru_nvcsw - r0.ru_nvcsw;
        sl->ivcsw = r1.ru_nivcsw - r0.ru_nivcsw;
        __atomic_add_fetch(&pg->done, 1, __ATOMIC_ACQ_REL);
        isob_futex_wake(&pg->done, 1, 0);
    }
}

static void *sc_thread_main(void *arg)
{
    struct sc_thread_arg *a = arg;
    sc_worker(a->c, a->i);
    return NULL;
}

/* How the workers died, in one sentence; the number that died. */
static unsigned sc_end_workers(struct sc_cell *c, char *first, size_t len)
{
    unsigned died = 0;
    first[0] = 0;
    for (unsigned i = 0; i < c->started; i++) {
        pid_t pid = c->pid[i];
        if (pid <= 0)
            continue;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            if (!died++) {
                char why[128];
                isob_server_describe(st, why, sizeof why);
                snprintf(first, len, "worker %u %s", i, why);
            }
        } else {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
        c->pid[i] = 0;
    }
    return died;
}

/* Wait until *counter reaches want: 0; -ESRCH when a worker process
 * died; -ETIMEDOUT after SC_WAIT_MS. */
static int sc_wait(struct sc_cell *c, uint32_t *counter, uint32_t want)
{
    uint64_t end = isob_clock_ns() + (uint64_t)SC_WAIT_MS * 1000000ull;
    for (;;) {
        uint32_t v = isob_load(counter);
        if (v >= want)
            return 0;
        if (c->kind != SC_THREADS) {
            for (unsigned i = 0; i < c->started; i++) {
                int st;
                if (c->pid[i] > 0 && waitpid(c->pid[i], &st, WNOHANG) == c->pid[i]) {
                    /* Reaped here: marked so that no one waits for it again. */
                    c->pid[i] = -c->pid[i];
                    char why[128];
                    isob_server_describe(st, why, sizeof why);
                    snprintf(c->pg->died, sizeof c->pg->died, "worker %u %s", i, why);
                    return -ESRCH;
                }
            }
        }
        if (isob_clock_ns() > end)
            return -ETIMEDOUT;
        struct timespec tick = {0, SC_TICK_NS};
        syscall(SYS_futex, counter, FUTEX_WAIT, v, &tick, NULL, 0);
    }
}

/* Start the workers: 0, or -errno with why. */
static int sc_start(struct sc_cell *c, char *why, size_t len)
{
    if (c->kind == SC_THREADS) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, SC_THREAD_STACK);
        struct sc_thread_arg *args = c->args = calloc(c->n, sizeof *args);
        if (!args) {
            pthread_attr_destroy(&attr);
            return -ENOMEM;
        }
        for (unsigned i = 0; i < c->n; i++) {
            args[i] = (struct sc_thread_arg){c, i};
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(c->cpu[i], &set);
            pthread_attr_setaffinity_np(&attr, sizeof set, &set);
            int rc = pthread_create(&c->th[i], &attr, sc_thread_main, &args[i]);
            if (rc) {
                snprintf(why, len, "thread %u of %u: %s", i + 1, c->n, isob_strerror(-rc));
                pthread_attr_destroy(&attr);
                return -rc;
            }
            c->started = i + 1;
        }
        pthread_attr_destroy(&attr);
        return 0;
    }
    for (unsigned i = 0; i < c->n; i++) {
        pid_t pid = uk_fork(c->cpu[i]);
        if (pid < 0) {
            snprintf(why, len, "fork of worker %u of %u: %s", i + 1, c->n, isob_strerror(pid));
            return pid;
        }
        if (pid == 0) {
            sc_worker(c, i);
            isob_exit_raw(0);
        }
        c->pid[i] = pid;
        c->started = i + 1;
    }
    return 0;
}

static void sc_stop(struct sc_cell *c)
{
    isob_store(&c->pg->go, SC_QUIT);
    isob_futex_wake(&c->pg->go, INT_MAX, 0);
    if (c->kind == SC_THREADS) {
        for (unsigned i = 0; i < c->started; i++)
            pthread_join(c->th[i], NULL);
        free(c->args);
        c->args = NULL;
    } else {
        for (unsigned i = 0; i < c->started; i++)
            if (c->pid[i] > 0)
                uk_reap(c->pid[i]);
    }
    c->started = 0;
}

/* W as it runs alone on this CPU: the median of a few runs of one worker's slices. */
static double sc_solo(const struct sc_cell *c)
{
    double t[SC_SOLO_RUNS];
    for (int r = 0; r < SC_SOLO_RUNS; r++) {
        uint64_t t0 = isob_clock_ns(), x = (uint64_t)r;
        for (uint64_t s = 0; s < c->slices; s++) {
            x = sc_spin(x, c->iters);
            if (c->mode == SC_YIELD)
                sched_yield();
        }
        isob_keep(x);
        t[r] = (double)(isob_clock_ns() - t0);
    }
    return isob_median_double(t, SC_SOLO_RUNS);
}

static long long sc_usage(int who, int voluntary)
{
    struct rusage r;
    if (getrusage(who, &r) != 0)
        return 0;
    return voluntary ? r.ru_nvcsw : r.ru_nivcsw;
}

/* What the repetitions of one cell added up. */
struct sc_tally {
    double solo, ideal;        /* W alone on this CPU; N*W over the CPUs used */
    unsigned cpus_used;
    double *overhead;          /* each completed repetition's makespan over ideal, less 1 */
    double *per_switch;        /* and its time beyond ideal per context switch */
    long long vol, invol;      /* context switches the workers counted */
    long long child_vol, child_invol; /* getrusage's, over the cell's whole life */
    uint64_t slices_done, reps_done, t_first;
};

/* Repetition rep of a cell whose workers are ready: go, wait for all,
 * check every worker's work, and add the makespan to s and the rest to t.
 * 0, or -errno with the failure in words in fail (a worker that died: the
 * others ended and reaped). */
static int sc_repetition(struct sc_cell *c, struct sc_tally *t, struct isob_samples *s, size_t rep,
                         char *fail, size_t len)
{
    const unsigned workers = c->n;
    memset(c->pg->slot, 0, (size_t)workers * sizeof(struct sc_slot));
    isob_store(&c->pg->done, 0);
    uint64_t t0 = isob_clock_ns();
    isob_store(&c->pg->go, (uint32_t)rep + 1);
    isob_futex_wake(&c->pg->go, INT_MAX, 0);
    int rc = sc_wait(c, &c->pg->done, workers);
    if (rc) {
        if (rc == -ESRCH) {
            /* The one seen dead, then the rest: counted, ended, reaped. */
            char first[160];
            for (unsigned i = 0; i < c->started; i++)
                if (c->pid[i] < 0)
                    c->pid[i] = 0;
            unsigned more = sc_end_workers(c, first, sizeof first);
            snprintf(fail, len, "%u of %u workers died (%s%s%s); the other %u were ended",
                     1 + more, workers, c->pg->died, more ? ", then " : "", more ? first : "",
                     workers - 1 - more);
        } else {
            snprintf(fail, len, "the workers did not finish in %d ms", SC_WAIT_MS);
        }
        return rc;
    }
    uint64_t end = 0, first = UINT64_MAX, done = 0;
    long long v = 0, iv = 0;
    unsigned wrong = 0, wrong_at = 0;
    for (unsigned i = 0; i < workers; i++) {
        const struct sc_slot *sl = &c->pg->slot[i];
        done += sl->slices;
        if (sl->final != sc_expect(uk_word(SC_SEED, i), sl->slices * c->iters) || sl->slices != c->slices) {
            if (!wrong++)
                wrong_at = i;
        }
        end = sl->t_end > end ? sl->t_end : end;
        first = sl->t_start < first ? sl->t_start : first;
        v += sl->vcsw;
        iv += sl->ivcsw;
    }
    if (wrong || done != (uint64_t)workers * c->slices) {
        const struct sc_slot *sl = &c->pg->slot[wrong_at];
        snprintf(fail, len, "work done %llu of %llu slices (N*W); %u workers wrong, first "
                 "worker %u: %llu slices, loop state %s", (unsigned long long)done,
                 (unsigned long long)workers * c->slices, wrong, wrong_at, (unsigned long long)sl->slices,
                 sl->final == sc_expect(uk_word(SC_SEED, wrong_at), sl->slices * c->iters)
                     ? "consistent with its slices" : "not what its slices give");
        t->slices_done += done;
        return -EBADMSG;
    }
    t->slices_done += done;
    uint64_t makespan = end - t0;
    s->v[s->n++] = makespan;
    t->t_first += first - t0;
    t->overhead[t->reps_done] = (double)makespan / t->ideal - 1.0;
    t->per_switch[t->reps_done] =
        v + iv > 0 ? ((double)makespan - t->ideal) * t->cpus_used / (double)(v + iv) : 0;
    t->vol += v;
    t->invol += iv;
    t->reps_done++;
    return 0;
}

/* The params of a cell's result line (free() them), or NULL: the cell,
 * its confinement with the evidence, the work and what it cost, and the
 * makespan's spread when ok. */
static char *sc_params(const struct sc_cell *c, const struct sc_tally *t, const struct isob_samples *s,
                       const char *protect_evidence, uint64_t slice_us, enum sc_cpus cpus, int ok)
{
    const struct sc_config *cfg = c->cfg;
    const struct isob_confine_state *cs = c->cs;
    const enum sc_kind kind = c->kind;
    const enum sc_mode mode = c->mode;
    const unsigned workers = c->n;
    struct uk_params pj;
    if (uk_params_begin(&pj) != 0)
        return NULL;
    struct isob_jw *w = &pj.w;
    isob_jw_str(w, "kind", sc_kind_names[kind]);
    isob_jw_int(w, "workers", workers);
    isob_jw_int(w, "slice_us", (long long)slice_us);
    isob_jw_str(w, "mode", sc_mode_names[mode]);
    isob_jw_str(w, "cpus", sc_cpus_names[cpus]);
    if (cs) {
        isob_jw_str(w, "protect_confinement", cs->conf->name);
        isob_jw_str(w, "protect_variant", isob_confine_variant(cs));
        isob_jw_str(w, "protect_threat", cs->conf->threat);
        isob_jw_obj(w, "protect_evidence");
        isob_jw_raw(w, "measuring", protect_evidence && protect_evidence[0] ? protect_evidence : "null");
        if (kind != SC_THREADS && c->pg && c->pg->evidence[0]) {
            char ev[ISOB_CONFINE_EVIDENCE_MAX + 2];
            snprintf(ev, sizeof ev, "{%s}", c->pg->evidence);
            isob_jw_raw(w, "worker0", ev);
        }
        isob_jw_close(w, '}');
    }
    isob_jw_obj(w, "work");
    isob_jw_int(w, "work_ns", (long long)SC_WORK_NS);
    isob_jw_int(w, "slices_per_worker", (long long)c->slices);
    isob_jw_int(w, "steps_per_slice", (long long)c->iters);
    isob_jw_double(w, "ns_per_step_calibrated", cfg->ns_per_iter);
    isob_jw_double(w, "w_solo_ns", t->solo);
    isob_jw_int(w, "cpus_used", t->cpus_used);
    isob_jw_double(w, "ideal_ns", t->ideal);
    isob_jw_int(w, "repetitions", (long long)t->reps_done);
    isob_jw_int(w, "slices_done", (long long)t->slices_done);
    isob_jw_int(w, "slices_expected",
                (long long)(t->reps_done + (ok ? 0 : 1)) * workers * (long long)c->slices);
    isob_jw_int(w, "voluntary_switches", t->vol);
    isob_jw_int(w, "involuntary_switches", t->invol);
    isob_jw_str(w, "whole_life_usage", kind != SC_THREADS ? "RUSAGE_CHILDREN" : "RUSAGE_SELF");
    isob_jw_int(w, "whole_life_voluntary", t->child_vol);
    isob_jw_int(w, "whole_life_involuntary", t->child_invol);
    if (t->reps_done) {
        isob_jw_double(w, "overhead_pct_median", 100.0 * isob_median_double(t->overhead, t->reps_done));
        isob_jw_double(w, "ns_per_switch_median",
                       t->vol + t->invol ? isob_median_double(t->per_switch, t->reps_done) : NAN);
        isob_jw_double(w, "first_start_ns_mean", (double)t->t_first / (double)t->reps_done);
    }
    isob_jw_close(w, '}');
    if (ok) {
        double p5, p50, p95;
        uk_percentiles(s, &p5, &p50, &p95);
        uk_jw_spread(w, p5, p50, p95);
    }
    return uk_params_end(&pj);
}

void sc_config_run(const struct sc_config *cfg, struct isob_bench_ctx *ctx, struct isob_confine_state *cs,
                   const char *protect_evidence, enum sc_kind kind, unsigned workers, uint64_t slice_us,
                   enum sc_mode mode, enum sc_cpus cpus)
{
    struct sc_cell c = {.cfg = cfg, .kind = kind, .mode = mode, .n = workers, .cs = cs};
    struct isob_samples s = {0};
    char fail[640] = "", why[400] = "";
    const char *status = "ok";
    c.slices = SC_WORK_NS / (slice_us * 1000);
    double iters = (double)slice_us * 1000.0 / cfg->ns_per_iter;
    c.iters = iters < 1 ? 1 : (uint64_t)iters;
    c.pg_bytes = sizeof *c.pg + (size_t)workers * sizeof(struct sc_slot);
    c.pg = isob_map(c.pg_bytes, 1);
    c.cpu = calloc(workers, sizeof *c.cpu);
    c.pid = calloc(workers, sizeof *c.pid);
    c.th = calloc(workers, sizeof *c.th);
    struct sc_tally t = {.cpus_used = 1};
    t.overhead = calloc(cfg->reps, sizeof *t.overhead);
    t.per_switch = calloc(cfg->reps, sizeof *t.per_switch);
    if (!c.pg || !c.cpu || !c.pid || !c.th || !t.overhead || !t.per_switch ||
        isob_samples_alloc(&s, cfg->reps, 1) != 0) {
        status = "failed";
        snprintf(fail, sizeof fail, "out of memory");
        goto emit;
    }
    /* Worker i's CPU: the measuring CPU, or the allowed CPUs in turn. */
    int ncpu = 1, list[CPU_SETSIZE];
    list[0] = cfg->cpu;
    if (cpus == SC_ALL)
        for (int next = isob_server_cpu(ISOB_PLACE_CROSS_CPU, cfg->cpu); next >= 0 && next != cfg->cpu;
             next = isob_server_cpu(ISOB_PLACE_CROSS_CPU, next))
            list[ncpu++] = next;
    for (unsigned i = 0; i < workers; i++)
        c.cpu[i] = list[i % (unsigned)ncpu];
    t.cpus_used = workers < (unsigned)ncpu ? workers : (unsigned)ncpu;
    if (isob_pin_self(cfg->cpu) != 0) {
        status = "failed";
        snprintf(fail, sizeof fail, "pin to CPU %d: %s", cfg->cpu, isob_strerror(-errno));
        goto emit;
    }
    t.solo = sc_solo(&c);
    t.ideal = t.solo * (double)((workers + t.cpus_used - 1) / t.cpus_used);
    const int kids = kind != SC_THREADS;
    long long cv0 = sc_usage(kids ? RUSAGE_CHILDREN : RUSAGE_SELF, 1);
    long long ci0 = sc_usage(kids ? RUSAGE_CHILDREN : RUSAGE_SELF, 0);
    int rc = sc_start(&c, why, sizeof why);
    if (rc == 0)
        rc = sc_wait(&c, &c.pg->ready, workers);
    if (rc == 0 && c.pg->verify_rc) {
        status = "skipped";
        snprintf(fail, sizeof fail, "a worker could not verify the confinement: %s", c.pg->verify_why);
    } else if (rc) {
        status = "failed";
        snprintf(fail, sizeof fail, "starting %u workers: %s", workers,
                 why[0] ? why : rc == -ESRCH ? c.pg->died : isob_strerror(rc));
    }
    for (size_t rep = 0; rep < cfg->reps && strcmp(status, "ok") == 0; rep++)
        if (sc_repetition(&c, &t, &s, rep, fail, sizeof fail) != 0)
            status = "failed";
    sc_stop(&c);
    t.child_vol = sc_usage(kids ? RUSAGE_CHILDREN : RUSAGE_SELF, 1) - cv0;
    t.child_invol = sc_usage(kids ? RUSAGE_CHILDREN : RUSAGE_SELF, 0) - ci0;

emit:;
    int ok = strcmp(status, "ok") == 0 && s.n > 0;
    char *params = sc_params(&c, &t, &s, protect_evidence, slice_us, cpus, ok);
    if (strcmp(status, "ok") == 0 && !ok) {
        status = "failed";
        snprintf(fail, sizeof fail, "no repetition completed");
    }
    isob_emit_result(ctx, "sched", params ? params : "{}", ok ? &s : NULL, NULL, status, ok ? NULL : fail,
                     "ns");
    free(params);
    isob_samples_free(&s);
    if (c.pg)
        isob_unmap(c.pg, c.pg_bytes);
    free(c.cpu);
    free(c.pid);
    free(c.th);
    free(t.overhead);
    free(t.per_switch);
}

/* ---- the benchmark ---- */

int sc_parse(const struct isob_bench_opts *o, struct sc_config *cfg, char *why, size_t len)
{
    memset(cfg, 0, sizeof *cfg);
    /* Where workers run is --cpus; a placement would be silently ignored. */
    if (o->placement_given || o->nsizes) {
        snprintf(why, len, "sched: %s does not apply (workers are placed with --cpus one,all)",
                 o->placement_given ? "--placement" : "--sizes");
        return -EINVAL;
    }
    cfg->kinds = (1u << SC__KINDS) - 1;
    cfg->modes = (1u << SC__MODES) - 1;
    cfg->cpus = (1u << SC__CPUS) - 1;
    if ((o->variants && uk_list_names("sched: --variant", o->variants, sc_kind_names, &cfg->kinds, why, len)) ||
        (o->modes && uk_list_names("sched: --mode", o->modes, sc_mode_names, &cfg->modes, why, len)) ||
        (o->cpus && uk_list_names("sched: --cpus", o->cpus, sc_cpus_names, &cfg->cpus, why, len)))
        return -EINVAL;
    if (uk_list_or("sched: --workers", o->workers, sc_default_workers,
                   sizeof sc_default_workers / sizeof sc_default_workers[0], 1, SC_MAX_WORKERS,
                   cfg->workers, &cfg->nworkers, why, len) ||
        uk_list_or("sched: --slice", o->slices, sc_default_slices,
                   sizeof sc_default_slices / sizeof sc_default_slices[0], 1, SC_WORK_NS / 1000,
                   cfg->slices_us, &cfg->nslices, why, len))
        return -EINVAL;
    for (unsigned i = 0; i < cfg->nslices; i++) {
        if ((SC_WORK_NS / 1000) % cfg->slices_us[i]) {
            snprintf(why, len, "sched: --slice: %llu us does not divide W = %llu us into whole slices",
                     (unsigned long long)cfg->slices_us[i], SC_WORK_NS / 1000);
            return -EINVAL;
        }
    }
    char what[64];
    return uk_check_most_tasks("sched: --workers", cfg->workers, cfg->nworkers, what, sizeof what,
                               why, len)
               ? -EINVAL
               : 0;
}

static int sc_check(const struct isob_bench_opts *o, char *why, size_t len)
{
    struct sc_config cfg;
    return sc_parse(o, &cfg, why, len);
}

struct sc_run {
    struct sc_config cfg;
    unsigned kinds;            /* the kinds this measuring process runs */
};

static void sc_under(struct uk_confined *u, void *arg)
{
    struct sc_run *r = arg;
    struct isob_counter clk;
    struct isob_bench_ctx c2;
    int clock_ok = uk_clock_ctx(u, &clk, &c2) == 0;
    sc_calibrate(&r->cfg);
    for (unsigned k = 0; k < SC__KINDS; k++) {
        if (!(r->kinds & (1u << k)))
            continue;
        for (unsigned m = 0; m < SC__MODES; m++) {
            if (!(r->cfg.modes & (1u << m)))
                continue;
            for (unsigned cp = 0; cp < SC__CPUS; cp++) {
                if (!(r->cfg.cpus & (1u << cp)))
                    continue;
                for (unsigned sl = 0; sl < r->cfg.nslices; sl++) {
                    for (unsigned w = 0; w < r->cfg.nworkers; w++) {
                        if (!clock_ok) {
                            char params[200];
                            snprintf(params, sizeof params,
                                     "{\"kind\":\"%s\",\"workers\":%llu,\"slice_us\":%llu,\"mode\":\"%s\","
                                     "\"cpus\":\"%s\"}", sc_kind_names[k],
                                     (unsigned long long)r->cfg.workers[w],
                                     (unsigned long long)r->cfg.slices_us[sl], sc_mode_names[m],
                                     sc_cpus_names[cp]);
                            isob_emit_result(u->ctx, "sched", params, NULL, NULL, u->skip ? "skipped" : "failed",
                                             u->skip ? u->skip : "the clock counter could not be opened", "ns");
                            continue;
                        }
                        sc_config_run(&r->cfg, &c2, k >= SC_SECCOMP ? u->cs : NULL, u->evidence,
                                      (enum sc_kind)k, (unsigned)r->cfg.workers[w], r->cfg.slices_us[sl],
                                      (enum sc_mode)m, (enum sc_cpus)cp);
                    }
                }
            }
        }
    }
    u->ctx->failed |= c2.failed;
    if (u->skip)
        u->ctx->skipped = 1;
    if (clock_ok)
        isob_counter_close(&clk);
}

/* The calls the workers make once confined (a 300-rule allow-list must
 * hold them; the measuring process's own are listed with them). */
static const int sc_calls[] = {
    SYS_futex, SYS_sched_yield, SYS_getrusage, SYS_clock_gettime, SYS_clone, SYS_clone3, SYS_wait4,
    SYS_kill, SYS_exit, SYS_exit_group, SYS_prctl, SYS_getppid, SYS_getpid, SYS_gettid,
    SYS_sched_setaffinity, SYS_sched_getaffinity, SYS_mmap, SYS_munmap, SYS_mprotect, SYS_brk,
    SYS_openat, SYS_read, SYS_write, SYS_close, SYS_newfstatat, SYS_statx, SYS_fstat, SYS_rt_sigaction,
    SYS_rt_sigprocmask, SYS_rt_sigreturn, SYS_set_robust_list, SYS_rseq, SYS_madvise, SYS_nanosleep,
    SYS_clock_nanosleep, SYS_tgkill, SYS_getuid, SYS_geteuid,
};

static int sc_run(struct isob_bench_ctx *ctx)
{
    struct sc_run r;
    char why[300];
    if (sc_parse(&ctx->opts, &r.cfg, why, sizeof why))
        return -EINVAL;
    r.cfg.cpu = ctx->opts.client_cpu < 0 ? isob_first_cpu() : ctx->opts.client_cpu;
    size_t reps = ctx->opts.quick ? SC_REPS_QUICK : SC_REPS;
    r.cfg.reps = ctx->opts.n < reps ? ctx->opts.n : reps;
    struct isob_confine_req req = {.calls = sc_calls, .ncalls = sizeof sc_calls / sizeof sc_calls[0],
                                   .helper_cpu = r.cfg.cpu};
    /* threads and processes run unconfined (none: verified untraced), the
     * other two each in a measuring process under their confinement. */
    static const struct {
        const char *protect;
        unsigned kinds;
    } groups[] = {
        {"none", (1u << SC_THREADS) | (1u << SC_PROCESSES)},
        {"seccomp", 1u << SC_SECCOMP},
        {"userns", 1u << SC_USERNS},
    };
    int measured = 0, skipped = 0;
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        r.kinds = r.cfg.kinds & groups[g].kinds;
        if (!r.kinds)
            continue;
        struct uk_protect prot[UK_MAX_PROTECT];
        int n = uk_protect_parse(groups[g].protect, prot, why, sizeof why);
        if (n < 1)
            return -EINVAL;
        int rc = uk_run_confined(ctx, "sched", &prot[n - 1], &req,
                                 ctx->opts.quick ? SC_CHILD_TIMEOUT_S_QUICK : SC_CHILD_TIMEOUT_S, sc_under, &r);
        measured += rc == 0 || rc == 1;
        skipped += rc == 4;
    }
    ctx->skipped = !measured && skipped && !ctx->failed;
    return 0;
}

static const struct isob_bench_option sc_options[] = {
    {"--workers", "worker counts, 1 to 4096 (the pid limit checked)", "1,2,4,16,64,256", "N"},
    {"--variant", "threads,processes,seccomp,userns", "all", "what a worker is"},
    {"--slice", "microseconds dividing W = 1000 us", "10,100", "work between yields"},
    {"--mode", "yield,preempt", "yield,preempt", "yield after each slice, or run on until preempted"},
    {"--cpus", "one,all", "one,all", "every worker on one CPU, or round robin over the allowed CPUs"},
    {NULL, NULL, NULL, NULL},
};

const struct isob_bench isob_bench_sched = {
    .name = "sched",
    .summary = "N workers (threads, processes, seccomp or userns processes), 1 ms of checked work "
               "each in slices: makespan against N*W/CPUs, context switches",
    .needs_mechanism = 0,
    .run = sc_run,
    .check = sc_check,
    .options = sc_options,
};
