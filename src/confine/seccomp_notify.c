/* seccomp-notify: a seccomp user-notification filter with a supervisor
 * process holding its listener, the design of container supervisors that
 * emulate or vet calls in user space (LXD, gVisor's seccomp mode,
 * systemd-nspawn's mknod).  Variants:
 *
 *   idle  the filter notifies only the probe call, which the benchmark never
 *         makes: the cost of merely having a supervisor;
 *   trap  the filter notifies every call of the measured regions, and the
 *         supervisor lets each one run (SECCOMP_USER_NOTIF_FLAG_CONTINUE):
 *         the upper bound, two context switches per call.
 *
 * The supervisor is forked before the filter exists, so that none of its
 * own calls is ever notified to itself; it takes the listener from the
 * measuring process with pidfd_getfd().  It counts what it answers in a
 * shared page, so that every result can say how many calls it saw.
 * Verified by /proc/self/status (one more filter) and by the probe call
 * reaching the supervisor exactly once. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <linux/seccomp.h>

#include "isobench/confine.h"
#include "isobench/futex.h"
#include "isobench/mechanism.h"

/* How long set-up waits for the supervisor before giving up. */
#define SN_SETUP_TIMEOUT_MS 5000

enum { SN_IDLE = 0, SN_TRAP = 1 };
static const char *const sn_variants[] = {"idle", "trap", NULL};

#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif

static int sn_probe(char *why, size_t len)
{
    unsigned action = SECCOMP_RET_USER_NOTIF;
    if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) != 0) {
        snprintf(why, len, "seccomp user notification unavailable: %s (needs Linux 5.0)",
                 isob_strerror(-errno));
        return -ENOTSUP;
    }
    /* pidfd_getfd on a bad pidfd: EBADF where the call exists. */
    if (syscall(SYS_pidfd_getfd, -1, 0, 0) == 0 || errno == ENOSYS) {
        snprintf(why, len, "pidfd_getfd() unavailable (needs Linux 5.6)");
        return -ENOTSUP;
    }
    return 0;
}

/* Wait for the measurer's word (no time-out: if the measurer fails first,
 * it dies, and the supervisor with it). */
static void sn_wait_word(struct isob_confine_page *pg, uint32_t want)
{
    for (uint32_t w; (w = isob_load(&pg->word)) < want;)
        isob_futex_wait(&pg->word, w, 0);
}

/* The supervisor: prove that it can take a descriptor from the measurer
 * while no filter exists yet, take the listener, then answer every
 * notification with "continue" and count it. */
static int sn_serve(struct isob_confine_state *st)
{
    struct isob_confine_page *pg = st->page;
    sn_wait_word(pg, ISOB_CONFINE_HELPER_GO);
    int pidfd = (int)syscall(SYS_pidfd_open, getppid(), 0);
    int test = pidfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pidfd, pg->fd, 0);
    pg->err = test < 0 ? -errno : 0;
    isob_confine_post(pg, ISOB_CONFINE_HELPER_ATTACHED);
    if (test < 0)
        return 1;
    close(test);
    sn_wait_word(pg, ISOB_CONFINE_HELPER_FD);
    int fd = (int)syscall(SYS_pidfd_getfd, pidfd, pg->fd, 0);
    pg->err = fd < 0 ? -errno : 0;
    isob_confine_post(pg, ISOB_CONFINE_HELPER_READY);
    if (fd < 0)
        return 1;
    close(pidfd);
    struct seccomp_notif req;
    struct seccomp_notif_resp resp;
    for (;;) {
        /* The kernel insists on a zeroed request. */
        memset(&req, 0, sizeof req);
        if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) {
            if (errno == EINTR || errno == ENOENT)
                continue;
            return 0;
        }
        __atomic_add_fetch(&pg->events, 1, __ATOMIC_RELEASE);
        memset(&resp, 0, sizeof resp);
        resp.id = req.id;
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        /* ENOENT: the caller died or was interrupted meanwhile; nothing to do. */
        ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    }
}

static int sn_apply(struct isob_confine_state *st, const struct isob_confine_req *req, char *why,
                    size_t len)
{
    st->page = isob_map(4096, 1);
    if (!st->page) {
        snprintf(why, len, "cannot map the supervisor's page");
        return -ENOMEM;
    }
    st->helper = isob_confine_helper(st, req->helper_cpu, sn_serve);
    if (st->helper < 0) {
        int rc = (int)st->helper;
        st->helper = 0;
        snprintf(why, len, "fork of the supervisor: %s", isob_strerror(rc));
        return rc;
    }
    /* Once the filter is in place a trapped call waits for the supervisor,
     * and if the supervisor could not take the listener nothing would ever
     * answer: so it first proves it can take a descriptor while nothing
     * is trapped yet. */
    int testfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (testfd < 0) {
        int rc = -errno;
        snprintf(why, len, "open(/dev/null): %s", isob_strerror(rc));
        isob_confine_helper_stop(st);
        return rc;
    }
    st->page->fd = testfd;
    isob_confine_post(st->page, ISOB_CONFINE_HELPER_GO);
    int rc = isob_confine_wait(st, ISOB_CONFINE_HELPER_ATTACHED, SN_SETUP_TIMEOUT_MS);
    if (rc == 0 && st->page->err)
        rc = st->page->err;
    close(testfd);
    if (rc) {
        snprintf(why, len, "the supervisor cannot take descriptors from this process: %s",
                 isob_strerror(rc));
        isob_confine_helper_stop(st);
        return rc;
    }
    struct isob_bpf b = {0};
    isob_bpf_prologue(&b);
    size_t n = st->variant == SN_TRAP ? req->ncalls : 0;
    isob_bpf_match(&b, req->calls, n, SECCOMP_RET_USER_NOTIF, SECCOMP_RET_ALLOW);
    st->rules = (int)n + 1;
    st->traps_calls = st->variant == SN_TRAP;
    int fd = isob_bpf_load(&b, SECCOMP_FILTER_FLAG_NEW_LISTENER);
    isob_bpf_free(&b);
    if (fd < 0) {
        snprintf(why, len, "installing the notification filter: %s", isob_strerror(fd));
        isob_confine_helper_stop(st);
        return fd;
    }
    /* No trapped call until the supervisor holds the listener (futex is
     * never trapped). */
    st->page->fd = fd;
    isob_confine_post(st->page, ISOB_CONFINE_HELPER_FD);
    rc = isob_confine_wait(st, ISOB_CONFINE_HELPER_READY, SN_SETUP_TIMEOUT_MS);
    if (rc == 0 && st->page->err)
        rc = st->page->err;
    if (rc) {
        /* Trapped calls would now wait forever on a listener this process
         * holds itself; the test above makes that next to impossible, and
         * the measuring process's parent ends it when its time is up. */
        snprintf(why, len, "the supervisor did not take the listener: %s", isob_strerror(rc));
        return rc;
    }
    close(fd);
    return 0;
}

static int sn_verify(struct isob_confine_state *st, char *why, size_t len)
{
    int rc = isob_confine_check_filters(st, 1, why, len);
    if (rc)
        return rc;
    if (!st->page || st->helper <= 0 || kill(st->helper, 0) != 0 ||
        waitpid(st->helper, NULL, WNOHANG) != 0) {
        snprintf(why, len, "no supervisor is alive");
        return -ESRCH;
    }
    isob_evidence(st, "supervisor_pid", "%d", (int)st->helper);
    isob_evidence(st, "notified_calls", "%d", st->rules);
    uint64_t before = isob_confine_events(st);
    long r = syscall(ISOB_CONFINE_PROBE_NR, ISOB_CONFINE_PROBE_ARG);
    int err = r < 0 ? errno : 0;
    uint64_t seen = isob_confine_events(st) - before;
    isob_evidence(st, "probe_notifications", "%llu", (unsigned long long)seen);
    if (err || seen != 1) {
        snprintf(why, len, "the probe call %s and reached the supervisor %llu times, not once",
                 err ? isob_strerror(-err) : "ran", (unsigned long long)seen);
        return -EPROTO;
    }
    return 0;
}

const struct isob_confinement isob_confine_seccomp_notify = {
    .name = "seccomp-notify",
    .summary = "seccomp user-notification filter with a supervisor: idle, or trapping the measured calls",
    .threat = "a supervisor process vets system calls in user space (here it lets every one "
              "run): the cost of the mechanism, not a policy; idle notifies no measured call",
    .variants = sn_variants,
    .probe = sn_probe,
    .apply = sn_apply,
    .verify = sn_verify,
};
