/* Helpers shared by mechanisms. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include "isobench/mechanism.h"

int isob_probe_always(char *why, size_t len)
{
    (void)why;
    (void)len;
    return 0;
}

void isob_spec_defaults(struct isob_comp_spec *spec)
{
    spec->shared_size = ISOB_DEFAULT_SHARED_SIZE;
    spec->heap_size = ISOB_DEFAULT_HEAP_SIZE;
    spec->server_cpu = -1;
    spec->n_host_fds = 0;
    spec->allow_dumpable = 0;
}

void *isob_map(size_t len, int shared)
{
    /* MAP_POPULATE: page faults belong to set-up, not to measured calls. */
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void isob_unmap(void *p, size_t len)
{
    if (p)
        munmap(p, len);
}

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isobench/futex.h"
#include "isobench/harness.h"
#include "isobench/server.h"

/* Why this thread's last creation failed at the caller's step; "" none. */
static __thread char create_why[200];
/* The creation under way on this thread may leave the caller dumpable
 * (its spec said so): its isob_server_start must not refuse it. */
static __thread int create_allows;
/* The creation under way on this thread has taken the caller's step: its
 * isob_server_start need not ask again (one PR_GET_DUMPABLE a creation). */
static __thread int create_checked;

const char *isob_comp_create_why(void)
{
    return create_why[0] ? create_why : NULL;
}

int isob_caller_harden(int allow, int *stays_dumpable, char *why, size_t len)
{
    *stays_dumpable = 0;
    int d = prctl(PR_GET_DUMPABLE);
    if (d == 0)
        return 0;
    const char *env = getenv(ISOB_ALLOW_DUMPABLE_ENV);
    if (allow || create_allows || (env && strcmp(env, "1") == 0)) {
        *stays_dumpable = 1;
        return 0;
    }
    int rc = d < 0 ? -errno : isob_caller_close_to_readers();
    if (rc)
        snprintf(why, len, "the caller cannot be made non-dumpable (%s), and a server it forks would be "
                 "open to a same-uid reader from its fork to its own hardening; %s=1 creates it anyway",
                 isob_strerror(rc), ISOB_ALLOW_DUMPABLE_ENV);
    return rc;
}

int isob_server_enter(pid_t parent, int cpu, size_t heap_size, struct isob_trusted **out)
{
    /* A server outliving its client would hold CPUs and memory forever.
     * The client may have died before this line took effect; then the
     * signal never comes, and the parent is no longer the one recorded
     * before the fork.  (getppid() == 1 would not do: the client may well
     * be PID 1 itself, as a container's entry point.) */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        return -ESRCH;
    /* Non-dumpable before the heap exists.  This shuts out readers that
     * open /proc/PID/mem or /proc/PID/maps from now on, not one that
     * opened them before: the kernel checks access at open, and a
     * descriptor opened while this process was still dumpable reads the
     * heap mapped below.  Only a caller that was non-dumpable before the
     * fork (isob_caller_harden, in isob_server_start and isob_comp_create)
     * closes that window: the flag is inherited, so the server is then
     * closed from its first instruction and this step changes nothing.  A
     * caller allowed to stay dumpable (ISOB_ALLOW_DUMPABLE) leaves the
     * window open, and the matrix's racer shows it. */
    int closed = isob_server_close_to_readers();
    if (closed)
        return closed;
    if (cpu >= 0) {
        int rc = isob_pin_self(cpu);
        if (rc)
            return rc;
    }
    errno = 0;
    void *heap = isob_map(heap_size, 0);
    if (!heap)
        return errno ? -errno : -ENOMEM;
    *out = isob_trusted_init(heap, heap_size);
    return *out ? 0 : -EINVAL;
}

/* Close descriptors lo..hi. */
static void close_fds(unsigned lo, unsigned hi)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, lo, hi, 0) == 0)
        return;
#endif
    /* Kernels before 5.9: one at a time, up to the limit. */
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = lo; fd <= (long)hi && fd < (max > 0 ? max : 1024); fd++)
        close((int)fd);
}

/* In a new server: keep only stdio and the n descriptors of keep.  What a
 * caller holds (other compartments' channels, a listening socket, client
 * connections) is none of the compartment's business, and a copy held here
 * would keep the caller's closes from taking effect. */
static void keep_only(int *keep, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    unsigned from = 3;
    for (int i = 0; i < n; i++) {
        if (keep[i] < (int)from)
            continue;
        if ((unsigned)keep[i] > from)
            close_fds(from, (unsigned)keep[i] - 1);
        from = (unsigned)keep[i] + 1;
    }
    close_fds(from, ~0u);
}

/* The caller's handlers are not the server's (server.h). */
void isob_server_default_signals(void)
{
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (sigaction(sig, NULL, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO) &&
            (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN))
            continue;
        signal(sig, SIG_DFL);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

void isob_exit_raw(int status)
{
    syscall(SYS_exit_group, status);
    _exit(status);
}

/* The server's side of isob_server_start: never returns. */
static void __attribute__((noreturn)) server_main(pid_t parent, const struct isob_server_spec *spec,
                                                  int report_fd)
{
    int keep[3 + ISOB_SPEC_HOST_FDS] = {report_fd};
    int n = 1;
    for (int i = 0; i < 2; i++)
        if (spec->keep_fd[i] >= 0)
            keep[n++] = spec->keep_fd[i];
    for (unsigned i = 0; i < spec->n_host_fds && i < ISOB_SPEC_HOST_FDS; i++)
        if (spec->host_fds[i] >= 0)
            keep[n++] = spec->host_fds[i];
    keep_only(keep, n);
    isob_server_default_signals();
    if (spec->test_any_tracer)
        isob_server_accept_tracer(ISOB_ANY_TRACER);
    struct isob_trusted *t = NULL;
    int rc = isob_server_enter(parent, spec->cpu, spec->heap_size, &t);
    if (rc == 0 && spec->setup)
        rc = spec->setup(spec->arg, t);
    ssize_t w;
    while ((w = write(report_fd, &rc, sizeof rc)) < 0 && errno == EINTR)
        ;
    close(report_fd);
    if (rc != 0 || w != (ssize_t)sizeof rc)
        isob_exit_raw(1);
    spec->serve(spec->arg, t);
    isob_exit_raw(0);
}

/* Wait for pid to end, up to timeout_ms; 1 with *status set, 0 if it has
 * not ended, -errno. */
static int wait_bounded(pid_t pid, int *status, int timeout_ms)
{
    for (int waited = 0;; waited++) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 1;
        if (r < 0 && errno != EINTR)
            return -errno;
        if (waited >= timeout_ms)
            return 0;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

/* Reap s->pid: up to timeout_ms, then SIGKILL.  0, or -ETIMEDOUT when it
 * had to be killed. */
static int reap(struct isob_server *s, int timeout_ms)
{
    if (s->ended || s->pid <= 0)
        return 0;
    int rc = 0;
    int got = wait_bounded(s->pid, &s->status, timeout_ms);
    if (got == 0) {
        kill(s->pid, SIGKILL);
        rc = -ETIMEDOUT;
        while (waitpid(s->pid, &s->status, 0) < 0 && errno == EINTR)
            ;
    } else if (got < 0) {
        /* Not our child to wait for (someone else reaped it): all that is
         * known is that it is gone. */
        s->status = -1;
    }
    s->ended = 1;
    return rc;
}

int isob_server_start(struct isob_server *s, const struct isob_server_spec *spec)
{
    *s = (struct isob_server){0};
    /* Non-dumpable before the fork (the window: isob_comp_create), unless
     * the creation this start is part of saw to it already. */
    if (!create_checked) {
        int stays;
        create_why[0] = 0;
        int hardened = isob_caller_harden(0, &stays, create_why, sizeof create_why);
        if (hardened)
            return hardened;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -errno;
    pid_t parent = getpid();
    /* Buffered output would otherwise be written twice, once by each. */
    fflush(NULL);
    /* No caller's handler may run in the child before it resets them
     * (isob_server_default_signals, which also unblocks everything there). */
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old);
    pid_t pid = fork();
    int fork_err = pid < 0 ? -errno : 0;
    if (pid == 0) {
        close(fds[0]);
        server_main(parent, spec, fds[1]);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return fork_err;
    }
    close(fds[1]);
    s->pid = pid;
    /* The report, or end of file if the server died before writing it:
     * no time-out, however long its set-up (mapping a large heap) takes. */
    int report = 0;
    ssize_t n;
    while ((n = read(fds[0], &report, sizeof report)) < 0 && errno == EINTR)
        ;
    close(fds[0]);
    if (n == (ssize_t)sizeof report && report == 0)
        return 0;
    /* A server that reported an error exits at once; one that died left
     * nothing to wait for. */
    reap(s, ISOB_SERVER_END_WAIT_MS);
    return n == (ssize_t)sizeof report ? (report < 0 ? report : -EPROTO) : -EOWNERDEAD;
}

void isob_server_describe(int status, char *buf, size_t len)
{
    if (status == -1)
        snprintf(buf, len, "died: reaped elsewhere, status unknown");
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "died: signal %d (%s)%s", WTERMSIG(status), strsignal(WTERMSIG(status)),
                 WCOREDUMP(status) ? ", core dumped" : "");
    else if (WIFEXITED(status))
        snprintf(buf, len, "died: exit status %d", WEXITSTATUS(status));
    else
        snprintf(buf, len, "died: wait status 0x%x", (unsigned)status);
}

int isob_server_ended(struct isob_server *s, char *why, size_t len)
{
    if (s->ended)
        return -EOWNERDEAD;
    int killed = reap(s, ISOB_SERVER_END_WAIT_MS) != 0;
    isob_server_describe(s->status, why, len);
    if (killed) {
        /* It broke its channel but did not end: it was killed here. */
        size_t l = strlen(why);
        snprintf(why + l, len - l, " (it stopped answering and was killed)");
    }
    return -EOWNERDEAD;
}

int isob_server_stop(struct isob_server *s, int timeout_ms)
{
    return reap(s, timeout_ms);
}

/* The robust futex list of a server process: one entry, its handoff word.
 * It lives in the server's own memory (this is the server's copy of the
 * variable), as the kernel reads it when the server ends. */
static struct robust_list_head phs_head;

int isob_phs_probe(char *why, size_t len)
{
    struct robust_list_head *head;
    size_t hlen;
    if (syscall(SYS_get_robust_list, 0, &head, &hlen) != 0) {
        snprintf(why, len, "get_robust_list: %s (no robust futex lists here, e.g. under "
                 "qemu-user; the handoff learns from them that its server died)",
                 isob_strerror(-errno));
        return -ENOTSUP;
    }
    return 0;
}

int isob_phs_serve_init(struct isob_phs *h, uint32_t *tid)
{
    phs_head.list.next = &h->node;
    h->node.next = &phs_head.list;
    phs_head.futex_offset = (long)((char *)&h->word - (char *)&h->node);
    phs_head.list_op_pending = NULL;
    if (syscall(SYS_set_robust_list, &phs_head, sizeof phs_head) != 0)
        return -errno;
    /* The thread id, not the process id: the kernel compares the word with
     * the dying thread's.  The server has one thread, so they are equal. */
    *tid = (uint32_t)syscall(SYS_gettid);
    isob_store(&h->word, *tid);
    isob_futex_wake(&h->word, 1, 0);
    return 0;
}

int isob_comp_create(const struct isob_mechanism *m, const struct isob_comp_spec *spec,
                     struct isob_comp **out)
{
    create_why[0] = 0;
    if (m->props & ISOB_SEPARATE_AS) {
        int stays;
        int rc = isob_caller_harden(spec->allow_dumpable, &stays, create_why, sizeof create_why);
        if (rc)
            return rc;
        create_checked = 1;
    }
    create_allows = spec->allow_dumpable;
    int rc = m->create(spec, out);
    create_allows = create_checked = 0;
    if (rc == 0) {
        (*out)->mech = m;
        (*out)->why[0] = 0;
    }
    return rc;
}

void isob_comp_destroy(struct isob_comp *c)
{
    c->mech->destroy(c);
}
