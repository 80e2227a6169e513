/* The guest loops of include/isobench/kvm.h.  They run in the KVM guest
 * (64-bit long mode), entered with r12 = the control block (struct
 * isob_kvm_ctrl) and r13 = the top of the guest stack.  Only relative
 * jumps: the vmcall benchmark copies each loop to a page of its own.
 * Each OUT to the port ends a KVM_RUN in user space; the next KVM_RUN
 * resumes after it. */

#define PORT 0x10
#define HC_UNKNOWN 0x7f17
#define ENOSYS_RET -1000
#define CPUID_MARK 0x626f7369 /* "isob", ISOB_KVM_CPUID_MARK */
#define C_COUNT 0
#define C_FN 8
#define C_ARG 16
#define C_RET 48
#define C_BAD 56
#define C_LAST 64
#define C_RUNS 72
#define C_DOOR 80

    .text
    .globl isob_kvm_guest_io, isob_kvm_guest_io_end
    .globl isob_kvm_guest_hc, isob_kvm_guest_hc_end
    .globl isob_kvm_guest_hc_amd, isob_kvm_guest_hc_amd_end
    .globl isob_kvm_guest_cpuid, isob_kvm_guest_cpuid_end
    .globl isob_kvm_guest_call, isob_kvm_guest_call_end
    .globl isob_kvm_guest_mmio, isob_kvm_guest_mmio_end

/* One exit to user space per run. */
    .p2align 4
isob_kvm_guest_io:
1:  incq C_RUNS(%r12)
    outb %al, $PORT
    jmp 1b
isob_kvm_guest_io_end:

/* One exit to user space per run, by a store to the doorbell page (a
 * guest-physical page without memory: KVM_EXIT_MMIO).  Unlike OUT, it
 * reaches user space from any ring. */
    .p2align 4
isob_kvm_guest_mmio:
    movq C_DOOR(%r12), %rdx
1:  incq C_RUNS(%r12)
    movb %al, (%rdx)
    jmp 1b
isob_kvm_guest_mmio_end:

/* count hypercalls of a number KVM does not know: KVM handles each in the
 * kernel and returns -KVM_ENOSYS in rax; any other answer is counted bad. */
#define HC_LOOP(INSN)                           \
1:  movq C_COUNT(%r12), %rcx;                   \
    testq %rcx, %rcx;                           \
    jz 3f;                                      \
2:  movl $HC_UNKNOWN, %eax;                     \
    xorl %ebx, %ebx;                            \
    INSN;                                       \
    movq %rax, C_LAST(%r12);                    \
    cmpq $ENOSYS_RET, %rax;                     \
    je 4f;                                      \
    incq C_BAD(%r12);                           \
4:  decq %rcx;                                  \
    jnz 2b;                                     \
3:  incq C_RUNS(%r12);                          \
    outb %al, $PORT;                            \
    jmp 1b

    .p2align 4
isob_kvm_guest_hc:
    HC_LOOP(vmcall)
isob_kvm_guest_hc_end:

    .p2align 4
isob_kvm_guest_hc_amd:
    HC_LOOP(vmmcall)
isob_kvm_guest_hc_amd_end:

/* count CPUIDs of the hypervisor leaf 0x40000000, whose ebx the host set
 * to CPUID_MARK in the vCPU's CPUID table (KVM_SET_CPUID2): an answer
 * without the mark did not come from this KVM, and is counted bad. */
    .p2align 4
isob_kvm_guest_cpuid:
1:  movq C_COUNT(%r12), %r8
    testq %r8, %r8
    jz 3f
2:  movl $0x40000000, %eax
    xorl %ecx, %ecx
    cpuid
    movq %rbx, C_LAST(%r12)
    cmpl $CPUID_MARK, %ebx
    je 4f
    incq C_BAD(%r12)
4:  decq %r8
    jnz 2b
3:  incq C_RUNS(%r12)
    outb %al, $PORT
    jmp 1b
isob_kvm_guest_cpuid_end:

/* ret = fn(arg[0], arg[1], arg[2], arg[3]) on a fresh stack, then a store
 * to the doorbell (KVM_EXIT_MMIO: this loop runs in ring 0 or ring 3). */
    .p2align 4
isob_kvm_guest_call:
1:  movq %r13, %rsp
    movq C_ARG(%r12), %rdi
    movq C_ARG+8(%r12), %rsi
    movq C_ARG+16(%r12), %rdx
    movq C_ARG+24(%r12), %rcx
    movq C_FN(%r12), %rax
    call *%rax
    movq %rax, C_RET(%r12)
    incq C_RUNS(%r12)
    movq C_DOOR(%r12), %rdx
    movb %al, (%rdx)
    jmp 1b
isob_kvm_guest_call_end:

    .section .note.GNU-stack,"",@progbits
