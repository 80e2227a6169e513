/* The OS-level probes (include/isobench/osprobe.h), against targets of
 * known content, and against every process mechanism.
 *
 * The fixtures prove that the probes can see a leak: a dumpable child
 * leaks its secret to the same uid, and a dumpable child running as the
 * other uid leaks to the other-uid prober.  Against them the same probes
 * then show that a non-dumpable child, and every mechanism that claims a
 * separate address space, refuse the same uid and another uid.  Each case
 * forks (tap.h). */
#include <errno.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/isolation.h"
#include "isobench/mechanism.h"
#include "isobench/osprobe.h"
#include "isobench/server.h"
#include "tap.h"

#define FIXTURE_SECRET 0x0123456789abcdefull

/* A child that holds the secret at a known address until told to check it. */
struct fixture {
    pid_t pid;
    uintptr_t addr;
    int go;        /* write end: one byte lets the child check and exit */
};

enum fixture_kind {
    FIX_DUMPABLE,      /* same uid, dumpable: the caller's own kind of process */
    FIX_NON_DUMPABLE,  /* same uid, PR_SET_DUMPABLE 0, as the mechanisms' servers */
    FIX_OTHER_UID,     /* the other uid, dumpable, any tracer allowed by Yama */
};

static struct fixture start_fixture(enum fixture_kind kind)
{
    int addr_pipe[2], go_pipe[2];
    CHECK(pipe(addr_pipe) == 0 && pipe(go_pipe) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(addr_pipe[0]);
        close(go_pipe[1]);
        static volatile uint64_t secret = FIXTURE_SECRET;
        if (kind == FIX_OTHER_UID) {
            gid_t g = ISOB_OSP_OTHER_UID;
            uid_t u = ISOB_OSP_OTHER_UID;
            if (setgroups(0, NULL) != 0 || setresgid(g, g, g) != 0 || setresuid(u, u, u) != 0)
                _exit(3);
            /* Changing uid made it non-dumpable; a fixture must not be. */
            prctl(PR_SET_DUMPABLE, 1);
        }
        if (kind == FIX_NON_DUMPABLE && prctl(PR_SET_DUMPABLE, 0) != 0)
            _exit(3);
        /* Under Yama's ptrace_scope 1 only ancestors may attach; the
         * probers are not all ancestors, and the fixture should leak to
         * whoever the uid rules let in.  EINVAL without Yama. */
        if (kind != FIX_NON_DUMPABLE)
            prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);
        uintptr_t a = (uintptr_t)&secret;
        if (write(addr_pipe[1], &a, sizeof a) != (ssize_t)sizeof a)
            _exit(3);
        char b;
        while (read(go_pipe[0], &b, 1) < 0 && errno == EINTR)
            ;
        _exit(secret == FIXTURE_SECRET ? 0 : 2);
    }
    close(addr_pipe[1]);
    close(go_pipe[0]);
    struct fixture f = {pid, 0, go_pipe[1]};
    CHECK(read(addr_pipe[0], &f.addr, sizeof f.addr) == (ssize_t)sizeof f.addr);
    close(addr_pipe[0]);
    return f;
}

/* Let the fixture check its secret; 0 when it was intact. */
static int finish_fixture(struct fixture *f)
{
    CHECK(write(f->go, "x", 1) == 1);
    close(f->go);
    int st;
    CHECK(waitpid(f->pid, &st, 0) == f->pid);
    CHECK(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static struct isob_osprobe_target target_of(const struct fixture *f)
{
    struct isob_osprobe_target t = {f->pid, f->addr, FIXTURE_SECRET, 0};
    return t;
}

static void show(const char *what, const struct isob_osprobe_result *res)
{
    for (int p = 0; p < ISOB_OSP__COUNT; p++)
        fprintf(stderr, "# %s: %s: outcome %d, %s, seen %d, changed %d, restored %d %s\n", what,
                isob_osprobe_name((enum isob_osprobe)p), res[p].outcome, res[p].err ? strerror(res[p].err) : "-",
                res[p].secret_seen, res[p].secret_changed, res[p].restored, res[p].note);
}

/* Every memory probe got the secret, every write landed and was put back,
 * and pidfd_getfd was granted. */
static void check_all_leak(const struct isob_osprobe_result *res)
{
    CHECK(res[ISOB_OSP_VM_READV].secret_seen);
    CHECK(res[ISOB_OSP_MEM_READ].secret_seen);
    CHECK(res[ISOB_OSP_PTRACE_PEEK].secret_seen);
    CHECK(res[ISOB_OSP_VM_WRITEV].secret_changed && res[ISOB_OSP_VM_WRITEV].restored);
    CHECK(res[ISOB_OSP_MEM_WRITE].secret_changed && res[ISOB_OSP_MEM_WRITE].restored);
    CHECK_EQ_LONG(res[ISOB_OSP_PIDFD_GETFD].outcome, ISOB_OSP_GRANTED);
}

/* Every probe was refused by the kernel, nothing seen, nothing changed. */
static void check_all_denied(const struct isob_osprobe_result *res)
{
    for (int p = 0; p < ISOB_OSP__COUNT; p++) {
        CHECK_EQ_LONG(res[p].outcome, ISOB_OSP_DENIED);
        CHECK(res[p].err == EPERM || res[p].err == EACCES);
        CHECK(!res[p].secret_seen && !res[p].secret_changed);
    }
}

/* The same-uid cases are about an unprivileged caller.  Root without
 * capabilities is no such caller: the kernel keeps it out of any process
 * that holds capabilities (the capability-subset rule), dumpable or not,
 * which would hide what these cases look at.  So as root a case first
 * becomes the other uid, dumpable like any ordinary process. */
static void become_unprivileged(void)
{
    if (geteuid() != 0)
        return;
    gid_t g = ISOB_OSP_OTHER_UID;
    uid_t u = ISOB_OSP_OTHER_UID;
    CHECK(setgroups(0, NULL) == 0 && setresgid(g, g, g) == 0 && setresuid(u, u, u) == 0);
    CHECK(prctl(PR_SET_DUMPABLE, 1) == 0);
}

static void need_root(const char *what)
{
    if (geteuid() != 0)
        SKIP("%s needs root (running as uid %ld)", what, (long)geteuid());
}

/* The fixture that proves the probes see a leak: a dumpable child of the
 * same uid gives its secret to every probe, and gets it back unchanged. */
static void t_dumpable_child_leaks_to_same_uid(void)
{
    become_unprivileged();
    struct fixture f = start_fixture(FIX_DUMPABLE);
    struct isob_osprobe_target t = target_of(&f);
    struct isob_osprobe_result res[ISOB_OSP__COUNT];
    struct isob_identity_info who;
    CHECK_EQ_LONG(isob_osprobe_as(ISOB_ID_SAME_UID, &t, res, &who), 0);
    show("dumpable, same uid", res);
    CHECK(who.available && !who.cap_sys_ptrace);
    CHECK_EQ_LONG(who.uid, getuid());
    check_all_leak(res);
    CHECK_EQ_LONG(finish_fixture(&f), 0);
}

static void t_non_dumpable_child_refuses_same_uid(void)
{
    become_unprivileged();
    struct fixture f = start_fixture(FIX_NON_DUMPABLE);
    struct isob_osprobe_target t = target_of(&f);
    struct isob_osprobe_result res[ISOB_OSP__COUNT];
    struct isob_identity_info who;
    CHECK_EQ_LONG(isob_osprobe_as(ISOB_ID_SAME_UID, &t, res, &who), 0);
    show("non-dumpable, same uid", res);
    check_all_denied(res);
    CHECK_EQ_LONG(finish_fixture(&f), 0);
}

/* The fixture of the other-uid test: a dumpable process of that uid leaks
 * to it, so a refusal below is the target's doing, not a dead prober. */
static void t_other_uid_child_leaks_to_other_uid(void)
{
    need_root("switching to another uid");
    struct fixture f = start_fixture(FIX_OTHER_UID);
    struct isob_osprobe_target t = target_of(&f);
    struct isob_osprobe_result res[ISOB_OSP__COUNT];
    struct isob_identity_info who;
    CHECK_EQ_LONG(isob_osprobe_as(ISOB_ID_OTHER_UID, &t, res, &who), 0);
    show("other uid's dumpable child, other uid", res);
    CHECK_EQ_LONG(who.uid, ISOB_OSP_OTHER_UID);
    CHECK(!who.cap_sys_ptrace);
    check_all_leak(res);
    CHECK_EQ_LONG(finish_fixture(&f), 0);
}

static void t_dumpable_child_refuses_other_uid(void)
{
    need_root("switching to another uid");
    struct fixture f = start_fixture(FIX_DUMPABLE);
    struct isob_osprobe_target t = target_of(&f);
    struct isob_osprobe_result res[ISOB_OSP__COUNT];
    struct isob_identity_info who;
    CHECK_EQ_LONG(isob_osprobe_as(ISOB_ID_OTHER_UID, &t, res, &who), 0);
    show("dumpable, other uid", res);
    check_all_denied(res);
    CHECK_EQ_LONG(finish_fixture(&f), 0);
}

/* Root with CAP_SYS_PTRACE reads a non-dumpable process all the same. */
static void t_root_reads_non_dumpable_child(void)
{
    need_root("probing as root");
    struct fixture f = start_fixture(FIX_NON_DUMPABLE);
    struct isob_osprobe_target t = target_of(&f);
    struct isob_osprobe_result res[ISOB_OSP__COUNT];
    struct isob_identity_info who;
    CHECK_EQ_LONG(isob_osprobe_as(ISOB_ID_ROOT, &t, res, &who), 0);
    show("non-dumpable, root", res);
    if (!who.cap_sys_ptrace) {
        finish_fixture(&f);
        SKIP("root without CAP_SYS_PTRACE here");
    }
    check_all_leak(res);
    CHECK_EQ_LONG(finish_fixture(&f), 0);
}

static void t_identity_unavailable_is_untested(void)
{
    struct isob_osprobe_target t = {getpid(), 0, 0, 0};
    struct isob_osprobe_result res[ISOB_OSP__COUNT];
    struct isob_identity_info who;
    /* Root can become anyone: give that up first, so that the root and
     * other-uid probers are the ones that cannot exist. */
    become_unprivileged();
    CHECK(isob_osprobe_as(ISOB_ID_ROOT, &t, res, &who) < 0);
    CHECK(!who.available && strstr(who.why, "needs root") != NULL);
    CHECK(isob_osprobe_as(ISOB_ID_OTHER_UID, &t, res, &who) < 0);
    CHECK(!who.available && strstr(who.why, "needs root") != NULL);
    /* And the matrix says so: untested, with the reason, never enforced. */
    struct isob_isolation r;
    CHECK_EQ_LONG(isob_isolation_matrix(isob_mechanism_find("process-futex"), &r), 0);
    CHECK_EQ_LONG(r.cells[ISOB_ATK_OTHER_UID].verdict, ISOB_CELL_UNTESTED);
    CHECK(strstr(r.cells[ISOB_ATK_OTHER_UID].evidence, "needs root") != NULL);
    CHECK_EQ_LONG(r.cells[ISOB_ATK_ROOT].verdict, ISOB_CELL_UNTESTED);
    CHECK_EQ_LONG(r.cells[ISOB_ATK_SAME_UID].verdict, ISOB_CELL_ENFORCED);
}

/* Whether m claims its own address space, is not a test-only variant, and
 * runs here (else it says why not on stderr). */
static int process_mechanism_here(const struct isob_mechanism *m)
{
    if (!(m->props & ISOB_SEPARATE_AS) || (m->props & ISOB_TEST_ONLY))
        return 0;
    char why[256];
    if (m->probe(why, sizeof why) != 0) {
        fprintf(stderr, "# %s: not available: %s\n", m->name, why);
        return 0;
    }
    return 1;
}

/* The secret planted in c's compartment, and where it lies: an address in
 * a process other than this one. */
static struct isob_osprobe_target plant_secret(const struct isob_mechanism *m,
                                               struct isob_comp *c)
{
    struct isob_msg *msg = m->shared(c);
    msg->arg[0] = (int64_t)ISOB_SECRET;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_SECRET_PLANT), 0);
    struct isob_place where = {0, 0};
    CHECK_EQ_LONG(m->locate(c, (uint64_t)msg->arg[1], &where), 0);
    CHECK(where.pid > 0 && where.pid != getpid());
    return (struct isob_osprobe_target){where.pid, where.addr, ISOB_SECRET, 0};
}

/* Each OS-level probe, as the other uid and as the same uid without
 * capabilities, against every mechanism that claims its own address
 * space: none may get through. */
static void probe_process_mechanisms(enum isob_identity id)
{
    /* Against root's compartments for the other uid, as the matrix does;
     * an unprivileged caller's own for the same uid. */
    if (id == ISOB_ID_OTHER_UID)
        need_root("switching to another uid");
    else
        become_unprivileged();
    int tried = 0;
    for (const struct isob_mechanism *const *m = isob_mechanisms; *m; m++) {
        if (!process_mechanism_here(*m))
            continue;
        CHECK((*m)->locate != NULL);
        struct isob_comp_spec spec;
        isob_spec_defaults(&spec);
        struct isob_comp *c;
        CHECK_EQ_LONG(isob_comp_create(*m, &spec, &c), 0);
        struct isob_osprobe_target t = plant_secret(*m, c);
        struct isob_msg *msg = (*m)->shared(c);
        struct isob_osprobe_result res[ISOB_OSP__COUNT];
        struct isob_identity_info who;
        CHECK_EQ_LONG(isob_osprobe_as(id, &t, res, &who), 0);
        fprintf(stderr, "# %s as %s (%s)\n", (*m)->name, isob_identity_name(id), who.how);
        show((*m)->name, res);
        check_all_denied(res);
        msg->arg[0] = (int64_t)ISOB_SECRET;
        CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_SECRET_CHECK), 1);
        CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_EMPTY), 0);
        isob_comp_destroy(c);
        tried++;
    }
    CHECK(tried >= 4);
}

static void t_process_mechanisms_refuse_other_uid(void)
{
    probe_process_mechanisms(ISOB_ID_OTHER_UID);
}

static void t_process_mechanisms_refuse_same_uid(void)
{
    probe_process_mechanisms(ISOB_ID_SAME_UID);
}

/* The probes never write anywhere but the secret: a word next to it is
 * untouched, and the secret itself is back as it was. */
static void t_writes_touch_only_the_secret(void)
{
    static volatile uint64_t words[3] = {0x1111, FIXTURE_SECRET, 0x3333};
    struct isob_osprobe_target t = {getpid(), (uintptr_t)&words[1], FIXTURE_SECRET, 0};
    struct isob_osprobe_result r;
    CHECK_EQ_LONG(isob_osprobe_run(ISOB_OSP_VM_WRITEV, &t, &r), 0);
    CHECK(r.secret_changed && r.restored);
    CHECK_EQ_LONG(isob_osprobe_run(ISOB_OSP_MEM_WRITE, &t, &r), 0);
    CHECK(r.secret_changed && r.restored);
    CHECK(words[0] == 0x1111 && words[1] == FIXTURE_SECRET && words[2] == 0x3333);
}

/* ---- The pre-attached tracer and the defences against it ---- */

/* Attach the tracer of osprobe.h to this process; a kernel that refuses
 * it for Yama is a SKIP with the reason (nothing here to measure). */
static void attach_tracer_mode(struct isob_tracer *t, unsigned flags)
{
    char why[160] = "";
    int rc = isob_tracer_attach_mode(t, flags, why, sizeof why);
    if (rc == -ENOTSUP)
        SKIP("%s", why);
    if (rc && isob_yama_ptrace_scope() >= 1)
        SKIP("Yama ptrace_scope %d keeps a child from tracing its parent: %s", isob_yama_ptrace_scope(), why);
    if (rc)
        fprintf(stderr, "# attach: %s\n", why);
    CHECK_EQ_LONG(rc, 0);
}

static void attach_tracer(struct isob_tracer *t)
{
    attach_tracer_mode(t, 0);
}

static void show_tracer(const char *what, const struct isob_osprobe_result *res, const struct isob_tracer_stats *st)
{
    for (int p = 0; p < ISOB_TRACER_PROBES; p++)
        fprintf(stderr, "# %s: %s: outcome %d, %s, seen %d\n", what, isob_tracer_probe_name(p), res[p].outcome,
                res[p].err ? strerror(res[p].err) : "-", res[p].secret_seen);
    fprintf(stderr, "# %s: followed %d, rewrote %d, faked %d, TracerPid hidden %d\n", what, st->followed,
            st->set_rewritten, st->get_faked, st->tracerpid_hidden);
}

/* The probe can see a leak: a child forked while the tracer holds its
 * parent makes itself non-dumpable and checks it, as every server does,
 * and believes it; the tracer rewrote the one call, faked the other, and
 * reads the child's secret through both channels. */
static void t_pre_attached_tracer_keeps_a_fork_open(void)
{
    become_unprivileged();
    struct isob_tracer t;
    attach_tracer(&t);
    CHECK_EQ_LONG(isob_tracer_pid(0), t.pid);
    int addr_pipe[2], go_pipe[2];
    CHECK(pipe(addr_pipe) == 0 && pipe(go_pipe) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        static volatile uint64_t secret = FIXTURE_SECRET;
        struct { uintptr_t a; long closed; } rep = {(uintptr_t)&secret, isob_caller_close_to_readers()};
        if (write(addr_pipe[1], &rep, sizeof rep) != (ssize_t)sizeof rep)
            _exit(3);
        char b;
        while (read(go_pipe[0], &b, 1) < 0 && errno == EINTR)
            ;
        _exit(0);
    }
    struct { uintptr_t a; long closed; } rep;
    CHECK(read(addr_pipe[0], &rep, sizeof rep) == (ssize_t)sizeof rep);
    /* The child was told it is closed... */
    CHECK_EQ_LONG(rep.closed, 0);
    struct isob_osprobe_target tg = {pid, rep.a, FIXTURE_SECRET, 0};
    struct isob_osprobe_result res[ISOB_TRACER_PROBES];
    CHECK_EQ_LONG(isob_tracer_probe(&t, &tg, res), 0);
    CHECK(write(go_pipe[1], "x", 1) == 1);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    struct isob_tracer_stats stats;
    isob_tracer_stop(&t, &stats);
    show_tracer("fork", res, &stats);
    /* ...and is not: both reads get the secret. */
    CHECK(res[ISOB_TRACER_VM_READV].secret_seen);
    CHECK(res[ISOB_TRACER_MEM_READ].secret_seen);
    CHECK(stats.followed >= 2);
    CHECK(stats.set_rewritten >= 1 && stats.get_faked >= 1);
    CHECK_EQ_LONG(isob_tracer_pid(0), 0);
}

/* A server refuses to start while traced: every mechanism with a
 * separate address space fails its creation with -ISOB_ETRACED under the
 * pre-attached tracer.  The deliberately open variant (test-traceable,
 * process-futex without the check) is created, and the same tracer reads
 * its secret: the check is what closes the hole, against this tracer,
 * which does not hide (t_hiding_tracer_reads_process_servers: one that
 * does gets past it). */
static void t_traced_servers_refuse_to_start(void)
{
    become_unprivileged();
    struct isob_tracer t;
    attach_tracer(&t);
    int refused = 0;
    const struct isob_mechanism *open_variant = NULL;
    for (const struct isob_mechanism *const *m = isob_mechanisms; *m; m++) {
        if (strcmp((*m)->name, "test-traceable") == 0)
            open_variant = *m;
        if (!process_mechanism_here(*m))
            continue;
        struct isob_comp_spec spec;
        isob_spec_defaults(&spec);
        struct isob_comp *c = NULL;
        int rc = isob_comp_create(*m, &spec, &c);
        fprintf(stderr, "# %s traced: create %s\n", (*m)->name, rc ? isob_errno_name(rc) : "succeeded");
        if (rc == 0)
            isob_comp_destroy(c);
        CHECK_EQ_LONG(rc, -ISOB_ETRACED);
        refused++;
    }
    CHECK(refused >= 4);
    CHECK(open_variant != NULL);
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    struct isob_comp *c;
    CHECK_EQ_LONG(isob_comp_create(open_variant, &spec, &c), 0);
    struct isob_osprobe_target tg = plant_secret(open_variant, c);
    struct isob_osprobe_result res[ISOB_TRACER_PROBES];
    CHECK_EQ_LONG(isob_tracer_probe(&t, &tg, res), 0);
    isob_comp_destroy(c);
    struct isob_tracer_stats stats;
    isob_tracer_stop(&t, &stats);
    show_tracer("test-traceable", res, &stats);
    CHECK(res[ISOB_TRACER_VM_READV].secret_seen && res[ISOB_TRACER_MEM_READ].secret_seen);
    CHECK(stats.set_rewritten >= 1);
}

/* The attack on the refusal above: a tracer that also rewrites TracerPid
 * in what its tracees read (ISOB_TRACER_HIDE) is not found by the caller
 * or by any server, every process mechanism's creation succeeds under it,
 * and it reads the secret of each, process-futex among them.  The naive
 * tracer's refusal (t_traced_servers_refuse_to_start) is a defence against
 * a tracer that does not hide, no more. */
static void t_hiding_tracer_reads_process_servers(void)
{
    become_unprivileged();
    struct isob_tracer t;
    attach_tracer_mode(&t, ISOB_TRACER_HIDE);
    /* Traced, and told it is not. */
    CHECK(t.pid > 0);
    CHECK_EQ_LONG(isob_tracer_pid(0), 0);
    int read_futex = 0, created = 0;
    for (const struct isob_mechanism *const *m = isob_mechanisms; *m; m++) {
        if (!process_mechanism_here(*m))
            continue;
        struct isob_comp_spec spec;
        isob_spec_defaults(&spec);
        struct isob_comp *c = NULL;
        int rc = isob_comp_create(*m, &spec, &c);
        fprintf(stderr, "# %s under the hiding tracer: create %s\n", (*m)->name,
                rc ? isob_errno_name(rc) : "succeeded");
        CHECK_EQ_LONG(rc, 0);
        created++;
        struct isob_osprobe_target tg = plant_secret(*m, c);
        struct isob_osprobe_result res[ISOB_TRACER_PROBES];
        CHECK_EQ_LONG(isob_tracer_probe(&t, &tg, res), 0);
        show_tracer((*m)->name, res, &t.stats);
        isob_comp_destroy(c);
        CHECK(res[ISOB_TRACER_VM_READV].secret_seen || res[ISOB_TRACER_MEM_READ].secret_seen);
        if (strcmp((*m)->name, "process-futex") == 0)
            read_futex = res[ISOB_TRACER_VM_READV].secret_seen && res[ISOB_TRACER_MEM_READ].secret_seen;
    }
    struct isob_tracer_stats stats;
    isob_tracer_stop(&t, &stats);
    CHECK(created >= 4);
    CHECK(read_futex);
    /* Each server's check read TracerPid, and was lied to. */
    CHECK(stats.hides == 1);
    CHECK(stats.tracerpid_hidden >= 1 + created);
    CHECK(stats.set_rewritten >= created && stats.get_faked >= created);
    CHECK_EQ_LONG(isob_tracer_pid(0), 0);
}

/* The caller's own step (isob_caller_close_to_readers) shuts out a tracer
 * that comes after it: the same attach that succeeds on a caller without
 * the step is refused with EPERM after it. */
static void t_closed_caller_refuses_later_tracers(void)
{
    become_unprivileged();
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* Without the step: the tracer gets in. */
        struct isob_tracer t;
        char why[160] = "";
        int rc = isob_tracer_attach(&t, why, sizeof why);
        if (rc == 0)
            isob_tracer_stop(&t, NULL);
        _exit(rc == 0 ? 0 : rc == -ENOTSUP ? 4 : 1);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 4)
        SKIP("the pre-attached tracer is not built for this architecture");
    if (isob_yama_ptrace_scope() >= 1 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        SKIP("Yama ptrace_scope %d keeps a child from tracing its parent", isob_yama_ptrace_scope());
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_EQ_LONG(isob_caller_close_to_readers(), 0);
    CHECK_EQ_LONG(prctl(PR_GET_DUMPABLE), 0);
    struct isob_tracer t;
    char why[160] = "";
    int rc = isob_tracer_attach(&t, why, sizeof why);
    fprintf(stderr, "# after the step: %s\n", rc ? why : "attached");
    CHECK_EQ_LONG(rc, -EPERM);
}

int main(void)
{
    TAP_CASE(t_dumpable_child_leaks_to_same_uid);
    TAP_CASE(t_non_dumpable_child_refuses_same_uid);
    TAP_CASE(t_other_uid_child_leaks_to_other_uid);
    TAP_CASE(t_dumpable_child_refuses_other_uid);
    TAP_CASE(t_root_reads_non_dumpable_child);
    TAP_CASE(t_identity_unavailable_is_untested);
    TAP_CASE(t_process_mechanisms_refuse_other_uid);
    TAP_CASE(t_process_mechanisms_refuse_same_uid);
    TAP_CASE(t_writes_touch_only_the_secret);
    TAP_CASE(t_pre_attached_tracer_keeps_a_fork_open);
    TAP_CASE(t_traced_servers_refuse_to_start);
    TAP_CASE(t_hiding_tracer_reads_process_servers);
    TAP_CASE(t_closed_caller_refuses_later_tracers);
    return tap_done();
}
