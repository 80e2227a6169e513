/* What every confinement shares: reading the kernel's reports about the
 * calling process, the evidence text, seccomp programs, helper processes,
 * and the init/enter/verify sequence of confine.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/seccomp.h>

#include "isobench/arch.h"
#include "isobench/confine.h"
#include "isobench/futex.h"
#include "isobench/harness.h"

/* The largest system call number of the native ABI; numbers above it (the
 * x32 ABI sets bit 30) are never allowed. */

int isob_status_field(const char *key, long *out)
{
    /* Reading the whole file at once: /proc renders it per read call, and
     * a short buffer would cut a line. */
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char buf[4096];
    ssize_t got = read(fd, buf, sizeof buf - 1);
    int err = got < 0 ? -errno : 0;
    close(fd);
    if (err)
        return err;
    buf[got] = 0;
    size_t klen = strlen(key);
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            char *end;
            errno = 0;
            long v = strtol(line + klen + 1, &end, 10);
            if (errno || end == line + klen + 1)
                return -EPROTO;
            *out = v;
            return 0;
        }
        line = nl ? nl + 1 : NULL;
    }
    return -ENOENT;
}

int isob_ns_inode(const char *name, unsigned long long *out)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/self/ns/%s", name);
    if (stat(path, &st) != 0)
        return -errno;
    *out = (unsigned long long)st.st_ino;
    return 0;
}

void isob_evidence(struct isob_confine_state *st, const char *key, const char *fmt, ...)
{
    size_t used = strlen(st->evidence);
    size_t room = sizeof st->evidence - used;
    int n = snprintf(st->evidence + used, room, "%s\"%s\":", used ? "," : "", key);
    if (n < 0 || (size_t)n >= room) {
        st->evidence[used] = 0;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(st->evidence + used + n, room - (size_t)n, fmt, ap);
    va_end(ap);
    /* A member cut in half would make the whole line invalid JSON. */
    if (m < 0 || (size_t)m >= room - (size_t)n)
        st->evidence[used] = 0;
}

int isob_confine_check_filters(struct isob_confine_state *st, long added, char *why, size_t len)
{
    long mode = -1, filters = -1;
    int rc = isob_status_field("Seccomp", &mode);
    if (rc == 0)
        rc = isob_status_field("Seccomp_filters", &filters);
    if (rc) {
        snprintf(why, len, "/proc/self/status has no Seccomp fields: %s", isob_strerror(rc));
        return rc;
    }
    isob_evidence(st, "seccomp_mode", "%ld", mode);
    isob_evidence(st, "seccomp_filters", "%ld", filters);
    isob_evidence(st, "seccomp_filters_before", "%ld", st->filters_before);
    if (mode != SECCOMP_MODE_FILTER) {
        snprintf(why, len, "Seccomp is %ld in /proc/self/status, not 2 (filter)", mode);
        return -EPERM;
    }
    if (filters != st->filters_before + added) {
        snprintf(why, len, "Seccomp_filters is %ld, expected %ld (%ld before, %ld installed)",
                 filters, st->filters_before + added, st->filters_before, added);
        return -EPERM;
    }
    return 0;
}

/* ---- seccomp programs ---- */

static void bpf_add(struct isob_bpf *b, struct sock_filter f)
{
    if (b->err)
        return;
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        struct sock_filter *p = realloc(b->insn, cap * sizeof *p);
        if (!p) {
            b->err = -ENOMEM;
            return;
        }
        b->insn = p;
        b->cap = cap;
    }
    b->insn[b->n++] = f;
}

void isob_bpf_stmt(struct isob_bpf *b, unsigned short code, unsigned k)
{
    bpf_add(b, (struct sock_filter)BPF_STMT(code, k));
}

void isob_bpf_jump(struct isob_bpf *b, unsigned short code, unsigned k, unsigned char jt,
                   unsigned char jf)
{
    bpf_add(b, (struct sock_filter)BPF_JUMP(code, k, jt, jf));
}

void isob_bpf_prologue(struct isob_bpf *b)
{
    isob_bpf_stmt(b, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    isob_bpf_jump(b, BPF_JMP | BPF_JEQ | BPF_K, ISOB_AUDIT_ARCH, 1, 0);
    isob_bpf_stmt(b, BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    isob_bpf_stmt(b, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
#if ISOB_SYSCALL_ALIAS_BIT
    isob_bpf_jump(b, BPF_JMP | BPF_JGE | BPF_K, ISOB_SYSCALL_ALIAS_BIT, 0, 1);
    isob_bpf_stmt(b, BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
#endif
}

void isob_bpf_match(struct isob_bpf *b, const int *calls, size_t n, unsigned action, unsigned dflt)
{
    for (size_t i = 0; i <= n; i++) {
        unsigned nr = i < n ? (unsigned)calls[i] : (unsigned)ISOB_CONFINE_PROBE_NR;
        isob_bpf_jump(b, BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1);
        isob_bpf_stmt(b, BPF_RET | BPF_K, action);
    }
    isob_bpf_stmt(b, BPF_RET | BPF_K, dflt);
}

void isob_bpf_free(struct isob_bpf *b)
{
    free(b->insn);
    memset(b, 0, sizeof *b);
}

int isob_bpf_load(struct isob_bpf *b, unsigned flags)
{
    if (b->err)
        return b->err;
    if (b->n > BPF_MAXINSNS)
        return -E2BIG;
    /* Without no_new_privs only CAP_SYS_ADMIN may install a filter; with
     * it, the same binary behaves the same as root and as a user. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -errno;
    struct sock_fprog prog = {.len = (unsigned short)b->n, .filter = b->insn};
    long rc = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
    return rc < 0 ? -errno : (int)rc;
}

/* ---- helper processes ---- */

pid_t isob_confine_helper(struct isob_confine_state *st, int cpu,
                          int (*fn)(struct isob_confine_state *st))
{
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        /* A helper outliving the process it serves would hold a CPU and a
         * tracer's or a listener's grip on nothing; it dies with it.  The
         * check after the prctl closes the window in which the parent may
         * have died before it took effect. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(1);
        if (cpu >= 0)
            isob_pin_self(cpu);
        _exit(fn(st));
    }
    return pid;
}

void isob_confine_helper_stop(struct isob_confine_state *st)
{
    if (st->helper > 0) {
        kill(st->helper, SIGKILL);
        waitpid(st->helper, NULL, 0);
    }
    st->helper = 0;
}

static void deadline_after(struct timespec *t, int ms)
{
    clock_gettime(CLOCK_MONOTONIC, t);
    t->tv_sec += ms / 1000;
    t->tv_nsec += (long)(ms % 1000) * 1000000;
    if (t->tv_nsec >= 1000000000) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000;
    }
}

static int past(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

int isob_confine_wait(struct isob_confine_state *st, uint32_t want, int timeout_ms)
{
    struct timespec end;
    deadline_after(&end, timeout_ms);
    for (;;) {
        uint32_t w = isob_load(&st->page->word);
        if (w >= want)
            return 0;
        if (st->helper > 0 && waitpid(st->helper, NULL, WNOHANG) == st->helper) {
            st->helper = 0;
            return -ESRCH;
        }
        if (past(&end))
            return -ETIMEDOUT;
        /* Woken at once by the helper's post, else within a millisecond to
         * look at whether it is still alive. */
        struct timespec ms = {0, 1000000};
        syscall(SYS_futex, &st->page->word, FUTEX_WAIT, w, &ms, NULL, 0);
    }
}

void isob_confine_post(struct isob_confine_page *pg, uint32_t word)
{
    isob_store(&pg->word, word);
    isob_futex_wake(&pg->word, 1, 0);
}

/* ---- the sequence ---- */

void isob_confine_init(struct isob_confine_state *st, const struct isob_confinement *c,
                       unsigned variant)
{
    memset(st, 0, sizeof *st);
    st->conf = c;
    st->variant = variant;
    st->seccomp_mode_before = -1;
    st->filters_before = -1;
    if (isob_status_field("Seccomp", &st->seccomp_mode_before) != 0)
        st->seccomp_mode_before = -1;
    /* A kernel without the field (before 5.9) has no filter count to check. */
    if (isob_status_field("Seccomp_filters", &st->filters_before) != 0)
        st->filters_before = -1;
    isob_ns_inode("user", &st->ns_user);
    isob_ns_inode("mnt", &st->ns_mnt);
    isob_ns_inode("net", &st->ns_net);
}

const char *isob_confine_variant(const struct isob_confine_state *st)
{
    return st->conf->variants[st->variant];
}

int isob_confine_verify(struct isob_confine_state *st, char *why, size_t len)
{
    st->evidence[0] = 0;
    return st->conf->verify(st, why, len);
}

int isob_confine_enter(struct isob_confine_state *st, const struct isob_confine_req *req,
                       char *why, size_t len)
{
    int rc = st->conf->probe(why, len);
    if (rc)
        return rc;
    rc = st->conf->apply(st, req, why, len);
    if (rc)
        return rc;
    st->applied = 1;
    char vwhy[384];
    rc = isob_confine_verify(st, vwhy, sizeof vwhy);
    if (rc)
        snprintf(why, len, "applied but not verified: %s", vwhy);
    return rc;
}

uint64_t isob_confine_events(const struct isob_confine_state *st)
{
    if (!st->page)
        return UINT64_MAX;
    return __atomic_load_n(&st->page->events, __ATOMIC_ACQUIRE);
}
