/* OS-level probes (see include/isobench/osprobe.h). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>

#include "isobench/error.h"
#include "isobench/osprobe.h"
#include "osprobe_internal.h"

/* How long a ptrace'd target may take to stop after PTRACE_INTERRUPT. */
#define OSP_STOP_TIMEOUT_MS 2000

static const char *const probe_names[ISOB_OSP__COUNT] = {
    [ISOB_OSP_VM_READV] = "process_vm_readv",
    [ISOB_OSP_VM_WRITEV] = "process_vm_writev",
    [ISOB_OSP_MEM_READ] = "/proc/PID/mem read",
    [ISOB_OSP_MEM_WRITE] = "/proc/PID/mem write",
    [ISOB_OSP_PTRACE_PEEK] = "ptrace PEEKDATA",
    [ISOB_OSP_PIDFD_GETFD] = "pidfd_getfd",
};

static const char *const identity_names[ISOB_ID__COUNT] = {
    [ISOB_ID_SAME_UID] = "same-uid",
    [ISOB_ID_OTHER_UID] = "other-uid",
    [ISOB_ID_ROOT] = "root",
};

const char *isob_osprobe_name(enum isob_osprobe p)
{
    return (unsigned)p < ISOB_OSP__COUNT ? probe_names[p] : "?";
}

const char *isob_identity_name(enum isob_identity id)
{
    return (unsigned)id < ISOB_ID__COUNT ? identity_names[id] : "?";
}

/* A failed system call: ENOSYS (and ENOENT for a /proc that is not
 * mounted) mean the probe could not be tried; anything else is the
 * kernel's refusal. */
static void failed(struct isob_osprobe_result *r, int err)
{
    r->outcome = err == ENOSYS ? ISOB_OSP_UNTESTED : ISOB_OSP_DENIED;
    r->err = err;
}

static void granted_read(struct isob_osprobe_result *r, const struct isob_osprobe_target *t, uint64_t v)
{
    r->outcome = ISOB_OSP_GRANTED;
    r->secret_seen = v == t->secret;
    if (!r->secret_seen)
        snprintf(r->note, sizeof r->note, "read other data (0x%llx)", (unsigned long long)v);
}

/* After a write of ~secret landed: put the secret back with the same
 * channel, so that the next probe and the target find it as it was. */
static void landed(struct isob_osprobe_result *r, ssize_t restore_n)
{
    r->outcome = ISOB_OSP_GRANTED;
    r->secret_changed = 1;
    r->restored = restore_n == (ssize_t)sizeof(uint64_t);
    if (!r->restored)
        snprintf(r->note, sizeof r->note, "wrote the secret but could not write it back: %s",
                 restore_n < 0 ? isob_strerror(errno) : "short write");
}

static ssize_t vm_rw(pid_t pid, uintptr_t addr, uint64_t *v, int write)
{
    struct iovec local = {v, sizeof *v}, remote = {(void *)addr, sizeof *v};
    return write ? process_vm_writev(pid, &local, 1, &remote, 1, 0)
                 : process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

static void probe_vm(const struct isob_osprobe_target *t, struct isob_osprobe_result *r, int write)
{
    uint64_t v = write ? ~t->secret : 0;
    ssize_t n = vm_rw(t->pid, t->addr, &v, write);
    if (n < 0) {
        failed(r, errno);
        return;
    }
    if (n != (ssize_t)sizeof v) {
        r->outcome = ISOB_OSP_GRANTED;
        snprintf(r->note, sizeof r->note, "moved %zd of 8 bytes", n);
        return;
    }
    if (!write) {
        granted_read(r, t, v);
        return;
    }
    uint64_t back = t->secret;
    landed(r, vm_rw(t->pid, t->addr, &back, 1));
}

static void probe_mem(const struct isob_osprobe_target *t, struct isob_osprobe_result *r, int write)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/mem", (long)t->pid);
    int fd = open(path, (write ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        failed(r, err);
        /* Without /proc there is nothing to refuse: not a denial. */
        if (err == ENOENT && access("/proc/self/mem", F_OK) != 0) {
            r->outcome = ISOB_OSP_UNTESTED;
            snprintf(r->note, sizeof r->note, "/proc is not mounted");
        }
        return;
    }
    uint64_t v = write ? ~t->secret : 0;
    ssize_t n = write ? pwrite(fd, &v, sizeof v, (off_t)t->addr) : pread(fd, &v, sizeof v, (off_t)t->addr);
    if (n < 0) {
        failed(r, errno);
        snprintf(r->note, sizeof r->note, "opened, then %s failed", write ? "pwrite" : "pread");
    } else if (n != (ssize_t)sizeof v) {
        r->outcome = ISOB_OSP_GRANTED;
        snprintf(r->note, sizeof r->note, "moved %zd of 8 bytes", n);
    } else if (!write) {
        granted_read(r, t, v);
    } else {
        uint64_t back = t->secret;
        landed(r, pwrite(fd, &back, sizeof back, (off_t)t->addr));
    }
    close(fd);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

int isob_ptrace_stop(pid_t pid, int *status, char *note, size_t notelen)
{
    if (ptrace(PTRACE_SEIZE, pid, 0, 0) != 0)
        return -errno;
    *status = 0;
    if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) == 0) {
        for (int waited = 0; waited < OSP_STOP_TIMEOUT_MS; waited++) {
            pid_t w = waitpid(pid, status, __WALL | WNOHANG);
            if (w == pid && WIFSTOPPED(*status))
                return 0;
            if (w < 0 && errno != EINTR)
                break;
            sleep_ms(1);
        }
    }
    /* Leaving the prober (thread or helper) detaches the target. */
    snprintf(note, notelen, "attached, but the target did not stop");
    return 1;
}

void isob_ptrace_release(pid_t pid, int status)
{
    /* A signal that arrived while attaching is handed back on detaching;
     * the interrupt's own stop carries none. */
    int sig = (status >> 16) == 0 && WSTOPSIG(status) != SIGTRAP ? WSTOPSIG(status) : 0;
    ptrace(PTRACE_DETACH, pid, 0, (void *)(long)sig);
}

static void probe_ptrace(const struct isob_osprobe_target *t, struct isob_osprobe_result *r)
{
    int status;
    int rc = isob_ptrace_stop(t->pid, &status, r->note, sizeof r->note);
    if (rc < 0) {
        failed(r, -rc);
        if (t->pid == getpid())
            snprintf(r->note, sizeof r->note, "the prober runs in the target process, which cannot trace itself");
        return;
    }
    r->outcome = ISOB_OSP_GRANTED;
    if (rc > 0)
        return;
    errno = 0;
    long word = ptrace(PTRACE_PEEKDATA, t->pid, (void *)t->addr, 0);
    int err = errno;
    isob_ptrace_release(t->pid, status);
    if (err) {
        r->err = err;
        snprintf(r->note, sizeof r->note, "attached, then PEEKDATA failed: %s", isob_strerror(err));
        r->outcome = ISOB_OSP_DENIED;
        return;
    }
    granted_read(r, t, (uint64_t)word);
}

static void probe_pidfd(const struct isob_osprobe_target *t, struct isob_osprobe_result *r)
{
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
    int pidfd = (int)syscall(SYS_pidfd_open, t->pid, 0);
    if (pidfd < 0) {
        failed(r, errno);
        r->outcome = ISOB_OSP_UNTESTED;
        snprintf(r->note, sizeof r->note, "pidfd_open failed");
        return;
    }
    int fd = (int)syscall(SYS_pidfd_getfd, pidfd, t->fd, 0);
    int err = errno;
    close(pidfd);
    if (fd >= 0) {
        close(fd);
        r->outcome = ISOB_OSP_GRANTED;
        snprintf(r->note, sizeof r->note, "took a copy of its descriptor %d", t->fd);
    } else if (err == EBADF) {
        /* The access check comes first: EBADF means it passed and the
         * descriptor is simply not open there. */
        r->outcome = ISOB_OSP_GRANTED;
        snprintf(r->note, sizeof r->note, "access granted; its descriptor %d is not open", t->fd);
    } else {
        failed(r, err);
    }
#else
    (void)t;
    r->outcome = ISOB_OSP_UNTESTED;
    r->err = ENOSYS;
    snprintf(r->note, sizeof r->note, "built without pidfd_getfd");
#endif
}

int isob_osprobe_run(enum isob_osprobe p, const struct isob_osprobe_target *t,
                     struct isob_osprobe_result *r)
{
    memset(r, 0, sizeof *r);
    switch (p) {
    case ISOB_OSP_VM_READV: probe_vm(t, r, 0); break;
    case ISOB_OSP_VM_WRITEV: probe_vm(t, r, 1); break;
    case ISOB_OSP_MEM_READ: probe_mem(t, r, 0); break;
    case ISOB_OSP_MEM_WRITE: probe_mem(t, r, 1); break;
    case ISOB_OSP_PTRACE_PEEK: probe_ptrace(t, r); break;
    case ISOB_OSP_PIDFD_GETFD: probe_pidfd(t, r); break;
    default:
        r->err = EINVAL;
        break;
    }
    return 0;
}

/* ---- identities ---- */

static int cap_effective(unsigned cap)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capget, &hdr, data) != 0)
        return 0;
    return (data[cap / 32].effective >> (cap % 32)) & 1;
}

static int caps_none(void)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capget, &hdr, data) != 0)
        return 0;
    for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
        if (data[i].effective || data[i].permitted)
            return 0;
    return 1;
}

static void fill_who(struct isob_identity_info *info)
{
    info->uid = (long)getuid();
    info->gid = (long)getgid();
    info->cap_sys_ptrace = cap_effective(CAP_SYS_PTRACE);
    info->available = 1;
}

void isob_identity_self(struct isob_identity_info *info)
{
    fill_who(info);
}

/* CAP_SYS_PTRACE out of every set of the calling thread; the others stay. */
static int drop_sys_ptrace(void)
{
    if (prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0) != 0 && errno != EINVAL)
        return -errno;
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, CAP_SYS_PTRACE, 0, 0);
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capget, &hdr, data) != 0)
        return -errno;
    unsigned w = CAP_SYS_PTRACE / 32, bit = 1u << (CAP_SYS_PTRACE % 32);
    data[w].effective &= ~bit;
    data[w].permitted &= ~bit;
    data[w].inheritable &= ~bit;
    if (syscall(SYS_capset, &hdr, data) != 0)
        return -errno;
    return cap_effective(CAP_SYS_PTRACE) ? -EPERM : 0;
}

/* Every capability out of every set, the bounding set included. */
static int drop_all_caps(void)
{
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL && errno != EPERM)
            return -errno;
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3];
    memset(none, 0, sizeof none);
    if (syscall(SYS_capset, &hdr, none) != 0)
        return -errno;
    return caps_none() ? 0 : -EPERM;
}

static void run_all(const struct isob_osprobe_target *t, struct isob_osprobe_result *res)
{
    for (int p = 0; p < ISOB_OSP__COUNT; p++)
        isob_osprobe_run((enum isob_osprobe)p, t, &res[p]);
}

struct same_uid_job {
    const struct isob_osprobe_target *t;
    struct isob_osprobe_result *res;
    struct isob_identity_info *info;
    int rc;
};

/* The same-uid prober: a thread of the caller that gives up every
 * capability.  capset through the raw system call changes the calling
 * thread's credentials only, so the caller's other threads keep theirs,
 * and they go away with this thread.  Being a thread of the caller it has
 * the caller's place in the process tree too: it is an ancestor of the
 * caller's children, as Yama's ptrace_scope 1 asks of a tracer. */
static void *same_uid_thread(void *arg)
{
    struct same_uid_job *j = arg;
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3];
    memset(none, 0, sizeof none);
    if (syscall(SYS_capset, &hdr, none) != 0 || !caps_none()) {
        j->rc = errno ? -errno : -EPERM;
        snprintf(j->info->why, sizeof j->info->why, "cannot drop the prober thread's capabilities: %s",
                 isob_strerror(j->rc));
        return NULL;
    }
    fill_who(j->info);
    snprintf(j->info->how, sizeof j->info->how, "a thread of the caller, uid %ld, no capabilities",
             j->info->uid);
    run_all(j->t, j->res);
    return NULL;
}

static int as_same_uid(const struct isob_osprobe_target *t, struct isob_osprobe_result *res,
                       struct isob_identity_info *info)
{
    struct same_uid_job j = {t, res, info, 0};
    pthread_t th;
    int rc = pthread_create(&th, NULL, same_uid_thread, &j);
    if (rc) {
        snprintf(info->why, sizeof info->why, "cannot start the prober thread: %s", strerror(rc));
        return -rc;
    }
    pthread_join(th, NULL);
    return j.rc;
}

int isob_osprobe_helper(long uid, void (*fn)(void *arg, void *out), void *arg, void *out, size_t len,
                        char *why, size_t whylen)
{
    struct isob_cred cred = {uid, 0, 0};
    return isob_osprobe_helper_cred(&cred, fn, arg, out, len, why, whylen);
}

/* The helper's report starts with the result of its change of credentials. */
struct helper_hdr {
    int rc;
    char why[160];
};

/* In the helper: become what cred says, in the order of osprobe.h. */
static void become(const struct isob_cred *cred, struct helper_hdr *hdr)
{
    long uid = cred->uid;
    if (uid >= 0) {
        if (setgroups(0, NULL) != 0 || setresgid((gid_t)uid, (gid_t)uid, (gid_t)uid) != 0 ||
            setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) != 0) {
            hdr->rc = -errno;
            snprintf(hdr->why, sizeof hdr->why, "cannot switch to uid %ld: %s", uid, isob_strerror(hdr->rc));
            return;
        }
        if (!caps_none()) {
            hdr->rc = -EPERM;
            snprintf(hdr->why, sizeof hdr->why, "uid %ld still holds capabilities: not unprivileged", uid);
            return;
        }
        if (prctl(PR_SET_DUMPABLE, 1) != 0) {
            /* Changing uid made the helper non-dumpable; an ordinary
             * process of that uid is not, and the helper stands for one. */
            hdr->rc = -errno;
            snprintf(hdr->why, sizeof hdr->why, "PR_SET_DUMPABLE 1: %s", isob_strerror(hdr->rc));
            return;
        }
    }
    if ((cred->flags & ISOB_CRED_DROP_ALL_CAPS) && (hdr->rc = drop_all_caps()) != 0) {
        snprintf(hdr->why, sizeof hdr->why, "cannot drop every capability: %s", isob_strerror(hdr->rc));
        return;
    }
    if ((cred->flags & ISOB_CRED_DROP_SYS_PTRACE) && (hdr->rc = drop_sys_ptrace()) != 0) {
        snprintf(hdr->why, sizeof hdr->why, "cannot drop CAP_SYS_PTRACE: %s", isob_strerror(hdr->rc));
        return;
    }
    if ((cred->flags & ISOB_CRED_NEW_USERNS) && unshare(CLONE_NEWUSER) != 0) {
        hdr->rc = -errno;
        snprintf(hdr->why, sizeof hdr->why,
                 "unshare(CLONE_NEWUSER) as uid %ld: %s (user namespaces disabled or restricted here)",
                 (long)getuid(), isob_strerror(hdr->rc));
    }
}

int isob_osprobe_helper_cred(const struct isob_cred *cred, void (*fn)(void *arg, void *out), void *arg,
                             void *out, size_t len, char *why, size_t whylen)
{
    if (len > PIPE_BUF) {
        snprintf(why, whylen, "a helper's report must fit in PIPE_BUF");
        return -EINVAL;
    }
    if (cred->uid >= 0 && geteuid() != 0) {
        snprintf(why, whylen, "switching to uid %ld needs root (running as uid %ld)", cred->uid,
                 (long)geteuid());
        return -EPERM;
    }
    int timeout_ms = cred->timeout_ms > 0 ? cred->timeout_ms : ISOB_HELPER_TIMEOUT_MS;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        int err = -errno;
        snprintf(why, whylen, "pipe: %s", isob_strerror(err));
        return err;
    }
    pid_t parent = getpid();
    /* Buffered output would otherwise be written twice, once by each. */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int err = -errno;
        close(pfd[0]);
        close(pfd[1]);
        snprintf(why, whylen, "fork: %s", isob_strerror(err));
        return err;
    }
    if (pid == 0) {
        close(pfd[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        struct helper_hdr hdr = {0, ""};
        become(cred, &hdr);
        if (write(pfd[1], &hdr, sizeof hdr) != (ssize_t)sizeof hdr)
            _exit(1);
        if (hdr.rc == 0) {
            memset(out, 0, len);
            fn(arg, out);
            if (write(pfd[1], out, len) != (ssize_t)len)
                _exit(1);
        }
        _exit(0);
    }
    close(pfd[1]);
    struct helper_hdr hdr = {0, ""};
    int rc = 0;
    size_t want[2] = {sizeof hdr, len};
    void *into[2] = {&hdr, out};
    for (int part = 0; part < 2 && rc == 0; part++) {
        struct pollfd p = {pfd[0], POLLIN, 0};
        int ready;
        do
            ready = poll(&p, 1, timeout_ms);
        while (ready < 0 && errno == EINTR);
        ssize_t n = ready > 0 ? read(pfd[0], into[part], want[part]) : -1;
        if (ready <= 0) {
            snprintf(why, whylen, "the helper gave no report within %d ms", timeout_ms);
            rc = -ETIMEDOUT;
        } else if (n != (ssize_t)want[part]) {
            snprintf(why, whylen, "the helper ended without a report");
            rc = -EIO;
        } else if (part == 0 && hdr.rc != 0) {
            snprintf(why, whylen, "%s", hdr.why);
            rc = hdr.rc;
        }
    }
    close(pfd[0]);
    if (rc == -ETIMEDOUT)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (rc == -EIO && WIFSIGNALED(status))
        snprintf(why, whylen, "the helper died of signal %d", WTERMSIG(status));
    return rc;
}

/* What a prober helper sends back. */
struct helper_report {
    struct isob_identity_info info;
    struct isob_osprobe_result res[ISOB_OSP__COUNT];
};

struct helper_job {
    enum isob_identity id;
    const struct isob_osprobe_target *t;
};

static void helper_probe(void *arg, void *out)
{
    const struct helper_job *j = arg;
    struct helper_report *rep = out;
    if (j->id == ISOB_ID_OTHER_UID)
        snprintf(rep->info.how, sizeof rep->info.how, "a helper process, uid and gid %d, no groups",
                 ISOB_OSP_OTHER_UID);
    else
        snprintf(rep->info.how, sizeof rep->info.how, "a helper process as root");
    fill_who(&rep->info);
    run_all(j->t, rep->res);
}

static int as_helper(enum isob_identity id, const struct isob_osprobe_target *t,
                     struct isob_osprobe_result *res, struct isob_identity_info *info)
{
    if (geteuid() != 0) {
        snprintf(info->why, sizeof info->why, "%s needs root (running as uid %ld)",
                 id == ISOB_ID_ROOT ? "probing as root" : "switching to another uid", (long)geteuid());
        return -EPERM;
    }
    struct helper_job j = {id, t};
    struct helper_report rep;
    char why[160] = "";
    int rc = isob_osprobe_helper(id == ISOB_ID_OTHER_UID ? ISOB_OSP_OTHER_UID : -1, helper_probe, &j, &rep,
                                 sizeof rep, why, sizeof why);
    if (rc) {
        snprintf(info->why, sizeof info->why, "%s", why);
        return rc;
    }
    *info = rep.info;
    memcpy(res, rep.res, sizeof rep.res);
    return 0;
}

int isob_osprobe_as(enum isob_identity id, const struct isob_osprobe_target *t,
                    struct isob_osprobe_result res[ISOB_OSP__COUNT], struct isob_identity_info *info)
{
    memset(info, 0, sizeof *info);
    memset(res, 0, sizeof(struct isob_osprobe_result) * ISOB_OSP__COUNT);
    int rc;
    switch (id) {
    case ISOB_ID_SAME_UID:
        rc = as_same_uid(t, res, info);
        break;
    case ISOB_ID_OTHER_UID:
    case ISOB_ID_ROOT:
        rc = as_helper(id, t, res, info);
        break;
    default:
        snprintf(info->why, sizeof info->why, "no such identity");
        rc = -EINVAL;
        break;
    }
    info->available = rc == 0;
    return rc;
}

int isob_yama_ptrace_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    if (!f)
        return -1;
    int v = -1;
    if (fscanf(f, "%d", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}
