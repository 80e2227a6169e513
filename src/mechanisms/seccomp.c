/* seccomp: the process-futex server, confined after set-up by a seccomp-bpf
 * allow-list of the only system calls its loop makes (futex wait and wake,
 * exit) and killed on any other.  The round trip is the one of
 * process-futex; what it adds is that a compromised compartment can no
 * longer use the kernel to reach beyond its address space. */
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/seccomp.h>
#include <seccomp.h>

#include "isobench/futex.h"
#include "isobench/mechanism.h"
#include "isobench/seccomp_mech.h"
#include "isobench/server.h"

/* How long destroy waits for the server to leave before killing it. */
#define SC_REAP_TIMEOUT_MS 2000
/* How long create waits for the server to install its filter. */
#define SC_SETUP_TIMEOUT_MS 5000
/* How long a self-test waits for the server to die or answer. */
#define SC_SELFTEST_TIMEOUT_MS 5000
/* A private entry, outside the trusted component's numbering: the server
 * itself attempts a system call the filter forbids.  It is served only
 * when the shared page's selftest flag is set, so that an ordinary call
 * with this number gets -ENOSYS instead of a dead server. */
#define SC_ENTRY_FORBIDDEN 1000u

/* The page shared by caller and server: the handoff word on its own cache
 * line, then the message.  Before the first call the server reports its
 * set-up here: ret = 0 or -errno, then state DONE. */
struct sc_shared {
    uint32_t state __attribute__((aligned(64)));
    uint32_t entry;
    uint32_t selftest;
    long ret;
    struct isob_msg msg __attribute__((aligned(64)));
};

struct sc_comp {
    struct isob_comp base;
    struct sc_shared *sh;
    size_t shared_size;
    pid_t server;
    int reaped;   /* the server was already waited for (wstatus is valid) */
    int wstatus;
};

/* Confine the calling process to the server loop's system calls. */
static int sc_confine(void)
{
    /* A server killed by the filter leaves no core dump, and other
     * processes of the same user cannot ptrace it. */
    if (prctl(PR_SET_DUMPABLE, 0) != 0)
        return -errno;
    /* free() must never hand memory back to the kernel once brk and munmap
     * are forbidden, and libseccomp frees its program after loading it. */
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
    if (!ctx)
        return -ENOMEM;
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    /* The handoff of futex.h, on a shared (not private) word. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(futex), 1, SCMP_A1_32(SCMP_CMP_EQ, FUTEX_WAIT));
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(futex), 1, SCMP_A1_32(SCMP_CMP_EQ, FUTEX_WAKE));
    /* _exit() when ordered out. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(exit_group), 0);
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(exit), 0);
    /* The return from a signal handler inherited from the caller. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(rt_sigreturn), 0);
    if (rc == 0)
        rc = seccomp_load(ctx);
    /* The context is not released: its memory goes with the process, and
     * releasing it would only risk a forbidden call inside free(). */
    return rc;
}

static void sc_serve(struct sc_shared *sh, size_t cap, struct isob_trusted *t)
{
    while (isob_handoff_wait(&sh->state, 0) == ISOB_HS_REQ) {
        if (sh->entry == SC_ENTRY_FORBIDDEN && sh->selftest)
            sh->ret = syscall(SYS_getpid); /* the filter ends the process here */
        else
            sh->ret = isob_trusted_call(t, sh->entry, &sh->msg, cap);
        isob_handoff_reply(&sh->state, 0);
    }
}

static int sc_probe(char *why, size_t len)
{
    if (prctl(PR_GET_SECCOMP) < 0) {
        snprintf(why, len, "prctl(PR_GET_SECCOMP): %s (kernel without seccomp, or qemu-user, which refuses it)",
                 isob_strerror(-errno));
        return -ENOTSUP;
    }
    uint32_t action = SECCOMP_RET_KILL_PROCESS;
    if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) != 0) {
        snprintf(why, len, "seccomp(SECCOMP_GET_ACTION_AVAIL, KILL_PROCESS): %s",
                 isob_strerror(-errno));
        return -ENOTSUP;
    }
    /* API level 3 is where libseccomp learnt SCMP_ACT_KILL_PROCESS. */
    unsigned api = seccomp_api_get();
    if (api < 3) {
        snprintf(why, len, "libseccomp API level %u, KILL_PROCESS needs 3", api);
        return -ENOTSUP;
    }
    return 0;
}

/* Wait until the handoff word leaves `from`, the server ends, or
 * timeout_ms pass: 0, -ESRCH (the server ended; p->wstatus says how),
 * -ETIMEDOUT or -errno.  The caller's side of set-up and self-tests, where
 * a server may die instead of answering. */
static int sc_wait_or_death(struct sc_comp *p, uint32_t from, int timeout_ms)
{
    struct timespec now, end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += timeout_ms / 1000;
    end.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (end.tv_nsec >= 1000000000) {
        end.tv_sec++;
        end.tv_nsec -= 1000000000;
    }
    for (;;) {
        if (isob_load(&p->sh->state) != from)
            return 0;
        pid_t r = waitpid(p->server, &p->wstatus, WNOHANG);
        if (r == p->server) {
            p->reaped = 1;
            return -ESRCH;
        }
        if (r < 0)
            return -errno;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
            return -ETIMEDOUT;
        /* Sleep on the word, woken at once by an answer, else within a
         * millisecond to look at the server again. */
        struct timespec ms = {0, 1000000};
        syscall(SYS_futex, &p->sh->state, FUTEX_WAIT, from, &ms, NULL, 0);
    }
}

static void sc_destroy(struct isob_comp *c)
{
    struct sc_comp *p = (struct sc_comp *)c;
    if (!p->reaped) {
        isob_handoff_exit(&p->sh->state, 0);
        isob_server_reap(p->server, SC_REAP_TIMEOUT_MS);
    }
    isob_unmap(p->sh, p->shared_size);
    free(p);
}

/* The server process's body: confine itself, say whether that worked,
 * then serve.  isob_server_fork calls it after entering. */
static void sc_child(void *arg, struct isob_trusted *t)
{
    struct sc_comp *p = arg;
    int rc = sc_confine();
    p->sh->ret = rc;
    isob_handoff_reply(&p->sh->state, 0);
    if (rc == 0)
        sc_serve(p->sh, p->base.data_cap, t);
    else
        _exit(1);
}

static int sc_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    if (spec->shared_size <= sizeof(struct sc_shared))
        return -EINVAL;
    struct sc_comp *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->shared_size = spec->shared_size;
    p->sh = isob_map(p->shared_size, 1);
    if (!p->sh) {
        free(p);
        return -ENOMEM;
    }
    p->base.data_cap = p->shared_size - sizeof(struct sc_shared);
    p->server = isob_server_fork(spec->server_cpu, spec->heap_size, sc_child, p);
    if (p->server < 0) {
        int err = (int)p->server;
        isob_unmap(p->sh, p->shared_size);
        free(p);
        return err;
    }
    /* Calls are served only once the filter is in place, so wait for the
     * server's word on it: a failure is create's to report. */
    int rc = sc_wait_or_death(p, ISOB_HS_IDLE, SC_SETUP_TIMEOUT_MS);
    if (rc == 0 && p->sh->ret < 0)
        rc = (int)p->sh->ret;
    if (rc != 0) {
        sc_destroy(&p->base);
        return rc;
    }
    *out = &p->base;
    return 0;
}

static long sc_call(struct isob_comp *c, unsigned entry)
{
    struct sc_comp *p = (struct sc_comp *)c;
    p->sh->entry = entry;
    isob_handoff_request(&p->sh->state, 0);
    return p->sh->ret;
}

static struct isob_msg *sc_shared_msg(struct isob_comp *c)
{
    return &((struct sc_comp *)c)->sh->msg;
}

const struct isob_mechanism isob_mech_seccomp = {
    .name = "seccomp",
    .summary = "process-futex server confined by a seccomp-bpf allow-list (futex, exit)",
    .props = ISOB_ISOLATES_MEMORY | ISOB_SEPARATE_AS | ISOB_FILTERS_SYSCALLS | ISOB_TWO_CONTEXTS,
    .probe = sc_probe,
    .create = sc_create,
    .call = sc_call,
    .shared = sc_shared_msg,
    .destroy = sc_destroy,
};

/* Create a compartment and check that an allowed call works; then either
 * make the server attempt the forbidden call or order it out, and wait
 * (with a time-out) for it to answer or end. */
static int sc_selftest(int forbidden, int *answered, int *wstatus)
{
    char why[256];
    int rc = sc_probe(why, sizeof why);
    if (rc)
        return rc;
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    struct isob_comp *c;
    rc = isob_comp_create(&isob_mech_seccomp, &spec, &c);
    if (rc)
        return rc;
    struct sc_comp *p = (struct sc_comp *)c;
    if (isob_call(c, ISOB_ENTRY_EMPTY) != 0) {
        sc_destroy(c);
        return -EIO;
    }
    if (forbidden) {
        p->sh->selftest = 1;
        p->sh->entry = SC_ENTRY_FORBIDDEN;
        isob_store(&p->sh->state, ISOB_HS_REQ);
        isob_futex_wake(&p->sh->state, 1, 0);
        rc = sc_wait_or_death(p, ISOB_HS_REQ, SC_SELFTEST_TIMEOUT_MS);
    } else {
        isob_handoff_exit(&p->sh->state, 0);
        rc = sc_wait_or_death(p, ISOB_HS_EXIT, SC_SELFTEST_TIMEOUT_MS);
    }
    *answered = rc == 0;
    if (rc == -ESRCH) {
        *wstatus = p->wstatus;
        rc = 0;
    }
    sc_destroy(c);
    return rc;
}

int isob_seccomp_selftest_forbidden(int *term_signal)
{
    int answered = 0, wstatus = 0;
    *term_signal = 0;
    int rc = sc_selftest(1, &answered, &wstatus);
    if (rc == 0 && !answered && WIFSIGNALED(wstatus))
        *term_signal = WTERMSIG(wstatus);
    return rc;
}

int isob_seccomp_selftest_exit(int *wstatus)
{
    int answered = 0;
    *wstatus = 0;
    int rc = sc_selftest(0, &answered, wstatus);
    /* The word stays EXIT, so only the server's end can finish the wait. */
    return rc == 0 && answered ? -EPROTO : rc;
}
