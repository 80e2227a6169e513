/* Every trusted entry reads each length and argument of the message once.
 *
 * The untrusted side shares the message with the trusted code and may
 * change it while an entry runs: an entry that checks msg->len and then
 * reads it again uses a length nobody checked.  This test makes that
 * change happen, deterministically: a hardware watchpoint (a perf
 * breakpoint event with sigtrap) stops the entry right after its first
 * access to the watched field, and the handler then rewrites the field to
 * a huge value through a second mapping of the same page (which the
 * watchpoint does not see).  An entry that copied the field into a local
 * never notices; one that reads it again is counted, and would run past
 * the message's end into an inaccessible page.  A write by the entry
 * itself (KV_GET sets len) is told from a read by the value having
 * changed.  Each case forks (tap.h).
 *
 * The trusted sources are compiled into this test without optimisation
 * (tests/c/meson.build): every read the source makes is then a load the
 * watchpoint sees, so an entry that reads a field twice in its source
 * fails here even where an optimising build happens to load it once.
 * The host calls of the work entries (isobench/work.h) are this file's
 * own, plain system calls. */
#include <errno.h>
#include <fcntl.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/resource.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isobench/trusted.h"
#include "isobench/work.h"
#include "tap.h"

#define PAGE 4096u
#define HEAP_SIZE (1u << 20)
/* What a watched field becomes after the entry's first read of it. */
#define HUGE_LEN 0xfffffff0u
#define HUGE_ARG 0x7ffffff0ll

/* The watched field, as the entry sees it and through the alias. */
static volatile unsigned char *watched_alias;
static unsigned watched_size;
static volatile uint64_t last_value;
static volatile int reads, writes;

static uint64_t load(volatile unsigned char *p, unsigned size)
{
    return size == 4 ? *(volatile uint32_t *)(volatile void *)p : *(volatile uint64_t *)(volatile void *)p;
}

static void store(volatile unsigned char *p, unsigned size, uint64_t v)
{
    if (size == 4)
        *(volatile uint32_t *)(volatile void *)p = (uint32_t)v;
    else
        *(volatile uint64_t *)(volatile void *)p = v;
}

static void on_trap(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    uint64_t now = load(watched_alias, watched_size);
    if (now != last_value) {
        writes++;
        last_value = now;
        return;
    }
    if (++reads == 1) {
        uint64_t huge = watched_size == 4 ? HUGE_LEN : (uint64_t)HUGE_ARG;
        store(watched_alias, watched_size, huge);
        last_value = huge;
    }
}

/* The message at `msg` (its data ending at an inaccessible page) and the
 * same page again at `alias`. */
struct shared_page {
    struct isob_msg *msg;
    unsigned char *alias;
    size_t cap;
};

static struct shared_page map_message(void)
{
    int fd = (int)syscall(SYS_memfd_create, "isob-msg", 0);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, 2 * PAGE) == 0);
    unsigned char *p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    unsigned char *alias = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED && alias != MAP_FAILED);
    CHECK(mprotect(p + PAGE, PAGE, PROT_NONE) == 0);
    close(fd);
    struct shared_page s = {(struct isob_msg *)(void *)p, alias, PAGE - sizeof(struct isob_msg)};
    return s;
}

/* A user-space read/write watchpoint on size bytes at addr, which raises
 * SIGTRAP after each access; -1 with the reason when there is none here. */
static int watch(void *addr, unsigned size, char *why, size_t len)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_BREAKPOINT;
    a.size = sizeof a;
    a.bp_type = HW_BREAKPOINT_RW;
    a.bp_addr = (uintptr_t)addr;
    a.bp_len = size == 4 ? HW_BREAKPOINT_LEN_4 : HW_BREAKPOINT_LEN_8;
    a.sample_period = 1;
    a.sigtrap = 1;
    a.remove_on_exec = 1; /* sigtrap requires it */
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.disabled = 1;
    int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0)
        snprintf(why, len, "no hardware watchpoint with sigtrap here: perf_event_open: %s", strerror(errno));
    return fd;
}

enum field { F_LEN, F_ARG0, F_ARG1 };

struct entry_case {
    unsigned entry;
    const char *name;
    long want;   /* the result from the message as first read */
};

static void fill(struct isob_msg *m)
{
    /* Key "keyA" (4 bytes), value "valB" (4 bytes): every entry's
     * arguments at once, valid for each of them. */
    m->len = 8;
    m->arg[0] = 4;
    m->arg[1] = 4;
    m->arg[2] = m->arg[3] = 0;
    memcpy(m->data, "keyAvalB", 8);
}

static void run_field(enum field f)
{
    struct shared_page sp = map_message();
    void *heap = mmap(NULL, HEAP_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(heap != MAP_FAILED);
    struct isob_trusted *t = isob_trusted_init(heap, HEAP_SIZE);
    CHECK(t != NULL);
    fill(sp.msg);
    const struct entry_case cases[] = {
        {ISOB_ENTRY_SINK, "SINK", (long)isob_checksum(sp.msg->data, 8)},
        {ISOB_ENTRY_ECHO, "ECHO", 8},
        {ISOB_ENTRY_ADD, "ADD", 8},
        {ISOB_ENTRY_FAIL, "FAIL", -4},
        {ISOB_ENTRY_SECRET_PLANT, "SECRET_PLANT", 0},
        {ISOB_ENTRY_SECRET_CHECK, "SECRET_CHECK", 1},
        {ISOB_ENTRY_KV_SET, "KV_SET", 0},
        {ISOB_ENTRY_KV_GET, "KV_GET", 4},
        {ISOB_ENTRY_KV_DELETE, "KV_DELETE", 0},
    };
    size_t off = f == F_LEN ? offsetof(struct isob_msg, len)
               : f == F_ARG0 ? offsetof(struct isob_msg, arg[0]) : offsetof(struct isob_msg, arg[1]);
    unsigned size = f == F_LEN ? 4 : 8;
    char why[160];
    int fd = watch((unsigned char *)sp.msg + off, size, why, sizeof why);
    if (fd < 0)
        SKIP("%s", why);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGTRAP, &sa, NULL) == 0);
    watched_alias = sp.alias + off;
    watched_size = size;
    int total_reads = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fill(sp.msg);
        if (cases[i].entry == ISOB_ENTRY_KV_GET || cases[i].entry == ISOB_ENTRY_KV_DELETE) {
            sp.msg->len = 4;    /* the key alone */
            sp.msg->arg[1] = 0; /* unused; KV_GET's write of 4 then shows as a write */
        }
        last_value = load(watched_alias, size);
        reads = writes = 0;
        CHECK(ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) == 0);
        long got = isob_trusted_call(t, cases[i].entry, sp.msg, sp.cap);
        CHECK(ioctl(fd, PERF_EVENT_IOC_DISABLE, 0) == 0);
        fprintf(stderr, "# %s: field %d: %d read(s), %d write(s), result %ld\n", cases[i].name, (int)f, reads,
                writes, got);
        if (reads > 1)
            fprintf(stderr, "# %s read the field again after checking it\n", cases[i].name);
        CHECK(reads <= 1);
        CHECK_EQ_LONG(got, cases[i].want);
        total_reads += reads;
    }
    /* The watchpoint saw every entry that uses the field read it, once:
     * len by SINK, ECHO and the three KV entries with a key; arg[0] by
     * ADD, FAIL, the two SECRET entries and those three; arg[1] by ADD and
     * KV_SET.  So the test is not blind. */
    CHECK_EQ_LONG(total_reads, f == F_LEN ? 5 : f == F_ARG0 ? 7 : 2);
    close(fd);
}

static void t_len_read_once(void) { run_field(F_LEN); }
static void t_arg0_read_once(void) { run_field(F_ARG0); }
static void t_arg1_read_once(void) { run_field(F_ARG1); }

/* The embedding's host calls (isobench/work.h), as the native library
 * makes them. */
int64_t isob_host_call(uint32_t op, int64_t a0, int64_t a1, int64_t a2)
{
    ssize_t r;
    struct rusage ru;
    switch (op) {
    case ISOB_HOST_WRITE:
        r = write((int)a0, (const void *)(uintptr_t)a1, (size_t)a2);
        return r < 0 ? -errno : r;
    case ISOB_HOST_READ:
        r = read((int)a0, (void *)(uintptr_t)a1, (size_t)a2);
        return r < 0 ? -errno : r;
    case ISOB_HOST_DISCARD:
        return madvise((void *)(uintptr_t)a1, (size_t)a2, MADV_DONTNEED) == 0 ? 0 : -errno;
    case ISOB_HOST_MINFLT:
        return getrusage(RUSAGE_SELF, &ru) == 0 ? (int64_t)ru.ru_minflt : -errno;
    default:
        return -ENOSYS;
    }
}

/* The work entries: each case watches one argument the entry uses. */
#define WORK_LEN 64
struct work_case {
    unsigned entry;
    const char *name;
    int arg;            /* the watched argument */
    int64_t args[3];    /* arg[0..2]; a negative fd slot is filled in below */
    int fds;            /* 1: arg[0] = the pipe's write end; 2: arg[0] = its read end;
                         * 3: arg[0] = write end, arg[1] = read end */
    int block;          /* the memops block must be allocated first */
};

static long work_want(const struct work_case *c, unsigned char *scratch)
{
    switch (c->entry) {
    case ISOB_ENTRY_IO_FILL:
        isob_work_io_fill(scratch, WORK_LEN, (uint64_t)c->args[0]);
        return (long)isob_checksum(scratch, WORK_LEN);
    case ISOB_ENTRY_IO_WRITE:
    case ISOB_ENTRY_IO_READ:
    case ISOB_ENTRY_IO_ROUNDTRIP:
        return WORK_LEN;
    case ISOB_ENTRY_IO_SUM:
        isob_work_io_fill(scratch, WORK_LEN, 7);
        return (long)isob_checksum(scratch, WORK_LEN);
    case ISOB_ENTRY_WORK:
        return (long)isob_work_fold31(isob_work_kernel((uint64_t)c->args[0], (uint64_t)c->args[1]));
    case ISOB_ENTRY_CPU_INT:
        return (long)isob_work_fold31(isob_work_cpu_int((uint32_t)c->args[0], (uint64_t)c->args[1]));
    default:
        return 0;   /* the memops, stream and maths entries return 0 */
    }
}

static void t_work_args_read_once(void)
{
    const struct work_case cases[] = {
        {ISOB_ENTRY_IO_FILL, "IO_FILL", 1, {7, WORK_LEN, 0}, 0, 0},
        {ISOB_ENTRY_IO_FILL, "IO_FILL", 0, {7, WORK_LEN, 0}, 0, 0},
        {ISOB_ENTRY_IO_WRITE, "IO_WRITE", 0, {0, WORK_LEN, 0}, 1, 0},
        {ISOB_ENTRY_IO_WRITE, "IO_WRITE", 1, {0, WORK_LEN, 0}, 1, 0},
        {ISOB_ENTRY_IO_READ, "IO_READ", 0, {0, WORK_LEN, 0}, 2, 0},
        {ISOB_ENTRY_IO_READ, "IO_READ", 1, {0, WORK_LEN, 0}, 2, 0},
        {ISOB_ENTRY_IO_ROUNDTRIP, "IO_ROUNDTRIP", 0, {0, 0, WORK_LEN}, 3, 0},
        {ISOB_ENTRY_IO_ROUNDTRIP, "IO_ROUNDTRIP", 1, {0, 0, WORK_LEN}, 3, 0},
        {ISOB_ENTRY_IO_ROUNDTRIP, "IO_ROUNDTRIP", 2, {0, 0, WORK_LEN}, 3, 0},
        {ISOB_ENTRY_IO_SUM, "IO_SUM", 0, {WORK_LEN, 0, 0}, 0, 0},
        {ISOB_ENTRY_IO_STREAM, "IO_STREAM", 0, {0, WORK_LEN / 4, 4}, 1, 0},
        {ISOB_ENTRY_IO_STREAM, "IO_STREAM", 1, {0, WORK_LEN / 4, 4}, 1, 0},
        {ISOB_ENTRY_IO_STREAM, "IO_STREAM", 2, {0, WORK_LEN / 4, 4}, 1, 0},
        {ISOB_ENTRY_WORK, "WORK", 0, {1000, 3, 0}, 0, 0},
        {ISOB_ENTRY_WORK, "WORK", 1, {1000, 3, 0}, 0, 0},
        {ISOB_ENTRY_CPU_INT, "CPU_INT", 0, {1000, 3, 0}, 0, 0},
        {ISOB_ENTRY_MATH_SQRT, "MATH_SQRT", 0, {0, 0, 0}, 0, 0},
        {ISOB_ENTRY_MEM_ALLOC, "MEM_ALLOC", 0, {4096, 0, 0}, 0, 0},
        {ISOB_ENTRY_MEM_WRITE, "MEM_WRITE", 0, {5, 0, 0}, 0, 1},
        {ISOB_ENTRY_MEM_FILL, "MEM_FILL", 0, {0x41, 0, 0}, 0, 1},
    };
    struct shared_page sp = map_message();
    /* The heap ends at an inaccessible page: an entry that used an
     * unchecked length would fault there. */
    unsigned char *heap = mmap(NULL, HEAP_SIZE + PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(heap != MAP_FAILED);
    CHECK(mprotect(heap + HEAP_SIZE, PAGE, PROT_NONE) == 0);
    struct isob_trusted *t = isob_trusted_init(heap, HEAP_SIZE);
    CHECK(t != NULL);
    int p[2];
    CHECK(pipe2(p, O_NONBLOCK) == 0);
    static unsigned char scratch[WORK_LEN], drain[1 << 16];
    char why[160];
    int fd = -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGTRAP, &sa, NULL) == 0);
    int total_reads = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct work_case *c = &cases[i];
        struct isob_msg *m = sp.msg;
        memset(m, 0, sizeof *m);
        for (int a = 0; a < 3; a++)
            m->arg[a] = c->args[a];
        if (c->entry == ISOB_ENTRY_MATH_SQRT) {
            union { double d; int64_t i; } b = {2.25};
            m->arg[0] = b.i;
        }
        if (c->fds == 1 || c->fds == 3)
            m->arg[0] = p[1];
        if (c->fds == 2)
            m->arg[0] = p[0];
        if (c->fds == 3)
            m->arg[1] = p[0];
        if (c->fds == 2)
            CHECK(write(p[1], scratch, WORK_LEN) == WORK_LEN);
        if (c->entry == ISOB_ENTRY_IO_SUM) {
            /* What IO_SUM sums: the last read's bytes, from a fill. */
            isob_work_io_fill(scratch, WORK_LEN, 7);
            CHECK(write(p[1], scratch, WORK_LEN) == WORK_LEN);
            struct isob_msg r = {0};
            memcpy(&r, m, sizeof r);
            r.arg[0] = p[0];
            r.arg[1] = WORK_LEN;
            CHECK_EQ_LONG(isob_trusted_call(t, ISOB_ENTRY_IO_READ, &r, 0), WORK_LEN);
        }
        if (c->block) {
            struct isob_msg r = {0};
            r.arg[0] = 4096;
            CHECK_EQ_LONG(isob_trusted_call(t, ISOB_ENTRY_MEM_ALLOC, &r, 0), 0);
        }
        size_t off = offsetof(struct isob_msg, arg) + (size_t)c->arg * sizeof(int64_t);
        if (fd >= 0)
            close(fd);
        fd = watch((unsigned char *)m + off, 8, why, sizeof why);
        if (fd < 0)
            SKIP("%s", why);
        watched_alias = sp.alias + off;
        watched_size = 8;
        last_value = load(watched_alias, 8);
        reads = writes = 0;
        long want = work_want(c, scratch);
        CHECK(ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) == 0);
        long got = isob_trusted_call(t, c->entry, m, sp.cap);
        CHECK(ioctl(fd, PERF_EVENT_IOC_DISABLE, 0) == 0);
        fprintf(stderr, "# %s: arg[%d]: %d read(s), %d write(s), result %ld (want %ld)\n", c->name, c->arg,
                reads, writes, got, want);
        if (reads > 1)
            fprintf(stderr, "# %s read arg[%d] again after checking it\n", c->name, c->arg);
        CHECK(reads <= 1);
        CHECK_EQ_LONG(got, want);
        total_reads += reads;
        /* Whatever the writes left in the pipe, and the block, go. */
        if (c->fds == 1) {
            ssize_t left = c->entry == ISOB_ENTRY_IO_STREAM ? WORK_LEN : WORK_LEN;
            CHECK(read(p[0], drain, (size_t)left) == left);
        }
        if (c->entry == ISOB_ENTRY_MEM_ALLOC || c->block) {
            struct isob_msg r = {0};
            CHECK_EQ_LONG(isob_trusted_call(t, ISOB_ENTRY_MEM_FREE, &r, 0), 0);
        }
    }
    /* Every case's field was seen read, once: the test is not blind. */
    CHECK_EQ_LONG(total_reads, (long)(sizeof cases / sizeof cases[0]));
    close(fd);
}

int main(void)
{
    TAP_CASE(t_len_read_once);
    TAP_CASE(t_arg0_read_once);
    TAP_CASE(t_arg1_read_once);
    TAP_CASE(t_work_args_read_once);
    return tap_done();
}
