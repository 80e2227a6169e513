/* What the pieces of the MPK VM test (mpk_init.c, mpk_attacks.c,
 * mpk_legacy.c, mpk_attack_x86.S) share. */
#ifndef ISOB_TESTS_MPK_VM_H
#define ISOB_TESTS_MPK_VM_H

#include <errno.h>
#include <stdint.h>

#include "gate.h"
#include "isobench/mechanism.h"
#include "mpk.h"

/* How a check's child process may end.
 *   VM_PASS    exit 0.
 *   VM_PKUERR  a store or load faulted with SEGV_PKUERR (the child's
 *              SIGSEGV handler exits with VM_EXIT_PKUERR).
 *   VM_HELD    the attack did not get through: exit 0 (refused, or
 *              returned with the key closed and the trusted memory intact)
 *              or a fault (SIGSEGV, SIGBUS, SIGILL, SIGABRT, VM_EXIT_PKUERR).
 *              Never a time-out, never VM_EXIT_BREACH.
 *   VM_BREACH  the attack got through: exit VM_EXIT_BREACH.  Expected only
 *              of the legacy fixture, to prove the attacks can fail. */
enum vm_expect { VM_PASS, VM_PKUERR, VM_HELD, VM_BREACH };

#define VM_EXIT_BREACH 3
#define VM_EXIT_PKUERR 4
/* The check cannot run here (vm_skip says why); counted as passed. */
#define VM_EXIT_SKIP 77

/* Run fn(arg) in a child with a time-out; print one TAP line named
 * "<prefix>: <what>"; count it as failed unless it ended as `want` says. */
void vm_check(const char *what, void (*fn)(void *), void *arg, enum vm_expect want);

/* End the child: the attack got through (exit VM_EXIT_BREACH). */
void vm_breach(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* End the child: the check cannot run here (exit VM_EXIT_SKIP). */
void vm_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* End the child: an expectation failed (exit 1). */
void vm_fail(int line, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));

#define VM_EXPECT(cond)                                                               \
    do {                                                                              \
        if (!(cond))                                                                  \
            vm_fail(__LINE__, "%s", #cond);                                           \
    } while (0)

/* A compartment of m with its view (the real gates' or the legacy's). */
struct isob_comp *vm_make(const struct isob_mechanism *m);
void vm_view(struct isob_comp *c, struct isob_mpk_view *v);

/* What the gate calls inside the window: the window copy of the trusted
 * code (src/trusted/window.c). */
long isob_window_trusted_call(struct isob_trusted *t, unsigned entry, struct isob_msg *msg,
                              size_t cap);

/* The legacy gate (mpk_legacy.c). */
extern const struct isob_mechanism mpk_legacy_mech;
int mpk_legacy_view(struct isob_comp *c, struct isob_mpk_view *v);

/* The attacks (mpk_attacks.c), against compartments of m. */
void vm_attacks(const struct isob_mechanism *m, int legacy);

/* The GOT/PLT attack on the window (mpk_window.c): one check per function
 * the window once called, against compartments of m; with leaky, each
 * check runs in that program (the leaky window build) and must lose;
 * without it, also the set-up check (create runs a replaced C library
 * function with the new key open: not defended, must breach). */
void vm_window_attacks(const struct isob_mechanism *m, const char *leaky);
/* One of those checks, in this process (mpk_init_leaky --window-attack). */
void vm_window_attack(const struct isob_mechanism *m, int target);

/* Ways back into the window through the kernel (mpk_kernel.c): rseq,
 * signals, rt_sigreturn, against compartments of m. */
void vm_kernel_attacks(const struct isob_mechanism *m);

/* ERIM's call kinds behind mpk's gate (mpk_kinds.c): each runs once and
 * returns the right value; the indirect-call kind's pointer attacked, and
 * a copy of that gate with the pointer in ordinary memory losing. */
void vm_kind_checks(void);

/* mpk_attack_x86.S.  The register state a jump into gate code starts with:
 * every general register but rsp from here, rsp on a fake stack whose
 * every word is the address of vm_jump_land. */
struct vm_regs {
    uint64_t rax, rbx, rcx, rdx, rsi, rdi, rbp, r8, r9, r10, r11, r12, r13, r14, r15, rsp;
};
/* Jump to target with *r; returns 0 when control came back to
 * vm_jump_land (through a `ret`), with PKRU and RAX as they were there in
 * *pkru and *rax. */
int vm_jump(const void *target, const struct vm_regs *r, uint32_t *pkru, uint64_t *rax);
void vm_jump_land(void);
/* Call isob_mpk_gate(slot, entry) with the other caller-saved registers
 * zeroed; out[41] gets what it leaves in them (rax, rcx, rdx, rsi, rdi,
 * r8-r11, then xmm0-xmm15 as two quadwords each). */
void vm_gate_regs(uint32_t slot, uint32_t entry, uint64_t out[41]);
long isob_mpk_gate(unsigned slot, unsigned entry);
/* Where a hijacked return lands: reports PKRU to vm_hijack_report. */
void vm_hijack_land(void);
void vm_hijack_report(uint32_t pkru) __attribute__((noreturn));

#endif
