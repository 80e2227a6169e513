/* ptrace: a tracer process attached to the measuring process (and, through
 * PTRACE_O_TRACEFORK/VFORK/CLONE, to every process it starts), stopping
 * it on the measured calls with a SECCOMP_RET_TRACE filter.  This is the
 * design of ptrace-based sandboxes and monitors (gVisor's ptrace platform,
 * strace --seccomp-bpf): the filter decides which calls stop, the tracer
 * sees each and lets it go on.  Signals to a traced process pass through
 * the tracer too, as they do in any such sandbox.
 *
 * The tracer is forked first, attaches with PTRACE_SEIZE and
 * PTRACE_O_EXITKILL (if it dies, the traced processes die with it) and
 * counts the seccomp stops in a shared page.  Verified by TracerPid in
 * /proc/self/status naming the tracer and by the probe call stopping
 * exactly once. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/seccomp.h>

#include "isobench/confine.h"
#include "isobench/futex.h"
#include "isobench/mechanism.h"
#include "isobench/server.h"

/* How long set-up waits for the tracer to attach. */
#define PT_SETUP_TIMEOUT_MS 5000

static const char *const pt_variants[] = {"seccomp-trace", NULL};

static int pt_probe(char *why, size_t len)
{
    unsigned action = SECCOMP_RET_TRACE;
    if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) != 0) {
        snprintf(why, len, "SECCOMP_RET_TRACE unavailable: %s", isob_strerror(-errno));
        return -ENOTSUP;
    }
    long tracer = 0;
    if (isob_status_field("TracerPid", &tracer) == 0 && tracer != 0) {
        snprintf(why, len, "the process is already traced by pid %ld", tracer);
        return -EBUSY;
    }
    return 0;
}

/* The tracer: attach to the parent, then let every stop go on, counting
 * the seccomp ones and handing signals through. */
static int pt_trace(struct isob_confine_state *st)
{
    struct isob_confine_page *pg = st->page;
    for (uint32_t w; (w = isob_load(&pg->word)) < ISOB_CONFINE_HELPER_GO;)
        isob_futex_wait(&pg->word, w, 0);
    const long opts = PTRACE_O_TRACESECCOMP | PTRACE_O_EXITKILL | PTRACE_O_TRACEFORK |
                      PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE;
    pg->err = ptrace(PTRACE_SEIZE, getppid(), 0, opts) == 0 ? 0 : -errno;
    isob_confine_post(pg, ISOB_CONFINE_HELPER_READY);
    if (pg->err)
        return 1;
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, __WALL);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            return 0; /* nothing left to trace */
        }
        if (!WIFSTOPPED(status))
            continue;
        int event = status >> 16;
        if (event == PTRACE_EVENT_SECCOMP) {
            __atomic_add_fetch(&pg->events, 1, __ATOMIC_RELEASE);
            ptrace(PTRACE_CONT, pid, 0, 0);
        } else if (event != 0) {
            /* fork, vfork, clone, and the stop of a newly attached child
             * (the benchmark sends no stop signals, so every event stop
             * is resumed). */
            ptrace(PTRACE_CONT, pid, 0, 0);
        } else {
            /* A signal on its way: deliver it. */
            ptrace(PTRACE_CONT, pid, 0, WSTOPSIG(status));
        }
    }
}

static int pt_apply(struct isob_confine_state *st, const struct isob_confine_req *req, char *why,
                    size_t len)
{
    st->page = isob_map(4096, 1);
    if (!st->page) {
        snprintf(why, len, "cannot map the tracer's page");
        return -ENOMEM;
    }
    st->helper = isob_confine_helper(st, req->helper_cpu, pt_trace);
    if (st->helper < 0) {
        int rc = (int)st->helper;
        st->helper = 0;
        snprintf(why, len, "fork of the tracer: %s", isob_strerror(rc));
        return rc;
    }
    /* Under Yama's ptrace_scope 1 only a declared tracer may attach to its
     * parent; without Yama the call fails with EINVAL and nothing is needed. */
    if (prctl(PR_SET_PTRACER, st->helper, 0, 0, 0) != 0 && errno != EINVAL) {
        int rc = -errno;
        snprintf(why, len, "prctl(PR_SET_PTRACER): %s", isob_strerror(rc));
        isob_confine_helper_stop(st);
        return rc;
    }
    isob_confine_post(st->page, ISOB_CONFINE_HELPER_GO);
    int rc = isob_confine_wait(st, ISOB_CONFINE_HELPER_READY, PT_SETUP_TIMEOUT_MS);
    if (rc == 0 && st->page->err)
        rc = st->page->err;
    if (rc) {
        snprintf(why, len, "the tracer could not attach: %s", isob_strerror(rc));
        isob_confine_helper_stop(st);
        return rc;
    }
    /* The servers this process starts from now on are traced by this
     * tracer, which isob started itself: they accept it (server.h). */
    isob_server_accept_tracer(st->helper);
    struct isob_bpf b = {0};
    isob_bpf_prologue(&b);
    isob_bpf_match(&b, req->calls, req->ncalls, SECCOMP_RET_TRACE, SECCOMP_RET_ALLOW);
    st->rules = (int)req->ncalls + 1;
    st->traps_calls = 1;
    rc = isob_bpf_load(&b, 0);
    isob_bpf_free(&b);
    if (rc < 0) {
        snprintf(why, len, "installing the trace filter: %s", isob_strerror(rc));
        /* Killing the tracer would kill this process too (EXITKILL). */
        return rc;
    }
    return 0;
}

static int pt_verify(struct isob_confine_state *st, char *why, size_t len)
{
    int rc = isob_confine_check_filters(st, 1, why, len);
    if (rc)
        return rc;
    long tracer = -1;
    rc = isob_status_field("TracerPid", &tracer);
    if (rc) {
        snprintf(why, len, "cannot read TracerPid: %s", isob_strerror(rc));
        return rc;
    }
    isob_evidence(st, "tracer_pid", "%ld", tracer);
    isob_evidence(st, "traced_calls", "%d", st->rules);
    if (st->helper <= 0 || tracer != (long)st->helper) {
        snprintf(why, len, "TracerPid is %ld, not the tracer %d", tracer, (int)st->helper);
        return -ESRCH;
    }
    uint64_t before = isob_confine_events(st);
    long r = syscall(ISOB_CONFINE_PROBE_NR, ISOB_CONFINE_PROBE_ARG);
    int err = r < 0 ? errno : 0;
    uint64_t seen = isob_confine_events(st) - before;
    isob_evidence(st, "probe_stops", "%llu", (unsigned long long)seen);
    if (err || seen != 1) {
        snprintf(why, len, "the probe call %s and stopped %llu times, not once",
                 err ? isob_strerror(-err) : "ran", (unsigned long long)seen);
        return -EPROTO;
    }
    return 0;
}

const struct isob_confinement isob_confine_ptrace = {
    .name = "ptrace",
    .summary = "a tracer stopping the measured calls through SECCOMP_RET_TRACE (and every signal)",
    .threat = "a tracer process sees and may veto each measured system call and every signal "
              "(here it lets them go on): the cost of a ptrace monitor, not a policy",
    .variants = pt_variants,
    .probe = pt_probe,
    .apply = pt_apply,
    .verify = pt_verify,
};
