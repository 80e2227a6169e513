/* The GOT/PLT attack on the MPK window, run in the QEMU TCG guest
 * (mpk_init.c).
 *
 * While the gate holds the key open, the trusted code once called C library
 * functions: memset (the compiler's, for the memops fill) through a PLT
 * slot, and read, write, madvise, getrusage and __errno_location for its
 * host calls.  Any of them is code the untrusted side can replace: a GOT
 * slot is one store away (after an mprotect, where full RELRO made the GOT
 * read-only), a function's first bytes an mprotect and a store away.  Each
 * check here replaces one such function with the attacker's own, then
 * calls the entry that would reach it.  The attacker's function reads PKRU:
 * with the compartment's key open it reads the secret and the check ends in
 * a breach; with the key closed it only counts.  The check holds when the
 * entry completes with its right result and the attacker's function never
 * ran with the key open (a fault fails it too: the entry must work).
 *
 * How it replaces a function:
 *   memset    its GOT slots: every slot that the start-up code filled with
 *             memset's implementation (an IFUNC's IRELATIVE relocation, in
 *             this static binary; its PLT stub jumps through one), made
 *             writable with mprotect first, so that the check tests the
 *             window and not RELRO;
 *   the rest  their first bytes (`movabs $hook, %rax; jmp *%rax`), as a
 *             static binary calls them directly, not through a GOT.
 *
 * The same checks run in mpk_init_leaky, the same program linked with the
 * window copy built as the trusted code once was (memset from the C
 * library, host calls through host.c): there they must end in a breach,
 * which shows that each of them can fail.  mpk_init runs that binary for
 * each check (vm_window_attacks). */
#include <elf.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isobench/arch_x86.h"
#include "isobench/work.h"
#include "mpk_vm.h"

#define WIN_SECRET 0x5ec2e7d00d1e5ea7ull
/* Bytes of the memops block and of the pipe I/O. */
#define WIN_BLOCK 65536u
#define WIN_IO 64u
/* A descriptor number no file has here: the errno path of a host call. */
#define WIN_BAD_FD 987
/* GOT slots replaced at most (memset's: its PLT stub's, and any other). */
#define WIN_MAX_SLOTS 8

enum win_target { WT_MEMSET, WT_WRITE, WT_READ, WT_MADVISE, WT_GETRUSAGE, WT_ERRNO, WT__N };

static const char *const win_names[WT__N] = {
    "memset (its GOT slot, made writable)", "write (its code)", "read (its code)",
    "madvise (its code)", "getrusage (its code)", "__errno_location (its code)",
};

/* What the attacker's functions look at: the compartment's key and where
 * the secret lives, and how often they ran with the key closed. */
static int win_pkey;
static volatile uint64_t *win_secret;
static volatile int win_closed_calls;
static int win_fake_errno;

static void raw_write(const char *s)
{
    size_t n = strlen(s);
    long r;
    __asm__ __volatile__("syscall" : "=a"(r) : "a"(SYS_write), "D"(1), "S"(s), "d"(n)
                         : "rcx", "r11", "memory");
    (void)r;
}

static __attribute__((noreturn)) void raw_exit(int code)
{
    __asm__ __volatile__("syscall" : : "a"(SYS_exit_group), "D"(code) : "rcx", "r11", "memory");
    __builtin_unreachable();
}

/* The attacker's code, in place of a function the window might call.  It
 * uses no C library function (they may be the ones replaced). */
static void hijacked(void)
{
    uint32_t pkru = isob_rdpkru();
    if (!(pkru & (3u << (2 * win_pkey)))) {
        uint64_t s = *win_secret;
        /* No snprintf: hex by hand. */
        static const char hex[] = "0123456789abcdef";
        char h[18];
        for (int i = 0; i < 16; i++)
            h[i] = hex[(s >> (60 - 4 * i)) & 15];
        h[16] = '\n';
        h[17] = 0;
        raw_write("# BREACH: the attacker's function ran inside the window with the key open "
                  "and read the secret 0x");
        raw_write(h);
        raw_exit(VM_EXIT_BREACH);
    }
    win_closed_calls++;
}

static void *hook_memset(void *p, int c, size_t n)
{
    hijacked();
    volatile unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)c;
    return p;
}

static long hook_fail(void)
{
    hijacked();
    win_fake_errno = EIO;
    return -1;
}

static int *hook_errno(void)
{
    hijacked();
    return &win_fake_errno;
}

/* ---- replacing and restoring -------------------------------------------- */

struct patch {
    unsigned char *at;
    size_t len;
    unsigned char saved[16];
};

static void unprotect(void *at, size_t len, int prot)
{
    uintptr_t lo = (uintptr_t)at & ~(uintptr_t)4095, hi = ((uintptr_t)at + len + 4095) & ~(uintptr_t)4095;
    if (mprotect((void *)lo, hi - lo, prot) != 0)
        vm_fail(__LINE__, "mprotect %p: %s", (void *)lo, strerror(errno));
}

/* This static binary's GOT slots that the start-up code filled through
 * IRELATIVE relocations (the IFUNCs: memset and its kin), between the
 * linker's __rela_iplt_start and __rela_iplt_end. */
extern const Elf64_Rela __rela_iplt_start[] __attribute__((weak));
extern const Elf64_Rela __rela_iplt_end[] __attribute__((weak));

/* Every such slot that holds fn (as resolved), at most max; their count.
 * A PLT stub of fn jumps through one of them. */
static size_t got_slots_of(const void *fn, void ***slots, size_t max)
{
    size_t n = 0;
    for (const Elf64_Rela *r = __rela_iplt_start; r && r < __rela_iplt_end; r++) {
        void **slot = (void **)(uintptr_t)r->r_offset;
        if (ELF64_R_TYPE(r->r_info) == R_X86_64_IRELATIVE && *slot == fn && n < max)
            slots[n++] = slot;
    }
    return n;
}

static void patch_slot(struct patch *pt, void **slot, void *hook)
{
    unprotect(slot, sizeof *slot, PROT_READ | PROT_WRITE);
    pt->at = (unsigned char *)slot;
    pt->len = sizeof *slot;
    memcpy(pt->saved, slot, sizeof *slot);
    *(void *volatile *)slot = hook;
}

static void patch_code(struct patch *pt, void *fn, void *hook)
{
    unsigned char jump[12] = {0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xe0};
    uint64_t h = (uintptr_t)hook;
    memcpy(jump + 2, &h, 8);
    unprotect(fn, sizeof jump, PROT_READ | PROT_WRITE | PROT_EXEC);
    pt->at = fn;
    pt->len = sizeof jump;
    memcpy(pt->saved, fn, sizeof jump);
    /* Byte by byte: memcpy may be what is being replaced. */
    for (size_t i = 0; i < sizeof jump; i++)
        ((volatile unsigned char *)fn)[i] = jump[i];
}

static void unpatch(const struct patch *pt)
{
    for (size_t i = 0; i < pt->len; i++)
        ((volatile unsigned char *)pt->at)[i] = pt->saved[i];
}

/* ---- the check ------------------------------------------------------------ */

static uint64_t peek(volatile uint64_t *p, int pkey)
{
    uint32_t pkru = isob_rdpkru();
    isob_wrpkru(pkru & ~(3u << (2 * pkey)));
    uint64_t v = *p;
    isob_wrpkru(pkru);
    return v;
}

void vm_window_attack(const struct isob_mechanism *m, int target)
{
    if (target < 0 || target >= WT__N)
        vm_fail(__LINE__, "no window attack %d", target);
    struct isob_comp *c = vm_make(m);
    struct isob_mpk_view v;
    vm_view(c, &v);
    struct isob_msg *msg = m->shared(c);
    msg->arg[0] = (int64_t)WIN_SECRET;
    VM_EXPECT(isob_call(c, ISOB_ENTRY_SECRET_PLANT) == 0);
    win_secret = (volatile uint64_t *)(uintptr_t)msg->arg[1];
    win_pkey = v.pkey;

    /* What each entry needs before the function is replaced. */
    int pfd[2];
    VM_EXPECT(pipe(pfd) == 0);
    static unsigned char data[WIN_IO];
    for (unsigned i = 0; i < WIN_IO; i++)
        data[i] = (unsigned char)(i * 7 + 1);
    if (target == WT_READ)
        VM_EXPECT(write(pfd[1], data, WIN_IO) == (ssize_t)WIN_IO);
    if (target == WT_MEMSET) {
        msg->arg[0] = WIN_BLOCK;
        VM_EXPECT(isob_call(c, ISOB_ENTRY_MEM_ALLOC) == 0);
    }

    struct patch pt[WIN_MAX_SLOTS];
    size_t n_pt = 1;
    switch (target) {
    case WT_MEMSET: {
        void **slots[WIN_MAX_SLOTS];
        n_pt = got_slots_of((const void *)memset, slots, WIN_MAX_SLOTS);
        if (n_pt == 0)
            vm_fail(__LINE__, "no GOT slot holds memset (%p) here", (const void *)memset);
        for (size_t i = 0; i < n_pt; i++) {
            printf("# GOT slot %p holds memset (%p): made writable, pointed at the attacker's "
                   "function\n", (void *)slots[i], (const void *)memset);
            patch_slot(&pt[i], slots[i], (void *)hook_memset);
        }
        break;
    }
    case WT_WRITE: patch_code(&pt[0], (void *)write, (void *)hook_fail); break;
    case WT_READ: patch_code(&pt[0], (void *)read, (void *)hook_fail); break;
    case WT_MADVISE: patch_code(&pt[0], (void *)madvise, (void *)hook_fail); break;
    case WT_GETRUSAGE: patch_code(&pt[0], (void *)getrusage, (void *)hook_fail); break;
    case WT_ERRNO: patch_code(&pt[0], (void *)__errno_location, (void *)hook_errno); break;
    }

    /* Between here and unpatch, nothing but the call runs. */
    long ret;
    switch (target) {
    case WT_MEMSET:
        msg->arg[0] = 0x5a;
        ret = isob_call(c, ISOB_ENTRY_MEM_FILL);
        break;
    case WT_WRITE:
    case WT_ERRNO:
        msg->arg[0] = target == WT_WRITE ? pfd[1] : WIN_BAD_FD;
        msg->arg[1] = WIN_IO;
        ret = isob_call(c, ISOB_ENTRY_IO_WRITE);
        break;
    case WT_READ:
        msg->arg[0] = pfd[0];
        msg->arg[1] = WIN_IO;
        ret = isob_call(c, ISOB_ENTRY_IO_READ);
        break;
    case WT_MADVISE:
        msg->arg[0] = WIN_BLOCK;
        ret = isob_call(c, ISOB_ENTRY_MEM_ALLOC);
        break;
    default:
        ret = isob_call(c, ISOB_ENTRY_HOST_FAULTS);
        break;
    }
    uint32_t pkru = isob_rdpkru();
    for (size_t i = 0; i < n_pt; i++)
        unpatch(&pt[i]);

    printf("# %s: the entry returned %ld with PKRU 0x%08x; the attacker's function ran %d "
           "times, each with the key closed\n", win_names[target], ret, pkru, win_closed_calls);
    if (!(pkru & (1u << (2 * v.pkey))))
        vm_breach("back from the entry with key %d open (PKRU 0x%08x)", v.pkey, pkru);
    if (peek(win_secret, v.pkey) != WIN_SECRET)
        vm_breach("the secret changed");
    /* The entry ran, and ran right: the check attacked a working path. */
    switch (target) {
    case WT_MEMSET: {
        VM_EXPECT(ret == 0);
        msg->arg[0] = 0;
        long sum = isob_call(c, ISOB_ENTRY_MEM_READ);
        VM_EXPECT(sum >= 0);
        VM_EXPECT((uint64_t)msg->arg[2] == 0x5a5a5a5a5a5a5a5aull * (WIN_BLOCK / 8));
        break;
    }
    case WT_WRITE: {
        VM_EXPECT(ret == (long)WIN_IO);
        unsigned char got[WIN_IO];
        VM_EXPECT(read(pfd[0], got, WIN_IO) == (ssize_t)WIN_IO);
        break;
    }
    case WT_ERRNO:
        VM_EXPECT(ret == -EBADF);
        break;
    case WT_READ:
        VM_EXPECT(ret == (long)WIN_IO);
        msg->arg[0] = WIN_IO;
        VM_EXPECT(isob_call(c, ISOB_ENTRY_IO_SUM) == (long)isob_checksum(data, WIN_IO));
        break;
    case WT_MADVISE:
        VM_EXPECT(ret == 0);
        break;
    default:
        VM_EXPECT(ret == 0);
        VM_EXPECT(msg->arg[1] > 0);
        break;
    }
    printf("# held: %s: the entry worked and the attacker's function never ran with the key open\n",
           win_names[target]);
    close(pfd[0]);
    close(pfd[1]);
    isob_comp_destroy(c);
}

/* The untrusted side asks the kernel to read the secret for it: write(2)
 * of the secret's address to a pipe, with the key closed.  The kernel's
 * accesses to user memory honour PKRU, so the call fails with EFAULT; that
 * is also why the window's host calls keep the key open (window.c). */
static void c_syscall_reads_secret(void *arg)
{
    const struct isob_mechanism *m = arg;
    struct isob_comp *c = vm_make(m);
    struct isob_mpk_view v;
    vm_view(c, &v);
    struct isob_msg *msg = m->shared(c);
    msg->arg[0] = (int64_t)WIN_SECRET;
    VM_EXPECT(isob_call(c, ISOB_ENTRY_SECRET_PLANT) == 0);
    const void *secret = (const void *)(uintptr_t)msg->arg[1];
    int pfd[2];
    VM_EXPECT(pipe(pfd) == 0);
    VM_EXPECT(isob_rdpkru() & (1u << (2 * v.pkey)));
    ssize_t r = write(pfd[1], secret, sizeof(uint64_t));
    int err = errno;
    printf("# write(pipe, secret's address, 8) with key %d closed: %zd (%s)\n", v.pkey, r,
           r < 0 ? strerror(err) : "written");
    if (r > 0) {
        uint64_t got = 0;
        if (read(pfd[0], &got, sizeof got) == (ssize_t)sizeof got && got == WIN_SECRET)
            vm_breach("the kernel read the secret for the untrusted side: PKRU not honoured");
    }
    VM_EXPECT(r == -1 && err == EFAULT);
    isob_comp_destroy(c);
}

/* ---- set-up: create runs the C library with the new key open ------------- */

/* mpk's create allocates the key open in the creating thread
 * (pkey_alloc(0, 0)) and, before isob_mpk_close ends the set-up, calls the
 * C library: sysconf, mmap, mprotect and pkey_mprotect, through the PLT in
 * a dynamic isob, directly in this static one.  The untrusted side replaces
 * pkey_mprotect (its code, as above) before it creates a compartment: its
 * function runs with the new key open and starts a thread, which inherits
 * the creating thread's PKRU.  That thread waits until a secret is planted
 * through the gate and reads it.  Not defended: set-up is trusted, as in
 * ERIM, where the trusted side initialises before untrusted code runs
 * (docs/mechanisms.md). */
static volatile int setup_key = -1;
static volatile int setup_go;
static volatile uint64_t *volatile setup_secret;
static pthread_t setup_thread;
static int setup_started;

static void *setup_spy(void *arg)
{
    (void)arg;
    while (!setup_go)
        sched_yield();
    uint32_t pkru = isob_rdpkru();
    int k = setup_key;
    if (!(pkru & (3u << (2 * k)))) {
        uint64_t s = *setup_secret;
        printf("# BREACH: a thread started inside create, PKRU 0x%08x, key %d open, read the "
               "secret 0x%016llx planted after create returned\n", pkru, k, (unsigned long long)s);
        fflush(stdout);
        if (s == WIN_SECRET)
            raw_exit(VM_EXIT_BREACH);
    }
    printf("# the thread started inside create has PKRU 0x%08x: key %d closed to it\n", pkru, k);
    return NULL;
}

static long hook_pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
    uint32_t pkru = isob_rdpkru();
    if (!setup_started && pkey > 0 && !(pkru & (3u << (2 * pkey)))) {
        setup_started = 1;
        setup_key = pkey;
        printf("# the replaced pkey_mprotect runs inside create with key %d open (PKRU 0x%08x)\n",
               pkey, pkru);
        if (pthread_create(&setup_thread, NULL, setup_spy, NULL) != 0)
            setup_started = 0;
    }
    long r;
    register long r10 __asm__("r10") = pkey;
    __asm__ __volatile__("syscall"
                         : "=a"(r)
                         : "a"(SYS_pkey_mprotect), "D"(addr), "S"(len), "d"(prot), "r"(r10)
                         : "rcx", "r11", "memory");
    if (r < 0) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

static void c_setup(void *arg)
{
    const struct isob_mechanism *m = arg;
    struct patch pt;
    patch_code(&pt, (void *)pkey_mprotect, (void *)hook_pkey_mprotect);
    struct isob_comp *c = vm_make(m);
    unpatch(&pt);
    VM_EXPECT(setup_started);
    struct isob_mpk_view v;
    vm_view(c, &v);
    VM_EXPECT(v.pkey == setup_key);
    VM_EXPECT(isob_rdpkru() & (1u << (2 * v.pkey)));
    struct isob_msg *msg = m->shared(c);
    msg->arg[0] = (int64_t)WIN_SECRET;
    VM_EXPECT(isob_call(c, ISOB_ENTRY_SECRET_PLANT) == 0);
    setup_secret = (volatile uint64_t *)(uintptr_t)msg->arg[1];
    setup_go = 1;
    VM_EXPECT(pthread_join(setup_thread, NULL) == 0);
    printf("# held: the thread started inside create could not read the secret\n");
    isob_comp_destroy(c);
}

/* ---- the list ------------------------------------------------------------- */

struct win_check {
    const struct isob_mechanism *mech;
    int target;
    const char *leaky;     /* the leaky program to run it in, or NULL */
};

static void c_window(void *arg)
{
    const struct win_check *wc = arg;
    if (!wc->leaky) {
        vm_window_attack(wc->mech, wc->target);
        return;
    }
    /* The child becomes the leaky program, which runs this one check. */
    char target[16];
    snprintf(target, sizeof target, "%d", wc->target);
    execl(wc->leaky, "mpk_init_leaky", "--window-attack", wc->mech->name, target, (char *)NULL);
    vm_fail(__LINE__, "exec %s: %s", wc->leaky, strerror(errno));
}

void vm_window_attacks(const struct isob_mechanism *m, const char *leaky)
{
    if (!leaky) {
        vm_check("attack: write(2) of the secret's address to a pipe, key closed (EFAULT)",
                 c_syscall_reads_secret, (void *)m, VM_PASS);
        vm_check("not defended: pkey_mprotect replaced before create runs with the new key open "
                 "and starts a thread that reads the secret planted later (must breach)",
                 c_setup, (void *)m, VM_BREACH);
    }
    for (int t = 0; t < WT__N; t++) {
        char name[200];
        snprintf(name, sizeof name, "%swindow attack: replace %s, then call the entry%s",
                 leaky ? "leaky window build (test fixture, must lose): " : "", win_names[t],
                 leaky ? "" : " (must hold)");
        struct win_check wc = {m, t, leaky};
        vm_check(name, c_window, &wc, leaky ? VM_BREACH : VM_PASS);
    }
}
