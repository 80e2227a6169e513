/* The wasm mechanisms' own isolation tests: the direction that matters for
 * WebAssembly, guest code that cannot reach host memory.
 *
 * The guest module exports isob_guest_peek and isob_guest_poke, which read
 * and write 8 bytes at any 32-bit offset, as hostile code in the sandbox
 * could with a pointer it made up.  Every case first shows that they do
 * reach the guest's own memory (so a trap below is the sandbox at work, not
 * a broken hook), then that no offset reaches past it: the access traps,
 * the call returns -EFAULT, the host survives, and the host's data is
 * unchanged.  Runs for wasm (guard pages) and wasm-bounds (bounds checks).
 * Each case forks (tap.h). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isob_wasm.h"
#include "isobench/isolation.h"
#include "isobench/mechanism.h"
#include "tap.h"

#define WASM_PAGE 65536u
#define CANARY 0xca7a11f0cacc1a5eull
/* The largest address a wasm32 access with a zero static offset can touch:
 * the last byte of an 8-byte access at offset 0xfffffff8. */
#define LAST_OFFSET 0xfffffff8u

static const struct isob_mechanism *cur;

static struct isob_comp *make(struct isob_wasm_linear *lin)
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
    CHECK_EQ_LONG(isob_wasm_linear(c, lin), 0);
    CHECK(lin->base != NULL && lin->size > 0 && lin->size % WASM_PAGE == 0);
    return c;
}

/* Plant the secret; returns its linear-memory offset. */
static uint32_t plant(struct isob_comp *c)
{
    struct isob_msg *m = cur->shared(c);
    m->arg[0] = (int64_t)ISOB_SECRET;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_SECRET_PLANT), 0);
    CHECK(m->arg[1] > 0 && m->arg[1] <= UINT32_MAX);
    return (uint32_t)m->arg[1];
}

static long secret_intact(struct isob_comp *c)
{
    cur->shared(c)->arg[0] = (int64_t)ISOB_SECRET;
    return isob_call(c, ISOB_ENTRY_SECRET_CHECK);
}

/* The mapping of this process that contains addr: 1 and its bounds and
 * permissions, or 0 when nothing is mapped there. */
static int mapping_at(uintptr_t addr, uintptr_t *lo, uintptr_t *hi, char perms[5])
{
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long a, b;
        char p[5];
        if (sscanf(line, "%lx-%lx %4s", &a, &b, p) == 3 && addr >= a && addr < b) {
            *lo = a;
            *hi = b;
            memcpy(perms, p, 5);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* The hooks reach the guest's own memory: the secret can be read at its
 * offset, and overwritten, which the trusted code then sees.  This is what
 * proves the traps of the other cases are the sandbox and not a dead hook. */
static void t_guest_reaches_its_own_memory(void)
{
    struct isob_wasm_linear lin;
    struct isob_comp *c = make(&lin);
    uint32_t off = plant(c);
    CHECK(off < lin.size);
    uint64_t v = 0;
    CHECK_EQ_LONG(isob_wasm_peek(c, off, &v), 0);
    CHECK(v == ISOB_SECRET);
    /* The host sees the same bytes at base + offset: one memory, two names. */
    CHECK(memcmp(lin.base + off, &v, sizeof v) == 0);
    /* The last 8 bytes of linear memory are the guest's too. */
    CHECK_EQ_LONG(isob_wasm_peek(c, (uint32_t)lin.size - 8, &v), 0);
    CHECK_EQ_LONG(isob_wasm_poke(c, off, ~ISOB_SECRET), 0);
    CHECK_EQ_LONG(secret_intact(c), 0);
    isob_comp_destroy(c);
}

/* Reads and writes at offsets past the end of linear memory, up to the last
 * 32-bit offset, trap; the compartment keeps serving, its secret intact. */
static void t_access_past_the_end_traps(void)
{
    struct isob_wasm_linear lin;
    struct isob_comp *c = make(&lin);
    uint32_t off = plant(c);
    (void)off;
    const uint32_t size = (uint32_t)lin.size;
    const uint32_t offsets[] = {
        size,              /* the first byte after it */
        size - 4,          /* an access straddling the end */
        size + 4096,
        0x80000000u,
        LAST_OFFSET,
        0xffffffffu,       /* the last byte, and 7 bytes past 4 GiB */
    };
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
        uint64_t v = CANARY;
        CHECK_EQ_LONG(isob_wasm_peek(c, offsets[i], &v), -EFAULT);
        CHECK(v == CANARY);
        CHECK_EQ_LONG(isob_wasm_poke(c, offsets[i], ~ISOB_SECRET), -EFAULT);
    }
    /* Still serving after the traps, and nothing of it was overwritten. */
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_EMPTY), 0);
    CHECK_EQ_LONG(secret_intact(c), 1);
    struct isob_msg *m = cur->shared(c);
    m->arg[0] = 40;
    m->arg[1] = 2;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_ADD), 42);
    isob_comp_destroy(c);
}

/* Pages past the end that a sanitizer build pokes besides the boundary
 * classes: a random sample, since AddressSanitizer makes each trap costly
 * (all 65 536 took 38 s of an idle machine there).  The native build pokes
 * every page. */
#define SAN_SAMPLE_PAGES 4096

/* The 64 KiB pages from the end of linear memory to 4 GiB that the case
 * below pokes, as a flag per page number: every one in the native build;
 * in a sanitizer build every boundary class (the first page past the end
 * and the one after it, each power-of-two page number and its neighbours,
 * the last two pages below 4 GiB) and a seeded random sample of the rest.
 * The seed is printed; ISOB_TEST_SEED repeats a run's sample. */
static void pages_to_poke(uint32_t first, uint32_t last, unsigned char *want)
{
#ifndef TAP_SANITIZED
    for (uint32_t p = first; p <= last; p++)
        want[p] = 1;
#else
    const char *env = getenv("ISOB_TEST_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 0)
                                : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    fprintf(stderr, "# %s: sanitizer build: the boundary pages and %u random ones, "
            "seed %llu (ISOB_TEST_SEED=%llu repeats it)\n", cur->name, SAN_SAMPLE_PAGES,
            (unsigned long long)seed, (unsigned long long)seed);
    const uint32_t edges[] = {first, first + 1, last - 1, last};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        if (edges[i] >= first && edges[i] <= last)
            want[edges[i]] = 1;
    for (uint32_t two = 1; two <= last; two <<= 1)
        for (uint32_t p = two - 1; p <= two + 1; p++)
            if (p >= first && p <= last)
                want[p] = 1;
    /* xorshift64*: the same sequence from the same seed on every libc. */
    uint64_t x = seed ? seed : 1;
    for (unsigned i = 0; i < SAN_SAMPLE_PAGES; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        want[first + (uint32_t)((x * 0x2545f4914f6cdd1dull) >> 33) % (last - first + 1)] = 1;
    }
#endif
}

/* Each 64 KiB-aligned offset from the end of linear memory to 4 GiB (all of
 * them natively, see pages_to_poke) traps on a write.  Tens of thousands of
 * traps: it also shows that a trap leaks nothing (guest stack, signal
 * state), since the compartment still works after all of them. */
static void t_every_page_past_the_end_traps(void)
{
    struct isob_wasm_linear lin;
    struct isob_comp *c = make(&lin);
    plant(c);
    const uint32_t first = (uint32_t)(lin.size / WASM_PAGE), last = LAST_OFFSET / WASM_PAGE;
    CHECK(first <= last);
    unsigned char *want = calloc((size_t)last + 1, 1);
    CHECK(want != NULL);
    pages_to_poke(first, last, want);
    long traps = 0, expected = 0;
    for (uint32_t p = first; p <= last; p++) {
        if (!want[p])
            continue;
        expected++;
        if (isob_wasm_poke(c, p * WASM_PAGE, ~ISOB_SECRET) == -EFAULT)
            traps++;
    }
    free(want);
    fprintf(stderr, "# %s: %ld of the %u pages past the end poked\n", cur->name, expected,
            last - first + 1);
    CHECK_EQ_LONG(traps, expected);
    CHECK_EQ_LONG(secret_intact(c), 1);
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_COUNT_CALLS), 3);
    isob_comp_destroy(c);
}

/* Host memory right after the end of linear memory stays out of reach.  For
 * wasm-bounds whatever the host has mapped there (or a canary page placed
 * there by this test) is exactly base + offset of an out-of-bounds access,
 * so only the bounds check stands in the way.  For wasm the address is in
 * the guard reservation, and host memory starts only past its end. */
static void t_host_memory_next_to_it_is_unreachable(void)
{
    struct isob_wasm_linear lin;
    struct isob_comp *c = make(&lin);
    unsigned char *next = lin.base + lin.size;
    uintptr_t lo, hi;
    char perms[5];
    unsigned char *canary_page = NULL;
    if (!mapping_at((uintptr_t)next, &lo, &hi, perms)) {
        canary_page = mmap(next, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        CHECK(canary_page == next);
        memcpy(canary_page, &(uint64_t){CANARY}, 8);
        CHECK(mapping_at((uintptr_t)next, &lo, &hi, perms));
    }
    fprintf(stderr, "# %s: after linear memory: %s %s\n", cur->name, perms,
            canary_page ? "(canary page placed by the test)" : "(the host's own mapping)");
    if (lin.reserved > lin.size) {
        /* Guard pages: inaccessible through the whole reservation. */
        CHECK(strcmp(perms, "---p") == 0);
        CHECK(hi >= (uintptr_t)lin.base + lin.reserved);
    }
    unsigned char before[8], after[8];
    int readable = perms[0] == 'r';
    if (readable)
        memcpy(before, next, 8);
    CHECK_EQ_LONG(isob_wasm_poke(c, (uint32_t)lin.size, ~CANARY), -EFAULT);
    if (readable) {
        memcpy(after, next, 8);
        CHECK(memcmp(before, after, 8) == 0);
    }
    if (canary_page)
        munmap(canary_page, 4096);
    isob_comp_destroy(c);
}

/* A guest that knows (or guesses) where a host secret is can only turn it
 * into a 32-bit offset from its own base: the access traps or lands in its
 * own memory, and the host secret is unchanged. */
static void t_host_address_is_unreachable(void)
{
    struct isob_wasm_linear lin;
    struct isob_comp *c = make(&lin);
    static volatile uint64_t host_secret = CANARY;
    uint64_t *heap_secret = malloc(sizeof *heap_secret);
    CHECK(heap_secret != NULL);
    *heap_secret = CANARY;
    uintptr_t targets[] = {(uintptr_t)&host_secret, (uintptr_t)heap_secret, (uintptr_t)&lin};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        uint32_t off = (uint32_t)(targets[i] - (uintptr_t)lin.base);
        int rc = isob_wasm_poke(c, off, ~CANARY);
        /* Either a trap or a write into the guest's own memory. */
        CHECK(rc == -EFAULT || (rc == 0 && off < lin.size));
    }
    CHECK(host_secret == CANARY);
    CHECK(*heap_secret == CANARY);
    free(heap_secret);
    isob_comp_destroy(c);
}

/* With guard pages every address a guest access can form, base + 32-bit
 * offset + 32-bit static offset + 8, lies in the reservation, and the
 * reservation holds nothing but the linear memory and inaccessible pages. */
static void t_guard_reservation_covers_every_address(void)
{
    struct isob_wasm_linear lin;
    struct isob_comp *c = make(&lin);
    if (lin.reserved == lin.size)
        SKIP("%s has no guard reservation: its bounds checks are tested above", cur->name);
    CHECK(lin.reserved >= ((size_t)1 << 33) + 8);
    uintptr_t a = (uintptr_t)lin.base, end = a + lin.reserved;
    while (a < end) {
        uintptr_t lo, hi;
        char perms[5];
        CHECK(mapping_at(a, &lo, &hi, perms));
        if (a < (uintptr_t)lin.base + lin.size)
            CHECK(perms[0] == 'r' && hi <= (uintptr_t)lin.base + lin.size);
        else
            CHECK(strcmp(perms, "---p") == 0);
        a = hi;
    }
    isob_comp_destroy(c);
}

/* The in-process cell of the matrix comes from the guest's escape
 * attempts: loads and stores past the end of linear memory trap
 * out-of-bounds, indirect calls outside the table trap call_indirect, the
 * secret is intact, and the host's read of the guest is noted. */
static void t_verdict_comes_from_guest_escapes(void)
{
    struct isob_isolation r;
    CHECK_EQ_LONG(isob_isolation_test(cur, &r), 0);
    const struct isob_cell *cell = &r.cells[ISOB_ATK_IN_PROCESS];
    fprintf(stderr, "# %s: verdict %s; %s\n", cur->name, r.verdict, cell->evidence);
    CHECK(strcmp(r.verdict, "enforced") == 0);
    CHECK_EQ_LONG(cell->verdict, ISOB_CELL_ENFORCED);
    CHECK(strstr(cell->evidence, "6 of 6 loads and stores past the end") != NULL);
    CHECK(strstr(cell->evidence, "trapped out-of-bounds") != NULL);
    CHECK(strstr(cell->evidence, "3 of 3 indirect calls") != NULL);
    CHECK(strstr(cell->evidence, "trapped call_indirect") != NULL);
    CHECK(strstr(cell->evidence, "host read the secret") != NULL);
    CHECK_EQ_LONG(r.intact, 1);
    /* OS-level readers are pointed at the secret's host address. */
    struct isob_wasm_linear lin;
    struct isob_comp *c = make(&lin);
    uint32_t off = plant(c);
    struct isob_place where;
    CHECK_EQ_LONG(cur->locate(c, off, &where), 0);
    CHECK(where.pid == 0 && where.addr == (uintptr_t)(lin.base + off));
    CHECK(*(volatile uint64_t *)where.addr == ISOB_SECRET);
    CHECK_EQ_LONG(cur->locate(c, lin.size, &where), -EFAULT);
    isob_comp_destroy(c);
}

static sigjmp_buf host_fault_jmp;
static volatile sig_atomic_t host_fault_seen;

static void on_host_fault(int sig)
{
    (void)sig;
    host_fault_seen = 1;
    siglongjmp(host_fault_jmp, 1);
}

/* The wasm fault handler claims only faults inside a guest's reservation
 * during a guest call.  A fault in the host still reaches the handler that
 * was there before (here the test's), and without one it still kills. */
static void t_host_faults_are_not_swallowed(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_host_fault;
    sa.sa_flags = SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
    struct isob_wasm_linear lin;
    struct isob_comp *c = make(&lin);
    /* An out-of-bounds guest access is still a trap... */
    CHECK_EQ_LONG(isob_wasm_poke(c, 0xfffffff0u, 0), -EFAULT);
    CHECK(!host_fault_seen);
    /* ...and a host fault, even inside the guard reservation, goes to the
     * test's handler, because no guest code was running. */
    volatile unsigned char *guard = lin.base + lin.reserved - 1;
    volatile unsigned char *unmapped = (volatile unsigned char *)(uintptr_t)16;
    if (sigsetjmp(host_fault_jmp, 1) == 0)
        (void)*unmapped;
    CHECK(host_fault_seen);
    host_fault_seen = 0;
    if (lin.reserved > lin.size) {
        if (sigsetjmp(host_fault_jmp, 1) == 0)
            (void)*guard;
        CHECK(host_fault_seen);
    }
    /* Without a handler before it, a host fault kills as it always did. */
    pid_t pid = fork();
    if (pid == 0) {
        /* A core file would only slow the test down. */
        setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0});
        signal(SIGSEGV, SIG_DFL);
        struct isob_comp *c2 = make(&lin);
        (void)c2;
        (void)*unmapped;
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    isob_comp_destroy(c);
}

/* A SIGSEGV sent to the process (kill, tgkill) is no guard fault, even
 * while a guard reservation exists: with no handler before the wasm one it
 * ends the process with SIGSEGV, as it would without the wasm mechanism. */
static void t_sent_segv_kills(void)
{
    for (int how = 0; how < 2; how++) {
        pid_t pid = fork();
        if (pid == 0) {
            setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0});
            signal(SIGSEGV, SIG_DFL);
            struct isob_wasm_linear lin;
            struct isob_comp *c = make(&lin);
            (void)c;
            if (how == 0)
                kill(getpid(), SIGSEGV);
            else
                syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), SIGSEGV);
            _exit(0); /* survived: the signal was swallowed */
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV))
            fprintf(stderr, "# %s: wait status 0x%x\n", how ? "tgkill" : "kill", (unsigned)st);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    }
}

static volatile sig_atomic_t sent_seen;

static void on_sent(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    if (si->si_code <= 0 && si->si_pid == getpid())
        sent_seen++;
}

/* A sent SIGSEGV goes to what was there before the wasm handler (a handler,
 * or SIG_IGN), and the guard handler stays: the next out-of-bounds guest
 * access is still a trap, not the end of the host. */
static void t_guest_traps_after_a_sent_segv(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sent;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
    struct isob_wasm_linear lin;
    struct isob_comp *c = make(&lin);
    CHECK(kill(getpid(), SIGSEGV) == 0);
    CHECK_EQ_LONG(sent_seen, 1);
    CHECK_EQ_LONG(isob_wasm_poke(c, 0xfffffff0u, 0), -EFAULT);
    CHECK_EQ_LONG(isob_wasm_peek(c, 0xfffffff0u, &(uint64_t){0}), -EFAULT);
    isob_comp_destroy(c);
    /* Ignored before: ignored still, and the guard handler stays. */
    signal(SIGSEGV, SIG_IGN);
    c = make(&lin);
    CHECK(kill(getpid(), SIGSEGV) == 0);
    CHECK_EQ_LONG(isob_wasm_poke(c, 0xfffffff0u, 0), -EFAULT);
    CHECK(kill(getpid(), SIGSEGV) == 0);
    CHECK_EQ_LONG(isob_wasm_poke(c, 0xfffffff0u, 0), -EFAULT);
    isob_comp_destroy(c);
}

/* The guard reservation the calling thread runs guest code in (memory.c):
 * guarded() in wasm.c sets it around every guest call. */
extern __thread unsigned char *isob_wasm_guard_active __attribute__((tls_model("initial-exec")));

/* Seconds the forged signal's case may take before it counts as lost. */
#define FORGED_TIMEOUT_S tap_limit(60)

static volatile sig_atomic_t forged_seen;
static void *volatile forged_addr;

static void on_forged(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    if (si->si_code == SI_QUEUE) {
        forged_seen++;
        forged_addr = si->si_addr;
    }
}

/* A sent SIGSEGV whose siginfo names an address inside the guard
 * reservation, sent while guest code runs (rt_tgsigqueueinfo lets a sender
 * write every field of it; only si_code, <= 0, says it was sent) is no
 * guard fault: it goes to the handler before the wasm one, and the guest
 * call is not turned into a trap.  A handler that judged by the address
 * alone would longjmp out of the guest call here. */
static void t_forged_segv_in_a_guest_call_is_not_a_trap(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_forged;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
    struct isob_wasm_linear lin;
    struct isob_comp *c = make(&lin);
    if (lin.reserved <= lin.size)
        SKIP("%s has no guard reservation: its fault handler claims no fault", cur->name);
    unsigned char *inside = lin.base + lin.size + WASM_PAGE;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = SIGSEGV;
    si.si_code = SI_QUEUE;
    si.si_addr = inside;
    /* As guarded() does while the guest runs.  A handler that took the
     * signal for a trap would longjmp to a guest call that has returned,
     * and this case would never get back here: the alarm ends it well
     * before the runner's own. */
    alarm(FORGED_TIMEOUT_S);
    isob_wasm_guard_active = lin.base;
    long r = syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid), SIGSEGV, &si);
    isob_wasm_guard_active = NULL;
    alarm(tap_limit(TAP_TIMEOUT_S));
    CHECK_EQ_LONG(r, 0);
    CHECK_EQ_LONG(forged_seen, 1);
    CHECK(forged_addr == inside);
    /* The guard handler is still there: a guest access past the end traps. */
    CHECK_EQ_LONG(isob_wasm_poke(c, 0xfffffff0u, 0), -EFAULT);
    isob_comp_destroy(c);
}

int main(void)
{
    const char *names[] = {"wasm", "wasm-bounds"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        cur = isob_mechanism_find(names[i]);
        if (!cur) {
            printf("not ok %d - %s is not registered\n", ++tap_n, names[i]);
            tap_failed++;
            continue;
        }
        char name[128];
#define RUN(fn)                                                  \
        snprintf(name, sizeof name, "%s: %s", cur->name, #fn);   \
        tap_run(name, fn)
        RUN(t_guest_reaches_its_own_memory);
        RUN(t_access_past_the_end_traps);
        RUN(t_every_page_past_the_end_traps);
        RUN(t_host_memory_next_to_it_is_unreachable);
        RUN(t_host_address_is_unreachable);
        RUN(t_guard_reservation_covers_every_address);
        RUN(t_verdict_comes_from_guest_escapes);
        RUN(t_host_faults_are_not_swallowed);
        RUN(t_sent_segv_kills);
        RUN(t_guest_traps_after_a_sent_segv);
        RUN(t_forged_segv_in_a_guest_call_is_not_a_trap);
#undef RUN
    }
    return tap_done();
}
