/* A minimal KVM guest through the KVM API itself (ioctl on /dev/kvm, no
 * library): the vmcall benchmark's guests and the kvm mechanism's.
 *
 * The guest is one vCPU in 64-bit long mode at ring 0 (VMX/SVM non-root,
 * where SEIMI runs the process it protects; Wang et al., IEEE S&P 2020) or
 * ring 3 (struct isob_kvm_vm's ring), with its own four-level page tables
 * (every page user-accessible, so that either ring runs there).  Every region the guest sees is
 * mapped at the same virtual address as in the host process (guest
 * virtual == host virtual), backed by a memory slot of that host memory at
 * a guest-physical address of its own: the host code and the guest code
 * then share pointers, and a host function (the freestanding trusted code)
 * runs in the guest unchanged.  The host process keeps its own mapping of
 * every slot: KVM reads guest memory through it, and so can the host.
 *
 * The guest code (src/kvm/guest_x86.S) runs loops that leave to user
 * space with an OUT to ISOB_KVM_PORT (KVM_RUN returns KVM_EXIT_IO) or a
 * store to a doorbell page that has no memory behind it (KVM_EXIT_MMIO);
 * the next KVM_RUN resumes after that instruction.  It reads its orders from a
 * control block (struct isob_kvm_ctrl) that the host writes between runs,
 * so that a round trip costs one KVM_RUN and no other ioctl.
 *
 * x86-64 only; elsewhere isob_kvm_probe says so. */
#ifndef ISOBENCH_KVM_H
#define ISOBENCH_KVM_H

#include <stddef.h>
#include <stdint.h>

/* The device, unless the environment names another (tests point it at a
 * path that does not open, to see the skip). */
#define ISOB_KVM_DEVICE "/dev/kvm"
#define ISOB_KVM_DEVICE_ENV "ISOBENCH_KVM_DEVICE"
#define ISOB_KVM_API 12             /* KVM_GET_API_VERSION's only stable value */
#define ISOB_KVM_PORT 0x10          /* the guest's exit to user space: OUT to this port */
#define ISOB_KVM_HC_UNKNOWN 0x7f17  /* a hypercall number KVM does not know */
#define ISOB_KVM_ENOSYS 1000        /* KVM's -KVM_ENOSYS, in rax, for an unknown hypercall */
#define ISOB_KVM_CPUID_MARK 0x626f7369u /* "isob": ebx of leaf 0x40000000 in the guest's CPUID table */
#define ISOB_KVM_CAVEAT "nested virtualization: costs more than on bare metal"

/* What the guest reads and writes; layout fixed for guest_x86.S. */
struct isob_kvm_ctrl {
    uint64_t count;   /*  0: in-guest exits per run (hypercall, cpuid loops) */
    uint64_t fn;      /*  8: function the call loop calls */
    uint64_t arg[4];  /* 16: its arguments (rdi, rsi, rdx, rcx) */
    uint64_t ret;     /* 48: its result */
    uint64_t bad;     /* 56: in-guest exits whose result was not the expected one */
    uint64_t last;    /* 64: the last in-guest exit's rax */
    uint64_t runs;    /* 72: loops completed */
    uint64_t door;    /* 80: the doorbell page (isob_kvm_map_doorbell) */
};

/* The guest loops (guest_x86.S), entered with r12 = the control block and
 * r13 = the top of the guest stack. */
enum isob_kvm_guest {
    ISOB_KVM_GUEST_IO,        /* OUT, again: every run is one exit to user space */
    ISOB_KVM_GUEST_HYPERCALL, /* count VMCALLs (VMMCALL on AMD), then OUT */
    ISOB_KVM_GUEST_CPUID,     /* count CPUIDs (leaf 0x40000000, marked), then OUT */
    ISOB_KVM_GUEST_CALL,      /* ret = fn(arg[0..3]) on the guest stack, then a doorbell store */
    ISOB_KVM_GUEST_MMIO,      /* a store to the doorbell, again: one KVM_EXIT_MMIO per run */
};

struct kvm_run;

struct isob_kvm_vm {
    int sys, vm, vcpu;        /* -1 when not open */
    struct kvm_run *run;      /* the vCPU's mmap'ed kvm_run */
    size_t run_size;
    unsigned char *pt;        /* the page-table pool (its own slot at guest-physical 0) */
    size_t pt_pages, pt_used;
    uint64_t next_gpa;        /* where the next region's slot goes */
    unsigned next_slot, max_slots;
    int readonly_ok;          /* KVM_CAP_READONLY_MEM */
    int immediate_exit_ok;    /* KVM_CAP_IMMEDIATE_EXIT */
    unsigned char *code;      /* the copied guest code (vmcall's minimal guest), or NULL */
    size_t mapped_bytes;      /* bytes of host memory the guest sees */
    unsigned regions;
    int amd;                  /* the guest runs VMMCALL, not VMCALL */
    int ring;                 /* the guest's privilege level: 0 (default) or 3; set before start */
};

/* 0 when this machine can run the guests: the device opens, API version
 * 12, the capabilities used (user memory, extended CPUID).  Else a
 * negative errno with the one-line reason in why ("/dev/kvm: No such file
 * or directory", "KVM_GET_API_VERSION is 11, not 12"). */
int isob_kvm_probe(char *why, size_t len);

/* Open the device, make the VM, its vCPU and the page-table pool.  0 or
 * -errno with why. */
int isob_kvm_open(struct isob_kvm_vm *v, char *why, size_t len);
/* Map host memory [p, p + n) into the guest at the same virtual address
 * (page-aligned; writable or read-only to the guest). */
int isob_kvm_map(struct isob_kvm_vm *v, const void *p, size_t n, int writable, char *why, size_t len);
/* Map the page at p (reserved address space, e.g. PROT_NONE) to a
 * guest-physical page with no memory slot: a guest store there ends
 * KVM_RUN with KVM_EXIT_MMIO, the exit to user space that ring 3 can make. */
#define ISOB_KVM_DOORBELL_GPA 0xf0000000ull
int isob_kvm_map_doorbell(struct isob_kvm_vm *v, const void *p, char *why, size_t len);
/* Map the running executable's file mappings (its code, constants and
 * data), so that its functions run in the guest. */
int isob_kvm_map_self(struct isob_kvm_vm *v, char *why, size_t len);
/* Copy the guest loop g to a page of its own and map it (the minimal
 * guest); its address through *entry. */
int isob_kvm_map_guest_code(struct isob_kvm_vm *v, enum isob_kvm_guest g, uint64_t *entry, char *why,
                            size_t len);
/* The address of loop g where it is in the executable (with map_self). */
uint64_t isob_kvm_guest_entry(enum isob_kvm_guest g);
/* Long mode, the registers, the CPUID KVM supports; the guest starts at
 * rip with r12 = ctrl, r13 = rsp = stack_top.  0 or -errno with why. */
int isob_kvm_start(struct isob_kvm_vm *v, uint64_t rip, uint64_t stack_top, struct isob_kvm_ctrl *ctrl,
                   char *why, size_t len);
void isob_kvm_close(struct isob_kvm_vm *v);

/* One KVM_RUN: 0 when it ended at the guest's OUT to ISOB_KVM_PORT or its
 * store to the doorbell, else -errno of the ioctl or -EFAULT (the exit in
 * isob_kvm_exit_why). */
int isob_kvm_enter(struct isob_kvm_vm *v);
/* One KVM_RUN with immediate_exit set: the ioctl returns EINTR before the
 * guest runs.  0 when it did. */
int isob_kvm_enter_none(struct isob_kvm_vm *v);
/* 1 when the last run ended with KVM_EXIT_INTERNAL_ERROR (KVM could not
 * emulate an instruction). */
int isob_kvm_internal_error(const struct isob_kvm_vm *v);
/* The last exit in words ("KVM_EXIT_SHUTDOWN (triple fault) at rip 0x...") */
void isob_kvm_exit_why(struct isob_kvm_vm *v, char *why, size_t len);

/* Where this process runs: 1 under a hypervisor (CPUID.1:ECX bit 31; the
 * KVM here is then nested), with its vendor string in vendor; 0 on bare
 * metal. */
int isob_kvm_nested(char *vendor, size_t len);
/* The nested parameter of this kernel's kvm_intel or kvm_amd module ("Y",
 * "N", "1", "0"), or "unknown". */
const char *isob_kvm_nested_param(void);

#endif
