/* isob: the native driver.  Measures one benchmark on one mechanism and
 * prints JSON lines (see include/isobench/bench.h for the schema).
 *
 * The subcommands are one table (commands[] below): each with its line of
 * the usage and its handler.  Their options are the table of
 * src/isob_cli.c; a benchmark is any name of include/isobench/bench_list.h.
 *
 * Exit status: 0 all results ok, 1 a result failed, 2 bad usage,
 * 4 skipped (the mechanism cannot run here; kselftest's SKIP code). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isob_cli.h"
#include "isob_config.h"
#include "isobench/bench.h"
#include "isobench/confine.h"
#include "isobench/isolation.h"
#include "isobench/loadgen.h"
#include "isobench/scrape.h"
#include "isobench/serve.h"

/* ---- isob list ---------------------------------------------------------- */

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

static void list_json_mechanisms(struct isob_jw *w)
{
    isob_jw_arr(w, "mechanisms");
    for (const struct isob_mechanism *const *m = isob_mechanisms; *m; m++) {
        if (!isob_mechanism_listed(*m))
            continue;
        char why[256] = "";
        int rc = (*m)->probe(why, sizeof why);
        isob_jw_obj(w, NULL);
        isob_jw_str(w, "name", (*m)->name);
        isob_jw_str(w, "summary", (*m)->summary);
        isob_jw_bool(w, "available", rc == 0);
        isob_jw_str(w, "reason", rc == 0 ? NULL : why);
        props_json(w, (*m)->props);
        isob_jw_close(w, '}');
    }
    isob_jw_close(w, ']');
}

static void list_json_benchmarks(struct isob_jw *w)
{
    isob_jw_arr(w, "benchmarks");
    for (const struct isob_bench *const *b = isob_benches; *b; b++) {
        isob_jw_obj(w, NULL);
        isob_jw_str(w, "name", (*b)->name);
        isob_jw_str(w, "summary", (*b)->summary);
        isob_jw_bool(w, "needs_mechanism", (*b)->needs_mechanism);
        isob_jw_bool(w, "takes_confine", (*b)->takes_confine);
        if ((*b)->describe)
            (*b)->describe(w);
        if ((*b)->options) {
            isob_jw_arr(w, "options");
            for (const struct isob_bench_option *op = (*b)->options; op->name; op++) {
                isob_jw_obj(w, NULL);
                isob_jw_str(w, "name", op->name);
                isob_jw_str(w, "values", op->values);
                isob_jw_str(w, "default", op->dflt);
                isob_jw_str(w, "summary", op->summary);
                isob_jw_close(w, '}');
            }
            isob_jw_close(w, ']');
        }
        isob_jw_close(w, '}');
    }
    isob_jw_close(w, ']');
}

static void list_json_confinements(struct isob_jw *w)
{
    isob_jw_arr(w, "confinements");
    for (const struct isob_confinement *const *c = isob_confinements; *c; c++) {
        char why[256] = "";
        int rc = (*c)->probe(why, sizeof why);
        isob_jw_obj(w, NULL);
        isob_jw_str(w, "name", (*c)->name);
        isob_jw_str(w, "summary", (*c)->summary);
        isob_jw_str(w, "threat", (*c)->threat);
        isob_jw_arr(w, "variants");
        for (const char *const *v = (*c)->variants; *v; v++)
            isob_jw_str(w, NULL, *v);
        isob_jw_close(w, ']');
        isob_jw_bool(w, "available", rc == 0);
        isob_jw_str(w, "reason", rc == 0 ? NULL : why);
        isob_jw_close(w, '}');
    }
    isob_jw_close(w, ']');
}

static void list_text(void)
{
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
}

static int cmd_list(struct isob_cli *c)
{
    if (!c->json) {
        list_text();
        return 0;
    }
    struct isob_jw w;
    isob_jw_begin(&w, stdout, "list");
    list_json_mechanisms(&w);
    list_json_benchmarks(&w);
    list_json_confinements(&w);
    isob_jw_end(&w);
    return 0;
}

/* ---- the other subcommands ---------------------------------------------- */

/* The mechanism of -m, or NULL when none was given; an unknown one is bad usage. */
static const struct isob_mechanism *cli_mechanism(const struct isob_cli *c)
{
    if (!c->mech_name)
        return NULL;
    const struct isob_mechanism *m = isob_mechanism_find(c->mech_name);
    if (!m)
        isob_die_usage("unknown mechanism '%s' (see isob list)", c->mech_name);
    return m;
}

/* isolation and the benchmarks: scrape's options mean nothing to them. */
static void refuse_scrape_options(const struct isob_cli *c)
{
    char names[128];
    if (!isob_cli_given_any(c, ISOB_CLI_SCRAPE))
        return;
    isob_cli_names(ISOB_CLI_SCRAPE, names, sizeof names);
    isob_die_usage("%s are options of scrape only", names);
}

static int cmd_isolation(struct isob_cli *c)
{
    refuse_scrape_options(c);
    const struct isob_mechanism *m = cli_mechanism(c);
    if (!m)
        isob_die_usage("isolation needs -m MECH%s", "");
    struct isob_isolation r;
    isob_isolation_matrix(m, &r);
    isob_isolation_emit(stdout, m, &r);
    if (strcmp(r.verdict, "skipped") == 0)
        return EXIT_SKIP;
    /* A mechanism whose own claim is contradicted, or a test that broke. */
    return strcmp(r.verdict, "leaked") == 0 || strcmp(r.verdict, "failed") == 0;
}

static int cmd_scrape(struct isob_cli *c)
{
    if (c->mech_name)
        isob_die_usage("scrape takes --target, not -m ('%s')", c->mech_name);
    if (!c->target)
        isob_die_usage("scrape needs --target T (plain, pipe-writer, pipe-reader or a mechanism)%s", "");
    struct isob_scrape_report rep;
    if (isob_scrape_run(c->target, &c->sopts, &rep) != 0)
        isob_die_usage("unknown scrape target '%s' (plain, pipe-writer, pipe-reader, or a mechanism of "
                       "isob list)", c->target);
    isob_scrape_emit(stdout, &rep);
    isob_scrape_report_free(&rep);
    if (strcmp(rep.status, "skipped") == 0)
        return EXIT_SKIP;
    if (strcmp(rep.status, "ok") != 0) {
        fprintf(stderr, "isob: scrape %s: %s\n", c->target, rep.reason);
        return 1;
    }
    return 0;
}

static int cmd_version(struct isob_cli *c)
{
    if (c->json) {
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

static int cmd_limits(struct isob_cli *c)
{
    if (!c->json)
        isob_die_usage("--limits is only printed as JSON: add --json%s", "");
    return isob_cli_limits_json(stdout);
}

/* ---- isob BENCH --------------------------------------------------------- */

/* The options b refuses: a mechanism or --confine it takes none of, an
 * option of another benchmark's own, a value its check() refuses.  0, or
 * EXIT_USAGE after one line on stderr. */
static int bench_refusals(const struct isob_bench *b, const struct isob_mechanism *m,
                          const struct isob_cli *c)
{
    if (b->needs_mechanism && !m)
        isob_die_usage("benchmark '%s' needs -m MECH", b->name);
    if (!b->needs_mechanism && m)
        isob_die_usage("benchmark '%s' takes no mechanism", b->name);
    if (c->o.confine && !b->takes_confine)
        isob_die_usage("benchmark '%s' takes no --confine", b->name);
    for (size_t i = 0; i < isob_cli_noptions; i++) {
        char opt[48];
        if (!c->given[i] || !(isob_cli_options[i].flags & ISOB_CLI_BENCH_OWN))
            continue;
        snprintf(opt, sizeof opt, "--%s", isob_cli_options[i].name);
        if (!isob_bench_takes(b, opt)) {
            fprintf(stderr, "isob: error: benchmark '%s' takes no %s (see isob --help)\n", b->name,
                    opt);
            return EXIT_USAGE;
        }
    }
    if (b->check) {
        char why[256] = "";
        if (b->check(&c->o, why, sizeof why) != 0) {
            fprintf(stderr, "isob: error: %s\n", why);
            return EXIT_USAGE;
        }
    }
    return 0;
}

/* --quick: a quarter of the work (at least one of each count but the warm-up). */
static void quicken(struct isob_bench_opts *o)
{
    o->n = o->n / ISOB_QUICK_DIVISOR ? o->n / ISOB_QUICK_DIVISOR : 1;
    o->warmup /= ISOB_QUICK_DIVISOR;
    o->batch_k = o->batch_k / ISOB_QUICK_DIVISOR ? o->batch_k / ISOB_QUICK_DIVISOR : 1;
    o->empty_n = o->empty_n / ISOB_QUICK_DIVISOR ? o->empty_n / ISOB_QUICK_DIVISOR : 1;
}

/* Measure b on m (NULL for a benchmark without one) with ctx's options
 * and counter: the empty region, the header, then the benchmark's lines. */
static int bench_measure(const struct isob_bench *b, struct isob_bench_ctx *ctx)
{
    if (ctx->mech) {
        char why[256] = "";
        if (ctx->mech->probe(why, sizeof why) != 0) {
            isob_emit_result(ctx, b->name, "{}", NULL, NULL, "skipped", why, NULL);
            return EXIT_SKIP;
        }
    }
    char pin_why[160];
    int rc = isob_place_self(ISOB_PLACE_SAME_CPU, ctx->opts.client_cpu, pin_why, sizeof pin_why);
    if (rc) {
        /* Nothing measured here would be what its placement says. */
        isob_emit_result(ctx, b->name, "{}", NULL, NULL, "failed", pin_why, NULL);
        return 1;
    }
    rc = isob_measure_empty(ctx);
    if (rc) {
        fprintf(stderr, "isob: error: measuring the empty region: %s\n", isob_strerror(rc));
        return 1;
    }
    isob_emit_header(ctx, b->name);
    rc = b->run(ctx);
    if (rc) {
        fprintf(stderr, "isob: %s: %s\n", b->name, isob_strerror(rc));
        return 1;
    }
    return ctx->failed ? 1 : ctx->skipped ? EXIT_SKIP : 0;
}

static int cmd_bench(struct isob_cli *c)
{
    refuse_scrape_options(c);
    const struct isob_mechanism *m = cli_mechanism(c);
    const struct isob_bench *b = isob_bench_find(c->args[0]);
    if (!b)
        isob_die_usage("unknown benchmark '%s' (see isob list)", c->args[0]);
    int rc = bench_refusals(b, m, c);
    if (rc)
        return rc;
    if (c->o.quick)
        quicken(&c->o);
    if (b->check) {
        char why[256] = "";
        if (b->check(&c->o, why, sizeof why) != 0) {
            fprintf(stderr, "isob: error: %s: %s\n", b->name, why);
            return EXIT_USAGE;
        }
    }
    /* The Python side asks this before it opens a store, so that a value only
     * the benchmark can judge (a depth beyond the pid limit) is refused as
     * usage, with isob's own line, instead of failing every job of a run. */
    if (c->check_only)
        return 0;
    if (c->o.client_cpu == -2)
        c->o.client_cpu = isob_first_cpu();
    c->copts.cpu = c->o.client_cpu;

    struct isob_counter ctr;
    struct isob_bench_ctx ctx = {.ctr = &ctr, .mech = m, .opts = c->o, .out = stdout};
    if (isob_counter_init(&ctr, &c->copts) != 0) {
        fprintf(stderr, "isob: error: counter backend: %s\n", ctr.why);
        return EXIT_USAGE;
    }
    rc = bench_measure(b, &ctx);
    isob_counter_close(&ctr);
    return rc;
}

/* ---- the subcommands ---------------------------------------------------- */

struct isob_command {
    const char *name;          /* the word after isob; "--x": chosen by the flag --x */
    const char *synopsis;      /* its line of the usage ... */
    const char *summary;       /* ... and what it does; a new line continues under it */
    /* The handler of the parsed command line, or ... */
    int (*handler)(struct isob_cli *c);
    /* ... a subcommand that parses its own arguments (argv[0] is its name). */
    int (*own_main)(int argc, char **argv);
};

/* The usage's columns: synopses after "usage: ", summaries from this one. */
#define SYNOPSIS_WIDTH 34
#define SUMMARY_COLUMN (7 + SYNOPSIS_WIDTH)

static const struct isob_command bench_command = {
    "BENCH", "isob BENCH [-m MECH] [options]", "measure; JSON lines on stdout", cmd_bench, NULL,
};

static const struct isob_command commands[] = {
    {"list", "isob list [--json]", "mechanisms and benchmarks", cmd_list, NULL},
    {"isolation", "isob isolation -m MECH", "the isolation matrix of one mechanism (JSON)",
     cmd_isolation, NULL},
    {"scrape", "isob scrape --target T",
     "outside readers against a canary in T (JSON;\n"
     "T: plain, pipe-writer, pipe-reader or a mechanism)", cmd_scrape, NULL},
    {"serve", "isob serve -m MECH [options]", "memcached text-protocol server over MECH", NULL,
     isob_serve_main},
    {"loadgen", "isob loadgen --port P [options]", "load a memcached or HTTP server (JSON)", NULL,
     isob_loadgen_main},
    {"tlsload", "isob tlsload --port P [options]", "full TLS handshakes against serve --tls (JSON)",
     NULL, isob_tlsload_main},
    {"--version", "isob --version [--json]", "version, compiler and flags", cmd_version, NULL},
    {"--limits", "isob --limits --json", "the bounds of every numeric option", cmd_limits, NULL},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage_command(FILE *f, const struct isob_command *cmd, int first)
{
    fprintf(f, "%s%-*s", first ? "usage: " : "       ", SYNOPSIS_WIDTH, cmd->synopsis);
    for (const char *p = cmd->summary; *p; p++) {
        fputc(*p, f);
        if (*p == '\n')
            fprintf(f, "%*s", SUMMARY_COLUMN, "");
    }
    fputc('\n', f);
}

static void usage(FILE *f)
{
    usage_command(f, &bench_command, 1);
    for (size_t i = 0; i < NCOMMANDS; i++)
        usage_command(f, &commands[i], 0);
    fputc('\n', f);
    isob_cli_usage_options(f);
}

static const struct isob_command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* The subcommand of a parsed command line: a flag's (--version, --limits),
 * a named one, or else a benchmark. */
static const struct isob_command *choose_command(const struct isob_cli *c)
{
    if (c->version)
        return find_command("--version");
    if (c->limits)
        return find_command("--limits");
    if (c->nargs == 0) {
        usage(stderr);
        exit(EXIT_USAGE);
    }
    if (c->nargs > 1)
        isob_die_usage("unexpected argument '%s'", c->args[1]);
    /* A flag's subcommand is no word: `isob -- --version` names no benchmark. */
    const struct isob_command *cmd = c->args[0][0] == '-' ? NULL : find_command(c->args[0]);
    return cmd && cmd->handler ? cmd : &bench_command;
}

int main(int argc, char **argv)
{
    for (size_t i = 0; argc > 1 && i < NCOMMANDS; i++)
        if (commands[i].own_main && strcmp(argv[1], commands[i].name) == 0)
            return commands[i].own_main(argc - 1, argv + 1);
    struct isob_cli c;
    isob_cli_init(&c);
    isob_cli_parse(&c, argc, argv);
    if (c.help) {
        usage(stdout);
        return 0;
    }
    return choose_command(&c)->handler(&c);
}
