/* oslat: LMbench's OS latencies (SEIMI's Tables III to VI), each measured
 * under one confinement.  `isob oslat --confine C[:VARIANT],...` runs every
 * variant of each C (or the one named) in a measuring process of its own:
 *
 *     parent (unconfined):  test directory; fork; wait with a time-out;
 *                           a child that died becomes a failed result;
 *                           remove the test directory
 *     child:                counter for this process; confine and verify
 *                           (or skip every primitive with the reason);
 *                           every primitive, two-context ones per
 *                           placement; verify again; exit 0, 1 or 4
 *
 * A confinement cannot be lifted, so one process never measures two; the
 * parent stays unconfined so that it can report what became of the child.
 * See docs/oslat.md for each primitive. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isob_config.h"
#include "isobench/server.h"
#include "oslat.h"

/* How long one measuring process may take before the parent ends it. */
#define OSLAT_CHILD_TIMEOUT_S 300
#define OSLAT_CHILD_TIMEOUT_S_QUICK 150
/* Primitives there are, at most (the selection is a bit mask). */
#define OSLAT_MAX_PRIMS 64
/* The name of the tiny static binary fork+execve runs, beside isob. */
#define OSLAT_TINY_NAME "isob-oslat-tiny"

static const struct oslat_prim *const oslat_families[] = {oslat_ctx, oslat_fs, oslat_ipc, oslat_proc,
                                                             oslat_bw};
#define OSLAT_NFAMILIES (sizeof oslat_families / sizeof oslat_families[0])

/* Every primitive in order, into out; returns how many. */
static size_t oslat_all(const struct oslat_prim **out)
{
    size_t n = 0;
    for (size_t f = 0; f < OSLAT_NFAMILIES; f++)
        for (const struct oslat_prim *p = oslat_families[f]; p->name && n < OSLAT_MAX_PRIMS; p++)
            out[n++] = p;
    return n;
}

/* --primitive: names and family names; 0 with the mask, or -EINVAL. */
static int oslat_select(const char *list, uint64_t *mask, char *why, size_t len)
{
    const struct oslat_prim *all[OSLAT_MAX_PRIMS];
    size_t n = oslat_all(all);
    if (!list) {
        *mask = n >= 64 ? UINT64_MAX : (1ull << n) - 1;
        return 0;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    *mask = 0;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        uint64_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (strcmp(all[i]->name, tok) == 0 || strcmp(all[i]->family, tok) == 0)
                m |= 1ull << i;
        if (!m) {
            snprintf(why, len, "oslat: unknown primitive '%s' (see isob list)", tok);
            return -EINVAL;
        }
        *mask |= m;
    }
    if (!*mask) {
        snprintf(why, len, "oslat: --primitive needs at least one primitive");
        return -EINVAL;
    }
    return 0;
}

static int oslat_check(const struct isob_bench_opts *opts, char *why, size_t len)
{
    uint64_t mask;
    int rc = oslat_select(opts->param, &mask, why, len);
    if (rc)
        return rc;
    /* --confine is a list: the mode-switch measurement (docs/microkernel.md)
     * runs none and each confinement in one isob. */
    char list[512];
    snprintf(list, sizeof list, "%s", opts->confine ? opts->confine : "none");
    int n = 0;
    for (char *save, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save), n++) {
        const struct isob_confinement *c;
        int variant;
        char cwhy[200];
        if (isob_confine_parse(tok, &c, &variant, cwhy, sizeof cwhy)) {
            snprintf(why, len, "oslat: %s", cwhy);
            return -EINVAL;
        }
    }
    if (!n) {
        snprintf(why, len, "oslat: --confine needs at least one confinement");
        return -EINVAL;
    }
    return 0;
}

static void oslat_describe(struct isob_jw *w)
{
    const struct oslat_prim *all[OSLAT_MAX_PRIMS];
    size_t n = oslat_all(all);
    isob_jw_arr(w, "primitives");
    for (size_t i = 0; i < n; i++) {
        isob_jw_obj(w, NULL);
        isob_jw_str(w, "name", all[i]->name);
        isob_jw_str(w, "family", all[i]->family);
        isob_jw_str(w, "table", all[i]->table);
        isob_jw_str(w, "summary", all[i]->summary);
        isob_jw_bool(w, "two_contexts", all[i]->two_contexts);
        isob_jw_close(w, '}');
    }
    isob_jw_close(w, ']');
}

/* ---- cells ---- */

int oslat_cell_open(struct oslat_cell *c, struct oslat *o, const struct oslat_prim *p,
                    const char *label)
{
    memset(c, 0, sizeof *c);
    c->o = o;
    c->p = p;
    snprintf(c->label, sizeof c->label, "%s", label);
    int rc = isob_samples_alloc(&c->s, o->cap, o->ctx->ctr->nev);
    if (rc)
        return rc;
    rc = isob_batched_alloc(&c->b, o->batch_reps);
    if (rc) {
        isob_samples_free(&c->s);
        return rc;
    }
    /* Read last: allocating may itself make calls a helper counts. */
    c->ev0 = isob_confine_events(o->cs);
    return 0;
}

void oslat_param(struct oslat_cell *c, const char *key, const char *fmt, ...)
{
    size_t used = strlen(c->extra), room = sizeof c->extra - used;
    int n = snprintf(c->extra + used, room, ",\"%s\":", key);
    if (n < 0 || (size_t)n >= room) {
        c->extra[used] = 0;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(c->extra + used + n, room - (size_t)n, fmt, ap);
    va_end(ap);
    /* Half a member would make the line invalid JSON. */
    if (m < 0 || (size_t)m >= room - (size_t)n)
        c->extra[used] = 0;
}

void oslat_fail(struct oslat_cell *c, const char *fmt, ...)
{
    if (c->fail[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->fail, sizeof c->fail, fmt, ap);
    va_end(ap);
}

void oslat_samples_div(struct isob_samples *s, uint64_t d)
{
    for (size_t i = 0; d > 1 && i < s->n * s->nev; i++)
        s->v[i] /= d;
}

void oslat_batched_div(struct isob_batched *b, uint64_t d)
{
    if (d <= 1 || b->n == 0)
        return;
    for (size_t i = 0; i < b->n; i++)
        b->reps[i] /= (double)d;
    b->est /= (double)d;
}

size_t oslat_batch_k(const struct oslat_cell *c)
{
    const struct oslat *o = c->o;
    uint64_t iters = c->s.n + c->s.dropped;
    if (!iters || !c->each_ns || !o->batch_reps)
        return 0;
    double ns = (double)c->each_ns / (double)iters;
    /* 3K iterations per repetition, in about half the budget. */
    double k = (double)o->budget_ns / 2.0 / (3.0 * (double)o->batch_reps * ns);
    if (k > (double)o->batch_k)
        k = (double)o->batch_k;
    return k < OSLAT_MIN_BATCH_K ? 0 : (size_t)k;
}

/* The params object: where the cell belongs (family, primitive, cell,
 * table, placement, confinement and variant), what the confinement showed
 * of itself, then the primitive's own members in "work". */
static char *oslat_params(struct oslat *o, const struct oslat_prim *p, const char *label,
                          const char *extra, uint64_t events, int have_events)
{
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (!f)
        return NULL;
    struct isob_jw w = {.f = f, .comma = 0};
    fputc('{', f);
    isob_jw_str(&w, "family", p->family);
    isob_jw_str(&w, "primitive", p->name);
    isob_jw_str(&w, "cell", label);
    isob_jw_str(&w, "table", p->table);
    isob_jw_str(&w, "placement", o->placement);
    isob_jw_str(&w, "confine", o->cs->conf->name);
    isob_jw_str(&w, "confine_variant", isob_confine_variant(o->cs));
    isob_jw_str(&w, "confine_threat", o->cs->conf->threat);
    char ev[ISOB_CONFINE_EVIDENCE_MAX + 2];
    snprintf(ev, sizeof ev, "{%s}", o->cs->evidence);
    isob_jw_raw(&w, "confine_evidence", ev);
    if (have_events)
        isob_jw_int(&w, "confine_events", (long long)events);
    else
        isob_jw_raw(&w, "confine_events", "null");
    isob_jw_int(&w, "budget_ms", (long long)(o->budget_ns / 1000000));
    /* What the primitive did and checked, apart from what names the cell,
     * so that repetitions of a cell group on the members above alone. */
    if (extra && extra[0] == ',')
        fprintf(f, ",\"work\":{%s}", extra + 1);
    fputc('}', f);
    fclose(f);
    return buf;
}

void oslat_cell_close(struct oslat_cell *c)
{
    struct oslat *o = c->o;
    uint64_t ev1 = isob_confine_events(o->cs);
    int have = ev1 != UINT64_MAX && c->ev0 != UINT64_MAX;
    uint64_t events = have ? ev1 - c->ev0 : 0;
    oslat_param(c, "ops", "%llu", (unsigned long long)c->ops);
    oslat_param(c, "batch_k", "%zu", c->batch_k);
    /* The confinement must have acted on what was measured: a trapping
     * helper that saw fewer calls than iterations was not in the way, and
     * one that traps nothing measured (seccomp-notify idle) must have seen
     * nothing at all. */
    const int traps = o->cs->traps_calls;
    if (have && traps && c->p->traps == OSLAT_TRAPS_EACH && events < c->ops)
        oslat_fail(c, "the confinement's helper saw %llu calls in %llu iterations that each trap",
                   (unsigned long long)events, (unsigned long long)c->ops);
    if (have && traps && c->p->traps == OSLAT_TRAPS_NONE && events != 0)
        oslat_fail(c, "%llu calls entered the kernel where none may", (unsigned long long)events);
    if (have && !traps && events != 0)
        oslat_fail(c, "the helper, which traps no measured call, saw %llu calls",
                   (unsigned long long)events);
    if (!c->fail[0] && c->s.n == 0)
        oslat_fail(c, "no valid sample (%llu dropped)", (unsigned long long)c->s.dropped);
    char *params = oslat_params(o, c->p, c->label, c->extra, events, have);
    isob_emit_result(o->ctx, "oslat", params ? params : "{}", c->fail[0] ? NULL : &c->s,
                     c->fail[0] ? NULL : &c->b, c->fail[0] ? "failed" : "ok",
                     c->fail[0] ? c->fail : NULL, NULL);
    free(params);
    isob_samples_free(&c->s);
    isob_batched_free(&c->b);
}

void oslat_emit_bare(struct oslat *o, const struct oslat_prim *p, const char *label,
                     const char *status, const char *reason)
{
    char *params = oslat_params(o, p, label, NULL, 0, 0);
    isob_emit_result(o->ctx, "oslat", params ? params : "{}", NULL, NULL, status, reason, NULL);
    free(params);
}

/* ---- helper processes ---- */

pid_t oslat_fork(int cpu)
{
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        /* A ring member or server outliving the measurement would hold a
         * CPU forever; the check closes the window before the prctl. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(1);
        if (cpu >= 0 && isob_pin_self(cpu) != 0)
            _exit(1);
    }
    return pid;
}

void oslat_reap(pid_t pid)
{
    if (pid > 0) {
        struct isob_server s = {.pid = pid};
        isob_server_stop(&s, OSLAT_REAP_MS);
    }
}

/* ---- the measuring process ---- */

/* The system calls of the selected primitives, each once. */
static size_t oslat_calls(uint64_t mask, int *out, size_t cap)
{
    const struct oslat_prim *all[OSLAT_MAX_PRIMS];
    size_t n = oslat_all(all), k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(mask & (1ull << i)))
            continue;
        for (size_t j = 0; j < all[i]->ncalls; j++) {
            int seen = 0;
            for (size_t m = 0; m < k; m++)
                seen |= out[m] == all[i]->calls[j];
            if (!seen && k < cap)
                out[k++] = all[i]->calls[j];
        }
    }
    return k;
}

/* Measure every selected primitive under conf's variant; the exit status
 * of the measuring process (0, 1 a result failed, 4 all skipped). */
static int oslat_child(struct isob_bench_ctx *ctx, const struct isob_confinement *conf,
                       unsigned variant, const char *dir, const char *tiny, uint64_t mask)
{
    /* A server or ring member that dies must show up as a failed call
     * (EPIPE) in the cell that needed it, not kill the measurement. */
    signal(SIGPIPE, SIG_IGN);
    struct isob_confine_state cs;
    isob_confine_init(&cs, conf, variant);
    struct oslat o = {
        .ctx = ctx, .cs = &cs, .dir = dir, .tiny = tiny, .cpu = ctx->opts.client_cpu,
        .budget_ns = ctx->opts.quick ? OSLAT_BUDGET_NS_QUICK : OSLAT_BUDGET_NS,
        .cap = ctx->opts.n, .warmup = ctx->opts.warmup, .batch_k = ctx->opts.batch_k,
        .batch_reps = ctx->opts.batch_reps, .placement = "same-cpu",
    };
    const struct oslat_prim *all[OSLAT_MAX_PRIMS];
    size_t n = oslat_all(all);

    char why[512] = "";
    int rc = isob_counter_reopen(ctx->ctr);
    if (rc == 0)
        rc = isob_measure_empty(ctx);
    if (rc) {
        snprintf(why, sizeof why, "counter in the measuring process: %s", isob_strerror(rc));
        for (size_t i = 0; i < n; i++)
            if (mask & (1ull << i))
                oslat_emit_bare(&o, all[i], NULL, "failed", why);
        return 1;
    }
    int calls[256];
    const char *const exec[] = {tiny, NULL};
    struct isob_confine_req req = {
        .calls = calls, .ncalls = oslat_calls(mask, calls, 256), .dir = dir,
        .exec = tiny ? exec : NULL, .helper_cpu = o.cpu,
    };
    rc = isob_confine_enter(&cs, &req, why, sizeof why);
    if (rc) {
        char reason[640];
        snprintf(reason, sizeof reason, "confinement %s:%s cannot be applied here: %s", conf->name,
                 isob_confine_variant(&cs), why);
        for (size_t i = 0; i < n; i++)
            if (mask & (1ull << i))
                oslat_emit_bare(&o, all[i], NULL, "skipped", reason);
        return 4;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(mask & (1ull << i)))
            continue;
        for (unsigned pl = 0; pl < 3; pl++) {
            if (!(ctx->opts.placements & (1u << pl)))
                continue;
            if (!all[i]->two_contexts && pl != ISOB_PLACE_SAME_CPU && pl != ISOB_PLACE_UNPINNED)
                continue;
            o.placement = isob_placement_name((enum isob_placement)pl);
            o.server_cpu = isob_server_cpu((enum isob_placement)pl, o.cpu);
            if (pl == ISOB_PLACE_CROSS_CPU && o.server_cpu < 0) {
                oslat_emit_bare(&o, all[i], NULL, "skipped",
                                "cross-cpu placement needs two CPUs and a pinned client");
                continue;
            }
            isob_pin_self(pl == ISOB_PLACE_UNPINNED ? -1 : o.cpu);
            rc = all[i]->run(&o, all[i]);
            if (rc) {
                snprintf(why, sizeof why, "set-up failed: %s", isob_strerror(rc));
                oslat_emit_bare(&o, all[i], NULL, "failed", why);
            }
        }
    }
    /* Still in force after measuring (a helper may have died meanwhile). */
    char evidence[sizeof cs.evidence];
    memcpy(evidence, cs.evidence, sizeof evidence);
    rc = isob_confine_verify(&cs, why, sizeof why);
    memcpy(cs.evidence, evidence, sizeof evidence);
    if (rc) {
        static const struct oslat_prim check = {.name = "confinement-check", .family = "-", .table = "-"};
        char reason[640];
        snprintf(reason, sizeof reason, "the confinement was no longer verified after measuring: %s", why);
        oslat_emit_bare(&o, &check, NULL, "failed", reason);
    }
    return ctx->failed ? 1 : 0;
}

/* The tiny static binary: beside the running isob, else in the build
 * directory it was built in.  NULL when neither exists. */
static char *oslat_find_tiny(void)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dirname(self), OSLAT_TINY_NAME);
        if (access(path, X_OK) == 0)
            return strdup(path);
    }
    if (access(ISOB_BUILD_DIR "/" OSLAT_TINY_NAME, X_OK) == 0)
        return strdup(ISOB_BUILD_DIR "/" OSLAT_TINY_NAME);
    return NULL;
}

/* Remove dir and everything in it (the measuring process may have died
 * midway); the benchmark nests directories two levels deep at most. */
static void oslat_rmtree(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char path[4096];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && depth < 4)
                oslat_rmtree(path, depth + 1);
            else
                unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* Wait for the measuring process with a time-out: its exit status, or a
 * negative number when it was killed (the signal) or timed out. */
static int oslat_wait(pid_t pid, int timeout_s, char *why, size_t len)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            if (WIFEXITED(status))
                return WEXITSTATUS(status);
            snprintf(why, len, "the measuring process was killed by signal %d (%s)", WTERMSIG(status),
                     strsignal(WTERMSIG(status)));
            return -1;
        }
        if (r < 0) {
            snprintf(why, len, "waitpid: %s", isob_strerror(-errno));
            return -1;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec >= timeout_s) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            snprintf(why, len, "the measuring process took longer than %d s and was killed", timeout_s);
            return -1;
        }
        struct timespec ms = {0, 10000000};
        nanosleep(&ms, NULL);
    }
}

/* Every variant of conf asked for (only: one index, -1 all), each in a
 * measuring process of its own; counts what was measured and skipped. */
static int oslat_conf(struct isob_bench_ctx *ctx, const struct isob_confinement *conf, int only,
                      const char *tiny, uint64_t mask, int *measured, int *skipped)
{
    char why[512];
    const char *tmp = getenv("TMPDIR");
    for (unsigned v = 0; conf->variants[v]; v++) {
        if (only >= 0 && (int)v != only)
            continue;
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/isob-oslat-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir))
            return -errno;
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            int rc = -errno;
            oslat_rmtree(dir, 0);
            return rc;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            isob_exit_raw(oslat_child(ctx, conf, v, dir, tiny, mask));
        }
        int rc = oslat_wait(pid, ctx->opts.quick ? OSLAT_CHILD_TIMEOUT_S_QUICK : OSLAT_CHILD_TIMEOUT_S,
                            why, sizeof why);
        oslat_rmtree(dir, 0);
        if (rc == 0 || rc == 1) {
            (*measured)++;
            ctx->failed |= rc == 1;
        } else if (rc == 4) {
            (*skipped)++;
        } else {
            char params[256];
            snprintf(params, sizeof params, "{\"confine\":\"%s\",\"confine_variant\":\"%s\"}",
                     conf->name, conf->variants[v]);
            if (rc > 0)
                snprintf(why, sizeof why, "the measuring process exited with status %d", rc);
            isob_emit_result(ctx, "oslat", params, NULL, NULL, "failed", why, NULL);
        }
    }
    return 0;
}

static int oslat_run(struct isob_bench_ctx *ctx)
{
    char why[512];
    uint64_t mask;
    if (oslat_select(ctx->opts.param, &mask, why, sizeof why) != 0)
        return -EINVAL;
    /* Two-context primitives share one CPU unless asked otherwise: the
     * driver's default of both placements is the switch benchmark's. */
    if (!ctx->opts.placement_given)
        ctx->opts.placements = 1u << ISOB_PLACE_SAME_CPU;
    char *tiny = oslat_find_tiny();
    int measured = 0, skipped = 0, rc = 0;
    char list[512];
    snprintf(list, sizeof list, "%s", ctx->opts.confine ? ctx->opts.confine : "none");
    char *save = NULL;
    for (char *tok = strtok_r(list, ",", &save); tok && rc == 0; tok = strtok_r(NULL, ",", &save)) {
        const struct isob_confinement *conf;
        int only;
        rc = isob_confine_parse(tok, &conf, &only, why, sizeof why);
        if (rc == 0)
            rc = oslat_conf(ctx, conf, only, tiny, mask, &measured, &skipped);
    }
    free(tiny);
    if (rc)
        return rc;
    ctx->skipped = !measured && skipped && !ctx->failed;
    return 0;
}

const struct isob_bench isob_bench_oslat = {
    .name = "oslat",
    .summary = "OS latencies (LMbench's primitives, SEIMI Tables III-VI) and bandwidths under a confinement",
    .needs_mechanism = 0,
    .takes_confine = 1,
    .run = oslat_run,
    .check = oslat_check,
    .describe = oslat_describe,
};
