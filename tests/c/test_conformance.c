/* The conformance suite every mechanism passes, and the isolation suite
 * for those that claim to isolate memory.  Each case forks (tap.h), and
 * each mechanism is checked against `direct`, the reference. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isobench/isolation.h"
#include "isobench/mechanism.h"
#include "isobench/server.h"
#include "tap.h"

/* Create/destroy cycles that must not leak, and how much the address space
 * may grow over them: malloc's own bookkeeping, half a KiB a cycle, which
 * is less than one leaked page a cycle.  Under an emulator (meson sets
 * ISOB_TEST_EMULATED for the arm64 build's tests under qemu-user) a cycle
 * of wasm's 8 GiB reservation costs some hundred times as much, so fewer
 * cycles run there (one leaked page a cycle still shows), with the limit
 * scaled alike. */
#define CREATE_DESTROY_CYCLES 1000
#define CREATE_DESTROY_CYCLES_EMULATED 30
#define CREATE_DESTROY_KIB_PER_CYCLE 0.512
/* A case's alarm (tap.h): kvm's 1000 create/destroy cycles took 75 s of a
 * busy 2-CPU machine (load average 21), so three times tap.h's default. */
#define CONFORMANCE_CASE_S (3 * TAP_TIMEOUT_S)

static const struct isob_mechanism *cur;

static struct isob_comp *make(void)
{
    char why[256] = "";
    if (cur->probe(why, sizeof why) != 0)
        SKIP("%s: %s", cur->name, why);
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    struct isob_comp *c = NULL;
    int rc = isob_comp_create(cur, &spec, &c);
    if (rc)
        fprintf(stderr, "# create %s: %s\n", cur->name, isob_strerror(rc));
    CHECK_EQ_LONG(rc, 0);
    CHECK(c->mech == cur);
    CHECK(c->data_cap >= 4096);
    return c;
}

/* Run one call on the mechanism and on direct with the same message. */
static long on_both(struct isob_comp *c, struct isob_comp *ref, unsigned entry,
                    const struct isob_msg *in, size_t len, long *ref_ret)
{
    struct isob_msg *m = c->mech->shared(c), *r = ref->mech->shared(ref);
    memcpy(m, in, sizeof *in + len);
    memcpy(r, in, sizeof *in + len);
    long got = isob_call(c, entry);
    *ref_ret = isob_call(ref, entry);
    CHECK(memcmp(m->arg, r->arg, sizeof m->arg) == 0);
    CHECK(memcmp(m->data, r->data, len) == 0);
    return got;
}

static void t_results_equal_direct(void)
{
    struct isob_comp *c = make();
    struct isob_comp *ref;
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    CHECK_EQ_LONG(isob_comp_create(isob_mechanism_find("direct"), &spec, &ref), 0);
    static unsigned char buf[sizeof(struct isob_msg) + 4096];
    struct isob_msg *in = (struct isob_msg *)buf;
    long want;
    for (unsigned e = 0; e <= ISOB_ENTRY_ECHO; e++) {
        for (size_t len = 0; len <= 4096; len = len ? len * 8 : 1) {
            in->len = (uint32_t)len;
            in->arg[0] = 40 + (int64_t)len;
            in->arg[1] = 2;
            for (size_t i = 0; i < len; i++)
                in->data[i] = (unsigned char)(i * 31 + e);
            long got = on_both(c, ref, e, in, len, &want);
            CHECK_EQ_LONG(got, want);
        }
    }
    /* Both served the same number of calls. */
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_COUNT_CALLS), isob_call(ref, ISOB_ENTRY_COUNT_CALLS));
    isob_comp_destroy(ref);
    isob_comp_destroy(c);
}

static void t_arguments_round_trip(void)
{
    struct isob_comp *c = make();
    struct isob_msg *m = c->mech->shared(c);
    m->arg[0] = 1234567890123ll;
    m->arg[1] = -1234567890000ll;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_ADD), 123);
    m->len = 4096;
    for (size_t i = 0; i < 4096; i++)
        m->data[i] = (unsigned char)i;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_ECHO), 4096);
    for (size_t i = 0; i < 4096; i++)
        CHECK_EQ_LONG(m->data[i], (unsigned char)~(unsigned char)i);
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_SINK), isob_checksum(m->data, 4096));
    isob_comp_destroy(c);
}

static void t_errors_propagate(void)
{
    struct isob_comp *c = make();
    struct isob_msg *m = c->mech->shared(c);
    m->arg[0] = EACCES;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_FAIL), -EACCES);
    CHECK_EQ_LONG(isob_call(c, 999), -ENOSYS);
    m->len = (uint32_t)c->data_cap + 1;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_SINK), -EINVAL);
    /* The compartment still serves after errors. */
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_EMPTY), 0);
    isob_comp_destroy(c);
}

static long open_fds(void)
{
    long n = 0;
    for (int fd = 0; fd < 4096; fd++)
        if (fcntl(fd, F_GETFD) != -1)
            n++;
    return n;
}

/* The size of the address space, summed over /proc/self/maps: the same
 * figure as VmSize in /proc/self/status, but one that qemu-user emulates
 * for the program it runs, where VmSize would be the emulator's own. */
static long mapped_kib(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    unsigned long lo, hi, total = 0;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2)
            total += hi - lo;
    fclose(f);
    return (long)(total / 1024);
}

static void t_create_destroy_repeatable(void)
{
    isob_comp_destroy(make()); /* the first one may set up lazily-created state */
    int cycles = getenv("ISOB_TEST_EMULATED") ? CREATE_DESTROY_CYCLES_EMULATED : CREATE_DESTROY_CYCLES;
    long fds = open_fds(), kib = mapped_kib();
    for (int i = 0; i < cycles; i++) {
        struct isob_comp *c = make();
        CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_EMPTY), 0);
        isob_comp_destroy(c);
    }
    CHECK_EQ_LONG(open_fds(), fds);
    /* No mapping left behind: the address space did not grow by more than
     * malloc's own bookkeeping (1 MiB would be one leaked heap). */
    CHECK(mapped_kib() - kib < (long)(cycles * CREATE_DESTROY_KIB_PER_CYCLE));
    /* No server process left behind. */
    CHECK(waitpid(-1, NULL, WNOHANG) <= 0);
}

/* The in-process cell: a mechanism that claims isolation meets exactly the
 * fault it declares (or, for wasm, its guest's escapes all trap); one that
 * claims none is seen to leak, which proves the test can fail. */
static void check_in_process(const struct isob_isolation *r)
{
    const struct isob_cell *cell = &r->cells[ISOB_ATK_IN_PROCESS];
    fprintf(stderr, "# %s: verdict %s; in-process %s: %s\n", cur->name, r->verdict,
            isob_cell_verdict_name(cell->verdict), cell->evidence);
    if (r->claims) {
        CHECK(strcmp(r->verdict, "enforced") == 0);
        CHECK_EQ_LONG(cell->verdict, ISOB_CELL_ENFORCED);
        CHECK_EQ_LONG(r->intact, 1);
        if (!cur->escape) {
            const char *want = isob_segv_code_name(r->expect_fault);
            CHECK(r->expect_fault != 0);
            CHECK(strstr(r->read, want) != NULL && strstr(r->write, want) != NULL);
        }
    } else {
        CHECK(strcmp(r->verdict, "none") == 0);
        CHECK_EQ_LONG(cell->verdict, ISOB_CELL_LEAKS);
        CHECK(strstr(r->read, "read the secret") != NULL);
        CHECK_EQ_LONG(r->intact, 0);
    }
}

static void t_isolation(void)
{
    char why[256] = "";
    if (cur->probe(why, sizeof why) != 0)
        SKIP("%s: %s", cur->name, why);
    struct isob_isolation r;
    CHECK_EQ_LONG(isob_isolation_test(cur, &r), 0);
    check_in_process(&r);
}

/* The whole matrix.  Every cell is measured; what the kernel must do is
 * checked where its rule is plain: a separate address space closed to
 * OS readers without root (the server is non-dumpable), open to root with
 * CAP_SYS_PTRACE; a mechanism that claims nothing open to its own caller. */
static void t_isolation_matrix(void)
{
    char why[256] = "";
    if (cur->probe(why, sizeof why) != 0)
        SKIP("%s: %s", cur->name, why);
    /* The OS-level probes reach another process's memory through the
     * kernel (ptrace, process_vm_*, /proc/PID/mem of emulated processes),
     * which qemu-user does not emulate. */
    if (getenv("ISOB_TEST_EMULATED"))
        SKIP("the attacker matrix's OS-level probes need a real kernel, not qemu-user");
    struct isob_isolation r;
    CHECK_EQ_LONG(isob_isolation_matrix(cur, &r), 0);
    check_in_process(&r);
    for (int a = ISOB_ATK_SAME_UID; a < ISOB_ATK__COUNT; a++)
        fprintf(stderr, "# %s: %s %s: %s; %s\n", cur->name, isob_attacker_name(a),
                isob_cell_verdict_name(r.cells[a].verdict), r.cells[a].method, r.cells[a].evidence);
    /* Every write of a probe was put back. */
    CHECK_EQ_LONG(r.secret_intact_after, 1);
    const struct isob_cell *same = &r.cells[ISOB_ATK_SAME_UID], *other = &r.cells[ISOB_ATK_OTHER_UID],
                           *root = &r.cells[ISOB_ATK_ROOT];
    CHECK(same->probed);
    CHECK_EQ_LONG(r.os_target_self, !(cur->props & ISOB_SEPARATE_AS));
    /* Every measured cell says what it covers and under what it holds. */
    for (int a = 0; a < ISOB_ATK__COUNT; a++)
        CHECK(r.cells[a].condition[0] != 0);
    CHECK(strstr(same->evidence, "TracerPid at creation: 0") != NULL);
    /* The pre-attached tracer: a server refuses to start under the naive
     * one (TracerPid names it), and the one that hides from TracerPid gets
     * in and reads it; an in-process compartment is read through the
     * caller either holds. */
    const struct isob_cell *pre = &r.cells[ISOB_ATK_PRE_ATTACHED];
#if defined(__x86_64__)
    if (isob_yama_ptrace_scope() <= 0) {
        CHECK(pre->traced);
        if (cur->props & ISOB_SEPARATE_AS) {
            CHECK_EQ_LONG(pre->truns[0].verdict, ISOB_CELL_ENFORCED);
            CHECK_EQ_LONG(pre->truns[0].create_rc, -ISOB_ETRACED);
            CHECK(strstr(pre->evidence, "creation refused") != NULL);
            CHECK_EQ_LONG(pre->truns[1].verdict, ISOB_CELL_LEAKS);
            CHECK_EQ_LONG(pre->truns[1].create_rc, 0);
            CHECK_EQ_LONG(pre->truns[1].caller_tracer_pid, 0);
            CHECK(pre->truns[1].stats.tracerpid_hidden >= 2);
            CHECK_EQ_LONG(pre->verdict, ISOB_CELL_LEAKS);
        } else if (!(cur->props & ISOB_ISOLATES_MEMORY)) {
            CHECK_EQ_LONG(pre->verdict, ISOB_CELL_LEAKS);
        }
    }
#endif
    if (cur->props & ISOB_SEPARATE_AS) {
        CHECK_EQ_LONG(same->verdict, ISOB_CELL_ENFORCED);
    } else {
        /* The caller's own process: whatever a mechanism does to pages or
         * keys, the kernel lets a process's threads reach its memory. */
        CHECK_EQ_LONG(same->verdict, ISOB_CELL_LEAKS);
    }
    if (geteuid() != 0) {
        CHECK_EQ_LONG(other->verdict, ISOB_CELL_UNTESTED);
        CHECK(strstr(other->evidence, "needs root") != NULL);
        CHECK_EQ_LONG(root->verdict, ISOB_CELL_UNTESTED);
        return;
    }
    /* Another uid is kept out of root's processes by the uid check alone. */
    CHECK_EQ_LONG(other->verdict, ISOB_CELL_ENFORCED);
    CHECK(root->probed);
    if (root->who.cap_sys_ptrace)
        CHECK_EQ_LONG(root->verdict, ISOB_CELL_LEAKS);
}

extern const struct isob_mechanism isob_mech_direct;

/* Fixtures of the in-process cell's rule, with mechanisms made up here. */

/* mprotect's fault is SEGV_ACCERR; declared as SEGV_MAPERR it is another
 * fault than promised, so not enforced, even though nothing leaked. */
static void t_unexpected_fault_is_not_enforced(void)
{
    struct isob_mechanism m = *isob_mechanism_find("mprotect");
    m.fault_code = SEGV_MAPERR;
    struct isob_isolation r;
    CHECK_EQ_LONG(isob_isolation_test(&m, &r), 0);
    fprintf(stderr, "# verdict %s; %s\n", r.verdict, r.cells[ISOB_ATK_IN_PROCESS].evidence);
    CHECK(strcmp(r.verdict, "unexpected") == 0);
    CHECK_EQ_LONG(r.cells[ISOB_ATK_IN_PROCESS].verdict, ISOB_CELL_UNTESTED);
    CHECK(strstr(r.reason, "SEGV_MAPERR") != NULL);
    CHECK(strstr(r.read, "SEGV_ACCERR") != NULL);
}

/* A mechanism that reports the address of something else: the read finds
 * other data without a fault, which is no pass, and nothing is written. */
static volatile uint64_t decoy = 42;

static long decoy_call(struct isob_comp *c, unsigned entry)
{
    long ret = isob_mech_direct.call(c, entry);
    if (entry == ISOB_ENTRY_SECRET_PLANT)
        isob_mech_direct.shared(c)->arg[1] = (int64_t)(uintptr_t)&decoy;
    return ret;
}

static void t_no_fault_other_data_is_not_a_pass(void)
{
    struct isob_mechanism m = isob_mech_direct;
    m.props = ISOB_ISOLATES_MEMORY;
    m.fault_code = SEGV_ACCERR;
    m.call = decoy_call;
    struct isob_isolation r;
    CHECK_EQ_LONG(isob_isolation_test(&m, &r), 0);
    fprintf(stderr, "# verdict %s; %s\n", r.verdict, r.cells[ISOB_ATK_IN_PROCESS].evidence);
    CHECK(strcmp(r.verdict, "unexpected") == 0);
    CHECK_EQ_LONG(r.cells[ISOB_ATK_IN_PROCESS].verdict, ISOB_CELL_UNTESTED);
    CHECK(strstr(r.read, "other data") != NULL);
    CHECK(strstr(r.write, "not tried") != NULL);
    CHECK(decoy == 42);
}

/* direct, claiming isolation it has not got: the cell leaks. */
static void t_false_claim_leaks(void)
{
    struct isob_mechanism m = isob_mech_direct;
    m.props = ISOB_ISOLATES_MEMORY;
    m.fault_code = SEGV_ACCERR;
    struct isob_isolation r;
    CHECK_EQ_LONG(isob_isolation_test(&m, &r), 0);
    CHECK(strcmp(r.verdict, "leaked") == 0);
    CHECK_EQ_LONG(r.cells[ISOB_ATK_IN_PROCESS].verdict, ISOB_CELL_LEAKS);
    CHECK_EQ_LONG(r.intact, 0);
}

int main(void)
{
    tap_case_s = CONFORMANCE_CASE_S;
    for (const struct isob_mechanism *const *m = isob_mechanisms; *m; m++) {
        if ((*m)->props & ISOB_TEST_ONLY)
            continue;
        cur = *m;
        char name[128];
#define RUN(fn)                                                  \
        snprintf(name, sizeof name, "%s: %s", cur->name, #fn);   \
        tap_run(name, fn)
        RUN(t_results_equal_direct);
        RUN(t_arguments_round_trip);
        RUN(t_errors_propagate);
        RUN(t_create_destroy_repeatable);
        RUN(t_isolation);
        RUN(t_isolation_matrix);
#undef RUN
    }
    TAP_CASE(t_unexpected_fault_is_not_enforced);
    TAP_CASE(t_no_fault_other_data_is_not_a_pass);
    TAP_CASE(t_false_claim_leaks);
    return tap_done();
}
