/* ERIM's call kinds behind the MPK gate, run in the QEMU TCG guest
 * (mpk_init.c): each kind runs its call once and returns the right value,
 * and the pointer that the indirect-call kind calls through cannot be
 * turned into a way to run the attacker's code with the key open.
 *
 * `mpk`'s three kind gates (gate_x86.S: isob_mpk_kind_inline, _direct,
 * _indirect) call an empty function that counts its calls in the slot page.
 * The indirect one reads its target from the slot page (MPK_SLOT_FN), which
 * only the key opens: the attacker's store into it must fault with
 * SEGV_PKUERR.  A copy of that gate that reads the pointer from ordinary
 * memory instead (mpk_kinds_x86.S, test-only) must lose the same attack:
 * the attacker's function then runs inside the window and reads the
 * secret.  A control shows that the copy works as a gate while nobody
 * attacks it. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isobench/arch_x86.h"
#include "mpk_vm.h"

#define KIND_SECRET 0x5ec2e7d00d1e5ea7ull

/* mpk_kinds_x86.S. */
extern void *vm_broken_kind_fn;
long vm_broken_kind_indirect(struct isob_comp *c);
/* The window's empty function (src/trusted/window.c). */
long isob_window_kind_empty(uint64_t *calls);

static const char *const kind_names[ISOB_CALL_KINDS] = {"inline", "direct-call",
                                                        "indirect-call"};

/* What the attacker's function looks at. */
static int kind_pkey;
static volatile uint64_t *kind_secret;
static volatile int kind_closed_calls;

static void raw_write(const char *s)
{
    long r;
    __asm__ __volatile__("syscall" : "=a"(r) : "a"(SYS_write), "D"(1), "S"(s), "d"(strlen(s))
                         : "rcx", "r11", "memory");
    (void)r;
}

/* The attacker's function, in place of the empty one: with the key open it
 * reads the secret and ends the check in a breach; with the key closed it
 * only counts.  No C library call: it may run on the trusted stack. */
static long kind_hijack(uint64_t *calls)
{
    (void)calls;
    if (!(isob_rdpkru() & (3u << (2 * kind_pkey)))) {
        uint64_t s = *kind_secret;
        static const char hex[] = "0123456789abcdef";
        char h[18];
        for (int i = 0; i < 16; i++)
            h[i] = hex[(s >> (60 - 4 * i)) & 15];
        h[16] = '\n';
        h[17] = 0;
        raw_write("# BREACH: the attacker's function ran behind the gate with the key open and "
                  "read the secret 0x");
        raw_write(h);
        __asm__ __volatile__("syscall" : : "a"(SYS_exit_group), "D"(VM_EXIT_BREACH)
                             : "rcx", "r11", "memory");
    }
    kind_closed_calls++;
    return 0;
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (si->si_code == SEGV_PKUERR) {
        dprintf(1, "# fault: SIGSEGV SEGV_PKUERR at %p, key %u\n", si->si_addr,
                (unsigned)si->si_pkey);
        _exit(VM_EXIT_PKUERR);
    }
    signal(sig, SIG_DFL);
}

/* A value of trusted memory, read with the key opened by the judge. */
static uint64_t peek64(const void *p, int pkey)
{
    uint32_t pkru = isob_rdpkru();
    isob_wrpkru(pkru & ~(3u << (2 * pkey)));
    uint64_t v = *(const volatile uint64_t *)p;
    isob_wrpkru(pkru);
    return v;
}

/* A compartment of mpk with the secret planted. */
static struct isob_comp *kind_setup(struct isob_mpk_view *v)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    struct isob_comp *c = vm_make(isob_mechanism_find("mpk"));
    vm_view(c, v);
    v->msg->arg[0] = (int64_t)KIND_SECRET;
    VM_EXPECT(isob_call(c, ISOB_ENTRY_SECRET_PLANT) == 0);
    kind_secret = (volatile uint64_t *)(uintptr_t)v->msg->arg[1];
    kind_pkey = v->pkey;
    VM_EXPECT(v->kind_calls && v->kind_fn);
    return c;
}

/* Each kind, called once in turn, returns 0, counts one call in the slot,
 * and ends with PKRU closed; the slot's pointer is the window's empty
 * function; the kinds and the entries share the gate's state. */
static void c_kinds_run(void *arg)
{
    (void)arg;
    struct isob_mpk_view v;
    struct isob_comp *c = kind_setup(&v);
    const struct isob_mechanism *m = c->mech;
    VM_EXPECT(peek64(v.kind_fn, v.pkey) == (uint64_t)(uintptr_t)isob_window_kind_empty);
    for (int round = 0; round < 2; round++) {
        for (unsigned k = 0; k < ISOB_CALL_KINDS; k++) {
            VM_EXPECT(m->call_kind[k] != NULL);
            uint64_t before = peek64(v.kind_calls, v.pkey);
            long ret = m->call_kind[k](c);
            uint64_t after = peek64(v.kind_calls, v.pkey);
            printf("# mpk %s: returned %ld, the slot counted %llu -> %llu, PKRU 0x%08x\n",
                   kind_names[k], ret, (unsigned long long)before, (unsigned long long)after,
                   isob_rdpkru());
            VM_EXPECT(ret == 0);
            VM_EXPECT(after == before + 1);
            VM_EXPECT(isob_rdpkru() == MPK_PKRU_CLOSED);
        }
    }
    VM_EXPECT(peek64(v.kind_calls, v.pkey) == 2 * ISOB_CALL_KINDS);
    /* The entries still work between kinds: the secret is where it was. */
    v.msg->arg[0] = (int64_t)KIND_SECRET;
    VM_EXPECT(isob_call(c, ISOB_ENTRY_SECRET_CHECK) == 1);
    /* mpk-bridge shares the gate and has no kinds of its own. */
    const struct isob_mechanism *bridge = isob_mechanism_find("mpk-bridge");
    for (unsigned k = 0; k < ISOB_CALL_KINDS; k++)
        VM_EXPECT(bridge && bridge->call_kind[k] == NULL);
    isob_comp_destroy(c);
}

/* The broken copy, unattacked: a working gate (the control that makes its
 * loss below about the pointer, not about a gate that never worked). */
static void c_broken_works(void *arg)
{
    (void)arg;
    struct isob_mpk_view v;
    struct isob_comp *c = kind_setup(&v);
    vm_broken_kind_fn = (void *)isob_window_kind_empty;
    uint64_t before = peek64(v.kind_calls, v.pkey);
    VM_EXPECT(vm_broken_kind_indirect(c) == 0);
    VM_EXPECT(peek64(v.kind_calls, v.pkey) == before + 1);
    VM_EXPECT(isob_rdpkru() == MPK_PKRU_CLOSED);
    isob_comp_destroy(c);
}

/* The attack: overwrite what the indirect call reads with the attacker's
 * function, then call the kind.  arg non-NULL: against the broken copy. */
static void a_kind_pointer(void *arg)
{
    int broken = arg != NULL;
    struct isob_mpk_view v;
    struct isob_comp *c = kind_setup(&v);
    void **where = broken ? &vm_broken_kind_fn : v.kind_fn;
    printf("# the indirect-call kind's pointer at %p (%s): storing the attacker's function\n",
           (void *)where, broken ? "ordinary data" : "the slot page, key-tagged");
    *(void *volatile *)where = (void *)kind_hijack;
    long ret = broken ? vm_broken_kind_indirect(c)
                      : c->mech->call_kind[ISOB_KIND_INDIRECT_CALL](c);
    uint32_t pkru = isob_rdpkru();
    printf("# the kind returned %ld with PKRU 0x%08x; the attacker's function ran %d times, "
           "each with the key closed\n", ret, pkru, kind_closed_calls);
    if (!(pkru & (1u << (2 * v.pkey))))
        vm_breach("back from the kind with key %d open (PKRU 0x%08x)", v.pkey, pkru);
    if (peek64((const void *)kind_secret, v.pkey) != KIND_SECRET)
        vm_breach("the secret changed");
    if (!broken)
        vm_breach("a store into the slot's indirect-call pointer went through");
    printf("# held: the attacker's function never ran with the key open\n");
    isob_comp_destroy(c);
}

void vm_kind_checks(void)
{
    vm_check("ERIM's call kinds: inline, direct-call, indirect-call each return 0 and count one "
             "call, PKRU closed after each", c_kinds_run, NULL, VM_PASS);
    vm_check("attack: store the attacker's function into the indirect-call kind's pointer "
             "(slot page: SEGV_PKUERR)", a_kind_pointer, NULL, VM_PKUERR);
    vm_check("control: the broken indirect-call gate (pointer in ordinary data) works unattacked",
             c_broken_works, NULL, VM_PASS);
    vm_check("broken indirect-call gate (test fixture, must lose): store the attacker's function "
             "into its pointer in ordinary data", a_kind_pointer, (void *)1, VM_BREACH);
}
