/* kvm: the trusted code runs inside a KVM guest, in VMX non-root ring 0
 * (on this machine's KVM: whatever its vendor module makes of ring 0), as
 * SEIMI runs the process it protects (Wang et al., IEEE S&P 2020).
 *
 * One vCPU in 64-bit long mode with its own page tables
 * (include/isobench/kvm.h) sees four things, each at the address the host
 * process has it at: the executable's own mappings (so that the very
 * isob_trusted_call of the other native mechanisms runs there, unchanged),
 * the trusted heap, the shared buffer, and a control block with the guest's
 * stack.  A call writes its entry into the control block and runs the vCPU
 * (KVM_RUN); the guest calls isob_trusted_call and leaves with an OUT to a
 * port, which ends KVM_RUN with KVM_EXIT_IO.  One round trip is one
 * KVM_RUN and two world switches; nothing else crosses.
 *
 * What it isolates: the guest reaches no host memory but those regions
 * (its page tables map nothing else, and its physical memory is only their
 * slots).  What it does not: the host process keeps its own mapping of
 * every slot, as KVM reads guest memory through it, so the untrusted side
 * reads and writes the trusted heap by address.  The mechanism claims no
 * memory isolation, and its isolation matrix measures that (the in-process
 * cell reads the secret).  SEIMI puts both sides in one guest, where SMAP
 * separates them; here the untrusted side is the host process, from which
 * a slot of ordinary host memory cannot be hidden.
 *
 * Entries that make host calls (isobench/work.h: pipeio's I/O, memops'
 * discards, the fault count) would need system calls from the guest, which
 * has no kernel to make them: call() answers them -ENOSYS without entering
 * the guest, and isob_host_calls_ok() says so to the benchmarks that need
 * them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "isobench/kvm.h"
#include "isobench/mechanism.h"

#define KVM_STACK (64u * 1024u)
#define PAGE_ROUND(n) (((n) + 4095u) & ~(size_t)4095u)

struct kvm_comp {
    struct isob_comp base;
    struct isob_kvm_vm vm;
    struct isob_kvm_ctrl *ctrl;   /* first page of the control mapping; the stack follows */
    size_t ctrl_size;
    void *door;                   /* the doorbell page (reserved, PROT_NONE here) */
    pid_t pid;                    /* the process that made the guest, the only one that can run it */
    struct isob_msg *msg;
    void *heap;
    size_t shared_size, heap_size;
};

/* What every result's params say: the ring (once a guest ran), whether
 * this KVM is nested and the caveat.  Always a valid list of members. */
static char kvm_params[320] = "\"guest\":\"x86-64 long mode\"";

static void set_params(int ring)
{
    char vendor[16];
    int nested = isob_kvm_nested(vendor, sizeof vendor);
    char r[24] = "";
    if (ring >= 0)
        snprintf(r, sizeof r, ", ring %d", ring);
    snprintf(kvm_params, sizeof kvm_params,
             "\"guest\":\"x86-64 long mode%s, own page tables\",\"nested\":%s,\"caveat\":\"%s\"", r,
             nested ? "true" : "false", nested ? ISOB_KVM_CAVEAT : "bare metal: no nested virtualization");
}

/* A build with AddressSanitizer instruments the trusted code with loads of
 * shadow memory that the guest's page tables do not map: the memory slots
 * cannot cover it, and create fails (EFAULT).  That build says so instead;
 * the ordinary build runs kvm. */
#if defined(__SANITIZE_ADDRESS__)
#define KVM_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVM_SANITIZED 1
#endif
#endif

static int kvm_probe(char *why, size_t len)
{
    if (!strchr(kvm_params, ','))
        set_params(-1);
    int rc = isob_kvm_probe(why, len);
#ifdef KVM_SANITIZED
    if (rc == 0) {
        snprintf(why, len, "this build's trusted code is instrumented by AddressSanitizer, whose "
                 "shadow memory the guest does not map (the build without sanitizers runs kvm)");
        rc = -ENOTSUP;
    }
#endif
    return rc;
}

static int host_call_entry(unsigned entry)
{
    switch (entry) {
    case ISOB_ENTRY_IO_FILL:
    case ISOB_ENTRY_IO_WRITE:
    case ISOB_ENTRY_IO_READ:
    case ISOB_ENTRY_IO_ROUNDTRIP:
    case ISOB_ENTRY_IO_STREAM:
    case ISOB_ENTRY_MEM_ALLOC:
    case ISOB_ENTRY_MEM_FREE:
    case ISOB_ENTRY_HOST_FAULTS:
        return 1;
    default:
        return 0;
    }
}

static void kvm_destroy(struct isob_comp *c)
{
    struct kvm_comp *k = (struct kvm_comp *)c;
    isob_kvm_close(&k->vm);
    if (k->ctrl)
        munmap(k->ctrl, k->ctrl_size);
    isob_unmap(k->msg, k->shared_size);
    isob_unmap(k->heap, k->heap_size);
    if (k->door)
        munmap(k->door, 4096);
    free(k);
}

/* One run of the guest's call loop: fn(arg[0..3]).  0, or -EOWNERDEAD
 * with the exit in c->why. */
static int kvm_run_call(struct kvm_comp *k)
{
    int rc = isob_kvm_enter(&k->vm);
    if (rc == 0)
        return 0;
    char why[ISOB_COMP_WHY_LEN - 16];
    if (rc == -EFAULT)
        isob_kvm_exit_why(&k->vm, why, sizeof why);
    else if (rc == -EIO && k->pid != getpid())
        snprintf(why, sizeof why, "KVM_RUN: %s (a forked child cannot run its parent's guest)",
                 isob_strerror(rc));
    else
        snprintf(why, sizeof why, "KVM_RUN: %s", isob_strerror(rc));
    snprintf(k->base.why, sizeof k->base.why, "guest stopped: %s", why);
    return -EOWNERDEAD;
}

/* The guest at privilege level `ring`, its first run making the trusted
 * state (isob_trusted_init, in the guest).  0, or -errno; *internal is set
 * when KVM could not run the trusted code there (KVM_EXIT_INTERNAL_ERROR:
 * an instruction it emulates and cannot). */
static int guest_setup(struct kvm_comp *k, int ring, int *internal)
{
    char why[256];
    int rc;
    *internal = 0;
    isob_kvm_close(&k->vm);
    memset(k->ctrl, 0, 4096);
    if ((rc = isob_kvm_open(&k->vm, why, sizeof why)) != 0)
        return rc;
    k->vm.ring = ring;
    if ((rc = isob_kvm_map_self(&k->vm, why, sizeof why)) != 0 ||
        (rc = isob_kvm_map(&k->vm, k->heap, k->heap_size, 1, why, sizeof why)) != 0 ||
        (rc = isob_kvm_map(&k->vm, k->msg, k->shared_size, 1, why, sizeof why)) != 0 ||
        (rc = isob_kvm_map(&k->vm, k->ctrl, k->ctrl_size, 1, why, sizeof why)) != 0 ||
        (rc = isob_kvm_map_doorbell(&k->vm, k->door, why, sizeof why)) != 0 ||
        (rc = isob_kvm_start(&k->vm, isob_kvm_guest_entry(ISOB_KVM_GUEST_CALL),
                             (uint64_t)(uintptr_t)k->ctrl + k->ctrl_size, k->ctrl, why, sizeof why)) != 0)
        return rc;
    k->ctrl->door = (uint64_t)(uintptr_t)k->door;
    k->ctrl->fn = (uint64_t)(uintptr_t)isob_trusted_init;
    k->ctrl->arg[0] = (uint64_t)(uintptr_t)k->heap;
    k->ctrl->arg[1] = k->heap_size;
    if (kvm_run_call(k) != 0) {
        *internal = isob_kvm_internal_error(&k->vm);
        return -EFAULT;
    }
    return k->ctrl->ret ? 0 : -ENOMEM;
}

static int kvm_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    if (spec->shared_size <= sizeof(struct isob_msg))
        return -EINVAL;
    struct kvm_comp *k = calloc(1, sizeof *k);
    if (!k)
        return -ENOMEM;
    k->vm.sys = k->vm.vm = k->vm.vcpu = -1;
    k->pid = getpid();
    k->shared_size = PAGE_ROUND(spec->shared_size);
    k->heap_size = PAGE_ROUND(spec->heap_size);
    k->ctrl_size = 4096 + KVM_STACK;
    k->msg = isob_map(k->shared_size, 0);
    k->heap = isob_map(k->heap_size, 0);
    void *ctrl = mmap(NULL, k->ctrl_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    k->ctrl = ctrl == MAP_FAILED ? NULL : ctrl;
    /* Reserved and never accessible here: only the guest's page tables
     * map it, to a guest-physical page without memory. */
    void *door = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    k->door = door == MAP_FAILED ? NULL : door;
    k->base.data_cap = spec->shared_size - sizeof(struct isob_msg);
    if (!k->msg || !k->heap || !k->ctrl || !k->door) {
        kvm_destroy(&k->base);
        return -ENOMEM;
    }
    /* The heap stays out of core dumps, as the secrets of mprotect's. */
    madvise(k->heap, k->heap_size, MADV_DONTDUMP);
    /* Ring 0, as SEIMI; ring 3 where this KVM cannot run the trusted
     * code in ring 0 (kvm_pvm emulates ring 0, and its emulator lacks the
     * SSE instructions compiled code uses).  The params say which. */
    int internal;
    int rc = guest_setup(k, 0, &internal);
    if (rc && internal)
        rc = guest_setup(k, 3, &internal);
    if (rc) {
        kvm_destroy(&k->base);
        return rc;
    }
    set_params(k->vm.ring);
    k->base.why[0] = 0;
    uint64_t t = k->ctrl->ret;
    k->ctrl->fn = (uint64_t)(uintptr_t)isob_trusted_call;
    k->ctrl->arg[0] = t;
    k->ctrl->arg[2] = (uint64_t)(uintptr_t)k->msg;
    k->ctrl->arg[3] = k->base.data_cap;
    *out = &k->base;
    return 0;
}

static long kvm_call(struct isob_comp *c, unsigned entry)
{
    struct kvm_comp *k = (struct kvm_comp *)c;
    if (c->why[0])
        return -EOWNERDEAD;
    if (host_call_entry(entry))
        return -ENOSYS;
    k->ctrl->arg[1] = entry;
    if (kvm_run_call(k) != 0)
        return -EOWNERDEAD;
    return (long)k->ctrl->ret;
}

static struct isob_msg *kvm_shared(struct isob_comp *c)
{
    return ((struct kvm_comp *)c)->msg;
}

const struct isob_mechanism isob_mech_kvm = {
    .name = "kvm",
    .summary = "trusted code in a KVM guest (own page tables; ring 0, else ring 3), one KVM_RUN per call; "
               "the host still maps the guest's memory",
    .props = 0,
    .result_params = kvm_params,
    .probe = kvm_probe,
    .create = kvm_create,
    .call = kvm_call,
    .shared = kvm_shared,
    .destroy = kvm_destroy,
};
