/* Jumps into gate code with chosen registers, for the MPK VM test.
 *
 * vm_jump(target, regs, pkru, rax) saves the callee-saved registers and the
 * stack pointer, loads every general register from *regs (rsp too: a fake
 * stack whose words all hold vm_jump_land), and jumps to target.  Gate code
 * that runs to its end returns, through one of those words, to
 * vm_jump_land, which records PKRU and RAX as they arrived and returns 0 to
 * vm_jump's caller.  Gate code that faults ends the process instead.
 *
 * vm_hijack_land is where a return address overwritten on the caller's
 * stack sends the trusted code's `ret`: it passes PKRU, as it finds it, to
 * vm_hijack_report. */

    .bss
    .p2align 3
vm_saved_rsp:   .quad 0
vm_out_pkru:    .quad 0
vm_out_rax:     .quad 0

    .text
    .p2align 4
    .globl  vm_jump
    .type   vm_jump, @function
vm_jump:
    pushq   %rbx
    pushq   %rbp
    pushq   %r12
    pushq   %r13
    pushq   %r14
    pushq   %r15
    movq    %rdx, vm_out_pkru(%rip)
    movq    %rcx, vm_out_rax(%rip)
    movq    %rsp, vm_saved_rsp(%rip)
    movq    %rsi, %r11
    movq    120(%r11), %rsp
    pushq   %rdi                    /* the target, for the ret below */
    movq    0(%r11), %rax
    movq    8(%r11), %rbx
    movq    16(%r11), %rcx
    movq    24(%r11), %rdx
    movq    32(%r11), %rsi
    movq    40(%r11), %rdi
    movq    48(%r11), %rbp
    movq    56(%r11), %r8
    movq    64(%r11), %r9
    movq    72(%r11), %r10
    movq    88(%r11), %r12
    movq    96(%r11), %r13
    movq    104(%r11), %r14
    movq    112(%r11), %r15
    movq    80(%r11), %r11
    ret
    .size   vm_jump, .-vm_jump

    .p2align 4
    .globl  vm_jump_land
    .type   vm_jump_land, @function
vm_jump_land:
    movq    %rax, %r8
    xorl    %ecx, %ecx
    rdpkru
    movq    vm_out_pkru(%rip), %rcx
    movl    %eax, (%rcx)
    movq    vm_out_rax(%rip), %rcx
    movq    %r8, (%rcx)
    movq    vm_saved_rsp(%rip), %rsp
    popq    %r15
    popq    %r14
    popq    %r13
    popq    %r12
    popq    %rbp
    popq    %rbx
    xorl    %eax, %eax
    ret
    .size   vm_jump_land, .-vm_jump_land

    .p2align 4
    .globl  vm_hijack_land
    .type   vm_hijack_land, @function
vm_hijack_land:
    xorl    %ecx, %ecx
    rdpkru
    movl    %eax, %edi
    andq    $-16, %rsp
    call    vm_hijack_report
    ud2
    .size   vm_hijack_land, .-vm_hijack_land

/* vm_gate_regs(slot, entry, out): call isob_mpk_gate(slot, entry) with
 * every other caller-saved register zeroed, and store what the call leaves
 * in them: out[0..8] = rax, rcx, rdx, rsi, rdi, r8, r9, r10, r11, then
 * xmm0..xmm15, 16 bytes each (41 quadwords in all). */
    .p2align 4
    .globl  vm_gate_regs
    .type   vm_gate_regs, @function
vm_gate_regs:
    pushq   %rbx
    movq    %rdx, %rbx
    xorl    %eax, %eax
    xorl    %ecx, %ecx
    xorl    %edx, %edx
    xorl    %r8d, %r8d
    xorl    %r9d, %r9d
    xorl    %r10d, %r10d
    xorl    %r11d, %r11d
    .irp    n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
    pxor    %xmm\n, %xmm\n
    .endr
    call    isob_mpk_gate
    movq    %rax, 0(%rbx)
    movq    %rcx, 8(%rbx)
    movq    %rdx, 16(%rbx)
    movq    %rsi, 24(%rbx)
    movq    %rdi, 32(%rbx)
    movq    %r8, 40(%rbx)
    movq    %r9, 48(%rbx)
    movq    %r10, 56(%rbx)
    movq    %r11, 64(%rbx)
    .irp    n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
    movdqu  %xmm\n, 72+16*\n(%rbx)
    .endr
    popq    %rbx
    ret
    .size   vm_gate_regs, .-vm_gate_regs

    .section .note.GNU-stack, "", @progbits
