/* Futex wait/wake and the request/reply handoffs: the plain one of the
 * thread mechanism, and the robust one (below) of the process mechanisms
 * and of the pingpong benchmark's bare futex round trip.
 *
 * One 32-bit word carries the state.  The caller sets REQ and wakes the
 * server, then sleeps until the word leaves REQ; the server sets DONE and
 * wakes the caller, then sleeps until the word is REQ again.  That is two
 * system calls per side per round trip, the least a sleeping handoff needs. */
#ifndef ISOBENCH_FUTEX_H
#define ISOBENCH_FUTEX_H

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

enum isob_handoff_state {
    ISOB_HS_IDLE = 0,  /* nothing asked yet */
    ISOB_HS_REQ = 1,   /* a request waits for the server */
    ISOB_HS_DONE = 2,  /* the reply waits for the caller */
    ISOB_HS_EXIT = 3,  /* the server must leave */
};

/* `private` is FUTEX_PRIVATE_FLAG for threads of one process, 0 for a word
 * in memory shared between processes. */
static inline long isob_futex_wait(uint32_t *w, uint32_t val, int private)
{
    return syscall(SYS_futex, w, FUTEX_WAIT | private, val, NULL, NULL, 0);
}

static inline long isob_futex_wake(uint32_t *w, int n, int private)
{
    return syscall(SYS_futex, w, FUTEX_WAKE | private, n, NULL, NULL, 0);
}

static inline uint32_t isob_load(uint32_t *w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE); }
static inline void isob_store(uint32_t *w, uint32_t v) { __atomic_store_n(w, v, __ATOMIC_RELEASE); }

/* Caller side: post a request and sleep until it is answered. */
static inline void isob_handoff_request(uint32_t *state, int private)
{
    isob_store(state, ISOB_HS_REQ);
    isob_futex_wake(state, 1, private);
    while (isob_load(state) == ISOB_HS_REQ)
        isob_futex_wait(state, ISOB_HS_REQ, private);
}

/* Server side: sleep until a request (returns ISOB_HS_REQ) or an exit
 * order (returns ISOB_HS_EXIT). */
static inline uint32_t isob_handoff_wait(uint32_t *state, int private)
{
    uint32_t s;
    while ((s = isob_load(state)) != ISOB_HS_REQ && s != ISOB_HS_EXIT)
        isob_futex_wait(state, s, private);
    return s;
}

/* Server side: publish the reply and wake the caller. */
static inline void isob_handoff_reply(uint32_t *state, int private)
{
    isob_store(state, ISOB_HS_DONE);
    isob_futex_wake(state, 1, private);
}

/* Caller side: order the server out (it answers nothing more). */
static inline void isob_handoff_exit(uint32_t *state, int private)
{
    isob_store(state, ISOB_HS_EXIT);
    isob_futex_wake(state, INT_MAX, private);
}

/* ---- The robust handoff with a server process ----------------------------
 *
 * A server process can die while its caller sleeps on the handoff word, and
 * no one would wake the caller.  So the word is a robust futex: the server
 * lists it in its robust futex list (set_robust_list), and the kernel, when
 * the server ends for whatever reason (a signal, SIGKILL included, or an
 * exit), marks the word with FUTEX_OWNER_DIED and, if FUTEX_WAITERS is set,
 * wakes a waiter.  The kernel does that only while the word holds the
 * server's thread id, so the states are:
 *
 *     tid                      idle: the server waits for a request
 *     tid | ISOB_PHS_REQ       a request waits for the server
 *     ISOB_PHS_DIED [| REQ]    the server is gone (written by the kernel)
 *
 * ISOB_PHS_REQ is FUTEX_WAITERS, set exactly while the caller may sleep.
 * The caller posts a request with a compare-and-swap from tid, so a server
 * that died while idle is seen at the next call, and one that dies later
 * wakes the caller.  Death costs the fast path nothing: no timed wait, no
 * extra system call, the same two futex calls per side as before.  Before
 * the server lists the word it is 0, which no request is posted on. */
#define ISOB_PHS_REQ FUTEX_WAITERS
#define ISOB_PHS_DIED FUTEX_OWNER_DIED

/* The word and the robust list node that names it, in memory shared by
 * caller and server. */
struct isob_phs {
    uint32_t word;
    uint32_t pad_;
    struct robust_list node;
};

/* Server side, once, before reporting ready: list h->word in this
 * process's robust futex list and publish the thread id in it; *tid gets
 * it too, for the server to keep in its own memory (the shared word may
 * already hold a request by the time the server looks).  0 or -errno.
 * (It replaces the C library's list, which a server, with one thread and
 * no robust mutexes, does not need.) */
int isob_phs_serve_init(struct isob_phs *h, uint32_t *tid);

/* The probe of a mechanism whose handoff is this word: 0 where the kernel
 * keeps robust futex lists, else -ENOTSUP with the reason (qemu-user does
 * not emulate them, and without them a dead server goes unnoticed). */
int isob_phs_probe(char *why, size_t len);

/* Caller side: the word's idle value, read once the server reported ready
 * and before the first request. */
static inline uint32_t isob_phs_tid(struct isob_phs *h) { return isob_load(&h->word); }

/* Caller side: post a request.  0, or -EOWNERDEAD when the server is gone. */
static inline int isob_phs_post(uint32_t *w, uint32_t tid)
{
    uint32_t idle = tid;
    return __atomic_compare_exchange_n(w, &idle, tid | ISOB_PHS_REQ, 0, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE) ? 0 : -EOWNERDEAD;
}

/* Caller side: post a request and sleep until it is answered.  0, or
 * -EOWNERDEAD when the server died before answering. */
static inline int isob_phs_request(uint32_t *w, uint32_t tid)
{
    if (isob_phs_post(w, tid) != 0)
        return -EOWNERDEAD;
    isob_futex_wake(w, 1, 0);
    uint32_t v;
    while ((v = isob_load(w)) == (tid | ISOB_PHS_REQ))
        isob_futex_wait(w, tid | ISOB_PHS_REQ, 0);
    return v == tid ? 0 : -EOWNERDEAD;
}

/* Server side: sleep until a request is posted. */
static inline void isob_phs_wait(uint32_t *w, uint32_t tid)
{
    while (isob_load(w) == tid)
        isob_futex_wait(w, tid, 0);
}

/* Server side: publish the reply and wake the caller. */
static inline void isob_phs_reply(uint32_t *w, uint32_t tid)
{
    isob_store(w, tid);
    isob_futex_wake(w, 1, 0);
}

#endif
