/* The outside reader's plan and readers (see include/isobench/osprobe.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include "isobench/error.h"
#include "isobench/osprobe.h"
#include "osprobe_internal.h"

/* The largest smaps file read, by far more than any process here has
 * (about 1.2 KiB per mapping). */
#define SCAN_MAPS_MAX (64u << 20)

static const char *const class_names[ISOB_MAP__COUNT] = {
    [ISOB_MAP_READ] = "read",
    [ISOB_MAP_SPECIAL] = "special",
    [ISOB_MAP_IO] = "io",
    [ISOB_MAP_DEVICE] = "device",
    [ISOB_MAP_EMPTY] = "empty",
    [ISOB_MAP_BUDGET] = "budget",
};

const char *isob_map_class_name(enum isob_map_class c)
{
    return (unsigned)c < ISOB_MAP__COUNT ? class_names[c] : "?";
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

enum isob_map_class isob_map_classify(const struct isob_map *m)
{
    if (strcmp(m->path, "[vvar]") == 0 || strcmp(m->path, "[vvar_vclock]") == 0 ||
        strcmp(m->path, "[vsyscall]") == 0)
        return ISOB_MAP_SPECIAL;
    if (m->vm_io || m->vm_pfnmap)
        return ISOB_MAP_IO;
    /* A shared anonymous mapping shows as "/dev/zero (deleted)", and POSIX
     * shared memory lives in /dev/shm: both are ordinary memory.  Any other
     * file under /dev is a device, whose mapping may be its registers. */
    if (starts_with(m->path, "/dev/") && !starts_with(m->path, "/dev/zero") &&
        !starts_with(m->path, "/dev/shm/"))
        return ISOB_MAP_DEVICE;
    /* A private mapping with no page resident or swapped holds zeroes or
     * the unmodified file: nothing any process wrote is there. */
    if (m->perms[3] == 'p' && m->rss_kb == 0 && m->swap_kb == 0)
        return ISOB_MAP_EMPTY;
    return ISOB_MAP_READ;
}

/* A mapping's header line: "start-end perms offset dev inode [path]". */
static int parse_header(const char *line, struct isob_map *m)
{
    unsigned long long start, end, offset;
    unsigned long inode;
    unsigned maj, mnr;
    char perms[8];
    int n = 0;
    if (sscanf(line, "%llx-%llx %7s %llx %x:%x %lu %n", &start, &end, perms, &offset, &maj, &mnr, &inode, &n) < 7 ||
        end <= start || strlen(perms) != 4)
        return -EINVAL;
    memset(m, 0, sizeof *m);
    m->start = (uintptr_t)start;
    m->end = (uintptr_t)end;
    m->offset = (uint64_t)offset;
    m->inode = inode;
    memcpy(m->perms, perms, 5);
    const char *path = line + n;
    size_t len = strcspn(path, "\n");
    if (len >= sizeof m->path)
        len = sizeof m->path - 1;
    memcpy(m->path, path, len);
    m->path[len] = 0;
    m->rss_kb = m->swap_kb = -1;
    return 0;
}

int isob_map_parse(const char *line, struct isob_map *m)
{
    return parse_header(line, m);
}

/* A header line starts with the start address and a dash. */
static int is_header(const char *line)
{
    const char *p = line;
    while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))
        p++;
    return p > line && *p == '-';
}

/* One "Name: value" line of a smaps block. */
static void parse_field(const char *line, struct isob_map *m)
{
    long kb;
    if (sscanf(line, "Rss: %ld kB", &kb) == 1)
        m->rss_kb = kb;
    else if (sscanf(line, "Swap: %ld kB", &kb) == 1)
        m->swap_kb = kb;
    else if (starts_with(line, "VmFlags:")) {
        /* Two-letter flags, each followed by a space. */
        const char *p = line + strlen("VmFlags:");
        while (*p && *p != '\n') {
            while (*p == ' ')
                p++;
            size_t len = strcspn(p, " \n");
            if (len == 2 && strncmp(p, "io", 2) == 0)
                m->vm_io = 1;
            if (len == 2 && strncmp(p, "pf", 2) == 0)
                m->vm_pfnmap = 1;
            p += len;
        }
    }
}

int isob_scan_plan_add(struct isob_scan_plan *plan, uintptr_t start, uintptr_t end)
{
    start &= ~(uintptr_t)(ISOB_SCAN_PAGE - 1);
    end = (end + ISOB_SCAN_PAGE - 1) & ~(uintptr_t)(ISOB_SCAN_PAGE - 1);
    if (end <= start)
        return 0;
    if (plan->n == plan->cap) {
        size_t cap = plan->cap ? plan->cap * 2 : 64;
        struct isob_scan_range *r = realloc(plan->ranges, cap * sizeof *r);
        if (!r)
            return -ENOMEM;
        plan->ranges = r;
        plan->cap = cap;
    }
    plan->ranges[plan->n].start = start;
    plan->ranges[plan->n].end = end;
    plan->n++;
    plan->bytes += end - start;
    return 0;
}

/* Take one mapping into the plan, within the budget. */
static int plan_map(struct isob_scan_plan *plan, const struct isob_map *m)
{
    plan->mappings++;
    enum isob_map_class c = isob_map_classify(m);
    if (c == ISOB_MAP_READ && plan->bytes >= plan->budget)
        c = ISOB_MAP_BUDGET;
    if (c != ISOB_MAP_READ) {
        plan->skipped[c]++;
        if (c == ISOB_MAP_BUDGET)
            plan->truncated = 1;
        return 0;
    }
    uintptr_t end = m->end;
    uint64_t left = plan->budget - plan->bytes;
    if (end - m->start > left) {
        /* Cut at a page, so the plan's total never passes the budget. */
        end = m->start + (uintptr_t)(left & ~(uint64_t)(ISOB_SCAN_PAGE - 1));
        plan->truncated = 1;
        if (end <= m->start) {
            plan->skipped[ISOB_MAP_BUDGET]++;
            return 0;
        }
    }
    return isob_scan_plan_add(plan, m->start, end);
}

int isob_scan_plan_parse(const char *text, uint64_t budget, struct isob_scan_plan *plan, char *why,
                         size_t whylen)
{
    memset(plan, 0, sizeof *plan);
    plan->budget = budget;
    struct isob_map m;
    int have = 0, lineno = 0;
    for (const char *line = text; line && *line; ) {
        const char *next = strchr(line, '\n');
        lineno++;
        if (is_header(line)) {
            if (have) {
                int rc = plan_map(plan, &m);
                if (rc)
                    goto fail_rc;
            }
            if (parse_header(line, &m) != 0) {
                size_t len = next ? (size_t)(next - line) : strlen(line);
                snprintf(why, whylen, "line %d is not a mapping: %.*s", lineno, (int)(len > 60 ? 60 : len),
                         line);
                isob_scan_plan_free(plan);
                return -EINVAL;
            }
            have = 1;
        } else if (have) {
            parse_field(line, &m);
        } else if (*line != '\n') {
            snprintf(why, whylen, "line %d comes before any mapping", lineno);
            isob_scan_plan_free(plan);
            return -EINVAL;
        }
        line = next ? next + 1 : NULL;
    }
    if (have) {
        int rc = plan_map(plan, &m);
        if (rc)
            goto fail_rc;
    }
    return 0;
fail_rc:
    snprintf(why, whylen, "out of memory");
    isob_scan_plan_free(plan);
    return -ENOMEM;
}

int isob_scan_plan_pid(pid_t pid, uint64_t budget, struct isob_scan_plan *plan, char *why, size_t whylen)
{
    memset(plan, 0, sizeof *plan);
    plan->budget = budget;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/smaps", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = -errno;
        snprintf(why, whylen, "open %s: %s", path, isob_strerror(err));
        return err;
    }
    size_t cap = 1u << 16, len = 0;
    char *text = malloc(cap);
    int rc = text ? 0 : -ENOMEM;
    while (rc == 0) {
        if (len + 1 == cap) {
            char *t = cap < SCAN_MAPS_MAX ? realloc(text, cap * 2) : NULL;
            if (!t) {
                rc = -ENOMEM;
                break;
            }
            text = t;
            cap *= 2;
        }
        ssize_t n = read(fd, text + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = -errno;
        else if (n == 0)
            break;
        else
            len += (size_t)n;
    }
    close(fd);
    if (rc) {
        snprintf(why, whylen, "read %s: %s", path, isob_strerror(rc));
        free(text);
        return rc;
    }
    text[len] = 0;
    rc = isob_scan_plan_parse(text, budget, plan, why, whylen);
    free(text);
    return rc;
}

int isob_scan_plan_covers(const struct isob_scan_plan *plan, uintptr_t addr)
{
    for (size_t i = 0; i < plan->n; i++)
        if (addr >= plan->ranges[i].start && addr < plan->ranges[i].end)
            return 1;
    return 0;
}

void isob_scan_plan_free(struct isob_scan_plan *plan)
{
    free(plan->ranges);
    plan->ranges = NULL;
    plan->n = plan->cap = 0;
}

int isob_scan_plan_ptrace(const struct isob_scan_plan *plan, unsigned pages, uintptr_t canary_addr,
                          struct isob_scan_plan *out)
{
    memset(out, 0, sizeof *out);
    out->budget = plan->budget;
    uintptr_t cpage = canary_addr & ~(uintptr_t)(ISOB_SCAN_PAGE - 1);
    int want_canary = canary_addr && isob_scan_plan_covers(plan, canary_addr);
    for (size_t i = 0; i < plan->n; i++) {
        const struct isob_scan_range *r = &plan->ranges[i];
        uintptr_t head = r->end - r->start > (uintptr_t)pages * ISOB_SCAN_PAGE
                             ? r->start + (uintptr_t)pages * ISOB_SCAN_PAGE : r->end;
        /* The canary's page, in address order: before, inside or after
         * the head of its range (merged when it touches it). */
        int here = want_canary && cpage >= r->start && cpage < r->end;
        int rc = 0;
        if (here && cpage <= head) {
            rc = isob_scan_plan_add(out, r->start, cpage + ISOB_SCAN_PAGE > head ? cpage + ISOB_SCAN_PAGE : head);
        } else {
            rc = isob_scan_plan_add(out, r->start, head);
            if (rc == 0 && here)
                rc = isob_scan_plan_add(out, cpage, cpage + ISOB_SCAN_PAGE);
        }
        if (rc) {
            isob_scan_plan_free(out);
            return rc;
        }
    }
    return 0;
}

/* ---- the canary ---- */

int isob_canary_new(struct isob_canary *c)
{
    for (size_t got = 0; got < sizeof *c; ) {
        ssize_t n = getrandom((unsigned char *)c + got, sizeof *c - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        got += (size_t)n;
    }
    return 0;
}

void isob_canary_put(const struct isob_canary *c, volatile unsigned char *dst)
{
    for (size_t i = 0; i < sizeof c->mask; i++)
        dst[i] = c->masked[i] ^ c->mask[i];
}

/* Look for the canary in buf[0..len), whose first byte is at address base
 * in the target.  Only its first byte is formed whole, in a register; the
 * rest is compared half against half. */
static void search(const unsigned char *buf, size_t len, uintptr_t base, const struct isob_canary *c,
                   uintptr_t canary_addr, struct isob_scan_result *r)
{
    const size_t n = sizeof c->mask;
    if (len < n)
        return;
    const unsigned char first = c->masked[0] ^ c->mask[0];
    const unsigned char *p = buf, *last = buf + len - n;
    while (p <= last && (p = memchr(p, first, (size_t)(last - p) + 1)) != NULL) {
        size_t k = 1;
        while (k < n && (unsigned char)(p[k] ^ c->mask[k]) == c->masked[k])
            k++;
        if (k == n) {
            uintptr_t at = base + (uintptr_t)(p - buf);
            if (!r->found)
                r->first_found = at;
            r->found++;
            if (at == canary_addr)
                r->at_canary = 1;
        }
        p++;
    }
}

static int is_denial(int err)
{
    return err == EPERM || err == EACCES;
}

void isob_scan_ranges(const struct isob_scan_plan *plan, isob_scan_read_fn rd, void *ctx,
                      const struct isob_canary *c, uintptr_t canary_addr, struct isob_scan_result *r)
{
    const size_t keep_max = sizeof c->mask - 1;
    unsigned char *buf = malloc(ISOB_SCAN_CHUNK + keep_max);
    if (!buf) {
        r->outcome = ISOB_OSP_UNTESTED;
        r->err = ENOMEM;
        snprintf(r->note, sizeof r->note, "no memory for the read buffer");
        return;
    }
    r->planned = plan->bytes;
    if (!plan->n)
        snprintf(r->note, sizeof r->note, "nothing planned to read");
    for (size_t i = 0; i < plan->n; i++) {
        const struct isob_scan_range *range = &plan->ranges[i];
        uintptr_t addr = range->start;
        size_t carry = 0;  /* bytes kept from the previous read, just before addr */
        r->ranges++;
        while (addr < range->end) {
            size_t want = range->end - addr < ISOB_SCAN_CHUNK ? (size_t)(range->end - addr) : ISOB_SCAN_CHUNK;
            ssize_t n = rd(ctx, addr, buf + carry, want);
            if (n == -ESRCH) {
                /* The target is gone (or, for ptrace, no longer stopped):
                 * nothing the kernel decided about access. */
                if (r->outcome != ISOB_OSP_GRANTED) {
                    r->outcome = ISOB_OSP_UNTESTED;
                    r->err = ESRCH;
                }
                snprintf(r->note, sizeof r->note, "the target went away after %llu bytes",
                         (unsigned long long)r->bytes);
                free(buf);
                return;
            }
            if (n < 0 && is_denial((int)-n)) {
                if (r->outcome != ISOB_OSP_GRANTED) {
                    r->outcome = ISOB_OSP_DENIED;
                    r->err = (int)-n;
                } else {
                    snprintf(r->note, sizeof r->note, "stopped after %llu bytes: %s",
                             (unsigned long long)r->bytes, isob_strerror((int)n));
                }
                free(buf);
                return;
            }
            /* Any other answer means the access check passed. */
            r->outcome = ISOB_OSP_GRANTED;
            if (n <= 0) {
                /* This page cannot be read (EFAULT, EIO, or nothing at all):
                 * count it and go on at the next one. */
                if (!r->pages_failed)
                    r->fail_err = n < 0 ? (int)-n : EIO;
                r->pages_failed++;
                addr = (addr & ~(uintptr_t)(ISOB_SCAN_PAGE - 1)) + ISOB_SCAN_PAGE;
                carry = 0;
                continue;
            }
            if ((size_t)n > want)
                n = (ssize_t)want;
            search(buf, carry + (size_t)n, addr - carry, c, canary_addr, r);
            r->bytes += (uint64_t)n;
            addr += (uintptr_t)n;
            size_t have = carry + (size_t)n;
            size_t keep = have < keep_max ? have : keep_max;
            memmove(buf, buf + have - keep, keep);
            carry = keep;
        }
    }
    free(buf);
}

/* ---- the three readers ---- */

static const char *const method_names[ISOB_SCAN__COUNT] = {
    [ISOB_SCAN_MEM] = "mem",
    [ISOB_SCAN_VM_READV] = "vm_readv",
    [ISOB_SCAN_PTRACE] = "ptrace",
};

static const char *const method_hows[ISOB_SCAN__COUNT] = {
    [ISOB_SCAN_MEM] = "pread of /proc/PID/mem",
    [ISOB_SCAN_VM_READV] = "process_vm_readv",
    [ISOB_SCAN_PTRACE] = "ptrace PEEKDATA",
};

const char *isob_scan_method_name(enum isob_scan_method m)
{
    return (unsigned)m < ISOB_SCAN__COUNT ? method_names[m] : "?";
}

const char *isob_scan_method_how(enum isob_scan_method m)
{
    return (unsigned)m < ISOB_SCAN__COUNT ? method_hows[m] : "?";
}

static ssize_t read_mem(void *ctx, uintptr_t addr, void *buf, size_t len)
{
    int fd = *(int *)ctx;
    ssize_t n;
    do
        n = pread(fd, buf, len, (off_t)addr);
    while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

static ssize_t read_vm(void *ctx, uintptr_t addr, void *buf, size_t len)
{
    pid_t pid = *(pid_t *)ctx;
    struct iovec local = {buf, len}, remote = {(void *)addr, len};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    return n < 0 ? -errno : n;
}

static ssize_t read_peek(void *ctx, uintptr_t addr, void *buf, size_t len)
{
    pid_t pid = *(pid_t *)ctx;
    size_t done = 0;
    for (; done + sizeof(long) <= len; done += sizeof(long)) {
        errno = 0;
        long word = ptrace(PTRACE_PEEKDATA, pid, (void *)(addr + done), 0);
        if (errno) {
            int err = errno;
            return done ? (ssize_t)done : -err;
        }
        memcpy((unsigned char *)buf + done, &word, sizeof word);
    }
    return (ssize_t)done;
}

int isob_scan(enum isob_scan_method m, pid_t pid, const struct isob_scan_plan *plan, unsigned ptrace_pages,
              const struct isob_canary *c, uintptr_t canary_addr, struct isob_scan_result *r)
{
    memset(r, 0, sizeof *r);
    r->planned = plan->bytes;
    switch (m) {
    case ISOB_SCAN_MEM: {
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/mem", (long)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            r->err = errno;
            r->outcome = ISOB_OSP_DENIED;
            if (r->err == ENOENT && access("/proc/self/mem", F_OK) != 0) {
                r->outcome = ISOB_OSP_UNTESTED;
                snprintf(r->note, sizeof r->note, "/proc is not mounted");
            } else if (r->err == ENOENT || r->err == ESRCH) {
                r->outcome = ISOB_OSP_UNTESTED;
                snprintf(r->note, sizeof r->note, "the target is gone");
            } else if (!is_denial(r->err)) {
                r->outcome = ISOB_OSP_UNTESTED;
                snprintf(r->note, sizeof r->note, "open %s: %s", path, strerror(r->err));
            }
            return 0;
        }
        /* Opening is the access check (the kernel's mm_access). */
        r->outcome = ISOB_OSP_GRANTED;
        isob_scan_ranges(plan, read_mem, &fd, c, canary_addr, r);
        close(fd);
        return 0;
    }
    case ISOB_SCAN_VM_READV:
        isob_scan_ranges(plan, read_vm, &pid, c, canary_addr, r);
        if (r->outcome == ISOB_OSP_DENIED && r->err == ENOSYS)
            r->outcome = ISOB_OSP_UNTESTED;
        return 0;
    case ISOB_SCAN_PTRACE: {
        struct isob_scan_plan head;
        if (isob_scan_plan_ptrace(plan, ptrace_pages, canary_addr, &head) != 0) {
            r->outcome = ISOB_OSP_UNTESTED;
            r->err = ENOMEM;
            return 0;
        }
        r->planned = head.bytes;
        int status;
        int rc = isob_ptrace_stop(pid, &status, r->note, sizeof r->note);
        if (rc < 0) {
            r->outcome = is_denial(-rc) ? ISOB_OSP_DENIED : ISOB_OSP_UNTESTED;
            r->err = -rc;
            if (rc == -ESRCH)
                snprintf(r->note, sizeof r->note, "the target is gone");
        } else if (rc > 0) {
            r->outcome = ISOB_OSP_GRANTED;
        } else {
            r->outcome = ISOB_OSP_GRANTED;
            isob_scan_ranges(&head, read_peek, &pid, c, canary_addr, r);
            isob_ptrace_release(pid, status);
        }
        isob_scan_plan_free(&head);
        return 0;
    }
    default:
        r->err = EINVAL;
        return 0;
    }
}
