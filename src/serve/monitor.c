/* `isob serve --http --monitor KIND`: each GET's file system calls checked
 * by a reference monitor, as lwC's Apache and nginx were run (Litton et
 * al., OSDI 2016, "Reference monitoring" and its Apache and nginx
 * experiments: inline, procsep and lwc-mon).
 *
 * With --monitor the document is a file, index.html in a directory this
 * server makes at start-up (under $TMPDIR or /tmp) and removes at exit,
 * and a GET reads it as a static-file web server does: openat of the
 * path under the directory, pread64 of its bytes, close.  openat and
 * pread64 are the monitored calls (the policy of src/monitor/monitors.h:
 * openat only of paths under the directory, without "..", pread64 only on
 * descriptors 3 and up); close is not checked.  The connection's own
 * reads and writes are not monitored here.  The kinds:
 *
 *   none      the same calls, unchecked: the baseline of the others
 *   inline    the check in the server process before each call (a wrapper:
 *             no isolation; lwC used LD_PRELOAD, "a lower bound on overhead")
 *   procsep   a broker process makes the calls: the open (the descriptor
 *             stays in the broker), the read into a buffer both share, the
 *             close; three round trips over a socketpair per GET.  The
 *             serving loop runs in a child of this process under a
 *             default-deny filter that refuses it every file call
 *             (rm_run_brokered), so the broker is the only way to a file
 *   lwc       the whole server runs in a light-weight context under
 *             LWC_SYSTRAP whose creator, this process, is the monitor: a
 *             trapped openat is checked and performed by the monitor (the
 *             descriptor injected), a trapped pread64 checked and let run;
 *             a default-deny filter refuses the context the other ways to
 *             a file (open, openat2, io_uring, mmap of a file, ...)
 *
 * procsep's and lwc's monitor is non-dumpable while the server runs, so
 * the server cannot write over the policy through /proc/PID/mem; the
 * attacks each monitor stops and those it does not are tested in
 * tests/c/test_monitors.c and tabled in docs/serve.md.
 *
 * Under lwc the monitor sees every openat and pread64 of the serving
 * context, not only a GET's: the server's spare descriptor, reopened on
 * /dev/null after the descriptors ran out (server.c), is refused and
 * counted, so such a server then refuses new connections less gracefully
 * (its spare stays closed); under procsep the filter refuses that reopen
 * uncounted.  inline and procsep count the GET's calls only.
 *
 * Every process that serves sessions has its monitor: under --session
 * shared and --per-connection the server's one loop (and the contexts it
 * switches to, one at a time, which share its broker); under rollback and
 * prefork each worker, under fork each session's process, starts its own
 * broker and serves in its own confined child (procsep), or serves inside
 * a context it supervises itself (lwc), as each Apache prefork worker
 * under lwC's monitors (a worker in a confined child cannot track its own
 * pages: rollback then rolls back by fork, server.c).  The counts go to
 * memory all of them share (M.slots): slot 0 takes atomic additions (the
 * inline checks, a broker's count after each GET); a prefork worker's or
 * a fork session's supervisor (lwc), the only writer of its slot, counts
 * there directly.  A fork session claims a free slot; the listener, once
 * it reaped the session, adds the slot to slot 0 and frees it (so a session killed at the server's stop loses no count).
 *
 * At exit the server prints what the monitors checked, summed:
 * "isob serve: monitor KIND: N system calls checked, D refused". */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isobench/loadgen.h"
#include "isobench/lwc.h"
#include "server_impl.h"
#include "../monitor/monitors.h"

static struct {
    enum serve_monitor kind;
    struct rm_policy policy;
    char file[RM_PATH_MAX + 16];  /* the document, dir/index.html */
    int made_dir, made_file;
    struct rm_broker broker;     /* procsep: this process's broker */
    int broker_on;
    struct rm_tally *slots;      /* shared by every process of the server */
    pid_t *owner;                /* fork: the session counting in each slot, 0: free */
    size_t nslots;
} M;

/* Counts into slot 0, from any process of the server. */
static void tally_add(uint64_t checked, uint64_t denied)
{
    __atomic_fetch_add(&M.slots[0].checked, checked, __ATOMIC_RELAXED);
    __atomic_fetch_add(&M.slots[0].denied, denied, __ATOMIC_RELAXED);
}

const char *serve_monitor_name(enum serve_monitor m)
{
    switch (m) {
    case MONITOR_NONE: return "none";
    case MONITOR_INLINE: return "inline";
    case MONITOR_PROCSEP: return "procsep";
    case MONITOR_LWC: return "lwc";
    default: return "off";
    }
}

int serve_monitor_parse(const char *s, enum serve_monitor *m)
{
    static const enum serve_monitor all[] = {MONITOR_NONE, MONITOR_INLINE, MONITOR_PROCSEP,
                                             MONITOR_LWC};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(s, serve_monitor_name(all[i])) == 0) {
            *m = all[i];
            return 0;
        }
    return -1;
}

/* The file a request's path names: "/" is index.html, another path is
 * under the directory as it is (the policy judges it).  0 or -errno. */
static int full_path(const char *path, size_t len, char *out)
{
    const char *dir = M.policy.dir;
    int n = len == 1 && path[0] == '/' ? snprintf(out, RM_PATH_MAX, "%s/index.html", dir)
                                       : snprintf(out, RM_PATH_MAX, "%s%.*s", dir, (int)len, path);
    return n < 0 || n >= RM_PATH_MAX ? -ENAMETOOLONG : 0;
}

static long read_file(const char *full, unsigned char *buf, size_t cap)
{
    int fd = open(full, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = pread(fd, buf, cap, 0);
    long r = n < 0 ? -errno : (long)n;
    close(fd);
    return r;
}

/* none, and lwc (whose openat and pread64 trap to the monitor). */
static long read_plain(void *ctx, const char *path, size_t len, unsigned char *buf, size_t cap)
{
    (void)ctx;
    char full[RM_PATH_MAX];
    int rc = full_path(path, len, full);
    return rc ? rc : read_file(full, buf, cap);
}

static long read_inline(void *ctx, const char *path, size_t len, unsigned char *buf, size_t cap)
{
    (void)ctx;
    char full[RM_PATH_MAX];
    int rc = full_path(path, len, full);
    if (rc)
        return rc;
    if (!rm_policy_path_ok(&M.policy, full)) {
        tally_add(1, 1);
        return -EPERM;
    }
    int fd = open(full, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tally_add(1, 0);
        return -errno;
    }
    long r;
    if (!rm_policy_fd_ok(fd)) {
        tally_add(2, 1);
        r = -EPERM;
    } else {
        tally_add(2, 0);
        ssize_t n = pread(fd, buf, cap, 0);
        r = n < 0 ? -errno : (long)n;
    }
    close(fd);
    return r;
}

static long read_procsep(void *ctx, const char *path, size_t len, unsigned char *buf, size_t cap)
{
    (void)ctx;
    char full[RM_PATH_MAX];
    int rc = full_path(path, len, full);
    if (rc)
        return rc;
    /* The broker's own count of what it checked for this GET. */
    uint64_t c0 = M.broker.tally->checked, d0 = M.broker.tally->denied;
    int h = rm_broker_open_kept(&M.broker, full, O_RDONLY);
    long n = h;
    int crc = 0;
    if (h >= 0) {
        n = rm_broker_pread(&M.broker, h, cap < M.broker.buf_len ? cap : M.broker.buf_len, 0);
        if (n > 0)
            memcpy(buf, M.broker.buf, (size_t)n);
        crc = rm_broker_close(&M.broker, h);
    }
    tally_add(M.broker.tally->checked - c0, M.broker.tally->denied - d0);
    return n < 0 ? n : crc < 0 ? crc : n;
}

/* procsep: this process's broker.  0, or the exit status after a line. */
static int broker_start(void)
{
    int rc = rm_broker_start(&M.broker, &M.policy, ISOB_HTTP_DOC_MAX);
    if (rc) {
        fprintf(stderr, "isob serve: error: --monitor procsep: the broker did not start: %s\n",
                isob_strerror(rc));
        return 1;
    }
    M.broker_on = 1;
    return 0;
}

/* The directory and its document, written whole. */
static int make_docs(size_t doc_bytes)
{
    const char *tmp = getenv("TMPDIR");
    char dir[RM_PATH_MAX - 16];
    if (!tmp || !*tmp || strlen(tmp) > sizeof dir - 32)
        tmp = "/tmp";
    snprintf(dir, sizeof dir, "%s/isob-serve-docs.XXXXXX", tmp);
    if (!mkdtemp(dir))
        return -errno;
    M.made_dir = 1;
    /* The policy compares the path as given: the directory as the kernel
     * would resolve it, so that a symbolic link in $TMPDIR does not refuse
     * every request. */
    char *real = realpath(dir, NULL);
    snprintf(M.policy.dir, sizeof M.policy.dir, "%s", real ? real : dir);
    free(real);
    snprintf(M.file, sizeof M.file, "%s/index.html", M.policy.dir);
    char *doc = malloc(doc_bytes + 1);
    if (!doc || isob_http_doc(doc_bytes, doc) != 0) {
        free(doc);
        return -EINVAL;
    }
    int fd = open(M.file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    int rc = fd < 0 ? -errno : 0;
    if (fd >= 0) {
        M.made_file = 1;
        size_t done = 0;
        while (rc == 0 && done < doc_bytes) {
            ssize_t n = write(fd, doc + done, doc_bytes - done);
            if (n < 0 && errno != EINTR)
                rc = -errno;
            else if (n > 0)
                done += (size_t)n;
        }
        if (close(fd) != 0 && rc == 0)
            rc = -errno;
    }
    free(doc);
    return rc;
}

int serve_monitor_init(struct server *sv)
{
    const struct serve_opts *o = sv->o;
    M.kind = o->monitor;
    M.broker.sock = M.broker.peer = -1;
    size_t doc = o->startup.doc_bytes ? o->startup.doc_bytes : ISOB_HTTP_DOC_BYTES;
    int rc = make_docs(doc);
    if (rc) {
        fprintf(stderr, "isob serve: error: --monitor: cannot write the document under %s: %s\n",
                M.policy.dir[0] ? M.policy.dir : "$TMPDIR or /tmp", isob_strerror(rc));
        return 1;
    }
    sv->s.doc_cap = ISOB_HTTP_DOC_MAX;
    sv->s.doc_buf = malloc(sv->s.doc_cap);
    if (!sv->s.doc_buf) {
        fprintf(stderr, "isob serve: error: %s\n", strerror(ENOMEM));
        return 1;
    }
    /* Slot 0, and one per prefork worker or concurrent fork session. */
    M.nslots = 1 + (o->session == SESSION_ROLLBACK && !o->per_connection ? o->workers
                    : o->session == SESSION_FORK ? o->max_conns : 0);
    M.slots = mmap(NULL, M.nslots * (sizeof *M.slots + sizeof *M.owner), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (M.slots != MAP_FAILED)
        M.owner = (pid_t *)(M.slots + M.nslots);
    if (M.slots == MAP_FAILED) {
        M.slots = NULL;
        fprintf(stderr, "isob serve: error: %s\n", strerror(ENOMEM));
        return 1;
    }
    switch (M.kind) {
    case MONITOR_INLINE: sv->s.doc_read = read_inline; break;
    case MONITOR_PROCSEP:
        /* The loop's broker where this process's loop serves (its
         * contexts run one at a time, so they share it); else each
         * process that serves starts its own (serve_monitor_enter). */
        if (o->session == SESSION_SHARED || o->per_connection) {
            if (broker_start() != 0)
                return 1;
        }
        sv->s.doc_read = read_procsep;
        break;
    default: sv->s.doc_read = read_plain; break;
    }
    return 0;
}

int serve_monitor_enter(struct server *sv)
{
    (void)sv;
    return M.kind == MONITOR_PROCSEP && !M.broker_on ? broker_start() : 0;
}

void serve_monitor_leave(void)
{
    if (M.broker_on)
        rm_broker_stop(&M.broker);
    M.broker_on = 0;
}

int serve_monitor_keep_fd(void)
{
    return M.broker_on ? M.broker.sock : -1;
}

/* lwc and procsep: what the serving context or child reports to its
 * monitor, in memory both share. */
struct lwc_job {
    struct server *sv;
    int (*fn)(struct server *);
    int status;
};

static void lwc_workload(void *arg)
{
    struct lwc_job *j = arg;
    j->status = j->fn(j->sv);
}

int serve_monitor_run(struct server *sv, int (*fn)(struct server *), int slot)
{
    if (M.kind != MONITOR_LWC && M.kind != MONITOR_PROCSEP)
        return fn(sv);
    /* slot < 0 (a fork session): a free slot, claimed; none free (cannot
     * be: the listener holds at most max_conns sessions, reaped or not),
     * counted here and added at the end. */
    struct rm_tally mine = {0, 0};
    pid_t me = getpid();
    for (size_t i = 1; slot < 0 && i < M.nslots; i++) {
        pid_t free_ = 0;
        if (__atomic_compare_exchange_n(&M.owner[i], &free_, me, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            slot = (int)i;
    }
    struct rm_tally *t = slot >= 0 && (size_t)slot < M.nslots ? &M.slots[slot] : &mine;
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = (sizeof(struct lwc_job) + ps - 1) & ~(ps - 1);
    struct lwc_job *j = lwc_alloc_shared(len);
    if (!j) {
        fprintf(stderr, "isob serve: error: --monitor lwc: no shared page: %s\n", strerror(ENOMEM));
        return 1;
    }
    *j = (struct lwc_job){.sv = sv, .fn = fn, .status = 1};
    /* This process only supervises (lwc) or waits (procsep) from here on;
     * a confined context or child serves.  A stop signal reaches the
     * serving loop through the stop pipe it shares with this process. */
    int rc = M.kind == MONITOR_LWC ? rm_run_lwcmon(&M.policy, lwc_workload, j, j, len, t)
                                   : rm_run_brokered(lwc_workload, j);
    if (t == &mine)
        tally_add(mine.checked, mine.denied);
    int status = j->status;
    if (rc < 0) {
        fprintf(stderr, "isob serve: error: --monitor %s: the serving %s: %s\n",
                serve_monitor_name(M.kind), M.kind == MONITOR_LWC ? "context" : "child",
                isob_strerror(rc));
        status = 1;
    }
    lwc_free_shared(j);
    return status;
}

void serve_monitor_reaped(pid_t pid)
{
    for (size_t i = 1; M.owner && i < M.nslots; i++)
        if (M.owner[i] == pid) {
            tally_add(M.slots[i].checked, M.slots[i].denied);
            M.slots[i] = (struct rm_tally){0, 0};
            __atomic_store_n(&M.owner[i], 0, __ATOMIC_RELEASE);
        }
}

void serve_monitor_fini(struct server *sv)
{
    if (M.kind == MONITOR_OFF)
        return;
    struct rm_tally t = {0, 0};
    for (size_t i = 0; M.slots && i < M.nslots; i++) {
        t.checked += __atomic_load_n(&M.slots[i].checked, __ATOMIC_RELAXED);
        t.denied += __atomic_load_n(&M.slots[i].denied, __ATOMIC_RELAXED);
    }
    fprintf(stderr, "isob serve: monitor %s: %llu system calls checked, %llu refused\n",
            serve_monitor_name(M.kind), (unsigned long long)t.checked,
            (unsigned long long)t.denied);
    serve_monitor_leave();
    if (M.slots)
        munmap(M.slots, M.nslots * (sizeof *M.slots + sizeof *M.owner));
    M.slots = NULL;
    if (M.made_file)
        unlink(M.file);
    if (M.made_dir)
        rmdir(M.policy.dir);
    M.made_file = M.made_dir = 0;
    free(sv->s.doc_buf);
    sv->s.doc_buf = NULL;
    sv->s.doc_read = NULL;
}
