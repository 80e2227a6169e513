/* The MPK test: /init of a tiny QEMU TCG guest (tests/vm/run-mpk.sh), or an
 * ordinary test program on a machine whose CPU has protection keys.
 *
 * The machines isobench is developed on have no protection keys, but QEMU's
 * software emulator with `-cpu max` implements them, so the mpk mechanisms
 * can be checked for real there:
 *  - conformance against `direct` and the isolation test (a PKU fault, not
 *    merely some fault) for mpk and mpk-bridge;
 *  - the C library's pkey_set(key, 0) called by untrusted code: it traps,
 *    as create closed its WRPKRU, and reads the secret on the deliberately
 *    unclosed variant (isob_mpk_test_leave_strays);
 *  - the attacks of mpk_attacks.c on both, which must all be stopped, and
 *    on the test-only legacy gate (mpk_legacy.c), which must lose them;
 *  - the GOT/PLT attack on the window (mpk_window.c) on both, which must be
 *    stopped, and on both again in mpk_init_leaky (this program linked
 *    with the leaky window build), where it must win; and set-up's open
 *    key (a C library function replaced before create), not defended,
 *    which must breach;
 *  - ERIM's call kinds behind mpk's gate (mpk_kinds.c): each runs once and
 *    returns the right value; the indirect-call kind's pointer attacked,
 *    held on mpk and lost by a test-only copy whose pointer is writable;
 *  - the ways back into the window through the kernel (mpk_kernel.c):
 *    rseq, signals and rt_sigreturn, not defended, each with a control;
 *  - `isob switch` on both, from a static isob copied into the guest as
 *    /isob, whose medians are printed as evidence that the benchmark runs
 *    there, never as timings: under TCG they mean nothing;
 *  - the outside reader (isob scrape) against both: OS-level readers do
 *    not consult PKRU, so root finds the canary in the key's heap.
 *
 * As PID 1 it sets up what the checks need (console, /proc), prints one
 * TAP-like line per check to the console, a summary line that run-mpk.sh
 * parses, and powers the machine off.  Run as a program (`mpk_init ISOB
 * LEAKY`, the mpk-native test) it prints the same lines and exits 0, 1 when a check
 * failed, or 77 (a skip) when the mechanisms cannot run here.  Every check
 * runs in a forked child with a time-out, so a crash fails that check and
 * not the run. */
#include <cpuid.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/arch_x86.h"
#include "isobench/isolation.h"
#include "isobench/scrape.h"
#include "mpk_vm.h"

/* Seconds a single check may take under TCG before it counts as hung. */
#define CHECK_TIMEOUT_S 60
/* Create/destroy cycles per mechanism: enough to exhaust the 15 usable keys
 * many times over if destroy leaked one. */
#define CREATE_DESTROY_CYCLES 200
/* Largest payload compared with direct. */
#define MAX_PAYLOAD 4096
/* Where run-mpk.sh puts the static isob in the guest (a program run is
 * given the path), and how long one of its runs may take under TCG. */
#define ISOB_GUEST_PATH "/isob"
#define ISOB_TIMEOUT_S 240

/* The summary line run-mpk.sh looks for. */
#define RESULT_TAG "MPK-VM-RESULT:"

static int n_run, n_failed;
static const char *prefix = "";
static const struct isob_mechanism *cur;
static const char *isob_path = ISOB_GUEST_PATH;
/* Where run-mpk.sh puts mpk_init_leaky in the guest. */
#define LEAKY_GUEST_PATH "/mpk_init_leaky"
static const char *leaky_path = LEAKY_GUEST_PATH;
/* What the isob medians come from, for their label. */
static const char *where = "QEMU TCG";

void vm_fail(int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("# mpk vm test line %d: ", line);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    _exit(1);
}

void vm_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("# SKIP: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    _exit(VM_EXIT_SKIP);
}

void vm_breach(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("# BREACH: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    _exit(VM_EXIT_BREACH);
}

#define EXPECT VM_EXPECT
#define EXPECT_EQ(a, b)                                                               \
    do {                                                                              \
        long long e_a_ = (long long)(a), e_b_ = (long long)(b);                       \
        if (e_a_ != e_b_)                                                             \
            vm_fail(__LINE__, "%s == %s: %lld != %lld", #a, #b, e_a_, e_b_);          \
    } while (0)

static int ended_as(int st, enum vm_expect want)
{
    int pass = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    int pkuerr = WIFEXITED(st) && WEXITSTATUS(st) == VM_EXIT_PKUERR;
    int fault = WIFSIGNALED(st) && (WTERMSIG(st) == SIGSEGV || WTERMSIG(st) == SIGBUS ||
                                    WTERMSIG(st) == SIGILL || WTERMSIG(st) == SIGABRT);
    switch (want) {
    case VM_PASS:
        return pass;
    case VM_PKUERR:
        return pkuerr;
    case VM_HELD:
        return pass || pkuerr || fault;
    case VM_BREACH:
        return WIFEXITED(st) && WEXITSTATUS(st) == VM_EXIT_BREACH;
    }
    return 0;
}

static const char *const expect_names[] = {"pass", "SEGV_PKUERR", "held", "breach"};

void vm_check(const char *what, void (*fn)(void *), void *arg, enum vm_expect want)
{
    char name[256];
    snprintf(name, sizeof name, "%s: %s", prefix, what);
    int n = ++n_run;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        printf("not ok %d - %s (fork: %s)\n", n, name, strerror(errno));
        n_failed++;
        return;
    }
    if (pid == 0) {
        /* Run as a program, the checks must not outlive the test. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        setvbuf(stdout, NULL, _IONBF, 0);
        alarm(CHECK_TIMEOUT_S);
        fn(arg);
        _exit(0);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(st) && WEXITSTATUS(st) == VM_EXIT_SKIP) {
        printf("ok %d - %s # SKIP\n", n, name);
        return;
    }
    if (ended_as(st, want)) {
        printf("ok %d - %s\n", n, name);
        return;
    }
    n_failed++;
    if (WIFSIGNALED(st))
        printf("not ok %d - %s (killed by %s; expected %s)\n", n, name, strsignal(WTERMSIG(st)),
               expect_names[want]);
    else
        printf("not ok %d - %s (exit %d; expected %s)\n", n, name, WEXITSTATUS(st),
               expect_names[want]);
}

struct isob_comp *vm_make(const struct isob_mechanism *m)
{
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    struct isob_comp *c = NULL;
    int rc = isob_comp_create(m, &spec, &c);
    if (rc)
        vm_fail(__LINE__, "create %s: %s", m->name, isob_strerror(rc));
    EXPECT(c->data_cap >= MAX_PAYLOAD);
    return c;
}

void vm_view(struct isob_comp *c, struct isob_mpk_view *v)
{
    int rc = c->mech == &mpk_legacy_mech ? mpk_legacy_view(c, v) : isob_mpk_test_view(c, v);
    if (rc)
        vm_fail(__LINE__, "no view of %s: %s", c->mech->name, isob_strerror(rc));
}

/* ---- Conformance of mpk and mpk-bridge -------------------------------- */

static void c_probe(void *arg)
{
    (void)arg;
    char why[256] = "";
    int rc = cur->probe(why, sizeof why);
    if (rc)
        vm_fail(__LINE__, "probe: %s", why);
}

/* ADD, ECHO, SINK and EMPTY over payloads 0..4096 give what direct gives,
 * in the result and in the shared buffer, and every call ends with PKRU
 * exactly the gate's closed value. */
static void c_results_equal_direct(void *arg)
{
    isob_mpk_test_leave_strays = 0;
    (void)arg;
    struct isob_comp *c = vm_make(cur), *ref = vm_make(isob_mechanism_find("direct"));
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
            EXPECT_EQ(isob_rdpkru(), MPK_PKRU_CLOSED);
        }
    }
    EXPECT_EQ(isob_call(c, ISOB_ENTRY_COUNT_CALLS), isob_call(ref, ISOB_ENTRY_COUNT_CALLS));
    isob_comp_destroy(ref);
    isob_comp_destroy(c);
}

static void c_errors_propagate(void *arg)
{
    isob_mpk_test_leave_strays = 0;
    (void)arg;
    struct isob_comp *c = vm_make(cur);
    struct isob_msg *m = cur->shared(c);
    m->arg[0] = EACCES;
    EXPECT_EQ(isob_call(c, ISOB_ENTRY_FAIL), -EACCES);
    EXPECT_EQ(isob_call(c, 999), -ENOSYS);
    EXPECT_EQ(isob_call(c, 0xffffffffu), -ENOSYS);
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

/* Destroy gives back the key, the mappings and the slot: more cycles than
 * there are keys, then two live compartments get two different keys and
 * each serves its own calls. */
static void c_create_destroy_repeatable(void *arg)
{
    isob_mpk_test_leave_strays = 0;
    (void)arg;
    isob_comp_destroy(vm_make(cur));
    long kib = vm_size_kib();
    EXPECT(kib > 0);
    for (int i = 0; i < CREATE_DESTROY_CYCLES; i++) {
        struct isob_comp *c = vm_make(cur);
        EXPECT_EQ(isob_call(c, ISOB_ENTRY_EMPTY), 0);
        isob_comp_destroy(c);
    }
    EXPECT(vm_size_kib() - kib < 512);
    struct isob_comp *a = vm_make(cur), *b = vm_make(cur);
    EXPECT(isob_mpk_test_pkey(a) != isob_mpk_test_pkey(b));
    cur->shared(a)->arg[0] = 11;
    cur->shared(b)->arg[0] = 22;
    EXPECT_EQ(isob_call(a, ISOB_ENTRY_SECRET_PLANT), 0);
    EXPECT_EQ(isob_call(b, ISOB_ENTRY_SECRET_PLANT), 0);
    EXPECT_EQ(isob_call(a, ISOB_ENTRY_SECRET_CHECK), 1);
    cur->shared(b)->arg[0] = 11;
    EXPECT_EQ(isob_call(b, ISOB_ENTRY_SECRET_CHECK), 0);
    isob_comp_destroy(a);
    isob_comp_destroy(b);
}

/* The shared isolation test, and the fault must come from the key: any
 * other fault would mean the test touched the wrong memory. */
static void c_isolation(void *arg)
{
    isob_mpk_test_leave_strays = 0;
    (void)arg;
    struct isob_isolation r;
    EXPECT_EQ(isob_isolation_test(cur, &r), 0);
    printf("# %s: verdict %s; read: %s; write: %s\n", cur->name, r.verdict, r.read, r.write);
    EXPECT(r.claims);
    EXPECT(strcmp(r.verdict, "enforced") == 0);
    EXPECT(strstr(r.read, "SIGSEGV") && strstr(r.read, "SEGV_PKUERR"));
    EXPECT(strstr(r.write, "SIGSEGV") && strstr(r.write, "SEGV_PKUERR"));
    EXPECT_EQ(r.intact, 1);
    /* The call of the C library's pkey_set met the closed WRPKRU. */
    printf("# in-process evidence: %s\n", r.cells[ISOB_ATK_IN_PROCESS].evidence);
    EXPECT(strstr(r.cells[ISOB_ATK_IN_PROCESS].evidence, "trapped in pkey_set"));
}

/* The untrusted side calls the C library's exported PKRU writer,
 * pkey_set(key, 0) for every key, then loads the secret.  arg 0: the
 * mechanism as it is, which closed the WRPKRU before create (pkey_set must
 * trap); arg 1: the deliberately unclosed variant, which must lose. */
static void on_pkey_set_trap(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    dprintf(1, "# held: pkey_set raised signal %d (si_code %d) at %p\n", sig, si->si_code, si->si_addr);
    _exit(0);
}

static void c_pkey_set(void *arg)
{
    isob_mpk_test_leave_strays = arg != NULL;
    struct isob_comp *c = vm_make(cur);
    struct isob_msg *msg = c->mech->shared(c);
    msg->arg[0] = (int64_t)ISOB_SECRET;
    EXPECT_EQ(isob_call(c, ISOB_ENTRY_SECRET_PLANT), 0);
    volatile uint64_t *secret = (volatile uint64_t *)(uintptr_t)msg->arg[1];
    EXPECT(secret != NULL);
    const struct isob_mpk_closed *closed;
    size_t n = isob_mpk_closed_sites(&closed);
    for (size_t i = 0; i < n; i++)
        printf("# closed: WRPKRU at %p (%s+%#llx%s%s)\n", closed[i].addr, closed[i].file,
               (unsigned long long)closed[i].file_offset, closed[i].symbol[0] ? ", " : "",
               closed[i].symbol);
    if (!arg)
        EXPECT(n > 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_pkey_set_trap;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGILL, &sa, NULL);
    sigaction(SIGTRAP, &sa, NULL);
    for (int k = 1; k < 16; k++)
        pkey_set(k, 0);
    uint64_t v = *secret;
    if (v == ISOB_SECRET)
        vm_breach("pkey_set(key, 0) returned and the load read the secret (PKRU 0x%08x)", isob_rdpkru());
    vm_fail(__LINE__, "pkey_set returned, the load found %#llx", (unsigned long long)v);
}

/* ---- isob switch ------------------------------------------------------ */

/* The numbers of a "samples":[...] array, their count in *n; NULL if none. */
static long *parse_samples(const char *line, size_t *n)
{
    const char *p = strstr(line, "\"samples\":[");
    *n = 0;
    if (!p)
        return NULL;
    p += strlen("\"samples\":[");
    size_t cap = 256;
    long *v = malloc(cap * sizeof *v);
    while (v && *p && *p != ']') {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p)
            break;
        if (*n == cap) {
            cap *= 2;
            long *nv = realloc(v, cap * sizeof *v);
            if (!nv)
                break;
            v = nv;
        }
        v[(*n)++] = x;
        p = *end == ',' ? end + 1 : end;
    }
    return v;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* A JSON string member's value, copied into buf (no escapes expected). */
static void json_str(const char *line, const char *key, char *buf, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(line, pat);
    buf[0] = 0;
    if (!p)
        return;
    p += strlen(pat);
    size_t i = 0;
    while (p[i] && p[i] != '"' && i + 1 < len) {
        buf[i] = p[i];
        i++;
    }
    buf[i] = 0;
}

/* Run /isob switch on one mechanism; each result line becomes one comment
 * line with its median, labelled as evidence of function.  Passes when
 * isob exited 0 with an ok `entry` result for each of the three payloads,
 * and, for mpk, an ok result for each of ERIM's three call kinds. */
static void c_isob_switch(void *arg)
{
    const char *mech = arg;
    if (access(isob_path, X_OK) != 0)
        vm_fail(__LINE__, "no isob at %s: %s", isob_path, strerror(errno));
    int pfd[2];
    EXPECT(pipe(pfd) == 0);
    pid_t pid = fork();
    EXPECT(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        alarm(ISOB_TIMEOUT_S);
        execl(isob_path, "isob", "switch", "-m", mech, "--quick", "--n", "2000", "--placement",
              "same-cpu", (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    FILE *f = fdopen(pfd[0], "r");
    EXPECT(f != NULL);
    char *line = NULL;
    size_t cap = 0;
    int ok_payloads = 0, ok_kinds = 0;
    while (getline(&line, &cap, f) > 0) {
        if (!strstr(line, "\"type\":\"result\""))
            continue;
        char status[32], unit[32], variant[32];
        json_str(line, "status", status, sizeof status);
        json_str(line, "unit", unit, sizeof unit);
        json_str(line, "variant", variant, sizeof variant);
        const char *pl = strstr(line, "\"payload\":");
        long payload = pl ? strtol(pl + strlen("\"payload\":"), NULL, 10) : -1;
        size_t n = 0;
        long *s = parse_samples(line, &n);
        long median = -1;
        if (s && n) {
            qsort(s, n, sizeof *s, cmp_long);
            median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
        }
        free(s);
        printf("# evidence of function only, not a timing (%s): isob switch -m %s "
               "variant %s payload %ld: status %s, median %ld %s over %zu samples\n",
               where, mech, variant, payload, status, median, unit, n);
        if (strcmp(status, "ok") == 0 && strcmp(variant, "entry") == 0 && n > 0 &&
            (payload == 0 || payload == 64 || payload == 4096))
            ok_payloads++;
        if (strcmp(status, "ok") == 0 && n > 0 && payload == 0 &&
            (strcmp(variant, "inline") == 0 || strcmp(variant, "direct-call") == 0 ||
             strcmp(variant, "indirect-call") == 0))
            ok_kinds++;
    }
    free(line);
    fclose(f);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        vm_fail(__LINE__, "isob switch -m %s ended with status %#x", mech, st);
    EXPECT_EQ(ok_payloads, 3);
    /* ERIM's call kinds: mpk has its gate's three, mpk-bridge none. */
    EXPECT_EQ(ok_kinds, strcmp(mech, "mpk") == 0 ? 3 : 0);
}

/* ---- isob scrape ------------------------------------------------------ */

/* The outside reader against a compartment whose heap a protection key
 * closes: every reader of root finds the canary, process_vm_readv
 * included (unlike mprotect's PROT_NONE), because remote accesses do not
 * consult PKRU; the same uid does as well where Yama lets it attach; a
 * non-dumpable target and another uid refuse; nothing is written. */
static void c_scrape(void *arg)
{
    const char *mech = arg;
    struct isob_scrape_report rep;
    EXPECT_EQ(isob_scrape_run(mech, NULL, &rep), 0);
    printf("# scrape %s: %s%s%s; euid %ld, Yama %d, %zu ranges, %llu bytes planned\n", mech,
           rep.status, rep.reason[0] ? ": " : "", rep.reason, rep.euid, rep.yama, rep.plan.n,
           (unsigned long long)rep.plan.bytes);
    EXPECT(strcmp(rep.status, "ok") == 0);
    for (int id = 0; id < ISOB_SCR__COUNT; id++) {
        const struct isob_scrape_cell *cell = &rep.cells[id];
        for (int m = 0; cell->available && m < ISOB_SCAN__COUNT; m++)
            printf("# scrape %s %s %s: outcome %d%s%s, %llu bytes, found %u%s\n", mech,
                   isob_scrape_id_name((enum isob_scrape_id)id),
                   isob_scan_method_name((enum isob_scan_method)m), cell->res[m].outcome,
                   cell->res[m].err ? ", " : "", cell->res[m].err ? strerror(cell->res[m].err) : "",
                   (unsigned long long)cell->res[m].bytes, cell->res[m].found,
                   cell->res[m].at_canary ? " at the canary" : "");
        if (cell->available)
            EXPECT_EQ(cell->intact_after, 1);
    }
    const struct isob_scrape_cell *root = &rep.cells[ISOB_SCR_ROOT];
    if (root->available && root->who.cap_sys_ptrace && rep.yama < 3)
        for (int m = 0; m < ISOB_SCAN__COUNT; m++)
            EXPECT(root->res[m].found >= 1 && root->res[m].at_canary);
    const struct isob_scrape_cell *same = &rep.cells[ISOB_SCR_SAME_UID];
    EXPECT(same->available);
    for (int m = 0; m < ISOB_SCAN__COUNT; m++) {
        if (rep.yama <= 0)
            EXPECT(same->res[m].found >= 1 && same->res[m].at_canary);
        else
            EXPECT_EQ(same->res[m].outcome, ISOB_OSP_DENIED);
        EXPECT_EQ(rep.cells[ISOB_SCR_SAME_UID_NONDUMPABLE].res[m].outcome, ISOB_OSP_DENIED);
        if (rep.cells[ISOB_SCR_OTHER_UID].available)
            EXPECT_EQ(rep.cells[ISOB_SCR_OTHER_UID].res[m].outcome, ISOB_OSP_DENIED);
    }
    isob_scrape_report_free(&rep);
}

/* ---- The guest -------------------------------------------------------- */

/* PID 1 starts with whatever the kernel gave it: make sure there is a
 * console on fds 0-2 and a /proc for the leak checks and isob. */
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

static void run_mechanism(const char *name)
{
    cur = isob_mechanism_find(name);
    prefix = name;
    if (!cur) {
        printf("not ok %d - %s: not registered\n", ++n_run, name);
        n_failed++;
        return;
    }
    vm_check("probe", c_probe, NULL, VM_PASS);
    vm_check("results equal direct, PKRU closed after each call", c_results_equal_direct, NULL,
             VM_PASS);
    vm_check("errors propagate", c_errors_propagate, NULL, VM_PASS);
    vm_check("create/destroy repeatable", c_create_destroy_repeatable, NULL, VM_PASS);
    vm_check("isolation enforced by PKU", c_isolation, NULL, VM_PASS);
    vm_check("attack: the C library's pkey_set(key, 0), then a load of the secret (must trap)",
             c_pkey_set, NULL, VM_PASS);
    vm_check("control: the same with the stray WRPKRUs left (must breach)", c_pkey_set, (void *)1,
             VM_BREACH);
    vm_check("outside readers ignore the key (scrape)", c_scrape, (void *)name, VM_PASS);
    vm_attacks(cur, 0);
    vm_window_attacks(cur, NULL);
    vm_kernel_attacks(cur);
}

int main(int argc, char **argv)
{
    /* One window attack, in this process: how mpk_init runs the checks of
     * the leaky build (this same program, linked with it). */
    if (argc == 4 && strcmp(argv[1], "--window-attack") == 0) {
        setvbuf(stdout, NULL, _IONBF, 0);
        /* Its judge opens the key with a WRPKRU of its own (below). */
        isob_mpk_test_leave_strays = 1;
        const struct isob_mechanism *m = isob_mechanism_find(argv[2]);
        if (!m)
            vm_fail(__LINE__, "no mechanism %s", argv[2]);
        vm_window_attack(m, atoi(argv[3]));
        return 0;
    }
    int as_init = getpid() == 1;
    if (as_init) {
        setup_system();
    } else {
        setvbuf(stdout, NULL, _IOLBF, 0);
        where = "native test run";
        if (argc != 3) {
            fprintf(stderr, "usage: mpk_init ISOB LEAKY\n");
            return 2;
        }
        isob_path = argv[1];
        leaky_path = argv[2];
    }
    struct utsname u;
    if (uname(&u) == 0)
        printf("# kernel %s %s\n", u.release, u.version);
    /* RDPKRU raises SIGILL without OSPKE, and PID 1 must not die of it. */
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 4)))
        printf("# PKRU at start: 0x%08x\n", isob_rdpkru());
    /* The checks' own judges open keys with WRPKRUs of their own (peek
     * the secret, the legacy gate, the kinds' test copies), which a create
     * would close, as it closes every WRPKRU outside the gate; only the
     * checks that concern the closing, and use no such judge, turn it on. */
    isob_mpk_test_leave_strays = 1;
    char why[256] = "";
    const struct isob_mechanism *mpk = isob_mechanism_find("mpk");
    if (mpk && mpk->probe(why, sizeof why) != 0) {
        printf("# mpk unavailable: %s\n", why);
        if (!as_init)
            return VM_EXIT_SKIP;
    }

    run_mechanism("mpk");
    run_mechanism("mpk-bridge");
    prefix = "mpk";
    vm_kind_checks();

    /* The gate as it was must lose every one of these attacks: that is
     * what shows each attack can fail. */
    prefix = "mpk-legacy (test fixture, must lose)";
    cur = &mpk_legacy_mech;
    vm_attacks(&mpk_legacy_mech, 1);

    /* The window built as the trusted code once was must lose the GOT
     * attack, in the program linked with it. */
    prefix = "mpk";
    vm_window_attacks(isob_mechanism_find("mpk"), leaky_path);
    prefix = "mpk-bridge";
    vm_window_attacks(isob_mechanism_find("mpk-bridge"), leaky_path);

    prefix = "isob";
    vm_check("switch -m mpk --quick --n 2000 runs in the guest", c_isob_switch, (void *)"mpk",
             VM_PASS);
    vm_check("switch -m mpk-bridge --quick --n 2000 runs in the guest", c_isob_switch,
             (void *)"mpk-bridge", VM_PASS);

    printf("1..%d\n", n_run);
    printf("%s %d passed, %d failed\n", RESULT_TAG, n_run - n_failed, n_failed);
    fflush(stdout);
    if (!as_init)
        return n_failed ? 1 : 0;
    sync();
    reboot(RB_POWER_OFF);
    /* Only reached when reboot() fails; PID 1 must not return. */
    for (;;)
        pause();
}
