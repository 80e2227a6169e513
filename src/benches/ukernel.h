/* What the microkernel-style benchmarks share (docs/microkernel.md): the
 * IPC matrix of `pingpong`, `delegate` (memory handed down a chain, then
 * revoked) and `sched` (many workers, each with a fixed amount of work).
 *
 *   uk_sum, uk_fill      a position-weighted checksum and the pattern it checks
 *   UK_EACH              per-iteration samples with a time budget, PRE and POST
 *                        outside the measured region
 *   uk_protect_*         --protect: a confinement of src/confine/ applied to a
 *                        measuring process (and so to every process it forks),
 *                        verified in force, or every cell skipped with the reason
 *   uk_run_confined      the measuring process under one protection, with the
 *                        parent unconfined to report a death or a hang
 *   uk_check_tasks/_fds  depth or N beyond the pid or descriptor limits,
 *                        refused before anything runs
 *   uk_list_*            the comma-separated option lists */
#ifndef ISOB_UKERNEL_H
#define ISOB_UKERNEL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "isobench/bench.h"
#include "isobench/confine.h"

/* Per-iteration samples a budgeted loop takes at least, budget or not. */
#define UK_MIN_SAMPLES 5
/* A batched estimate needs at least this K to be worth its time. */
#define UK_MIN_BATCH_K 16
/* Entries of a numeric option list, at most. */
#define UK_MAX_LIST 16
/* Protections of one run, at most (none included). */
#define UK_MAX_PROTECT 8
/* How long a helper process (server, hop, worker) gets to leave before it is killed. */
#define UK_REAP_MS 2000

/* ---- checksums ---------------------------------------------------------- */

/* The pattern's word at absolute word index i of a region seeded with seed
 * (splitmix64): every word differs, so a share mapped at the wrong offset
 * or a byte copied twice changes the sum. */
static inline uint64_t uk_word(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Fill len bytes at p with the pattern, p's first byte being byte
 * 8 * first_word of the region. */
void uk_fill(void *p, size_t len, uint64_t seed, uint64_t first_word);

/* The checksum of len bytes at p, which start at word first_word of their
 * region: the sum of each 64-bit word times an odd weight that depends on
 * its absolute position (2i + 1), so that any single changed word, and any
 * word moved to another position, changes the sum; a tail shorter than a
 * word counts as a word padded with zeros.  Sums of adjacent ranges add
 * up to the sum of their union. */
static inline uint64_t uk_sum(const void *p, size_t len, uint64_t first_word)
{
    const unsigned char *b = p;
    uint64_t s = 0, i = first_word;
    size_t words = len / 8;
    for (size_t k = 0; k < words; k++, i++) {
        uint64_t w;
        memcpy(&w, b + 8 * k, 8);
        s += w * (2 * i + 1);
    }
    if (len % 8) {
        uint64_t w = 0;
        memcpy(&w, b + 8 * words, len % 8);
        s += w * (2 * i + 1);
    }
    return s;
}

/* ---- option lists ------------------------------------------------------- */

/* A comma-separated list of names from names[] (NULL-terminated) into a bit
 * mask.  0, or -EINVAL with "OPT: unknown value 'x' (a, b, c)" in why. */
int uk_list_names(const char *opt, const char *list, const char *const *names, unsigned *mask,
                  char *why, size_t len);
/* A comma-separated list of whole numbers from lo to hi, each with an
 * optional K or M suffix (powers of 1024) where suffixes is set; at most
 * UK_MAX_LIST.  Returns how many, or -EINVAL with the reason in why. */
int uk_list_numbers(const char *opt, const char *list, uint64_t lo, uint64_t hi, int suffixes,
                    uint64_t *out, char *why, size_t len);

/* list (no suffixes) into out as uk_list_numbers does, or when list is
 * NULL the ndflt values of dflt; their count into *n.  0, or -EINVAL with
 * the reason in why. */
int uk_list_or(const char *opt, const char *list, const uint64_t *dflt, unsigned ndflt, uint64_t lo,
               uint64_t hi, uint64_t *out, unsigned *n, char *why, size_t len);
/* The largest of v[0..n), 0 for none. */
uint64_t uk_list_max(const uint64_t *v, unsigned n);

/* ---- limits ------------------------------------------------------------- */

/* Whether `need` more tasks (processes or threads) can exist at once: the
 * smallest of RLIMIT_NPROC, kernel.pid_max and kernel.threads-max, less the
 * tasks that exist now.  0, or -EAGAIN with "WHAT needs N ...; the limit
 * here is L (...)" in why. */
int uk_check_tasks(const char *what, uint64_t need, char *why, size_t len);
/* uk_check_tasks for the largest value of a list option opt (each value
 * asks for that many tasks and the caller's): "OPT MOST" into what, for
 * the caller's further checks. */
int uk_check_most_tasks(const char *opt, const uint64_t *v, unsigned n, char *what, size_t wlen,
                        char *why, size_t len);
/* Whether `need` descriptors fit under RLIMIT_NOFILE (less those open now). */
int uk_check_fds(const char *what, uint64_t need, char *why, size_t len);

/* ---- protections -------------------------------------------------------- */

/* One protection of --protect: a confinement and its variant. */
struct uk_protect {
    char name[48];                      /* as given: none, seccomp, userns, landlock, ... */
    const struct isob_confinement *conf;
    unsigned variant;
};

/* The protections --protect takes by a short name, beside any
 * seccomp-allow:VARIANT: "seccomp" is seccomp-allow's 300-args variant,
 * the filter that runs on every call (the kernel cannot cache an argument
 * check, see src/confine/seccomp_allow.c). */
#define UK_PROTECT_NAMES "none,seccomp,userns,landlock"

/* Parse --protect (NULL: none).  none always comes first, added when it
 * was not asked for, since every delta is taken against it in the same
 * run.  Returns how many, or -EINVAL with the reason in why. */
int uk_protect_parse(const char *list, struct uk_protect *out, char *why, size_t len);

/* What a measuring process gets under one protection. */
struct uk_confined {
    struct isob_bench_ctx *ctx;
    const struct uk_protect *prot;
    struct isob_confine_state *cs;      /* in force and verified */
    const char *skip;                   /* set: it could not be applied; skip every cell with this */
    const char *dir;                    /* the test directory (Landlock's domain) */
    char evidence[ISOB_CONFINE_EVIDENCE_MAX + 2]; /* the verification's evidence, as a JSON object */
};

/* The body of a measuring process: emits its results (each cell skipped
 * with u->skip when that is set) and returns nothing; a failed result sets
 * u->ctx->failed. */
typedef void (*uk_measure_fn)(struct uk_confined *u, void *arg);

/* Fork a measuring process that reopens the counter, measures the empty
 * region again, applies prot (the confinement's req: calls its measured
 * and unmeasured code makes, helper CPU; the test directory is made
 * here), verifies it, runs fn, and verifies again (a result `failed`
 * with params {"protect":...,"check":"after"} when it no longer holds).
 * The parent stays unconfined: a measuring process that dies or outlives
 * timeout_s becomes one failed result with params {"protect":...}.
 * Returns the process's exit status (0, 1 a result failed, 4 all
 * skipped), or a negative errno when it could not start (-errno of
 * mkdtemp or fork) or died or timed out (-EOWNERDEAD); each of those is
 * already reported as a failed result. */
int uk_run_confined(struct isob_bench_ctx *ctx, const char *bench, const struct uk_protect *prot,
                    const struct isob_confine_req *req, int timeout_s, uk_measure_fn fn, void *arg);

/* Apply and verify prot in the calling process, as uk_run_confined's
 * measuring process does (tests use it to confine a process of their
 * own).  0, or -errno with the reason in why. */
int uk_confine_self(struct isob_confine_state *cs, const struct uk_protect *prot,
                    const struct isob_confine_req *req, char *why, size_t len);

/* A measuring process's own counter: c2 a copy of u->ctx (made in every
 * case) that counts on clk, the clock backend (CLOCK_MONOTONIC_RAW readings, comparable across
 * the processes of a cell), with its empty region measured.  0; -ECANCELED
 * when u->skip is set; or the negative errno of the counter or the empty
 * region (nothing left open). */
int uk_clock_ctx(const struct uk_confined *u, struct isob_counter *clk, struct isob_bench_ctx *c2);

/* ---- processes ---------------------------------------------------------- */

/* Fork a helper (server, hop, worker) that dies with the calling process
 * (PR_SET_PDEATHSIG, checked against the parent recorded before the fork)
 * and is pinned to cpu (>= 0).  The pid, 0 in the child, or -errno. */
pid_t uk_fork(int cpu);
/* Wait up to UK_REAP_MS for pid, then SIGKILL it and reap it.  Its wait
 * status, or -1 when it was not this process's child. */
int uk_reap(pid_t pid);

/* ---- samples ------------------------------------------------------------ */

/* The 5th, 50th and 95th percentiles of event 0 of s (nearest rank);
 * zeros when it holds none. */
void uk_percentiles(const struct isob_samples *s, double *p5, double *p50, double *p95);
/* K for a batched estimate of an operation whose per-iteration loop took
 * each_ns for iters iterations, so that it takes about half of budget_ns;
 * 0 where the operation is too slow for K >= UK_MIN_BATCH_K. */
size_t uk_batch_k(uint64_t each_ns, uint64_t iters, uint64_t budget_ns, size_t reps, size_t kmax);
/* 1 when the CPU says it runs under a hypervisor (where cross-CPU wake-ups
 * depend on the host's scheduling), 0 when not, -1 where unknown. */
int uk_virtualized(void);

/* ---- JSON params -------------------------------------------------------- */

/* A params object under construction: isob_jw members on a memory stream.
 * uk_params_end closes it and returns the text (free() it), or NULL. */
struct uk_params {
    char *buf;
    size_t len;
    FILE *f;
    struct isob_jw w;
};
int uk_params_begin(struct uk_params *p);
char *uk_params_end(struct uk_params *p);
/* The "spread" member of a result's params: the 5th, 50th and 95th
 * percentiles (uk_percentiles) of what the result measured. */
void uk_jw_spread(struct isob_jw *w, double p5, double p50, double p95);

/* ---- the budgeted per-iteration loop ------------------------------------ */

/* Per-iteration samples of BODY, each between two readings of CTR, into S
 * until S is full or BUDGET_NS has passed (with at least UK_MIN_SAMPLES
 * samples, unless STOP).  PRE and POST run outside the region, before the
 * first reading and after the second; STOP (an lvalue) ends the loop.
 * *EACH_NS receives the wall time of the loop, for uk_batch_k. */
#define UK_EACH(CTR, S, BUDGET_NS, STOP, EACH_NS, PRE, BODY, POST)                    \
    ISOB_DISPATCH((CTR), uk_be_, UK_EACH_AS(uk_be_, CTR, S, BUDGET_NS, STOP, EACH_NS, PRE, BODY, POST))
#define UK_EACH_AS(BE, CTR, S, BUDGET_NS, STOP, EACH_NS, PRE, BODY, POST)             \
    do {                                                                          \
        struct isob_snap uk_a_, uk_b_;                                            \
        uint64_t uk_t0_ = isob_clock_ns();                                        \
        uint64_t uk_end_ = uk_t0_ + (BUDGET_NS);                                  \
        size_t uk_tries_ = 0;                                                     \
        (S)->n = 0;                                                               \
        while ((S)->n < (S)->cap && uk_tries_++ < 2 * (S)->cap && !(STOP)) {       \
            if ((S)->n >= UK_MIN_SAMPLES && isob_clock_ns() > uk_end_)            \
                break;                                                            \
            PRE;                                                                  \
            isob_read_as((BE), (CTR), &uk_a_);                                    \
            isob_clobber();                                                       \
            BODY;                                                                 \
            isob_clobber();                                                       \
            isob_read_as((BE), (CTR), &uk_b_);                                    \
            POST;                                                                 \
            if (!isob_sample_valid_as((BE), &uk_a_, &uk_b_)) {                    \
                (S)->dropped++;                                                   \
                continue;                                                         \
            }                                                                     \
            for (unsigned uk_e_ = 0; uk_e_ < (S)->nev; uk_e_++)                   \
                (S)->v[(S)->n * (S)->nev + uk_e_] = uk_b_.v[uk_e_] - uk_a_.v[uk_e_]; \
            (S)->n++;                                                             \
        }                                                                         \
        *(EACH_NS) = isob_clock_ns() - uk_t0_;                                    \
    } while (0)

#endif
