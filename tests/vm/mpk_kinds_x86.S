/* A deliberately broken copy of the MPK gate's indirect-call kind, for the
 * MPK VM test (mpk_kinds.c): test-only, never linked into isob.
 *
 * It is isob_mpk_kind_indirect (src/mechanisms/mpk/gate_x86.S) instruction
 * for instruction, but for where its indirect call reads the pointer: from
 * vm_broken_kind_fn, ordinary writable data, instead of the key-tagged slot
 * page.  The untrusted side can store into it, and the gate then calls
 * whatever it stored with the key open: the attack of mpk_kinds.c must win
 * here, which shows that it can fail.  Its instructions are not recorded as
 * gate sites, so no other check of the gate sees them. */
#include "gate.h"

    .data
    .p2align 3
    .globl  vm_broken_kind_fn
    .type   vm_broken_kind_fn, @object
vm_broken_kind_fn:
    .quad   isob_window_kind_empty
    .size   vm_broken_kind_fn, 8

    .text
/* long vm_broken_kind_indirect(struct isob_comp *c) */
    .p2align 4
    .globl  vm_broken_kind_indirect
    .type   vm_broken_kind_indirect, @function
vm_broken_kind_indirect:
    movl    MPK_COMP_SLOT(%rdi), %r10d
    xorl    %r11d, %r11d
1:
    andl    $(MPK_SLOTS - 1), %r10d
    leal    (%r10,%r10), %ecx
    movl    $3, %eax
    shll    %cl, %eax
    notl    %eax
    andl    $MPK_PKRU_CLOSED, %eax
    xorl    %ecx, %ecx
    xorl    %edx, %edx
    wrpkru
    movl    %r10d, %ecx
    andl    $(MPK_SLOTS - 1), %ecx
    shlq    $MPK_SLOT_SHIFT, %rcx
    leaq    isob_mpk_slots(%rip), %rdx
    addq    %rdx, %rcx
    cmpl    MPK_SLOT_PKRU_OPEN(%rcx), %eax
    jne     1b
    movl    $1, %edx
    xchgl   %edx, MPK_SLOT_BUSY(%rcx)
    testl   %edx, %edx
    jnz     2f
    movq    %rsp, %rax
    movq    MPK_SLOT_STACK(%rcx), %rsp
    pushq   %rcx
    pushq   %rax
    cld
    leaq    MPK_SLOT_CALLS(%rcx), %rdi
    call    *vm_broken_kind_fn(%rip)     /* the flaw: writable memory */
    popq    %rdx
    popq    %rcx
    movl    $0, MPK_SLOT_BUSY(%rcx)
    movq    %rdx, %rsp
    jmp     3f
2:
    movq    $-MPK_EBUSY, %rax
3:
    movq    %rax, %r11
4:
    movl    $MPK_PKRU_CLOSED, %eax
    xorl    %ecx, %ecx
    xorl    %edx, %edx
    wrpkru
    cmpl    $MPK_PKRU_CLOSED, %eax
    jne     4b
    movq    %r11, %rax
    ret
    .size   vm_broken_kind_indirect, .-vm_broken_kind_indirect

    .section .note.GNU-stack, "", @progbits
