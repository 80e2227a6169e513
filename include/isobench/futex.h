/* Futex wait/wake and the request/reply handoff shared by the thread and
 * process mechanisms (and measured bare by the pingpong benchmark).
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

#endif
