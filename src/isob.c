/* isob: the native driver.  Measures one benchmark on one mechanism and
 * prints JSON lines (see include/isobench/bench.h for the schema).
 *
 * Exit status: 0 all results ok, 1 a result failed, 2 bad usage,
 * 4 skipped (the mechanism cannot run here; kselftest's SKIP code). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isob_config.h"
#include "isobench/bench.h"
#include "isobench/isolation.h"
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
        "       isob serve -m MECH [options]      memcached text-protocol server over MECH\n"
        "       isob loadgen --port P [options]   load a memcached or HTTP server (JSON)\n"
        "       isob --version [--json]           version, compiler and flags\n"
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
        "  --counter B         perf, tsc or clock [best available]\n"
        "  --scope S           perf counting scope: thread or cpu [thread]\n"
        "  --primitive P       pingpong only: futex, pipe or socket [all]\n"
        "                      (lwc-switch: variants, e.g. lwc,process-futex [all])\n"
        "  --sizes LIST        kv only: data sizes, e.g. 4K,1M,256M (multiples of 64 B)\n"
        "                      [4K to 256M by 4; --quick: to 16M]\n"
        "  --iterations N      kv only: measured passes per size [enough for --n gets, at least 3]\n"
        "  --seed S            kv only: seed of keys, values and read orders [%d]\n",
        ISOB_DEFAULT_N, ISOB_DEFAULT_WARMUP, ISOB_DEFAULT_BATCH_K, ISOB_DEFAULT_BATCH_REPS,
        ISOB_DEFAULT_EMPTY_N, ISOB_QUICK_DIVISOR, ISOB_DEFAULT_SEED);
}

static void die_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "isob: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see isob --help)\n");
    exit(EXIT_USAGE);
}

static size_t parse_count(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v == 0 || v > 100000000ull || s[0] == '-') {
        fprintf(stderr, "isob: error: %s: '%s' is not a whole number from 1 to 100000000\n", opt, s);
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
    snprintf(buf, sizeof buf, "%s", s);
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
        if (errno || end == tok || *end || tok[0] == '-' || v == 0 || v > (16ull << 30) >> shift ||
            ((v << shift) % 64) != 0)
            die_usage("--sizes: '%s' is not a multiple of 64 bytes from 64 to 16G", tok);
        if (n == ISOB_MAX_SIZES)
            die_usage("--sizes: more than %s sizes", "32");
        out[n++] = (size_t)(v << shift);
    }
    if (!n)
        die_usage("--sizes needs at least one size%s", "");
    return n;
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
    isob_emit_result(ctx, bench, "{}", NULL, -1, "skipped", why, NULL);
}

enum { OPT_N = 256, OPT_WARMUP, OPT_BATCH_K, OPT_BATCH_REPS, OPT_EMPTY_N, OPT_QUICK,
       OPT_PLACEMENT, OPT_CPU, OPT_COUNTER, OPT_SCOPE, OPT_PRIMITIVE, OPT_JSON, OPT_VERSION,
       OPT_SIZES, OPT_ITERATIONS, OPT_SEED };

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
        {"seed", required_argument, 0, OPT_SEED}, {0, 0, 0, 0},
    };
    struct isob_bench_opts o = {
        .n = ISOB_DEFAULT_N, .warmup = ISOB_DEFAULT_WARMUP, .batch_k = ISOB_DEFAULT_BATCH_K,
        .batch_reps = ISOB_DEFAULT_BATCH_REPS, .empty_n = ISOB_DEFAULT_EMPTY_N,
        .placements = (1u << ISOB_PLACE_SAME_CPU) | (1u << ISOB_PLACE_CROSS_CPU),
        .client_cpu = -2, .seed = ISOB_DEFAULT_SEED,
    };
    struct isob_counter_opts copts = {.force = NULL, .scope = ISOB_SCOPE_THREAD, .cpu = -1};
    const char *mech_name = NULL;
    int json = 0, version = 0, opt;
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
            if (strcmp(optarg, "perf") && strcmp(optarg, "tsc") && strcmp(optarg, "clock"))
                die_usage("--counter: unknown backend '%s' (perf, tsc, clock)", optarg);
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
        case OPT_SIZES: o.nsizes = parse_sizes(optarg, o.sizes); break;
        case OPT_ITERATIONS: o.iterations = parse_count("--iterations", optarg); break;
        case OPT_SEED: {
            char *end;
            errno = 0;
            o.seed = strtoull(optarg, &end, 0);
            if (errno || end == optarg || *end || optarg[0] == '-')
                die_usage("--seed: '%s' is not a number from 0 to 2^64-1", optarg);
            break;
        }
        case OPT_JSON: json = 1; break;
        case OPT_VERSION: version = 1; break;
        case 'h': usage(stdout); return 0;
        case ':': die_usage("option %s needs a value", argv[optind - 1]); break;
        default: die_usage("unknown option '%s'", argv[optind - 1]); break;
        }
    }
    if (version)
        return cmd_version(json);
    if (optind >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (optind + 1 < argc)
        die_usage("unexpected argument '%s'", argv[optind + 1]);
    const char *what = argv[optind];
    if (strcmp(what, "list") == 0)
        return cmd_list(json);

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

    if (o.quick) {
        o.n = o.n / ISOB_QUICK_DIVISOR ? o.n / ISOB_QUICK_DIVISOR : 1;
        o.warmup /= ISOB_QUICK_DIVISOR;
        o.batch_k = o.batch_k / ISOB_QUICK_DIVISOR ? o.batch_k / ISOB_QUICK_DIVISOR : 1;
        o.empty_n = o.empty_n / ISOB_QUICK_DIVISOR ? o.empty_n / ISOB_QUICK_DIVISOR : 1;
    }
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
        isob_emit_result(&ctx, b->name, "{}", NULL, -1, "failed", pin_why, NULL);
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
    return ctx.failed ? 1 : 0;
}
