/* The MPK semantics test: /init of a tiny QEMU TCG guest (tests/vm/run-mpk.sh).
 *
 * The machines isobench is developed on have no protection keys, but QEMU's
 * software emulator with `-cpu max` implements them, so the mpk mechanisms
 * can be checked for real there: conformance against `direct`, the
 * isolation test (a PKU fault, not merely some fault), and the gate's check
 * that aborts when the gate would leave the trusted memory open.
 *
 * As PID 1 it sets up what the checks need (console, /proc), prints one
 * TAP-like line per check to the console, a summary line that run-mpk.sh
 * parses, and powers the machine off.  Every check runs in a forked child
 * with a time-out, so a crash fails that check and not the run.  Timings
 * under TCG mean nothing, so none are taken. */
#include <cpuid.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/arch_x86.h"
#include "isobench/isolation.h"
#include "isobench/mechanism.h"
#include "mpk.h"

/* Seconds a single check may take under TCG before it counts as hung. */
#define CHECK_TIMEOUT_S 30
/* Create/destroy cycles per mechanism: enough to exhaust the 15 usable keys
 * many times over if destroy leaked one. */
#define CREATE_DESTROY_CYCLES 200
/* Largest payload compared with direct. */
#define MAX_PAYLOAD 4096

/* The summary line run-mpk.sh looks for. */
#define RESULT_TAG "MPK-VM-RESULT:"

static int n_run, n_failed;
static const struct isob_mechanism *cur;

/* A failed expectation ends the child with a message on the console. */
#define EXPECT(cond)                                                                  \
    do {                                                                              \
        if (!(cond))                                                                  \
            fail_at(__LINE__, "%s", #cond);                                           \
    } while (0)

#define EXPECT_EQ(a, b)                                                               \
    do {                                                                              \
        long long e_a_ = (long long)(a), e_b_ = (long long)(b);                       \
        if (e_a_ != e_b_)                                                             \
            fail_at(__LINE__, "%s == %s: %lld != %lld", #a, #b, e_a_, e_b_);          \
    } while (0)

static void __attribute__((noreturn, format(printf, 2, 3))) fail_at(int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("# mpk_init.c:%d: ", line);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    _exit(1);
}

/* Run fn in a child; it passes when the child ends the way `want_sig`
 * says: exit 0 when want_sig is 0, else killed by that signal. */
static void run_check(const char *what, void (*fn)(void), int want_sig)
{
    char name[128];
    snprintf(name, sizeof name, "%s: %s", cur->name, what);
    int n = ++n_run;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        printf("not ok %d - %s (fork: %s)\n", n, name, strerror(errno));
        n_failed++;
        return;
    }
    if (pid == 0) {
        alarm(CHECK_TIMEOUT_S);
        fn();
        fflush(stdout);
        _exit(0);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    int ok = want_sig ? WIFSIGNALED(st) && WTERMSIG(st) == want_sig
                      : WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (ok) {
        printf("ok %d - %s\n", n, name);
        return;
    }
    n_failed++;
    if (WIFSIGNALED(st))
        printf("not ok %d - %s (killed by %s)\n", n, name, strsignal(WTERMSIG(st)));
    else
        printf("not ok %d - %s (exit %d)\n", n, name, WEXITSTATUS(st));
}

static struct isob_comp *make(const struct isob_mechanism *m)
{
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    struct isob_comp *c = NULL;
    int rc = isob_comp_create(m, &spec, &c);
    if (rc)
        fail_at(__LINE__, "create %s: %s", m->name, isob_strerror(rc));
    EXPECT(c->data_cap >= MAX_PAYLOAD);
    return c;
}

/* The PKRU bits that deny compartment c's key. */
static uint32_t deny_bits(struct isob_comp *c)
{
    int key = isob_mpk_test_pkey(c);
    EXPECT(key > 0 && key < 16);
    return 3u << (2 * key);
}

static void c_probe(void)
{
    char why[256] = "";
    int rc = cur->probe(why, sizeof why);
    if (rc)
        fail_at(__LINE__, "probe: %s", why);
}

/* ADD, ECHO and SINK over payloads 0..4096 give what direct gives, in the
 * result and in the shared buffer, and the gate closes after each call. */
static void c_results_equal_direct(void)
{
    struct isob_comp *c = make(cur), *ref = make(isob_mechanism_find("direct"));
    uint32_t deny = deny_bits(c);
    struct isob_msg *m = cur->shared(c), *r = ref->mech->shared(ref);
    static const unsigned entries[] = {ISOB_ENTRY_ADD, ISOB_ENTRY_ECHO, ISOB_ENTRY_SINK,
                                       ISOB_ENTRY_EMPTY};
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        for (size_t len = 0; len <= MAX_PAYLOAD; len = len ? len * 4 : 1) {
            m->len = r->len = (uint32_t)len;
            m->arg[0] = r->arg[0] = 1234567890123ll + (int64_t)len;
            m->arg[1] = r->arg[1] = -987654321ll;
            for (size_t j = 0; j < len; j++)
                m->data[j] = r->data[j] = (unsigned char)(j * 31 + i);
            long got = isob_call(c, entries[i]), want = isob_call(ref, entries[i]);
            EXPECT_EQ(got, want);
            EXPECT(memcmp(m->arg, r->arg, sizeof m->arg) == 0);
            EXPECT(memcmp(m->data, r->data, len) == 0);
            EXPECT_EQ(isob_rdpkru() & deny, deny);
        }
    }
    EXPECT_EQ(isob_call(c, ISOB_ENTRY_COUNT_CALLS), isob_call(ref, ISOB_ENTRY_COUNT_CALLS));
    isob_comp_destroy(ref);
    isob_comp_destroy(c);
}

static void c_errors_propagate(void)
{
    struct isob_comp *c = make(cur);
    struct isob_msg *m = cur->shared(c);
    m->arg[0] = EACCES;
    EXPECT_EQ(isob_call(c, ISOB_ENTRY_FAIL), -EACCES);
    EXPECT_EQ(isob_call(c, 999), -ENOSYS);
    m->len = (uint32_t)c->data_cap + 1;
    EXPECT_EQ(isob_call(c, ISOB_ENTRY_SINK), -EINVAL);
    EXPECT_EQ(isob_call(c, ISOB_ENTRY_EMPTY), 0);
    isob_comp_destroy(c);
}

static long vm_size_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %ld", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* Destroy gives back the key and the mappings: more cycles than there are
 * keys, then two live compartments get two different keys. */
static void c_create_destroy_repeatable(void)
{
    isob_comp_destroy(make(cur));
    long kib = vm_size_kib();
    EXPECT(kib > 0);
    for (int i = 0; i < CREATE_DESTROY_CYCLES; i++) {
        struct isob_comp *c = make(cur);
        EXPECT_EQ(isob_call(c, ISOB_ENTRY_EMPTY), 0);
        isob_comp_destroy(c);
    }
    EXPECT(vm_size_kib() - kib < 512);
    struct isob_comp *a = make(cur), *b = make(cur);
    EXPECT(isob_mpk_test_pkey(a) != isob_mpk_test_pkey(b));
    EXPECT_EQ(isob_call(a, ISOB_ENTRY_EMPTY), 0);
    EXPECT_EQ(isob_call(b, ISOB_ENTRY_EMPTY), 0);
    isob_comp_destroy(a);
    isob_comp_destroy(b);
}

/* The shared isolation test, and the fault must come from the key: any
 * other fault would mean the test touched the wrong memory. */
static void c_isolation(void)
{
    struct isob_isolation r;
    EXPECT_EQ(isob_isolation_test(cur, &r), 0);
    printf("# %s: verdict %s; read: %s; write: %s\n", cur->name, r.verdict, r.read, r.write);
    EXPECT(r.claims);
    EXPECT(strcmp(r.verdict, "enforced") == 0);
    EXPECT(strstr(r.read, "SIGSEGV") && strstr(r.read, "SEGV_PKUERR"));
    EXPECT(strstr(r.write, "SIGSEGV") && strstr(r.write, "SEGV_PKUERR"));
    EXPECT_EQ(r.intact, 1);
}

/* A descriptor corrupted so that the gate would return with the key open
 * must make the gate abort instead; the call before it proves the
 * compartment worked. */
static void c_tampered_gate_aborts(void)
{
    struct isob_comp *c = make(cur);
    EXPECT_EQ(isob_call(c, ISOB_ENTRY_EMPTY), 0);
    isob_mpk_test_corrupt_gate(c);
    isob_call(c, ISOB_ENTRY_EMPTY);
    fail_at(__LINE__, "the gate returned with PKRU 0x%08x", isob_rdpkru());
}

/* PID 1 starts with whatever the kernel gave it: make sure there is a
 * console on fds 0-2 and a /proc for the leak checks. */
static void setup_system(void)
{
    if (fcntl(1, F_GETFD) < 0) {
        mkdir("/dev", 0755);
        mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
        int fd = open("/dev/console", O_RDWR);
        if (fd >= 0) {
            dup2(fd, 0);
            dup2(fd, 1);
            dup2(fd, 2);
            if (fd > 2)
                close(fd);
        }
    }
    mkdir("/proc", 0555);
    if (mount("proc", "/proc", "proc", 0, NULL) != 0)
        printf("# mount /proc: %s\n", strerror(errno));
    setvbuf(stdout, NULL, _IOLBF, 0);
}

int main(void)
{
    setup_system();
    struct utsname u;
    if (uname(&u) == 0)
        printf("# kernel %s %s\n", u.release, u.version);
    /* RDPKRU raises SIGILL without OSPKE, and PID 1 must not die of it. */
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 4)))
        printf("# PKRU at start: 0x%08x\n", isob_rdpkru());
    char why[256] = "";
    const struct isob_mechanism *mpk = isob_mechanism_find("mpk");
    if (mpk && mpk->probe(why, sizeof why) != 0)
        printf("# mpk unavailable: %s\n", why);

    static const char *const names[] = {"mpk", "mpk-bridge"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        cur = isob_mechanism_find(names[i]);
        if (!cur) {
            printf("not ok %d - %s: not registered\n", ++n_run, names[i]);
            n_failed++;
            continue;
        }
        run_check("probe", c_probe, 0);
        run_check("results equal direct", c_results_equal_direct, 0);
        run_check("errors propagate", c_errors_propagate, 0);
        run_check("create/destroy repeatable", c_create_destroy_repeatable, 0);
        run_check("isolation enforced by PKU", c_isolation, 0);
        run_check("tampered gate aborts", c_tampered_gate_aborts, SIGABRT);
    }
    printf("1..%d\n", n_run);
    printf("%s %d passed, %d failed\n", RESULT_TAG, n_run - n_failed, n_failed);
    fflush(stdout);
    sync();
    reboot(RB_POWER_OFF);
    /* Only reached when reboot() fails; PID 1 must not return. */
    for (;;)
        pause();
}
