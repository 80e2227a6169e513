/* In-process rollback, the alternatives to a snapshot context that
 * lwc-create measures beside it: the state lives in this process, a
 * session writes some of its pages, and rollback puts them back.
 *
 *   soft-dirty  clear the soft-dirty bits (/proc/self/clear_refs "4"),
 *               run the session, scan /proc/self/pagemap over the state
 *               for bit 55 and copy every dirty page back from a saved
 *               copy.
 *   uffd-wp     write-protect the state (UFFDIO_WRITEPROTECT), run the
 *               session: its first write to a page faults to a handler
 *               thread, which saves the page and lifts the protection
 *               (copy on first write); rollback copies the saved pages
 *               back.
 *
 * The state is the regions given (the heap and the dirty region of
 * lwc-create); the session writes one byte on each of the first `dirty`
 * pages of the last region. */
#ifndef ISOBENCH_BENCH_ROLLBACK_H
#define ISOBENCH_BENCH_ROLLBACK_H

#include <stddef.h>
#include <stdint.h>

#define RB_MAX_REGIONS 2

struct rb_region {
    unsigned char *addr;
    size_t pages;
};

struct rb_state {
    struct rb_region r[RB_MAX_REGIONS];
    unsigned nr;
    size_t dirty;            /* pages the session writes, in the last region */
    unsigned char *saved;    /* the last region's pages as they were */
    /* soft-dirty */
    int clear_fd, pagemap_fd;
    uint64_t *pm;            /* one pagemap entry per page of the largest region */
    /* uffd-wp */
    int uffd;
    int stop_fd;             /* eventfd that ends the handler thread */
    unsigned char *copies;   /* pages saved by the handler, in fault order */
    uintptr_t *where;        /* their addresses */
    volatile size_t nsaved;  /* written by the handler thread */
    int thread_started;
    unsigned long thread;    /* pthread_t */
    volatile int handler_err;
};

/* Probes: 0 when the kernel offers the mechanism, else -errno with the
 * reason in why. */
int rb_soft_dirty_probe(char *why, size_t len);
int rb_uffd_probe(char *why, size_t len);

/* Set up s for regions already resident, then tear down. */
int rb_soft_dirty_open(struct rb_state *s);
int rb_uffd_open(struct rb_state *s);
void rb_close(struct rb_state *s);

/* One session and its rollback; the value written is v.  Each returns the
 * pages it found dirty (soft-dirty) or saved (uffd-wp), or -errno.  Made
 * to be timed as a whole: no allocation. */
long rb_soft_dirty_cycle(struct rb_state *s, unsigned char v);
long rb_uffd_cycle(struct rb_state *s, unsigned char v);

/* 1 when the last region is back to the saved copy. */
int rb_restored(const struct rb_state *s);

#endif
