/* Liveness across the compartment boundary (mechanism.h, Liveness): a
 * compartment whose server dies fails the call with -EOWNERDEAD and says
 * why, every later call fails at once, and a server that cannot set
 * itself up fails create() with its own error instead of leaving the
 * caller to wait.
 *
 * Each case forks (tap.h) and arms its own alarm: a wait that outlived the
 * server would end the case with SIGALRM, which fails it.  No case asserts
 * how long anything took; they assert the errors, the reasons, and that
 * the alarm did not fire. */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isobench/harness.h"
#include "isobench/mechanism.h"
#include "tap.h"
#include "children.h"

/* The alarm of one case: far above anything that works, far below the
 * suite's time-out. */
#define CASE_ALARM_S tap_limit(300)
/* Calls the mid-run case makes before the killer is let loose, so that the
 * server is known to be serving when it dies. */
#define CALLS_BEFORE_KILL 1000
/* The killer waits this long after those calls, so that the kill lands in
 * the middle of the caller's loop rather than before it. */
#define KILL_DELAY_NS 20000000L
/* Heap asked for under a small address-space limit: far more than the
 * limit leaves. */
#define BIG_HEAP ((size_t)1 << 30)
/* Address space granted above what the case already uses. */
#define AS_HEADROOM ((rlim_t)256 << 20)

static const struct isob_mechanism *cur;

/* Create a compartment of cur and find its server process: the one child
 * this case's process has.  Skips mechanisms without one. */
static struct isob_comp *make_with_server(pid_t *server)
{
    char why[256] = "";
    if (cur->probe(why, sizeof why) != 0)
        SKIP("%s: %s", cur->name, why);
    pid_t before[4];
    CHECK_EQ_LONG(tap_children(before, 4), 0);
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    struct isob_comp *c = NULL;
    CHECK_EQ_LONG(isob_comp_create(cur, &spec, &c), 0);
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_EMPTY), 0);
    CHECK(isob_comp_why(c) == NULL);
    pid_t kids[4];
    int n = tap_children(kids, 4);
    if (n == 0) {
        isob_comp_destroy(c);
        SKIP("%s has no server process (a thread ends only with its process)", cur->name);
    }
    CHECK_EQ_LONG(n, 1);
    *server = kids[0];
    return c;
}

/* The compartment died of SIGKILL and says so; later calls fail at once;
 * destroy leaves no process behind. */
static void check_dead_and_destroy(struct isob_comp *c)
{
    const char *why = isob_comp_why(c);
    CHECK(why != NULL);
    fprintf(stderr, "# %s: %s\n", cur->name, why);
    CHECK(strstr(why, "died: signal 9") != NULL);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_EMPTY), -EOWNERDEAD);
    CHECK(strstr(isob_comp_why(c), "died: signal 9") != NULL);
    isob_comp_destroy(c);
    pid_t kids[4];
    CHECK_EQ_LONG(tap_children(kids, 4), 0);
}

static void t_killed_while_idle(void)
{
    alarm(CASE_ALARM_S);
    pid_t server;
    struct isob_comp *c = make_with_server(&server);
    CHECK_EQ_LONG(kill(server, SIGKILL), 0);
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_EMPTY), -EOWNERDEAD);
    check_dead_and_destroy(c);
}

static void t_killed_mid_run(void)
{
    alarm(CASE_ALARM_S);
    pid_t server;
    struct isob_comp *c = make_with_server(&server);
    struct isob_msg *m = c->mech->shared(c);
    long r = 0, calls = 0;
    for (; calls < CALLS_BEFORE_KILL && r == 0; calls++)
        r = isob_call(c, ISOB_ENTRY_EMPTY);
    CHECK_EQ_LONG(r, 0);
    /* The killer is this case's own child; it kills the server while the
     * loop below calls as fast as it can. */
    pid_t killer = fork();
    CHECK(killer >= 0);
    if (killer == 0) {
        struct timespec d = {0, KILL_DELAY_NS};
        nanosleep(&d, NULL);
        _exit(kill(server, SIGKILL) == 0 ? 0 : 1);
    }
    /* Calls with a payload, so that the kill can land with data in
     * flight; each answer is checked until the first failure. */
    m->len = 64;
    memset(m->data, 0x5a, 64);
    long sum = isob_checksum(m->data, 64);
    while ((r = isob_call(c, ISOB_ENTRY_SINK)) == sum)
        calls++;
    int st = 0;
    CHECK_EQ_LONG(waitpid(killer, &st, 0), killer);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    fprintf(stderr, "# %s: %ld calls answered, then %ld\n", cur->name, calls, r);
    CHECK_EQ_LONG(r, -EOWNERDEAD);
    check_dead_and_destroy(c);
}

static void t_heap_failure_is_enomem_at_create(void)
{
    alarm(CASE_ALARM_S);
    char why[256] = "";
    if (cur->probe(why, sizeof why) != 0)
        SKIP("%s: %s", cur->name, why);
    /* As `ulimit -v` would: the caller's limit, inherited by a server. */
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f != NULL);
    char line[256];
    long vm_kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %ld", &vm_kib) == 1)
            break;
    fclose(f);
    CHECK(vm_kib > 0);
    struct rlimit rl = {.rlim_cur = (rlim_t)vm_kib * 1024 + AS_HEADROOM,
                        .rlim_max = (rlim_t)vm_kib * 1024 + AS_HEADROOM};
    CHECK_EQ_LONG(setrlimit(RLIMIT_AS, &rl), 0);
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    spec.heap_size = BIG_HEAP;
    struct isob_comp *c = NULL;
    int rc = isob_comp_create(cur, &spec, &c);
    fprintf(stderr, "# %s: create with a %zu MiB heap under a limit: %s\n", cur->name,
            BIG_HEAP >> 20, rc ? isob_strerror(rc) : "created");
    CHECK_EQ_LONG(rc, -ENOMEM);
    pid_t kids[4];
    CHECK_EQ_LONG(tap_children(kids, 4), 0);
    /* The same mechanism with a heap that fits still works. */
    spec.heap_size = ISOB_DEFAULT_HEAP_SIZE;
    CHECK_EQ_LONG(isob_comp_create(cur, &spec, &c), 0);
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_EMPTY), 0);
    isob_comp_destroy(c);
}

static void t_pin_failure_is_create_error(void)
{
    alarm(CASE_ALARM_S);
    char why[256] = "";
    if (cur->probe(why, sizeof why) != 0)
        SKIP("%s: %s", cur->name, why);
    if (!(cur->props & ISOB_TWO_CONTEXTS))
        SKIP("%s has no second context to pin", cur->name);
    /* A CPU outside the allowed set: the server cannot be pinned there,
     * and create must say so instead of serving from anywhere. */
    int bad = -1;
    for (int cpu = CPU_SETSIZE - 1; cpu >= 0 && bad < 0; cpu--)
        if (!isob_cpu_allowed(cpu))
            bad = cpu;
    CHECK(bad >= 0);
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    spec.server_cpu = bad;
    struct isob_comp *c = NULL;
    int rc = isob_comp_create(cur, &spec, &c);
    fprintf(stderr, "# %s: server on CPU %d: %s\n", cur->name, bad, rc ? isob_strerror(rc) : "created");
    CHECK_EQ_LONG(rc, -EINVAL);
    pid_t kids[4];
    CHECK_EQ_LONG(tap_children(kids, 4), 0);
}

static void t_serves_when_caller_is_pid_1(void)
{
    alarm(CASE_ALARM_S);
    char why[256] = "";
    if (cur->probe(why, sizeof why) != 0)
        SKIP("%s: %s", cur->name, why);
    if (!(cur->props & ISOB_SEPARATE_AS))
        SKIP("%s has no server process", cur->name);
    /* As a container's entry point: the caller is PID 1 of its namespace,
     * so its servers' parent is 1, which must not read as "orphaned". */
    /* clone, not unshare + fork: after unshare this process's later
     * children (a sanitizer's leak-check tracer among them) would be born
     * into the namespace, which is dead once its PID 1 has exited.  With
     * every argument but the flags 0, clone returns twice as fork does. */
    pid_t init = (pid_t)syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0);
    if (init < 0)
        SKIP("clone(CLONE_NEWPID): %s (needs CAP_SYS_ADMIN)", strerror(errno));
    if (init == 0) {
        if (getpid() != 1)
            _exit(3);
        struct isob_comp_spec spec;
        isob_spec_defaults(&spec);
        struct isob_comp *c = NULL;
        if (isob_comp_create(cur, &spec, &c) != 0)
            _exit(4);
        int ok = isob_call(c, ISOB_ENTRY_EMPTY) == 0 && isob_call(c, ISOB_ENTRY_COUNT_CALLS) == 2;
        isob_comp_destroy(c);
        _exit(ok ? 0 : 5);
    }
    int st = 0;
    CHECK_EQ_LONG(waitpid(init, &st, 0), init);
    if (WIFEXITED(st) && WEXITSTATUS(st))
        fprintf(stderr, "# PID 1 of the namespace exited %d\n", WEXITSTATUS(st));
    CHECK(WIFEXITED(st));
    CHECK_EQ_LONG(WEXITSTATUS(st), 0);
}

int main(void)
{
    for (const struct isob_mechanism *const *m = isob_mechanisms; *m; m++) {
        if ((*m)->props & ISOB_TEST_ONLY)
            continue;
        cur = *m;
        char name[128];
#define RUN(fn)                                                      \
        do {                                                         \
            snprintf(name, sizeof name, "%s: %s", cur->name, #fn);   \
            tap_run(name, fn);                                       \
        } while (0)
        if (cur->props & ISOB_TWO_CONTEXTS) {
            RUN(t_killed_while_idle);
            RUN(t_killed_mid_run);
            RUN(t_pin_failure_is_create_error);
            RUN(t_serves_when_caller_is_pid_1);
        }
        /* Servers against the reference.  (wasm reserves its address space
         * up front, so a limit shows there at any heap size.) */
        if ((cur->props & ISOB_TWO_CONTEXTS) || strcmp(cur->name, "direct") == 0)
            RUN(t_heap_failure_is_enomem_at_create);
#undef RUN
    }
    return tap_done();
}
