/* The microkernel benchmarks' own tests (pingpong's matrix, delegate,
 * sched): each check passes on honest work and fails on a fixture that
 * breaks it -- a corrupted echo, a descriptor swapped for another, a byte
 * changed after the owner summed it, a "revocation" that revokes nothing,
 * a worker that skips a slice, a hop or a worker that dies, an endpoint
 * that claims a confinement not in force, a depth beyond the descriptor
 * limit.  Nothing here asserts a duration. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/mechanism.h"
#include "../../src/benches/delegate.h"
#include "../../src/benches/pingpong.h"
#include "../../src/benches/sched.h"
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
    char *out;
    size_t outlen;
};

static void fx_open(struct fixture *f, const char *counter)
{
    memset(f, 0, sizeof *f);
    struct isob_counter_opts co = {.force = counter, .scope = ISOB_SCOPE_THREAD, .cpu = -1};
    CHECK_EQ_LONG(isob_counter_init(&f->ctr, counter ? &co : NULL), 0);
    f->ctx.ctr = &f->ctr;
    f->ctx.out = open_memstream(&f->out, &f->outlen);
    CHECK(f->ctx.out != NULL);
    f->ctx.opts.empty_n = 100;
    CHECK_EQ_LONG(isob_measure_empty(&f->ctx), 0);
    signal(SIGPIPE, SIG_IGN);
}

static void fx_close(struct fixture *f)
{
    fclose(f->ctx.out);
    free(f->out);
    isob_counter_close(&f->ctr);
}

/* Result lines by status; every line holding `needle` (if given) counted in *hits. */
static void count(struct fixture *f, int *ok, int *failed, int *skipped, const char *needle, int *hits)
{
    fflush(f->ctx.out);
    *ok = *failed = *skipped = 0;
    if (hits)
        *hits = 0;
    for (const char *l = f->out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "{\"schema_version\":1,\"type\":\"result\"", 35) != 0)
            continue;
        const char *end = strchr(l, '\n');
        char *line = strndup(l, end ? (size_t)(end - l) : strlen(l));
        *ok += strstr(line, "\"status\":\"ok\"") != NULL;
        *failed += strstr(line, "\"status\":\"failed\"") != NULL;
        *skipped += strstr(line, "\"status\":\"skipped\"") != NULL;
        if (needle && hits && strstr(line, needle))
            (*hits)++;
        if (!strstr(line, "\"status\":\"ok\"")) {
            const char *r = strstr(line, "\"reason\":");
            fprintf(stderr, "# not ok: %.200s\n", r ? r : line);
        }
        free(line);
    }
}

/* No child of this process is left, running or unreaped. */
static void check_no_children(void)
{
    CHECK(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD);
}

/* ---- checksums ---- */

static void t_sum_catches_changes_and_moves(void)
{
    unsigned char a[256], b[256];
    uk_fill(a, sizeof a, 7, 3);
    memcpy(b, a, sizeof b);
    uint64_t s = uk_sum(a, sizeof a, 3);
    CHECK(uk_sum(b, sizeof b, 3) == s);
    b[100] ^= 1;
    CHECK(uk_sum(b, sizeof b, 3) != s);
    /* Two words swapped: same bytes, other places. */
    memcpy(b, a, sizeof b);
    memcpy(b, a + 8, 8);
    memcpy(b + 8, a, 8);
    CHECK(uk_sum(b, sizeof b, 3) != s);
    /* The same bytes summed as if they sat elsewhere in the region. */
    CHECK(uk_sum(a, sizeof a, 4) != s);
    /* Adjacent ranges add up. */
    CHECK(uk_sum(a, 64, 3) + uk_sum(a + 64, 192, 3 + 8) == s);
    /* A tail shorter than a word counts. */
    memcpy(b, a, sizeof b);
    b[254] ^= 0x80;
    CHECK(uk_sum(b, 255, 3) != uk_sum(a, 255, 3));
}

/* ---- pingpong ---- */

static void pp_fixture(struct pp_config *cfg, int sabotage)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->payloads[0] = 0;
    cfg->payloads[1] = 64;
    cfg->payloads[2] = 4096;
    cfg->npayloads = 3;
    cfg->protect = "none";
    cfg->shared = isob_map(pp_shared_bytes(), 1);
    CHECK(cfg->shared != NULL);
    cfg->cpu = isob_first_cpu();
    cfg->budget_ns = T_BUDGET_NS;
    cfg->cap = T_CAP;
    cfg->warmup = T_WARMUP;
    cfg->batch_k = T_BATCH_K;
    cfg->batch_reps = T_BATCH_REPS;
    cfg->sabotage = sabotage;
}

/* Every primitive at every payload, same CPU, under none. */
static void pp_all(int sabotage, int *ok, int *failed, int *skipped, const char *needle, int *hits)
{
    struct fixture f;
    fx_open(&f, NULL);
    struct pp_config cfg;
    pp_fixture(&cfg, sabotage);
    struct isob_confine_state cs;
    struct uk_protect none = {.name = "none", .conf = isob_confine_find("none")};
    char why[256];
    struct isob_confine_req req = {0};
    CHECK_EQ_LONG(uk_confine_self(&cs, &none, &req, why, sizeof why), 0);
    for (unsigned prim = 0; prim < PP__COUNT; prim++)
        for (unsigned pay = 0; pay < cfg.npayloads; pay++)
            pp_cell(&cfg, &f.ctx, &cs, "{}", (enum pp_prim)prim, pay, ISOB_PLACE_SAME_CPU);
    count(&f, ok, failed, skipped, needle, hits);
    fx_close(&f);
    check_no_children();
}

static void t_pingpong_echoes_verified(void)
{
    int ok, failed, skipped, hits;
    pp_all(PP_SABOTAGE_NONE, &ok, &failed, &skipped, "\"bad_replies\":0", &hits);
    CHECK_EQ_LONG(ok, PP__COUNT * 3);
    CHECK_EQ_LONG(failed + skipped, 0);
    CHECK_EQ_LONG(hits, PP__COUNT * 3);
}

static void t_pingpong_corrupted_echo_fails(void)
{
    int ok, failed, skipped, hits;
    pp_all(PP_SABOTAGE_CORRUPT, &ok, &failed, &skipped, "were not the message sent", &hits);
    CHECK_EQ_LONG(ok, 0);
    CHECK_EQ_LONG(failed, PP__COUNT * 3);
    CHECK_EQ_LONG(hits, PP__COUNT * 3);
}

static void t_pingpong_swapped_descriptor_fails(void)
{
    struct fixture f;
    fx_open(&f, NULL);
    struct pp_config cfg;
    pp_fixture(&cfg, PP_SABOTAGE_WRONG_FD);
    pp_cell(&cfg, &f.ctx, NULL, NULL, PP_SOCKET_FD, 1, ISOB_PLACE_SAME_CPU);
    int ok, failed, skipped, hits;
    count(&f, &ok, &failed, &skipped, "came back naming the file sent", &hits);
    CHECK_EQ_LONG(failed, 1);
    CHECK_EQ_LONG(hits, 1);
    fx_close(&f);
}

/* A process that claims seccomp-allow but never applied it: the server it
 * starts must refuse to verify it, and the cell is skipped, not measured. */
static void t_pingpong_unconfined_endpoint_is_skipped(void)
{
    struct fixture f;
    fx_open(&f, NULL);
    struct pp_config cfg;
    pp_fixture(&cfg, PP_SABOTAGE_NONE);
    cfg.protect = "seccomp";
    struct isob_confine_state cs;
    const struct isob_confinement *sa = isob_confine_find("seccomp-allow");
    CHECK(sa != NULL);
    isob_confine_init(&cs, sa, 2);
    cs.applied = 1;
    pp_cell(&cfg, &f.ctx, &cs, NULL, PP_PIPE, 0, ISOB_PLACE_SAME_CPU);
    int ok, failed, skipped, hits;
    count(&f, &ok, &failed, &skipped, "the server endpoint could not verify protection seccomp", &hits);
    CHECK_EQ_LONG(skipped, 1);
    CHECK_EQ_LONG(hits, 1);
    CHECK_EQ_LONG(ok + failed, 0);
    fx_close(&f);
}

/* Confined for real: both endpoints verify, the result carries both. */
static void t_pingpong_confined_endpoints_verify(void)
{
    struct fixture f;
    fx_open(&f, NULL);
    struct pp_config cfg;
    pp_fixture(&cfg, PP_SABOTAGE_NONE);
    struct uk_protect prot[UK_MAX_PROTECT];
    char why[512];
    CHECK_EQ_LONG(uk_protect_parse("seccomp", prot, why, sizeof why), 2);
    cfg.protect = prot[1].name;
    static const int calls[] = {SYS_read, SYS_write, SYS_futex, SYS_clone, SYS_clone3, SYS_wait4,
                                SYS_exit, SYS_exit_group, SYS_pipe2, SYS_close, SYS_mmap, SYS_munmap,
                                SYS_prctl, SYS_set_robust_list, SYS_close_range, SYS_openat,
                                SYS_rt_sigprocmask, SYS_rt_sigaction, SYS_sched_setaffinity,
                                SYS_getppid, SYS_kill, SYS_nanosleep, SYS_clock_nanosleep, SYS_fstat,
                                SYS_newfstatat, SYS_lseek, SYS_brk, SYS_rseq, SYS_getpid, SYS_gettid};
    struct isob_confine_req req = {.calls = calls, .ncalls = sizeof calls / sizeof calls[0], .helper_cpu = -1};
    struct isob_confine_state cs;
    tap_mark_confined();
    int rc = uk_confine_self(&cs, &prot[1], &req, why, sizeof why);
    if (rc)
        SKIP("seccomp-allow cannot be applied here: %s", why);
    pp_cell(&cfg, &f.ctx, &cs, "{}", PP_PIPE, 1, ISOB_PLACE_SAME_CPU);
    int ok, failed, skipped, hits;
    count(&f, &ok, &failed, &skipped, "\"server\":{\"seccomp_mode\":2", &hits);
    CHECK_EQ_LONG(ok, 1);
    CHECK_EQ_LONG(hits, 1);
    fx_close(&f);
}

static void t_protect_parse(void)
{
    struct uk_protect p[UK_MAX_PROTECT];
    char why[256];
    CHECK_EQ_LONG(uk_protect_parse("userns,landlock", p, why, sizeof why), 3);
    CHECK(strcmp(p[0].name, "none") == 0 && strcmp(p[1].name, "userns") == 0);
    CHECK_EQ_LONG(uk_protect_parse("none,seccomp,seccomp", p, why, sizeof why), 2);
    CHECK(strcmp(p[1].conf->name, "seccomp-allow") == 0 && strcmp(p[1].conf->variants[p[1].variant], "300-args") == 0);
    CHECK_EQ_LONG(uk_protect_parse("ptrace", p, why, sizeof why), -EINVAL);
    CHECK(strstr(why, "ptrace") != NULL);
    CHECK_EQ_LONG(uk_protect_parse("seccomp-allow", p, why, sizeof why), -EINVAL);
}

/* ---- delegate ---- */

static void dg_fixture(struct dg_config *cfg, int sabotage)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->cpu = isob_first_cpu();
    cfg->reps = 4;
    cfg->sabotage = sabotage;
}

static void dg_one(int sabotage, enum dg_variant v, uint64_t region, unsigned depth, int *ok, int *failed,
                   const char *needle, int *hits)
{
    struct fixture f;
    fx_open(&f, "clock");
    struct dg_config cfg;
    dg_fixture(&cfg, sabotage);
    dg_config_run(&cfg, &f.ctx, v, region, depth, ISOB_PLACE_SAME_CPU);
    int skipped;
    count(&f, ok, failed, &skipped, needle, hits);
    CHECK_EQ_LONG(skipped, 0);
    fx_close(&f);
    check_no_children();
}

static void t_delegate_every_hop_verifies(void)
{
    /* 1 MiB down 6 hops: 1M, 512K, ..., 32K, each checksummed; and a 4 KiB
     * region down 8 hops, whose shares stop halving at 64 bytes. */
    for (unsigned v = 0; v < DG__COUNT; v++) {
        int ok, failed, hits;
        dg_one(DG_SABOTAGE_NONE, (enum dg_variant)v, 1 << 20, 6, &ok, &failed, "\"checksums_verified\":24", &hits);
        CHECK_EQ_LONG(failed, 0);
        CHECK_EQ_LONG(ok, v == DG_PROCESSES ? 4 : 2);
        CHECK_EQ_LONG(hits, 2);
        dg_one(DG_SABOTAGE_NONE, (enum dg_variant)v, 4096, 8, &ok, &failed, "\"shares_halved_per_repetition\":6", &hits);
        CHECK_EQ_LONG(failed, 0);
        CHECK_EQ_LONG(hits, 2);
    }
}

static void t_delegate_corrupted_share_fails_at_every_hop(void)
{
    for (unsigned v = 0; v < DG__COUNT; v++) {
        int ok, failed, hits;
        dg_one(DG_SABOTAGE_CORRUPT, (enum dg_variant)v, 65536, 4, &ok, &failed, "checksum mismatch at 4 of 4 hops", &hits);
        CHECK_EQ_LONG(ok, 0);
        CHECK(failed >= 2);
        CHECK_EQ_LONG(hits, failed);
    }
}

static void t_delegate_revocation_raises_sigbus(void)
{
    int ok, failed, hits;
    dg_one(DG_SABOTAGE_NONE, DG_PROCESSES, 65536, 3, &ok, &failed,
           "\"holders_probed\":6,\"holders_faulted\":6,\"fault_expected\":\"SIGBUS\"", &hits);
    CHECK_EQ_LONG(ok, 4);
    CHECK_EQ_LONG(hits, 1);
}

static void t_delegate_revocation_without_sigbus_fails(void)
{
    int ok, failed, hits;
    dg_one(DG_SABOTAGE_NO_REVOKE, DG_PROCESSES, 65536, 3, &ok, &failed,
           "after truncation, 3 of 3 holders could still read their share (no SIGBUS)", &hits);
    CHECK_EQ_LONG(ok, 0);
    CHECK_EQ_LONG(hits, 4);
}

static void t_delegate_dead_hop_is_reported_and_the_rest_ended(void)
{
    for (unsigned v = DG_PROCESSES; v <= DG_COPIES; v++) {
        int ok, failed, hits;
        dg_one(DG_SABOTAGE_KILL_HOP, (enum dg_variant)v, 65536, 5, &ok, &failed,
               "1 of 5 hops died (hop 3 died: signal 9 (Killed)); the other 4 were ended", &hits);
        CHECK_EQ_LONG(ok, 0);
        CHECK(hits >= 2);
    }
}

static void t_delegate_refuses_depth_beyond_descriptors(void)
{
    struct rlimit rl = {.rlim_cur = 64, .rlim_max = 64};
    CHECK_EQ_LONG(setrlimit(RLIMIT_NOFILE, &rl), 0);
    struct isob_bench_opts o = {.depths = "1,32"};
    struct dg_config cfg;
    char why[300] = "";
    CHECK_EQ_LONG(dg_parse(&o, &cfg, why, sizeof why), -EINVAL);
    CHECK(strstr(why, "RLIMIT_NOFILE 64") != NULL && strstr(why, "--depth 32") != NULL);
    o.depths = "1,2";
    CHECK_EQ_LONG(dg_parse(&o, &cfg, why, sizeof why), 0);
    o.variants = "threads";
    o.depths = "32";
    CHECK_EQ_LONG(dg_parse(&o, &cfg, why, sizeof why), 0);
}

/* ---- sched ---- */

static void sc_fixture(struct sc_config *cfg, int sabotage)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->cpu = isob_first_cpu();
    cfg->reps = 2;
    cfg->sabotage = sabotage;
    sc_calibrate(cfg);
}

static void sc_one(int sabotage, enum sc_kind kind, struct isob_confine_state *cs, unsigned n, int *ok,
                   int *failed, int *skipped, const char *needle, int *hits)
{
    struct fixture f;
    fx_open(&f, "clock");
    struct sc_config cfg;
    sc_fixture(&cfg, sabotage);
    sc_config_run(&cfg, &f.ctx, cs, NULL, kind, n, 100, SC_YIELD, SC_ONE);
    count(&f, ok, failed, skipped, needle, hits);
    fx_close(&f);
    check_no_children();
}

static void t_sched_jump_ahead_matches_the_loop(void)
{
    uint64_t steps[] = {0, 1, 2, 3, 1000, 123457};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        CHECK(sc_spin(42 + i, steps[i]) == sc_expect(42 + i, steps[i]));
    CHECK(sc_spin(1, 10) != sc_expect(1, 9));
}

static void t_sched_total_work_is_n_times_w(void)
{
    for (unsigned k = SC_THREADS; k <= SC_PROCESSES; k++) {
        int ok, failed, skipped, hits;
        /* 5 workers, 10 slices each, 2 repetitions. */
        sc_one(SC_SABOTAGE_NONE, (enum sc_kind)k, NULL, 5, &ok, &failed, &skipped,
               "\"slices_done\":100,\"slices_expected\":100", &hits);
        CHECK_EQ_LONG(ok, 1);
        CHECK_EQ_LONG(hits, 1);
    }
}

static void t_sched_missing_slice_fails(void)
{
    for (unsigned k = SC_THREADS; k <= SC_PROCESSES; k++) {
        int ok, failed, skipped, hits;
        sc_one(SC_SABOTAGE_SKIP_SLICE, (enum sc_kind)k, NULL, 5, &ok, &failed, &skipped,
               "work done 49 of 50 slices (N*W); 1 workers wrong, first worker 0: 9 slices", &hits);
        CHECK_EQ_LONG(failed, 1);
        CHECK_EQ_LONG(hits, 1);
    }
}

static void t_sched_dead_worker_is_reported_and_the_rest_ended(void)
{
    int ok, failed, skipped, hits;
    sc_one(SC_SABOTAGE_KILL, SC_PROCESSES, NULL, 6, &ok, &failed, &skipped,
           "1 of 6 workers died (worker 3 died: signal 9 (Killed)); the other 5 were ended", &hits);
    CHECK_EQ_LONG(failed, 1);
    CHECK_EQ_LONG(hits, 1);
}

/* Workers of a process that claims seccomp-allow without it in force:
 * they fail to verify it, and the configuration is skipped. */
static void t_sched_unconfined_workers_are_skipped(void)
{
    struct isob_confine_state cs;
    isob_confine_init(&cs, isob_confine_find("seccomp-allow"), 2);
    cs.applied = 1;
    int ok, failed, skipped, hits;
    sc_one(SC_SABOTAGE_NONE, SC_SECCOMP, &cs, 3, &ok, &failed, &skipped,
           "a worker could not verify the confinement", &hits);
    CHECK_EQ_LONG(skipped, 1);
    CHECK_EQ_LONG(hits, 1);
    CHECK_EQ_LONG(ok + failed, 0);
}

/* As an unprivileged user held to a process limit, N beyond it is refused
 * before anything starts. */
static void t_sched_refuses_workers_beyond_the_process_limit(void)
{
    if (geteuid() == 0 && setuid(65534) != 0)
        SKIP("cannot become uid 65534 to be held to RLIMIT_NPROC");
    if (geteuid() == 0)
        SKIP("root is not held to RLIMIT_NPROC");
    struct rlimit rl = {.rlim_cur = 1000, .rlim_max = 1000};
    CHECK_EQ_LONG(setrlimit(RLIMIT_NPROC, &rl), 0);
    struct isob_bench_opts o = {.workers = "1,4096"};
    struct sc_config cfg;
    char why[300] = "";
    CHECK_EQ_LONG(sc_parse(&o, &cfg, why, sizeof why), -EINVAL);
    CHECK(strstr(why, "RLIMIT_NPROC 1000") != NULL && strstr(why, "--workers 4096") != NULL);
    o.workers = "1,4";
    CHECK_EQ_LONG(sc_parse(&o, &cfg, why, sizeof why), 0);
}

int main(void)
{
    TAP_CASE(t_sum_catches_changes_and_moves);
    TAP_CASE(t_protect_parse);
    TAP_CASE(t_pingpong_echoes_verified);
    TAP_CASE(t_pingpong_corrupted_echo_fails);
    TAP_CASE(t_pingpong_swapped_descriptor_fails);
    TAP_CASE(t_pingpong_unconfined_endpoint_is_skipped);
    TAP_CASE(t_pingpong_confined_endpoints_verify);
    TAP_CASE(t_delegate_every_hop_verifies);
    TAP_CASE(t_delegate_corrupted_share_fails_at_every_hop);
    TAP_CASE(t_delegate_revocation_raises_sigbus);
    TAP_CASE(t_delegate_revocation_without_sigbus_fails);
    TAP_CASE(t_delegate_dead_hop_is_reported_and_the_rest_ended);
    TAP_CASE(t_delegate_refuses_depth_beyond_descriptors);
    TAP_CASE(t_sched_jump_ahead_matches_the_loop);
    TAP_CASE(t_sched_total_work_is_n_times_w);
    TAP_CASE(t_sched_missing_slice_fails);
    TAP_CASE(t_sched_dead_worker_is_reported_and_the_rest_ended);
    TAP_CASE(t_sched_unconfined_workers_are_skipped);
    TAP_CASE(t_sched_refuses_workers_beyond_the_process_limit);
    return tap_done();
}
