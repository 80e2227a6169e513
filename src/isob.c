/* isob: the native driver.  Measures one benchmark on one mechanism and
 * prints JSON lines (see include/isobench/bench.h for the schema).
 *
 * Exit status: 0 all results ok, 1 a result failed, 2 bad usage,
 * 4 skipped (the mechanism cannot run here; kselftest's SKIP code). */
#include <ctype.h>
#include <getopt.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isob_config.h"
#include "isobench/bench.h"
#include "isobench/confine.h"
#include "isobench/isolation.h"
#include "isobench/scrape.h"
#include "isobench/loadgen.h"
#include "isobench/serve.h"

#define EXIT_USAGE 2
#define EXIT_SKIP 4

static void usage(FILE *f)
{
    fprintf(f,
        "usage: isob BENCH [-m MECH] [options]    measure; JSON lines on stdout\n"
        "       isob list [--json]                mechanisms and benchmarks\n"
        "       isob isolation -m MECH            the isolation matrix of one mechanism (JSON)\n"
        "       isob scrape --target T            outside readers against a canary in T (JSON;\n"
        "                                         T: plain, pipe-writer, pipe-reader or a mechanism)\n"
        "       isob serve -m MECH [options]      memcached text-protocol server over MECH\n"
        "       isob loadgen --port P [options]   load a memcached or HTTP server (JSON)\n"
        "       isob --version [--json]           version, compiler and flags\n"
        "       isob --limits --json              the bounds of every numeric option\n"
        "\n"
        "options (defaults in brackets):\n"
        "  -m, --mechanism M   mechanism to measure (see `isob list`); once: to measure\n"
        "                      several, run isob once per mechanism (a second -m is\n"
        "                      refused with exit status 2)\n"
        "  --n N               per-iteration samples per result [%d]\n"
        "  --warmup N          calls before measuring, not recorded [%d]\n"
        "  --batch-k K         K of the batched estimator (K vs 2K iterations) [%d]\n"
        "  --batch-reps R      (K, 2K) pairs; the estimate is their median [%d]\n"
        "  --empty-n N         samples of the empty region [%d]\n"
        "  --quick             divide n, warm-up, K and empty-n by %d\n"
        "  --placement LIST    same-cpu,cross-cpu,unpinned [same-cpu,cross-cpu]\n"
        "  --cpu C             CPU of the untrusted side, one this process may use\n"
        "                      (its affinity mask) [first allowed CPU]; cross-cpu puts\n"
        "                      the server on the next allowed CPU\n"
        "  --counter B         perf, " ISOB_TIMER_NAME " or clock [best available]\n"
        "  --scope S           perf counting scope: thread or cpu [thread]\n"
        "  --primitive P       pingpong: a list of futex, pipe, socket, socket-fd, eventfd,\n"
        "                      spin; oslat: a list of primitives or families (see isob list);\n"
        "                      lwc-switch: variants, e.g. lwc,process-futex [all]\n"
        "  --confine C         oslat only: confinements C or C:VARIANT, comma-separated\n"
        "                      (see isob list) [none]\n"
        "  --sizes LIST        kv and memops: data or block sizes, e.g. 4K,1M,256M (multiples\n"
        "                      of 64 B) [kv: 4K to 256M by 4, --quick: to 16M;\n"
        "                      memops: 100M to 1000M by 100M, --quick: 64M,256M];\n"
        "                      delegate: region sizes [4K,1M,64M]\n"
        "  --protect LIST      pingpong: none, seccomp, userns, landlock (or seccomp-allow:V)\n"
        "                      confining both endpoints; none always runs first [none]\n"
        "  --payload LIST      pingpong, switch: message payloads in bytes, 0 to 65536\n"
        "                      [0,64,4096]\n"
        "  --depth LIST        delegate: chain depths [1,2,4,8,16,32]\n"
        "  --variant LIST      delegate: threads, processes, copies [all];\n"
        "                      sched: threads, processes, seccomp, userns [all];\n"
        "                      switch: entry, inline, direct-call, indirect-call (ERIM's\n"
        "                      call kinds: direct and mpk) [all the mechanism has]\n"
        "  --workers LIST      sched: worker counts [1,2,4,16,64,256]\n"
        "  --slice LIST        sched: slice lengths in microseconds [10,100]\n"
        "  --mode LIST         sched: yield (after each slice), preempt [yield,preempt]\n"
        "  --cpus LIST         sched: one (every worker on one CPU), all [one,all]\n"
        "  --pid PID           inspect: the process whose executable mappings are scanned\n"
        "                      [this isob process]\n"
        "  --check             check the benchmark's options as a run would, measure\n"
        "                      nothing: exit 0, or 2 with the reason\n"
        "  --limit N           scale only: most compartments to create [1000]\n"
        "  --reading LIST      kv: per-request (two counter readings around every get),\n"
        "                      per-pass (two around a whole pass of gets, divided by\n"
        "                      their count: Konrad's protocol, the reading's cost\n"
        "                      shared out); both: one get phase each [per-request]\n"
        "  --iterations N      kv: measured passes per size [enough for --n gets, at least 3];\n"
        "                      cpuwork: iterations per trial [1e8, Morello's; --quick: 1e6]\n"
        "  --seed S            kv only: seed of keys, values and read orders [%d]\n"
        "  --max-bytes B       scrape only: bytes each reader may read of the target, with\n"
        "                      an optional K, M or G suffix [1G]\n"
        "  --ptrace-pages N    scrape only: pages PEEKDATA reads at the start of each\n"
        "                      mapping, besides the canary's page [%u]\n",
        ISOB_DEFAULT_N, ISOB_DEFAULT_WARMUP, ISOB_DEFAULT_BATCH_K, ISOB_DEFAULT_BATCH_REPS,
        ISOB_DEFAULT_EMPTY_N, ISOB_QUICK_DIVISOR, ISOB_DEFAULT_SEED, ISOB_SCAN_DEFAULT_PTRACE_PAGES);
}

static void die_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "isob: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see isob --help)\n");
    exit(EXIT_USAGE);
}

/* The bounds of the numeric options, in one table: the parsers below enforce
 * them and `isob --limits --json` prints them, so that the Python side checks a
 * command line with the same numbers before it stores a run. */
#define ISOB_MAX_COUNT 100000000ull  /* --n, --warmup, ...: large enough for any run */
#define ISOB_MIN_SIZE 64ull          /* --sizes: the kv benchmark's entry size */
#define ISOB_MAX_SIZE (16ull << 30)  /* --sizes: the largest store the kv benchmark maps */

static const struct count_limit {
    const char *option;
    unsigned long long min, max;
} count_limits[] = {
    {"n", 1, ISOB_MAX_COUNT}, {"warmup", 1, ISOB_MAX_COUNT}, {"batch-k", 1, ISOB_MAX_COUNT},
    {"batch-reps", 1, ISOB_MAX_COUNT}, {"empty-n", 1, ISOB_MAX_COUNT},
    {"iterations", 1, ISOB_MAX_COUNT},
};

/* Only plain ASCII digits count: strtoull alone would also take leading
 * blanks and a sign, which the Python side rejects. */
static int plain_digits(const char *s)
{
    return isdigit((unsigned char)s[0]);
}

/* opt is "--name"; an option missing from count_limits (--cpu) takes the
 * widest count range and is narrowed by its caller. */
static size_t parse_count(const char *opt, const char *s)
{
    unsigned long long lo = 1, hi = ISOB_MAX_COUNT;
    for (size_t i = 0; i < sizeof count_limits / sizeof count_limits[0]; i++)
        if (strcmp(opt + 2, count_limits[i].option) == 0)
            lo = count_limits[i].min, hi = count_limits[i].max;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !plain_digits(s) || *end || v < lo || v > hi) {
        fprintf(stderr, "isob: error: %s: '%s' is not a whole number from %llu to %llu\n", opt, s,
                lo, hi);
        exit(EXIT_USAGE);
    }
    return (size_t)v;
}

/* --sizes: comma-separated byte counts with an optional K, M or G suffix
 * (powers of 1024); each a multiple of 64, the kv benchmark's entry size. */
static size_t parse_sizes(const char *s, size_t *out)
{
    size_t n = 0;
    char buf[512];
    /* A longer list would be cut short without a word. */
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf)
        die_usage("--sizes: the list is longer than %s characters", "511");
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(tok, &end, 10);
        unsigned shift = 0;
        if (*end == 'K' || *end == 'k')
            shift = 10, end++;
        else if (*end == 'M' || *end == 'm')
            shift = 20, end++;
        else if (*end == 'G' || *end == 'g')
            shift = 30, end++;
        if (errno || !plain_digits(tok) || *end || v == 0 || v > ISOB_MAX_SIZE >> shift ||
            (v << shift) < ISOB_MIN_SIZE || ((v << shift) % ISOB_MIN_SIZE) != 0)
            die_usage("--sizes: '%s' is not a multiple of 64 bytes from 64 to 16G", tok);
        if (n == ISOB_MAX_SIZES)
            die_usage("--sizes: more than %s sizes", "32");
        out[n++] = (size_t)(v << shift);
    }
    if (!n)
        die_usage("--sizes needs at least one size%s", "");
    return n;
}

/* --max-bytes: a byte count with an optional K, M or G suffix (powers of
 * 1024), from one page to 64 GiB. */
static uint64_t parse_bytes(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10, end++;
    else if (*end == 'M' || *end == 'm')
        shift = 20, end++;
    else if (*end == 'G' || *end == 'g')
        shift = 30, end++;
    if (errno || end == s || *end || s[0] == '-' || v == 0 || v > (64ull << 30) >> shift ||
        (v << shift) < ISOB_SCAN_PAGE) {
        fprintf(stderr, "isob: error: %s: '%s' is not a byte count from 4K to 64G\n", opt, s);
        exit(EXIT_USAGE);
    }
    return (uint64_t)v << shift;
}

static unsigned parse_placements(const char *s)
{
    unsigned mask = 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        enum isob_placement p;
        if (isob_placement_parse(tok, &p) != 0)
            die_usage("unknown placement '%s' (same-cpu, cross-cpu, unpinned)", tok);
        mask |= 1u << p;
    }
    if (!mask)
        die_usage("--placement needs at least one placement%s", "");
    return mask;
}

static void props_json(struct isob_jw *w, unsigned props)
{
    static const struct { unsigned bit; const char *name; } names[] = {
        {ISOB_ISOLATES_MEMORY, "isolates_memory"}, {ISOB_SEPARATE_AS, "separate_as"},
        {ISOB_FILTERS_SYSCALLS, "filters_syscalls"}, {ISOB_TWO_CONTEXTS, "two_contexts"},
        {ISOB_TEST_ONLY, "test_only"},
    };
    isob_jw_arr(w, "props");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (props & names[i].bit)
            isob_jw_str(w, NULL, names[i].name);
    isob_jw_close(w, ']');
}

static int cmd_list(int json)
{
    if (json) {
        struct isob_jw w;
        isob_jw_begin(&w, stdout, "list");
        isob_jw_arr(&w, "mechanisms");
        for (const struct isob_mechanism *const *m = isob_mechanisms; *m; m++) {
            if (!isob_mechanism_listed(*m))
                continue;
            char why[256] = "";
            int rc = (*m)->probe(why, sizeof why);
            isob_jw_obj(&w, NULL);
            isob_jw_str(&w, "name", (*m)->name);
            isob_jw_str(&w, "summary", (*m)->summary);
            isob_jw_bool(&w, "available", rc == 0);
            isob_jw_str(&w, "reason", rc == 0 ? NULL : why);
            props_json(&w, (*m)->props);
            isob_jw_close(&w, '}');
        }
        isob_jw_close(&w, ']');
        isob_jw_arr(&w, "benchmarks");
        for (const struct isob_bench *const *b = isob_benches; *b; b++) {
            isob_jw_obj(&w, NULL);
            isob_jw_str(&w, "name", (*b)->name);
            isob_jw_str(&w, "summary", (*b)->summary);
            isob_jw_bool(&w, "needs_mechanism", (*b)->needs_mechanism);
            isob_jw_bool(&w, "takes_confine", (*b)->takes_confine);
            if ((*b)->describe)
                (*b)->describe(&w);
            if ((*b)->options) {
                isob_jw_arr(&w, "options");
                for (const struct isob_bench_option *op = (*b)->options; op->name; op++) {
                    isob_jw_obj(&w, NULL);
                    isob_jw_str(&w, "name", op->name);
                    isob_jw_str(&w, "values", op->values);
                    isob_jw_str(&w, "default", op->dflt);
                    isob_jw_str(&w, "summary", op->summary);
                    isob_jw_close(&w, '}');
                }
                isob_jw_close(&w, ']');
            }
            isob_jw_close(&w, '}');
        }
        isob_jw_close(&w, ']');
        isob_jw_arr(&w, "confinements");
        for (const struct isob_confinement *const *c = isob_confinements; *c; c++) {
            char why[256] = "";
            int rc = (*c)->probe(why, sizeof why);
            isob_jw_obj(&w, NULL);
            isob_jw_str(&w, "name", (*c)->name);
            isob_jw_str(&w, "summary", (*c)->summary);
            isob_jw_str(&w, "threat", (*c)->threat);
            isob_jw_arr(&w, "variants");
            for (const char *const *v = (*c)->variants; *v; v++)
                isob_jw_str(&w, NULL, *v);
            isob_jw_close(&w, ']');
            isob_jw_bool(&w, "available", rc == 0);
            isob_jw_str(&w, "reason", rc == 0 ? NULL : why);
            isob_jw_close(&w, '}');
        }
        isob_jw_close(&w, ']');
        isob_jw_end(&w);
        return 0;
    }
    printf("mechanisms:\n");
    for (const struct isob_mechanism *const *m = isob_mechanisms; *m; m++) {
        if (!isob_mechanism_listed(*m))
            continue;
        char why[256] = "";
        int rc = (*m)->probe(why, sizeof why);
        printf("  %-16s %s%s%s\n", (*m)->name, (*m)->summary, rc ? "  [SKIP: " : "",
               rc ? why : "");
        if (rc)
            printf("%*s]\n", 0, "");
    }
    printf("benchmarks:\n");
    for (const struct isob_bench *const *b = isob_benches; *b; b++)
        printf("  %-16s %s\n", (*b)->name, (*b)->summary);
    printf("confinements (oslat --confine; pingpong --protect takes none, seccomp, userns, landlock):\n");
    for (const struct isob_confinement *const *c = isob_confinements; *c; c++) {
        char why[256] = "", variants[128] = "";
        int rc = (*c)->probe(why, sizeof why);
        for (const char *const *v = (*c)->variants; *v; v++)
            snprintf(variants + strlen(variants), sizeof variants - strlen(variants), "%s%s",
                     v == (*c)->variants ? "" : ",", *v);
        printf("  %-16s %s [%s]%s%s%s\n", (*c)->name, (*c)->summary, variants, rc ? "  [SKIP: " : "",
               rc ? why : "", rc ? "]" : "");
    }
    return 0;
}

static int cmd_isolation(const struct isob_mechanism *m)
{
    struct isob_isolation r;
    isob_isolation_matrix(m, &r);
    isob_isolation_emit(stdout, m, &r);
    if (strcmp(r.verdict, "skipped") == 0)
        return EXIT_SKIP;
    /* A mechanism whose own claim is contradicted, or a test that broke. */
    return strcmp(r.verdict, "leaked") == 0 || strcmp(r.verdict, "failed") == 0;
}

static int cmd_limits(void)
{
    char buf[64];
    struct isob_jw w;
    isob_jw_begin(&w, stdout, "limits");
    isob_jw_obj(&w, "options");
    for (size_t i = 0; i < sizeof count_limits / sizeof count_limits[0]; i++) {
        isob_jw_obj(&w, count_limits[i].option);
        isob_jw_int(&w, "min", (long long)count_limits[i].min);
        isob_jw_int(&w, "max", (long long)count_limits[i].max);
        isob_jw_close(&w, '}');
    }
    isob_jw_obj(&w, "sizes");
    isob_jw_int(&w, "min", (long long)ISOB_MIN_SIZE);
    isob_jw_int(&w, "max", (long long)ISOB_MAX_SIZE);
    isob_jw_int(&w, "multiple", (long long)ISOB_MIN_SIZE);
    isob_jw_int(&w, "max_items", ISOB_MAX_SIZES);
    isob_jw_raw(&w, "suffixes", "{\"K\":10,\"M\":20,\"G\":30}");
    isob_jw_close(&w, '}');
    isob_jw_obj(&w, "cpu");
    isob_jw_int(&w, "min", 0);
    isob_jw_int(&w, "max", isob_ncpus() - 1);
    isob_jw_close(&w, '}');
    isob_jw_obj(&w, "seed");
    isob_jw_int(&w, "min", 0);
    /* 2^64-1 does not fit the writer's signed integers. */
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)UINT64_MAX);
    isob_jw_raw(&w, "max", buf);
    isob_jw_close(&w, '}');
    isob_jw_close(&w, '}');
    isob_jw_end(&w);
    return 0;
}

static int cmd_scrape(const char *target, const struct isob_scrape_opts *o)
{
    struct isob_scrape_report rep;
    if (isob_scrape_run(target, o, &rep) != 0)
        die_usage("unknown scrape target '%s' (plain, pipe-writer, pipe-reader, or a mechanism of "
                  "isob list)", target);
    isob_scrape_emit(stdout, &rep);
    isob_scrape_report_free(&rep);
    if (strcmp(rep.status, "skipped") == 0)
        return EXIT_SKIP;
    if (strcmp(rep.status, "ok") != 0) {
        fprintf(stderr, "isob: scrape %s: %s\n", target, rep.reason);
        return 1;
    }
    return 0;
}

static int cmd_version(int json)
{
    if (json) {
        struct isob_jw w;
        isob_jw_begin(&w, stdout, "version");
        isob_jw_str(&w, "version", ISOB_VERSION);
        isob_jw_str(&w, "cc", ISOB_CC);
        isob_jw_str(&w, "cflags", ISOB_CFLAGS);
        isob_jw_end(&w);
    } else {
        printf("isob %s (%s; %s)\n", ISOB_VERSION, ISOB_CC, ISOB_CFLAGS);
    }
    return 0;
}

static void emit_skip(struct isob_bench_ctx *ctx, const char *bench, const char *why)
{
    isob_emit_result(ctx, bench, "{}", NULL, NULL, "skipped", why, NULL);
}

enum { OPT_N = 256, OPT_WARMUP, OPT_BATCH_K, OPT_BATCH_REPS, OPT_EMPTY_N, OPT_QUICK,
       OPT_PLACEMENT, OPT_CPU, OPT_COUNTER, OPT_SCOPE, OPT_PRIMITIVE, OPT_JSON, OPT_VERSION,
       OPT_SIZES, OPT_ITERATIONS, OPT_SEED, OPT_CONFINE, OPT_LIMITS, OPT_TARGET, OPT_MAX_BYTES,
       OPT_PTRACE_PAGES, OPT_LIMIT, OPT_PROTECT, OPT_PAYLOAD, OPT_DEPTH, OPT_VARIANT, OPT_WORKERS,
       OPT_SLICE, OPT_MODE, OPT_CPUS, OPT_CHECK, OPT_PID, OPT_READING };

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "serve") == 0)
        return isob_serve_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "loadgen") == 0)
        return isob_loadgen_main(argc - 1, argv + 1);
    static const struct option longopts[] = {
        {"mechanism", required_argument, 0, 'm'}, {"n", required_argument, 0, OPT_N},
        {"warmup", required_argument, 0, OPT_WARMUP}, {"batch-k", required_argument, 0, OPT_BATCH_K},
        {"batch-reps", required_argument, 0, OPT_BATCH_REPS},
        {"empty-n", required_argument, 0, OPT_EMPTY_N}, {"quick", no_argument, 0, OPT_QUICK},
        {"placement", required_argument, 0, OPT_PLACEMENT}, {"cpu", required_argument, 0, OPT_CPU},
        {"counter", required_argument, 0, OPT_COUNTER}, {"scope", required_argument, 0, OPT_SCOPE},
        {"primitive", required_argument, 0, OPT_PRIMITIVE}, {"json", no_argument, 0, OPT_JSON},
        {"version", no_argument, 0, OPT_VERSION}, {"help", no_argument, 0, 'h'},
        {"sizes", required_argument, 0, OPT_SIZES}, {"iterations", required_argument, 0, OPT_ITERATIONS},
        {"seed", required_argument, 0, OPT_SEED}, {"confine", required_argument, 0, OPT_CONFINE},
        {"limits", no_argument, 0, OPT_LIMITS}, {"target", required_argument, 0, OPT_TARGET},
        {"max-bytes", required_argument, 0, OPT_MAX_BYTES},
        {"ptrace-pages", required_argument, 0, OPT_PTRACE_PAGES},
        {"limit", required_argument, 0, OPT_LIMIT},
        {"protect", required_argument, 0, OPT_PROTECT}, {"payload", required_argument, 0, OPT_PAYLOAD},
        {"depth", required_argument, 0, OPT_DEPTH}, {"variant", required_argument, 0, OPT_VARIANT},
        {"workers", required_argument, 0, OPT_WORKERS}, {"slice", required_argument, 0, OPT_SLICE},
        {"mode", required_argument, 0, OPT_MODE}, {"cpus", required_argument, 0, OPT_CPUS},
        {"check", no_argument, 0, OPT_CHECK}, {"pid", required_argument, 0, OPT_PID},
        {"reading", required_argument, 0, OPT_READING},
        {0, 0, 0, 0},
    };
    struct isob_bench_opts o = {
        .n = ISOB_DEFAULT_N, .warmup = ISOB_DEFAULT_WARMUP, .batch_k = ISOB_DEFAULT_BATCH_K,
        .batch_reps = ISOB_DEFAULT_BATCH_REPS, .empty_n = ISOB_DEFAULT_EMPTY_N,
        .placements = (1u << ISOB_PLACE_SAME_CPU) | (1u << ISOB_PLACE_CROSS_CPU),
        .client_cpu = -2, .seed = ISOB_DEFAULT_SEED,
    };
    struct isob_counter_opts copts = {.force = NULL, .scope = ISOB_SCOPE_THREAD, .cpu = -1};
    const char *mech_name = NULL, *target = NULL;
    struct isob_scrape_opts sopts = {0, 0};
    int json = 0, version = 0, limits = 0, check_only = 0, opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "m:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'm':
            /* One process measures one mechanism; the last of several -m
             * must not silently be the only one measured. */
            if (mech_name) {
                fprintf(stderr, "isob: error: -m given twice ('%s', then '%s'): one mechanism per "
                        "run; run isob once per mechanism (see isob --help)\n", mech_name, optarg);
                return EXIT_USAGE;
            }
            mech_name = optarg;
            break;
        case OPT_N: o.n = parse_count("--n", optarg); break;
        case OPT_WARMUP: o.warmup = parse_count("--warmup", optarg); break;
        case OPT_BATCH_K: o.batch_k = parse_count("--batch-k", optarg); break;
        case OPT_BATCH_REPS: o.batch_reps = parse_count("--batch-reps", optarg); break;
        case OPT_EMPTY_N: o.empty_n = parse_count("--empty-n", optarg); break;
        case OPT_QUICK: o.quick = 1; break;
        case OPT_PLACEMENT: o.placements = parse_placements(optarg); o.placement_given = 1; break;
        case OPT_CPU: {
            size_t cpu = strcmp(optarg, "0") == 0 ? 0 : parse_count("--cpu", optarg);
            if (!isob_cpu_allowed((int)cpu))
                die_usage("--cpu %s: not among the CPUs this process may use (its affinity "
                          "mask)", optarg);
            o.client_cpu = (int)cpu;
            break;
        }
        case OPT_COUNTER:
            if (strcmp(optarg, "perf") && strcmp(optarg, ISOB_TIMER_NAME) && strcmp(optarg, "clock"))
                die_usage("--counter: unknown backend '%s' (perf, " ISOB_TIMER_NAME ", clock)", optarg);
            copts.force = optarg;
            break;
        case OPT_SCOPE:
            if (strcmp(optarg, "thread") == 0)
                copts.scope = ISOB_SCOPE_THREAD;
            else if (strcmp(optarg, "cpu") == 0)
                copts.scope = ISOB_SCOPE_CPU;
            else
                die_usage("--scope: '%s' is neither thread nor cpu", optarg);
            break;
        case OPT_PRIMITIVE: o.param = optarg; break;
        case OPT_CONFINE: o.confine = optarg; break;
        case OPT_PROTECT: o.protect = optarg; break;
        case OPT_PAYLOAD: o.payloads = optarg; break;
        case OPT_DEPTH: o.depths = optarg; break;
        case OPT_VARIANT: o.variants = optarg; break;
        case OPT_WORKERS: o.workers = optarg; break;
        case OPT_SLICE: o.slices = optarg; break;
        case OPT_MODE: o.modes = optarg; break;
        case OPT_CPUS: o.cpus = optarg; break;
        case OPT_PID: o.pid = optarg; break;
        case OPT_READING: o.reading = optarg; break;
        case OPT_SIZES: o.nsizes = parse_sizes(optarg, o.sizes); break;
        case OPT_ITERATIONS: o.iterations = parse_count("--iterations", optarg); break;
        case OPT_LIMIT: o.limit = parse_count("--limit", optarg); break;
        case OPT_SEED: {
            char *end;
            errno = 0;
            o.seed = strtoull(optarg, &end, 0);
            if (errno || !plain_digits(optarg) || *end)
                die_usage("--seed: '%s' is not a number from 0 to 2^64-1", optarg);
            break;
        }
        case OPT_TARGET:
            if (target)
                die_usage("--target given twice: one target per run%s", "");
            target = optarg;
            break;
        case OPT_MAX_BYTES: sopts.budget = parse_bytes("--max-bytes", optarg); break;
        case OPT_PTRACE_PAGES: sopts.ptrace_pages = (unsigned)parse_count("--ptrace-pages", optarg); break;
        case OPT_JSON: json = 1; break;
        case OPT_VERSION: version = 1; break;
        case OPT_LIMITS: limits = 1; break;
        case OPT_CHECK: check_only = 1; break;
        case 'h': usage(stdout); return 0;
        case ':': die_usage("option %s needs a value", argv[optind - 1]); break;
        default: die_usage("unknown option '%s'", argv[optind - 1]); break;
        }
    }
    if (version)
        return cmd_version(json);
    if (limits) {
        if (!json)
            die_usage("--limits is only printed as JSON: add --json%s", "");
        return cmd_limits();
    }
    if (optind >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (optind + 1 < argc)
        die_usage("unexpected argument '%s'", argv[optind + 1]);
    const char *what = argv[optind];
    if (strcmp(what, "list") == 0)
        return cmd_list(json);
    if (strcmp(what, "scrape") == 0) {
        if (mech_name)
            die_usage("scrape takes --target, not -m ('%s')", mech_name);
        if (!target)
            die_usage("scrape needs --target T (plain, pipe-writer, pipe-reader or a mechanism)%s", "");
        return cmd_scrape(target, &sopts);
    }
    if (target || sopts.budget || sopts.ptrace_pages)
        die_usage("--target, --max-bytes and --ptrace-pages are options of scrape only%s", "");

    const struct isob_mechanism *m = NULL;
    if (mech_name) {
        m = isob_mechanism_find(mech_name);
        if (!m)
            die_usage("unknown mechanism '%s' (see isob list)", mech_name);
    }
    if (strcmp(what, "isolation") == 0) {
        if (!m)
            die_usage("isolation needs -m MECH%s", "");
        return cmd_isolation(m);
    }
    const struct isob_bench *b = isob_bench_find(what);
    if (!b)
        die_usage("unknown benchmark '%s' (see isob list)", what);
    if (b->needs_mechanism && !m)
        die_usage("benchmark '%s' needs -m MECH", what);
    if (!b->needs_mechanism && m)
        die_usage("benchmark '%s' takes no mechanism", what);
    if (o.confine && !b->takes_confine)
        die_usage("benchmark '%s' takes no --confine", what);
    /* The microkernel benchmarks' options, each refused where it means nothing. */
    const struct { const char *name, *value; } own[] = {
        {"--protect", o.protect}, {"--payload", o.payloads}, {"--depth", o.depths},
        {"--variant", o.variants}, {"--workers", o.workers}, {"--slice", o.slices},
        {"--mode", o.modes}, {"--cpus", o.cpus}, {"--pid", o.pid},
        {"--reading", o.reading},
    };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        if (own[i].value && !isob_bench_takes(b, own[i].name)) {
            fprintf(stderr, "isob: error: benchmark '%s' takes no %s (see isob --help)\n", what,
                    own[i].name);
            return EXIT_USAGE;
        }
    }
    if (b->check) {
        char why[256] = "";
        if (b->check(&o, why, sizeof why) != 0) {
            fprintf(stderr, "isob: error: %s\n", why);
            return EXIT_USAGE;
        }
    }

    if (o.quick) {
        o.n = o.n / ISOB_QUICK_DIVISOR ? o.n / ISOB_QUICK_DIVISOR : 1;
        o.warmup /= ISOB_QUICK_DIVISOR;
        o.batch_k = o.batch_k / ISOB_QUICK_DIVISOR ? o.batch_k / ISOB_QUICK_DIVISOR : 1;
        o.empty_n = o.empty_n / ISOB_QUICK_DIVISOR ? o.empty_n / ISOB_QUICK_DIVISOR : 1;
    }
    if (b->check) {
        char why[256] = "";
        if (b->check(&o, why, sizeof why) != 0) {
            fprintf(stderr, "isob: error: %s: %s\n", b->name, why);
            return EXIT_USAGE;
        }
    }
    /* The Python side asks this before it opens a store, so that a value only
     * the benchmark can judge (a depth beyond the pid limit) is refused as
     * usage, with isob's own line, instead of failing every job of a run. */
    if (check_only)
        return 0;
    if (o.client_cpu == -2)
        o.client_cpu = isob_first_cpu();
    copts.cpu = o.client_cpu;

    struct isob_counter ctr;
    struct isob_bench_ctx ctx = {.ctr = &ctr, .mech = m, .opts = o, .out = stdout};
    if (isob_counter_init(&ctr, &copts) != 0) {
        fprintf(stderr, "isob: error: counter backend: %s\n", ctr.why);
        return EXIT_USAGE;
    }
    if (m) {
        char why[256] = "";
        if (m->probe(why, sizeof why) != 0) {
            emit_skip(&ctx, b->name, why);
            isob_counter_close(&ctr);
            return EXIT_SKIP;
        }
    }
    char pin_why[160];
    int rc = isob_place_self(ISOB_PLACE_SAME_CPU, o.client_cpu, pin_why, sizeof pin_why);
    if (rc) {
        /* Nothing measured here would be what its placement says. */
        isob_emit_result(&ctx, b->name, "{}", NULL, NULL, "failed", pin_why, NULL);
        isob_counter_close(&ctr);
        return 1;
    }
    rc = isob_measure_empty(&ctx);
    if (rc) {
        fprintf(stderr, "isob: error: measuring the empty region: %s\n", isob_strerror(rc));
        return 1;
    }
    isob_emit_header(&ctx, b->name);
    rc = b->run(&ctx);
    isob_counter_close(&ctr);
    if (rc) {
        fprintf(stderr, "isob: %s: %s\n", b->name, isob_strerror(rc));
        return 1;
    }
    return ctx.failed ? 1 : ctx.skipped ? EXIT_SKIP : 0;
}
