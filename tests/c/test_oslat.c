/* The oslat benchmark's own tests: every primitive, measured briefly,
 * passes its self-check; every primitive broken on purpose (a token not
 * counted, a page that does not fault, an echo that comes back changed,
 * ...) fails it, in every cell; a confinement that claims to trap the
 * measured calls but was not in the way is caught; and the driver skips a
 * confinement that cannot be applied, with the reason.  Nothing here
 * asserts a duration. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isob_config.h"
#include "../../src/benches/oslat/oslat.h"
#include "tap.h"

/* Small measurements: these check the work, not the speed. */
#define T_CAP 200
#define T_WARMUP 20
#define T_BUDGET_NS 20000000ull
#define T_BATCH_K 50
#define T_BATCH_REPS 5

struct fixture {
    struct isob_counter ctr;
    struct isob_bench_ctx ctx;
    struct isob_confine_state cs;
    struct oslat o;
    char dir[64];
    char *out;
    size_t outlen;
};

static void fx_open(struct fixture *f, int sabotage)
{
    memset(f, 0, sizeof *f);
    CHECK_EQ_LONG(isob_counter_init(&f->ctr, NULL), 0);
    f->ctx.ctr = &f->ctr;
    f->ctx.out = open_memstream(&f->out, &f->outlen);
    CHECK(f->ctx.out != NULL);
    f->ctx.opts.empty_n = 100;
    CHECK_EQ_LONG(isob_measure_empty(&f->ctx), 0);
    isob_confine_init(&f->cs, isob_confine_find("none"), 0);
    char why[256];
    CHECK_EQ_LONG(isob_confine_verify(&f->cs, why, sizeof why), 0);
    snprintf(f->dir, sizeof f->dir, "/tmp/isob-oslat-test-XXXXXX");
    CHECK(mkdtemp(f->dir) != NULL);
    f->o = (struct oslat){
        .ctx = &f->ctx, .cs = &f->cs, .dir = f->dir, .tiny = ISOB_BUILD_DIR "/isob-oslat-tiny",
        .placement = "same-cpu", .cpu = -1, .server_cpu = -1, .budget_ns = T_BUDGET_NS,
        .cap = T_CAP, .warmup = T_WARMUP, .batch_k = T_BATCH_K, .batch_reps = T_BATCH_REPS,
        .sabotage = sabotage,
    };
    signal(SIGPIPE, SIG_IGN);
}

static void fx_close(struct fixture *f)
{
    fclose(f->ctx.out);
    free(f->out);
    rmdir(f->dir);
}

static const struct oslat_prim *find_prim(const char *name)
{
    const struct oslat_prim *fams[] = {oslat_ctx, oslat_fs, oslat_ipc, oslat_proc, oslat_bw};
    for (size_t i = 0; i < 5; i++)
        for (const struct oslat_prim *p = fams[i]; p->name; p++)
            if (strcmp(p->name, name) == 0)
                return p;
    return NULL;
}

/* Result lines of the output by status. */
static void count(const char *out, int *ok, int *failed, int *skipped)
{
    *ok = *failed = *skipped = 0;
    for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "{\"schema_version\":1,\"type\":\"result\"", 35) != 0)
            continue;
        const char *end = strchr(l, '\n');
        size_t n = end ? (size_t)(end - l) : strlen(l);
        char *line = strndup(l, n);
        *ok += strstr(line, "\"status\":\"ok\"") != NULL;
        *failed += strstr(line, "\"status\":\"failed\"") != NULL;
        *skipped += strstr(line, "\"status\":\"skipped\"") != NULL;
        if (strstr(line, "\"status\":\"failed\"")) {
            const char *r = strstr(line, "\"reason\":");
            fprintf(stderr, "# failed: %.160s\n", r ? r : line);
        }
        free(line);
    }
}

/* Run each named primitive; every cell must be ok (broken: 0), or every
 * cell must fail (broken: 1). */
static void run_all(const char *const *names, int broken)
{
    for (const char *const *n = names; *n; n++) {
        struct fixture f;
        fx_open(&f, broken);
        const struct oslat_prim *p = find_prim(*n);
        CHECK(p != NULL);
        CHECK_EQ_LONG(p->run(&f.o, p), 0);
        fflush(f.ctx.out);
        int ok, failed, skipped;
        count(f.out, &ok, &failed, &skipped);
        if (ok + failed + skipped == 0 || skipped || (broken ? ok != 0 || !failed : failed != 0 || !ok)) {
            fprintf(stderr, "# %s%s: %d ok, %d failed, %d skipped\n", *n, broken ? " (broken)" : "", ok,
                    failed, skipped);
            CHECK(0);
        }
        if (!broken)
            CHECK(strstr(f.out, "\"ops\":") != NULL);
        fx_close(&f);
    }
}

static const char *const ctx_prims[] = {"ctx", NULL};
static const char *const fs_prims[] = {"file", "mmap", "prot-fault", "page-fault", "select-file",
                                       "select-tcp", NULL};
static const char *const ipc_prims[] = {"pipe", "unix", "udp", "tcp", "rpc-udp", "rpc-tcp",
                                        "tcp-connect", NULL};
static const char *const proc_prims[] = {"null-syscall", "null-io", "stat", "open-close",
                                         "sig-install", "sig-catch", "fork-exit", "fork-exec",
                                         "fork-sh", "vdso-clock", NULL};
static const char *const bw_prims[] = {"bw-pipe", "bw-unix", "bw-tcp", "bw-mem", "bw-file-rd",
                                       "bw-mmap-rd", NULL};

static void t_ctx_verified(void) { run_all(ctx_prims, 0); }
static void t_ctx_broken_fails(void) { run_all(ctx_prims, 1); }
static void t_fs_verified(void) { run_all(fs_prims, 0); }
static void t_fs_broken_fails(void) { run_all(fs_prims, 1); }
static void t_ipc_verified(void) { run_all(ipc_prims, 0); }
static void t_ipc_broken_fails(void) { run_all(ipc_prims, 1); }
static void t_proc_verified(void) { run_all(proc_prims, 0); }
static void t_proc_broken_fails(void) { run_all(proc_prims, 1); }
static void t_bw_verified(void) { run_all(bw_prims, 0); }
static void t_bw_broken_fails(void) { run_all(bw_prims, 1); }

/* The file rows and the file bandwidths name the filesystem they ran on
 * and the directory (its path as given, JSON-escaped). */
static void t_file_rows_name_their_filesystem(void)
{
    static const char *const names[] = {"file", "bw-file-rd"};
    static const int cells[] = {4, 1};  /* 0K and 10K, create and delete; one */
    for (size_t i = 0; i < 2; i++) {
        struct fixture f;
        fx_open(&f, 0);
        const struct oslat_prim *p = find_prim(names[i]);
        CHECK(p != NULL);
        CHECK_EQ_LONG(p->run(&f.o, p), 0);
        fflush(f.ctx.out);
        char want[4200];
        snprintf(want, sizeof want, "\"fs_dir\":\"%s\"", f.dir);
        CHECK(strstr(f.out, "\"fs_type\":\"") != NULL);
        CHECK(strstr(f.out, "\"fs_magic\":\"0x") != NULL);
        int seen = 0;
        for (const char *at = f.out; (at = strstr(at, want)) != NULL; at++)
            seen++;
        CHECK_EQ_LONG(seen, cells[i]);
        fx_close(&f);
    }
}

/* Every primitive is in a family list above, and has a table and calls
 * that make sense for what it claims to trap. */
static void t_every_primitive_is_tested(void)
{
    const struct oslat_prim *fams[] = {oslat_ctx, oslat_fs, oslat_ipc, oslat_proc, oslat_bw};
    const char *const *lists[] = {ctx_prims, fs_prims, ipc_prims, proc_prims, bw_prims};
    int n = 0;
    for (size_t i = 0; i < 5; i++) {
        int k = 0;
        for (const struct oslat_prim *p = fams[i]; p->name; p++, k++, n++) {
            CHECK(lists[i][k] != NULL && strcmp(lists[i][k], p->name) == 0);
            CHECK(p->table && p->summary && p->run);
            CHECK(p->traps != OSLAT_TRAPS_EACH || p->ncalls > 0);
        }
        CHECK(lists[i][k] == NULL);
    }
    CHECK_EQ_LONG(n, 30);
}

/* Under a supervisor that traps getppid the null call is seen once per
 * iteration; one that claims to trap but traps nothing (the idle filter,
 * declared trapping) fails the cell. */
static void trap_case(unsigned variant, int pretend)
{
    struct fixture f;
    fx_open(&f, 0);
    const struct oslat_prim *p = find_prim("null-syscall");
    char why[512];
    const struct isob_confinement *c = isob_confine_find("seccomp-notify");
    if (c->probe(why, sizeof why))
        SKIP("seccomp-notify: %s", why);
    isob_confine_init(&f.cs, c, variant);
    tap_mark_confined();
    struct isob_confine_req req = {.calls = p->calls, .ncalls = p->ncalls, .dir = f.dir, .helper_cpu = -1};
    CHECK_EQ_LONG(isob_confine_enter(&f.cs, &req, why, sizeof why), 0);
    if (pretend)
        f.cs.traps_calls = 1;
    CHECK_EQ_LONG(p->run(&f.o, p), 0);
    fflush(f.ctx.out);
    int ok, failed, skipped;
    count(f.out, &ok, &failed, &skipped);
    if (pretend) {
        CHECK_EQ_LONG(failed, 1);
        CHECK(strstr(f.out, "helper saw 0 calls") != NULL);
    } else {
        CHECK_EQ_LONG(ok, 1);
        CHECK(strstr(f.out, "\"confine_events\":null") == NULL);
    }
    fx_close(&f);
}

static void t_trapped_calls_are_counted(void) { trap_case(1, 0); }
static void t_confinement_not_in_the_way_fails(void) { trap_case(0, 1); }

/* The driver, end to end: run isob_bench_oslat in a child, read its lines. */
static int drive(const char *confine, int traced, char *out, size_t len)
{
    int pfd[2];
    CHECK_EQ_LONG(pipe(pfd), 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        if (traced) {
            if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0)
                _exit(TAP_EXIT_SKIP);
            raise(SIGSTOP);
        }
        struct isob_counter ctr;
        CHECK_EQ_LONG(isob_counter_init(&ctr, NULL), 0);
        struct isob_bench_ctx ctx = {.ctr = &ctr, .out = fdopen(pfd[1], "w")};
        ctx.opts = (struct isob_bench_opts){
            .n = T_CAP, .warmup = T_WARMUP, .batch_k = T_BATCH_K, .batch_reps = T_BATCH_REPS,
            .empty_n = 100, .quick = 1, .client_cpu = -1, .param = "null-syscall", .confine = confine,
            .placements = 1u << ISOB_PLACE_SAME_CPU,
        };
        const struct isob_bench *b = isob_bench_find("oslat");
        CHECK(b != NULL);
        int rc = b->run(&ctx);
        fflush(ctx.out);
        _exit(rc ? 2 : ctx.failed ? 1 : ctx.skipped ? 4 : 0);
    }
    close(pfd[1]);
    int st = 0;
    if (traced) {
        /* A tracer of the child and, through TRACEFORK, of the measuring
         * process it forks: stops go on, signals are delivered. */
        CHECK_EQ_LONG(waitpid(pid, &st, 0), pid);
        if (WIFEXITED(st))
            SKIP("ptrace(PTRACE_TRACEME) is not allowed here");
        CHECK_EQ_LONG(ptrace(PTRACE_SETOPTIONS, pid, 0,
                             PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE |
                                 PTRACE_O_EXITKILL), 0);
        ptrace(PTRACE_CONT, pid, 0, 0);
        for (;;) {
            int s;
            pid_t w = waitpid(-1, &s, __WALL);
            if (w < 0)
                break;
            if (w == pid && !WIFSTOPPED(s)) {
                st = s;
                break;
            }
            if (WIFSTOPPED(s)) {
                int sig = (s >> 16) ? 0 : WSTOPSIG(s);
                ptrace(PTRACE_CONT, w, 0, sig == SIGSTOP ? 0 : sig);
            }
        }
    } else {
        CHECK_EQ_LONG(waitpid(pid, &st, 0), pid);
    }
    size_t got = 0;
    ssize_t k;
    while (got + 1 < len && (k = read(pfd[0], out + got, len - 1 - got)) > 0)
        got += (size_t)k;
    out[got] = 0;
    close(pfd[0]);
    CHECK(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void t_driver_measures(void)
{
    static char out[1 << 20];
    CHECK_EQ_LONG(drive("none", 0, out, sizeof out), 0);
    CHECK(strstr(out, "\"status\":\"ok\"") != NULL);
    CHECK(strstr(out, "\"confine\":\"none\"") != NULL);
}

/* A process already traced cannot be given a tracer: skipped with the
 * reason, exit 4, nothing measured under the name. */
static void t_driver_skips_what_cannot_apply(void)
{
    static char out[1 << 20];
    CHECK_EQ_LONG(drive("ptrace", 1, out, sizeof out), 4);
    CHECK(strstr(out, "\"status\":\"skipped\"") != NULL);
    CHECK(strstr(out, "already traced") != NULL);
    CHECK(strstr(out, "\"status\":\"ok\"") == NULL);
}

int main(void)
{
    TAP_CASE(t_every_primitive_is_tested);
    TAP_CASE(t_ctx_verified);
    TAP_CASE(t_ctx_broken_fails);
    TAP_CASE(t_fs_verified);
    TAP_CASE(t_fs_broken_fails);
    TAP_CASE(t_ipc_verified);
    TAP_CASE(t_ipc_broken_fails);
    TAP_CASE(t_proc_verified);
    TAP_CASE(t_proc_broken_fails);
    TAP_CASE(t_bw_verified);
    TAP_CASE(t_bw_broken_fails);
    TAP_CASE(t_file_rows_name_their_filesystem);
    TAP_CASE(t_trapped_calls_are_counted);
    TAP_CASE(t_confinement_not_in_the_way_fails);
    TAP_CASE(t_driver_measures);
    TAP_CASE(t_driver_skips_what_cannot_apply);
    return tap_done();
}
