/* isob's options, in one table: getopt's list, the parsers, the options
 * part of the usage and the bounds `isob --limits --json` prints are all
 * made from it, so that an option, its default and its bounds are each
 * written once.  An option only some benchmarks take is described by the
 * option tables of those benchmarks (struct isob_bench_option), which
 * `isob list --json` exports too. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "isob_cli.h"
#include "isobench/osprobe.h"

/* The bounds of the numeric options: the parsers below enforce them and
 * `isob --limits --json` prints them, so that the Python side checks a
 * command line with the same numbers before it stores a run. */
#define ISOB_MAX_COUNT 100000000ull  /* --n, --warmup, ...: large enough for any run */
#define ISOB_MIN_SIZE 64ull          /* --sizes: the kv benchmark's entry size */
#define ISOB_MAX_SIZE (16ull << 30)  /* --sizes: the largest store the kv benchmark maps */

/* Columns of the usage: an option's name, then its text from this column. */
#define USAGE_TEXT_COLUMN 22
#define USAGE_WIDTH 80

void isob_die_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "isob: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see isob --help)\n");
    exit(EXIT_USAGE);
}

/* Only plain ASCII digits count: strtoull alone would also take leading
 * blanks and a sign, which the Python side rejects. */
static int plain_digits(const char *s)
{
    return isdigit((unsigned char)s[0]);
}

/* A whole number within op's bounds. */
static unsigned long long parse_count(const struct isob_cli_option *op, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !plain_digits(s) || *end || v < op->min || v > op->max) {
        fprintf(stderr, "isob: error: --%s: '%s' is not a whole number from %llu to %llu\n",
                op->name, s, op->min, op->max);
        exit(EXIT_USAGE);
    }
    return v;
}

/* A count with an optional K, M or G suffix (powers of 1024): the number
 * and its shift into *shift, or -EINVAL when the text is no such count.
 * strtoull takes leading blanks and a sign: each caller says what it
 * refuses of those, and checks the range. */
static int parse_suffixed(const char *s, unsigned long long *v, unsigned *shift)
{
    char *end;
    errno = 0;
    *v = strtoull(s, &end, 10);
    *shift = 0;
    if (*end == 'K' || *end == 'k')
        *shift = 10, end++;
    else if (*end == 'M' || *end == 'm')
        *shift = 20, end++;
    else if (*end == 'G' || *end == 'g')
        *shift = 30, end++;
    return errno || end == s || *end ? -EINVAL : 0;
}

#define FIELD(c, op, type) ((type *)((char *)(c) + (op)->field))

static void set_count(struct isob_cli *c, const struct isob_cli_option *op, const char *arg)
{
    *FIELD(c, op, size_t) = (size_t)parse_count(op, arg);
}

static void set_unsigned(struct isob_cli *c, const struct isob_cli_option *op, const char *arg)
{
    *FIELD(c, op, unsigned) = (unsigned)parse_count(op, arg);
}

static void set_flag(struct isob_cli *c, const struct isob_cli_option *op, const char *arg)
{
    (void)arg;
    *FIELD(c, op, int) = 1;
}

static void set_str(struct isob_cli *c, const struct isob_cli_option *op, const char *arg)
{
    *FIELD(c, op, const char *) = arg;
}

static void set_mechanism(struct isob_cli *c, const struct isob_cli_option *op, const char *arg)
{
    (void)op;
    /* One process measures one mechanism; the last of several -m must not
     * silently be the only one measured. */
    if (c->mech_name) {
        fprintf(stderr, "isob: error: -m given twice ('%s', then '%s'): one mechanism per "
                "run; run isob once per mechanism (see isob --help)\n", c->mech_name, arg);
        exit(EXIT_USAGE);
    }
    c->mech_name = arg;
}

static void set_target(struct isob_cli *c, const struct isob_cli_option *op, const char *arg)
{
    (void)op;
    if (c->target)
        isob_die_usage("--target given twice: one target per run%s", "");
    c->target = arg;
}

static void set_placement(struct isob_cli *c, const struct isob_cli_option *op, const char *arg)
{
    (void)op;
    unsigned mask = 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        enum isob_placement p;
        if (isob_placement_parse(tok, &p) != 0)
            isob_die_usage("unknown placement '%s' (same-cpu, cross-cpu, unpinned)", tok);
        mask |= 1u << p;
    }
    if (!mask)
        isob_die_usage("--placement needs at least one placement%s", "");
    c->o.placements = mask;
    c->o.placement_given = 1;
}

static void set_cpu(struct isob_cli *c, const struct isob_cli_option *op, const char *arg)
{
    size_t cpu = strcmp(arg, "0") == 0 ? 0 : parse_count(op, arg);
    if (!isob_cpu_allowed((int)cpu))
        isob_die_usage("--cpu %s: not among the CPUs this process may use (its affinity mask)",
                       arg);
    c->o.client_cpu = (int)cpu;
}

static void set_counter(struct isob_cli *c, const struct isob_cli_option *op, const char *arg)
{
    (void)op;
    if (strcmp(arg, "perf") && strcmp(arg, ISOB_TIMER_NAME) && strcmp(arg, "clock"))
        isob_die_usage("--counter: unknown backend '%s' (perf, " ISOB_TIMER_NAME ", clock)", arg);
    c->copts.force = arg;
}

static void set_scope(struct isob_cli *c, const struct isob_cli_option *op, const char *arg)
{
    (void)op;
    if (strcmp(arg, "thread") == 0)
        c->copts.scope = ISOB_SCOPE_THREAD;
    else if (strcmp(arg, "cpu") == 0)
        c->copts.scope = ISOB_SCOPE_CPU;
    else
        isob_die_usage("--scope: '%s' is neither thread nor cpu", arg);
}

/* --sizes: comma-separated byte counts with an optional K, M or G suffix
 * (powers of 1024); each a multiple of 64, the kv benchmark's entry size. */
static void set_sizes(struct isob_cli *c, const struct isob_cli_option *op, const char *arg)
{
    (void)op;
    size_t n = 0;
    char buf[512];
    /* A longer list would be cut short without a word. */
    if (snprintf(buf, sizeof buf, "%s", arg) >= (int)sizeof buf)
        isob_die_usage("--sizes: the list is longer than %s characters", "511");
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        unsigned long long v;
        unsigned shift;
        if (parse_suffixed(tok, &v, &shift) != 0 || !plain_digits(tok) || v == 0 || v > ISOB_MAX_SIZE >> shift ||
            (v << shift) < ISOB_MIN_SIZE || ((v << shift) % ISOB_MIN_SIZE) != 0)
            isob_die_usage("--sizes: '%s' is not a multiple of 64 bytes from 64 to 16G", tok);
        if (n == ISOB_MAX_SIZES)
            isob_die_usage("--sizes: more than %s sizes", "32");
        c->o.sizes[n++] = (size_t)(v << shift);
    }
    if (!n)
        isob_die_usage("--sizes needs at least one size%s", "");
    c->o.nsizes = n;
}

/* --max-bytes: a byte count with an optional K, M or G suffix (powers of
 * 1024), from one page to 64 GiB. */
static void set_max_bytes(struct isob_cli *c, const struct isob_cli_option *op, const char *arg)
{
    unsigned long long v;
    unsigned shift;
    if (parse_suffixed(arg, &v, &shift) != 0 || arg[0] == '-' || v == 0 || v > (64ull << 30) >> shift ||
        (v << shift) < ISOB_SCAN_PAGE) {
        fprintf(stderr, "isob: error: --%s: '%s' is not a byte count from 4K to 64G\n", op->name,
                arg);
        exit(EXIT_USAGE);
    }
    c->sopts.budget = (uint64_t)v << shift;
}

static void set_seed(struct isob_cli *c, const struct isob_cli_option *op, const char *arg)
{
    (void)op;
    char *end;
    errno = 0;
    c->o.seed = strtoull(arg, &end, 0);
    if (errno || !plain_digits(arg) || *end)
        isob_die_usage("--seed: '%s' is not a number from 0 to 2^64-1", arg);
}

#define AT(member) offsetof(struct isob_cli, member)
#define COUNT(min, max) (min), (max)
#define NO_COUNT 0, 0
/* A whole-number option of struct isob_bench_opts, with the widest bounds. */
#define ANY_COUNT 1, ISOB_MAX_COUNT

/* In the order of the usage. */
const struct isob_cli_option isob_cli_options[] = {
    {"mechanism", 'm', "M", set_mechanism, 0, NO_COUNT,
     "mechanism to measure (see `isob list`); once: to measure\n"
     "several, run isob once per mechanism (a second -m is\n"
     "refused with exit status 2)", 0, 0},
    {"n", 0, "N", set_count, AT(o.n), ANY_COUNT, "per-iteration samples per result [%llu]",
     ISOB_DEFAULT_N, ISOB_CLI_LIMITS},
    {"warmup", 0, "N", set_count, AT(o.warmup), ANY_COUNT,
     "calls before measuring, not recorded [%llu]", ISOB_DEFAULT_WARMUP, ISOB_CLI_LIMITS},
    {"batch-k", 0, "K", set_count, AT(o.batch_k), ANY_COUNT,
     "K of the batched estimator (K vs 2K iterations) [%llu]", ISOB_DEFAULT_BATCH_K,
     ISOB_CLI_LIMITS},
    {"batch-reps", 0, "R", set_count, AT(o.batch_reps), ANY_COUNT,
     "(K, 2K) pairs; the estimate is their median [%llu]", ISOB_DEFAULT_BATCH_REPS,
     ISOB_CLI_LIMITS},
    {"empty-n", 0, "N", set_count, AT(o.empty_n), ANY_COUNT,
     "samples of the empty region [%llu]", ISOB_DEFAULT_EMPTY_N, ISOB_CLI_LIMITS},
    {"quick", 0, NULL, set_flag, AT(o.quick), NO_COUNT,
     "divide n, warm-up, K and empty-n by %llu", ISOB_QUICK_DIVISOR, 0},
    {"placement", 0, "LIST", set_placement, 0, NO_COUNT,
     "same-cpu,cross-cpu,unpinned [same-cpu,cross-cpu]", 0, 0},
    {"cpu", 0, "C", set_cpu, 0, ANY_COUNT,
     "CPU of the untrusted side, one this process may use\n"
     "(its affinity mask) [first allowed CPU]; cross-cpu puts\n"
     "the server on the next allowed CPU", 0, 0},
    {"counter", 0, "B", set_counter, 0, NO_COUNT,
     "perf, " ISOB_TIMER_NAME " or clock [best available]", 0, 0},
    {"scope", 0, "S", set_scope, 0, NO_COUNT, "perf counting scope: thread or cpu [thread]", 0,
     0},
    {"primitive", 0, "P", set_str, AT(o.param), NO_COUNT,
     "oslat: a list of primitives or families (see isob list);\n"
     "lwc-switch: variants, e.g. lwc,process-futex [all]", 0, 0},
    {"confine", 0, "C", set_str, AT(o.confine), NO_COUNT,
     "oslat only: confinements C or C:VARIANT, comma-separated\n"
     "(see isob list) [none]", 0, 0},
    {"sizes", 0, "LIST", set_sizes, 0, NO_COUNT,
     "kv and memops: data or block sizes, e.g. 4K,1M,256M (multiples\n"
     "of 64 B) [kv: 4K to 256M by 4, --quick: to 16M;\n"
     "memops: 100M to 1000M by 100M, --quick: 64M,256M]", 0, 0},
    {"protect", 0, "LIST", set_str, AT(o.protect), NO_COUNT, NULL, 0, ISOB_CLI_BENCH_OWN},
    {"payload", 0, "LIST", set_str, AT(o.payloads), NO_COUNT, NULL, 0, ISOB_CLI_BENCH_OWN},
    {"depth", 0, "LIST", set_str, AT(o.depths), NO_COUNT, NULL, 0, ISOB_CLI_BENCH_OWN},
    {"variant", 0, "LIST", set_str, AT(o.variants), NO_COUNT, NULL, 0, ISOB_CLI_BENCH_OWN},
    {"workers", 0, "LIST", set_str, AT(o.workers), NO_COUNT, NULL, 0, ISOB_CLI_BENCH_OWN},
    {"slice", 0, "LIST", set_str, AT(o.slices), NO_COUNT, NULL, 0, ISOB_CLI_BENCH_OWN},
    {"mode", 0, "LIST", set_str, AT(o.modes), NO_COUNT, NULL, 0, ISOB_CLI_BENCH_OWN},
    {"cpus", 0, "LIST", set_str, AT(o.cpus), NO_COUNT, NULL, 0, ISOB_CLI_BENCH_OWN},
    {"pid", 0, "PID", set_str, AT(o.pid), NO_COUNT, NULL, 0, ISOB_CLI_BENCH_OWN},
    {"check", 0, NULL, set_flag, AT(check_only), NO_COUNT,
     "check the benchmark's options as a run would, measure\n"
     "nothing: exit 0, or 2 with the reason", 0, 0},
    {"limit", 0, "N", set_count, AT(o.limit), ANY_COUNT,
     "scale only: most compartments to create [1000]", 0, 0},
    {"reading", 0, "LIST", set_str, AT(o.reading), NO_COUNT, NULL, 0, ISOB_CLI_BENCH_OWN},
    {"iterations", 0, "N", set_count, AT(o.iterations), ANY_COUNT,
     "kv: measured passes per size [enough for --n gets, at least 3];\n"
     "cpuwork: iterations per trial [1e8, Morello's; --quick: 1e6]", 0, ISOB_CLI_LIMITS},
    {"seed", 0, "S", set_seed, 0, NO_COUNT,
     "kv only: seed of keys, values and read orders [%llu]", ISOB_DEFAULT_SEED, 0},
    {"target", 0, "T", set_target, 0, NO_COUNT, NULL, 0, ISOB_CLI_SCRAPE | ISOB_CLI_HIDDEN},
    {"max-bytes", 0, "B", set_max_bytes, 0, NO_COUNT,
     "scrape only: bytes each reader may read of the target, with\n"
     "an optional K, M or G suffix [1G]", 0, ISOB_CLI_SCRAPE},
    {"ptrace-pages", 0, "N", set_unsigned, AT(sopts.ptrace_pages), ANY_COUNT,
     "scrape only: pages PEEKDATA reads at the start of each\n"
     "mapping, besides the canary's page [%llu]", ISOB_SCAN_DEFAULT_PTRACE_PAGES,
     ISOB_CLI_SCRAPE},
    {"json", 0, NULL, set_flag, AT(json), NO_COUNT, NULL, 0, ISOB_CLI_HIDDEN},
    {"version", 0, NULL, set_flag, AT(version), NO_COUNT, NULL, 0, ISOB_CLI_HIDDEN},
    {"limits", 0, NULL, set_flag, AT(limits), NO_COUNT, NULL, 0, ISOB_CLI_HIDDEN},
    {"help", 'h', NULL, set_flag, AT(help), NO_COUNT, NULL, 0, ISOB_CLI_HIDDEN},
};
const size_t isob_cli_noptions = sizeof isob_cli_options / sizeof isob_cli_options[0];
_Static_assert(sizeof isob_cli_options / sizeof isob_cli_options[0] <= ISOB_CLI_MAX_OPTIONS,
               "struct isob_cli's given[] holds a flag per option");

void isob_cli_init(struct isob_cli *c)
{
    *c = (struct isob_cli){
        .o = {
            .n = ISOB_DEFAULT_N, .warmup = ISOB_DEFAULT_WARMUP, .batch_k = ISOB_DEFAULT_BATCH_K,
            .batch_reps = ISOB_DEFAULT_BATCH_REPS, .empty_n = ISOB_DEFAULT_EMPTY_N,
            .placements = (1u << ISOB_PLACE_SAME_CPU) | (1u << ISOB_PLACE_CROSS_CPU),
            .client_cpu = -2, .seed = ISOB_DEFAULT_SEED,
        },
        .copts = {.force = NULL, .scope = ISOB_SCOPE_THREAD, .cpu = -1},
    };
}

/* getopt's values: a short name, or 256 + the option's index. */
#define LONG_VALUE_BASE 256

void isob_cli_parse(struct isob_cli *c, int argc, char **argv)
{
    static struct option longopts[ISOB_CLI_MAX_OPTIONS + 1];
    char shortopts[2 * ISOB_CLI_MAX_OPTIONS + 1] = "";
    size_t ns = 0;
    for (size_t i = 0; i < isob_cli_noptions; i++) {
        const struct isob_cli_option *op = &isob_cli_options[i];
        int has_arg = op->metavar ? required_argument : no_argument;
        longopts[i] = (struct option){op->name, has_arg, NULL,
                                      op->short_name ? op->short_name : LONG_VALUE_BASE + (int)i};
        if (op->short_name) {
            shortopts[ns++] = op->short_name;
            if (op->metavar)
                shortopts[ns++] = ':';
        }
    }
    longopts[isob_cli_noptions] = (struct option){0, 0, 0, 0};
    shortopts[ns] = '\0';
    int opt;
    opterr = 0;
    while (!c->help && (opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        size_t i = isob_cli_noptions;
        for (size_t k = 0; k < isob_cli_noptions; k++)
            if (opt == longopts[k].val)
                i = k;
        if (opt == ':')
            isob_die_usage("option %s needs a value", argv[optind - 1]);
        if (i == isob_cli_noptions)
            isob_die_usage("unknown option '%s'", argv[optind - 1]);
        isob_cli_options[i].set(c, &isob_cli_options[i], optarg);
        c->given[i] = 1;
    }
    c->args = (const char *const *)argv + optind;
    c->nargs = argc - optind;
}

int isob_cli_given_any(const struct isob_cli *c, unsigned flags)
{
    for (size_t i = 0; i < isob_cli_noptions; i++)
        if (c->given[i] && (isob_cli_options[i].flags & flags))
            return 1;
    return 0;
}

void isob_cli_names(unsigned flags, char *buf, size_t len)
{
    size_t n = 0, k = 0;
    for (size_t i = 0; i < isob_cli_noptions; i++)
        n += (isob_cli_options[i].flags & flags) != 0;
    buf[0] = '\0';
    for (size_t i = 0; i < isob_cli_noptions; i++) {
        if (!(isob_cli_options[i].flags & flags))
            continue;
        size_t at = strlen(buf);
        snprintf(buf + at, len - at, "%s--%s", k == 0 ? "" : k + 1 == n ? " and " : ", ",
                 isob_cli_options[i].name);
        k++;
    }
}

/* text, its new lines continued at the text column. */
static void put_indented(FILE *f, const char *text)
{
    for (const char *p = text; *p; p++) {
        fputc(*p, f);
        if (*p == '\n')
            fprintf(f, "%*s", USAGE_TEXT_COLUMN, "");
    }
}

/* text folded at the usage's width, every line from the text column (the
 * cursor stands at that column already). */
static void put_folded(FILE *f, const char *text)
{
    size_t room = USAGE_WIDTH - USAGE_TEXT_COLUMN, used = 0;
    while (*text) {
        size_t word = strcspn(text, " ");
        if (used && used + 1 + word > room) {
            fprintf(f, "\n%*s", USAGE_TEXT_COLUMN, "");
            used = 0;
        } else if (used) {
            fputc(' ', f);
            used++;
        }
        fwrite(text, 1, word, f);
        used += word;
        text += word;
        text += strspn(text, " ");
    }
}

void isob_cli_usage_options(FILE *f)
{
    fprintf(f, "options (defaults in brackets):\n");
    for (size_t i = 0; i < isob_cli_noptions; i++) {
        const struct isob_cli_option *op = &isob_cli_options[i];
        if (op->flags & ISOB_CLI_HIDDEN)
            continue;
        char name[48], text[512], opt[48];
        if (op->short_name)
            snprintf(name, sizeof name, "-%c, --%s %s", op->short_name, op->name, op->metavar);
        else
            snprintf(name, sizeof name, "--%s%s%s", op->name, op->metavar ? " " : "",
                     op->metavar ? op->metavar : "");
        fprintf(f, "  %-*s", USAGE_TEXT_COLUMN - 2, name);
        int lines = 0;
        if (op->help) {
            snprintf(text, sizeof text, op->help, op->dflt);
            put_indented(f, text);
            lines++;
        }
        /* Each benchmark that lists the option: its own words and default. */
        snprintf(opt, sizeof opt, "--%s", op->name);
        for (const struct isob_bench *const *b = isob_benches; *b; b++) {
            for (const struct isob_bench_option *bo = (*b)->options; bo && bo->name; bo++) {
                if (strcmp(bo->name, opt) != 0)
                    continue;
                if (lines++)
                    fprintf(f, "\n%*s", USAGE_TEXT_COLUMN, "");
                snprintf(text, sizeof text, "%s: %s; %s [%s]", (*b)->name, bo->summary, bo->values,
                         bo->dflt);
                put_folded(f, text);
            }
        }
        fputc('\n', f);
    }
}

int isob_cli_limits_json(FILE *f)
{
    char buf[64];
    struct isob_jw w;
    isob_jw_begin(&w, f, "limits");
    isob_jw_obj(&w, "options");
    for (size_t i = 0; i < isob_cli_noptions; i++) {
        const struct isob_cli_option *op = &isob_cli_options[i];
        if (!(op->flags & ISOB_CLI_LIMITS))
            continue;
        isob_jw_obj(&w, op->name);
        isob_jw_int(&w, "min", (long long)op->min);
        isob_jw_int(&w, "max", (long long)op->max);
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
