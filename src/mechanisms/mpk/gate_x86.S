/* The MPK call gate, x86-64 System V: ERIM's complete gate (Vahldiek-
 * Oberwagner et al., USENIX Security 2019, section 4), written so that it
 * holds when the untrusted side writes any memory it can address and jumps
 * to any of the gate's instructions.
 *
 * What the gate takes from the untrusted side is two numbers: the slot
 * index (the compartment's protection key, from the descriptor) and the
 * entry number.  Everything else comes from the slot page of gate.h, which
 * is reached relative to the gate's own instructions and is readable only
 * with the slot's key open:
 *
 *  1. Open: compute PKRU_CLOSED with key k's access bit cleared, k the index
 *     bounded to the slot array, and WRPKRU it.
 *  2. Check, inside the window: bound the index again (a jump straight to
 *     the WRPKRU skipped step 1), read the slot's own copy of its open PKRU
 *     value and compare it with what was written.  The read faults unless
 *     PKRU opens key k and slot k is live (tagged with key k); the compare
 *     fails unless PKRU opens key k and nothing else.  On a mismatch the
 *     gate loops back to step 1, which writes the right value for k or
 *     faults.  Past the check PKRU is exactly slot k's open value.
 *  3. Claim the slot with a locked exchange of its busy word: the trusted
 *     stack is one per compartment, and a second thread on it could overlay
 *     a frame of the first with data it chose.  A busy slot is refused with
 *     -EBUSY.
 *  4. Switch to the slot's trusted stack (tagged with key k), keep the
 *     caller's stack pointer and the slot's address there, clear the
 *     direction flag (the trusted code's string instructions assume it
 *     clear, and the caller chose it), and call the trusted code with the
 *     trusted state, the shared buffer and its size from the slot (the
 *     gates of ERIM's call kinds run one of their bodies instead: BODY_*
 *     below).  The trusted code called is the window copy
 *     (src/trusted/window.c): no
 *     instruction outside this file and that copy runs until step 5 has
 *     closed the key (tests/callgraph checks the built binary), unless
 *     the kernel moves the thread elsewhere (rseq, signals: not defended,
 *     docs/mechanisms.md).
 *  5. Back on the caller's stack, release the slot and close: WRPKRU with
 *     the immediate PKRU_CLOSED, compare what was written with the same
 *     immediate and loop back on a mismatch.  A jump straight to the
 *     closing WRPKRU with any value in EAX therefore ends closed, too.
 *
 * Every instruction of the gate is recorded, with its gate and role, in the
 * isob_mpk_sites section, so that the tests can jump to each of them.  The
 * file carries no CET property note, as uthread_x86.S: the gate switches
 * stacks, and its entry points are plain call targets. */
#include "gate.h"

/* SITE gate, role, instruction: emit the instruction and record where. */
    .macro  SITE gate, role, insn:vararg
.Lsite\@:
    \insn
    .pushsection isob_mpk_sites, "aw"
    .balign 8
    .quad   .Lsite\@
    .long   \gate, \role
    .popsection
    .endm

/* The closing sequence: PKRU_CLOSED, written and checked as an immediate. */
    .macro  CLOSE g
4:
    SITE    \g, MPK_ROLE_INSN, movl $MPK_PKRU_CLOSED, %eax
    SITE    \g, MPK_ROLE_INSN, xorl %ecx, %ecx
    SITE    \g, MPK_ROLE_INSN, xorl %edx, %edx
    SITE    \g, MPK_ROLE_CLOSE, wrpkru
    SITE    \g, MPK_ROLE_INSN, cmpl $MPK_PKRU_CLOSED, %eax
    SITE    \g, MPK_ROLE_INSN, jne 4b
    .endm

/* What runs behind the gate, on the trusted stack with the slot's address
 * in rcx: BODY_ENTRY calls the trusted entry r11d with the trusted state,
 * the buffer and its size from the slot; the other three are ERIM's call
 * kinds (Vahldiek-Oberwagner et al. 2019, section 6; Konrad 2023, Table
 * 5.1), an empty function that counts its calls in the slot: inlined into
 * the gate, called directly, or called through the pointer in the slot's
 * MPK_SLOT_FN.  That pointer lives in the key-tagged slot page, which the
 * untrusted side can neither read nor write: a pointer in memory it can
 * write would let it choose code that runs with the key open
 * (tests/vm/mpk_kinds.c shows a gate that reads it from ordinary memory
 * lose).  Each leaves its result in rax. */
    .macro  BODY_ENTRY g
    SITE    \g, MPK_ROLE_INSN, movq MPK_SLOT_TABLE(%rcx), %rdi
    SITE    \g, MPK_ROLE_INSN, movl %r11d, %esi
    SITE    \g, MPK_ROLE_INSN, movq MPK_SLOT_MSG(%rcx), %rdx
    SITE    \g, MPK_ROLE_INSN, movq MPK_SLOT_CAP(%rcx), %rcx
    SITE    \g, MPK_ROLE_INSN, call isob_window_trusted_call
    .endm

    .macro  BODY_INLINE g
    SITE    \g, MPK_ROLE_INSN, incq MPK_SLOT_CALLS(%rcx)
    SITE    \g, MPK_ROLE_INSN, xorl %eax, %eax
    .endm

    .macro  BODY_DIRECT g
    SITE    \g, MPK_ROLE_INSN, leaq MPK_SLOT_CALLS(%rcx), %rdi
    SITE    \g, MPK_ROLE_INSN, call isob_window_kind_empty
    .endm

    .macro  BODY_INDIRECT g
    SITE    \g, MPK_ROLE_INSN, leaq MPK_SLOT_CALLS(%rcx), %rdi
    SITE    \g, MPK_ROLE_INSN, call *MPK_SLOT_FN(%rcx)
    .endm

/* The whole gate: slot index in r10d, entry number in r11d (both untrusted);
 * the result of `body` (one of the BODY_ macros above) in rax.  Clobbers
 * only caller-saved registers. */
    .macro  GATE g, body=BODY_ENTRY
1:
    SITE    \g, MPK_ROLE_INSN, andl $(MPK_SLOTS - 1), %r10d
    SITE    \g, MPK_ROLE_INSN, leal (%r10,%r10), %ecx
    SITE    \g, MPK_ROLE_INSN, movl $3, %eax
    SITE    \g, MPK_ROLE_INSN, shll %cl, %eax
    SITE    \g, MPK_ROLE_INSN, notl %eax
    SITE    \g, MPK_ROLE_INSN, andl $MPK_PKRU_CLOSED, %eax
    SITE    \g, MPK_ROLE_INSN, xorl %ecx, %ecx
    SITE    \g, MPK_ROLE_INSN, xorl %edx, %edx
    SITE    \g, MPK_ROLE_OPEN, wrpkru
    SITE    \g, MPK_ROLE_INSN, movl %r10d, %ecx
    SITE    \g, MPK_ROLE_INSN, andl $(MPK_SLOTS - 1), %ecx
    SITE    \g, MPK_ROLE_INSN, shlq $MPK_SLOT_SHIFT, %rcx
    SITE    \g, MPK_ROLE_INSN, leaq isob_mpk_slots(%rip), %rdx
    SITE    \g, MPK_ROLE_INSN, addq %rdx, %rcx
    SITE    \g, MPK_ROLE_INSN, cmpl MPK_SLOT_PKRU_OPEN(%rcx), %eax
    SITE    \g, MPK_ROLE_INSN, jne 1b
    SITE    \g, MPK_ROLE_INSN, movl $1, %edx
    SITE    \g, MPK_ROLE_INSN, xchgl %edx, MPK_SLOT_BUSY(%rcx)
    SITE    \g, MPK_ROLE_INSN, testl %edx, %edx
    SITE    \g, MPK_ROLE_INSN, jnz 2f
    SITE    \g, MPK_ROLE_INSN, movq %rsp, %rax
    SITE    \g, MPK_ROLE_INSN, movq MPK_SLOT_STACK(%rcx), %rsp
    SITE    \g, MPK_ROLE_INSN, pushq %rcx
    SITE    \g, MPK_ROLE_INSN, pushq %rax
    SITE    \g, MPK_ROLE_INSN, cld
    \body   \g
    SITE    \g, MPK_ROLE_INSN, popq %rdx
    SITE    \g, MPK_ROLE_INSN, popq %rcx
    SITE    \g, MPK_ROLE_INSN, movl $0, MPK_SLOT_BUSY(%rcx)
    SITE    \g, MPK_ROLE_INSN, movq %rdx, %rsp
    SITE    \g, MPK_ROLE_INSN, jmp 3f
2:
    SITE    \g, MPK_ROLE_INSN, movq $-MPK_EBUSY, %rax
3:
    SITE    \g, MPK_ROLE_INSN, movq %rax, %r11
    CLOSE   \g
    SITE    \g, MPK_ROLE_INSN, movq %r11, %rax
    .endm

    /* The call inside the window must be a direct one: through a PLT its
     * target would come from a GOT slot the untrusted side may write.
     * Hidden references make the linker resolve both at link time.  Its
     * target is the window copy of the trusted code (src/trusted/window.c),
     * which calls nothing outside itself and the kernel. */
    .hidden isob_window_trusted_call
    .hidden isob_window_kind_empty

/* The gate states: MPK_SLOTS pages, one per key (gate.h).  They sit in a
 * section of their own that is not writable in the file: a leak checker
 * that scans the program's writable data for pointers (LeakSanitizer, in
 * the sanitized build) would otherwise fault on the pages that mpk.c seals
 * PROT_NONE, or tags with a key, before main; mprotect makes a page
 * writable when a compartment takes it. */
    .section isob_mpk_slot_pages, "a", @progbits
    .balign MPK_SLOT_SIZE
    .globl  isob_mpk_slots
    .hidden isob_mpk_slots
    .type   isob_mpk_slots, @object
isob_mpk_slots:
    .zero   MPK_SLOTS * MPK_SLOT_SIZE
    .size   isob_mpk_slots, MPK_SLOTS * MPK_SLOT_SIZE

    .text
    .p2align 4
    .globl  isob_mpk_gate_text
    .hidden isob_mpk_gate_text
isob_mpk_gate_text:

/* long isob_mpk_op_inline(struct isob_comp *c, unsigned entry): the call op
 * of `mpk`, with the gate in its body. */
    .globl  isob_mpk_op_inline
    .hidden isob_mpk_op_inline
    .type   isob_mpk_op_inline, @function
isob_mpk_op_inline:
    .cfi_startproc
    movl    MPK_COMP_SLOT(%rdi), %r10d
    movl    %esi, %r11d
    GATE    MPK_GATE_INLINE
    ret
    .cfi_endproc
    .size   isob_mpk_op_inline, .-isob_mpk_op_inline

/* long isob_mpk_gate(unsigned slot, unsigned entry): the gate as a function
 * of its own, which the call op of `mpk-bridge` calls. */
    .p2align 4
    .globl  isob_mpk_gate
    .hidden isob_mpk_gate
    .type   isob_mpk_gate, @function
isob_mpk_gate:
    .cfi_startproc
    movl    %edi, %r10d
    movl    %esi, %r11d
    GATE    MPK_GATE_BRIDGE
    ret
    .cfi_endproc
    .size   isob_mpk_gate, .-isob_mpk_gate

/* long isob_mpk_kind_inline(struct isob_comp *c) and its two siblings: the
 * same gate as isob_mpk_op_inline, around ERIM's call kinds instead of an
 * entry (the switch benchmark's variants inline, direct-call and
 * indirect-call of `mpk`). */
    .macro  KIND name, g, body
    .p2align 4
    .globl  \name
    .hidden \name
    .type   \name, @function
\name:
    .cfi_startproc
    movl    MPK_COMP_SLOT(%rdi), %r10d
    xorl    %r11d, %r11d
    GATE    \g, \body
    ret
    .cfi_endproc
    .size   \name, .-\name
    .endm

    KIND    isob_mpk_kind_inline, MPK_GATE_KIND_INLINE, BODY_INLINE
    KIND    isob_mpk_kind_direct, MPK_GATE_KIND_DIRECT, BODY_DIRECT
    KIND    isob_mpk_kind_indirect, MPK_GATE_KIND_INDIRECT, BODY_INDIRECT

/* void isob_mpk_close(void): the closing sequence alone, for set-up code
 * that ends with a key open (pkey_alloc opens a new key in its thread). */
    .p2align 4
    .globl  isob_mpk_close
    .hidden isob_mpk_close
    .type   isob_mpk_close, @function
isob_mpk_close:
    .cfi_startproc
    CLOSE   MPK_GATE_CLOSE
    ret
    .cfi_endproc
    .size   isob_mpk_close, .-isob_mpk_close

    .globl  isob_mpk_gate_text_end
    .hidden isob_mpk_gate_text_end
isob_mpk_gate_text_end:

    .section .note.GNU-stack, "", @progbits
