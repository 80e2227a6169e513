/* The confinements' own tests: each one, applied, verifies itself from what
 * the kernel reports; verification fails on a process it was not applied
 * to, and on one whose confinement broke (a dead supervisor, the wrong
 * filter, a missing domain); helper processes die with the process they
 * serve.  Every case runs in a forked child (tap.h), so a confinement never
 * outlives its case; where the kernel lacks one, the case says SKIP. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isobench/confine.h"
#include "tap.h"

/* Calls the cases trap or allow as "measured". */
static const int measured[] = {SYS_getppid};
/* How many measured calls a case makes. */
#define CALLS 100
/* How long a case waits for a helper to die. */
#define DEATH_TIMEOUT_MS ((int)tap_limit(120) * 1000)

static char test_dir[64];

static struct isob_confine_req req(void)
{
    struct isob_confine_req r = {.calls = measured, .ncalls = 1, .dir = test_dir, .helper_cpu = -1};
    return r;
}

static void make_dir(void)
{
    snprintf(test_dir, sizeof test_dir, "/tmp/isob-confine-test-XXXXXX");
    CHECK(mkdtemp(test_dir) != NULL);
}

/* Apply c's variant or SKIP when the kernel cannot; CHECK that it worked. */
static void enter(struct isob_confine_state *st, const char *name, unsigned variant)
{
    const struct isob_confinement *c = isob_confine_find(name);
    CHECK(c != NULL);
    char why[512] = "";
    if (c->probe(why, sizeof why) != 0)
        SKIP("%s: %s", name, why);
    isob_confine_init(st, c, variant);
    tap_mark_confined();
    struct isob_confine_req r = req();
    int rc = isob_confine_enter(st, &r, why, sizeof why);
    if (rc)
        fprintf(stderr, "# %s: %s\n", name, why);
    CHECK_EQ_LONG(rc, 0);
    CHECK(st->evidence[0] != 0);
}

/* verify on a process c was never applied to must fail, with a reason. */
static void verify_unconfined_fails(const char *name, unsigned variant)
{
    const struct isob_confinement *c = isob_confine_find(name);
    CHECK(c != NULL);
    struct isob_confine_state st;
    isob_confine_init(&st, c, variant);
    char why[512] = "";
    CHECK(isob_confine_verify(&st, why, sizeof why) < 0);
    CHECK(why[0] != 0);
    fprintf(stderr, "# %s unconfined: %s\n", name, why);
}

/* Wait (as subreaper) for pid to die: 1 if it did within the time-out. */
static int dies(pid_t pid)
{
    for (int ms = 0; ms < DEATH_TIMEOUT_MS; ms++) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD && kill(pid, 0) != 0))
            return 1;
        struct timespec t = {0, 1000000};
        nanosleep(&t, NULL);
    }
    return 0;
}

static void t_registry(void)
{
    int n = 0;
    for (const struct isob_confinement *const *c = isob_confinements; *c; c++, n++) {
        CHECK((*c)->name && (*c)->summary && (*c)->threat && (*c)->variants && (*c)->variants[0]);
        CHECK((*c)->probe && (*c)->apply && (*c)->verify);
        CHECK(isob_confine_find((*c)->name) == *c);
    }
    CHECK_EQ_LONG(n, 6);
    CHECK(strcmp(isob_confinements[0]->name, "none") == 0);
    const struct isob_confinement *c;
    int v;
    char why[256];
    CHECK_EQ_LONG(isob_confine_parse("seccomp-allow", &c, &v, why, sizeof why), 0);
    CHECK_EQ_LONG(v, -1);
    CHECK_EQ_LONG(isob_confine_parse("seccomp-allow:300-args", &c, &v, why, sizeof why), 0);
    CHECK_EQ_LONG(v, 2);
    CHECK_EQ_LONG(isob_confine_parse("seccomp-allow:7", &c, &v, why, sizeof why), -EINVAL);
    CHECK(strstr(why, "300-args") != NULL);
    CHECK_EQ_LONG(isob_confine_parse("chroot", &c, &v, why, sizeof why), -EINVAL);
    CHECK_EQ_LONG(isob_confine_parse(":1", &c, &v, why, sizeof why), -EINVAL);
}

static void t_none_verifies(void)
{
    struct isob_confine_state st;
    enter(&st, "none", 0);
    CHECK(strstr(st.evidence, "\"tracer_pid\":0") != NULL);
    CHECK_EQ_LONG(isob_confine_events(&st), (long long)UINT64_MAX);
}

/* A baseline under a debugger is no baseline: none refuses it. */
static void t_none_refuses_a_traced_process(void)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0)
            _exit(3);
        raise(SIGSTOP);
        struct isob_confine_state st;
        isob_confine_init(&st, isob_confine_find("none"), 0);
        char why[256] = "";
        _exit(isob_confine_verify(&st, why, sizeof why) == -EPERM && strstr(why, "traced") ? 0 : 1);
    }
    int st;
    for (;;) {
        CHECK_EQ_LONG(waitpid(pid, &st, 0), pid);
        if (!WIFSTOPPED(st))
            break;
        ptrace(PTRACE_CONT, pid, 0, WSTOPSIG(st) == SIGSTOP ? 0 : WSTOPSIG(st));
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
        SKIP("ptrace(PTRACE_TRACEME) is not allowed here");
    CHECK(WIFEXITED(st));
    CHECK_EQ_LONG(WEXITSTATUS(st), 0);
}

static void t_seccomp_allow_variants(void)
{
    for (unsigned v = 0; v < 3; v++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            struct isob_confine_state st;
            enter(&st, "seccomp-allow", v);
            /* The measured call is allowed in every variant. */
            for (int i = 0; i < CALLS; i++)
                CHECK_EQ_LONG(syscall(SYS_getppid), getppid());
            CHECK(strstr(st.evidence, v == 0 ? "\"rules\":1" : "\"rules\":300") != NULL);
            CHECK(strstr(st.evidence, v == 2 ? "\"args_checked\":true" : "\"args_checked\":false"));
            /* A call outside the 300: EPERM; the one rule allows it. */
            errno = 0;
            long r = syscall(ISOB_CONFINE_PROBE_NR, ISOB_CONFINE_PROBE_ARG);
            if (v == 0)
                CHECK(r >= 0);
            else
                CHECK(r == -1 && errno == EPERM);
            tap_exit(0);
        }
        int st;
        CHECK_EQ_LONG(waitpid(pid, &st, 0), pid);
        if (WIFEXITED(st) && WEXITSTATUS(st) == TAP_EXIT_SKIP)
            SKIP("seccomp filters unavailable");
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
}

static void t_seccomp_allow_unconfined_fails(void) { verify_unconfined_fails("seccomp-allow", 1); }

/* A filter that is not the one claimed is caught: the allow-all filter
 * verified as the 300-rule list lets the probe through. */
static void t_seccomp_allow_wrong_filter_fails(void)
{
    struct isob_confine_state st;
    enter(&st, "seccomp-allow", 0);
    st.variant = 1;
    char why[512] = "";
    CHECK(isob_confine_verify(&st, why, sizeof why) < 0);
    CHECK(strstr(why, "EPERM") != NULL);
}

static void t_seccomp_notify_idle(void)
{
    struct isob_confine_state st;
    enter(&st, "seccomp-notify", 0);
    CHECK(st.helper > 0);
    uint64_t e0 = isob_confine_events(&st);
    for (int i = 0; i < CALLS; i++)
        CHECK_EQ_LONG(syscall(SYS_getppid), getppid());
    /* Idle: nothing measured reaches the supervisor. */
    CHECK_EQ_LONG(isob_confine_events(&st) - e0, 0);
    CHECK(!st.traps_calls);
}

static void t_seccomp_notify_trap(void)
{
    struct isob_confine_state st;
    enter(&st, "seccomp-notify", 1);
    CHECK(st.traps_calls);
    uint64_t e0 = isob_confine_events(&st);
    for (int i = 0; i < CALLS; i++)
        CHECK_EQ_LONG(syscall(SYS_getppid), getppid());
    /* getppid() itself goes through the supervisor as well. */
    CHECK(isob_confine_events(&st) - e0 >= CALLS);
}

/* The supervisor gone, verification fails, and a trapped call cannot run. */
static void t_seccomp_notify_dead_supervisor_fails(void)
{
    struct isob_confine_state st;
    enter(&st, "seccomp-notify", 1);
    CHECK_EQ_LONG(kill(st.helper, SIGKILL), 0);
    CHECK(dies(st.helper));
    char why[512] = "";
    CHECK(isob_confine_verify(&st, why, sizeof why) < 0);
    errno = 0;
    CHECK_EQ_LONG(syscall(SYS_getppid), -1);
    CHECK_EQ_LONG(errno, ENOSYS);
}

static void t_seccomp_notify_unconfined_fails(void) { verify_unconfined_fails("seccomp-notify", 1); }

static void t_ptrace(void)
{
    struct isob_confine_state st;
    enter(&st, "ptrace", 0);
    long tracer = 0;
    CHECK_EQ_LONG(isob_status_field("TracerPid", &tracer), 0);
    CHECK_EQ_LONG(tracer, st.helper);
    uint64_t e0 = isob_confine_events(&st);
    for (int i = 0; i < CALLS; i++)
        CHECK_EQ_LONG(syscall(SYS_getppid), getppid());
    CHECK(isob_confine_events(&st) - e0 >= CALLS);
    /* A child is traced too: its measured calls stop as well. */
    e0 = isob_confine_events(&st);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        for (int i = 0; i < CALLS; i++)
            syscall(SYS_getppid);
        _exit(0);
    }
    int ws;
    CHECK_EQ_LONG(waitpid(pid, &ws, 0), pid);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    CHECK(isob_confine_events(&st) - e0 >= CALLS);
}

static void t_ptrace_unconfined_fails(void) { verify_unconfined_fails("ptrace", 0); }

static void t_landlock(void)
{
    /* The domain is applied in a child: the directory outside it can only
     * be removed from here. */
    make_dir();
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct isob_confine_state st;
        enter(&st, "landlock", 0);
        CHECK(strstr(st.evidence, "\"abi\":") != NULL);
        CHECK(strstr(st.evidence, "Permission denied") != NULL);
        /* Inside the test directory files come and go; outside nothing opens. */
        char path[128];
        snprintf(path, sizeof path, "%s/inside", test_dir);
        int fd = open(path, O_CREAT | O_WRONLY, 0600);
        CHECK(fd >= 0);
        close(fd);
        CHECK_EQ_LONG(unlink(path), 0);
        CHECK_EQ_LONG(open(st.probe_path, O_RDONLY), -1);
        CHECK_EQ_LONG(errno, EACCES);
        CHECK_EQ_LONG(open("/tmp", O_RDONLY | O_DIRECTORY), -1);
        tap_exit(0);
    }
    int ws;
    CHECK_EQ_LONG(waitpid(pid, &ws, 0), pid);
    rmdir(test_dir);
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == TAP_EXIT_SKIP)
        SKIP("Landlock unavailable here");
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

/* The same checks on a process without the domain: the outside open works. */
static void t_landlock_unconfined_fails(void)
{
    make_dir();
    verify_unconfined_fails("landlock", 0);
    struct isob_confine_state st;
    isob_confine_init(&st, isob_confine_find("landlock"), 0);
    snprintf(st.probe_path, sizeof st.probe_path, "/proc/self/status");
    snprintf(st.inside_path, sizeof st.inside_path, "%s/.check", test_dir);
    char why[512] = "";
    CHECK(isob_confine_verify(&st, why, sizeof why) < 0);
    CHECK(strstr(why, "succeeded") != NULL);
    rmdir(test_dir);
}

static void t_userns(void)
{
    struct isob_confine_state st;
    enter(&st, "userns", 0);
    CHECK_EQ_LONG(getuid(), 0);
    CHECK(strstr(st.evidence, "\"loopback_datagram\":\"arrived\"") != NULL);
}

static void t_userns_unconfined_fails(void) { verify_unconfined_fails("userns", 0); }

/* A process that applied name dies; its helper must die with it. */
static void helper_dies_with_parent(const char *name, unsigned variant)
{
    CHECK_EQ_LONG(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    int pfd[2];
    CHECK_EQ_LONG(pipe(pfd), 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        struct isob_confine_state st;
        enter(&st, name, variant);
        CHECK(write(pfd[1], &st.helper, sizeof st.helper) == sizeof st.helper);
        _exit(0);
    }
    close(pfd[1]);
    pid_t helper = 0;
    ssize_t got = read(pfd[0], &helper, sizeof helper);
    int ws;
    CHECK_EQ_LONG(waitpid(pid, &ws, 0), pid);
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == TAP_EXIT_SKIP)
        SKIP("%s unavailable here", name);
    CHECK_EQ_LONG(got, sizeof helper);
    CHECK(helper > 0);
    CHECK(dies(helper));
}

static void t_notify_supervisor_dies_with_parent(void) { helper_dies_with_parent("seccomp-notify", 1); }
static void t_tracer_dies_with_parent(void) { helper_dies_with_parent("ptrace", 0); }

int main(void)
{
    TAP_CASE(t_registry);
    TAP_CASE(t_none_verifies);
    TAP_CASE(t_none_refuses_a_traced_process);
    TAP_CASE(t_seccomp_allow_variants);
    TAP_CASE(t_seccomp_allow_unconfined_fails);
    TAP_CASE(t_seccomp_allow_wrong_filter_fails);
    TAP_CASE(t_seccomp_notify_idle);
    TAP_CASE(t_seccomp_notify_trap);
    TAP_CASE(t_seccomp_notify_dead_supervisor_fails);
    TAP_CASE(t_seccomp_notify_unconfined_fails);
    TAP_CASE(t_ptrace);
    TAP_CASE(t_ptrace_unconfined_fails);
    TAP_CASE(t_landlock);
    TAP_CASE(t_landlock_unconfined_fails);
    TAP_CASE(t_userns);
    TAP_CASE(t_userns_unconfined_fails);
    TAP_CASE(t_notify_supervisor_dies_with_parent);
    TAP_CASE(t_tracer_dies_with_parent);
    return tap_done();
}
