/* The user-level context switch of the uthread mechanism, AArch64 (AAPCS64).
 *
 * isob_uthread_switch(void **save_sp, void *to_sp) stores the callee-saved
 * registers in a frame on the current stack (x19-x28, the frame pointer
 * x29, the link register x30 and the low halves d8-d15 of v8-v15), stores
 * the stack pointer in *save_sp, loads to_sp and restores the registers
 * from the frame saved there, returning through the x30 it holds.
 * Caller-saved registers need no saving: the C caller already assumes the
 * call clobbers them.  FPCR and FPSR are not switched: neither side changes
 * them, and saving them would make this more than the floor it is meant to
 * measure.  No signal mask is touched, unlike swapcontext.
 *
 * The file carries no BTI or PAC property note on purpose: the switch
 * returns to addresses it did not sign, so a binary that contains it must
 * not be marked as requiring either.
 *
 * The frame, 160 bytes so that sp stays 16-byte aligned:
 *   [sp, #0]   x19 x20     [sp, #48]  x25 x26     [sp, #96]   d8  d9
 *   [sp, #16]  x21 x22     [sp, #64]  x27 x28     [sp, #112]  d10 d11
 *   [sp, #32]  x23 x24     [sp, #80]  x29 x30     [sp, #128]  d12 d13
 *                                                 [sp, #144]  d14 d15 */

#define FRAME 160

    .text
    .globl  isob_uthread_switch
    .hidden isob_uthread_switch
    .type   isob_uthread_switch, %function
    .p2align 4
isob_uthread_switch:
    .cfi_startproc
    sub     sp, sp, #FRAME
    stp     x19, x20, [sp, #0]
    stp     x21, x22, [sp, #16]
    stp     x23, x24, [sp, #32]
    stp     x25, x26, [sp, #48]
    stp     x27, x28, [sp, #64]
    stp     x29, x30, [sp, #80]
    stp     d8, d9, [sp, #96]
    stp     d10, d11, [sp, #112]
    stp     d12, d13, [sp, #128]
    stp     d14, d15, [sp, #144]
    mov     x9, sp
    str     x9, [x0]
    mov     sp, x1
    ldp     x19, x20, [sp, #0]
    ldp     x21, x22, [sp, #16]
    ldp     x23, x24, [sp, #32]
    ldp     x25, x26, [sp, #48]
    ldp     x27, x28, [sp, #64]
    ldp     x29, x30, [sp, #80]
    ldp     d8, d9, [sp, #96]
    ldp     d10, d11, [sp, #112]
    ldp     d12, d13, [sp, #128]
    ldp     d14, d15, [sp, #144]
    add     sp, sp, #FRAME
    ret
    .cfi_endproc
    .size   isob_uthread_switch, .-isob_uthread_switch

/* void *isob_uthread_init(void *stack_top, void (*fn)(void *), void *arg)
 * builds, below stack_top, the frame that the first isob_uthread_switch to
 * the returned stack pointer restores: x19 = arg, x20 = fn,
 * x30 = isob_uthread_trampoline, every other register zero. */
    .globl  isob_uthread_init
    .hidden isob_uthread_init
    .type   isob_uthread_init, %function
    .p2align 4
isob_uthread_init:
    .cfi_startproc
    and     x0, x0, #~15
    sub     x0, x0, #FRAME
    adrp    x9, isob_uthread_trampoline
    add     x9, x9, :lo12:isob_uthread_trampoline
    stp     x2, x1, [x0, #0]        /* x19: the argument, x20: the function */
    stp     xzr, xzr, [x0, #16]     /* x21 x22 */
    stp     xzr, xzr, [x0, #32]     /* x23 x24 */
    stp     xzr, xzr, [x0, #48]     /* x25 x26 */
    stp     xzr, xzr, [x0, #64]     /* x27 x28 */
    stp     xzr, x9, [x0, #80]      /* x29: zero, x30: the trampoline */
    stp     xzr, xzr, [x0, #96]     /* d8 d9 */
    stp     xzr, xzr, [x0, #112]    /* d10 d11 */
    stp     xzr, xzr, [x0, #128]    /* d12 d13 */
    stp     xzr, xzr, [x0, #144]    /* d14 d15 */
    ret
    .cfi_endproc
    .size   isob_uthread_init, .-isob_uthread_init

/* The first switch to a new context "returns" here, with the frame built by
 * isob_uthread_init: x19 holds the argument, x20 the function.  x29 is zero
 * so that frame-pointer backtraces end here, and sp is 16-byte aligned as
 * the ABI requires.  The function must never return. */
    .globl  isob_uthread_trampoline
    .hidden isob_uthread_trampoline
    .type   isob_uthread_trampoline, %function
    .p2align 4
isob_uthread_trampoline:
    .cfi_startproc
    .cfi_undefined x30
    mov     x0, x19
    blr     x20
    brk     #0
    .cfi_endproc
    .size   isob_uthread_trampoline, .-isob_uthread_trampoline

    .section .note.GNU-stack, "", %progbits
