/* perf_event counter group backend: opening the group, the read(2) path, and
 * the kernel's system interface.  The inline rdpmc path is in perf_impl.h. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isobench/arch.h"
#include "isobench/perf.h"

/* ---- The kernel's system interface ------------------------------------- */

static int real_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group_fd,
                     unsigned long flags)
{
    long r = syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags);
    return r < 0 ? -errno : (int)r;
}

/* One page holds the control page (perf_event_mmap_page) and no ring
 * buffer: the backend counts, it never samples. */
static void *real_mmap(int fd, size_t len)
{
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    return m == MAP_FAILED ? NULL : m;
}

static int real_munmap(void *addr, size_t len) { return munmap(addr, len) ? -errno : 0; }

static ssize_t real_read(int fd, void *buf, size_t len)
{
    ssize_t r = read(fd, buf, len);
    return r < 0 ? -errno : r;
}

static int real_close(int fd) { return close(fd) ? -errno : 0; }

static uint64_t real_rdpmc(uint32_t idx) { return isob_rdpmc(idx); }

static uint32_t real_getcpu(void)
{
    int c = sched_getcpu();
    return c < 0 ? UINT32_MAX : (uint32_t)c;
}

static const struct isob_perf_sys real_sys = {
    .open = real_open,
    .mmap = real_mmap,
    .munmap = real_munmap,
    .read = real_read,
    .close = real_close,
    .rdpmc = real_rdpmc,
    .getcpu = real_getcpu,
};

const struct isob_perf_sys *isob_perf_sys_real(void) { return &real_sys; }

/* ---- The group ---------------------------------------------------------- */

#define HW_CACHE_READ_MISS(cache)                                                          \
    ((uint64_t)(cache) | ((uint64_t)PERF_COUNT_HW_CACHE_OP_READ << 8) |                     \
     ((uint64_t)PERF_COUNT_HW_CACHE_RESULT_MISS << 16))

/* The group in opening order; the first is the leader and must open, the
 * others are kept when the PMU has them. */
static const struct {
    const char *name;
    uint32_t type;
    uint64_t config;
} events[ISOB_MAX_EVENTS] = {
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"dTLB-load-misses", PERF_TYPE_HW_CACHE, HW_CACHE_READ_MISS(PERF_COUNT_HW_CACHE_DTLB)},
    {"iTLB-load-misses", PERF_TYPE_HW_CACHE, HW_CACHE_READ_MISS(PERF_COUNT_HW_CACHE_ITLB)},
};

/* What read(2) of the leader returns with PERF_FORMAT_GROUP and both times
 * (and no PERF_FORMAT_ID): the times are shared by the whole group. */
struct group_read {
    uint64_t nr;
    uint64_t time_enabled;
    uint64_t time_running;
    uint64_t value[ISOB_MAX_EVENTS];
};

static const char *open_hint(int err, enum isob_scope scope)
{
    switch (err) {
    case ENOENT:
    case ENODEV:
    case EOPNOTSUPP:
        return " (no hardware PMU, as in most VMs)";
    case EACCES:
    case EPERM:
        /* Kernel cycles are counted on purpose (system-call based mechanisms
         * spend them there), so the paranoia level must allow it. */
        return scope == ISOB_SCOPE_CPU
                   ? " (a whole CPU needs kernel.perf_event_paranoid <= 0 or CAP_PERFMON)"
                   : " (user+kernel counting needs kernel.perf_event_paranoid <= 1 or CAP_PERFMON)";
    case ENOSYS:
        return " (kernel built without perf events, or qemu-user, which has none)";
    default:
        return "";
    }
}

static void fill_attr(struct perf_event_attr *a, unsigned e)
{
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    a->type = events[e].type;
    a->config = events[e].config;
    /* The group counts from the moment it is opened, so a snap needs no
     * enable ioctl; hypervisor cycles are not the guest's to attribute. */
    a->disabled = 0;
    a->exclude_hv = 1;
    a->read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED |
                     PERF_FORMAT_TOTAL_TIME_RUNNING;
}

/* Whether the kernel lets this page be read with rdpmc right now.  Before
 * cap_bit0_is_deprecated (Linux 3.12) bit 0 was ambiguous, so the rdpmc bit
 * is only trusted on kernels that say so. */
static int page_allows_rdpmc(const volatile struct perf_event_mmap_page *pc)
{
    return pc && pc->cap_bit0_is_deprecated && pc->cap_user_rdpmc && pc->index != 0;
}

int isob_perf_open(struct isob_perf *p, const struct isob_perf_sys *sys, enum isob_scope scope,
                   int cpu, char *why, size_t len)
{
    if (!sys)
        sys = &real_sys;
    memset(p, 0, sizeof *p);
    p->sys = sys;
    p->real_sys = sys == &real_sys;
    p->scope = scope;
    p->cpu = scope == ISOB_SCOPE_CPU ? cpu : -1;
    for (unsigned e = 0; e < ISOB_MAX_EVENTS; e++)
        p->fd[e] = -1;
    long pg = sysconf(_SC_PAGESIZE);
    p->page_len = pg > 0 ? (size_t)pg : 4096;

    if (scope == ISOB_SCOPE_CPU && cpu < 0) {
        snprintf(why, len, "perf: a CPU-wide scope needs a CPU, got %d", cpu);
        return -EINVAL;
    }
    pid_t pid = scope == ISOB_SCOPE_CPU ? -1 : 0;
    int ocpu = scope == ISOB_SCOPE_CPU ? cpu : -1;

    for (unsigned e = 0; e < ISOB_MAX_EVENTS; e++) {
        struct perf_event_attr attr;
        fill_attr(&attr, e);
        int group_fd = p->nev ? p->fd[0] : -1;
        int fd = sys->open(&attr, pid, ocpu, group_fd, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            if (e == 0) {
                snprintf(why, len, "perf_event_open(%s): %s%s", events[e].name, strerror(-fd),
                         open_hint(-fd, scope));
                return fd;
            }
            /* A PMU without this event (TLB events are model specific)
             * still gives a useful group. */
            continue;
        }
        p->fd[p->nev] = fd;
        p->names[p->nev] = events[e].name;
        p->nev++;
    }

    /* Check the read(2) path once, so that a group the kernel cannot read
     * fails here with a reason and not later as silently dropped samples. */
    struct group_read gr;
    size_t want = (3 + p->nev) * sizeof(uint64_t);
    ssize_t got = sys->read(p->fd[0], &gr, want);
    if (got != (ssize_t)want || gr.nr != p->nev) {
        int err = got < 0 ? (int)got : -EIO;
        snprintf(why, len, "perf: read(group of %u): %s", p->nev,
                 got < 0 ? strerror(-err) : "short or malformed group read");
        isob_perf_close(p);
        return err;
    }

    /* rdpmc needs every page mapped (the kernel only enables it for mms that
     * map an event) and every event on a counter; otherwise read(2).  An
     * architecture without a user-space reading always uses read(2) with
     * the kernel (a fake interface still exercises the inline path). */
    int rdpmc = ISOB_ARCH_USER_PMC || !p->real_sys;
    for (unsigned e = 0; e < p->nev; e++) {
        p->page[e] = sys->mmap(p->fd[e], p->page_len);
        rdpmc &= page_allows_rdpmc(p->page[e]);
    }
    p->use_rdpmc = rdpmc;
    return 0;
}

void isob_perf_close(struct isob_perf *p)
{
    if (!p->sys)
        return;
    for (unsigned e = 0; e < p->nev; e++) {
        if (p->page[e])
            p->sys->munmap(p->page[e], p->page_len);
        p->page[e] = NULL;
    }
    /* Members go before the leader, so that no member is ever left in a
     * group whose leader is gone. */
    for (unsigned e = p->nev; e-- > 0;) {
        if (p->fd[e] >= 0)
            p->sys->close(p->fd[e]);
        p->fd[e] = -1;
    }
    p->nev = 0;
    p->use_rdpmc = 0;
}

/* The read(2) path: one system call returns the whole group with its times.
 * It serves when rdpmc is not allowed, and for a CPU-wide group read from
 * another CPU.  The signature is constant: read(2) does not depend on which
 * counter an event occupies. */
void isob_perf_snap_slow(struct isob_perf *p, struct isob_snap *s)
{
    struct group_read gr;
    size_t want = (3 + p->nev) * sizeof(uint64_t);
    s->cpu = p->sys->getcpu();
    s->sig = 0;
    s->enabled = s->running = 0;
    ssize_t got = p->nev ? p->sys->read(p->fd[0], &gr, want) : -EBADF;
    if (got != (ssize_t)want || gr.nr != p->nev) {
        s->ok = 0;
        return;
    }
    for (unsigned e = 0; e < p->nev; e++)
        s->v[e] = gr.value[e];
    /* The group's times are the leader's; counted once per event, they
     * compare with the rdpmc path's sums over the events. */
    s->enabled = gr.time_enabled * p->nev;
    s->running = gr.time_running * p->nev;
    s->ok = 1;
}
