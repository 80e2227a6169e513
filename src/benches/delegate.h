/* delegate's internals, for its tests (tests/c/test_ukernel.c). */
#ifndef ISOB_DELEGATE_H
#define ISOB_DELEGATE_H

#include "ukernel.h"

enum dg_variant { DG_THREADS, DG_PROCESSES, DG_COPIES, DG__COUNT };
extern const char *const dg_variant_names[DG__COUNT + 1];

/* The deepest chain --depth takes (the pid and descriptor limits may refuse less). */
#define DG_MAX_DEPTH 4096
/* The largest region --sizes takes for delegate. */
#define DG_MAX_REGION (1ull << 30)
/* The smallest share: a share this size is passed on whole, not halved. */
#define DG_MIN_SHARE 64
/* Repetitions per configuration (each a delegation down the whole chain,
 * then for processes a revocation, truncation and unmapping alternating);
 * --n lowers them. */
#define DG_REPS 20
#define DG_REPS_QUICK 6
/* How long the owner waits for the chain (or every holder) to answer. */
#define DG_WAIT_MS 30000

/* Tests only: the benchmark broken on purpose. */
enum {
    DG_SABOTAGE_NONE = 0,
    DG_SABOTAGE_CORRUPT = 1,   /* the owner changes a byte of the deepest share after summing */
    DG_SABOTAGE_NO_REVOKE = 2, /* "truncation" to the region's own size: nothing is revoked */
    DG_SABOTAGE_KILL_HOP = 3,  /* the middle hop of the chain kills itself on its first delegation */
};

struct dg_config {
    uint64_t sizes[UK_MAX_LIST];
    unsigned nsizes;
    uint64_t depths[UK_MAX_LIST];
    unsigned ndepths;
    unsigned variants;         /* bit (1 << enum dg_variant) */
    unsigned placements;       /* bit (1 << enum isob_placement) */
    int cpu;                   /* the owner's CPU */
    size_t reps;
    int sabotage;
};

/* Parse the options; 0, or -EINVAL (-EAGAIN, -EMFILE beyond the limits)
 * with one line in why. */
int dg_parse(const struct isob_bench_opts *o, struct dg_config *cfg, char *why, size_t len);
/* Measure one configuration and emit its results: "hop" and "end-to-end",
 * and for processes "revoke" per revocation. */
void dg_config_run(const struct dg_config *cfg, struct isob_bench_ctx *ctx, enum dg_variant v,
                   uint64_t region, unsigned depth, enum isob_placement pl);

#endif
