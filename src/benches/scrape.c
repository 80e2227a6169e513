/* isob scrape: the outside reader (see include/isobench/scrape.h). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isobench/bench.h"
#include "isobench/mechanism.h"
#include "isobench/scrape.h"

/* How long a target may take to set itself up (a compartment's creation)
 * and to answer a command. */
#define HOLDER_TIMEOUT_MS 30000

static const char *const id_names[ISOB_SCR__COUNT] = {
    [ISOB_SCR_ROOT] = "root",
    [ISOB_SCR_ROOT_NO_PTRACE] = "root-no-ptrace",
    [ISOB_SCR_SAME_UID] = "same-uid",
    [ISOB_SCR_SAME_UID_NONDUMPABLE] = "same-uid-nondumpable",
    [ISOB_SCR_OTHER_UID] = "other-uid",
    [ISOB_SCR_USERNS] = "userns",
};

const char *isob_scrape_id_name(enum isob_scrape_id id)
{
    return (unsigned)id < ISOB_SCR__COUNT ? id_names[id] : "?";
}

enum target_kind { T_PLAIN, T_PIPE_WRITER, T_PIPE_READER, T_MECH };

static int target_kind(const char *name, const struct isob_mechanism **m)
{
    *m = NULL;
    if (strcmp(name, "plain") == 0)
        return T_PLAIN;
    if (strcmp(name, "pipe-writer") == 0)
        return T_PIPE_WRITER;
    if (strcmp(name, "pipe-reader") == 0)
        return T_PIPE_READER;
    *m = isob_mechanism_find(name);
    return *m && isob_mechanism_listed(*m) ? T_MECH : -ENOENT;
}

int isob_scrape_target_valid(const char *name)
{
    const struct isob_mechanism *m;
    return target_kind(name, &m) < 0 ? -ENOENT : 0;
}

/* ---- the targets ----
 *
 * A holder is a forked process that holds the canary (or the compartment
 * that holds it) and obeys one-byte commands on a pipe until told to quit
 * or until isob ends. */

enum {
    CMD_SUM = 'S',           /* reply: the region's checksum, or a negative errno */
    CMD_NONDUMPABLE = 'N',   /* PR_SET_DUMPABLE 0; reply 0 or a negative errno */
    CMD_DUMPABLE = 'Y',      /* PR_SET_DUMPABLE 1 */
    CMD_QUIT = 'Q',
};

struct holder_setup {
    int rc;                 /* 0, or a negative errno */
    int skipped;            /* the mechanism's probe says it cannot run here */
    char why[200];
    long pid;               /* the process that holds the canary */
    uint64_t addr;          /* the canary's address there */
    uint32_t sum;           /* the region's checksum */
    long uid;               /* the holder's uid */
};

struct holder {
    pid_t pid;
    int sock;               /* commands out, replies in: a socket, so that a holder that
                             * died is an EPIPE to send(MSG_NOSIGNAL), not a SIGPIPE */
};

struct holder_state {
    enum target_kind kind;
    const struct isob_mechanism *m;
    struct isob_comp *c;
    unsigned char *region;  /* T_PLAIN and the pipe's processes: in the heap */
};

/* Everything a read must fully get, or fail. */
static int read_full(int fd, void *buf, size_t len, int timeout_ms)
{
    size_t got = 0;
    while (got < len) {
        if (timeout_ms >= 0) {
            struct pollfd p = {fd, POLLIN, 0};
            int ready = poll(&p, 1, timeout_ms);
            if (ready < 0 && errno == EINTR)
                continue;
            if (ready == 0)
                return -ETIMEDOUT;
            if (ready < 0)
                return -errno;
        }
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EPIPE;
        got += (size_t)n;
    }
    return 0;
}

/* Everything written, or an error; on a socket without SIGPIPE. */
static int write_full(int fd, const void *buf, size_t len)
{
    struct stat st;
    int sock = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
    size_t put = 0;
    while (put < len) {
        ssize_t n = sock ? send(fd, (const char *)buf + put, len - put, MSG_NOSIGNAL)
                         : write(fd, (const char *)buf + put, len - put);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        put += (size_t)n;
    }
    return 0;
}

/* In the holder: an ordinary process of the target's uid, dumpable as a
 * user's program is (a uid change, or a non-dumpable isob, would leave it
 * otherwise). */
static int become_target_uid(char *why, size_t len)
{
    if (geteuid() == 0) {
        gid_t g = ISOB_SCRAPE_TARGET_UID;
        uid_t u = ISOB_SCRAPE_TARGET_UID;
        if (setgroups(0, NULL) != 0 || setresgid(g, g, g) != 0 || setresuid(u, u, u) != 0) {
            int err = -errno;
            snprintf(why, len, "cannot become uid %d: %s", ISOB_SCRAPE_TARGET_UID, isob_strerror(err));
            return err;
        }
    }
    if (prctl(PR_SET_DUMPABLE, 1) != 0) {
        int err = -errno;
        snprintf(why, len, "PR_SET_DUMPABLE 1: %s", isob_strerror(err));
        return err;
    }
    return 0;
}

/* A region in this process's heap with the guard pattern, for the canary. */
static unsigned char *heap_region(char *why, size_t len)
{
    unsigned char *region = malloc(ISOB_CANARY_REGION);
    if (!region)
        snprintf(why, len, "no memory for the canary's region");
    else
        isob_canary_guard(region);
    return region;
}

static int setup_mech(struct holder_state *st, const struct isob_canary *canary, struct holder_setup *s)
{
    char why[256] = "";
    if (st->m->probe(why, sizeof why) != 0) {
        snprintf(s->why, sizeof s->why, "%s", why);
        s->skipped = 1;
        return -ENOTSUP;
    }
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    spec.server_cpu = -1;
    int rc = isob_comp_create(st->m, &spec, &st->c);
    if (rc) {
        snprintf(s->why, sizeof s->why, "create: %s", isob_strerror(rc));
        st->c = NULL;
        return rc;
    }
    struct isob_msg *msg = st->m->shared(st->c);
    if (st->c->data_cap < ISOB_CANARY_LEN) {
        snprintf(s->why, sizeof s->why, "the shared buffer is smaller than the canary");
        return -ENOSPC;
    }
    msg->len = ISOB_CANARY_LEN;
    msg->arg[0] = ISOB_CANARY_PLANT;
    msg->arg[1] = 0;
    isob_canary_put(canary, msg->data);
    long ret = isob_call(st->c, ISOB_ENTRY_CANARY);
    uint64_t addr = (uint64_t)msg->arg[1];
    /* The trusted side clears the message's copy; a mechanism that left it
     * would put a second canary where a reader would find it. */
    int cleared = 1;
    for (unsigned i = 0; i < ISOB_CANARY_LEN; i++)
        cleared &= msg->data[i] == 0;
    if (ret != 0 || !addr || !cleared) {
        snprintf(s->why, sizeof s->why, "planting the canary failed (%ld%s)", ret,
                 cleared ? "" : ", and its copy stayed in the shared buffer");
        return -EIO;
    }
    struct isob_place where = {0, (uintptr_t)addr};
    if (st->m->locate && (rc = st->m->locate(st->c, addr, &where)) != 0) {
        snprintf(s->why, sizeof s->why, "cannot locate the trusted heap: %s", isob_strerror(rc));
        return rc;
    }
    s->pid = where.pid ? (long)where.pid : (long)getpid();
    s->addr = where.addr;
    msg->arg[0] = ISOB_CANARY_SUM;
    ret = isob_call(st->c, ISOB_ENTRY_CANARY);
    if (ret < 0) {
        snprintf(s->why, sizeof s->why, "checksum of the canary's region: %s", isob_strerror(ret));
        return (int)ret;
    }
    s->sum = (uint32_t)ret;
    return 0;
}

static int setup(struct holder_state *st, const struct isob_canary *canary, int data_fd, struct holder_setup *s)
{
    int rc = become_target_uid(s->why, sizeof s->why);
    if (rc)
        return rc;
    s->uid = (long)getuid();
    if (st->kind == T_MECH)
        return setup_mech(st, canary, s);
    st->region = heap_region(s->why, sizeof s->why);
    if (!st->region)
        return -ENOMEM;
    unsigned char *slot = st->region + ISOB_CANARY_AT;
    if (st->kind == T_PIPE_READER) {
        /* The kernel copies the pipe's bytes straight into the slot. */
        rc = read_full(data_fd, slot, ISOB_CANARY_LEN, HOLDER_TIMEOUT_MS);
        if (rc) {
            snprintf(s->why, sizeof s->why, "reading the canary from the pipe: %s", isob_strerror(rc));
            return rc;
        }
    } else {
        isob_canary_put(canary, slot);
    }
    if (st->kind == T_PIPE_WRITER) {
        /* One copy for the reader, and one that nobody reads: it stays in
         * the pipe's buffer for as long as the processes live. */
        for (int i = 0; i < 2 && rc == 0; i++)
            rc = write_full(data_fd, slot, ISOB_CANARY_LEN);
        if (rc) {
            snprintf(s->why, sizeof s->why, "writing the canary to the pipe: %s", isob_strerror(rc));
            return rc;
        }
    }
    s->pid = (long)getpid();
    s->addr = (uint64_t)(uintptr_t)slot;
    s->sum = isob_checksum(st->region, ISOB_CANARY_REGION);
    return 0;
}

static long holder_sum(struct holder_state *st)
{
    if (st->kind != T_MECH)
        return (long)isob_checksum(st->region, ISOB_CANARY_REGION);
    st->m->shared(st->c)->arg[0] = ISOB_CANARY_SUM;
    return isob_call(st->c, ISOB_ENTRY_CANARY);
}

static void holder_main(struct holder_state *st, const struct isob_canary *canary, int data_fd, int sock)
{
    int cmd = sock, rep = sock;
    struct holder_setup s;
    memset(&s, 0, sizeof s);
    s.rc = setup(st, canary, data_fd, &s);
    if (data_fd >= 0)
        close(data_fd);
    if (write_full(rep, &s, sizeof s) != 0 || s.rc != 0)
        goto out;
    for (;;) {
        unsigned char c;
        if (read_full(cmd, &c, 1, -1) != 0 || c == CMD_QUIT)
            break;
        long reply;
        if (c == CMD_SUM)
            reply = holder_sum(st);
        else if (c == CMD_NONDUMPABLE || c == CMD_DUMPABLE)
            reply = prctl(PR_SET_DUMPABLE, c == CMD_DUMPABLE ? 1 : 0) == 0 ? 0 : -errno;
        else
            reply = -EINVAL;
        if (write_full(rep, &reply, sizeof reply) != 0)
            break;
    }
out:
    if (st->c)
        isob_comp_destroy(st->c);
    free(st->region);
}

/* Fork a holder.  data_fd is its end of the pipe pair's pipe (or -1),
 * other_fd the other end, which it closes. */
static int holder_start(struct holder *h, enum target_kind kind, const struct isob_mechanism *m,
                        const struct isob_canary *canary, int data_fd, int other_fd, struct holder_setup *s,
                        char *why, size_t whylen)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        int err = -errno;
        snprintf(why, whylen, "socketpair: %s", isob_strerror(err));
        return err;
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int err = -errno;
        snprintf(why, whylen, "fork: %s", isob_strerror(err));
        close(sv[0]);
        close(sv[1]);
        return err;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        close(sv[0]);
        if (other_fd >= 0)
            close(other_fd);
        struct holder_state st = {kind, m, NULL, NULL};
        holder_main(&st, canary, data_fd, sv[1]);
        _exit(0);
    }
    close(sv[1]);
    h->pid = pid;
    h->sock = sv[0];
    int rc = read_full(h->sock, s, sizeof *s, HOLDER_TIMEOUT_MS);
    if (rc) {
        snprintf(why, whylen, "the target process %s", rc == -ETIMEDOUT ? "did not set up in time"
                                                                          : "died while setting up");
        return rc;
    }
    if (s->rc)
        snprintf(why, whylen, "%s", s->why);
    return s->rc;
}

static long holder_ask(struct holder *h, unsigned char c)
{
    if (h->pid <= 0)
        return -ESRCH;
    if (write_full(h->sock, &c, 1) != 0)
        return -EPIPE;
    long reply;
    int rc = read_full(h->sock, &reply, sizeof reply, HOLDER_TIMEOUT_MS);
    return rc ? rc : reply;
}

static void holder_stop(struct holder *h)
{
    if (h->pid <= 0)
        return;
    unsigned char q = CMD_QUIT;
    /* A holder whose set-up failed has quit already: EPIPE is no news. */
    write_full(h->sock, &q, 1);
    close(h->sock);
    /* A holder that does not quit (a compartment that hangs on destroy)
     * is killed; the PDEATHSIG of its servers takes them with it. */
    for (int waited = 0; waited < HOLDER_TIMEOUT_MS; waited += 10) {
        int st;
        pid_t w = waitpid(h->pid, &st, WNOHANG);
        if (w == h->pid || (w < 0 && errno != EINTR)) {
            h->pid = 0;
            return;
        }
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    kill(h->pid, SIGKILL);
    while (waitpid(h->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    h->pid = 0;
}

/* ---- the readers ---- */

struct reader_job {
    enum isob_scrape_id id;
    pid_t pid;
    const struct isob_scan_plan *plan;
    unsigned ptrace_pages;
    const struct isob_canary *canary;
    uintptr_t canary_addr;
};

struct reader_report {
    struct isob_identity_info who;
    struct isob_scan_result res[ISOB_SCAN__COUNT];
};

static void reader(void *arg, void *out)
{
    const struct reader_job *j = arg;
    struct reader_report *rep = out;
    isob_identity_self(&rep->who);
    rep->who.userns = j->id == ISOB_SCR_USERNS;
    for (int m = 0; m < ISOB_SCAN__COUNT; m++)
        isob_scan((enum isob_scan_method)m, j->pid, j->plan, j->ptrace_pages, j->canary, j->canary_addr,
                  &rep->res[m]);
}

/* How each identity is made, and in words. */
static int identity_cred(enum isob_scrape_id id, struct isob_cred *cred, char *how, size_t len, char *why,
                         size_t whylen)
{
    int root = geteuid() == 0;
    cred->uid = -1;
    cred->flags = 0;
    cred->timeout_ms = ISOB_SCRAPE_READER_TIMEOUT_MS;
    switch (id) {
    case ISOB_SCR_ROOT:
    case ISOB_SCR_ROOT_NO_PTRACE:
    case ISOB_SCR_OTHER_UID:
        if (!root) {
            snprintf(why, whylen, "needs root (running as uid %ld)", (long)geteuid());
            return -EPERM;
        }
        break;
    default:
        break;
    }
    switch (id) {
    case ISOB_SCR_ROOT:
        snprintf(how, len, "a helper process as root, with every capability isob has");
        break;
    case ISOB_SCR_ROOT_NO_PTRACE:
        cred->flags = ISOB_CRED_DROP_SYS_PTRACE;
        snprintf(how, len, "a helper process as root, CAP_SYS_PTRACE dropped from every set");
        break;
    case ISOB_SCR_SAME_UID:
    case ISOB_SCR_SAME_UID_NONDUMPABLE:
        cred->uid = root ? ISOB_SCRAPE_TARGET_UID : -1;
        cred->flags = root ? 0 : ISOB_CRED_DROP_ALL_CAPS;
        snprintf(how, len, "a helper process of the target's uid, no capabilities%s",
                 id == ISOB_SCR_SAME_UID_NONDUMPABLE ? "; the target made non-dumpable" : "");
        break;
    case ISOB_SCR_OTHER_UID:
        cred->uid = ISOB_OSP_OTHER_UID;
        snprintf(how, len, "a helper process of uid and gid %d, no groups, no capabilities", ISOB_OSP_OTHER_UID);
        break;
    case ISOB_SCR_USERNS:
        cred->uid = root ? ISOB_SCRAPE_TARGET_UID : -1;
        cred->flags = ISOB_CRED_NEW_USERNS | (root ? 0 : ISOB_CRED_DROP_ALL_CAPS);
        snprintf(how, len, "a helper process of the target's uid in a new user namespace, "
                           "every capability there only");
        break;
    default:
        return -EINVAL;
    }
    return 0;
}

/* Whether a process is dumpable, from outside: the kernel makes the files
 * of a non-dumpable process's /proc/PID root's.  -1 when its uid is root's
 * anyway, or /proc cannot say. */
static int dumpable_of(pid_t pid, long uid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%ld/mem", (long)pid);
    if (uid == 0 || stat(path, &st) != 0)
        return -1;
    return (long)st.st_uid == uid ? 1 : st.st_uid == 0 ? 0 : -1;
}

static void read_as(struct isob_scrape_report *rep, enum isob_scrape_id id, const struct isob_canary *canary,
                    struct holder *target)
{
    struct isob_scrape_cell *cell = &rep->cells[id];
    struct isob_cred cred;
    char how[96] = "";
    if (identity_cred(id, &cred, how, sizeof how, cell->why, sizeof cell->why) != 0) {
        cell->intact_after = -1;
        cell->target_dumpable = -1;
        return;
    }
    int toggled = 0;
    if (id == ISOB_SCR_SAME_UID_NONDUMPABLE) {
        long r = holder_ask(target, CMD_NONDUMPABLE);
        if (r != 0) {
            snprintf(cell->why, sizeof cell->why, "the target could not make itself non-dumpable: %s",
                     isob_strerror(r));
            cell->intact_after = -1;
            cell->target_dumpable = -1;
            return;
        }
        toggled = 1;
    }
    cell->target_dumpable = dumpable_of((pid_t)rep->pid, rep->target_uid);
    struct reader_job job = {id, (pid_t)rep->pid, &rep->plan, rep->ptrace_pages, canary, rep->canary_addr};
    struct reader_report out;
    int rc = isob_osprobe_helper_cred(&cred, reader, &job, &out, sizeof out, cell->why, sizeof cell->why);
    if (rc == 0) {
        cell->available = 1;
        cell->who = out.who;
        snprintf(cell->who.how, sizeof cell->who.how, "%s", how);
        memcpy(cell->res, out.res, sizeof out.res);
    }
    if (toggled && holder_ask(target, CMD_DUMPABLE) != 0)
        snprintf(rep->reason, sizeof rep->reason, "the target could not make itself dumpable again");
    long sum = holder_ask(target, CMD_SUM);
    cell->intact_after = sum < 0 ? -1 : (uint32_t)sum == rep->sum_before;
}

static const char *holder_words(enum target_kind kind, const struct isob_mechanism *m, int self)
{
    switch (kind) {
    case T_PLAIN: return "an ordinary process, in its heap";
    case T_PIPE_WRITER: return "the writing process of a pipe pair, in its heap (it wrote the canary twice)";
    case T_PIPE_READER: return "the reading process of a pipe pair, in its heap (one more copy waits in the pipe)";
    default:
        if (self)
            return "the compartment's caller, whose process holds the trusted heap";
        return (m->props & ISOB_SEPARATE_AS) ? "the compartment's server process" : "the compartment's process";
    }
}

int isob_scrape_run(const char *target, const struct isob_scrape_opts *o, struct isob_scrape_report *rep)
{
    memset(rep, 0, sizeof *rep);
    snprintf(rep->target, sizeof rep->target, "%s", target);
    rep->euid = (long)geteuid();
    rep->yama = isob_yama_ptrace_scope();
    rep->budget = o && o->budget ? o->budget : ISOB_SCAN_DEFAULT_BUDGET;
    rep->ptrace_pages = o && o->ptrace_pages ? o->ptrace_pages : ISOB_SCAN_DEFAULT_PTRACE_PAGES;
    rep->status = "failed";
    for (int i = 0; i < ISOB_SCR__COUNT; i++)
        rep->cells[i].intact_after = rep->cells[i].target_dumpable = -1;
    const struct isob_mechanism *m;
    int kind = target_kind(target, &m);
    if (kind < 0) {
        snprintf(rep->reason, sizeof rep->reason, "no target '%s'", target);
        return -ENOENT;
    }
    rep->kind = kind == T_MECH ? "mechanism" : kind == T_PLAIN ? "process" : "pipe";

    struct isob_canary canary;
    int rc = isob_canary_new(&canary);
    if (rc) {
        snprintf(rep->reason, sizeof rep->reason, "getrandom: %s", isob_strerror(rc));
        return 0;
    }
    /* Every target process exists before the first reader is forked. */
    struct holder hs[2] = {{0, -1}, {0, -1}};
    struct holder_setup setups[2];
    struct holder *tgt = &hs[0];
    struct holder_setup *ts = &setups[0];
    memset(setups, 0, sizeof setups);
    if (kind == T_PIPE_WRITER || kind == T_PIPE_READER) {
        int data[2];
        if (pipe2(data, O_CLOEXEC) != 0) {
            snprintf(rep->reason, sizeof rep->reason, "pipe: %s", strerror(errno));
            return 0;
        }
        rc = holder_start(&hs[0], T_PIPE_WRITER, NULL, &canary, data[1], data[0], &setups[0], rep->reason,
                          sizeof rep->reason);
        if (rc == 0)
            rc = holder_start(&hs[1], T_PIPE_READER, NULL, &canary, data[0], data[1], &setups[1], rep->reason,
                              sizeof rep->reason);
        close(data[0]);
        close(data[1]);
        if (kind == T_PIPE_READER) {
            tgt = &hs[1];
            ts = &setups[1];
        }
    } else {
        rc = holder_start(&hs[0], (enum target_kind)kind, m, &canary, -1, -1, &setups[0], rep->reason,
                          sizeof rep->reason);
    }
    if (rc && ts->skipped) {
        rep->status = "skipped";
    } else if (rc == 0) {
        rep->pid = ts->pid;
        rep->canary_addr = (uintptr_t)ts->addr;
        rep->sum_before = ts->sum;
        rep->target_uid = ts->uid;
        rep->holder = holder_words((enum target_kind)kind, m, ts->pid == (long)tgt->pid);
        rc = isob_scan_plan_pid((pid_t)rep->pid, rep->budget, &rep->plan, rep->maps_why, sizeof rep->maps_why);
        rep->maps_read = rc == 0;
        if (rc) {
            /* The target's maps are closed to isob itself (not root, and a
             * non-dumpable server): only the canary's page is read. */
            isob_scan_plan_free(&rep->plan);
            memset(&rep->plan, 0, sizeof rep->plan);
            rep->plan.budget = rep->budget;
            rc = isob_scan_plan_add(&rep->plan, rep->canary_addr, rep->canary_addr + ISOB_CANARY_LEN);
        }
        rep->canary_in_plan = isob_scan_plan_covers(&rep->plan, rep->canary_addr);
        if (rc) {
            snprintf(rep->reason, sizeof rep->reason, "planning the reads: %s", isob_strerror(rc));
        } else {
            for (int id = 0; id < ISOB_SCR__COUNT; id++)
                read_as(rep, (enum isob_scrape_id)id, &canary, tgt);
            rep->status = "ok";
            /* A target that can no longer say its checksum has died (or
             * its compartment has): its cells say nothing reliable. */
            for (int id = 0; id < ISOB_SCR__COUNT; id++)
                if (rep->cells[id].available && rep->cells[id].intact_after < 0) {
                    rep->status = "failed";
                    snprintf(rep->reason, sizeof rep->reason,
                             "the target stopped answering while %s read it",
                             isob_scrape_id_name((enum isob_scrape_id)id));
                    break;
                }
        }
    }
    holder_stop(&hs[0]);
    holder_stop(&hs[1]);
    explicit_bzero(&canary, sizeof canary);
    return 0;
}

void isob_scrape_report_free(struct isob_scrape_report *rep)
{
    isob_scan_plan_free(&rep->plan);
}

/* ---- output ---- */

static void emit_tri(struct isob_jw *w, const char *key, int v)
{
    if (v < 0)
        isob_jw_raw(w, key, "null");
    else
        isob_jw_bool(w, key, v);
}

static void emit_addr(struct isob_jw *w, const char *key, uintptr_t a)
{
    char buf[32];
    snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)a);
    isob_jw_str(w, key, buf);
}

static void emit_method(struct isob_jw *w, int m, const struct isob_scan_result *r)
{
    static const char *const outcomes[] = {"untested", "denied", "granted"};
    isob_jw_obj(w, NULL);
    isob_jw_str(w, "method", isob_scan_method_name((enum isob_scan_method)m));
    isob_jw_str(w, "how", isob_scan_method_how((enum isob_scan_method)m));
    isob_jw_str(w, "outcome", outcomes[r->outcome]);
    isob_jw_str(w, "errno", r->err ? isob_errno_name(r->err) : NULL);
    isob_jw_int(w, "bytes", (long long)r->bytes);
    isob_jw_int(w, "planned", (long long)r->planned);
    isob_jw_int(w, "ranges", r->ranges);
    isob_jw_int(w, "pages_failed", r->pages_failed);
    isob_jw_str(w, "fail_errno", r->pages_failed ? isob_errno_name(r->fail_err) : NULL);
    isob_jw_int(w, "found", r->found);
    isob_jw_bool(w, "at_canary", r->at_canary);
    if (r->found)
        emit_addr(w, "first_found", r->first_found);
    else
        isob_jw_raw(w, "first_found", "null");
    isob_jw_str(w, "note", r->note[0] ? r->note : NULL);
    isob_jw_close(w, '}');
}

void isob_scrape_emit(FILE *f, const struct isob_scrape_report *rep)
{
    struct isob_jw w;
    isob_jw_begin(&w, f, "scrape");
    isob_jw_int(&w, "scrape_version", ISOB_SCRAPE_VERSION);
    isob_jw_str(&w, "target", rep->target);
    isob_jw_str(&w, "kind", rep->kind);
    isob_jw_str(&w, "status", rep->status);
    isob_jw_str(&w, "reason", rep->reason[0] ? rep->reason : NULL);
    isob_jw_int(&w, "euid", rep->euid);
    if (rep->yama < 0)
        isob_jw_raw(&w, "yama_ptrace_scope", "null");
    else
        isob_jw_int(&w, "yama_ptrace_scope", rep->yama);
    isob_jw_int(&w, "canary_len", ISOB_CANARY_LEN);
    isob_jw_int(&w, "budget", (long long)rep->budget);
    isob_jw_int(&w, "ptrace_pages", rep->ptrace_pages);
    if (!rep->holder) {
        /* Never set up: nothing was read. */
        isob_jw_raw(&w, "cells", "[]");
        isob_jw_end(&w);
        return;
    }
    isob_jw_str(&w, "holder", rep->holder);
    isob_jw_int(&w, "pid", rep->pid);
    isob_jw_int(&w, "target_uid", rep->target_uid);
    emit_addr(&w, "canary_address", rep->canary_addr);
    isob_jw_obj(&w, "maps");
    isob_jw_str(&w, "source", rep->maps_read ? "/proc/PID/smaps" : NULL);
    isob_jw_str(&w, "why_not", rep->maps_read ? NULL : rep->maps_why);
    isob_jw_int(&w, "mappings", (long long)rep->plan.mappings);
    isob_jw_int(&w, "ranges", (long long)rep->plan.n);
    isob_jw_int(&w, "bytes", (long long)rep->plan.bytes);
    isob_jw_bool(&w, "truncated", rep->plan.truncated);
    isob_jw_bool(&w, "canary_in_plan", rep->canary_in_plan);
    isob_jw_obj(&w, "skipped");
    for (int c = 1; c < ISOB_MAP__COUNT; c++)
        isob_jw_int(&w, isob_map_class_name((enum isob_map_class)c), (long long)rep->plan.skipped[c]);
    isob_jw_close(&w, '}');
    isob_jw_close(&w, '}');
    isob_jw_arr(&w, "cells");
    for (int id = 0; id < ISOB_SCR__COUNT; id++) {
        const struct isob_scrape_cell *cell = &rep->cells[id];
        isob_jw_obj(&w, NULL);
        isob_jw_str(&w, "identity", isob_scrape_id_name((enum isob_scrape_id)id));
        isob_jw_bool(&w, "available", cell->available);
        isob_jw_str(&w, "why", cell->available || !cell->why[0] ? NULL : cell->why);
        if (cell->available) {
            isob_jw_str(&w, "how", cell->who.how);
            isob_jw_int(&w, "uid", cell->who.uid);
            isob_jw_int(&w, "gid", cell->who.gid);
            isob_jw_bool(&w, "cap_sys_ptrace", cell->who.cap_sys_ptrace);
            isob_jw_bool(&w, "userns", cell->who.userns);
        }
        emit_tri(&w, "target_dumpable", cell->target_dumpable);
        emit_tri(&w, "intact_after", cell->intact_after);
        isob_jw_arr(&w, "methods");
        if (cell->available)
            for (int m = 0; m < ISOB_SCAN__COUNT; m++)
                emit_method(&w, m, &cell->res[m]);
        isob_jw_close(&w, ']');
        isob_jw_close(&w, '}');
    }
    isob_jw_close(&w, ']');
    isob_jw_end(&w);
}
