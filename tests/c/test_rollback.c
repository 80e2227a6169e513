/* In-process rollback of lwc-create (src/benches/rollback.h): a cycle
 * finds (soft-dirty) or saves (uffd-wp) exactly the pages the session
 * wrote, not the pages it could have written, and puts them back.  Each
 * skips with the kernel's reason where the mechanism is missing. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../src/benches/rollback.h"
#include "tap.h"

#define HEAP_PAGES 64
#define REGION_PAGES 32
#define CYCLES 5

static size_t ps(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static unsigned char *pages(size_t n)
{
    unsigned char *p = mmap(NULL, n * ps(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    for (size_t i = 0; i < n; i++)
        p[i * ps()] = (unsigned char)(i + 1);
    return p;
}

/* CYCLES sessions writing `dirty` of the region's pages. */
static void cycles(int uffd, size_t dirty)
{
    char why[256] = "";
    if ((uffd ? rb_uffd_probe : rb_soft_dirty_probe)(why, sizeof why) != 0)
        SKIP("%s", why);
    unsigned char *heap = pages(HEAP_PAGES), *region = pages(REGION_PAGES);
    struct rb_state s = {.nr = 2, .dirty = dirty};
    s.r[0] = (struct rb_region){heap, HEAP_PAGES};
    s.r[1] = (struct rb_region){region, REGION_PAGES};
    CHECK_EQ_LONG(uffd ? rb_uffd_open(&s) : rb_soft_dirty_open(&s), 0);
    for (int c = 0; c < CYCLES; c++) {
        unsigned char v = (unsigned char)(0xa0 + c);
        long n = uffd ? rb_uffd_cycle(&s, v) : rb_soft_dirty_cycle(&s, v);
        CHECK_EQ_LONG(n, (long)dirty);
        CHECK(rb_restored(&s));
        for (size_t i = 0; i < REGION_PAGES; i++)
            CHECK_EQ_LONG(region[i * ps()], (unsigned char)(i + 1));
        for (size_t i = 0; i < HEAP_PAGES; i++)
            CHECK_EQ_LONG(heap[i * ps()], (unsigned char)(i + 1));
    }
    rb_close(&s);
    /* The region is writable again afterwards. */
    region[0] = 9;
    munmap(heap, HEAP_PAGES * ps());
    munmap(region, REGION_PAGES * ps());
}

static void t_soft_dirty_counts_written_pages(void) { cycles(0, REGION_PAGES / 2); }
static void t_soft_dirty_nothing_written(void) { cycles(0, 0); }
static void t_uffd_wp_counts_written_pages(void) { cycles(1, REGION_PAGES / 2); }
static void t_uffd_wp_nothing_written(void) { cycles(1, 0); }

int main(void)
{
    TAP_CASE(t_soft_dirty_counts_written_pages);
    TAP_CASE(t_soft_dirty_nothing_written);
    TAP_CASE(t_uffd_wp_counts_written_pages);
    TAP_CASE(t_uffd_wp_nothing_written);
    return tap_done();
}
