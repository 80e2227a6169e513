/* In-process rollback: soft-dirty and userfaultfd write-protect
 * (rollback.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rollback.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
/* Bit 55 of a pagemap entry: the page was written since the soft-dirty
 * bits were last cleared (Documentation/admin-guide/mm/soft-dirty.rst). */
#define PM_SOFT_DIRTY (1ull << 55)

static size_t ps(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static struct rb_region *last(struct rb_state *s) { return &s->r[s->nr - 1]; }

static void init_fds(struct rb_state *s)
{
    s->clear_fd = s->pagemap_fd = s->uffd = s->stop_fd = -1;
}

/* The saved copy of the last region, which the soft-dirty rollback
 * copies from and both check against. */
static int save_last(struct rb_state *s)
{
    struct rb_region *r = last(s);
    s->saved = malloc(r->pages ? r->pages * ps() : 1);
    if (!s->saved)
        return -ENOMEM;
    memcpy(s->saved, r->addr, r->pages * ps());
    return 0;
}

int rb_restored(const struct rb_state *s)
{
    const struct rb_region *r = &s->r[s->nr - 1];
    return memcmp(r->addr, s->saved, r->pages * ps()) == 0;
}

/* ---- soft-dirty ---- */

int rb_soft_dirty_probe(char *why, size_t len)
{
    int cfd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    int pfd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    unsigned char *p = mmap(NULL, ps(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int rc = 0;
    uint64_t e = 0;
    if (cfd < 0 || pfd < 0) {
        rc = -errno;
        snprintf(why, len, "cannot open /proc/self/%s: %s", cfd < 0 ? "clear_refs" : "pagemap",
                 strerror(errno));
    } else if (p == MAP_FAILED) {
        rc = -ENOMEM;
        snprintf(why, len, "out of memory");
    } else {
        p[0] = 1;
        if (pwrite(cfd, "4", 1, 0) != 1) {
            rc = -errno;
            snprintf(why, len, "clear_refs refuses \"4\": %s", strerror(errno));
        } else {
            p[0] = 2;
            if (pread(pfd, &e, sizeof e, (off_t)((uintptr_t)p / ps() * sizeof e)) != sizeof e) {
                rc = -errno;
                snprintf(why, len, "pagemap: %s", strerror(errno));
            } else if (!(e & PM_SOFT_DIRTY)) {
                rc = -ENOTSUP;
                snprintf(why, len, "a written page shows no soft-dirty bit: the kernel lacks "
                                   "CONFIG_MEM_SOFT_DIRTY");
            }
        }
    }
    if (p != MAP_FAILED)
        munmap(p, ps());
    if (cfd >= 0)
        close(cfd);
    if (pfd >= 0)
        close(pfd);
    return rc;
}

int rb_soft_dirty_open(struct rb_state *s)
{
    init_fds(s);
    size_t most = 0;
    for (unsigned i = 0; i < s->nr; i++)
        most = s->r[i].pages > most ? s->r[i].pages : most;
    s->pm = malloc((most ? most : 1) * sizeof *s->pm);
    s->clear_fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    s->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (!s->pm || s->clear_fd < 0 || s->pagemap_fd < 0)
        return !s->pm ? -ENOMEM : -errno;
    return save_last(s);
}

long rb_soft_dirty_cycle(struct rb_state *s, unsigned char v)
{
    size_t p = ps();
    if (pwrite(s->clear_fd, "4", 1, 0) != 1)
        return -errno;
    unsigned char *d = last(s)->addr;
    for (size_t i = 0; i < s->dirty; i++)
        d[i * p] = v;
    long found = 0;
    for (unsigned k = 0; k < s->nr; k++) {
        struct rb_region *r = &s->r[k];
        size_t bytes = r->pages * sizeof *s->pm;
        if (pread(s->pagemap_fd, s->pm, bytes, (off_t)((uintptr_t)r->addr / p * sizeof *s->pm)) !=
            (ssize_t)bytes)
            return -EIO;
        for (size_t j = 0; j < r->pages; j++) {
            if (!(s->pm[j] & PM_SOFT_DIRTY))
                continue;
            found++;
            /* Only the last region has a saved copy: a dirty page found
             * elsewhere is counted, and the count then fails the result. */
            if (k == s->nr - 1)
                memcpy(r->addr + j * p, s->saved + j * p, p);
        }
    }
    return found;
}

/* ---- userfaultfd write-protect ---- */

static int uffd_new(void)
{
    /* User-mode faults only: all this needs, and what a process without
     * CAP_SYS_PTRACE may ask for when vm.unprivileged_userfaultfd is 0. */
    /* Non-blocking: the handler waits in poll, where the order to stop
     * also reaches it, and a wake-up with nothing to read is not a hang. */
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (fd < 0 && errno == EINVAL)
        fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    return fd < 0 ? -errno : fd;
}

static int uffd_api(int fd)
{
    struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_PAGEFAULT_FLAG_WP};
    if (ioctl(fd, UFFDIO_API, &api) != 0)
        return -errno;
    return (api.features & UFFD_FEATURE_PAGEFAULT_FLAG_WP) ? 0 : -ENOTSUP;
}

static int uffd_register(int fd, void *addr, size_t len)
{
    struct uffdio_register reg = {.range = {(uintptr_t)addr, len}, .mode = UFFDIO_REGISTER_MODE_WP};
    return ioctl(fd, UFFDIO_REGISTER, &reg) == 0 ? 0 : -errno;
}

static int uffd_protect(int fd, void *addr, size_t len, int on)
{
    struct uffdio_writeprotect wp = {.range = {(uintptr_t)addr, len},
                                     .mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0};
    return ioctl(fd, UFFDIO_WRITEPROTECT, &wp) == 0 ? 0 : -errno;
}

int rb_uffd_probe(char *why, size_t len)
{
    int fd = uffd_new();
    if (fd < 0) {
        snprintf(why, len, "userfaultfd: %s%s", strerror(-fd),
                 fd == -EPERM ? " (vm.unprivileged_userfaultfd is 0 and this kernel has no "
                                "UFFD_USER_MODE_ONLY)" : "");
        return fd;
    }
    int rc = uffd_api(fd);
    unsigned char *p = MAP_FAILED;
    if (rc) {
        snprintf(why, len, "userfaultfd has no write-protect faults (UFFD_FEATURE_PAGEFAULT_FLAG_WP): %s",
                 strerror(-rc));
    } else {
        p = mmap(NULL, ps(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            rc = -ENOMEM;
            snprintf(why, len, "out of memory");
        } else {
            p[0] = 1;
            rc = uffd_register(fd, p, ps());
            if (rc == 0)
                rc = uffd_protect(fd, p, ps(), 1);
            if (rc)
                snprintf(why, len, "userfaultfd write-protect of anonymous memory refused: %s",
                         strerror(-rc));
        }
    }
    if (p != MAP_FAILED)
        munmap(p, ps());
    close(fd);
    return rc;
}

/* The handler thread: save each page on its first write, then lift the
 * protection, which wakes the writer. */
static void *uffd_handler(void *arg)
{
    struct rb_state *s = arg;
    size_t p = ps();
    for (;;) {
        struct pollfd fds[2] = {{s->uffd, POLLIN, 0}, {s->stop_fd, POLLIN, 0}};
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            s->handler_err = -errno;
            return NULL;
        }
        if (fds[1].revents)
            return NULL;
        struct uffd_msg m;
        ssize_t n = read(s->uffd, &m, sizeof m);
        if (n != (ssize_t)sizeof m) {
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            s->handler_err = n < 0 ? -errno : -EIO;
            return NULL;
        }
        if (m.event != UFFD_EVENT_PAGEFAULT)
            continue;
        uintptr_t page = (uintptr_t)m.arg.pagefault.address & ~(uintptr_t)(p - 1);
        size_t k = s->nsaved;
        if (k < s->dirty) {
            memcpy(s->copies + k * p, (void *)page, p);
            s->where[k] = page;
            __atomic_store_n(&s->nsaved, k + 1, __ATOMIC_RELEASE);
        } else {
            s->handler_err = -EOVERFLOW;
        }
        int rc = uffd_protect(s->uffd, (void *)page, p, 0);
        if (rc)
            s->handler_err = rc;
    }
}

int rb_uffd_open(struct rb_state *s)
{
    init_fds(s);
    size_t p = ps();
    int rc = save_last(s);
    if (rc)
        return rc;
    s->copies = malloc(s->dirty ? s->dirty * p : 1);
    s->where = malloc((s->dirty ? s->dirty : 1) * sizeof *s->where);
    if (!s->copies || !s->where)
        return -ENOMEM;
    s->uffd = uffd_new();
    if (s->uffd < 0)
        return s->uffd;
    if ((rc = uffd_api(s->uffd)) != 0)
        return rc;
    for (unsigned i = 0; i < s->nr; i++)
        if (s->r[i].pages && (rc = uffd_register(s->uffd, s->r[i].addr, s->r[i].pages * p)) != 0)
            return rc;
    s->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (s->stop_fd < 0)
        return -errno;
    pthread_t t;
    rc = pthread_create(&t, NULL, uffd_handler, s);
    if (rc)
        return -rc;
    s->thread = (unsigned long)t;
    s->thread_started = 1;
    return 0;
}

long rb_uffd_cycle(struct rb_state *s, unsigned char v)
{
    size_t p = ps();
    s->nsaved = 0;
    for (unsigned i = 0; i < s->nr; i++)
        if (s->r[i].pages) {
            int rc = uffd_protect(s->uffd, s->r[i].addr, s->r[i].pages * p, 1);
            if (rc)
                return rc;
        }
    unsigned char *d = last(s)->addr;
    for (size_t i = 0; i < s->dirty; i++)
        d[i * p] = v;
    size_t n = __atomic_load_n(&s->nsaved, __ATOMIC_ACQUIRE);
    for (size_t k = 0; k < n; k++)
        memcpy((void *)s->where[k], s->copies + k * p, p);
    return s->handler_err ? s->handler_err : (long)n;
}

void rb_close(struct rb_state *s)
{
    if (s->thread_started) {
        uint64_t one = 1;
        if (write(s->stop_fd, &one, sizeof one) == sizeof one)
            pthread_join((pthread_t)s->thread, NULL);
        s->thread_started = 0;
    }
    if (s->uffd >= 0)
        close(s->uffd);  /* unregisters every range */
    if (s->stop_fd >= 0)
        close(s->stop_fd);
    if (s->clear_fd >= 0)
        close(s->clear_fd);
    if (s->pagemap_fd >= 0)
        close(s->pagemap_fd);
    free(s->saved);
    free(s->pm);
    free(s->copies);
    free(s->where);
    s->saved = s->copies = NULL;
    s->pm = NULL;
    s->where = NULL;
    init_fds(s);
}
