/* A jump into the dynamic loader's lazy-binding code, at its
 * `xrstor 0x40(%rsp)`, with chosen registers and stack, for
 * test_mpk_strays.c: the stray XRSTOR that the mpk mechanisms leave open.
 *
 * xrstor_jump(site, frame, resume, mask) saves the callee-saved registers
 * and the stack pointer, sets EDX:EAX to mask (the state components to
 * restore), RSP to frame (whose frame+0x40 is the XSAVE area), RBX to
 * resume and R11 to xrstor_land, and jumps to site.  The loader's code
 * after the XRSTOR reloads the argument registers from the frame, moves
 * RBX to RSP, pops RBX, adds 0x18 and jumps through R11: to xrstor_land,
 * which restores the stack pointer and the saved registers and returns. */

    .bss
    .p2align 3
xrstor_saved_rsp:   .quad 0

    .text
    .p2align 4
    .globl  xrstor_jump
    .type   xrstor_jump, @function
xrstor_jump:
    pushq   %rbx
    pushq   %rbp
    pushq   %r12
    pushq   %r13
    pushq   %r14
    pushq   %r15
    movq    %rsp, xrstor_saved_rsp(%rip)
    movq    %rdx, %rbx
    leaq    xrstor_land(%rip), %r11
    movl    %ecx, %eax
    shrq    $32, %rcx
    movl    %ecx, %edx
    movq    %rsi, %rsp
    jmp     *%rdi
xrstor_land:
    movq    xrstor_saved_rsp(%rip), %rsp
    popq    %r15
    popq    %r14
    popq    %r13
    popq    %r12
    popq    %rbp
    popq    %rbx
    ret
    .size   xrstor_jump, .-xrstor_jump

    .section .note.GNU-stack, "", @progbits
