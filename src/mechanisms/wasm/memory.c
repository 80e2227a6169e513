/* Linear memories of the wasm mechanisms, and the fault handler that turns
 * a guard-page hit into a wasm trap (see wasm_memory.h). */
#include "isob_wasm_config.h"

#if ISOB_WASM_AVAILABLE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isob_wasm.h"
#include "wasm_memory.h"

#define WASM_PAGE 65536u
/* wasm-rt 1.0.32 keeps a memory's byte size in a uint32_t, which 65536
 * pages (4 GiB) would wrap to 0. */
#define WASM_MAX_PAGES 65535u
#define OS_PAGE 4096u

__thread unsigned char *isob_wasm_guard_active __attribute__((tls_model("initial-exec")));

/* Touch every page, so that page faults belong to creating the compartment
 * and not to its first measured calls (what MAP_POPULATE does for the other
 * mechanisms' heaps).  Fresh anonymous memory is zero, so writing zero
 * changes nothing. */
static void prefault(unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i += OS_PAGE)
        ((volatile unsigned char *)p)[i] = 0;
}

/* Allocation failures become a trap: instantiation runs under the same
 * trap catcher as calls, so the compartment's create returns an error
 * instead of wasm-rt's abort(). */
static void allocation_failed(wasm_rt_memory_t *m)
{
    memset(m, 0, sizeof *m);
    wasm_rt_trap(WASM_RT_TRAP_EXHAUSTION);
}

void isob_wasm_guard_memory_allocate(wasm_rt_memory_t *m, uint32_t initial_pages, uint32_t max_pages)
{
    if (initial_pages > WASM_MAX_PAGES)
        allocation_failed(m);
    size_t size = (size_t)initial_pages * WASM_PAGE;
    /* NORESERVE: inaccessible pages cost no memory, only address space. */
    unsigned char *p = mmap(NULL, ISOB_WASM_GUARD_RESERVATION, PROT_NONE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        allocation_failed(m);
    if (size && mprotect(p, size, PROT_READ | PROT_WRITE) != 0) {
        munmap(p, ISOB_WASM_GUARD_RESERVATION);
        allocation_failed(m);
    }
    prefault(p, size);
    m->data = p;
    m->pages = initial_pages;
    m->max_pages = max_pages;
    m->size = (uint32_t)size;
}

uint32_t isob_wasm_guard_memory_grow(wasm_rt_memory_t *m, uint32_t delta)
{
    uint32_t old = m->pages;
    uint64_t new_pages = (uint64_t)old + delta;
    if (delta == 0)
        return old;
    if (new_pages > m->max_pages || new_pages > WASM_MAX_PAGES)
        return UINT32_MAX;
    unsigned char *grown = m->data + (size_t)old * WASM_PAGE;
    if (mprotect(grown, (size_t)delta * WASM_PAGE, PROT_READ | PROT_WRITE) != 0)
        return UINT32_MAX;
    prefault(grown, (size_t)delta * WASM_PAGE);
    m->pages = (uint32_t)new_pages;
    m->size = (uint32_t)(new_pages * WASM_PAGE);
    return old;
}

void isob_wasm_guard_memory_free(wasm_rt_memory_t *m)
{
    if (m->data)
        munmap(m->data, ISOB_WASM_GUARD_RESERVATION);
    memset(m, 0, sizeof *m);
}

void isob_wasm_bounds_memory_allocate(wasm_rt_memory_t *m, uint32_t initial_pages, uint32_t max_pages)
{
    if (initial_pages > WASM_MAX_PAGES)
        allocation_failed(m);
    size_t size = (size_t)initial_pages * WASM_PAGE;
    unsigned char *p = NULL;
    if (size) {
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (p == MAP_FAILED)
            allocation_failed(m);
    }
    m->data = p;
    m->pages = initial_pages;
    m->max_pages = max_pages;
    m->size = (uint32_t)size;
}

uint32_t isob_wasm_bounds_memory_grow(wasm_rt_memory_t *m, uint32_t delta)
{
    uint32_t old = m->pages;
    uint64_t new_pages = (uint64_t)old + delta;
    if (delta == 0)
        return old;
    if (new_pages > m->max_pages || new_pages > WASM_MAX_PAGES)
        return UINT32_MAX;
    size_t old_size = (size_t)old * WASM_PAGE, new_size = (size_t)new_pages * WASM_PAGE;
    unsigned char *p = m->data
        ? mremap(m->data, old_size, new_size, MREMAP_MAYMOVE)
        : mmap(NULL, new_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return UINT32_MAX;
    prefault(p + old_size, new_size - old_size);
    m->data = p;
    m->pages = (uint32_t)new_pages;
    m->size = (uint32_t)new_size;
    return old;
}

void isob_wasm_bounds_memory_free(wasm_rt_memory_t *m)
{
    if (m->data)
        munmap(m->data, m->size);
    memset(m, 0, sizeof *m);
}

/* The SIGSEGV action in place before ours; faults that are not ours go
 * there. */
static struct sigaction previous_segv;

/* A SIGSEGV that is not a guard fault, as if this handler were not there:
 * to the handler before ours, ignored where it was ignored (a sent one
 * only: the kernel does not let a fault be ignored), and otherwise the
 * default action, which ends the process with SIGSEGV. */
static void not_ours(int sig, siginfo_t *si, void *uc)
{
    if (previous_segv.sa_flags & SA_SIGINFO) {
        previous_segv.sa_sigaction(sig, si, uc);
        return;
    }
    if (previous_segv.sa_handler == SIG_IGN && si->si_code <= 0)
        return;
    if (previous_segv.sa_handler != SIG_DFL && previous_segv.sa_handler != SIG_IGN) {
        previous_segv.sa_handler(sig);
        return;
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGSEGV, &dfl, NULL);
    if (si->si_code > 0)
        return; /* the faulting instruction runs again, and the fault kills */
    /* A sent SIGSEGV does not come back by itself: send it again, now with
     * the default action and unblocked (SA_NODEFER), so it ends the
     * process before this handler returns. */
    sigset_t segv;
    sigemptyset(&segv);
    sigaddset(&segv, SIGSEGV);
    sigprocmask(SIG_UNBLOCK, &segv, NULL);
    syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), SIGSEGV);
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    unsigned char *base = isob_wasm_guard_active;
    uintptr_t addr = (uintptr_t)si->si_addr;
    /* Ours: a fault the kernel raised (si_code > 0; a signal sent by kill,
     * tgkill or sigqueue has si_code <= 0 and no fault address) at an
     * address inside the reservation of the guest now running. */
    if (si->si_code > 0 && base && addr - (uintptr_t)base < ISOB_WASM_GUARD_RESERVATION) {
        isob_wasm_guard_active = NULL;
        /* Longjmps back to the call that entered the guest. */
        wasm_rt_trap(WASM_RT_TRAP_OOB);
    }
    not_ours(sig, si, uc);
}

int isob_wasm_fault_handler_install(void)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int rc = 0;
    pthread_mutex_lock(&lock);
    struct sigaction cur;
    if (sigaction(SIGSEGV, NULL, &cur) != 0) {
        rc = -errno;
    } else if (!((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_segv)) {
        /* Installed at each create when missing, since code that installs a
         * handler of its own and never restores ours would otherwise turn
         * every guard-page trap into a crash.  SA_NODEFER: the handler
         * leaves by longjmp, and a SIGSEGV still blocked afterwards would
         * make the next trap kill the process. */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGSEGV, &sa, &previous_segv) != 0)
            rc = -errno;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

#else
/* Built without the wasm tools: wasm.c reports why; nothing to do here.
 * (A translation unit must declare something.) */
typedef int isob_wasm_memory_unused;
#endif
