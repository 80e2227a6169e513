/* pingpong's internals, for its tests (tests/c/test_ukernel.c). */
#ifndef ISOB_PINGPONG_H
#define ISOB_PINGPONG_H

#include "ukernel.h"

enum pp_prim { PP_FUTEX, PP_PIPE, PP_SOCKET, PP_SOCKET_FD, PP_EVENTFD, PP_SPIN, PP__COUNT };
extern const char *const pp_prim_names[PP__COUNT + 1];

/* The sequence stamp every message starts with. */
#define PP_HDR 8
/* The largest payload after the stamp. */
#define PP_MAX_PAYLOAD 65536
/* Payload sizes of one run, at most. */
#define PP_MAX_PAYLOADS 8
/* Per-iteration measuring time per cell; warm-up may take a quarter more,
 * the batched estimate about half more. */
#define PP_BUDGET_NS 400000000ull
#define PP_BUDGET_NS_QUICK 80000000ull

/* Tests only: a server broken on purpose. */
enum {
    PP_SABOTAGE_NONE = 0,
    PP_SABOTAGE_CORRUPT = 1,   /* every echo comes back with one bit flipped */
    PP_SABOTAGE_WRONG_FD = 2,  /* socket-fd: the server hands back another descriptor */
};

/* One measuring process's settings. */
struct pp_config {
    uint64_t payloads[PP_MAX_PAYLOADS];
    unsigned npayloads;
    const char *protect;       /* the protection's name, as the results carry it */
    int is_baseline;           /* this process measures none: it fills baseline */
    double *baseline;          /* shared: none's median per cell (pp_slot), or NULL */
    void *shared;              /* shared: the page of every cell's client and server */
    int cpu;                   /* the client's CPU, -1 unpinned */
    uint64_t budget_ns;
    size_t cap, warmup, batch_k, batch_reps;
    int sabotage;
};

/* Parse the options into cfg (payloads), the primitive mask and the
 * protections; 0, or -EINVAL with one line in why. */
int pp_parse(const struct isob_bench_opts *o, struct pp_config *cfg, unsigned *prims,
             struct uk_protect *prot, int *nprot, char *why, size_t len);
/* Measure one cell and emit its result.  cs is the protection in force in
 * this process (verified again by the server it starts), prot_evidence
 * its evidence as a JSON object (or NULL). */
void pp_cell(const struct pp_config *cfg, struct isob_bench_ctx *ctx, struct isob_confine_state *cs,
             const char *prot_evidence, enum pp_prim prim, unsigned pay, enum isob_placement pl);
void pp_emit_skip(const struct pp_config *cfg, struct isob_bench_ctx *ctx, unsigned prim,
                  unsigned pay, enum isob_placement pl, const char *why);
/* The bytes of cfg->shared. */
size_t pp_shared_bytes(void);

#endif
