/* Helpers shared by mechanisms. */
#include <sys/mman.h>

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

#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isobench/harness.h"
#include "isobench/server.h"

struct isob_trusted *isob_server_enter(int cpu, size_t heap_size)
{
    /* A server outliving its client would hold CPUs and memory forever. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
        return NULL;
    if (cpu >= 0 && isob_pin_self(cpu) != 0)
        return NULL;
    void *heap = isob_map(heap_size, 0);
    return heap ? isob_trusted_init(heap, heap_size) : NULL;
}

pid_t isob_server_fork(int cpu, size_t heap_size,
                       void (*serve)(void *arg, struct isob_trusted *t), void *arg)
{
    /* Buffered output would otherwise be written twice, once by each. */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        struct isob_trusted *t = isob_server_enter(cpu, heap_size);
        if (t)
            serve(arg, t);
        /* The exit_group system call itself, not _exit(): a sanitizer hooks
         * _exit (for a leak check), which makes system calls that a server
         * confined by seccomp may not make. */
        syscall(SYS_exit_group, t ? 0 : 1);
        _exit(1);
    }
    return pid;
}

void isob_server_reap(pid_t pid, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited++) {
        pid_t r = waitpid(pid, NULL, WNOHANG);
        if (r == pid || r < 0)
            return;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

int isob_comp_create(const struct isob_mechanism *m, const struct isob_comp_spec *spec,
                     struct isob_comp **out)
{
    int rc = m->create(spec, out);
    if (rc == 0)
        (*out)->mech = m;
    return rc;
}

void isob_comp_destroy(struct isob_comp *c)
{
    c->mech->destroy(c);
}
