/* vmcall: what a trap out of a KVM guest costs beside a null system call,
 * as SEIMI's Table I compares them (Wang et al., IEEE S&P 2020: SEIMI runs
 * the process it protects in VMX non-root ring 0, where its exceptions
 * trigger VM exits).
 *
 * Each guest is the minimal one of include/isobench/kvm.h: one vCPU in
 * 64-bit long mode with its own four-level page tables, three pages (code,
 * control block, stack) and a doorbell page without memory.  One result
 * per exit kind:
 *
 *   none       KVM_RUN with kvm_run.immediate_exit set: the ioctl returns
 *              EINTR before entering the guest.  The system-call part of
 *              every exit to user space, without the guest.
 *   io         the guest's OUT to a port: KVM_EXIT_IO to user space, and
 *              KVM_RUN again.  One sample per round trip.
 *   mmio       the guest's store to a page with no memory behind it:
 *              KVM_EXIT_MMIO to user space, and KVM_RUN again (the exit
 *              the kvm mechanism leaves its guest by).
 *   cpuid      CPUID, which KVM answers in the kernel from the vCPU's CPUID
 *              table; the guest checks that each answer carries the mark
 *              the host put in that table.
 *   hypercall  VMCALL (VMMCALL on AMD) with a number KVM does not know:
 *              KVM handles it in the kernel and returns -KVM_ENOSYS in rax,
 *              which the guest checks.
 *   syscall    the null system call (getppid through syscall(2)) in the
 *              same process, measured the same way.
 *
 * Every guest exit is measured from ring 0, SEIMI's ring; mmio and cpuid
 * also from ring 3, where the kvm mechanism's guest may run.  Where an
 * in-kernel exit does not reach KVM's handler (the guest, which has no
 * interrupt table, shuts down on the fault instead: kvm_pvm raises #UD for
 * VMCALL, and a fault for CPUID in ring 3), a skipped result says so.
 *
 * The in-kernel exits (cpuid, hypercall) never come back to user space one
 * by one: the guest runs a loop of `count` of them between two exits to
 * user space.  A sample is one KVM_RUN of ISOB_VMCALL_INNER of them,
 * divided by ISOB_VMCALL_INNER (so 1/ISOB_VMCALL_INNER of the bracketing
 * io round trip is in each); the batched estimate times runs of 2M and of
 * M in-guest exits and divides their difference by M, so the bracket
 * cancels.  Every result says whether this KVM is nested, and
 * ISOB_KVM_CAVEAT. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isobench/bench.h"
#include "isobench/kvm.h"

#define ISOB_VMCALL_INNER 64
#define VMCALL_STACK (16u * 1024u)

enum vm_exit { X_NONE, X_IO, X_MMIO, X_CPUID, X_HYPERCALL, X_SYSCALL, X__COUNT };
static const char *const exit_names[X__COUNT] = {"none", "io", "mmio", "cpuid", "hypercall", "syscall"};
static const char *const handled_in[X__COUNT] = {
    "no guest entry (KVM_RUN returns EINTR at once)",
    "user space (KVM_EXIT_IO, then KVM_RUN again)",
    "user space (KVM_EXIT_MMIO, then KVM_RUN again)",
    "kernel (KVM answers CPUID from the vCPU's table)",
    "kernel (KVM's hypercall handler: -KVM_ENOSYS)",
    "no VM exit: getppid via syscall(2)",
};

/* Which KVM this is: the vendor module that is loaded. */
static const char *kvm_module(void)
{
    static const char *const mods[] = {"kvm_intel", "kvm_amd", "kvm_pvm"};
    for (size_t i = 0; i < sizeof mods / sizeof mods[0]; i++) {
        char p[64];
        snprintf(p, sizeof p, "/sys/module/%s", mods[i]);
        if (access(p, F_OK) == 0)
            return mods[i];
    }
    return "unknown";
}

struct vmcall_guest {
    struct isob_kvm_vm vm;
    struct isob_kvm_ctrl *ctrl;
    void *stack;
    void *door;
};

static void guest_close(struct vmcall_guest *g)
{
    isob_kvm_close(&g->vm);
    if (g->ctrl)
        munmap(g->ctrl, 4096);
    if (g->stack)
        munmap(g->stack, VMCALL_STACK);
    if (g->door)
        munmap(g->door, 4096);
    g->ctrl = NULL;
    g->stack = NULL;
    g->door = NULL;
}

/* The minimal guest running loop kind; 0 or -errno with why. */
static int guest_open(struct vmcall_guest *g, enum isob_kvm_guest kind, int ring, char *why, size_t len)
{
    memset(g, 0, sizeof *g);
    int rc = isob_kvm_open(&g->vm, why, len);
    if (rc)
        return rc;
    g->vm.ring = ring;
    g->ctrl = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    g->stack = mmap(NULL, VMCALL_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    /* Reserved, never accessible here: only the guest's page tables map it. */
    g->door = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g->ctrl == MAP_FAILED || g->stack == MAP_FAILED || g->door == MAP_FAILED) {
        if (g->ctrl == MAP_FAILED)
            g->ctrl = NULL;
        if (g->stack == MAP_FAILED)
            g->stack = NULL;
        if (g->door == MAP_FAILED)
            g->door = NULL;
        snprintf(why, len, "guest memory: %s", strerror(ENOMEM));
        guest_close(g);
        return -ENOMEM;
    }
    uint64_t entry;
    if ((rc = isob_kvm_map_guest_code(&g->vm, kind, &entry, why, len)) != 0 ||
        (rc = isob_kvm_map(&g->vm, g->ctrl, 4096, 1, why, len)) != 0 ||
        (rc = isob_kvm_map(&g->vm, g->stack, VMCALL_STACK, 1, why, len)) != 0 ||
        (rc = isob_kvm_map_doorbell(&g->vm, g->door, why, len)) != 0 ||
        (rc = isob_kvm_start(&g->vm, entry, (uint64_t)(uintptr_t)g->stack + VMCALL_STACK, g->ctrl, why,
                             len)) != 0) {
        guest_close(g);
        return rc;
    }
    g->ctrl->door = (uint64_t)(uintptr_t)g->door;
    return 0;
}

struct vmcall_env {
    struct isob_bench_ctx *ctx;
    int nested;
    char hypervisor[16];
    const char *module;
    const char *nested_param;
};

static void emit(struct vmcall_env *e, enum vm_exit x, int ring, const struct isob_samples *s, const struct isob_batched *b,
                 const char *status, const char *reason, unsigned per_run, const struct isob_kvm_ctrl *ctrl)
{
    char params[1024];
    int n = snprintf(params, sizeof params,
                     "{\"exit\":\"%s\",\"handled_in\":\"%s\",\"guest\":\"x86-64 long mode, own 4-level "
                     "page tables, 3 pages and a doorbell\",\"kvm\":\"%s\",\"nested\":%s,\"hypervisor\":\"%s\","
                     "\"kvm_nested_param\":\"%s\",\"caveat\":\"%s\"",
                     exit_names[x], handled_in[x], e->module, e->nested ? "true" : "false",
                     e->nested ? e->hypervisor : "none", e->nested_param,
                     e->nested ? ISOB_KVM_CAVEAT : "bare metal: no nested virtualization");
    if (ring >= 0 && n > 0 && (size_t)n < sizeof params)
        n += snprintf(params + n, sizeof params - (size_t)n, ",\"ring\":%d", ring);
    if (per_run && n > 0 && (size_t)n < sizeof params)
        n += snprintf(params + n, sizeof params - (size_t)n, ",\"exits_per_run\":%u", per_run);
    if (ctrl && n > 0 && (size_t)n < sizeof params)
        n += snprintf(params + n, sizeof params - (size_t)n, ",\"guest_bad\":%llu,\"guest_last\":%lld",
                      (unsigned long long)ctrl->bad, (long long)ctrl->last);
    if (n > 0 && (size_t)n < sizeof params - 1)
        snprintf(params + n, sizeof params - (size_t)n, "}");
    isob_emit_result(e->ctx, "vmcall", params, s, b, status, reason, NULL);
}

/* The batched estimate of one in-guest exit: pairs of kb runs of 2M and of
 * M exits each; (t(2M) - t(M)) / (kb M). */
__attribute__((always_inline)) static inline int batched_inner(enum isob_backend be, struct isob_counter *c,
                                                               struct vmcall_guest *g, size_t kb,
                                                               struct isob_batched *b)
{
    int failed = 0;
    b->n = 0;
    for (size_t r = 0; r < b->cap && !failed; r++) {
        uint64_t t1, t2;
        int ok1, ok2;
        g->ctrl->count = ISOB_VMCALL_INNER;
        ISOB_MEASURE_K(be, c, kb, if (isob_kvm_enter(&g->vm) != 0) { failed = 1; break; }, t1, ok1);
        g->ctrl->count = 2 * ISOB_VMCALL_INNER;
        ISOB_MEASURE_K(be, c, kb, if (isob_kvm_enter(&g->vm) != 0) { failed = 1; break; }, t2, ok2);
        if (ok1 && ok2 && !failed)
            b->reps[b->n++] = ((double)t2 - (double)t1) / (double)(kb * ISOB_VMCALL_INNER);
    }
    g->ctrl->count = ISOB_VMCALL_INNER;
    isob_batched_finish(b);
    return failed;
}

static void measure_guest(struct vmcall_env *e, enum vm_exit x, int ring)
{
    struct isob_bench_ctx *ctx = e->ctx;
    char why[400];
    static const enum isob_kvm_guest kinds[X__COUNT] = {
        [X_NONE] = ISOB_KVM_GUEST_IO, [X_IO] = ISOB_KVM_GUEST_IO, [X_MMIO] = ISOB_KVM_GUEST_MMIO,
        [X_CPUID] = ISOB_KVM_GUEST_CPUID, [X_HYPERCALL] = ISOB_KVM_GUEST_HYPERCALL};
    struct vmcall_guest g;
    int rc = guest_open(&g, kinds[x], ring, why, sizeof why);
    if (rc) {
        emit(e, x, ring, NULL, NULL, "skipped", why, 0, NULL);
        return;
    }
    unsigned inner = (x == X_CPUID || x == X_HYPERCALL) ? ISOB_VMCALL_INNER : 1;
    g.ctrl->count = inner;
    /* The first run, and what it says about this KVM. */
    if (isob_kvm_enter(&g.vm) != 0) {
        char exit_why[200];
        isob_kvm_exit_why(&g.vm, exit_why, sizeof exit_why);
        /* An in-kernel exit this KVM does not handle (the guest shuts
         * down on it) is a property of this KVM, not a failure. */
        int in_kernel = x == X_HYPERCALL || x == X_CPUID;
        /* Without the address, which differs from process to process, so
         * that every repetition gives the same reason. */
        char *at = strstr(exit_why, " at rip ");
        if (at)
            *at = 0;
        if (in_kernel)
            snprintf(why, sizeof why, "%s does not handle the guest's %s at ring %d in the kernel: %s",
                     e->module, x == X_HYPERCALL ? (g.vm.amd ? "VMMCALL" : "VMCALL") : "CPUID", ring, exit_why);
        else
            snprintf(why, sizeof why, "the guest's first run: %s", exit_why);
        emit(e, x, ring, NULL, NULL, in_kernel ? "skipped" : "failed", why, 0, NULL);
        guest_close(&g);
        return;
    }
    if (x == X_NONE && (!g.vm.immediate_exit_ok || isob_kvm_enter_none(&g.vm) != 0)) {
        emit(e, x, ring, NULL, NULL, "skipped",
             g.vm.immediate_exit_ok ? "KVM_RUN with immediate_exit did not return EINTR"
                                    : "KVM lacks KVM_CAP_IMMEDIATE_EXIT", 0, NULL);
        guest_close(&g);
        return;
    }
    struct isob_samples s;
    struct isob_batched b;
    if (isob_samples_alloc(&s, ctx->opts.n, ctx->ctr->nev) != 0) {
        emit(e, x, ring, NULL, NULL, "failed", "out of memory for samples", 0, NULL);
        guest_close(&g);
        return;
    }
    int have_b = isob_batched_alloc(&b, ctx->opts.batch_reps) == 0;
    int failed = 0;
    g.ctrl->bad = 0;
    if (x == X_NONE) {
        for (size_t w = 0; w < ctx->opts.warmup && !failed; w++)
            failed = isob_kvm_enter_none(&g.vm) != 0;
        if (!failed)
            ISOB_MEASURE_EACH(ctx->ctr, &s, if (isob_kvm_enter_none(&g.vm) != 0) { failed = 1; break; });
        if (have_b && !failed)
            ISOB_MEASURE_BATCHED(ctx->ctr, ctx->opts.batch_k, &b,
                                 if (isob_kvm_enter_none(&g.vm) != 0) { failed = 1; break; });
    } else {
        /* Warm-up and samples: one run each, of `inner` exits. */
        size_t warm = inner > 1 ? ctx->opts.warmup / inner + 1 : ctx->opts.warmup;
        for (size_t w = 0; w < warm && !failed; w++)
            failed = isob_kvm_enter(&g.vm) != 0;
        if (!failed)
            ISOB_MEASURE_EACH(ctx->ctr, &s, if (isob_kvm_enter(&g.vm) != 0) { failed = 1; break; });
        if (have_b && !failed) {
            if (inner == 1) {
                ISOB_MEASURE_BATCHED(ctx->ctr, ctx->opts.batch_k, &b,
                                     if (isob_kvm_enter(&g.vm) != 0) { failed = 1; break; });
            } else {
                size_t kb = ctx->opts.batch_k / inner ? ctx->opts.batch_k / inner : 1;
                ISOB_DISPATCH(ctx->ctr, be_, failed = batched_inner(be_, ctx->ctr, &g, kb, &b));
            }
        }
        /* A sample of `inner` exits stands for one: divide, rounding. */
        for (size_t i = 0; inner > 1 && i < s.n * s.nev; i++)
            s.v[i] = (s.v[i] + inner / 2) / inner;
    }
    if (failed) {
        char exit_why[200];
        isob_kvm_exit_why(&g.vm, exit_why, sizeof exit_why);
        snprintf(why, sizeof why, "a run did not end at the guest's exit: %s", exit_why);
        emit(e, x, ring, NULL, NULL, "failed", why, inner, g.ctrl);
    } else if (g.ctrl->bad) {
        snprintf(why, sizeof why, "%llu in-guest exits gave a wrong answer (last %#llx)",
                 (unsigned long long)g.ctrl->bad, (unsigned long long)g.ctrl->last);
        emit(e, x, ring, &s, have_b ? &b : NULL, "failed", why, inner, g.ctrl);
    } else {
        emit(e, x, ring, &s, have_b ? &b : NULL, "ok", NULL, inner, inner > 1 ? g.ctrl : NULL);
    }
    if (have_b)
        isob_batched_free(&b);
    isob_samples_free(&s);
    guest_close(&g);
}

static void measure_syscall(struct vmcall_env *e)
{
    struct isob_bench_ctx *ctx = e->ctx;
    struct isob_samples s;
    struct isob_batched b;
    if (isob_samples_alloc(&s, ctx->opts.n, ctx->ctr->nev) != 0) {
        emit(e, X_SYSCALL, -1, NULL, NULL, "failed", "out of memory for samples", 0, NULL);
        return;
    }
    int have_b = isob_batched_alloc(&b, ctx->opts.batch_reps) == 0;
    long want = (long)getppid(), bad = 0;
    for (size_t w = 0; w < ctx->opts.warmup; w++)
        bad += syscall(SYS_getppid) != want;
    bad = 0;
    ISOB_MEASURE_EACH(ctx->ctr, &s, bad += syscall(SYS_getppid) != want);
    if (have_b)
        ISOB_MEASURE_BATCHED(ctx->ctr, ctx->opts.batch_k, &b, bad += syscall(SYS_getppid) != want);
    if (bad) {
        char why[96];
        snprintf(why, sizeof why, "%ld getppid calls gave another parent", bad);
        emit(e, X_SYSCALL, -1, &s, have_b ? &b : NULL, "failed", why, 0, NULL);
    } else {
        emit(e, X_SYSCALL, -1, &s, have_b ? &b : NULL, "ok", NULL, 0, NULL);
    }
    if (have_b)
        isob_batched_free(&b);
    isob_samples_free(&s);
}

/* What is measured, in order: every exit from ring 0 (SEIMI's ring), and
 * the two the kvm mechanism's ring 3 guest can make (where this KVM runs
 * ring 0 differently from ring 3, as kvm_pvm does, they differ). */
static const struct { enum vm_exit x; int ring; } vmcall_runs[] = {
    {X_NONE, 0}, {X_IO, 0}, {X_MMIO, 0}, {X_CPUID, 0}, {X_HYPERCALL, 0}, {X_MMIO, 3}, {X_CPUID, 3},
};

static int vmcall_run(struct isob_bench_ctx *ctx)
{
    struct vmcall_env e = {.ctx = ctx, .module = kvm_module(), .nested_param = isob_kvm_nested_param()};
    e.nested = isob_kvm_nested(e.hypervisor, sizeof e.hypervisor);
    char why[256];
    /* One thread runs the vCPU and makes the system calls: pinned to the
     * client CPU, as the untrusted side of every other benchmark. */
    if (isob_place_self(ISOB_PLACE_SAME_CPU, ctx->opts.client_cpu, why, sizeof why) != 0) {
        for (int x = 0; x < X__COUNT; x++)
            emit(&e, (enum vm_exit)x, x == X_SYSCALL ? -1 : 0, NULL, NULL, "failed", why, 0, NULL);
        return 0;
    }
    int rc = isob_kvm_probe(why, sizeof why);
    for (size_t i = 0; i < sizeof vmcall_runs / sizeof vmcall_runs[0]; i++) {
        if (rc)
            emit(&e, vmcall_runs[i].x, vmcall_runs[i].ring, NULL, NULL, "skipped", why, 0, NULL);
        else
            measure_guest(&e, vmcall_runs[i].x, vmcall_runs[i].ring);
    }
    measure_syscall(&e);
    return 0;
}

const struct isob_bench isob_bench_vmcall = {
    .name = "vmcall",
    .summary = "KVM guest exits (none, io, mmio, cpuid, hypercall) beside the null system call (SEIMI Table I)",
    .needs_mechanism = 0,
    .run = vmcall_run,
};
