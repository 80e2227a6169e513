/* sched's internals, for its tests (tests/c/test_ukernel.c). */
#ifndef ISOB_SCHED_H
#define ISOB_SCHED_H

#include "ukernel.h"

enum sc_kind { SC_THREADS, SC_PROCESSES, SC_SECCOMP, SC_USERNS, SC__KINDS };
extern const char *const sc_kind_names[SC__KINDS + 1];
enum sc_mode { SC_YIELD, SC_PREEMPT, SC__MODES };
extern const char *const sc_mode_names[SC__MODES + 1];
enum sc_cpus { SC_ONE, SC_ALL, SC__CPUS };
extern const char *const sc_cpus_names[SC__CPUS + 1];

/* The work every worker does: W, in ns of the calibrated loop. */
#define SC_WORK_NS 1000000ull
/* The most workers --workers takes (the pid limit may refuse fewer). */
#define SC_MAX_WORKERS 4096
/* Repetitions per configuration (the same workers, released together
 * each time); --n lowers them. */
#define SC_REPS 10
#define SC_REPS_QUICK 3
/* Solo runs of the work that give W as it runs alone here (their median). */
#define SC_SOLO_RUNS 5
/* How long the measuring process waits for a repetition's workers. */
#define SC_WAIT_MS 60000

/* Tests only: the benchmark broken on purpose. */
enum {
    SC_SABOTAGE_NONE = 0,
    SC_SABOTAGE_SKIP_SLICE = 1, /* worker 0 skips its last slice */
    SC_SABOTAGE_KILL = 2,       /* the middle worker kills itself in the first repetition */
};

struct sc_config {
    unsigned kinds;            /* bit (1 << enum sc_kind) */
    uint64_t workers[UK_MAX_LIST];
    unsigned nworkers;
    uint64_t slices_us[UK_MAX_LIST];
    unsigned nslices;
    unsigned modes, cpus;      /* bit masks of enum sc_mode, enum sc_cpus */
    int cpu;                   /* the measuring process's CPU, and "one CPU" */
    size_t reps;
    double ns_per_iter;        /* the calibration; 0 until calibrated */
    int sabotage;
};

int sc_parse(const struct isob_bench_opts *o, struct sc_config *cfg, char *why, size_t len);
/* Measure the loop's speed into cfg->ns_per_iter (the fastest of a few runs). */
void sc_calibrate(struct sc_config *cfg);
/* Measure one configuration and emit its result.  cs: the confinement the
 * calling process is under (workers verify it again), or NULL. */
void sc_config_run(const struct sc_config *cfg, struct isob_bench_ctx *ctx, struct isob_confine_state *cs,
                   const char *protect_evidence, enum sc_kind kind, unsigned workers, uint64_t slice_us,
                   enum sc_mode mode, enum sc_cpus cpus);
/* The state of the work loop after n steps from x (its jump-ahead). */
uint64_t sc_expect(uint64_t x, uint64_t n);
uint64_t sc_spin(uint64_t x, uint64_t n);

#endif
