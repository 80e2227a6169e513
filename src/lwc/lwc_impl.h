/* What the files of src/lwc/ share: the link page between a context and
 * its creator, and each context's table of handles.  Not a public header. */
#ifndef ISOBENCH_LWC_IMPL_H
#define ISOBENCH_LWC_IMPL_H

#include <linux/seccomp.h>
#include <signal.h>
#include <stdint.h>

#include "isobench/futex.h"
#include "isobench/lwc.h"
#include "isobench/server.h"

/* The new context's set-up result before it wrote one. */
#define LWC_STATUS_PENDING INT32_MIN

/* Library work a creator asks of a context it switched to, done by the
 * library there without returning to the context's own code. */
enum lwc_op {
    LWC_OP_NONE = 0,     /* an ordinary switch */
    LWC_OP_RESTRICT = 1, /* close yourself to the creator (lwc_restrict) */
};

/* One page shared by a creator and a context it created, mapped before
 * the fork: the robust handoff word (futex.h) on its own cache line, the
 * arguments of the switch in progress, and the set-up report. */
struct lwc_link {
    struct isob_phs hs __attribute__((aligned(64)));
    struct lwc_msg msg;
    int32_t op;          /* enum lwc_op */
    int32_t op_result;   /* 0 or -errno of the op */
    int32_t status;      /* set-up: LWC_STATUS_PENDING, then 0 or -errno */
    int32_t listener;    /* LWC_SYSTRAP: the context's number of its listener */
};

/* Room for the kernel's struct seccomp_notif, whatever its size
 * (SECCOMP_GET_NOTIF_SIZES); the headers' struct is its prefix. */
#define LWC_NOTIF_ROOM 256

/* One handle of this context. */
struct lwc_ent {
    int used;
    int child;                  /* 1: a context this one created; 0: this context's caller */
    struct lwc_link *link;
    uint32_t tid;               /* the handoff word's idle value: the child's thread id */
    pid_t pid;                  /* the other context's process */
    struct isob_server proc;    /* child: its process, for reaping and lwc_why */
    int pidfd;                  /* child: a pidfd once one was needed, else -1 */
    int systrap;                /* child: created with LWC_SYSTRAP; caller: this context is trapped */
    int listener;               /* child under LWC_SYSTRAP: the supervisor's listener */
    int held;                   /* an unanswered notification is held (notif) */
    int held_switch;            /* it is the switch-up call, not a trapped one */
    int reply_ready;            /* resp holds lwc_syscall's answer */
    union {
        struct seccomp_notif n;
        unsigned char room[LWC_NOTIF_ROOM];
    } notif;
    struct seccomp_notif_resp resp;
    char why[LWC_WHY_LEN];
};

/* The entry of handle h, or NULL. */
struct lwc_ent *lwc_ent_of(int h);

/* The child e was seen to end (or its channel broke): reap it, record why
 * and return -EOWNERDEAD. */
int lwc_child_died(struct lwc_ent *e);

/* A pidfd for child e (opened on first use); >= 0 or -errno. */
int lwc_pidfd(struct lwc_ent *e);

/* ---- src/lwc/systrap.c ---- */

/* 0 when nr may be trapped; -EINVAL for the calls the library itself
 * makes in a trapped context (the handoff and its set-up). */
int lwc_systrap_allowed(int nr);
/* In the new context: install the trap filter for nrs (and the switch-up
 * number) and return the listener's descriptor, or -errno. */
int lwc_systrap_install(const int *nrs, size_t n);
/* In the creator: switch down to trapped child e, whose link already
 * holds the arguments and op (see lwc_switch). */
int lwc_systrap_switch(struct lwc_ent *e, int h, int *from, struct lwc_msg *in);
/* In the creator: wait for child e's next notification and hold it. */
int lwc_systrap_wait(struct lwc_ent *e);
/* In a trapped context: switch up (the trapped switch-up call). */
void lwc_systrap_up(void);
/* In a context: the restrict op (non-dumpable, then the deny filter). */
int lwc_restrict_self(void);

#endif
