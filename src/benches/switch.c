/* switch: one round trip into a compartment and back.
 *
 * Entry: ISOB_ENTRY_EMPTY for payload 0; for a payload the caller writes
 * the bytes into the shared buffer and the compartment reads them all
 * (ISOB_ENTRY_SINK), so the data really crosses.  Every result is checked
 * (outside the timestamps, by counting mismatches inside the loop); a
 * single wrong result fails the whole result.
 *
 * Variants (--variant, params "variant"): `entry`, the round trip above,
 * and ERIM's three call kinds (Vahldiek-Oberwagner et al., USENIX Security
 * 2019, section 6; Konrad 2023, Table 5.1): an empty function that counts
 * its calls, inlined, called directly, or called through a pointer.  For
 * `direct` the function is called outside any compartment (the plain
 * call); a mechanism with a gate of its own (mechanism.h, call_kind: `mpk`)
 * runs the same kinds behind its gate, so that "mpk X minus direct X" is
 * what the gate adds to a call of kind X.  Payload 0 only.  A kind asked
 * for a mechanism without it gives a skipped result that says so. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isobench/bench.h"
#include "ukernel.h"

/* The payloads measured: --payload, else 0, 64 and 4096 bytes.  A payload
 * larger than a mechanism's shared buffer (64 KiB less its header) gives a
 * skipped result that says so. */
static const uint64_t switch_default_payloads[] = {0, 64, 4096};
#define SWITCH_MAX_PAYLOAD 65536
#define SWITCH_MAX_PAYLOADS 8

/* The ERIM call kinds: the same empty function inlined, called directly,
 * and called through a pointer the compiler cannot see through. */
static inline long erim_empty_inline(uint64_t *calls)
{
    (*calls)++;
    isob_clobber();
    return 0;
}

__attribute__((noinline)) static long erim_empty_call(uint64_t *calls)
{
    (*calls)++;
    isob_clobber();
    return 0;
}

static long (*volatile erim_empty_ptr)(uint64_t *) = erim_empty_call;

/* The variants, in --variant's order; bit i of a mask is names[i]. */
static const char *const switch_variant_names[] = {"entry", "inline", "direct-call",
                                                   "indirect-call", NULL};
#define SWITCH_V_ENTRY 0u
/* Bit of call kind k (enum isob_call_kind) in a variant mask. */
#define SWITCH_V_KIND(k) (1u << (1 + (k)))

struct switch_run {
    struct isob_bench_ctx *ctx;
    const char *placement;
    const char *variant;
    size_t payload;
};

static void params_json(char *buf, size_t len, const struct switch_run *r)
{
    const char *extra = r->ctx->mech->result_params;
    snprintf(buf, len, "{\"placement\":\"%s\",\"payload\":%zu,\"variant\":\"%s\"%s%s}", r->placement,
             r->payload, r->variant, extra ? "," : "", extra ? extra : "");
}

/* Measure BODY: warm-up, per-iteration samples, batched estimate; emit.
 * BAD (a long lvalue) counts BODY's wrong results: it is zeroed after the
 * warm-up, and a non-zero count fails the result.  DIED is the
 * compartment's isob_comp_why (NULL for none): a compartment that died is
 * a failed result with the cause, whatever its calls said. */
#define SWITCH_MEASURE(R, BAD, BODY, DIED)                                             \
    do {                                                                               \
        struct isob_bench_ctx *ctx_ = (R)->ctx;                                        \
        struct isob_samples s_;                                                        \
        struct isob_batched b_;                                                        \
        char params_[256], reason_[160];                                               \
        params_json(params_, sizeof params_, (R));                                     \
        if (isob_samples_alloc(&s_, ctx_->opts.n, ctx_->ctr->nev) != 0) {              \
            isob_emit_result(ctx_, "switch", params_, NULL, NULL, "failed",            \
                             "out of memory for samples", NULL);                       \
            break;                                                                     \
        }                                                                              \
        int have_b_ = isob_batched_alloc(&b_, ctx_->opts.batch_reps) == 0;             \
        for (size_t w_ = 0; w_ < ctx_->opts.warmup; w_++) {                            \
            BODY;                                                                      \
        }                                                                              \
        (BAD) = 0;                                                                     \
        ISOB_MEASURE_EACH(ctx_->ctr, &s_, BODY);                                       \
        if (have_b_)                                                                   \
            ISOB_MEASURE_BATCHED(ctx_->ctr, ctx_->opts.batch_k, &b_, BODY);            \
        if (DIED) {                                                                    \
            isob_emit_result(ctx_, "switch", params_, NULL, NULL, "failed", DIED, NULL); \
        } else if (BAD) {                                                              \
            snprintf(reason_, sizeof reason_, "%ld calls returned a wrong result",     \
                     (long)(BAD));                                                     \
            isob_emit_result(ctx_, "switch", params_, &s_, have_b_ ? &b_ : NULL,       \
                             "failed", reason_, NULL);                                 \
        } else {                                                                       \
            isob_emit_result(ctx_, "switch", params_, &s_, have_b_ ? &b_ : NULL, "ok", \
                             NULL, NULL);                                              \
        }                                                                              \
        if (have_b_)                                                                   \
            isob_batched_free(&b_);                                                    \
        isob_samples_free(&s_);                                                        \
    } while (0)

static void measure_erim_kinds(struct switch_run *r, unsigned variants)
{
    uint64_t calls = 0;
    long bad = 0;
    r->payload = 0;
    if (variants & SWITCH_V_KIND(ISOB_KIND_INLINE)) {
        r->variant = "inline";
        SWITCH_MEASURE(r, bad, bad += erim_empty_inline(&calls) != 0, NULL);
    }
    if (variants & SWITCH_V_KIND(ISOB_KIND_DIRECT_CALL)) {
        r->variant = "direct-call";
        SWITCH_MEASURE(r, bad, bad += erim_empty_call(&calls) != 0, NULL);
    }
    if (variants & SWITCH_V_KIND(ISOB_KIND_INDIRECT_CALL)) {
        r->variant = "indirect-call";
        SWITCH_MEASURE(r, bad, bad += erim_empty_ptr(&calls) != 0, NULL);
    }
    isob_keep(calls);
}

/* ERIM's call kinds behind the mechanism's gate (call_kind), payload 0.
 * Each call must return 0; a kind the mechanism lacks is skipped with the
 * reason when it was asked for by name. */
static void measure_gate_kinds(struct switch_run *r, struct isob_comp *c, unsigned variants,
                               int asked)
{
    const struct isob_mechanism *m = c->mech;
    r->payload = 0;
    for (unsigned k = 0; k < ISOB_CALL_KINDS; k++) {
        if (!(variants & SWITCH_V_KIND(k)))
            continue;
        r->variant = switch_variant_names[1 + k];
        long (*kind)(struct isob_comp *) = m->call_kind[k];
        if (!kind) {
            if (asked) {
                char params[256], reason[160];
                params_json(params, sizeof params, r);
                snprintf(reason, sizeof reason,
                         "%s has no gate to call the %s kind through (direct and mpk have the call kinds)",
                         m->name, r->variant);
                isob_emit_result(r->ctx, "switch", params, NULL, NULL, "skipped", reason, NULL);
            }
            continue;
        }
        long bad = 0;
        SWITCH_MEASURE(r, bad, {
            if (kind(c) != 0) {
                bad++;
                if (isob_comp_why(c))
                    break;
            }
        }, isob_comp_why(c));
        if (isob_comp_why(c))
            return;
    }
}

/* One call whose result must be WANT, counted in BAD when it is not.
 * A wrong result from a compartment that died ends the loop the call is in
 * (the measuring macros run BODY directly in their loops, so `break` ends
 * the measurement early): its result fails with the cause, and nothing is
 * gained by calling a dead compartment n more times.  The check costs the
 * fast path nothing, as it sits behind the comparison made anyway. */
#define SWITCH_CHECKED_CALL(C, ENTRY, WANT, BAD)                                       \
    if (isob_call((C), (ENTRY)) != (WANT)) {                                           \
        (BAD)++;                                                                       \
        if (isob_comp_why(C))                                                          \
            break;                                                                     \
    }

/* Round trips through the mechanism at every payload.  A compartment that
 * dies fails the result it died in, and the payloads after it are not
 * measured (a dead compartment answers every call at once with an error:
 * the loop that saw it ends quickly). */
/* The payloads of --payload (or the defaults) into out; how many, or
 * -EINVAL with the reason in why. */
static int switch_payloads(const struct isob_bench_opts *o, uint64_t *out, char *why, size_t len)
{
    if (!o->payloads) {
        memcpy(out, switch_default_payloads, sizeof switch_default_payloads);
        return (int)(sizeof switch_default_payloads / sizeof switch_default_payloads[0]);
    }
    uint64_t all[UK_MAX_LIST];
    int n = uk_list_numbers("switch: --payload", o->payloads, 0, SWITCH_MAX_PAYLOAD, 1, all,
                            why, len);
    if (n < 0)
        return -EINVAL;
    if (n > SWITCH_MAX_PAYLOADS) {
        snprintf(why, len, "switch: --payload: more than %d sizes", SWITCH_MAX_PAYLOADS);
        return -EINVAL;
    }
    memcpy(out, all, (size_t)n * sizeof *out);
    return n;
}

/* The variants of --variant as a mask (every one when not given); 0 or
 * -EINVAL with the reason in why. */
static int switch_variants(const struct isob_bench_opts *o, unsigned *mask, char *why, size_t len)
{
    if (!o->variants) {
        *mask = (1u << (1 + ISOB_CALL_KINDS)) - 1;
        return 0;
    }
    return uk_list_names("switch: --variant", o->variants, switch_variant_names, mask, why, len)
               ? -EINVAL
               : 0;
}

static int switch_check(const struct isob_bench_opts *o, char *why, size_t len)
{
    uint64_t payloads[SWITCH_MAX_PAYLOADS];
    unsigned variants;
    if (o->nsizes) {
        snprintf(why, len, "switch: --sizes does not apply (message sizes are --payload)");
        return -EINVAL;
    }
    if (switch_variants(o, &variants, why, len) != 0)
        return -EINVAL;
    return switch_payloads(o, payloads, why, len) < 0 ? -EINVAL : 0;
}

static void measure_entry(struct switch_run *r, struct isob_comp *c)
{
    struct isob_msg *msg = c->mech->shared(c);
    uint64_t payloads[SWITCH_MAX_PAYLOADS];
    char why[160];
    int npayloads = switch_payloads(&r->ctx->opts, payloads, why, sizeof why);
    r->variant = "entry";
    for (int i = 0; i < npayloads; i++) {
        size_t payload = (size_t)payloads[i];
        long bad = 0;
        r->payload = payload;
        if (payload > c->data_cap) {
            char params[256];
            params_json(params, sizeof params, r);
            isob_emit_result(r->ctx, "switch", params, NULL, NULL, "skipped",
                             "payload larger than the shared buffer", NULL);
            continue;
        }
        if (payload == 0) {
            msg->len = 0;
            SWITCH_MEASURE(r, bad, SWITCH_CHECKED_CALL(c, ISOB_ENTRY_EMPTY, 0, bad), isob_comp_why(c));
            if (isob_comp_why(c))
                return;
            continue;
        }
        /* Two fills alternate so that every call moves fresh data; their
         * checksums are known in advance. */
        static const unsigned char fills[2] = {0x5a, 0xa5};
        long sums[2];
        for (int k = 0; k < 2; k++) {
            memset(msg->data, fills[k], payload);
            sums[k] = isob_checksum(msg->data, payload);
        }
        unsigned it = 0;
        SWITCH_MEASURE(r, bad, {
            unsigned k_ = it++ & 1;
            memset(msg->data, fills[k_], payload);
            msg->len = (uint32_t)payload;
            SWITCH_CHECKED_CALL(c, ISOB_ENTRY_SINK, sums[k_], bad);
        }, isob_comp_why(c));
        if (isob_comp_why(c))
            return;
    }
}

static int switch_run_placement(struct isob_bench_ctx *ctx, enum isob_placement pl)
{
    const struct isob_mechanism *m = ctx->mech;
    struct switch_run r = {.ctx = ctx, .placement = isob_placement_name(pl)};
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    spec.server_cpu = isob_server_cpu(pl, ctx->opts.client_cpu);
    if (pl == ISOB_PLACE_CROSS_CPU && spec.server_cpu < 0) {
        char params[256];
        r.variant = "entry";
        params_json(params, sizeof params, &r);
        isob_emit_result(ctx, "switch", params, NULL, NULL, "skipped",
                         "cross-cpu placement needs two CPUs and a pinned client", NULL);
        return 0;
    }
    char pin_why[160];
    if (isob_place_self(pl, ctx->opts.client_cpu, pin_why, sizeof pin_why) != 0) {
        char params[256];
        r.variant = "entry";
        params_json(params, sizeof params, &r);
        isob_emit_result(ctx, "switch", params, NULL, NULL, "failed", pin_why, NULL);
        return 0;
    }

    unsigned variants;
    char why[160];
    if (switch_variants(&ctx->opts, &variants, why, sizeof why) != 0)
        variants = 0;  /* switch_check refused it before anything ran */
    int direct = strcmp(m->name, "direct") == 0;
    if (direct)
        measure_erim_kinds(&r, variants);

    struct isob_comp *c;
    int rc = isob_comp_create(m, &spec, &c);
    if (rc != 0) {
        char params[256], reason[160];
        r.variant = "entry";
        params_json(params, sizeof params, &r);
        snprintf(reason, sizeof reason, "create: %s", isob_strerror(rc));
        isob_emit_result(ctx, "switch", params, NULL, NULL, "failed", reason, NULL);
        return 0;
    }
    if (!direct)
        measure_gate_kinds(&r, c, variants, ctx->opts.variants != NULL);
    if ((variants & (1u << SWITCH_V_ENTRY)) && !isob_comp_why(c))
        measure_entry(&r, c);
    isob_comp_destroy(c);
    return 0;
}

static int switch_run(struct isob_bench_ctx *ctx)
{
    int two = (ctx->mech->props & ISOB_TWO_CONTEXTS) != 0;
    for (unsigned p = 0; p < 3; p++) {
        if (!(ctx->opts.placements & (1u << p)))
            continue;
        /* With one execution context there is nothing to place: run once,
         * at the first placement asked for, unless that is cross-cpu. */
        if (!two && p == ISOB_PLACE_CROSS_CPU)
            continue;
        switch_run_placement(ctx, (enum isob_placement)p);
        if (!two)
            return 0;
    }
    if (!two) {
        isob_emit_result(ctx, "switch", "{\"placement\":\"cross-cpu\"}", NULL, NULL, "skipped",
                         "one execution context: cross-cpu placement does not apply", NULL);
    }
    return 0;
}

static const struct isob_bench_option switch_options[] = {
    {"--payload", "bytes, 0 to 65536", "0,64,4096",
     "bytes the compartment reads from the shared buffer on each entry"},
    {"--variant", "entry,inline,direct-call,indirect-call", "all the mechanism has",
     "entry: the round trip; inline, direct-call, indirect-call: ERIM's call kinds, an empty "
     "function inlined, called directly or through a pointer, outside any compartment (direct) "
     "or behind the gate (mpk); payload 0"},
    {NULL, NULL, NULL, NULL},
};

const struct isob_bench isob_bench_switch = {
    .name = "switch",
    .summary = "round trip into a compartment and back (empty entry; payload 0, 64, 4096 B)",
    .needs_mechanism = 1,
    .run = switch_run,
    .check = switch_check,
    .options = switch_options,
};
