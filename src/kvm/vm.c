/* A minimal KVM guest through the KVM API (include/isobench/kvm.h). */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "isobench/kvm.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <linux/kvm.h>

#define PAGE 4096ull
#define PT_POOL_PAGES 1024      /* page-table pages: up to about 2 GiB mapped in 4 KiB pages */
#define PT_P 0x1ull
#define PT_RW 0x2ull
#define PT_US 0x4ull              /* every page is the guest's user mode's too: ring 3 runs there */
#define GPA_FIRST (PT_POOL_PAGES * PAGE)

/* The control block's layout is guest_x86.S's too. */
_Static_assert(offsetof(struct isob_kvm_ctrl, fn) == 8, "ctrl.fn");
_Static_assert(offsetof(struct isob_kvm_ctrl, arg) == 16, "ctrl.arg");
_Static_assert(offsetof(struct isob_kvm_ctrl, ret) == 48, "ctrl.ret");
_Static_assert(offsetof(struct isob_kvm_ctrl, bad) == 56, "ctrl.bad");
_Static_assert(offsetof(struct isob_kvm_ctrl, last) == 64, "ctrl.last");
_Static_assert(offsetof(struct isob_kvm_ctrl, runs) == 72, "ctrl.runs");
_Static_assert(offsetof(struct isob_kvm_ctrl, door) == 80, "ctrl.door");

extern const unsigned char isob_kvm_guest_io[], isob_kvm_guest_io_end[];
extern const unsigned char isob_kvm_guest_hc[], isob_kvm_guest_hc_end[];
extern const unsigned char isob_kvm_guest_hc_amd[], isob_kvm_guest_hc_amd_end[];
extern const unsigned char isob_kvm_guest_cpuid[], isob_kvm_guest_cpuid_end[];
extern const unsigned char isob_kvm_guest_call[], isob_kvm_guest_call_end[];
extern const unsigned char isob_kvm_guest_mmio[], isob_kvm_guest_mmio_end[];

static const char *device(void)
{
    const char *d = getenv(ISOB_KVM_DEVICE_ENV);
    return d && *d ? d : ISOB_KVM_DEVICE;
}

static int is_amd(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return 0;
    return b == 0x68747541; /* "Auth"enticAMD */
}

/* The device, once opened and checked, stays open in this process (closed
 * on exec), and every later open is a duplicate of it: a child that drops
 * its privileges after a fork (the isolation matrix's unprivileged caller)
 * then makes its guests through the descriptor it inherited, as a process
 * handed an open /dev/kvm does.  Opened again when the path changes. */
static int dev_fd = -1;
static char dev_path[256];

/* Open the device and check what every guest needs: 0, or -errno with why. */
static int open_checked(int *fd_out, char *why, size_t len)
{
    const char *dev = device();
    if (dev_fd >= 0 && strcmp(dev, dev_path) == 0) {
        int fd = fcntl(dev_fd, F_DUPFD_CLOEXEC, 0);
        if (fd >= 0) {
            *fd_out = fd;
            return 0;
        }
    }
    int fd = open(dev, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        snprintf(why, len, "%s: %s", dev, strerror(err));
        return -err;
    }
    int api = ioctl(fd, KVM_GET_API_VERSION, 0);
    if (api != ISOB_KVM_API) {
        snprintf(why, len, "%s: KVM_GET_API_VERSION is %d, not %d", dev, api, ISOB_KVM_API);
        close(fd);
        return -ENOTSUP;
    }
    static const struct { int cap; const char *name; } caps[] = {
        {KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY"},
        {KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID"},
    };
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        if (ioctl(fd, KVM_CHECK_EXTENSION, caps[i].cap) <= 0) {
            snprintf(why, len, "%s lacks %s", dev, caps[i].name);
            close(fd);
            return -ENOTSUP;
        }
    }
    if (strlen(dev) < sizeof dev_path) {
        int keep = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (keep >= 0) {
            if (dev_fd >= 0)
                close(dev_fd);
            dev_fd = keep;
            snprintf(dev_path, sizeof dev_path, "%s", dev);
        }
    }
    *fd_out = fd;
    return 0;
}

int isob_kvm_probe(char *why, size_t len)
{
    int fd;
    int rc = open_checked(&fd, why, len);
    if (rc)
        return rc;
    int vm = ioctl(fd, KVM_CREATE_VM, 0);
    if (vm < 0) {
        int err = errno;
        snprintf(why, len, "%s: KVM_CREATE_VM: %s", device(), strerror(err));
        close(fd);
        return -err;
    }
    close(vm);
    close(fd);
    return 0;
}

void isob_kvm_close(struct isob_kvm_vm *v)
{
    if (v->run)
        munmap(v->run, v->run_size);
    if (v->vcpu >= 0)
        close(v->vcpu);
    if (v->vm >= 0)
        close(v->vm);
    if (v->sys >= 0)
        close(v->sys);
    if (v->pt)
        munmap(v->pt, PT_POOL_PAGES * PAGE);
    if (v->code)
        munmap(v->code, PAGE);
    memset(v, 0, sizeof *v);
    v->sys = v->vm = v->vcpu = -1;
}

static int add_slot(struct isob_kvm_vm *v, uint64_t gpa, const void *p, size_t n, int writable, char *why,
                    size_t len)
{
    if (v->next_slot >= v->max_slots) {
        snprintf(why, len, "KVM allows %u memory slots; the guest needs more", v->max_slots);
        return -ENOSPC;
    }
    struct kvm_userspace_memory_region r = {
        .slot = v->next_slot,
        .flags = (!writable && v->readonly_ok) ? KVM_MEM_READONLY : 0,
        .guest_phys_addr = gpa,
        .memory_size = n,
        .userspace_addr = (uint64_t)(uintptr_t)p,
    };
    if (ioctl(v->vm, KVM_SET_USER_MEMORY_REGION, &r) != 0) {
        int err = errno;
        snprintf(why, len, "KVM_SET_USER_MEMORY_REGION (%zu bytes at %p): %s", n, p, strerror(err));
        return -err;
    }
    v->next_slot++;
    return 0;
}

int isob_kvm_open(struct isob_kvm_vm *v, char *why, size_t len)
{
    memset(v, 0, sizeof *v);
    v->sys = v->vm = v->vcpu = -1;
    int rc = open_checked(&v->sys, why, len);
    if (rc)
        return rc;
    v->vm = ioctl(v->sys, KVM_CREATE_VM, 0);
    if (v->vm < 0) {
        rc = -errno;
        snprintf(why, len, "%s: KVM_CREATE_VM: %s", device(), strerror(-rc));
        goto fail;
    }
    int slots = ioctl(v->sys, KVM_CHECK_EXTENSION, KVM_CAP_NR_MEMSLOTS);
    v->max_slots = slots > 0 ? (unsigned)slots : 32;
    v->readonly_ok = ioctl(v->vm, KVM_CHECK_EXTENSION, KVM_CAP_READONLY_MEM) > 0;
    v->immediate_exit_ok = ioctl(v->sys, KVM_CHECK_EXTENSION, KVM_CAP_IMMEDIATE_EXIT) > 0;
    v->amd = is_amd();
    v->vcpu = ioctl(v->vm, KVM_CREATE_VCPU, 0);
    if (v->vcpu < 0) {
        rc = -errno;
        snprintf(why, len, "KVM_CREATE_VCPU: %s", strerror(-rc));
        goto fail;
    }
    int sz = ioctl(v->sys, KVM_GET_VCPU_MMAP_SIZE, 0);
    if (sz <= 0) {
        rc = sz < 0 ? -errno : -EINVAL;
        snprintf(why, len, "KVM_GET_VCPU_MMAP_SIZE: %s", strerror(-rc));
        goto fail;
    }
    v->run_size = (size_t)sz;
    void *run = mmap(NULL, v->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->vcpu, 0);
    if (run == MAP_FAILED) {
        rc = -errno;
        snprintf(why, len, "mmap of kvm_run: %s", strerror(-rc));
        goto fail;
    }
    v->run = run;
    /* The page tables: a pool of pages in a slot at guest-physical 0,
     * touched only as tables are made; the first is the PML4. */
    void *pt = mmap(NULL, PT_POOL_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pt == MAP_FAILED) {
        rc = -errno;
        snprintf(why, len, "page-table pool: %s", strerror(-rc));
        goto fail;
    }
    v->pt = pt;
    v->pt_pages = PT_POOL_PAGES;
    v->pt_used = 1;
    v->next_gpa = GPA_FIRST;
    rc = add_slot(v, 0, v->pt, PT_POOL_PAGES * PAGE, 1, why, len);
    if (rc)
        goto fail;
    return 0;
fail:
    isob_kvm_close(v);
    return rc;
}

/* The table entry idx of the table at guest-physical tgpa, making the
 * next level when absent: the next level's guest-physical address. */
static int64_t pt_next(struct isob_kvm_vm *v, uint64_t tgpa, unsigned idx)
{
    uint64_t *t = (uint64_t *)(v->pt + tgpa);
    if (!(t[idx] & PT_P)) {
        if (v->pt_used >= v->pt_pages)
            return -ENOSPC;
        t[idx] = (uint64_t)(v->pt_used++) * PAGE | PT_P | PT_RW | PT_US;
    }
    return (int64_t)(t[idx] & 0x000ffffffffff000ull);
}

static int map_page(struct isob_kvm_vm *v, uint64_t gva, uint64_t gpa, int writable)
{
    int64_t t = 0; /* the PML4 */
    for (int level = 3; level >= 1; level--) {
        t = pt_next(v, (uint64_t)t, (unsigned)(gva >> (12 + 9 * level)) & 511);
        if (t < 0)
            return (int)t;
    }
    uint64_t *pte = (uint64_t *)(v->pt + t) + ((gva >> 12) & 511);
    *pte = gpa | PT_P | PT_US | (writable ? PT_RW : 0);
    return 0;
}

int isob_kvm_map(struct isob_kvm_vm *v, const void *p, size_t n, int writable, char *why, size_t len)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (a % PAGE || n % PAGE || n == 0 || a + n > (1ull << 47)) {
        snprintf(why, len, "guest region %p + %zu: not page-aligned in the lower half", p, n);
        return -EINVAL;
    }
    uint64_t gpa = v->next_gpa;
    /* No slot may cover the doorbell: a store there must find no memory. */
    if (gpa <= ISOB_KVM_DOORBELL_GPA && gpa + n > ISOB_KVM_DOORBELL_GPA)
        gpa = ISOB_KVM_DOORBELL_GPA + (2ull << 20);
    v->next_gpa = gpa;
    int rc = add_slot(v, gpa, p, n, writable, why, len);
    if (rc)
        return rc;
    for (uint64_t off = 0; off < n; off += PAGE) {
        rc = map_page(v, a + off, gpa + off, writable);
        if (rc) {
            snprintf(why, len, "guest page tables: pool of %u pages is full", PT_POOL_PAGES);
            return rc;
        }
    }
    v->next_gpa += (n + (2ull << 20) - 1) & ~((2ull << 20) - 1);
    v->mapped_bytes += n;
    v->regions++;
    return 0;
}

int isob_kvm_map_doorbell(struct isob_kvm_vm *v, const void *p, char *why, size_t len)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (a % PAGE || map_page(v, a, ISOB_KVM_DOORBELL_GPA, 1) != 0) {
        snprintf(why, len, "guest doorbell page at %p: not mapped", p);
        return -EINVAL;
    }
    return 0;
}

int isob_kvm_map_self(struct isob_kvm_vm *v, char *why, size_t len)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(why, len, "readlink /proc/self/exe: %s", strerror(errno));
        return -errno;
    }
    exe[n] = 0;
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f) {
        int err = errno;
        snprintf(why, len, "/proc/self/maps: %s", strerror(err));
        return -err;
    }
    char line[4352];
    int rc = 0, found = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        int off = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &off) < 3 || off == 0)
            continue;
        char *path = line + off;
        path[strcspn(path, "\n")] = 0;
        if (strcmp(path, exe) != 0 || perms[0] != 'r')
            continue;
        rc = isob_kvm_map(v, (void *)lo, hi - lo, perms[1] == 'w', why, len);
        found++;
    }
    fclose(f);
    if (!rc && !found) {
        snprintf(why, len, "no mapping of %s in /proc/self/maps", exe);
        rc = -ENOENT;
    }
    return rc;
}

static void guest_range(const struct isob_kvm_vm *v, enum isob_kvm_guest g, const unsigned char **a,
                        const unsigned char **b)
{
    switch (g) {
    case ISOB_KVM_GUEST_HYPERCALL:
        if (v && v->amd) {
            *a = isob_kvm_guest_hc_amd;
            *b = isob_kvm_guest_hc_amd_end;
        } else {
            *a = isob_kvm_guest_hc;
            *b = isob_kvm_guest_hc_end;
        }
        return;
    case ISOB_KVM_GUEST_CPUID:
        *a = isob_kvm_guest_cpuid;
        *b = isob_kvm_guest_cpuid_end;
        return;
    case ISOB_KVM_GUEST_CALL:
        *a = isob_kvm_guest_call;
        *b = isob_kvm_guest_call_end;
        return;
    case ISOB_KVM_GUEST_MMIO:
        *a = isob_kvm_guest_mmio;
        *b = isob_kvm_guest_mmio_end;
        return;
    case ISOB_KVM_GUEST_IO:
    default:
        *a = isob_kvm_guest_io;
        *b = isob_kvm_guest_io_end;
        return;
    }
}

uint64_t isob_kvm_guest_entry(enum isob_kvm_guest g)
{
    const unsigned char *a, *b;
    guest_range(NULL, g, &a, &b);
    return (uint64_t)(uintptr_t)a;
}

int isob_kvm_map_guest_code(struct isob_kvm_vm *v, enum isob_kvm_guest g, uint64_t *entry, char *why,
                            size_t len)
{
    const unsigned char *a, *b;
    guest_range(v, g, &a, &b);
    void *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        int err = errno;
        snprintf(why, len, "guest code page: %s", strerror(err));
        return -err;
    }
    v->code = p;
    memcpy(p, a, (size_t)(b - a));
    int rc = isob_kvm_map(v, p, PAGE, 0, why, len);
    if (rc)
        return rc;
    *entry = (uint64_t)(uintptr_t)p;
    return 0;
}

static int set_cpuid(struct isob_kvm_vm *v, char *why, size_t len)
{
    for (unsigned nent = 64; nent <= 4096; nent *= 2) {
        struct kvm_cpuid2 *c = calloc(1, sizeof *c + nent * sizeof c->entries[0]);
        if (!c)
            return -ENOMEM;
        c->nent = nent;
        if (ioctl(v->sys, KVM_GET_SUPPORTED_CPUID, c) != 0) {
            int err = errno;
            free(c);
            if (err == E2BIG)
                continue;
            snprintf(why, len, "KVM_GET_SUPPORTED_CPUID: %s", strerror(err));
            return -err;
        }
        /* Mark the hypervisor leaf, so that the guest can tell an answer
         * from this table (KVM's, in the kernel) from any other. */
        unsigned i;
        for (i = 0; i < c->nent && c->entries[i].function != 0x40000000; i++)
            ;
        if (i == c->nent && c->nent < nent) {
            memset(&c->entries[i], 0, sizeof c->entries[i]);
            c->entries[i].function = 0x40000000;
            c->nent++;
        }
        if (i < c->nent)
            c->entries[i].ebx = ISOB_KVM_CPUID_MARK;
        int rc = ioctl(v->vcpu, KVM_SET_CPUID2, c) == 0 ? 0 : -errno;
        free(c);
        if (rc)
            snprintf(why, len, "KVM_SET_CPUID2: %s", strerror(-rc));
        return rc;
    }
    snprintf(why, len, "KVM_GET_SUPPORTED_CPUID: more than 4096 entries");
    return -E2BIG;
}

int isob_kvm_start(struct isob_kvm_vm *v, uint64_t rip, uint64_t stack_top, struct isob_kvm_ctrl *ctrl,
                   char *why, size_t len)
{
    int rc = set_cpuid(v, why, len);
    if (rc)
        return rc;
    struct kvm_sregs s;
    if (ioctl(v->vcpu, KVM_GET_SREGS, &s) != 0) {
        rc = -errno;
        snprintf(why, len, "KVM_GET_SREGS: %s", strerror(-rc));
        return rc;
    }
    struct kvm_segment code = {.base = 0, .limit = 0xffffffff, .selector = 8, .type = 11, .present = 1,
                               .dpl = 0, .db = 0, .s = 1, .l = 1, .g = 1};
    struct kvm_segment data = {.base = 0, .limit = 0xffffffff, .selector = 16, .type = 3, .present = 1,
                               .dpl = 0, .db = 1, .s = 1, .l = 0, .g = 1};
    if (v->ring == 3) {
        code.dpl = data.dpl = 3;
        code.selector = 0x2b;
        data.selector = 0x23;
    }
    s.cs = code;
    s.ds = s.es = s.fs = s.gs = s.ss = data;
    s.cr3 = 0;                                   /* the PML4: the pool's first page */
    s.cr4 = 0x20 | 0x200 | 0x400;                /* PAE, OSFXSR, OSXMMEXCPT: SSE for compiled code */
    s.cr0 = 0x80000000u | 0x10000 | 0x20 | 0x10 | 0x2 | 0x1; /* PG, WP, NE, ET, MP, PE */
    s.efer = 0x100 | 0x400;                      /* LME, LMA */
    if (ioctl(v->vcpu, KVM_SET_SREGS, &s) != 0) {
        rc = -errno;
        snprintf(why, len, "KVM_SET_SREGS (64-bit long mode): %s", strerror(-rc));
        return rc;
    }
    struct kvm_regs r;
    memset(&r, 0, sizeof r);
    r.rflags = 0x2 | (v->ring == 3 ? 0x3000 : 0); /* IOPL 3: ring 3's OUT reaches the port */
    r.rip = rip;
    r.rsp = stack_top;
    r.r12 = (uint64_t)(uintptr_t)ctrl;
    r.r13 = stack_top;
    if (ioctl(v->vcpu, KVM_SET_REGS, &r) != 0) {
        rc = -errno;
        snprintf(why, len, "KVM_SET_REGS: %s", strerror(-rc));
        return rc;
    }
    return 0;
}

int isob_kvm_enter(struct isob_kvm_vm *v)
{
    int r;
    do
        r = ioctl(v->vcpu, KVM_RUN, 0);
    while (r != 0 && errno == EINTR);
    if (r != 0)
        return -errno;
    const struct kvm_run *k = v->run;
    if (k->exit_reason == KVM_EXIT_IO)
        return k->io.port == ISOB_KVM_PORT ? 0 : -EFAULT;
    return k->exit_reason == KVM_EXIT_MMIO && k->mmio.is_write &&
                   (k->mmio.phys_addr & ~(PAGE - 1)) == ISOB_KVM_DOORBELL_GPA ? 0 : -EFAULT;
}

int isob_kvm_enter_none(struct isob_kvm_vm *v)
{
    v->run->immediate_exit = 1;
    int r = ioctl(v->vcpu, KVM_RUN, 0);
    int err = errno;
    v->run->immediate_exit = 0;
    return r == -1 && err == EINTR ? 0 : -EPROTO;
}

int isob_kvm_internal_error(const struct isob_kvm_vm *v)
{
    return v->run && v->run->exit_reason == KVM_EXIT_INTERNAL_ERROR;
}

void isob_kvm_exit_why(struct isob_kvm_vm *v, char *why, size_t len)
{
    struct kvm_regs r;
    unsigned long long rip = 0;
    if (ioctl(v->vcpu, KVM_GET_REGS, &r) == 0)
        rip = r.rip;
    const struct kvm_run *k = v->run;
    switch (k->exit_reason) {
    case KVM_EXIT_SHUTDOWN:
        snprintf(why, len, "the guest shut down (KVM_EXIT_SHUTDOWN: a triple fault) at rip %#llx", rip);
        return;
    case KVM_EXIT_IO:
        snprintf(why, len, "the guest did I/O to port %#x (KVM_EXIT_IO) at rip %#llx", k->io.port, rip);
        return;
    case KVM_EXIT_MMIO:
        snprintf(why, len, "the guest %s guest-physical %#llx (KVM_EXIT_MMIO: no writable slot there) at rip %#llx",
                 k->mmio.is_write ? "wrote" : "read", (unsigned long long)k->mmio.phys_addr, rip);
        return;
    case KVM_EXIT_HLT:
        snprintf(why, len, "the guest halted (KVM_EXIT_HLT) at rip %#llx", rip);
        return;
    case KVM_EXIT_INTERNAL_ERROR:
        snprintf(why, len, "KVM_EXIT_INTERNAL_ERROR suberror %u at rip %#llx", k->internal.suberror, rip);
        return;
    case KVM_EXIT_FAIL_ENTRY:
        snprintf(why, len, "KVM_EXIT_FAIL_ENTRY, hardware reason %#llx",
                 (unsigned long long)k->fail_entry.hardware_entry_failure_reason);
        return;
    default:
        snprintf(why, len, "unexpected exit %u at rip %#llx", k->exit_reason, rip);
        return;
    }
}

int isob_kvm_nested(char *vendor, size_t len)
{
    unsigned a, b, c, d;
    if (len)
        vendor[0] = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 31)))
        return 0;
    __cpuid(0x40000000, a, b, c, d);
    char s[13];
    memcpy(s, &b, 4);
    memcpy(s + 4, &c, 4);
    memcpy(s + 8, &d, 4);
    s[12] = 0;
    for (int i = 0; i < 12; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            s[i] = s[i] ? '?' : 0;
    snprintf(vendor, len, "%s", s);
    return 1;
}

const char *isob_kvm_nested_param(void)
{
    static char v[8];
    static const char *const files[] = {"/sys/module/kvm_intel/parameters/nested",
                                        "/sys/module/kvm_amd/parameters/nested"};
    for (size_t i = 0; i < 2; i++) {
        FILE *f = fopen(files[i], "re");
        if (!f)
            continue;
        int ok = fgets(v, sizeof v, f) != NULL;
        fclose(f);
        if (ok) {
            v[strcspn(v, "\n")] = 0;
            return v;
        }
    }
    return "unknown";
}

#else /* not x86-64 */

int isob_kvm_probe(char *why, size_t len)
{
    snprintf(why, len, "the KVM guests are x86-64 code; this build is not for x86-64");
    return -ENOTSUP;
}

int isob_kvm_open(struct isob_kvm_vm *v, char *why, size_t len)
{
    memset(v, 0, sizeof *v);
    v->sys = v->vm = v->vcpu = -1;
    return isob_kvm_probe(why, len);
}

int isob_kvm_map(struct isob_kvm_vm *v, const void *p, size_t n, int writable, char *why, size_t len)
{
    (void)v, (void)p, (void)n, (void)writable;
    return isob_kvm_probe(why, len);
}

int isob_kvm_map_self(struct isob_kvm_vm *v, char *why, size_t len)
{
    (void)v;
    return isob_kvm_probe(why, len);
}

int isob_kvm_map_doorbell(struct isob_kvm_vm *v, const void *p, char *why, size_t len)
{
    (void)v, (void)p;
    return isob_kvm_probe(why, len);
}

int isob_kvm_map_guest_code(struct isob_kvm_vm *v, enum isob_kvm_guest g, uint64_t *entry, char *why,
                            size_t len)
{
    (void)v, (void)g, (void)entry;
    return isob_kvm_probe(why, len);
}

uint64_t isob_kvm_guest_entry(enum isob_kvm_guest g)
{
    (void)g;
    return 0;
}

int isob_kvm_start(struct isob_kvm_vm *v, uint64_t rip, uint64_t stack_top, struct isob_kvm_ctrl *ctrl,
                   char *why, size_t len)
{
    (void)v, (void)rip, (void)stack_top, (void)ctrl;
    return isob_kvm_probe(why, len);
}

void isob_kvm_close(struct isob_kvm_vm *v)
{
    memset(v, 0, sizeof *v);
    v->sys = v->vm = v->vcpu = -1;
}

int isob_kvm_enter(struct isob_kvm_vm *v)
{
    (void)v;
    return -ENOTSUP;
}

int isob_kvm_enter_none(struct isob_kvm_vm *v)
{
    (void)v;
    return -ENOTSUP;
}

void isob_kvm_exit_why(struct isob_kvm_vm *v, char *why, size_t len)
{
    (void)v;
    snprintf(why, len, "not x86-64");
}

int isob_kvm_internal_error(const struct isob_kvm_vm *v)
{
    (void)v;
    return 0;
}

int isob_kvm_nested(char *vendor, size_t len)
{
    if (len)
        vendor[0] = 0;
    return 0;
}

const char *isob_kvm_nested_param(void)
{
    return "unknown";
}

#endif
