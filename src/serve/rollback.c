/* A process's memory rolled back to a snapshot: what a --session rollback
 * worker (prefork.c) does after each session, as lwC's Apache workers roll
 * back to the snapshot they took of themselves after start-up (Litton et
 * al., OSDI 2016, section 5, the Apache case).
 *
 * The snapshot is copy-on-write: at snapshot time the worker clones itself
 * (a raw clone, so that no fork handler of libc writes to either copy) and
 * the clone, the holder, sleeps from then on, holding the memory as it was.
 * It costs nothing until the worker writes, and then the page the worker
 * wrote: the kernel's copy-on-write, as lwC's snapshot.  The worker then
 * tracks which pages it writes:
 *
 *   uffd       userfaultfd write-protect in asynchronous mode
 *              (UFFD_FEATURE_WP_ASYNC, Linux 6.7): every private writable
 *              mapping is registered and write-protected; a write clears the
 *              protection of its page in the kernel, with no message and no
 *              handler thread, and PAGEMAP_SCAN lists the pages written.
 *   softdirty  the soft-dirty bits (CONFIG_MEM_SOFT_DIRTY): cleared by
 *              writing 4 to /proc/self/clear_refs, read back as bit 55 of
 *              /proc/self/pagemap.
 *
 * A rollback, on a stack of its own outside the snapshot: the descriptors
 * the session opened are closed; where /proc/self/statm's sizes or the
 * program break changed, /proc/self/maps is read and the mappings the
 * session made (malloc's large chunks, the heap's growth, the stack's) are
 * unmapped (a session that unmapped a mapping of the snapshot and mapped
 * another of the very same size would go unseen); every page written
 * since the snapshot is copied back from the holder with
 * process_vm_readv(2) and protected again; and the worker jumps back to the
 * point where it took the snapshot, with every byte of its private memory
 * (the store, malloc's state, libc's and the server's static state, the
 * stack) as it was then.  A change a rollback cannot undo (a mapping of the
 * snapshot unmapped or re-protected) ends the worker, which its master
 * replaces with a fresh one.
 *
 * Beyond memory and descriptors a session could change what the kernel
 * keeps per process (signal dispositions, rlimits, the working directory):
 * the server's session code changes none of them, and a rollback does not
 * restore them. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <dirent.h>
#include <linux/userfaultfd.h>
#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#endif

#include "isobench/harness.h"
#include "server_impl.h"

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif

/* PAGEMAP_SCAN (linux/fs.h since 6.7; the headers here may be older). */
struct rb_page_region {
    uint64_t start, end, categories;
};
struct rb_pm_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define RB_PAGEMAP_SCAN _IOWR('f', 16, struct rb_pm_scan_arg)
#define RB_PAGE_IS_WPALLOWED (1u << 0)
#define RB_PAGE_IS_WRITTEN (1u << 1)
#define RB_PAGE_IS_PRESENT (1u << 3)
#define RB_PAGE_IS_SWAPPED (1u << 4)
#define RB_PM_SCAN_WP_MATCHING (1u << 0)
#define RB_PM_SCAN_CHECK_WPASYNC (1u << 1)

#define RB_PAGE 4096u
#define RB_SOFT_DIRTY (1ull << 55)
/* Private writable mappings tracked at most. */
#define RB_MAX_REGIONS 1024
/* Ranges of written pages taken per PAGEMAP_SCAN call. */
#define RB_VEC 512
/* Iovecs per process_vm_readv call (IOV_MAX). */
#define RB_IOV 1024
/* /proc/self/maps, read whole. */
#define RB_MAPS_BYTES (128u << 10)
/* The rollback's own stack. */
#define RB_ALT_STACK (256u << 10)
/* The stack grown (touched) before the snapshot, so that a session's calls
 * stay within the stack mapping the snapshot has. */
#define RB_STACK_GROW (512u << 10)
/* The heap grown before the snapshot (malloc keeps it), and requests up to
 * RB_MMAP_THRESHOLD served from it rather than from mappings of their own. */
#define RB_HEAP_GROW (4u << 20)
#define RB_MMAP_THRESHOLD (4u << 20)
/* Pagemap entries read per pread (softdirty). */
#define RB_PM_ENTRIES 4096
/* Bytes compared per step (--rollback-verify). */
#define RB_CMP_BYTES (64u << 10)

struct rb_range {
    uintptr_t start, end;
    int prot;                     /* tracked: its protection at the snapshot */
};

/* The worker's side of the snapshot, in a mapping of its own that the
 * snapshot does not cover (its counters must outlive a rollback). */
struct rb_snap {
    void *jb[5];                  /* __builtin_setjmp's buffer */
    enum rb_method method;
    int softdirty;                /* tracked by soft-dirty bits, else by uffd */
    size_t closed_max;            /* the largest non-writable anonymous mapping tracked */
    int verify;
    struct isob_serve_rollback *totals;
    pid_t holder;
    int uffd, pagemap, maps, clear_refs, statm;
    int holder_pagemap;           /* --rollback-verify: the holder's pagemap */
    uintptr_t lo, hi;             /* from the lowest tracked page to the highest */
    unsigned long vm_size, vm_data; /* /proc/self/statm at the snapshot */
    int max_fd;                   /* descriptors above it are the session's */
    uintptr_t live_sp;            /* the stack below it was dead at the snapshot */
    uintptr_t rseq_start, rseq_end; /* the kernel's to write (restartable sequences) */
    uintptr_t brk;
    uintptr_t self_start, self_end;
    size_t nregions, nmaps;
    struct rb_range regions[RB_MAX_REGIONS];  /* tracked: private, writable */
    struct rb_range maps_at[RB_MAX_REGIONS];  /* every mapping at the snapshot */
    struct rb_range maps_cur[RB_MAX_REGIONS]; /* every mapping now (a rollback's) */
    unsigned char opened[RB_MAX_REGIONS];     /* made writable for the copy back */
    size_t maps_len;
    char maps_text[RB_MAPS_BYTES];
    char maps_now[RB_MAPS_BYTES];
    struct rb_page_region vec[RB_VEC];
    struct iovec iov[RB_IOV];
    size_t niov;
    uint64_t pages, ranges, unmapped;
    struct timespec t0;
    ucontext_t uc;
    uint64_t pm[RB_PM_ENTRIES];
    unsigned char cmp[RB_CMP_BYTES];
    unsigned char stack[RB_ALT_STACK] __attribute__((aligned(16)));
};

/* The snapshot of this process (one per worker): set before the snapshot
 * and never changed after, so a rollback leaves it as it is. */
static struct rb_snap *rb_cur;

const char *rb_method_name(enum rb_method m)
{
    switch (m) {
    case RB_UFFD: return "uffd";
    case RB_SOFTDIRTY: return "softdirty";
    case RB_FORK: return "fork";
    case RB_TEST_SKIP_RESTORE: return "test-skip-restore";
    case RB_NONE: return "none";
    }
    return "?";
}

int rb_method_parse(const char *s, enum rb_method *m)
{
    for (int i = RB_UFFD; i <= RB_TEST_SKIP_RESTORE; i++)
        if (strcmp(s, rb_method_name((enum rb_method)i)) == 0) {
            if (i == RB_TEST_SKIP_RESTORE) {
                /* A deliberately broken rollback, for the tests only. */
                const char *e = getenv("ISOBENCH_TEST_MECHANISMS");
                if (!e || strcmp(e, "1") != 0)
                    return -1;
            }
            *m = (enum rb_method)i;
            return 0;
        }
    return -1;
}

/* --- the kernel's page tracking ------------------------------------------------ */

static int uffd_open(void)
{
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (fd < 0 && errno == EINVAL)
        fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    /* Not UFFD_FEATURE_WP_UNPOPULATED: a page first mapped after the
     * protection has no protection bit and so counts as written anyway, and
     * marking every unpopulated page would fill the page tables of a
     * reservation of gigabytes (wasm's). */
    struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_WP_ASYNC};
    if (ioctl(fd, UFFDIO_API, &api) != 0) {
        int err = -errno;
        close(fd);
        return err == -EINVAL ? -EOPNOTSUPP : err;
    }
    return fd;
}

static int uffd_protect(int uffd, uintptr_t a, uintptr_t b)
{
    struct uffdio_writeprotect wp = {.range = {a, b - a}, .mode = UFFDIO_WRITEPROTECT_MODE_WP};
    return ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) == 0 ? 0 : -errno;
}

/* Ranges of pages written in [a, b) since they were protected, into vec,
 * in the mappings registered for write-protect only (others are skipped);
 * how many (walk_end: where the walk stopped), or -errno.  protect: write-
 * protect them again instead (vec may then be NULL, n 0). */
static long uffd_scan(int pagemap, uintptr_t a, uintptr_t b, struct rb_page_region *vec, size_t n,
                      uintptr_t *walk_end, int protect)
{
    struct rb_pm_scan_arg arg = {
        .size = sizeof arg, .flags = protect ? RB_PM_SCAN_WP_MATCHING : 0, .start = a, .end = b,
        .vec = (uintptr_t)vec, .vec_len = n,
        .category_mask = RB_PAGE_IS_WRITTEN | RB_PAGE_IS_WPALLOWED,
        .return_mask = RB_PAGE_IS_WRITTEN};
    long r = ioctl(pagemap, RB_PAGEMAP_SCAN, &arg);
    if (r < 0)
        return -errno;
    *walk_end = arg.walk_end;
    return r;
}

static int write_clear_refs(int fd)
{
    return pwrite(fd, "4", 1, 0) == 1 ? 0 : -errno;
}

/* A build with AddressSanitizer: uffd and soft-dirty would track its shadow
 * memory page by page (the fork method copies it lazily, and runs). */
#if defined(__SANITIZE_ADDRESS__)
#define RB_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RB_SANITIZED 1
#endif
#endif

int rb_probe(enum rb_method m, char *why, size_t len)
{
    if (m == RB_FORK || m == RB_NONE)
        return 0;
    if (m == RB_TEST_SKIP_RESTORE)
        return rb_probe(RB_UFFD, why, len) == 0 ? 0 : rb_probe(RB_SOFTDIRTY, why, len);
#ifdef RB_SANITIZED
    snprintf(why, len, "this build runs under AddressSanitizer, whose shadow memory (terabytes of "
             "readable anonymous memory) a page-tracking rollback would have to track");
    return -EOPNOTSUPP;
#endif
    long page = sysconf(_SC_PAGESIZE);
    if (page != RB_PAGE) {
        snprintf(why, len, "pages here are %ld bytes, not %u", page, RB_PAGE);
        return -EOPNOTSUPP;
    }
    unsigned char *p = mmap(NULL, 4 * RB_PAGE, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
        snprintf(why, len, "mmap: %s", strerror(errno));
        return -errno;
    }
    memset(p, 1, 4 * RB_PAGE);
    int rc = 0;
    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pm < 0) {
        rc = -errno;
        snprintf(why, len, "/proc/self/pagemap: %s", strerror(errno));
    } else if (m == RB_SOFTDIRTY) {
        int cr = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
        uint64_t e[4] = {0};
        if (cr < 0 || write_clear_refs(cr) != 0) {
            rc = -errno;
            snprintf(why, len, "/proc/self/clear_refs: %s", strerror(errno));
        } else {
            p[2 * RB_PAGE] = 2;
            if (pread(pm, e, sizeof e, (off_t)((uintptr_t)p / RB_PAGE * 8)) != (ssize_t)sizeof e ||
                !(e[2] & RB_SOFT_DIRTY) || (e[1] & RB_SOFT_DIRTY)) {
                rc = -EOPNOTSUPP;
                snprintf(why, len, "this kernel keeps no soft-dirty bits (pagemap bit 55 stays "
                         "clear after a write: CONFIG_MEM_SOFT_DIRTY is off)");
            }
        }
        if (cr >= 0)
            close(cr);
    } else {
        int fd = uffd_open();
        if (fd < 0) {
            rc = fd;
            if (fd == -EOPNOTSUPP)
                snprintf(why, len, "this kernel's userfaultfd has no asynchronous write-protect "
                         "(UFFD_FEATURE_WP_ASYNC, Linux 6.7)");
            else
                snprintf(why, len, "userfaultfd: %s%s", strerror(-fd),
                         fd == -EPERM ? " (vm.unprivileged_userfaultfd is 0 and this process "
                                        "lacks CAP_SYS_PTRACE)" : "");
        } else {
            struct uffdio_register r = {.range = {(uintptr_t)p, 4 * RB_PAGE},
                                        .mode = UFFDIO_REGISTER_MODE_WP};
            struct rb_page_region v[4];
            uintptr_t end = 0;
            long n = -1;
            if (ioctl(fd, UFFDIO_REGISTER, &r) != 0 ||
                uffd_protect(fd, (uintptr_t)p, (uintptr_t)p + 4 * RB_PAGE) != 0) {
                rc = -errno;
                snprintf(why, len, "userfaultfd write-protect of a private page: %s",
                         strerror(errno));
            } else {
                p[2 * RB_PAGE] = 2;
                n = uffd_scan(pm, (uintptr_t)p, (uintptr_t)p + 4 * RB_PAGE, v, 4, &end, 0);
                if (n == -ENOTTY || n == -EINVAL) {
                    rc = -EOPNOTSUPP;
                    snprintf(why, len, "this kernel has no PAGEMAP_SCAN (Linux 6.7)");
                } else if (n != 1 || v[0].start != (uintptr_t)p + 2 * RB_PAGE ||
                           v[0].end != (uintptr_t)p + 3 * RB_PAGE) {
                    rc = -EOPNOTSUPP;
                    snprintf(why, len, "PAGEMAP_SCAN did not find the one page written (%ld "
                             "ranges)", n);
                }
            }
            close(fd);
        }
    }
    if (pm >= 0)
        close(pm);
    munmap(p, 4 * RB_PAGE);
    return rc;
}

/* --- the snapshot ------------------------------------------------------------- */

static __attribute__((noinline)) void grow_stack(void)
{
    volatile char room[RB_STACK_GROW];
    for (size_t i = 0; i < sizeof room; i += RB_PAGE)
        room[i] = 0;
}

struct rb_snap *rb_prepare(enum rb_method m, struct isob_serve_rollback *totals, int verify,
                           size_t closed_max, char *why, size_t len)
{
    struct rb_snap *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (s == MAP_FAILED) {
        snprintf(why, len, "mapping the rollback's state: %s", strerror(errno));
        return NULL;
    }
    s->method = m;
    s->closed_max = closed_max;
    /* The test-only method tracks as uffd does, or as softdirty where
     * uffd cannot run. */
    char no[256];
    s->softdirty = m == RB_SOFTDIRTY ||
                   (m == RB_TEST_SKIP_RESTORE && rb_probe(RB_UFFD, no, sizeof no) != 0);
    s->verify = verify;
    s->totals = totals;
    s->uffd = s->pagemap = s->maps = s->clear_refs = s->holder_pagemap = -1;
    s->self_start = (uintptr_t)s;
    s->self_end = ((uintptr_t)s + sizeof *s + RB_PAGE - 1) & ~(uintptr_t)(RB_PAGE - 1);
    rb_cur = s;
    /* Room for a session's stack and malloc's requests inside the mappings
     * the snapshot covers: no mapping made per session, in the usual case. */
    grow_stack();
    mallopt(M_MMAP_THRESHOLD, RB_MMAP_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, 2 * RB_HEAP_GROW);
    mallopt(M_TOP_PAD, RB_HEAP_GROW);
    free(malloc(RB_PAGE));
    return s;
}

void **rb_jmpbuf(struct rb_snap *s)
{
    return s->jb;
}

/* /proc/self/maps into buf; its length, or -errno. */
static long read_maps(int fd, char *buf, size_t cap)
{
    if (lseek(fd, 0, SEEK_SET) != 0)
        return -errno;
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        n += (size_t)r;
        if (n == cap)
            return -E2BIG;
    }
    return (long)n;
}

/* The mappings in text: every one into all (if not NULL), the private
 * writable ones but s's own into tracked.  0 or -E2BIG. */
static int parse_maps(const struct rb_snap *s, const char *text, size_t len,
                      struct rb_range *all, size_t *nall, struct rb_range *tracked,
                      size_t *ntracked)
{
    size_t na = 0, nt = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            nl = end;
        char *q;
        uintptr_t a = (uintptr_t)strtoull(p, &q, 16);
        uintptr_t b = (uintptr_t)strtoull(q + 1, &q, 16);
        const char *perm = q + 1;
        /* offset, device, inode, then the name if any. */
        unsigned long long inode = 0;
        int name_at = 0;
        sscanf(perm + 5, "%*s %*s %llu %n", &inode, &name_at);
        const char *name = name_at ? perm + 5 + name_at : nl;
        if (all) {
            if (na == RB_MAX_REGIONS)
                return -E2BIG;
            all[na++] = (struct rb_range){a, b, 0};
        }
        /* Private mappings that are writable, or anonymous whatever their
         * protection now (a store kept PROT_NONE between calls, as the
         * mprotect mechanism's, is written while a call has it open), up
         * to closed_max: larger ones are reservations no call writes (wasm's
         * gigabytes of guard), which the scans would walk each time; not
         * the kernel's ([vvar], [vdso], [vsyscall]) nor s itself. */
        int anon = inode == 0 && strncmp(name, "[v", 2) != 0 && b - a <= s->closed_max;
        if (tracked && perm[3] == 'p' && (perm[1] == 'w' || anon) &&
            !(a >= s->self_start && b <= s->self_end)) {
            if (nt == RB_MAX_REGIONS)
                return -E2BIG;
            int prot = (perm[0] == 'r' ? PROT_READ : 0) | (perm[1] == 'w' ? PROT_WRITE : 0) |
                       (perm[2] == 'x' ? PROT_EXEC : 0);
            tracked[nt++] = (struct rb_range){a, b, prot};
        }
        p = nl + 1;
    }
    if (nall)
        *nall = na;
    if (ntracked)
        *ntracked = nt;
    return 0;
}

/* The process's mapped pages and its private writable ones (stack
 * included), from /proc/self/statm.  0 or -errno. */
static int read_statm(int fd, unsigned long *size, unsigned long *data)
{
    char b[160];
    ssize_t n = pread(fd, b, sizeof b - 1, 0);
    if (n <= 0)
        return n < 0 ? -errno : -EIO;
    b[n] = 0;
    return sscanf(b, "%lu %*u %*u %*u %*u %lu", size, data) == 2 ? 0 : -EIO;
}

static int highest_fd(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -errno;
    int fd = dirfd(d), max = -1;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && atoi(e->d_name) != fd && atoi(e->d_name) > max)
            max = atoi(e->d_name);
    closedir(d);
    return max;
}

/* The holder: the snapshot, copy-on-write.  Only raw system calls, on a
 * stack the snapshot counts as dead, so that its memory stays as the
 * worker's was. */
static __attribute__((noreturn, noinline)) void holder_main(const struct rb_snap *s, pid_t parent)
{
    syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (syscall(SYS_getppid) != parent)
        syscall(SYS_exit_group, 0);
    /* Every tracked page readable by the worker's process_vm_readv (the
     * protection of the holder's mappings, not their contents); then every
     * descriptor closed, which the worker waits for (the end of a pipe). */
    for (size_t i = 0; i < s->nregions; i++)
        if (!(s->regions[i].prot & PROT_READ))
            syscall(SYS_mprotect, s->regions[i].start, s->regions[i].end - s->regions[i].start,
                    PROT_READ);
    syscall(SYS_close_range, 0, ~0u, 0);
    for (;;)
#ifdef SYS_pause
        syscall(SYS_pause);
#else
        /* aarch64 has no pause(2): ppoll on no descriptors, no time-out. */
        syscall(SYS_ppoll, NULL, 0, NULL, NULL, 0);
#endif
}

int rb_take(struct rb_snap *s, char *why, size_t len)
{
    s->live_sp = (uintptr_t)__builtin_frame_address(0);
#if __has_include(<sys/rseq.h>)
    if (__rseq_size > 0) {
        s->rseq_start = (uintptr_t)__builtin_thread_pointer() + (uintptr_t)__rseq_offset;
        s->rseq_end = s->rseq_start + (__rseq_size < 32 ? 32 : __rseq_size);
    }
#endif
    s->pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    s->maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    s->statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (s->pagemap < 0 || s->maps < 0 || s->statm < 0) {
        snprintf(why, len, "opening /proc/self/pagemap, maps and statm: %s", strerror(errno));
        return -errno;
    }
    if (s->softdirty) {
        s->clear_refs = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
        if (s->clear_refs < 0) {
            snprintf(why, len, "/proc/self/clear_refs: %s", strerror(errno));
            return -errno;
        }
    } else {
        s->uffd = uffd_open();
        if (s->uffd < 0) {
            snprintf(why, len, "userfaultfd: %s", isob_strerror(s->uffd));
            return s->uffd;
        }
    }
    s->max_fd = highest_fd();
    long n = read_maps(s->maps, s->maps_text, sizeof s->maps_text);
    int rc = n < 0 ? (int)n : parse_maps(s, s->maps_text, (size_t)n, NULL, NULL, s->regions,
                                         &s->nregions);
    if (rc) {
        snprintf(why, len, "reading /proc/self/maps: %s", isob_strerror(rc));
        return rc;
    }
    if (!s->softdirty) {
        for (size_t i = 0; i < s->nregions; i++) {
            struct uffdio_register r = {
                .range = {s->regions[i].start, s->regions[i].end - s->regions[i].start},
                .mode = UFFDIO_REGISTER_MODE_WP};
            if (ioctl(s->uffd, UFFDIO_REGISTER, &r) != 0 ||
                uffd_protect(s->uffd, s->regions[i].start, s->regions[i].end) != 0) {
                rc = -errno;
                snprintf(why, len, "userfaultfd write-protect of %#lx-%#lx: %s",
                         (unsigned long)s->regions[i].start, (unsigned long)s->regions[i].end,
                         strerror(errno));
                return rc;
            }
        }
    } else if ((rc = write_clear_refs(s->clear_refs)) != 0) {
        snprintf(why, len, "clearing the soft-dirty bits: %s", isob_strerror(rc));
        return rc;
    }
    /* The map as it is from now on (registering may split mappings). */
    n = read_maps(s->maps, s->maps_text, sizeof s->maps_text);
    rc = n < 0 ? (int)n : parse_maps(s, s->maps_text, (size_t)n, s->maps_at, &s->nmaps, NULL, NULL);
    if (rc) {
        snprintf(why, len, "reading /proc/self/maps: %s", isob_strerror(rc));
        return rc;
    }
    s->maps_len = (size_t)n;
    s->lo = UINTPTR_MAX;
    for (size_t i = 0; i < s->nregions; i++) {
        if (s->regions[i].start < s->lo)
            s->lo = s->regions[i].start;
        if (s->regions[i].end > s->hi)
            s->hi = s->regions[i].end;
    }
    if ((rc = read_statm(s->statm, &s->vm_size, &s->vm_data)) != 0) {
        snprintf(why, len, "reading /proc/self/statm: %s", isob_strerror(rc));
        return rc;
    }
    s->brk = (uintptr_t)syscall(SYS_brk, 0);
    /* The snapshot: everything written from here on is tracked, and the
     * holder keeps what it was. */
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) {
        snprintf(why, len, "pipe: %s", strerror(errno));
        return -errno;
    }
    pid_t self = getpid();
    long pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid == 0)
        holder_main(s, self);
    int err = errno;
    close(ready[1]);
    if (pid < 0) {
        close(ready[0]);
        snprintf(why, len, "cloning the snapshot's holder: %s", strerror(err));
        return -err;
    }
    s->holder = (pid_t)pid;
    /* The holder has set up (the pipe's end: it closed its copy). */
    char c;
    while (read(ready[0], &c, 1) < 0 && errno == EINTR)
        ;
    close(ready[0]);
    if (s->verify) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/pagemap", (int)pid);
        s->holder_pagemap = open(path, O_RDONLY | O_CLOEXEC);
        if (s->holder_pagemap < 0) {
            snprintf(why, len, "%s: %s", path, strerror(errno));
            return -errno;
        }
        /* Kept by the rollbacks, which close what is above max_fd. */
        if (s->holder_pagemap > s->max_fd)
            s->max_fd = s->holder_pagemap;
    }
    return 0;
}

void rb_end(struct rb_snap *s)
{
    kill(s->holder, SIGKILL);
    while (waitpid(s->holder, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* --- the rollback ------------------------------------------------------------- */

static __attribute__((noreturn)) void rb_fail(struct rb_snap *s, const char *what, int err)
{
    char line[256];
    int n = snprintf(line, sizeof line, "isob serve: a worker could not roll back (%s: %s); it "
                     "is replaced by a fresh one\n", what, strerror(err < 0 ? -err : err));
    ssize_t w = write(STDERR_FILENO, line, n > 0 ? (size_t)n : 0);
    (void)w;
    kill(s->holder, SIGKILL);
    _exit(3);
}

/* Undo the session's changes to the memory map: mappings beyond the
 * snapshot's are unmapped (the heap's growth is given back with brk).  A
 * mapping of the snapshot gone or changed cannot be undone. */
static void fix_layout(struct rb_snap *s, size_t len)
{
    struct rb_range *now = s->maps_cur;
    size_t nn;
    if (parse_maps(s, s->maps_now, len, now, &nn, NULL, NULL) != 0)
        rb_fail(s, "reading /proc/self/maps", E2BIG);
    for (size_t i = 0; i < nn; i++) {
        uintptr_t a = now[i].start, b = now[i].end;
        /* The parts of [a, b) outside every mapping of the snapshot. */
        while (a < b) {
            uintptr_t next = b, cut = b;
            int inside = 0;
            for (size_t j = 0; j < s->nmaps; j++) {
                if (s->maps_at[j].start <= a && a < s->maps_at[j].end) {
                    inside = 1;
                    next = s->maps_at[j].end < b ? s->maps_at[j].end : b;
                    break;
                }
                if (s->maps_at[j].start > a && s->maps_at[j].start < cut)
                    cut = s->maps_at[j].start;
            }
            if (!inside) {
                next = cut;
                if (a >= s->brk && a < (uintptr_t)syscall(SYS_brk, 0) + 1 &&
                    syscall(SYS_brk, s->brk) == (long)s->brk) {
                    /* The heap's growth. */
                } else if (syscall(SYS_munmap, a, next - a) != 0) {
                    rb_fail(s, "unmapping what the session mapped", errno);
                }
                s->unmapped++;
            }
            a = next;
        }
    }
    long n = read_maps(s->maps, s->maps_now, sizeof s->maps_now);
    if (n < 0)
        rb_fail(s, "reading /proc/self/maps", (int)-n);
    if ((size_t)n != s->maps_len || memcmp(s->maps_now, s->maps_text, (size_t)n) != 0)
        rb_fail(s, "the session changed a mapping of the snapshot", EFAULT);
}

static void flush_iov(struct rb_snap *s)
{
    if (!s->niov)
        return;
    size_t want = 0;
    for (size_t i = 0; i < s->niov; i++)
        want += s->iov[i].iov_len;
    ssize_t got = syscall(SYS_process_vm_readv, s->holder, s->iov, s->niov, s->iov, s->niov, 0);
    if (got != (ssize_t)want)
        rb_fail(s, "copying pages back from the snapshot", got < 0 ? errno : EIO);
    s->niov = 0;
}

/* Make the tracked region holding a writable for the copy back, if the
 * snapshot had it read-only or inaccessible; close_regions undoes it. */
static void open_region_of(struct rb_snap *s, uintptr_t a)
{
    for (size_t i = 0; i < s->nregions; i++)
        if (s->regions[i].start <= a && a < s->regions[i].end) {
            if ((s->regions[i].prot & PROT_WRITE) || s->opened[i])
                return;
            if (syscall(SYS_mprotect, s->regions[i].start,
                        s->regions[i].end - s->regions[i].start, PROT_READ | PROT_WRITE) != 0)
                rb_fail(s, "opening a protected mapping for the copy back", errno);
            s->opened[i] = 1;
            return;
        }
}

static void close_regions(struct rb_snap *s)
{
    for (size_t i = 0; i < s->nregions; i++)
        if (s->opened[i]) {
            if (syscall(SYS_mprotect, s->regions[i].start,
                        s->regions[i].end - s->regions[i].start, s->regions[i].prot) != 0)
                rb_fail(s, "protecting a mapping again", errno);
            s->opened[i] = 0;
        }
}

/* Pages [a, b) were written in the session: copy them back. */
static void restore_range(struct rb_snap *s, uintptr_t a, uintptr_t b)
{
    s->pages += (b - a) / RB_PAGE;
    s->ranges++;
    if (s->method == RB_TEST_SKIP_RESTORE)
        return;
    open_region_of(s, a);
    if (s->niov == RB_IOV)
        flush_iov(s);
    s->iov[s->niov++] = (struct iovec){(void *)a, b - a};
}

static void restore_uffd(struct rb_snap *s)
{
    /* A batch of written ranges at a time: copied back, then protected
     * again (protecting first would count the copy as the next session's
     * write).  Range by range, not by PAGEMAP_SCAN's PM_SCAN_WP_MATCHING,
     * which would also mark every hole of the mappings scanned (all of a
     * reservation of gigabytes). */
    uintptr_t a = s->lo;
    while (a < s->hi) {
        uintptr_t walk_end = s->hi;
        long n = uffd_scan(s->pagemap, a, s->hi, s->vec, RB_VEC, &walk_end, 0);
        if (n < 0)
            rb_fail(s, "PAGEMAP_SCAN", (int)-n);
        for (long k = 0; k < n; k++)
            restore_range(s, s->vec[k].start, s->vec[k].end);
        flush_iov(s);
        for (long k = 0; k < n; k++) {
            int rc = uffd_protect(s->uffd, s->vec[k].start, s->vec[k].end);
            if (rc)
                rb_fail(s, "write-protecting the pages again", -rc);
        }
        a = walk_end > a ? walk_end : s->hi;
    }
    close_regions(s);
}

static void restore_softdirty(struct rb_snap *s)
{
    for (size_t i = 0; i < s->nregions; i++) {
        uintptr_t a = s->regions[i].start, b = s->regions[i].end;
        uintptr_t run = 0;
        while (a < b) {
            size_t n = (b - a) / RB_PAGE;
            if (n > RB_PM_ENTRIES)
                n = RB_PM_ENTRIES;
            ssize_t got = pread(s->pagemap, s->pm, n * 8, (off_t)(a / RB_PAGE * 8));
            if (got != (ssize_t)(n * 8))
                rb_fail(s, "reading /proc/self/pagemap", got < 0 ? errno : EIO);
            for (size_t k = 0; k < n; k++) {
                uintptr_t pg = a + k * RB_PAGE;
                if (s->pm[k] & RB_SOFT_DIRTY) {
                    if (!run)
                        run = pg;
                } else if (run) {
                    restore_range(s, run, pg);
                    run = 0;
                }
            }
            a += n * RB_PAGE;
        }
        if (run)
            restore_range(s, run, b);
    }
    flush_iov(s);
    close_regions(s);
    int rc = write_clear_refs(s->clear_refs);
    if (rc)
        rb_fail(s, "clearing the soft-dirty bits", -rc);
}

/* Whether the page at a differs from the snapshot's copy of it in snap,
 * from byte `from` on and but for the rseq area. */
static int page_differs(const struct rb_snap *s, const unsigned char *snap, uintptr_t a,
                        size_t from)
{
    const unsigned char *live = (const unsigned char *)a;
    if (s->rseq_end <= a || s->rseq_start >= a + RB_PAGE)
        return memcmp(snap + from, live + from, RB_PAGE - from) != 0;
    size_t r0 = s->rseq_start > a ? s->rseq_start - a : 0;
    size_t r1 = s->rseq_end < a + RB_PAGE ? s->rseq_end - a : RB_PAGE;
    if (from < r0 && memcmp(snap + from, live + from, r0 - from) != 0)
        return 1;
    size_t b = from > r1 ? from : r1;
    return b < RB_PAGE && memcmp(snap + b, live + b, RB_PAGE - b) != 0;
}

/* --rollback-verify: pages of tracked memory that differ from the
 * snapshot's (the stack below the snapshot's frame, dead then, left out;
 * and the thread's rseq area, whose CPU number the kernel rewrites whenever
 * the thread comes back to user space after a switch). */
/* The first page in [a, b) that the process of pagemap fd holds (present
 * or swapped out), or b; where PAGEMAP_SCAN fails, a (compare it all). */
static uintptr_t first_held(int fd, uintptr_t a, uintptr_t b)
{
    struct rb_page_region v;
    struct rb_pm_scan_arg arg = {
        .size = sizeof arg, .start = a, .end = b, .vec = (uintptr_t)&v, .vec_len = 1,
        .category_anyof_mask = RB_PAGE_IS_PRESENT | RB_PAGE_IS_SWAPPED,
        .return_mask = RB_PAGE_IS_PRESENT | RB_PAGE_IS_SWAPPED};
    /* errno is memory the comparison covers (thread-local, in the heap of a
     * static program): a failing call must leave it as it was. */
    int saved = errno;
    long n = ioctl(fd, RB_PAGEMAP_SCAN, &arg);
    errno = saved;
    return n < 0 ? a : n == 0 ? b : (uintptr_t)v.start;
}

static uint64_t mismatched_pages(struct rb_snap *s)
{
    uint64_t bad = 0;
    for (size_t i = 0; i < s->nregions; i++) {
        uintptr_t a = s->regions[i].start, b = s->regions[i].end;
        int closed = !(s->regions[i].prot & PROT_READ);
        if (closed && syscall(SYS_mprotect, a, b - a, PROT_READ) != 0)
            rb_fail(s, "opening a protected mapping to compare", errno);
        if (a <= s->live_sp && s->live_sp < b)
            a = s->live_sp & ~(uintptr_t)(RB_PAGE - 1);
        for (; a < b; a += RB_CMP_BYTES) {
            /* Pages neither process holds read as zero in both: from the
             * next page one of them holds (a reservation of gigabytes, as
             * wasm's, holds few). */
            uintptr_t w = first_held(s->pagemap, a, b), h = first_held(s->holder_pagemap, a, b);
            uintptr_t next = w < h ? w : h;
            if (next >= b)
                break;
            if (next > a)
                a = next;
            size_t n = b - a < RB_CMP_BYTES ? b - a : RB_CMP_BYTES;
            struct iovec l = {s->cmp, n}, r = {(void *)a, n};
            if (syscall(SYS_process_vm_readv, s->holder, &l, 1, &r, 1, 0) != (long)n)
                rb_fail(s, "reading the snapshot to compare", errno);
            for (size_t off = 0; off < n; off += RB_PAGE) {
                size_t from = 0;
                /* The page that holds the snapshot's frame: only above it. */
                if (a + off <= s->live_sp && s->live_sp < a + off + RB_PAGE)
                    from = s->live_sp - (a + off);
                if (page_differs(s, s->cmp + off, a + off, from))
                    bad++;
            }
        }
        if (closed && syscall(SYS_mprotect, s->regions[i].start, b - s->regions[i].start,
                              s->regions[i].prot) != 0)
            rb_fail(s, "protecting a mapping again", errno);
    }
    return bad;
}

static __attribute__((noreturn)) void restore_main(void)
{
    struct rb_snap *s = rb_cur;
    /* The memory map: the same size and private writable size and the same
     * program break as at the snapshot, or read whole and put back. */
    unsigned long size, data;
    int rc = read_statm(s->statm, &size, &data);
    if (rc)
        rb_fail(s, "reading /proc/self/statm", -rc);
    if (size != s->vm_size || data != s->vm_data || (uintptr_t)syscall(SYS_brk, 0) != s->brk) {
        long n = read_maps(s->maps, s->maps_now, sizeof s->maps_now);
        if (n < 0)
            rb_fail(s, "reading /proc/self/maps", (int)-n);
        if ((size_t)n != s->maps_len || memcmp(s->maps_now, s->maps_text, (size_t)n) != 0)
            fix_layout(s, (size_t)n);
    }
    struct timespec tm;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &tm);
    __atomic_fetch_add(&s->totals->map_ns, (uint64_t)(tm.tv_sec - s->t0.tv_sec) * 1000000000ull +
                       (uint64_t)tm.tv_nsec - (uint64_t)s->t0.tv_nsec, __ATOMIC_RELAXED);
    s->pages = s->ranges = 0;
    if (s->softdirty)
        restore_softdirty(s);
    else
        restore_uffd(s);
    struct timespec t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    uint64_t ns = (uint64_t)(t1.tv_sec - s->t0.tv_sec) * 1000000000ull +
                  (uint64_t)t1.tv_nsec - (uint64_t)s->t0.tv_nsec;
    struct isob_serve_rollback *t = s->totals;
    __atomic_fetch_add(&t->sessions, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&t->pages, s->pages, __ATOMIC_RELAXED);
    __atomic_fetch_add(&t->ranges, s->ranges, __ATOMIC_RELAXED);
    __atomic_fetch_add(&t->ns, ns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&t->unmapped, s->unmapped, __ATOMIC_RELAXED);
    s->unmapped = 0;
    if (s->verify) {
        uint64_t bad = mismatched_pages(s);
        __atomic_fetch_add(&t->verified, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&t->mismatched, bad, __ATOMIC_RELAXED);
    }
    __builtin_longjmp(s->jb, 1);
}

void rb_rollback(struct rb_snap *s)
{
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &s->t0);
    /* The session's descriptors. */
    syscall(SYS_close_range, (unsigned)(s->max_fd + 1), ~0u, 0);
    /* Off the stack the rollback restores. */
    if (getcontext(&s->uc) != 0)
        rb_fail(s, "getcontext", errno);
    s->uc.uc_stack.ss_sp = s->stack;
    s->uc.uc_stack.ss_size = sizeof s->stack;
    s->uc.uc_link = NULL;
    makecontext(&s->uc, restore_main, 0);
    setcontext(&s->uc);
    rb_fail(s, "setcontext", errno);
}
