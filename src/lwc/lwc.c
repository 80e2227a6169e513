/* Light-weight contexts on stock Linux (include/isobench/lwc.h): creation,
 * the switch, destruction, shared memory, overlay and restrict.  The trap
 * handoff of LWC_SYSTRAP lives in systrap.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

#include "lwc_impl.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

/* The handle table of this context (index 0 unused): the first
 * LWC_TAB_FIRST handles in a static array, the rest in a mapping grown by
 * doubling.  A new context drops the mapping with one munmap and writes
 * none of its pages, which matters when its creator holds thousands of
 * contexts (a server with one per connection): every page written would
 * be copied.  It makes no mapping of its own either, since one made after
 * the spec's UNMAP ranges could land in them. */
#define LWC_TAB_FIRST 64
static struct lwc_ent lwc_tab_first[LWC_TAB_FIRST + 1];
static struct lwc_ent *lwc_tab_more;  /* handles LWC_TAB_FIRST + 1 on */
static int lwc_more_cap;
static int lwc_free_hint = 1; /* no handle below this one is free */
static int lwc_fds_held;      /* entries holding a pidfd or a listener */

static int tab_cap(void) { return LWC_TAB_FIRST + 1 + lwc_more_cap; }

static struct lwc_ent *ent_at(int h)
{
    return h <= LWC_TAB_FIRST ? &lwc_tab_first[h] : &lwc_tab_more[h - LWC_TAB_FIRST - 1];
}

static int ent_index(const struct lwc_ent *e)
{
    if (e >= lwc_tab_first && e <= &lwc_tab_first[LWC_TAB_FIRST])
        return (int)(e - lwc_tab_first);
    return (int)(e - lwc_tab_more) + LWC_TAB_FIRST + 1;
}

/* Link pages (struct lwc_link) come from chunks of LWC_LINK_CHUNK pages,
 * one shared mapping each.  A new context must not keep its siblings'
 * links (they would let it forge their switches), and with a mapping per
 * link it would take one munmap per sibling to drop them, and every fork
 * would copy one mapping per sibling; with chunks it is two munmap calls
 * per chunk.  A link has a page of its own so that the rest can go. */
#define LWC_LINK_CHUNK 64
#define LWC_MAX_CHUNKS ((LWC_MAX_HANDLES + LWC_LINK_CHUNK - 1) / LWC_LINK_CHUNK)
struct lwc_chunk {
    unsigned char *base;
    uint64_t used;  /* bit i: page i holds a live link */
};
static struct lwc_chunk lwc_chunks[LWC_MAX_CHUNKS];
static int lwc_nchunks;
/* The link to this context's own creator: a page left of the creator's
 * chunk when this context was made, not part of any chunk here. */
static struct lwc_link *lwc_up_link;

/* Why the last lwc_alloc_shared failed at one of the library's own
 * limits (lwc_limit_why), empty otherwise. */
static char lwc_limit[512];

/* The regions of lwc_alloc_shared in this process.  The table sits at the
 * same address in every context (they are forks of one program), which is
 * how lwc_overlay finds a target's region: it reads the target's copy. */
struct lwc_region {
    void *addr;
    size_t len;
    int fd;  /* the memfd; -1 for a free slot */
};
/* The table: LWC_SHARED_FIRST slots here, then a private anonymous
 * mapping twice as large each time it fills, up to LWC_MAX_SHARED.  Its
 * descriptor (where the slots are, how many) is what lwc_overlay reads
 * first in a target. */
static struct lwc_region lwc_regions_first[LWC_SHARED_FIRST] = {
    [0 ... LWC_SHARED_FIRST - 1] = {NULL, 0, -1}};
static struct lwc_rtab {
    struct lwc_region *slots;
    size_t cap;
} lwc_rtab = {lwc_regions_first, LWC_SHARED_FIRST};
#define lwc_regions (lwc_rtab.slots)
#define lwc_nregions ((int)lwc_rtab.cap)

/* The most slots the table may grow to (lwc_shared_limit). */
static size_t lwc_shared_max = LWC_MAX_SHARED;

/* Twice the slots, the new ones free.  0, -ENOSPC at lwc_shared_max (the
 * library's own limit: lwc_limit_why says so), or -ENOMEM. */
static int regions_grow(void)
{
    size_t cap = lwc_rtab.cap * 2;
    if (lwc_rtab.cap >= lwc_shared_max) {
        snprintf(lwc_limit, sizeof lwc_limit,
                 "the lwC emulation's table of shared regions is full (%zu regions, one per "
                 "compartment's message buffer; at most LWC_MAX_SHARED = %d, "
                 "include/isobench/lwc.h, lowered by lwc_shared_limit): raise the limit",
                 lwc_rtab.cap, LWC_MAX_SHARED);
        return -ENOSPC;
    }
    if (cap > lwc_shared_max)
        cap = lwc_shared_max;
    struct lwc_region *t = mmap(NULL, cap * sizeof *t, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED)
        return -ENOMEM;
    memcpy(t, lwc_rtab.slots, lwc_rtab.cap * sizeof *t);
    for (size_t i = lwc_rtab.cap; i < cap; i++)
        t[i] = (struct lwc_region){NULL, 0, -1};
    if (lwc_rtab.slots != lwc_regions_first)
        munmap(lwc_rtab.slots, lwc_rtab.cap * sizeof *t);
    lwc_rtab.slots = t;
    lwc_rtab.cap = cap;
    return 0;
}

/* The signal mask a new context gets back at its first switch; it runs
 * with every signal blocked until then, as lwC delivers a signal to a
 * context at its next switch. */
static sigset_t lwc_entry_mask;

static size_t page_size(void)
{
    static size_t ps;
    if (!ps)
        ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

struct lwc_ent *lwc_ent_of(int h)
{
    if (h <= 0 || h >= tab_cap() || !ent_at(h)->used)
        return NULL;
    return ent_at(h);
}

/* A free handle, the table grown if it has none; -EMFILE beyond
 * LWC_MAX_HANDLES, -ENOMEM when it cannot grow.  Entries beyond the first
 * may move: no pointer to one is held across this call. */
static int ent_alloc(void)
{
    for (int h = lwc_free_hint; h < tab_cap(); h++)
        if (!ent_at(h)->used) {
            lwc_free_hint = h;
            return h;
        }
    int h = tab_cap();
    if (h > LWC_MAX_HANDLES)
        return -EMFILE;
    int cap = lwc_more_cap ? 2 * lwc_more_cap : LWC_TAB_FIRST;
    if (LWC_TAB_FIRST + 1 + cap > LWC_MAX_HANDLES + 1)
        cap = LWC_MAX_HANDLES - LWC_TAB_FIRST;
    struct lwc_ent *t = mmap(NULL, (size_t)cap * sizeof *t, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED)
        return -ENOMEM;
    if (lwc_tab_more) {
        memcpy(t, lwc_tab_more, (size_t)lwc_more_cap * sizeof *t);
        munmap(lwc_tab_more, (size_t)lwc_more_cap * sizeof *t);
    }
    lwc_tab_more = t;
    lwc_more_cap = cap;
    lwc_free_hint = h;
    return h;
}

/* Forget the whole table (a new context, about to make its own). */
static void tab_drop(void)
{
    if (lwc_tab_more)
        munmap(lwc_tab_more, (size_t)lwc_more_cap * sizeof *lwc_tab_more);
    lwc_tab_more = NULL;
    lwc_more_cap = 0;
    memset(lwc_tab_first, 0, sizeof lwc_tab_first);
    lwc_free_hint = 1;
    lwc_fds_held = 0;
}

/* A zeroed link page from a chunk, or NULL with errno set. */
static struct lwc_link *link_alloc(void)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    struct lwc_chunk *c = NULL;
    for (int i = 0; i < lwc_nchunks && !c; i++)
        if (~lwc_chunks[i].used)
            c = &lwc_chunks[i];
    if (!c) {
        if (lwc_nchunks == LWC_MAX_CHUNKS) {
            errno = EMFILE;
            return NULL;
        }
        void *p = mmap(NULL, LWC_LINK_CHUNK * ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                       -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        c = &lwc_chunks[lwc_nchunks++];
        *c = (struct lwc_chunk){p, 0};
    }
    int i = __builtin_ctzll(~c->used);
    c->used |= 1ull << i;
    struct lwc_link *l = (struct lwc_link *)(c->base + (size_t)i * ps);
    /* The page may have served a context that ended: nothing of it stays. */
    memset(l, 0, sizeof *l);
    return l;
}

/* Give a link of a chunk back. */
static void link_free(struct lwc_link *l)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *p = (unsigned char *)l;
    for (int i = 0; i < lwc_nchunks; i++) {
        struct lwc_chunk *c = &lwc_chunks[i];
        if (p >= c->base && p < c->base + LWC_LINK_CHUNK * ps) {
            c->used &= ~(1ull << ((size_t)(p - c->base) / ps));
            return;
        }
    }
}

static void ent_clear(struct lwc_ent *e)
{
    memset(e, 0, sizeof *e);
    e->pidfd = -1;
    e->listener = -1;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* close_range where the kernel has it (5.9), else one descriptor at a
 * time.  The trap handoff depends on the former: close_range is never
 * trapped, close may be. */
static void close_fds(unsigned lo, unsigned hi)
{
    if (lo > hi)
        return;
    if (syscall(SYS_close_range, lo, hi, 0) == 0)
        return;
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = lo; fd <= (long)hi && fd < (max > 0 ? max : 1024); fd++)
        close((int)fd);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Close lo..hi but the n descriptors of keep (sorted here). */
static void close_fds_but(int lo, int hi, int *keep, size_t n)
{
    qsort(keep, n, sizeof *keep, cmp_int);
    long from = lo;
    for (size_t i = 0; i < n && from <= hi; i++) {
        if (keep[i] < from || keep[i] > hi)
            continue;
        if (keep[i] > from)
            close_fds((unsigned)from, (unsigned)keep[i] - 1);
        from = (long)keep[i] + 1;
    }
    if (from <= hi)
        close_fds((unsigned)from, (unsigned)hi);
}

static struct lwc_region *region_at(void *addr)
{
    for (int i = 0; i < lwc_nregions; i++)
        if (lwc_regions[i].fd >= 0 && lwc_regions[i].addr == addr)
            return &lwc_regions[i];
    return NULL;
}

void *lwc_alloc_shared(size_t len)
{
    if (len == 0 || len > SIZE_MAX - page_size()) {
        errno = EINVAL;
        return NULL;
    }
    len = (len + page_size() - 1) & ~(page_size() - 1);
    lwc_limit[0] = 0;
    struct lwc_region *r = NULL;
    for (int i = 0; i < lwc_nregions && !r; i++)
        if (lwc_regions[i].fd < 0)
            r = &lwc_regions[i];
    if (!r) {
        int first = lwc_nregions, rc = regions_grow();
        if (rc) {
            errno = -rc;
            return NULL;
        }
        r = &lwc_regions[first];
    }
    int fd = memfd_create("lwc-shared", MFD_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == EMFILE || err == ENFILE) {
            struct rlimit rl = {0, 0};
            getrlimit(RLIMIT_NOFILE, &rl);
            snprintf(lwc_limit, sizeof lwc_limit,
                     "memfd_create for a shared region: %s: every region holds a descriptor, "
                     "and %s (RLIMIT_NOFILE soft %llu, hard %llu; raise it with `ulimit -n`)",
                     strerrorname_np(err),
                     err == EMFILE ? "this process reached its descriptor limit"
                                   : "the system reached its file limit (fs.file-max)",
                     (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
        }
        errno = err;
        return NULL;
    }
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)len) == 0)
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) {
        int err = errno;
        close(fd);
        errno = err;
        return NULL;
    }
    *r = (struct lwc_region){p, len, fd};
    return p;
}

int lwc_shared_limit(size_t max)
{
    if (max < LWC_SHARED_FIRST || max > LWC_MAX_SHARED)
        return -EINVAL;
    lwc_shared_max = max;
    return 0;
}

const char *lwc_limit_why(void)
{
    return lwc_limit[0] ? lwc_limit : NULL;
}

int lwc_free_shared(void *addr)
{
    struct lwc_region *r = region_at(addr);
    if (!r)
        return -EINVAL;
    munmap(r->addr, r->len);
    close(r->fd);
    *r = (struct lwc_region){NULL, 0, -1};
    return 0;
}

/* ---- creation ---- */

static int range_ok(const void *addr, size_t len)
{
    uintptr_t a = (uintptr_t)addr;
    return len > 0 && (a % page_size()) == 0 && (len % page_size()) == 0 && a + len > a;
}

static int is_syscall_entry(const struct lwc_spec *s) { return s->res == LWC_RES_SYSCALL; }

/* The spec and flags are well formed: -EINVAL otherwise. */
static int spec_check(const struct lwc_spec *spec, size_t n, unsigned flags)
{
    if (flags & ~(unsigned)LWC_SYSTRAP)
        return -EINVAL;
    if (n > LWC_MAX_SPEC || (n && !spec))
        return -EINVAL;
    size_t traps = 0;
    for (size_t i = 0; i < n; i++) {
        const struct lwc_spec *s = &spec[i];
        switch (s->res) {
        case LWC_RES_VM:
            if (!range_ok(s->vm.addr, s->vm.len))
                return -EINVAL;
            if (s->how == LWC_SHARED) {
                /* Only whole regions of lwc_alloc_shared: Linux cannot
                 * make part of a private mapping shared after the fact. */
                struct lwc_region *r = region_at(s->vm.addr);
                if (!r || r->len != s->vm.len)
                    return -EINVAL;
            } else if (s->how != LWC_COW && s->how != LWC_UNMAP) {
                return -EINVAL;
            }
            break;
        case LWC_RES_FD:
            if (s->fd.lo < 0 || s->fd.hi < s->fd.lo || (s->how != LWC_COW && s->how != LWC_UNMAP))
                return -EINVAL;
            break;
        case LWC_RES_CRED:
            if (s->how != LWC_COW || s->cred.uid == (uid_t)-1 || s->cred.gid == (gid_t)-1)
                return -EINVAL;
            break;
        case LWC_RES_SYSCALL:
            if (!(flags & LWC_SYSTRAP) || s->how != LWC_COW || lwc_systrap_allowed(s->sys.nr) != 0)
                return -EINVAL;
            traps++;
            break;
        default:
            return -EINVAL;
        }
    }
    if ((flags & LWC_SYSTRAP) && !traps)
        return -EINVAL;
    return 0;
}

/* In the new context: forget the creator's other contexts.  Their link
 * pages and descriptors would let this context forge switches between its
 * creator and its siblings, which is none of its business. */
static void child_forget(struct lwc_link *mine)
{
    /* Reading the table copies none of it; only descriptors need closing,
     * and most creators hold none. */
    for (int h = 1; lwc_fds_held && h < tab_cap(); h++) {
        struct lwc_ent *e = ent_at(h);
        if (!e->used)
            continue;
        if (e->pidfd >= 0)
            close(e->pidfd);
        if (e->listener >= 0)
            close(e->listener);
    }
    tab_drop();
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), len = LWC_LINK_CHUNK * ps;
    unsigned char *m = (unsigned char *)mine;
    for (int i = 0; i < lwc_nchunks; i++) {
        unsigned char *b = lwc_chunks[i].base;
        if (m >= b && m < b + len) {
            if (m > b)
                munmap(b, (size_t)(m - b));
            if (m + ps < b + len)
                munmap(m + ps, (size_t)(b + len - (m + ps)));
        } else {
            munmap(b, len);
        }
    }
    lwc_nchunks = 0;
    if (lwc_up_link && lwc_up_link != mine)
        munmap(lwc_up_link, ps);
    lwc_up_link = mine;
}

static int covers(const struct lwc_spec *s, const struct lwc_region *r)
{
    uintptr_t a = (uintptr_t)s->vm.addr, b = (uintptr_t)r->addr;
    return a <= b && a + s->vm.len >= b + r->len;
}

/* In the new context: the shared regions.  SHARED keeps a region as it
 * is; a region wholly unmapped goes; every other one becomes a private
 * copy (COW is the default for every resource, and a shared mapping
 * would see the creator's later writes, which a snapshot must not). */
static int child_regions(const struct lwc_spec *spec, size_t n)
{
    for (int i = 0; i < lwc_nregions; i++) {
        struct lwc_region *r = &lwc_regions[i];
        if (r->fd < 0)
            continue;
        enum lwc_how how = LWC_COW;
        for (size_t k = 0; k < n; k++)
            if (spec[k].res == LWC_RES_VM && spec[k].how == LWC_SHARED && spec[k].vm.addr == r->addr)
                how = LWC_SHARED;
            else if (spec[k].res == LWC_RES_VM && spec[k].how == LWC_UNMAP && covers(&spec[k], r))
                how = LWC_UNMAP;
        if (how == LWC_SHARED)
            continue;
        if (how == LWC_COW) {
            void *p = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED)
                return -errno;
            memcpy(p, r->addr, r->len);
            if (mremap(p, r->len, r->len, MREMAP_MAYMOVE | MREMAP_FIXED, r->addr) == MAP_FAILED) {
                int err = -errno;
                munmap(p, r->len);
                return err;
            }
        } else {
            munmap(r->addr, r->len);
        }
        close(r->fd);
        *r = (struct lwc_region){NULL, 0, -1};
    }
    return 0;
}

/* In the new context: apply the spec.  0 or -errno. */
static int child_apply(const struct lwc_spec *spec, size_t n, unsigned flags, int report_fd,
                       struct lwc_link *link)
{
    int rc = child_regions(spec, n);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (spec[i].res == LWC_RES_VM && spec[i].how == LWC_UNMAP) {
            uintptr_t a = (uintptr_t)spec[i].vm.addr, l = (uintptr_t)link;
            /* The link page is the library's; everything else is the
             * caller's to remove. */
            if (l >= a && l < a + spec[i].vm.len)
                return -EINVAL;
            if (munmap(spec[i].vm.addr, spec[i].vm.len) != 0)
                return -errno;
        }
    /* The library's own descriptors stay whatever a range says: the
     * report pipe until set-up ends, the memfds of shared regions. */
    size_t live = 0;
    for (int i = 0; i < lwc_nregions; i++)
        live += lwc_regions[i].fd >= 0;
    /* On the stack: this runs in the new context, right after its fork. */
    int keep[live + 1];
    size_t nkeep = 0;
    keep[nkeep++] = report_fd;
    for (int i = 0; i < lwc_nregions; i++)
        if (lwc_regions[i].fd >= 0)
            keep[nkeep++] = lwc_regions[i].fd;
    for (size_t i = 0; i < n; i++)
        if (spec[i].res == LWC_RES_FD && spec[i].how == LWC_UNMAP) {
            int k2[live + 1];
            memcpy(k2, keep, nkeep * sizeof *keep);
            close_fds_but(spec[i].fd.lo, spec[i].fd.hi, k2, nkeep);
        }
    for (size_t i = 0; i < n; i++)
        if (spec[i].res == LWC_RES_CRED) {
            /* Groups first: once the uid is dropped, they cannot be. */
            if (setgroups(0, NULL) != 0 && errno != EPERM)
                return -errno;
            if (setresgid(spec[i].cred.gid, spec[i].cred.gid, spec[i].cred.gid) != 0)
                return -errno;
            if (setresuid(spec[i].cred.uid, spec[i].cred.uid, spec[i].cred.uid) != 0)
                return -errno;
            /* The kernel clears the capabilities of a process whose uids
             * all left 0; one that stayed root keeps them. */
        }
    if (flags & LWC_SYSTRAP) {
        int nrs[LWC_MAX_SPEC];
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (is_syscall_entry(&spec[i]))
                nrs[k++] = spec[i].sys.nr;
        int l = lwc_systrap_install(nrs, k);
        if (l < 0)
            return l;
        link->listener = l;
    }
    return 0;
}

/* In a context just switched to: run the library's ops its creator asks
 * for (each answered by a switch back) until an ordinary switch comes. */
static void child_ops(struct lwc_link *link, uint32_t tid, int systrap)
{
    while (link->op != LWC_OP_NONE) {
        link->op_result = link->op == LWC_OP_RESTRICT ? lwc_restrict_self() : -EINVAL;
        if (systrap) {
            lwc_systrap_up();
        } else {
            isob_phs_reply(&link->hs.word, tid);
            isob_phs_wait(&link->hs.word, tid);
        }
    }
}

/* The new context, from fork to its first switch.  Returns only there. */
static int child_main(pid_t parent, const struct lwc_spec *spec, size_t n, unsigned flags,
                      struct lwc_link *link, int report_fd, int *caller, struct lwc_msg *args)
{
    /* A context outlives neither its creator nor the creator's death
     * before this line (then the parent is no longer the one recorded). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    uint32_t tid = 0;
    int rc = isob_phs_serve_init(&link->hs, &tid);
    child_forget(link);
    if (rc == 0)
        rc = child_apply(spec, n, flags, report_fd, link);
    link->status = rc;
    /* End of file on the report pipe tells the creator that status is
     * written; close_range, since close may be a trapped call now. */
    close_fds((unsigned)report_fd, (unsigned)report_fd);
    if (rc != 0)
        _exit(1);
    int h = ent_alloc();
    if (h != 1)
        _exit(1);
    struct lwc_ent *e = ent_at(h);
    ent_clear(e);
    e->used = 1;
    e->child = 0;
    e->link = link;
    e->tid = tid;
    e->pid = parent;
    e->systrap = (flags & LWC_SYSTRAP) != 0;
    if (e->systrap) {
        lwc_systrap_up();
        /* The creator holds the listener now (it took it before answering
         * the first switch); a copy here would let this context answer its
         * own trapped calls. */
        close_fds((unsigned)link->listener, (unsigned)link->listener);
    } else {
        isob_phs_wait(&link->hs.word, tid);
    }
    child_ops(link, tid, e->systrap);
    sigprocmask(SIG_SETMASK, &lwc_entry_mask, NULL);
    if (caller)
        *caller = h;
    if (args)
        *args = link->msg;
    return LWC_SWITCHED;
}

static void reap_now(struct lwc_ent *e)
{
    if (e->proc.ended || e->proc.pid <= 0)
        return;
    kill(e->proc.pid, SIGKILL);
    while (waitpid(e->proc.pid, &e->proc.status, 0) < 0) {
        if (errno != EINTR) {
            e->proc.status = -1;
            break;
        }
    }
    e->proc.ended = 1;
}

static void ent_release(struct lwc_ent *e)
{
    if (e->link && e->child) {
        link_free(e->link);
    } else if (e->link) {
        munmap(e->link, sizeof *e->link);
        if (e->link == lwc_up_link)
            lwc_up_link = NULL;
    }
    if (e->pidfd >= 0 || e->listener >= 0)
        lwc_fds_held--;
    close_fd(&e->pidfd);
    close_fd(&e->listener);
    int h = ent_index(e);
    if (h < lwc_free_hint)
        lwc_free_hint = h;
    ent_clear(e);
}

int lwc_create(const struct lwc_spec *spec, size_t n, unsigned flags, int *caller,
               struct lwc_msg *args)
{
    int rc = spec_check(spec, n, flags);
    if (rc)
        return rc;
    int h = ent_alloc();
    if (h < 0)
        return h;
    struct lwc_link *link = link_alloc();
    if (!link)
        return -errno;
    link->status = LWC_STATUS_PENDING;
    link->listener = -1;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        rc = -errno;
        link_free(link);
        return rc;
    }
    pid_t parent = getpid();
    /* Buffered output would otherwise be written twice. */
    fflush(NULL);
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &lwc_entry_mask);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        return child_main(parent, spec, n, flags, link, fds[1], caller, args);
    }
    int fork_err = pid < 0 ? -errno : 0;
    sigprocmask(SIG_SETMASK, &lwc_entry_mask, NULL);
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        link_free(link);
        return fork_err;
    }
    struct lwc_ent *e = ent_at(h);
    ent_clear(e);
    e->used = 1;
    e->child = 1;
    e->link = link;
    e->pid = pid;
    e->proc.pid = pid;
    e->systrap = (flags & LWC_SYSTRAP) != 0;
    /* End of file: the child wrote its status, or died before.  No
     * time-out, however long its set-up takes. */
    char b;
    ssize_t got;
    while ((got = read(fds[0], &b, 1)) < 0 && errno == EINTR)
        ;
    close(fds[0]);
    rc = link->status;
    if (rc == 0 && e->systrap) {
        int pfd = lwc_pidfd(e);
        int l = pfd < 0 ? pfd : (int)syscall(SYS_pidfd_getfd, pfd, link->listener, 0);
        if (l < 0)
            rc = pfd < 0 ? pfd : -errno;
        /* Counted in lwc_fds_held with the pidfd it came through. */
        e->listener = l;
    }
    if (rc != 0) {
        reap_now(e);
        ent_release(e);
        return rc == LWC_STATUS_PENDING ? -EOWNERDEAD : rc;
    }
    e->tid = isob_phs_tid(&link->hs);
    return h;
}

/* ---- the switch ---- */

int lwc_child_died(struct lwc_ent *e)
{
    return isob_server_ended(&e->proc, e->why, sizeof e->why);
}

int lwc_pidfd(struct lwc_ent *e)
{
    if (e->pidfd < 0) {
        int fd = (int)syscall(SYS_pidfd_open, e->pid, 0);
        if (fd < 0)
            return -errno;
        if (e->listener < 0)
            lwc_fds_held++;
        e->pidfd = fd;
    }
    return e->pidfd;
}

static const struct lwc_msg zero_msg;

int lwc_switch(int target, const struct lwc_msg *out, int *from, struct lwc_msg *in)
{
    struct lwc_ent *e = lwc_ent_of(target);
    if (!e)
        return -ESRCH;
    struct lwc_link *link = e->link;
    if (e->child) {
        if (e->proc.ended)
            return -EOWNERDEAD;
        link->msg = out ? *out : zero_msg;
        link->op = LWC_OP_NONE;
        if (e->systrap)
            return lwc_systrap_switch(e, target, from, in);
        if (isob_phs_request(&link->hs.word, e->tid) != 0)
            return lwc_child_died(e);
    } else {
        link->msg = out ? *out : zero_msg;
        if (e->systrap) {
            lwc_systrap_up();
        } else {
            isob_phs_reply(&link->hs.word, e->tid);
            isob_phs_wait(&link->hs.word, e->tid);
        }
        child_ops(link, e->tid, e->systrap);
    }
    if (from)
        *from = target;
    if (in)
        *in = link->msg;
    return 0;
}

int lwc_destroy(int lwc)
{
    struct lwc_ent *e = lwc_ent_of(lwc);
    if (!e)
        return -ESRCH;
    if (e->child)
        reap_now(e);
    ent_release(e);
    return 0;
}

pid_t lwc_pid(int lwc)
{
    struct lwc_ent *e = lwc_ent_of(lwc);
    return e ? e->pid : -ESRCH;
}

const char *lwc_why(int lwc)
{
    struct lwc_ent *e = lwc_ent_of(lwc);
    if (!e || !e->child || !e->proc.ended)
        return NULL;
    if (!e->why[0])
        isob_server_describe(e->proc.status, e->why, sizeof e->why);
    return e->why;
}

int lwc_termsig(int lwc)
{
    struct lwc_ent *e = lwc_ent_of(lwc);
    if (!e || !e->child || !e->proc.ended || e->proc.status == -1)
        return 0;
    return WIFSIGNALED(e->proc.status) ? WTERMSIG(e->proc.status) : 0;
}

/* ---- overlay and restrict ---- */

/* Copy one range between this context and pid; 0 or -errno. */
static int copy_range(pid_t pid, void *addr, size_t len, int out)
{
    struct iovec local = {addr, len}, remote = {addr, len};
    ssize_t n = out ? process_vm_writev(pid, &local, 1, &remote, 1, 0)
                    : process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : -EFAULT;
}

/* Map target's shared region at addr here, at the same address. */
static int share_range(struct lwc_ent *e, void *addr, size_t len)
{
    /* The target's table: where its slots are and how many (its copy of
     * lwc_rtab, at the same address), then the slots. */
    struct lwc_rtab rt;
    struct iovec local = {&rt, sizeof rt}, remote = {&lwc_rtab, sizeof lwc_rtab};
    if (process_vm_readv(e->pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof rt)
        return errno ? -errno : -EFAULT;
    if (rt.cap == 0 || rt.cap > LWC_MAX_SHARED)
        return -EFAULT;
    struct lwc_region *theirs = malloc(rt.cap * sizeof *theirs);
    if (!theirs)
        return -ENOMEM;
    local = (struct iovec){theirs, rt.cap * sizeof *theirs};
    remote = (struct iovec){rt.slots, rt.cap * sizeof *theirs};
    if (process_vm_readv(e->pid, &local, 1, &remote, 1, 0) != (ssize_t)(rt.cap * sizeof *theirs)) {
        int err = errno ? -errno : -EFAULT;
        free(theirs);
        return err;
    }
    int their_fd = -1;
    for (size_t i = 0; i < rt.cap && their_fd < 0; i++)
        if (theirs[i].fd >= 0 && theirs[i].addr == addr && theirs[i].len == len)
            their_fd = theirs[i].fd;
    free(theirs);
    if (their_fd < 0)
        return -EINVAL;
    int pfd = lwc_pidfd(e);
    if (pfd < 0)
        return pfd;
    int fd = (int)syscall(SYS_pidfd_getfd, pfd, their_fd, 0);
    if (fd < 0)
        return -errno;
    struct lwc_region *slot = region_at(addr);
    for (int i = 0; i < lwc_nregions && !slot; i++)
        if (lwc_regions[i].fd < 0)
            slot = &lwc_regions[i];
    if (!slot) {
        int first = lwc_nregions, rc = regions_grow();
        if (rc) {
            close(fd);
            return rc;
        }
        slot = &lwc_regions[first];
    }
    void *p = mmap(addr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        int err = -errno;
        close(fd);
        return err;
    }
    if (slot->fd >= 0)
        close(slot->fd);
    *slot = (struct lwc_region){addr, len, fd};
    return 0;
}

int lwc_overlay(int lwc, const struct lwc_overlay *ov, size_t n)
{
    struct lwc_ent *e = lwc_ent_of(lwc);
    if (!e)
        return -ESRCH;
    if (e->child && e->proc.ended)
        return -EOWNERDEAD;
    if (n > LWC_MAX_SPEC || (n && !ov))
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (ov[i].len == 0 || (uintptr_t)ov[i].addr + ov[i].len < (uintptr_t)ov[i].addr)
            return -EINVAL;
        if (ov[i].how == LWC_OVERLAY_SHARE && (!range_ok(ov[i].addr, ov[i].len) || !e->child))
            return -EINVAL;
        if (ov[i].how < LWC_OVERLAY_COPY_IN || ov[i].how > LWC_OVERLAY_SHARE)
            return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        int rc;
        errno = 0;
        if (ov[i].how == LWC_OVERLAY_SHARE)
            rc = share_range(e, ov[i].addr, ov[i].len);
        else
            rc = copy_range(e->pid, ov[i].addr, ov[i].len, ov[i].how == LWC_OVERLAY_COPY_OUT);
        if (rc)
            return rc;
    }
    return 0;
}

/* Drop CAP_SYS_PTRACE from this process, if it has it. */
static int drop_ptrace_cap(void)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &hdr, d) != 0)
        return -errno;
    unsigned idx = CAP_SYS_PTRACE / 32, bit = 1u << (CAP_SYS_PTRACE % 32);
    /* The bounding set too, so that no later execve gives it back; that
     * needs CAP_SETPCAP, which a process without CAP_SYS_PTRACE rarely
     * has, and then it could not get CAP_SYS_PTRACE back anyway but by
     * running a file that grants it. */
    if (prctl(PR_CAPBSET_READ, CAP_SYS_PTRACE) == 1)
        prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE);
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, CAP_SYS_PTRACE, 0, 0);
    if (!((d[idx].effective | d[idx].permitted | d[idx].inheritable) & bit))
        return 0;
    d[idx].effective &= ~bit;
    d[idx].permitted &= ~bit;
    d[idx].inheritable &= ~bit;
    if (syscall(SYS_capset, &hdr, d) != 0)
        return -errno;
    return 0;
}

int lwc_restrict(int lwc)
{
    struct lwc_ent *e = lwc_ent_of(lwc);
    if (!e)
        return -ESRCH;
    if (!e->child)
        return -EINVAL;
    if (e->proc.ended)
        return -EOWNERDEAD;
    struct lwc_link *link = e->link;
    int rc;
    link->op = LWC_OP_RESTRICT;
    link->op_result = -EPROTO;
    if (e->systrap) {
        /* The op rides on the trapped switch-up the context waits in. */
        rc = lwc_systrap_switch(e, lwc, NULL, NULL);
    } else {
        rc = isob_phs_request(&link->hs.word, e->tid) != 0 ? lwc_child_died(e) : 0;
    }
    link->op = LWC_OP_NONE;
    if (rc == LWC_TRAPPED)
        rc = -EPROTO;
    if (rc == 0)
        rc = link->op_result;
    if (rc == 0)
        rc = drop_ptrace_cap();
    return rc;
}
