/* The helpers of ukernel.h: patterns, option lists, limits, protections
 * and the measuring process that runs under one, helper processes,
 * percentiles and params text. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isobench/arch.h"
#include "isobench/server.h"
#include "ukernel.h"

/* The time-out of the parent's wait is checked this often. */
#define UK_WAIT_POLL_NS 10000000L
/* Tasks left free for everything else on the machine when a benchmark
 * asks for many: a shell, the runner, other benchmarks. */
#define UK_TASK_HEADROOM 64
/* Descriptors a process needs besides the benchmark's own (stdio, the
 * counter, a test directory, libraries). */
#define UK_FD_HEADROOM 32

void uk_fill(void *p, size_t len, uint64_t seed, uint64_t first_word)
{
    unsigned char *b = p;
    size_t words = len / 8;
    for (size_t k = 0; k < words; k++) {
        uint64_t w = uk_word(seed, first_word + k);
        memcpy(b + 8 * k, &w, 8);
    }
    if (len % 8) {
        uint64_t w = uk_word(seed, first_word + words);
        memcpy(b + 8 * words, &w, len % 8);
    }
}

/* ---- option lists ---- */

int uk_list_names(const char *opt, const char *list, const char *const *names, unsigned *mask,
                  char *why, size_t len)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    *mask = 0;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        unsigned i = 0;
        while (names[i] && strcmp(names[i], tok) != 0)
            i++;
        if (!names[i]) {
            char all[160] = "";
            for (unsigned k = 0; names[k]; k++)
                snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", k ? ", " : "", names[k]);
            snprintf(why, len, "%s: unknown value '%s' (%s)", opt, tok, all);
            return -EINVAL;
        }
        *mask |= 1u << i;
    }
    if (!*mask) {
        snprintf(why, len, "%s needs at least one value", opt);
        return -EINVAL;
    }
    return 0;
}

int uk_list_numbers(const char *opt, const char *list, uint64_t lo, uint64_t hi, int suffixes,
                    uint64_t *out, char *why, size_t len)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    int n = 0;
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(tok, &end, 10);
        unsigned shift = 0;
        if (suffixes && (*end == 'K' || *end == 'k'))
            shift = 10, end++;
        else if (suffixes && (*end == 'M' || *end == 'm'))
            shift = 20, end++;
        if (errno || end == tok || *end || tok[0] == '-' || v > (hi >> shift) || (v << shift) < lo) {
            snprintf(why, len, "%s: '%s' is not a whole number from %llu to %llu", opt, tok,
                     (unsigned long long)lo, (unsigned long long)hi);
            return -EINVAL;
        }
        if (n == UK_MAX_LIST) {
            snprintf(why, len, "%s: more than %d values", opt, UK_MAX_LIST);
            return -EINVAL;
        }
        out[n++] = v << shift;
    }
    if (!n) {
        snprintf(why, len, "%s needs at least one value", opt);
        return -EINVAL;
    }
    return n;
}

int uk_list_or(const char *opt, const char *list, const uint64_t *dflt, unsigned ndflt, uint64_t lo,
               uint64_t hi, uint64_t *out, unsigned *n, char *why, size_t len)
{
    if (!list) {
        memcpy(out, dflt, ndflt * sizeof *dflt);
        *n = ndflt;
        return 0;
    }
    int k = uk_list_numbers(opt, list, lo, hi, 0, out, why, len);
    if (k < 0)
        return -EINVAL;
    *n = (unsigned)k;
    return 0;
}

uint64_t uk_list_max(const uint64_t *v, unsigned n)
{
    uint64_t most = 0;
    for (unsigned i = 0; i < n; i++)
        most = v[i] > most ? v[i] : most;
    return most;
}

/* ---- limits ---- */

int uk_check_most_tasks(const char *opt, const uint64_t *v, unsigned n, char *what, size_t wlen,
                        char *why, size_t len)
{
    uint64_t most = uk_list_max(v, n);
    snprintf(what, wlen, "%s %llu", opt, (unsigned long long)most);
    return uk_check_tasks(what, most + 1, why, len);
}

static long read_long(const char *path)
{
    FILE *f = fopen(path, "re");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* Tasks (threads of every process) on the machine now: the fourth field
 * of /proc/loadavg is running/total. */
static long tasks_now(void)
{
    FILE *f = fopen("/proc/loadavg", "re");
    long running = 0, total = -1;
    if (f) {
        double a, b, c;
        if (fscanf(f, "%lf %lf %lf %ld/%ld", &a, &b, &c, &running, &total) != 5)
            total = -1;
        fclose(f);
    }
    return total;
}

/* Threads of every process whose real uid is uid: what RLIMIT_NPROC counts. */
static long tasks_of(uid_t uid)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[300], line[256];
        snprintf(path, sizeof path, "/proc/%s/status", e->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        long ruid = -1, threads = 0;
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "Uid:", 4) == 0)
                ruid = strtol(line + 4, NULL, 10);
            else if (strncmp(line, "Threads:", 8) == 0)
                threads = strtol(line + 8, NULL, 10);
        }
        fclose(f);
        if (ruid == (long)uid)
            n += threads;
    }
    closedir(d);
    return n;
}

int uk_check_tasks(const char *what, uint64_t need, char *why, size_t len)
{
    /* Room under each limit: kernel.pid_max and kernel.threads-max count
     * every task on the machine, RLIMIT_NPROC this user's (root is not
     * held to it).  The smallest room is the limit. */
    struct {
        const char *name;
        long limit, used;
    } lim[3] = {
        {"kernel.pid_max", read_long("/proc/sys/kernel/pid_max"), tasks_now()},
        {"kernel.threads-max", read_long("/proc/sys/kernel/threads-max"), tasks_now()},
        {"RLIMIT_NPROC", -1, 0},
    };
    struct rlimit rl;
    if (getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && geteuid() != 0) {
        lim[2].limit = rl.rlim_cur > (rlim_t)LONG_MAX ? LONG_MAX : (long)rl.rlim_cur;
        lim[2].used = tasks_of(getuid());
    }
    int tightest = -1;
    long room = LONG_MAX;
    for (int i = 0; i < 3; i++) {
        if (lim[i].limit <= 0)
            continue;
        long used = lim[i].used > 0 ? lim[i].used : 0;
        long r = lim[i].limit - used - UK_TASK_HEADROOM;
        if (r < 0)
            r = 0;
        if (r < room) {
            room = r;
            tightest = i;
        }
    }
    if (tightest >= 0 && need > (uint64_t)room) {
        snprintf(why, len, "%s needs %llu processes or threads at once; the limit here is %ld "
                 "(%s %ld, %ld tasks counted against it, %d kept free)", what,
                 (unsigned long long)need, room, lim[tightest].name, lim[tightest].limit,
                 lim[tightest].used, UK_TASK_HEADROOM);
        return -EAGAIN;
    }
    return 0;
}

int uk_check_fds(const char *what, uint64_t need, char *why, size_t len)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return 0;
    unsigned long long open_now = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        while (readdir(d))
            open_now++;
        closedir(d);
    }
    unsigned long long room = rl.rlim_cur > open_now + UK_FD_HEADROOM
                                  ? rl.rlim_cur - open_now - UK_FD_HEADROOM : 0;
    if (need > room) {
        snprintf(why, len, "%s needs %llu descriptors in one process; the limit here is %llu "
                 "(RLIMIT_NOFILE %llu, %llu open, %d kept free)", what, (unsigned long long)need,
                 room, (unsigned long long)rl.rlim_cur, open_now, UK_FD_HEADROOM);
        return -EMFILE;
    }
    return 0;
}

/* ---- protections ---- */

static int protect_one(const char *tok, struct uk_protect *p, char *why, size_t len)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", tok);
    const char *spec = tok;
    if (strcmp(tok, "seccomp") == 0)
        spec = "seccomp-allow:300-args";
    else if (strcmp(tok, "none") != 0 && strcmp(tok, "userns") != 0 && strcmp(tok, "landlock") != 0 &&
             strncmp(tok, "seccomp-allow", 13) != 0) {
        /* A tracer or a supervisor stays with the process it was attached
         * to, not with the endpoint it forks: they cannot confine both. */
        snprintf(why, len, "--protect: '%s' is not one of %s, seccomp-allow:VARIANT", tok,
                 UK_PROTECT_NAMES);
        return -EINVAL;
    }
    int variant;
    char cwhy[200];
    if (isob_confine_parse(spec, &p->conf, &variant, cwhy, sizeof cwhy)) {
        snprintf(why, len, "--protect: %s", cwhy);
        return -EINVAL;
    }
    p->variant = variant < 0 ? 0 : (unsigned)variant;
    if (variant < 0 && p->conf->variants[1]) {
        snprintf(why, len, "--protect: '%s' has several variants; name one (%s:%s)", tok, tok,
                 p->conf->variants[0]);
        return -EINVAL;
    }
    return 0;
}

int uk_protect_parse(const char *list, struct uk_protect *out, char *why, size_t len)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list ? list : "none");
    int n = 0;
    protect_one("none", &out[n++], why, len);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        struct uk_protect p;
        if (protect_one(tok, &p, why, len))
            return -EINVAL;
        int seen = 0;
        for (int i = 0; i < n; i++)
            seen |= out[i].conf == p.conf && out[i].variant == p.variant;
        if (seen)
            continue;
        if (n == UK_MAX_PROTECT) {
            snprintf(why, len, "--protect: more than %d protections", UK_MAX_PROTECT);
            return -EINVAL;
        }
        out[n++] = p;
    }
    return n;
}

int uk_confine_self(struct isob_confine_state *cs, const struct uk_protect *prot,
                    const struct isob_confine_req *req, char *why, size_t len)
{
    isob_confine_init(cs, prot->conf, prot->variant);
    return isob_confine_enter(cs, req, why, len);
}

/* Remove the test directory and what a confinement check left in it. */
static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                char path[4200];
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                unlink(path);
            }
        }
        closedir(d);
    }
    rmdir(dir);
}

static int measuring_process(struct isob_bench_ctx *ctx, const char *bench,
                             const struct uk_protect *prot, struct isob_confine_req req,
                             const char *dir, uk_measure_fn fn, void *arg)
{
    /* A helper that dies must show up as a failed call (EPIPE) in the
     * cell that needed it, not end the measurement. */
    signal(SIGPIPE, SIG_IGN);
    struct isob_confine_state cs;
    struct uk_confined u = {.ctx = ctx, .prot = prot, .cs = &cs, .dir = dir};
    char why[512] = "", reason[700];
    int rc = isob_counter_reopen(ctx->ctr);
    if (rc == 0)
        rc = isob_measure_empty(ctx);
    if (rc) {
        snprintf(reason, sizeof reason, "counter in the measuring process: %s", isob_strerror(rc));
        char params[160];
        snprintf(params, sizeof params, "{\"protect\":\"%s\"}", prot->name);
        isob_emit_result(ctx, bench, params, NULL, NULL, "failed", reason, NULL);
        return 1;
    }
    req.dir = dir;
    rc = uk_confine_self(&cs, prot, &req, why, sizeof why);
    if (rc) {
        snprintf(reason, sizeof reason, "protection %s (%s:%s) cannot be applied here: %s", prot->name,
                 prot->conf->name, isob_confine_variant(&cs), why);
        u.skip = reason;
        fn(&u, arg);
        return ctx->failed ? 1 : 4;
    }
    snprintf(u.evidence, sizeof u.evidence, "{%s}", cs.evidence);
    fn(&u, arg);
    /* Still in force after measuring. */
    char saved[sizeof cs.evidence];
    memcpy(saved, cs.evidence, sizeof saved);
    rc = isob_confine_verify(&cs, why, sizeof why);
    memcpy(cs.evidence, saved, sizeof saved);
    if (rc) {
        char params[160];
        snprintf(params, sizeof params, "{\"protect\":\"%s\",\"check\":\"after\"}", prot->name);
        snprintf(reason, sizeof reason, "the protection was no longer verified after measuring: %s", why);
        isob_emit_result(ctx, bench, params, NULL, NULL, "failed", reason, NULL);
    }
    return ctx->failed ? 1 : ctx->skipped ? 4 : 0;
}

/* The measuring process's exit status, or -EOWNERDEAD with why when it was
 * killed or outlived timeout_s (it is killed then). */
static int wait_child(pid_t pid, int timeout_s, char *why, size_t len)
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
            return -EOWNERDEAD;
        }
        if (r < 0 && errno != EINTR) {
            snprintf(why, len, "waitpid: %s", isob_strerror(-errno));
            return -EOWNERDEAD;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec >= timeout_s) {
            /* Its group: the measuring process and every helper it started. */
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            snprintf(why, len, "the measuring process took longer than %d s and was killed", timeout_s);
            return -EOWNERDEAD;
        }
        struct timespec tick = {0, UK_WAIT_POLL_NS};
        nanosleep(&tick, NULL);
    }
}

int uk_run_confined(struct isob_bench_ctx *ctx, const char *bench, const struct uk_protect *prot,
                    const struct isob_confine_req *req, int timeout_s, uk_measure_fn fn, void *arg)
{
    char dir[1024], why[1200] = "";
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/isob-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", bench);
    char params[160];
    snprintf(params, sizeof params, "{\"protect\":\"%s\"}", prot->name);
    if (!mkdtemp(dir)) {
        int err = -errno;
        snprintf(why, sizeof why, "test directory %s: %s", dir, isob_strerror(err));
        isob_emit_result(ctx, bench, params, NULL, NULL, "failed", why, NULL);
        return err;
    }
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int err = -errno;
        snprintf(why, sizeof why, "fork: %s", isob_strerror(err));
        rm_dir(dir);
        isob_emit_result(ctx, bench, params, NULL, NULL, "failed", why, NULL);
        return err;
    }
    if (pid == 0) {
        /* A group of its own, so that a time-out ends its helpers too; and
         * it dies with the parent, which the runner's group kill reaches. */
        setpgid(0, 0);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(1);
        isob_exit_raw(measuring_process(ctx, bench, prot, *req, dir, fn, arg));
    }
    setpgid(pid, pid);
    int rc = wait_child(pid, timeout_s, why, sizeof why);
    rm_dir(dir);
    if (rc < 0) {
        isob_emit_result(ctx, bench, params, NULL, NULL, "failed", why, NULL);
        return rc;
    }
    if (rc != 0 && rc != 1 && rc != 4) {
        snprintf(why, sizeof why, "the measuring process exited with status %d", rc);
        isob_emit_result(ctx, bench, params, NULL, NULL, "failed", why, NULL);
        return -EOWNERDEAD;
    }
    ctx->failed |= rc == 1;
    return rc;
}

/* ---- processes ---- */

pid_t uk_fork(int cpu)
{
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        /* A helper outliving the benchmark would hold a CPU or memory for
         * good; the check closes the window before the prctl took effect. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(1);
        if (cpu >= 0 && isob_pin_self(cpu) != 0)
            _exit(1);
    }
    return pid;
}

int uk_reap(pid_t pid)
{
    if (pid <= 0)
        return -1;
    struct isob_server s = {.pid = pid};
    isob_server_stop(&s, UK_REAP_MS);
    return s.status;
}

/* ---- samples ---- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

void uk_percentiles(const struct isob_samples *s, double *p5, double *p50, double *p95)
{
    *p5 = *p50 = *p95 = 0;
    if (!s->n)
        return;
    uint64_t *v = malloc(s->n * sizeof *v);
    if (!v)
        return;
    for (size_t i = 0; i < s->n; i++)
        v[i] = s->v[i * s->nev];
    qsort(v, s->n, sizeof *v, cmp_u64);
    /* Nearest rank: the smallest value with at least p% of the samples at or below it. */
    size_t n = s->n;
    size_t r5 = (n * 5 + 99) / 100, r95 = (n * 95 + 99) / 100;
    *p5 = (double)v[r5 ? r5 - 1 : 0];
    *p95 = (double)v[r95 ? r95 - 1 : 0];
    *p50 = n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0;
    free(v);
}

size_t uk_batch_k(uint64_t each_ns, uint64_t iters, uint64_t budget_ns, size_t reps, size_t kmax)
{
    if (!iters || !each_ns || !reps)
        return 0;
    double ns = (double)each_ns / (double)iters;
    /* 3K iterations per repetition, in about half the budget. */
    double k = (double)budget_ns / 2.0 / (3.0 * (double)reps * ns);
    if (k > (double)kmax)
        k = (double)kmax;
    return k < UK_MIN_BATCH_K ? 0 : (size_t)k;
}

int uk_virtualized(void)
{
    return isob_hypervisor_bit();
}

/* ---- params ---- */

int uk_clock_ctx(const struct uk_confined *u, struct isob_counter *clk, struct isob_bench_ctx *c2)
{
    struct isob_counter_opts co = {.force = "clock", .scope = ISOB_SCOPE_THREAD, .cpu = -1};
    *c2 = *u->ctx;
    c2->ctr = clk;
    if (u->skip)
        return -ECANCELED;
    int rc = isob_counter_init(clk, &co);
    if (rc)
        return rc < 0 ? rc : -ENODEV;
    rc = isob_measure_empty(c2);
    if (rc) {
        isob_counter_close(clk);
        return rc;
    }
    return 0;
}

void uk_jw_spread(struct isob_jw *w, double p5, double p50, double p95)
{
    isob_jw_obj(w, "spread");
    isob_jw_double(w, "p5", p5);
    isob_jw_double(w, "p50", p50);
    isob_jw_double(w, "p95", p95);
    isob_jw_close(w, '}');
}

int uk_params_begin(struct uk_params *p)
{
    memset(p, 0, sizeof *p);
    p->f = open_memstream(&p->buf, &p->len);
    if (!p->f)
        return -ENOMEM;
    p->w = (struct isob_jw){.f = p->f, .comma = 0};
    fputc('{', p->f);
    return 0;
}

char *uk_params_end(struct uk_params *p)
{
    fputc('}', p->f);
    if (fclose(p->f) != 0) {
        free(p->buf);
        return NULL;
    }
    return p->buf;
}
