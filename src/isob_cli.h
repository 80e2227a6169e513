/* isob's command line: the options of every subcommand in one table
 * (src/isob_cli.c), from which getopt's list, the parsers, the options
 * part of `isob --help` and `isob --limits --json` are all made.  The
 * subcommands themselves are the table of src/isob.c. */
#ifndef ISOB_CLI_H
#define ISOB_CLI_H

#include <stdio.h>

#include "isobench/bench.h"
#include "isobench/scrape.h"

#define EXIT_USAGE 2
#define EXIT_SKIP 4

/* Most options the table may hold (the parser's record of which were given). */
#define ISOB_CLI_MAX_OPTIONS 48

/* The command line, parsed: what a subcommand's handler receives. */
struct isob_cli {
    struct isob_bench_opts o;
    struct isob_counter_opts copts;
    struct isob_scrape_opts sopts;
    const char *mech_name;     /* -m, or NULL */
    const char *target;        /* --target, or NULL */
    int json, version, limits, check_only;
    int help;                  /* --help was met: parsing stopped there */
    const char *const *args;   /* the arguments that are no option */
    int nargs;
    unsigned char given[ISOB_CLI_MAX_OPTIONS]; /* given[i]: option i of the table was passed */
};

/* What an option is to the subcommands. */
enum {
    ISOB_CLI_BENCH_OWN = 1u << 0, /* a benchmark refuses it unless its option table lists it */
    ISOB_CLI_SCRAPE = 1u << 1,    /* scrape's only: isolation and the benchmarks refuse it */
    ISOB_CLI_LIMITS = 1u << 2,    /* its bounds are printed by `isob --limits --json` */
    ISOB_CLI_HIDDEN = 1u << 3,    /* not in the options part of the usage (--json, --help, ...) */
};

struct isob_cli_option {
    const char *name;          /* long name without "--" */
    char short_name;           /* 'm' for -m, or 0 */
    const char *metavar;       /* its value in the usage ("N", "LIST"); NULL: it takes none */
    /* Stores arg (NULL for an option without a value) into c; a bad value
     * ends isob with one line and exit status 2. */
    void (*set)(struct isob_cli *c, const struct isob_cli_option *op, const char *arg);
    size_t field;              /* offset in struct isob_cli of the member set stores into */
    unsigned long long min, max; /* whole-number options: the bounds parse_count enforces */
    /* The usage text, a printf format of at most one conversion (%llu),
     * which prints dflt; a new line continues under the text.  NULL: the
     * option is described only by the benchmarks whose option tables list
     * it (their lines follow this text either way). */
    const char *help;
    unsigned long long dflt;
    unsigned flags;            /* ISOB_CLI_* */
};

extern const struct isob_cli_option isob_cli_options[];
extern const size_t isob_cli_noptions;

/* The defaults every run starts from. */
void isob_cli_init(struct isob_cli *c);
/* Parse argv into c (after isob_cli_init); a bad option ends isob with exit
 * status 2.  Stops at --help, with c->help set. */
void isob_cli_parse(struct isob_cli *c, int argc, char **argv);
/* 1 when an option with any of the ISOB_CLI_* bits in flags was given. */
int isob_cli_given_any(const struct isob_cli *c, unsigned flags);
/* The names of the options with flags, as "--a, --b and --c", into buf. */
void isob_cli_names(unsigned flags, char *buf, size_t len);

/* The options part of `isob --help`, from the table and from the option
 * tables of the benchmarks of include/isobench/bench_list.h. */
void isob_cli_usage_options(FILE *f);
/* `isob --limits --json`: the bounds of every numeric option. */
int isob_cli_limits_json(FILE *f);

/* "isob: error: FMT (see isob --help)" with arg, and exit status 2. */
__attribute__((noreturn)) void isob_die_usage(const char *fmt, const char *arg);

#endif
