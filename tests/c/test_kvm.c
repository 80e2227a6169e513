/* The KVM guests (include/isobench/kvm.h) and the kvm mechanism: a guest
 * that computes and returns its result through an exit, checked here; the
 * exits the vmcall benchmark measures; the mechanism's calls and what the
 * host can read of its guest's memory.  Cases that need a working
 * /dev/kvm skip, with the probe's reason, where it is absent or refuses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/kvm.h"
#include "isobench/mechanism.h"
#include "tap.h"

extern const struct isob_mechanism isob_mech_kvm;

static void need_kvm(void)
{
    char why[256];
    if (isob_kvm_probe(why, sizeof why) != 0)
        SKIP("%s", why);
}

/* The mechanism may refuse where the device works (a sanitized build). */
static void need_kvm_mechanism(void)
{
    char why[256];
    need_kvm();
    if (isob_mech_kvm.probe(why, sizeof why) != 0)
        SKIP("%s", why);
}

/* What the guest computes: integer only and serial (no vector code, which
 * a KVM that emulates ring 0 may not run), a value the host checks. */
__attribute__((noinline)) static uint64_t guest_fn(uint64_t x, uint64_t rounds, uint64_t c, uint64_t d)
{
    uint64_t h = x ^ d;
    for (uint64_t i = 0; i < rounds; i++) {
        h = h * 6364136223846793005ull + c;
        __asm__ volatile("" : "+r"(h));
    }
    return h;
}

struct guest {
    struct isob_kvm_vm vm;
    struct isob_kvm_ctrl *ctrl;
    unsigned char *stack;
    void *door;
};

#define STACK (16u * 1024u)

static int guest_make(struct guest *g, int ring, int self, enum isob_kvm_guest kind, char *why, size_t len)
{
    memset(g, 0, sizeof *g);
    int rc = isob_kvm_open(&g->vm, why, len);
    if (rc)
        return rc;
    g->vm.ring = ring;
    g->ctrl = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    g->stack = mmap(NULL, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    g->door = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g->ctrl == MAP_FAILED || g->stack == MAP_FAILED || g->door == MAP_FAILED)
        return -ENOMEM;
    uint64_t entry = isob_kvm_guest_entry(kind);
    if (self)
        rc = isob_kvm_map_self(&g->vm, why, len);
    else
        rc = isob_kvm_map_guest_code(&g->vm, kind, &entry, why, len);
    if (!rc)
        rc = isob_kvm_map(&g->vm, g->ctrl, 4096, 1, why, len);
    if (!rc)
        rc = isob_kvm_map(&g->vm, g->stack, STACK, 1, why, len);
    if (!rc)
        rc = isob_kvm_map_doorbell(&g->vm, g->door, why, len);
    if (!rc)
        rc = isob_kvm_start(&g->vm, entry, (uint64_t)(uintptr_t)g->stack + STACK, g->ctrl, why, len);
    g->ctrl->door = (uint64_t)(uintptr_t)g->door;
    return rc;
}

static void guest_free(struct guest *g)
{
    isob_kvm_close(&g->vm);
}

/* The guest runs guest_fn (the test binary's own code, mapped into it)
 * and returns through the doorbell exit: every value matches the host's.
 * Ring 0 where this KVM runs it; a ring it cannot run must end with an
 * internal error, never with a wrong value. */
static void t_guest_computes_and_returns_through_an_exit(void)
{
    need_kvm();
    char why[256];
    int rings_ok = 0;
    for (int ring = 0; ring <= 3; ring += 3) {
        struct guest g;
        int rc = guest_make(&g, ring, 1, ISOB_KVM_GUEST_CALL, why, sizeof why);
        if (rc) {
            fprintf(stderr, "# ring %d: %s\n", ring, why);
            CHECK(rc == 0);
        }
        g.ctrl->fn = (uint64_t)(uintptr_t)guest_fn;
        int ok = 1;
        for (uint64_t x = 1; x <= 5 && ok; x++) {
            g.ctrl->arg[0] = x;
            g.ctrl->arg[1] = 1000 * x;
            g.ctrl->arg[2] = 1442695040888963407ull;
            g.ctrl->arg[3] = 77;
            g.ctrl->ret = 0;
            rc = isob_kvm_enter(&g.vm);
            if (rc) {
                isob_kvm_exit_why(&g.vm, why, sizeof why);
                fprintf(stderr, "# ring %d: %s\n", ring, why);
                CHECK(isob_kvm_internal_error(&g.vm));
                ok = 0;
                break;
            }
            CHECK_EQ_LONG(g.ctrl->ret, guest_fn(x, 1000 * x, 1442695040888963407ull, 77));
            CHECK_EQ_LONG(g.ctrl->runs, x);
        }
        rings_ok += ok;
        guest_free(&g);
    }
    CHECK(rings_ok >= 1);
}

/* The minimal guest of the vmcall benchmark (its code copied to a page
 * of its own): each KVM_RUN ends at its OUT, and it counts its runs. */
static void t_minimal_guest_exits_to_user_space_each_run(void)
{
    need_kvm();
    char why[256];
    struct guest g;
    int rc = guest_make(&g, 0, 0, ISOB_KVM_GUEST_IO, why, sizeof why);
    if (rc)
        fprintf(stderr, "# %s\n", why);
    CHECK(rc == 0);
    for (uint64_t i = 1; i <= 3; i++) {
        CHECK_EQ_LONG(isob_kvm_enter(&g.vm), 0);
        CHECK_EQ_LONG(g.ctrl->runs, i);
    }
    if (g.vm.immediate_exit_ok) {
        CHECK_EQ_LONG(isob_kvm_enter_none(&g.vm), 0);
        CHECK_EQ_LONG(g.ctrl->runs, 3); /* immediate_exit: the guest did not run */
    }
    guest_free(&g);
}

/* CPUID in ring 0 is answered by KVM from the table the host set: every
 * answer carries the host's mark. */
static void t_cpuid_answers_come_from_this_kvm(void)
{
    need_kvm();
    char why[256];
    struct guest g;
    CHECK_EQ_LONG(guest_make(&g, 0, 0, ISOB_KVM_GUEST_CPUID, why, sizeof why), 0);
    g.ctrl->count = 10;
    if (isob_kvm_enter(&g.vm) != 0) {
        isob_kvm_exit_why(&g.vm, why, sizeof why);
        SKIP("CPUID in ring 0 does not reach KVM here: %s", why);
    }
    CHECK_EQ_LONG(g.ctrl->bad, 0);
    CHECK_EQ_LONG(g.ctrl->last, ISOB_KVM_CPUID_MARK);
    guest_free(&g);
}

/* A device path that does not open, and one that opens but is not KVM:
 * the probe refuses both, naming the path, and so does the mechanism. */
static void t_probe_refuses_missing_or_wrong_device(void)
{
    char why[256] = "";
    setenv(ISOB_KVM_DEVICE_ENV, "/nonexistent/kvm", 1);
    int rc = isob_kvm_probe(why, sizeof why);
    CHECK(rc < 0);
    CHECK(why[0] != 0);
    char mwhy[256] = "";
    CHECK(isob_mech_kvm.probe(mwhy, sizeof mwhy) < 0);
#if defined(__x86_64__)
    CHECK_EQ_LONG(rc, -ENOENT);
    CHECK(strstr(why, "/nonexistent/kvm") != NULL);
    CHECK(strstr(mwhy, "/nonexistent/kvm") != NULL);
    setenv(ISOB_KVM_DEVICE_ENV, "/dev/null", 1);
    rc = isob_kvm_probe(why, sizeof why);
    CHECK_EQ_LONG(rc, -ENOTSUP);
    CHECK(strstr(why, "KVM_GET_API_VERSION") != NULL);
#endif
    unsetenv(ISOB_KVM_DEVICE_ENV);
}

/* The mechanism: the trusted code's entries run in the guest and answer;
 * entries that need host calls are refused without entering it. */
static void t_kvm_mechanism_calls(void)
{
    need_kvm_mechanism();
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    struct isob_comp *c;
    CHECK_EQ_LONG(isob_comp_create(&isob_mech_kvm, &spec, &c), 0);
    struct isob_msg *m = c->mech->shared(c);
    m->arg[0] = 40;
    m->arg[1] = 2;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_ADD), 42);
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_EMPTY), 0);
    memset(m->data, 0x5a, 4096);
    m->len = 4096;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_SINK), isob_checksum(m->data, 4096));
    long calls = isob_call(c, ISOB_ENTRY_COUNT_CALLS);
    CHECK_EQ_LONG(calls, 4);
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_HOST_FAULTS), -ENOSYS);
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_IO_WRITE), -ENOSYS);
    /* A key-value round trip: the store lives in the guest's heap. */
    memcpy(m->data, "key" "value", 8);
    m->arg[0] = 3;
    m->arg[1] = 5;
    m->arg[2] = 0;
    m->len = 8;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_KV_SET), 0);
    memcpy(m->data, "key", 3);
    m->arg[0] = 3;
    m->len = 3;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_KV_GET), 5);
    CHECK(memcmp(m->data, "value", 5) == 0);
    CHECK(isob_comp_why(c) == NULL);
    isob_comp_destroy(c);
}

/* The finding the isolation matrix shows: the host process maps every
 * slot of its guest, so it reads (and writes) the secret the trusted code
 * planted in guest memory, at the address the guest gave. */
static void t_host_reads_the_guests_secret(void)
{
    need_kvm_mechanism();
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    struct isob_comp *c;
    CHECK_EQ_LONG(isob_comp_create(&isob_mech_kvm, &spec, &c), 0);
    struct isob_msg *m = c->mech->shared(c);
    m->arg[0] = 0x5ec2e7;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_SECRET_PLANT), 0);
    volatile uint64_t *where = (volatile uint64_t *)(uintptr_t)m->arg[1];
    CHECK_EQ_LONG(*where, 0x5ec2e7);
    *where = 7;
    m->arg[0] = 7;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_SECRET_CHECK), 1);
    isob_comp_destroy(c);
}

/* A guest belongs to the process that made it: a forked child's call
 * fails at once with the reason (the compartment is dead there), and the
 * parent's guest still answers. */
static void t_forked_child_cannot_run_the_guest(void)
{
    need_kvm_mechanism();
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    struct isob_comp *c;
    CHECK_EQ_LONG(isob_comp_create(&isob_mech_kvm, &spec, &c), 0);
    struct isob_msg *m = c->mech->shared(c);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int ok = isob_call(c, ISOB_ENTRY_EMPTY) == -EOWNERDEAD && isob_comp_why(c) &&
                 strstr(isob_comp_why(c), "forked child") != NULL &&
                 isob_call(c, ISOB_ENTRY_EMPTY) == -EOWNERDEAD;
        _exit(ok ? 0 : 1);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    m->arg[0] = 1;
    m->arg[1] = 2;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_ADD), 3);
    CHECK(isob_comp_why(c) == NULL);
    isob_comp_destroy(c);
}

int main(void)
{
    TAP_CASE(t_probe_refuses_missing_or_wrong_device);
    TAP_CASE(t_guest_computes_and_returns_through_an_exit);
    TAP_CASE(t_minimal_guest_exits_to_user_space_each_run);
    TAP_CASE(t_cpuid_answers_come_from_this_kvm);
    TAP_CASE(t_kvm_mechanism_calls);
    TAP_CASE(t_host_reads_the_guests_secret);
    TAP_CASE(t_forked_child_cannot_run_the_guest);
    return tap_done();
}
