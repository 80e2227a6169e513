/* The user-level context switch of the uthread mechanism, x86-64 System V.
 *
 * isob_uthread_switch(void **save_sp, void *to_sp) pushes the callee-saved
 * registers, stores the stack pointer in *save_sp, loads to_sp and pops the
 * registers saved there.  Caller-saved registers need no saving: the C
 * caller already assumes the call clobbers them.  The x87 control word and
 * MXCSR are not switched either: neither side changes them, and saving
 * them would make this more than the floor it is meant to measure.  No
 * signal mask is touched, unlike swapcontext.  The file carries no CET
 * property note on purpose: the switch keeps no shadow stack, so a binary
 * that contains it must not be marked as running with one. */

    .text
    .globl  isob_uthread_switch
    .hidden isob_uthread_switch
    .type   isob_uthread_switch, @function
    .p2align 4
isob_uthread_switch:
    .cfi_startproc
    pushq   %rbx
    pushq   %rbp
    pushq   %r12
    pushq   %r13
    pushq   %r14
    pushq   %r15
    movq    %rsp, (%rdi)
    movq    %rsi, %rsp
    popq    %r15
    popq    %r14
    popq    %r13
    popq    %r12
    popq    %rbp
    popq    %rbx
    ret
    .cfi_endproc
    .size   isob_uthread_switch, .-isob_uthread_switch

/* void *isob_uthread_init(void *stack_top, void (*fn)(void *), void *arg)
 * builds, below stack_top, the frame that the first isob_uthread_switch to
 * the returned stack pointer pops: six register slots (r12 = arg, r13 = fn,
 * the others zero) and isob_uthread_trampoline as the return address. */
    .globl  isob_uthread_init
    .hidden isob_uthread_init
    .type   isob_uthread_init, @function
    .p2align 4
isob_uthread_init:
    .cfi_startproc
    andq    $-16, %rdi
    /* After the switch's ret pops the slot at top-24, rsp is top-16:
     * 16-byte aligned at the trampoline's call. */
    leaq    -24(%rdi), %rax
    leaq    isob_uthread_trampoline(%rip), %rcx
    movq    %rcx, (%rax)
    movq    $0, 8(%rax)
    subq    $48, %rax
    movq    $0, 0(%rax)         /* r15 */
    movq    $0, 8(%rax)         /* r14 */
    movq    %rsi, 16(%rax)      /* r13: the function */
    movq    %rdx, 24(%rax)      /* r12: its argument */
    movq    $0, 32(%rax)        /* rbp */
    movq    $0, 40(%rax)        /* rbx */
    ret
    .cfi_endproc
    .size   isob_uthread_init, .-isob_uthread_init

/* The first switch to a new context "returns" here, with the frame built
 * by isob_uthread_init: r12 holds the argument, r13 the function.  rbp is
 * zero so that backtraces end here, and the stack is 16-byte aligned at the
 * call as the ABI requires.  The function must never return. */
    .globl  isob_uthread_trampoline
    .hidden isob_uthread_trampoline
    .type   isob_uthread_trampoline, @function
    .p2align 4
isob_uthread_trampoline:
    .cfi_startproc
    .cfi_undefined rip
    movq    %r12, %rdi
    callq   *%r13
    ud2
    .cfi_endproc
    .size   isob_uthread_trampoline, .-isob_uthread_trampoline

    .section .note.GNU-stack, "", @progbits
