/* Attacks on the MPK call gate, run in the QEMU TCG guest (mpk_init.c).
 *
 * The attacker is the untrusted side: it writes any memory it can address,
 * from any thread, and jumps to any instruction of the gate.  Each attack
 * runs in a child process against a fresh compartment holding a planted
 * secret, and ends one of three ways: the child faults (the attack was
 * stopped by the hardware), the child returns to untrusted code and the
 * judge finds the key closed, the secret neither returned nor changed (the
 * attack was refused or turned into an ordinary call), or the judge finds
 * otherwise and the child exits VM_EXIT_BREACH.
 *
 * The same scenarios run against the test-only legacy gate (mpk_legacy.c),
 * where they must end in a breach: that is what shows that each of them can
 * fail.  Where the two gates differ in layout, the scenario attacks what
 * the gate at hand has: the legacy gate keeps its expected value, trusted
 * state and message pointers in the descriptor; the complete gate keeps
 * them in its key-tagged slot page, so the attacker's stores go there and
 * must fault, and a separate check scrambles the whole descriptor but the
 * slot index to show that the gate reads nothing else from it. */
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/arch_x86.h"
#include "mpk_vm.h"

/* The secret every attack's compartment holds. */
#define VM_SECRET 0x5ec2e7d00d1e5ea7ull
/* A returned value this close to the secret counts as a leak of it (the
 * table-pointer attack returns it plus one). */
#define VM_LEAK_SLACK 16
/* Bytes of the fake stack a jump starts on. */
#define VM_FAKE_STACK (64u * 1024u)
/* Bytes of the caller's stack scanned for return addresses into the gate. */
#define VM_STACK_SCAN (8u * 1024u)
/* Seconds one jump may take before it counts as hung (a gate that looped
 * for ever). */
#define VM_JUMP_TIMEOUT_S 10
/* Seconds the thread of a stalled call waits for the fault it resolves. */
#define VM_STALL_WAIT_MS 20000

struct ctx {
    struct isob_comp *c;
    struct isob_mpk_view v;
    volatile uint64_t *secret;   /* where the trusted side keeps it */
};

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (si->si_code == SEGV_PKUERR) {
        dprintf(1, "# fault: SIGSEGV SEGV_PKUERR at %p, key %u\n", si->si_addr,
                (unsigned)si->si_pkey);
        _exit(VM_EXIT_PKUERR);
    }
    dprintf(1, "# fault: signal %d, si_code %d, at %p\n", sig, si->si_code, si->si_addr);
    /* Back to the default action: returning re-runs the faulting
     * instruction, which now kills the process with the same signal. */
    signal(sig, SIG_DFL);
}

/* A compartment of m with the secret planted, and a SIGSEGV handler that
 * says how a fault came about. */
static void setup(struct ctx *x, const struct isob_mechanism *m)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    x->c = vm_make(m);
    vm_view(x->c, &x->v);
    x->v.msg->arg[0] = (int64_t)VM_SECRET;
    VM_EXPECT(isob_call(x->c, ISOB_ENTRY_SECRET_PLANT) == 0);
    x->secret = (volatile uint64_t *)(uintptr_t)x->v.msg->arg[1];
    VM_EXPECT(x->secret != NULL);
    VM_EXPECT(isob_rdpkru() & (1u << (2 * x->v.pkey)));
}

/* The secret as the trusted memory holds it: the judge opens the key for
 * itself, which the attacker cannot. */
static uint64_t peek_secret(const struct ctx *x)
{
    uint32_t pkru = isob_rdpkru();
    isob_wrpkru(pkru & ~(3u << (2 * x->v.pkey)));
    uint64_t s = *x->secret;
    isob_wrpkru(pkru);
    return s;
}

/* Back in untrusted code after an attack: the key must be closed, the
 * result must not carry the secret, the secret must be unchanged. */
static void judge(const struct ctx *x, uint32_t pkru, long ret, const char *how)
{
    if (!(pkru & (1u << (2 * x->v.pkey))))
        vm_breach("%s: back in untrusted code with key %d open (PKRU 0x%08x)", how, x->v.pkey,
                  pkru);
    if ((uint64_t)ret - VM_SECRET < VM_LEAK_SLACK)
        vm_breach("%s: the call returned the secret (%#lx)", how, (unsigned long)ret);
    uint64_t s = peek_secret(x);
    if (s != VM_SECRET)
        vm_breach("%s: the secret changed to %#llx", how, (unsigned long long)s);
    printf("# held: %s: returned %ld, PKRU 0x%08x, secret intact\n", how, ret, pkru);
}

/* ---- Corrupting what the gate reads ---------------------------------- */

/* The expected closed value.  Legacy: point the descriptor's expected-value
 * pointer at the attacker's copy that expects the open value, and make the
 * gate "close" with the open value.  Complete gate: the expected values are
 * an immediate and the slot's own field; store into that field. */
static void a_expected_value(void *arg)
{
    struct ctx x;
    setup(&x, arg);
    if (x.v.d_expect) {
        static uint32_t fake_state[1024];
        fake_state[0] = x.v.pkru_open;
        *x.v.d_expect = fake_state;
        *x.v.d_pkru_closed = x.v.pkru_open;
        long ret = isob_call(x.c, ISOB_ENTRY_EMPTY);
        judge(&x, isob_rdpkru(), ret, "expected-value pointer redirected");
        return;
    }
    volatile uint32_t *field = (volatile uint32_t *)((char *)x.v.gate_state + MPK_SLOT_PKRU_OPEN);
    *field = 0;
    vm_breach("a store into the gate state's expected PKRU value went through");
}

/* The trusted state.  Legacy: point the descriptor's trusted-state pointer
 * at the secret, whose word the state's call counter then is: the
 * COUNT_CALLS entry increments the secret and returns it.  Complete gate:
 * store into the slot's table pointer. */
static void a_table_pointer(void *arg)
{
    struct ctx x;
    setup(&x, arg);
    if (x.v.d_table) {
        *x.v.d_table = (void *)(uintptr_t)x.secret;
        long ret = isob_call(x.c, ISOB_ENTRY_COUNT_CALLS);
        judge(&x, isob_rdpkru(), ret, "table pointer redirected at the secret");
        return;
    }
    volatile uint64_t *field = (volatile uint64_t *)((char *)x.v.gate_state + MPK_SLOT_TABLE);
    *field = (uintptr_t)x.secret;
    vm_breach("a store into the gate state's table pointer went through");
}

/* The message.  Legacy: point the descriptor's message pointer so that the
 * ADD entry's first argument is the secret.  Complete gate: store into the
 * slot's message pointer. */
static void a_message_pointer(void *arg)
{
    struct ctx x;
    setup(&x, arg);
    if (x.v.d_msg) {
        *x.v.d_msg = (char *)(uintptr_t)x.secret - offsetof(struct isob_msg, arg);
        long ret = isob_call(x.c, ISOB_ENTRY_ADD);
        judge(&x, isob_rdpkru(), ret, "message pointer redirected at the secret");
        return;
    }
    volatile uint64_t *field = (volatile uint64_t *)((char *)x.v.gate_state + MPK_SLOT_MSG);
    *field = (uintptr_t)x.secret - offsetof(struct isob_msg, arg);
    vm_breach("a store into the gate state's message pointer went through");
}

/* Complete gate only: every byte of the descriptor but the ops pointer and
 * the slot index overwritten (with a byte pattern, or with the secret's
 * address in every word); calls must still give the right results from the
 * real buffer, with the key closed and the secret intact afterwards. */
static void scramble(void *arg, int pointers)
{
    struct ctx x;
    setup(&x, arg);
    VM_EXPECT(x.v.d_slot != NULL);
    uint32_t slot = *x.v.d_slot;
    unsigned char *d = (unsigned char *)(uintptr_t)x.v.descriptor;
    size_t first = offsetof(struct isob_comp, data_cap);
    if (pointers) {
        for (size_t i = first; i + 8 <= x.v.descriptor_len; i += 8) {
            uint64_t w = (uintptr_t)x.secret;
            memcpy(d + i, &w, 8);
        }
    } else {
        memset(d + first, 0xa5, x.v.descriptor_len - first);
    }
    *x.v.d_slot = slot;
    struct isob_msg *m = x.v.msg;
    m->arg[0] = 1000;
    m->arg[1] = 234;
    long ret = isob_call(x.c, ISOB_ENTRY_ADD);
    VM_EXPECT(ret == 1234);
    m->len = 100;
    memset(m->data, 0x3c, 100);
    VM_EXPECT(isob_call(x.c, ISOB_ENTRY_SINK) == (long)isob_checksum(m->data, 100));
    judge(&x, isob_rdpkru(), ret, pointers ? "descriptor words all pointing at the secret"
                                           : "descriptor bytes all 0xa5");
}

static void a_scramble_bytes(void *arg) { scramble(arg, 0); }
static void a_scramble_pointers(void *arg) { scramble(arg, 1); }

/* Complete gate only: the slot index, the one number the gate takes from
 * the descriptor, set to each value of interest.  Each call must fault
 * (no live slot there) or be an ordinary call of the compartment that owns
 * the slot it names, after which the key is closed. */
struct index_attack {
    const struct isob_mechanism *mech;
    uint32_t (*value)(const struct ctx *x, int other_slot);
    const char *what;
};

static uint32_t ix_zero(const struct ctx *x, int o) { (void)x; (void)o; return 0; }
static uint32_t ix_unused(const struct ctx *x, int o)
{
    /* A key that neither compartment of the check holds. */
    for (uint32_t k = MPK_SLOTS - 1; k > 0; k--)
        if ((int)k != x->v.pkey && (int)k != o)
            return k;
    return 0;
}
static uint32_t ix_alias(const struct ctx *x, int o) { (void)o; return (uint32_t)x->v.pkey + MPK_SLOTS; }
static uint32_t ix_high(const struct ctx *x, int o) { (void)o; return 0x80000000u | (uint32_t)x->v.pkey; }
static uint32_t ix_all_ones(const struct ctx *x, int o) { (void)x; (void)o; return 0xffffffffu; }
static uint32_t ix_other(const struct ctx *x, int o) { (void)x; return (uint32_t)o; }

static void a_slot_index(void *arg)
{
    const struct index_attack *ia = arg;
    struct ctx x;
    setup(&x, ia->mech);
    /* A second live compartment, whose slot the index may also name. */
    struct isob_comp *other = vm_make(ia->mech);
    int other_key = isob_mpk_test_pkey(other);
    uint32_t value = ia->value(&x, other_key);
    printf("# slot index %#x (compartment's %d, other live %d)\n", value, x.v.pkey, other_key);
    *x.v.d_slot = value;
    x.v.msg->arg[0] = 20;
    x.v.msg->arg[1] = 22;
    long ret = isob_call(x.c, ISOB_ENTRY_ADD);
    judge(&x, isob_rdpkru(), ret, ia->what);
    VM_EXPECT(isob_rdpkru() & (1u << (2 * other_key)));
}

/* ---- Jumps into the gate ---------------------------------------------- */

/* What every register but EAX, ECX, EDX and RSP holds at a jump. */
enum jump_fill {
    FILL_OPEN,     /* the open PKRU value */
    FILL_INDEX,    /* the compartment's slot index */
    FILL_FORGED,   /* the index that, unbounded, names a forged slot */
};

struct jump_variant {
    int eax_open;       /* EAX = the open value, else 0 (every key open) */
    enum jump_fill fill;
};

static const struct jump_variant jump_variants[] = {
    {1, FILL_OPEN}, {1, FILL_INDEX}, {0, FILL_OPEN}, {0, FILL_INDEX}, {0, FILL_FORGED},
};
#define N_JUMP_VARIANTS (sizeof jump_variants / sizeof jump_variants[0])

static void variant_name(const struct jump_variant *jv, char *buf, size_t len)
{
    static const char *const fills[] = {"open PKRU", "slot index",
                                        "index of a forged slot in attacker memory"};
    snprintf(buf, len, "EAX=%s, other registers=%s", jv->eax_open ? "open PKRU" : "0 (all open)",
             fills[jv->fill]);
}

/* Bytes between the gate states and the forged slot, first tried: little
 * enough that its index fits the gate's 32-bit index register; larger
 * distances (doubling) are tried where something is mapped there. */
#define VM_FORGED_DISTANCE (256ull << 20)
#define VM_FORGED_TRIES 12

/* A gate state forged in the attacker's memory, above the real ones where
 * a 32-bit index reaches: it expects PKRU 0 (every key open), points the
 * trusted state at the secret (whose word the call counter then is) and
 * the trusted stack at the attacker's memory.  A gate that used the index
 * without bounding it after its WRPKRU would run the trusted code on it;
 * the judge would then find the secret changed.  Returns its index. */
static uint32_t forge_slot(const struct ctx *x)
{
    size_t len = 2 * 1024 * 1024;
    for (int i = 0; i < VM_FORGED_TRIES; i++) {
        uint64_t distance = VM_FORGED_DISTANCE << i;
        unsigned char *want = (unsigned char *)((uintptr_t)isob_mpk_slots + distance);
        unsigned char *p = mmap(want, len, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED)
            continue;
        VM_EXPECT(p == want);
        uint64_t *w = (uint64_t *)(void *)p;
        w[MPK_SLOT_PKRU_OPEN / 8] = 0;  /* PKRU 0, not busy */
        w[MPK_SLOT_TABLE / 8] = (uintptr_t)x->secret;
        w[MPK_SLOT_MSG / 8] = (uintptr_t)(p + 4096);
        w[MPK_SLOT_CAP / 8] = 1024;
        w[MPK_SLOT_STACK / 8] = (uintptr_t)(p + len - 4096);
        return (uint32_t)(distance >> MPK_SLOT_SHIFT);
    }
    vm_fail(__LINE__, "no room for a forged gate state within reach of a 32-bit index");
}

/* Jump to `site` with the registers of `jv` on a fake stack, then judge. */
static void jump_once(const struct ctx *x, const struct isob_mpk_site *site,
                      const struct jump_variant *jv)
{
    uint64_t *stack = mmap(NULL, VM_FAKE_STACK, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    VM_EXPECT(stack != MAP_FAILED);
    for (size_t i = 0; i < VM_FAKE_STACK / 8; i++)
        stack[i] = (uintptr_t)vm_jump_land;
    uint64_t fill = jv->fill == FILL_OPEN    ? x->v.pkru_open
                    : jv->fill == FILL_INDEX ? (uint64_t)x->v.pkey
                                             : forge_slot(x);
    struct vm_regs r = {
        .rax = jv->eax_open ? x->v.pkru_open : 0,
        .rbx = fill, .rcx = 0, .rdx = 0, .rsi = fill, .rdi = fill, .rbp = fill,
        .r8 = fill, .r9 = fill, .r10 = fill, .r11 = fill, .r12 = fill, .r13 = fill,
        .r14 = fill, .r15 = fill,
        .rsp = (uintptr_t)(stack + VM_FAKE_STACK / 16),
    };
    uint32_t pkru = 0;
    uint64_t rax = 0;
    VM_EXPECT(vm_jump(site->addr, &r, &pkru, &rax) == 0);
    char how[160], vn[80];
    variant_name(jv, vn, sizeof vn);
    snprintf(how, sizeof how, "jump to %p (%s; %s)", site->addr,
             site->role == MPK_ROLE_OPEN ? "opening WRPKRU"
             : site->role == MPK_ROLE_CLOSE ? "closing WRPKRU" : "gate instruction", vn);
    judge(x, pkru, (long)rax, how);
}

struct jump_attack {
    const struct isob_mechanism *mech;
    const struct jump_variant *jv;
    uint32_t kind_gate;  /* 0: the gate of the view; else one of ERIM's call kinds' gates */
};

/* Every recorded instruction of the compartment's gate (and of the closing
 * sequence set-up uses), each in a child of its own.  Passes when every
 * jump faulted or came back closed with the secret safe. */
static void a_jump_all(void *arg)
{
    const struct jump_attack *ja = arg;
    struct ctx x;
    setup(&x, ja->mech);
    int n = 0, faulted = 0, returned = 0, bad = 0;
    uint32_t gate = ja->kind_gate ? ja->kind_gate : x.v.gate;
    for (size_t i = 0; i < x.v.n_sites; i++) {
        const struct isob_mpk_site *s = &x.v.sites[i];
        if (s->gate != gate && s->gate != MPK_GATE_CLOSE)
            continue;
        if (x.v.gate == MPK_GATE_BRIDGE && s->gate == MPK_GATE_CLOSE)
            continue;
        n++;
        /* What each jump's child prints is shown only when it ended
         * neither way: fifty lines per variant would bury the log. */
        int pfd[2];
        VM_EXPECT(pipe(pfd) == 0);
        fflush(stdout);
        pid_t pid = fork();
        VM_EXPECT(pid >= 0);
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            alarm(VM_JUMP_TIMEOUT_S);
            dup2(pfd[1], 1);
            close(pfd[0]);
            close(pfd[1]);
            jump_once(&x, s, ja->jv);
            _exit(0);
        }
        close(pfd[1]);
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        char out[2048];
        ssize_t got = read(pfd[0], out, sizeof out - 1);
        out[got > 0 ? got : 0] = 0;
        close(pfd[0]);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            returned++;
        else if ((WIFEXITED(st) && WEXITSTATUS(st) == VM_EXIT_PKUERR) ||
                 (WIFSIGNALED(st) && (WTERMSIG(st) == SIGSEGV || WTERMSIG(st) == SIGBUS ||
                                      WTERMSIG(st) == SIGILL || WTERMSIG(st) == SIGABRT)))
            faulted++;
        else {
            bad++;
            printf("# instruction %zu at %p: %s %d\n%s", i, s->addr,
                   WIFSIGNALED(st) ? "killed by signal" : "exit",
                   WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), out);
        }
    }
    printf("# %d gate instructions: %d faulted, %d came back closed, %d otherwise\n", n, faulted,
           returned, bad);
    VM_EXPECT(n > 0);
    if (bad)
        vm_fail(__LINE__, "%d jumps ended neither in a fault nor closed", bad);
}

/* Legacy only: the closing WRPKRU with EAX and every other register set to
 * the open value: the check compares PKRU with a register the attacker
 * chose. */
static void a_jump_close(void *arg)
{
    const struct jump_attack *ja = arg;
    struct ctx x;
    setup(&x, ja->mech);
    for (size_t i = 0; i < x.v.n_sites; i++)
        if (x.v.sites[i].role == MPK_ROLE_CLOSE) {
            jump_once(&x, &x.v.sites[i], ja->jv);
            return;
        }
    vm_fail(__LINE__, "no closing WRPKRU recorded");
}

/* ---- A second thread during a call ------------------------------------ */

/* A call that stops inside the window: the trusted SINK entry reads the
 * shared buffer's second page, which a userfaultfd holds missing, so the
 * calling thread waits in the kernel with the key open in its PKRU while
 * another thread does `during` and then supplies the page. */
struct stall {
    struct ctx *x;
    int uffd;
    unsigned char *page;
    uintptr_t caller_frame;
    void (*during)(struct stall *s);
    int found;          /* return addresses into a trusted call found */
    long busy_ret;      /* what a second caller got */
    uint32_t busy_pkru;
    int failed;
};

extern char __executable_start[], etext[];

/* w is the return address of a direct call to fn: the five bytes before it
 * are E8 and a displacement that lands on fn. */
static int returns_from_call_to(uint64_t w, const void *fn)
{
    if (w < (uintptr_t)__executable_start + 5 || w >= (uintptr_t)etext)
        return 0;
    const unsigned char *p = (const unsigned char *)(uintptr_t)w;
    int32_t rel;
    memcpy(&rel, p - 4, sizeof rel);
    return p[-5] == 0xe8 && w + (uint64_t)(int64_t)rel == (uintptr_t)fn;
}

static void *stall_thread(void *arg)
{
    struct stall *s = arg;
    struct pollfd pfd = {.fd = s->uffd, .events = POLLIN};
    struct uffd_msg msg;
    if (poll(&pfd, 1, VM_STALL_WAIT_MS) != 1 || read(s->uffd, &msg, sizeof msg) != sizeof msg ||
        msg.event != UFFD_EVENT_PAGEFAULT) {
        s->failed = 1;
        return NULL;
    }
    s->during(s);
    static unsigned char zeros[4096] __attribute__((aligned(4096)));
    struct uffdio_copy copy = {
        .dst = (uintptr_t)s->page, .src = (uintptr_t)zeros, .len = sizeof zeros, .mode = 0};
    if (ioctl(s->uffd, UFFDIO_COPY, &copy) != 0)
        s->failed = 1;
    return NULL;
}

/* Run SINK over two pages with the second held missing; `during` runs in
 * another thread while the trusted side waits for it. */
static long __attribute__((noinline)) stalled_call(struct stall *s)
{
    struct ctx *x = s->x;
    /* User-mode-only faults are all this needs, and an unprivileged
     * process may ask for them where vm.unprivileged_userfaultfd is 0. */
    s->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
    if (s->uffd < 0)
        s->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
    if (s->uffd < 0)
        vm_skip("userfaultfd: %s", strerror(errno));
    struct uffdio_api api = {.api = UFFD_API};
    VM_EXPECT(ioctl(s->uffd, UFFDIO_API, &api) == 0);
    s->page = (unsigned char *)x->v.msg + 4096;
    VM_EXPECT(((uintptr_t)x->v.msg & 4095) == 0);
    VM_EXPECT(madvise(s->page, 4096, MADV_DONTNEED) == 0);
    struct uffdio_register reg = {
        .range = {.start = (uintptr_t)s->page, .len = 4096}, .mode = UFFDIO_REGISTER_MODE_MISSING};
    VM_EXPECT(ioctl(s->uffd, UFFDIO_REGISTER, &reg) == 0);
    x->v.msg->len = 8192;
    memset(x->v.msg->data, 0x11, (size_t)(s->page - x->v.msg->data));
    s->caller_frame = (uintptr_t)__builtin_frame_address(0);
    pthread_t th;
    VM_EXPECT(pthread_create(&th, NULL, stall_thread, s) == 0);
    long ret = isob_call(x->c, ISOB_ENTRY_SINK);
    pthread_join(th, NULL);
    VM_EXPECT(!s->failed);
    return ret;
}

/* The attacker thread looks on the caller's stack for return addresses of
 * calls into the trusted code (the window copy the gate calls, or the
 * ordinary copy the legacy gate calls) and points each at vm_hijack_land: it cannot
 * tell the live one from those earlier calls left below the stack pointer,
 * and rewriting those does no harm. */
static void during_hijack(struct stall *s)
{
    uint64_t *lo = (uint64_t *)(s->caller_frame - VM_STACK_SCAN);
    uint64_t *hi = (uint64_t *)s->caller_frame;
    for (uint64_t *p = lo; p < hi; p++)
        if (returns_from_call_to(*p, (const void *)isob_window_trusted_call) ||
            returns_from_call_to(*p, (const void *)isob_trusted_call)) {
            s->found++;
            *p = (uintptr_t)vm_hijack_land;
        }
    dprintf(1, "# %d return addresses into the trusted code found on the caller's stack "
               "and pointed at the attacker's code\n", s->found);
}

static void a_stack_hijack(void *arg)
{
    struct ctx x;
    setup(&x, arg);
    struct stall s = {.x = &x, .during = during_hijack};
    long ret = stalled_call(&s);
    VM_EXPECT(ret == (long)isob_checksum(x.v.msg->data, 8192));
    judge(&x, isob_rdpkru(), ret, "a second thread rewrote the caller's stack during a call");
}

/* Complete gate only: the attacker thread stores into the trusted stack
 * while the call runs on it. */
static void during_store_trusted_stack(struct stall *s)
{
    volatile uint64_t *top = (volatile uint64_t *)s->x->v.stack_hi - 1;
    *top = (uintptr_t)vm_hijack_land;
    dprintf(1, "# the store into the trusted stack went through\n");
    _exit(VM_EXIT_BREACH);
}

static void a_store_trusted_stack(void *arg)
{
    struct ctx x;
    setup(&x, arg);
    VM_EXPECT(x.v.stack_lo != NULL);
    struct stall s = {.x = &x, .during = during_store_trusted_stack};
    stalled_call(&s);
    vm_fail(__LINE__, "the attacker thread did not run");
}

/* Complete gate only: a second thread calls the compartment while the
 * first is inside; it must be refused (-EBUSY) with its key closed, and the
 * first call must complete. */
static void during_second_call(struct stall *s)
{
    s->busy_ret = isob_call(s->x->c, ISOB_ENTRY_EMPTY);
    s->busy_pkru = isob_rdpkru();
}

static void a_second_caller(void *arg)
{
    struct ctx x;
    setup(&x, arg);
    struct stall s = {.x = &x, .during = during_second_call};
    long ret = stalled_call(&s);
    printf("# second caller got %ld with PKRU 0x%08x\n", s.busy_ret, s.busy_pkru);
    VM_EXPECT(s.busy_ret == -EBUSY);
    VM_EXPECT(s.busy_pkru & (1u << (2 * x.v.pkey)));
    VM_EXPECT(ret == (long)isob_checksum(x.v.msg->data, 8192));
    VM_EXPECT(isob_call(x.c, ISOB_ENTRY_EMPTY) == 0);
    judge(&x, isob_rdpkru(), ret, "a second thread called during a call");
}

void vm_hijack_report(uint32_t pkru)
{
    dprintf(1, "# the trusted code returned to the attacker's address with PKRU 0x%08x\n", pkru);
    _exit(VM_EXIT_BREACH);
}

/* ---- The list ---------------------------------------------------------- */

/* What the trusted code leaves in the caller-saved registers, which the
 * untrusted side reads as soon as the gate returns: no entry may leave the
 * secret, or any 8 bytes of the canary, there.  The gate restores only
 * what it uses (rax, rcx, rdx, r11); rsi, rdi, r8-r10 and the vector
 * registers are as the trusted code left them.  The control's only probe is
 * ADD of the secret and 0, which returns the secret in rax: the scan must
 * find it there. */
struct residue {
    const struct isob_mechanism *m;
    int control;
};

static void a_register_residue(void *arg)
{
    static const char *const names[] = {"rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11"};
    const struct residue *rs = arg;
    const struct isob_mechanism *m = rs->m;
    struct isob_comp *c = vm_make(m);
    struct isob_mpk_view v;
    vm_view(c, &v);
    struct isob_msg *msg = m->shared(c);
    msg->arg[0] = (int64_t)VM_SECRET;
    VM_EXPECT(isob_call(c, ISOB_ENTRY_SECRET_PLANT) == 0);
    unsigned char canary[ISOB_CANARY_LEN];
    for (unsigned i = 0; i < ISOB_CANARY_LEN; i++)
        canary[i] = (unsigned char)(0x3c + 29 * i);
    msg->arg[0] = ISOB_CANARY_PLANT;
    msg->len = ISOB_CANARY_LEN;
    memcpy(msg->data, canary, sizeof canary);
    VM_EXPECT(isob_call(c, ISOB_ENTRY_CANARY) == 0);
    static const struct { unsigned entry; int64_t arg0; } probes[] = {
        {ISOB_ENTRY_SECRET_CHECK, 0}, {ISOB_ENTRY_SECRET_CHECK, (int64_t)VM_SECRET},
        {ISOB_ENTRY_CANARY, ISOB_CANARY_SUM}, {ISOB_ENTRY_COUNT_CALLS, 0},
    }, control[] = {{ISOB_ENTRY_ADD, (int64_t)VM_SECRET}};
    size_t n = rs->control ? 1 : sizeof probes / sizeof probes[0];
    for (size_t p = 0; p < n; p++) {
        unsigned entry = rs->control ? control[p].entry : probes[p].entry;
        memset(msg, 0, sizeof *msg);
        msg->arg[0] = rs->control ? control[p].arg0 : probes[p].arg0;
        uint64_t out[41];
        vm_gate_regs(*v.d_slot, entry, out);
        for (unsigned r = 0; r < 41; r++) {
            int hit = out[r] == VM_SECRET;
            for (unsigned k = 0; k + 8 <= ISOB_CANARY_LEN && !hit; k++)
                hit = memcmp(&out[r], canary + k, 8) == 0;
            if (hit) {
                char reg[16];
                if (r < 9)
                    snprintf(reg, sizeof reg, "%s", names[r]);
                else
                    snprintf(reg, sizeof reg, "xmm%u[%u]", (r - 9) / 2, (r - 9) % 2);
                vm_breach("after entry %u, %s holds 0x%016llx, trusted data", entry, reg,
                          (unsigned long long)out[r]);
            }
        }
        VM_EXPECT(isob_rdpkru() == MPK_PKRU_CLOSED);
    }
    printf("# %zu entries: no caller-saved register held the secret or the canary\n", n);
    isob_comp_destroy(c);
}

void vm_attacks(const struct isob_mechanism *m, int legacy)
{
    /* What the legacy gate must lose, and the complete gate must hold. */
    enum vm_expect field = legacy ? VM_BREACH : VM_PKUERR;
    vm_check(legacy ? "attack: expected-value pointer redirected"
                    : "attack: store into the gate state's expected PKRU value",
             a_expected_value, (void *)m, field);
    vm_check(legacy ? "attack: table pointer redirected at the secret"
                    : "attack: store into the gate state's table pointer",
             a_table_pointer, (void *)m, field);
    vm_check(legacy ? "attack: message pointer redirected at the secret"
                    : "attack: store into the gate state's message pointer",
             a_message_pointer, (void *)m, field);
    vm_check("attack: a second thread rewrites the caller's stack during a call",
             a_stack_hijack, (void *)m, legacy ? VM_BREACH : VM_HELD);
    if (legacy) {
        struct jump_attack close_jump = {m, &jump_variants[0], 0};
        vm_check("attack: jump to the closing WRPKRU (EAX and other registers = open PKRU)",
                 a_jump_close, &close_jump, VM_BREACH);
        return;
    }

    vm_check("attack: a second thread stores into the trusted stack during a call",
             a_store_trusted_stack, (void *)m, VM_PKUERR);
    struct residue residue = {m, 0}, residue_control = {m, 1};
    vm_check("attack: the caller reads the registers the trusted code left (must hold)",
             a_register_residue, &residue, VM_PASS);
    vm_check("control: ADD of the secret returns it in rax (the scan must find it)",
             a_register_residue, &residue_control, VM_BREACH);
    vm_check("attack: a second thread calls while a call runs (refused, -EBUSY)",
             a_second_caller, (void *)m, VM_PASS);
    vm_check("attack: descriptor scrambled but its slot index (bytes)", a_scramble_bytes,
             (void *)m, VM_PASS);
    vm_check("attack: descriptor scrambled but its slot index (pointers at the secret)",
             a_scramble_pointers, (void *)m, VM_PASS);

    static const struct {
        uint32_t (*value)(const struct ctx *, int);
        const char *what;
    } indexes[] = {
        {ix_zero, "slot index 0 (key 0's slot, never live)"},
        {ix_unused, "slot index of a key no compartment holds"},
        {ix_alias, "slot index + 16 (aliases the compartment's own slot)"},
        {ix_high, "slot index with bit 31 set"},
        {ix_all_ones, "slot index 0xffffffff"},
        {ix_other, "slot index of another live compartment"},
    };
    for (size_t i = 0; i < sizeof indexes / sizeof indexes[0]; i++) {
        char name[160];
        snprintf(name, sizeof name, "attack: %s", indexes[i].what);
        struct index_attack ia = {m, indexes[i].value, indexes[i].what};
        vm_check(name, a_slot_index, &ia, VM_HELD);
    }
    for (size_t i = 0; i < N_JUMP_VARIANTS; i++) {
        char name[200], vn[100];
        variant_name(&jump_variants[i], vn, sizeof vn);
        snprintf(name, sizeof name, "attack: jump to every gate instruction (%s)", vn);
        struct jump_attack ja = {m, &jump_variants[i], 0};
        vm_check(name, a_jump_all, &ja, VM_HELD);
    }
    /* The gates of ERIM's call kinds (mpk's call_kind): the same jumps. */
    static const struct {
        uint32_t gate;
        const char *what;
    } kinds[] = {{MPK_GATE_KIND_INLINE, "inline"},
                 {MPK_GATE_KIND_DIRECT, "direct-call"},
                 {MPK_GATE_KIND_INDIRECT, "indirect-call"}};
    for (size_t k = 0; m->call_kind[0] && k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t i = 0; i < N_JUMP_VARIANTS; i++) {
            char name[240], vn[100];
            variant_name(&jump_variants[i], vn, sizeof vn);
            snprintf(name, sizeof name,
                     "attack: jump to every instruction of the %s call kind's gate (%s)",
                     kinds[k].what, vn);
            struct jump_attack ja = {m, &jump_variants[i], kinds[k].gate};
            vm_check(name, a_jump_all, &ja, VM_HELD);
        }
}
