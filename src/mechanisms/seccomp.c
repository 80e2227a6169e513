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
#include <unistd.h>

#include <linux/seccomp.h>
#include <seccomp.h>

#include "isobench/futex.h"
#include "isobench/mechanism.h"
#include "isobench/seccomp_mech.h"
#include "isobench/server.h"

/* How long destroy waits for the server to leave before killing it. */
#define SC_REAP_TIMEOUT_MS 2000
/* How long a self-test waits for the server to leave when ordered out. */
#define SC_SELFTEST_TIMEOUT_MS 5000
/* Private entries, outside the trusted component's numbering.  FORBIDDEN:
 * the server itself attempts a system call the filter forbids; it is served
 * only when the shared page's selftest flag is set, so that an ordinary
 * call with this number gets -ENOSYS instead of a dead server.  HELLO: the
 * first call, which create makes to learn that the filter is in place.
 * EXIT: the order to leave. */
#define SC_ENTRY_FORBIDDEN 1000u
#define SC_ENTRY_HELLO 1001u
#define SC_ENTRY_EXIT UINT32_MAX

/* The page shared by caller and server: the robust handoff word (futex.h)
 * on its own cache line, then the message.  A server that could not
 * confine itself leaves its error in setup_err and exits. */
struct sc_shared {
    struct isob_phs hs __attribute__((aligned(64)));
    uint32_t entry;
    uint32_t selftest;
    long ret;
    long setup_err;
    struct isob_msg msg __attribute__((aligned(64)));
};

struct sc_comp {
    struct isob_comp base;
    struct sc_shared *sh;
    size_t shared_size;
    uint32_t tid;               /* the handoff word's idle value: the server's thread id (the
                                 * server's own copy of this struct gets it from setup) */
    struct isob_server server;
};

/* Confine the calling process to the server loop's system calls. */
static int sc_confine(void)
{
    /* A server killed by the filter leaves no core dump, and other
     * processes of the same user cannot ptrace it: checked as every
     * server's step is (isob_server_enter did it once; a tracer could have
     * undone it since, and then this refuses). */
    int closed = isob_server_close_to_readers();
    if (closed)
        return closed;
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
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer asks for the signal stack (sigaltstack with no new
     * one) before every call that does not return, the exit above
     * included: allowed in the sanitized build only. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sigaltstack), 1,
                              SCMP_A0_64(SCMP_CMP_EQ, 0));
#endif
    if (rc == 0)
        rc = seccomp_load(ctx);
    /* The context is not released: its memory goes with the process, and
     * releasing it would only risk a forbidden call inside free(). */
    return rc;
}

static void sc_serve(struct sc_shared *sh, uint32_t tid, size_t cap, struct isob_trusted *t)
{
    for (;;) {
        isob_phs_wait(&sh->hs.word, tid);
        uint32_t entry = sh->entry;
        if (entry == SC_ENTRY_EXIT)
            return;
        if (entry == SC_ENTRY_FORBIDDEN && sh->selftest)
            sh->ret = syscall(SYS_getpid); /* the filter ends the process here */
        else if (entry == SC_ENTRY_HELLO)
            sh->ret = 0;
        else
            sh->ret = isob_trusted_call(t, entry, &sh->msg, cap);
        isob_phs_reply(&sh->hs.word, tid);
    }
}

static int sc_probe(char *why, size_t len)
{
    int rc = isob_phs_probe(why, len);
    if (rc)
        return rc;
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

static __attribute__((noinline, cold)) long sc_died(struct sc_comp *p)
{
    return isob_server_ended(&p->server, p->base.why, sizeof p->base.why);
}

static long sc_call(struct isob_comp *c, unsigned entry)
{
    struct sc_comp *p = (struct sc_comp *)c;
    p->sh->entry = entry;
    if (isob_phs_request(&p->sh->hs.word, p->tid) != 0)
        return sc_died(p);
    return p->sh->ret;
}

/* Order the server out without waiting for it. */
static void sc_order_out(struct sc_comp *p)
{
    p->sh->entry = SC_ENTRY_EXIT;
    if (isob_phs_post(&p->sh->hs.word, p->tid) == 0)
        isob_futex_wake(&p->sh->hs.word, 1, 0);
}

static void sc_destroy(struct isob_comp *c)
{
    struct sc_comp *p = (struct sc_comp *)c;
    sc_order_out(p);
    isob_server_stop(&p->server, SC_REAP_TIMEOUT_MS);
    isob_unmap(p->sh, p->shared_size);
    free(p);
}

static int sc_setup(void *arg, struct isob_trusted *t)
{
    (void)t;
    /* The robust list is set before the filter, which forbids it. */
    struct sc_comp *p = arg;
    return isob_phs_serve_init(&p->sh->hs, &p->tid);
}

/* The server process's body: confine itself, then serve; on a failure to
 * confine, leave the error for create and exit.  isob_server_start calls
 * it once ready. */
static void sc_child(void *arg, struct isob_trusted *t)
{
    struct sc_comp *p = arg;
    int rc = sc_confine();
    if (rc != 0) {
        p->sh->setup_err = rc;
        return;
    }
    sc_serve(p->sh, p->tid, p->base.data_cap, t);
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
    struct isob_server_spec ss = {.cpu = spec->server_cpu, .heap_size = spec->heap_size,
                                  .host_fds = spec->host_fds, .n_host_fds = spec->n_host_fds,
                                  .setup = sc_setup, .serve = sc_child, .arg = p,
                                  .keep_fd = {-1, -1}};
    int rc = isob_server_start(&p->server, &ss);
    if (rc != 0) {
        isob_unmap(p->sh, p->shared_size);
        free(p);
        return rc;
    }
    p->tid = isob_phs_tid(&p->sh->hs);
    /* Calls are served only once the filter is in place: the first call
     * is answered after it, or finds the server gone with its reason. */
    if (sc_call(&p->base, SC_ENTRY_HELLO) != 0) {
        rc = p->sh->setup_err < 0 ? (int)p->sh->setup_err : -EOWNERDEAD;
        sc_destroy(&p->base);
        return rc;
    }
    *out = &p->base;
    return 0;
}

static struct isob_msg *sc_shared_msg(struct isob_comp *c)
{
    return &((struct sc_comp *)c)->sh->msg;
}

/* The trusted heap lives in the server process, at the address the
 * trusted code reports. */
static int sc_locate(struct isob_comp *c, uint64_t trusted_addr, struct isob_place *out)
{
    out->pid = ((struct sc_comp *)c)->server.pid;
    out->addr = (uintptr_t)trusted_addr;
    return 0;
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
    .locate = sc_locate,
};

/* Create a compartment and check that an allowed call works; then either
 * make the server attempt the forbidden call or order it out, and see how
 * it ends: the forbidden call either answers or finds the server gone (the
 * robust handoff never waits past its end); the order out is waited for
 * with a time-out. */
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
        long r = sc_call(c, SC_ENTRY_FORBIDDEN);
        *answered = !(r == -EOWNERDEAD && isob_comp_why(c));
        rc = 0;
    } else {
        sc_order_out(p);
        rc = isob_server_stop(&p->server, SC_SELFTEST_TIMEOUT_MS);
        *answered = 0;
    }
    *wstatus = p->server.ended ? p->server.status : 0;
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
    return sc_selftest(0, &answered, wstatus);
}
