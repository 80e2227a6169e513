/* fs: LMbench's file and virtual-memory latencies (lat_fs, lat_mmap,
 * lat_sig prot, lat_pagefault, lat_select; SEIMI's Table V).  Each checks
 * its own work:
 *
 *   file          1,000 files of 0 or 10 KiB created, then deleted, per pass,
 *                 in a fresh directory: every file there with its size after
 *                 creating, the directory empty after deleting
 *   mmap          mmap() of a file region, one word read per page, munmap():
 *                 the words add up to what the file holds
 *   prot-fault    a store to a read-only page; the SIGSEGV handler steps over
 *                 the store and returns: one handled fault per store, the page
 *                 never written
 *   page-fault    the first read of a page of a page-cache-resident file
 *                 mapping after MADV_DONTNEED: getrusage()'s minor faults equal
 *                 the pages read
 *   select-file   select() on 100 descriptors of a regular file: 100 ready
 *   select-tcp    select() on 100 idle connected TCP sockets: none ready */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "oslat.h"

#define FS_FILES_PER_PASS 1000          /* LMbench's lat_fs: 1,000 files a pass */
#define FS_FILE_SIZE_BIG (10 * 1024)    /* the 10K column */
#define FS_PAGE 4096
#define FS_MMAP_MIN ((size_t)4 << 10)   /* mmap sizes: 4 KiB ... */
#define FS_MMAP_MAX ((size_t)64 << 20)  /* ... to 64 MiB, each 4 times the last */
#define FS_PF_FILE ((size_t)4 << 20)    /* page-fault file */
/* The kernel's default fault-around window: a read fault of a file page
 * maps the resident pages of its 64 KiB-aligned block at once, so the
 * page-fault primitive reads one page per block, and keeps only those
 * pages resident (see docs/oslat.md). */
#define FS_FAULT_WINDOW ((size_t)64 << 10)
#define FS_SELECT_FDS 100               /* LMbench's lat_select -n 100 */

/* s as the inside of a JSON string, cut to fit out. */
static const char *fs_json_text(const char *s, char *out, size_t len)
{
    size_t k = 0;
    for (; *s && k + 7 < len; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            k += (size_t)snprintf(out + k, len - k, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            k += (size_t)snprintf(out + k, len - k, "\\u%04x", ch);
        else
            out[k++] = (char)ch;
    }
    out[k] = 0;
    return out;
}

/* The filesystem of the test directory, by name where known, and the
 * directory's path (SEIMI's file figures came from another filesystem). */
void oslat_fs_where(struct oslat_cell *c, int fd)
{
    static const struct { long magic; const char *name; } known[] = {
        {0xEF53, "ext2/3/4"}, {0x01021994, "tmpfs"}, {0x58465342, "xfs"}, {0x9123683E, "btrfs"},
        {0x794c7630, "overlayfs"}, {0x6969, "nfs"}, {0xF2F52010, "f2fs"}, {0x2fc12fc1, "zfs"},
    };
    struct statfs sf;
    if (fstatfs(fd, &sf) != 0)
        return;
    const char *name = NULL;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if ((long)sf.f_type == known[i].magic)
            name = known[i].name;
    oslat_param(c, "fs_type", "\"%s\"", name ? name : "other");
    oslat_param(c, "fs_magic", "\"0x%lx\"", (unsigned long)sf.f_type);
    char dir[1024];
    oslat_param(c, "fs_dir", "\"%s\"", fs_json_text(c->o->dir, dir, sizeof dir));
}

static long fs_minflt(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* ---- file create / delete ---- */

static inline __attribute__((always_inline)) int fs_create(int dfd, const char *name, const char *buf,
                                                           size_t size)
{
    int fd = openat(dfd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        return 1;
    int bad = size && write(fd, buf, size) != (ssize_t)size;
    return bad | (close(fd) != 0);
}

/* Entries in a directory and how many have the size wanted. */
static long fs_count(int dfd, size_t size, long *right_size)
{
    int d2 = dup(dfd);
    DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
    if (!d) {
        if (d2 >= 0)
            close(d2);
        return -1;
    }
    rewinddir(d);
    long n = 0;
    *right_size = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        struct stat st;
        n++;
        if (fstatat(dfd, e->d_name, &st, 0) == 0 && (size_t)st.st_size == size)
            (*right_size)++;
    }
    closedir(d);
    return n;
}

/* One pass: create every file, check, delete every file, check.  Samples
 * go to cc and cd while they have room. */
static inline __attribute__((always_inline)) void
fs_pass_as(enum isob_backend be, struct oslat *o, struct oslat_cell *cc, struct oslat_cell *cd,
           int dfd, char (*names)[8], size_t files, const char *buf, size_t size, long *bad)
{
    struct isob_counter *ctr = o->ctx->ctr;
    struct isob_snap a, b;
    for (size_t i = 0; i < files; i++) {
        /* Broken on purpose: every hundredth file is never created. */
        if (o->sabotage && i % 100 == 99)
            continue;
        isob_read_as(be, ctr, &a);
        isob_clobber();
        int r = fs_create(dfd, names[i], buf, size);
        isob_clobber();
        isob_read_as(be, ctr, &b);
        *bad += r;
        cc->ops++;
        oslat_store(cc, be, &a, &b);
    }
    long right = 0, n = fs_count(dfd, size, &right);
    if (n != (long)files || right != (long)files)
        oslat_fail(cc, "after creating, the directory held %ld files, %ld of %zu bytes, not %zu", n,
                   right, size, files);
    for (size_t i = 0; i < files; i++) {
        isob_read_as(be, ctr, &a);
        isob_clobber();
        int r = unlinkat(dfd, names[i], 0);
        isob_clobber();
        isob_read_as(be, ctr, &b);
        *bad += r != 0;
        cd->ops++;
        oslat_store(cd, be, &a, &b);
    }
    n = fs_count(dfd, size, &right);
    if (n != 0)
        oslat_fail(cd, "after deleting, the directory still held %ld files", n);
}

static int fs_file(struct oslat *o, const struct oslat_prim *p)
{
    /* With fewer samples asked for than a pass has, a pass is that short. */
    size_t files = o->cap < FS_FILES_PER_PASS ? o->cap : FS_FILES_PER_PASS;
    char (*names)[8] = calloc(files, sizeof *names);
    char *buf = malloc(FS_FILE_SIZE_BIG);
    int dirfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (!names || !buf || dirfd < 0) {
        free(names);
        free(buf);
        if (dirfd >= 0)
            close(dirfd);
        return -ENOMEM;
    }
    for (size_t i = 0; i < files; i++)
        snprintf(names[i], sizeof names[i], "f%05zu", i);
    for (size_t i = 0; i < FS_FILE_SIZE_BIG; i++)
        buf[i] = (char)('a' + i % 26);
    static const size_t sizes[] = {0, FS_FILE_SIZE_BIG};
    int rc = 0;
    for (size_t si = 0; si < 2 && rc == 0; si++) {
        size_t size = sizes[si];
        struct oslat_cell cc, cd;
        char lc[32], ld[32];
        snprintf(lc, sizeof lc, "%zuK create", size / 1024);
        snprintf(ld, sizeof ld, "%zuK delete", size / 1024);
        rc = oslat_cell_open(&cc, o, p, lc);
        if (rc)
            break;
        rc = oslat_cell_open(&cd, o, p, ld);
        if (rc) {
            oslat_cell_close(&cc);
            break;
        }
        long bad = 0;
        size_t passes = 0;
        uint64_t end = OSLAT_DEADLINE(&cc);
        /* One unmeasured pass first: the directory's blocks and the
         * allocator's caches warm, as every later pass finds them. */
        for (int warm = 1;; warm = 0) {
            char pdir[32];
            snprintf(pdir, sizeof pdir, "pass-%zu", passes);
            if (mkdirat(dirfd, pdir, 0755) != 0) {
                oslat_fail(&cc, "mkdir %s: %s", pdir, isob_strerror(-errno));
                break;
            }
            int dfd = openat(dirfd, pdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (dfd < 0) {
                oslat_fail(&cc, "open %s: %s", pdir, isob_strerror(-errno));
                break;
            }
            if (passes == 0) {
                oslat_fs_where(&cc, dfd);
                oslat_fs_where(&cd, dfd);
            }
            size_t n0c = cc.s.n, n0d = cd.s.n;
            ISOB_DISPATCH(o->ctx->ctr, be_, fs_pass_as(be_, o, &cc, &cd, dfd, names, files, buf, size, &bad));
            if (warm) {
                /* The warm-up pass keeps no samples. */
                cc.s.n = n0c;
                cd.s.n = n0d;
            }
            close(dfd);
            unlinkat(dirfd, pdir, AT_REMOVEDIR);
            passes++;
            if (!warm && (isob_clock_ns() > end || cc.s.n + files > cc.s.cap || cc.fail[0] || cd.fail[0]))
                break;
        }
        oslat_param(&cc, "files_per_pass", "%zu", files);
        oslat_param(&cc, "passes", "%zu", passes);
        oslat_param(&cc, "file_bytes", "%zu", size);
        oslat_param(&cd, "files_per_pass", "%zu", files);
        oslat_param(&cd, "passes", "%zu", passes);
        oslat_param(&cd, "file_bytes", "%zu", size);
        oslat_param(&cc, "failed_calls", "%ld", bad);
        if (bad) {
            oslat_fail(&cc, "%ld create or delete calls failed", bad);
            oslat_fail(&cd, "%ld create or delete calls failed", bad);
        }
        oslat_cell_close(&cc);
        oslat_cell_close(&cd);
    }
    close(dirfd);
    free(names);
    free(buf);
    return rc;
}

/* ---- mmap ---- */

/* A file whose every page starts with its page number plus one. */
static int fs_pattern_file(const char *path, size_t size, size_t chunk)
{
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    char *buf = calloc(1, chunk);
    int rc = buf ? 0 : -ENOMEM;
    for (size_t off = 0; rc == 0 && off < size; off += chunk) {
        for (size_t pg = 0; pg < chunk; pg += FS_PAGE) {
            uint64_t v = (off + pg) / FS_PAGE + 1;
            memcpy(buf + pg, &v, sizeof v);
        }
        if (write(fd, buf, chunk) != (ssize_t)chunk)
            rc = -EIO;
    }
    free(buf);
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

static inline __attribute__((always_inline)) uint64_t fs_map_touch(int fd, size_t size, size_t word)
{
    volatile uint64_t *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return 0;
    uint64_t sum = 0;
    for (size_t off = 0; off < size; off += FS_PAGE)
        sum += p[off / sizeof *p + word];
    munmap((void *)p, size);
    return sum;
}

static int fs_mmap(struct oslat *o, const struct oslat_prim *p)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/mmap-file", o->dir);
    int fd = fs_pattern_file(path, FS_MMAP_MAX, (size_t)1 << 20);
    if (fd < 0)
        return fd;
    unlink(path);
    /* Broken on purpose: each page's second word is read, not its first. */
    const size_t word = o->sabotage ? 1 : 0;
    for (size_t size = FS_MMAP_MIN; size <= FS_MMAP_MAX; size *= 4) {
        char label[16];
        if (size >= ((size_t)1 << 20))
            snprintf(label, sizeof label, "%zuM", size >> 20);
        else
            snprintf(label, sizeof label, "%zuK", size >> 10);
        struct oslat_cell c;
        int rc = oslat_cell_open(&c, o, p, label);
        if (rc) {
            close(fd);
            return rc;
        }
        const uint64_t pages = size / FS_PAGE, want = pages * (pages + 1) / 2;
        long wrong = 0;
        long f0 = fs_minflt();
#define FS_MMAP_BODY wrong += fs_map_touch(fd, size, word) != want
        OSLAT_WARM(&c, (void)0, FS_MMAP_BODY, (void)0);
        OSLAT_EACH(&c, (void)0, FS_MMAP_BODY, (void)0);
        OSLAT_BATCHED(&c, FS_MMAP_BODY);
#undef FS_MMAP_BODY
        long faults = fs_minflt() - f0;
        oslat_fs_where(&c, fd);
        oslat_param(&c, "bytes", "%zu", size);
        oslat_param(&c, "pages_touched", "%llu", (unsigned long long)pages);
        oslat_param(&c, "minor_faults_per_map", "%.2f", c.ops ? (double)faults / (double)c.ops : 0.0);
        oslat_param(&c, "summary_size", "%s", size == FS_MMAP_MAX ? "true" : "false");
        if (wrong)
            oslat_fail(&c, "%ld of %llu maps read words that do not add up to the file's (%llu)", wrong,
                       (unsigned long long)c.ops, (unsigned long long)want);
        oslat_cell_close(&c);
    }
    close(fd);
    return 0;
}

/* ---- protection fault ---- */

static volatile uint32_t *fs_prot_page;
static volatile sig_atomic_t fs_prot_faults;

static void fs_on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    if (si->si_addr == (void *)fs_prot_page && isob_skip_faulting_store(uc)) {
        fs_prot_faults++;
        return;
    }
    /* Any other fault is a real crash: let it happen as one. */
    signal(SIGSEGV, SIG_DFL);
}

static int fs_prot_fault(struct oslat *o, const struct oslat_prim *p)
{
    volatile uint32_t *page = mmap(NULL, FS_PAGE, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (page == MAP_FAILED)
        return -errno;
    *page = 0;
    /* Broken on purpose: the page stays writable, so nothing faults. */
    if (!o->sabotage && mprotect((void *)page, FS_PAGE, PROT_READ) != 0) {
        int rc = -errno;
        munmap((void *)page, FS_PAGE);
        return rc;
    }
    struct sigaction sa, saved;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fs_on_segv;
    sa.sa_flags = SA_SIGINFO;
    fs_prot_page = page;
    fs_prot_faults = 0;
    sigaction(SIGSEGV, &sa, &saved);
    struct oslat_cell c;
    int rc = oslat_cell_open(&c, o, p, "write to read-only page");
    if (rc == 0) {
        OSLAT_WARM(&c, (void)0, isob_faulting_store(page), (void)0);
        OSLAT_EACH(&c, (void)0, isob_faulting_store(page), (void)0);
        OSLAT_BATCHED(&c, isob_faulting_store(page));
        long faults = fs_prot_faults;
        oslat_param(&c, "faults_handled", "%ld", faults);
        oslat_param(&c, "handler_returns", "\"steps over the faulting store\"");
        if ((uint64_t)faults != c.ops || *page != 0)
            oslat_fail(&c, "%ld faults handled for %llu stores; the page holds %u", faults,
                       (unsigned long long)c.ops, (unsigned)*page);
        oslat_cell_close(&c);
    }
    sigaction(SIGSEGV, &saved, NULL);
    munmap((void *)page, FS_PAGE);
    return rc;
}

/* ---- page fault ---- */

/* One pass: the first read of every touched page, each its own sample. */
static inline __attribute__((always_inline)) void fs_pf_pass_as(enum isob_backend be, struct oslat_cell *c,
                                                                volatile uint64_t *map, size_t step,
                                                                size_t touched, uint64_t *sum)
{
    struct isob_counter *ctr = c->o->ctx->ctr;
    struct isob_snap a, b;
    for (size_t k = 0; k < touched; k++) {
        isob_read_as(be, ctr, &a);
        isob_clobber();
        uint64_t v = map[k * step];
        isob_clobber();
        isob_read_as(be, ctr, &b);
        *sum += v;
        oslat_store(c, be, &a, &b);
    }
}

static int fs_page_fault(struct oslat *o, const struct oslat_prim *p)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/pagefault-file", o->dir);
    /* Written a page at a time, so that the page cache holds small pages
     * (a large write may give the file large folios, mapped whole). */
    int fd = fs_pattern_file(path, FS_PF_FILE, FS_PAGE);
    if (fd < 0)
        return fd;
    unlink(path);
    const size_t touched = FS_PF_FILE / FS_FAULT_WINDOW;
    /* Only the pages to be touched stay resident: written back, dropped,
     * then read one by one with read-ahead off. */
    fsync(fd);
    posix_fadvise(fd, 0, FS_PF_FILE, POSIX_FADV_DONTNEED);
    posix_fadvise(fd, 0, FS_PF_FILE, POSIX_FADV_RANDOM);
    char page[FS_PAGE];
    for (size_t k = 0; k < touched; k++)
        if (pread(fd, page, FS_PAGE, (off_t)(k * FS_FAULT_WINDOW)) != FS_PAGE) {
            close(fd);
            return -EIO;
        }
    volatile uint64_t *map = mmap(NULL, FS_PF_FILE, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    unsigned char vec[FS_PF_FILE / FS_PAGE];
    long resident = 0;
    if (mincore((void *)map, FS_PF_FILE, vec) == 0)
        for (size_t i = 0; i < sizeof vec; i++)
            resident += vec[i] & 1;
    struct oslat_cell c;
    int rc = oslat_cell_open(&c, o, p, "first read of a resident file page");
    if (rc) {
        munmap((void *)map, FS_PF_FILE);
        close(fd);
        return rc;
    }
    const size_t step = FS_FAULT_WINDOW / sizeof *map;
    uint64_t sum = 0, want = 0;
    long bad_passes = 0, faults = 0, passes = 0;
    struct isob_counter *ctr = o->ctx->ctr;
    uint64_t end = OSLAT_DEADLINE(&c);
    if (resident != (long)touched)
        oslat_param(&c, "note", "\"more pages resident than read: fault-around maps them in the same fault\"");
    for (int warm = 1;; warm = 0) {
        /* Broken on purpose: the pages stay mapped, so nothing faults. */
        if (!o->sabotage)
            madvise((void *)map, FS_PF_FILE, MADV_DONTNEED);
        long f0 = fs_minflt();
        size_t n0 = c.s.n;
        ISOB_DISPATCH(ctr, be_, fs_pf_pass_as(be_, &c, map, step, touched, &sum));
        long f = fs_minflt() - f0;
        c.ops += touched;
        want += touched * (touched - 1) * (FS_FAULT_WINDOW / FS_PAGE) / 2 + touched;
        faults += f;
        passes++;
        bad_passes += f != (long)touched;
        if (warm)
            c.s.n = n0;
        else if (isob_clock_ns() > end || c.s.n + touched > c.s.cap)
            break;
    }
    munmap((void *)map, FS_PF_FILE);
    oslat_fs_where(&c, fd);
    close(fd);
    oslat_param(&c, "file_bytes", "%zu", FS_PF_FILE);
    oslat_param(&c, "pages_touched_per_pass", "%zu", touched);
    oslat_param(&c, "window_bytes", "%zu", FS_FAULT_WINDOW);
    oslat_param(&c, "resident_pages", "%ld", resident);
    oslat_param(&c, "passes", "%ld", passes);
    oslat_param(&c, "minor_faults", "%ld", faults);
    if (bad_passes)
        oslat_fail(&c, "%ld of %ld passes counted minor faults other than the %zu pages read "
                   "(%ld faults in all for %llu reads)", bad_passes, passes, touched, faults,
                   (unsigned long long)c.ops);
    if (sum != want)
        oslat_fail(&c, "the pages read add up to %llu, not %llu", (unsigned long long)sum,
                   (unsigned long long)want);
    oslat_cell_close(&c);
    return 0;
}

/* ---- select ---- */

static inline __attribute__((always_inline)) int fs_select(const fd_set *set, int nfds)
{
    fd_set rd = *set;
    struct timeval tv = {0, 0};
    return select(nfds, &rd, NULL, NULL, &tv);
}

/* 100 idle TCP connections over loopback: the client ends in cl, the
 * server ends in sv.  0 or -errno. */
static int fs_tcp_pairs(int *cl, int *sv, int n)
{
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) != 0 || listen(ls, n) != 0) {
        int rc = -errno;
        if (ls >= 0)
            close(ls);
        return rc;
    }
    int rc = 0;
    for (int i = 0; i < n; i++)
        cl[i] = sv[i] = -1;
    for (int i = 0; i < n && rc == 0; i++) {
        cl[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (cl[i] < 0 || connect(cl[i], (struct sockaddr *)&a, sizeof a) != 0 ||
            (sv[i] = accept4(ls, NULL, NULL, SOCK_CLOEXEC)) < 0)
            rc = -errno;
    }
    close(ls);
    return rc;
}

static int fs_select_run(struct oslat *o, const struct oslat_prim *p)
{
    int tcp = strcmp(p->name, "select-tcp") == 0;
    int fds[FS_SELECT_FDS], peers[FS_SELECT_FDS];
    char path[4200];
    int rc = 0;
    if (tcp) {
        rc = fs_tcp_pairs(fds, peers, FS_SELECT_FDS);
    } else {
        snprintf(path, sizeof path, "%s/select-file", o->dir);
        int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
            return -errno;
        close(fd);
        for (int i = 0; i < FS_SELECT_FDS; i++) {
            peers[i] = -1;
            fds[i] = open(path, O_RDONLY | O_CLOEXEC);
            if (fds[i] < 0 && rc == 0)
                rc = -errno;
        }
        unlink(path);
    }
    fd_set set;
    FD_ZERO(&set);
    int maxfd = -1;
    for (int i = 0; rc == 0 && i < FS_SELECT_FDS; i++) {
        if (fds[i] >= FD_SETSIZE)
            rc = -EMFILE;
        else
            FD_SET(fds[i], &set);
        if (fds[i] > maxfd)
            maxfd = fds[i];
    }
    const int want = tcp ? 0 : FS_SELECT_FDS;
    if (rc == 0 && o->sabotage) {
        /* Broken on purpose: a file descriptor closed under select (EBADF),
         * or a byte waiting on one idle socket (one ready). */
        if (tcp) {
            rc = write(peers[0], "x", 1) == 1 ? 0 : -errno;
        } else {
            close(fds[0]);
            fds[0] = -1;
        }
    }
    struct oslat_cell c;
    if (rc == 0)
        rc = oslat_cell_open(&c, o, p, "100 fds");
    if (rc == 0) {
        long wrong = 0;
        OSLAT_WARM(&c, (void)0, wrong += fs_select(&set, maxfd + 1) != want, (void)0);
        OSLAT_EACH(&c, (void)0, wrong += fs_select(&set, maxfd + 1) != want, (void)0);
        OSLAT_BATCHED(&c, wrong += fs_select(&set, maxfd + 1) != want);
        oslat_param(&c, "fds", "%d", FS_SELECT_FDS);
        oslat_param(&c, "kind", "\"%s\"", tcp ? "idle connected TCP sockets" : "one regular file");
        oslat_param(&c, "expected_ready", "%d", want);
        if (wrong)
            oslat_fail(&c, "%ld of %llu select() calls did not report %d ready", wrong,
                       (unsigned long long)c.ops, want);
        oslat_cell_close(&c);
    }
    for (int i = 0; i < FS_SELECT_FDS; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
        if (peers[i] >= 0)
            close(peers[i]);
    }
    return rc;
}

const struct oslat_prim oslat_fs[] = {
    {.name = "file", .family = "fs", .table = "V", .traps = OSLAT_TRAPS_EACH,
     .summary = "create and delete of 0 KiB and 10 KiB files, 1,000 per pass",
     OSLAT_CALLS(SYS_openat, SYS_open, SYS_creat, SYS_write, SYS_close, SYS_unlinkat, SYS_unlink),
     .run = fs_file},
    {.name = "mmap", .family = "fs", .table = "V", .traps = OSLAT_TRAPS_EACH,
     .summary = "mmap of a file region, one word read per page, munmap; 4 KiB to 64 MiB",
     OSLAT_CALLS(SYS_mmap, SYS_munmap), .run = fs_mmap},
    {.name = "prot-fault", .family = "fs", .table = "V", .traps = OSLAT_TRAPS_EACH,
     .summary = "a store to a read-only page, handled by stepping over it",
     OSLAT_CALLS(SYS_rt_sigreturn), .run = fs_prot_fault},
    {.name = "page-fault", .family = "fs", .table = "V", .traps = OSLAT_TRAPS_ANY,
     .summary = "first read of a resident file page after MADV_DONTNEED (minor faults counted)",
     .ncalls = 0, .run = fs_page_fault},
    {.name = "select-file", .family = "fs", .table = "V", .traps = OSLAT_TRAPS_EACH,
     .summary = "select() on 100 descriptors of a regular file",
     OSLAT_CALLS(SYS_select, SYS_pselect6), .run = fs_select_run},
    {.name = "select-tcp", .family = "fs", .table = "V", .traps = OSLAT_TRAPS_EACH,
     .summary = "select() on 100 idle connected TCP sockets",
     OSLAT_CALLS(SYS_select, SYS_pselect6), .run = fs_select_run},
    {.name = NULL},
};
