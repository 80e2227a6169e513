/* Private interface of the mpk mechanisms, for their tests and the
 * inspect benchmark.
 *
 * No other mechanism calls these (the inspect benchmark reads the gate's
 * recorded sites through isob_mpk_test_sites() to tell gate sites from
 * stray ones, and which strays mpk closed through isob_mpk_closed_sites()):
 * the test_ ones exist so that the QEMU TCG test
 * (tests/vm) can attack the gate where an attacker would (the descriptor in
 * ordinary memory, every instruction of the gate, the trusted stack and gate
 * state) and judge the outcome, and so that the native test can inspect the
 * gate's code.  A test-only copy of an older gate (tests/vm/mpk_legacy.c)
 * fills in the same view, so that the same attacks run against it. */
#ifndef ISOBENCH_MPK_H
#define ISOBENCH_MPK_H

#include <stddef.h>
#include <stdint.h>

#include "gate.h"
#include "isobench/mechanism.h"

/* One instruction of a gate, as recorded in the isob_mpk_sites section:
 * its address, its gate (MPK_GATE_* of gate.h) and its role (MPK_ROLE_*). */
struct isob_mpk_site {
    const void *addr;
    uint32_t gate, role;
};

/* What a test needs to know to attack compartment c's gate and to judge
 * whether the attack got through. */
struct isob_mpk_view {
    int pkey;
    uint32_t pkru_open;            /* PKRU inside the window */
    struct isob_msg *msg;          /* the real shared buffer */
    struct isob_trusted *table;    /* the real trusted state */
    /* Fields of the descriptor (ordinary memory) that the gate reads on
     * every call; NULL where the gate has no such field. */
    uint32_t *d_slot;              /* index of the gate state */
    uint32_t *d_pkru_open, *d_pkru_closed;  /* values the WRPKRUs write */
    void **d_expect;               /* where the expected closed value is */
    void **d_table;                /* the trusted state */
    void **d_msg;                  /* the shared buffer */
    /* Trusted memory that the gate relies on. */
    void *gate_state;
    size_t gate_state_len;
    void *stack_lo, *stack_hi;     /* the trusted stack; NULL when the trusted
                                    * side runs on the caller's stack */
    const void *descriptor;
    size_t descriptor_len;
    /* ERIM's call kinds (mpk only; NULL elsewhere): the slot's call count
     * and the pointer the indirect-call kind calls through. */
    uint64_t *kind_calls;
    void **kind_fn;
    /* The gate's instructions (every one, or only its WRPKRUs). */
    uint32_t gate;                 /* which gate of the sites c uses */
    const struct isob_mpk_site *sites;
    size_t n_sites;
};

/* The gate states (gate.h): a page per key, PROT_NONE until a compartment
 * holds the key. */
extern __attribute__((visibility("hidden"))) unsigned char isob_mpk_slots[MPK_SLOTS][MPK_SLOT_SIZE];

/* The protection key that tags compartment c's trusted memory, or -1 when c
 * is not an mpk compartment. */
int isob_mpk_test_pkey(struct isob_comp *c);

/* Fill v for an mpk or mpk-bridge compartment; 0 or -EINVAL. */
int isob_mpk_test_view(struct isob_comp *c, struct isob_mpk_view *v);

/* Every recorded gate instruction, of all gates; their count. */
size_t isob_mpk_test_sites(const struct isob_mpk_site **sites);

/* The code of the gates (gate_x86.S), from its first byte; *len bytes. */
const void *isob_mpk_test_text(size_t *len);

/* Closing the process's stray WRPKRUs (strays.c), which every create does
 * before its key exists: each executable mapping inspected, each page with
 * a WRPKRU outside the gate replaced by a copy with a trap in its place.
 * 0, or a negative errno with why (create then fails with it). */
int isob_mpk_close_strays(char *why, size_t len);

/* One closed site: where it was, in which file and symbol. */
#define ISOB_MPK_CLOSED_MAX 128
struct isob_mpk_closed {
    const void *addr;
    uint64_t file_offset;
    char file[256];
    char symbol[128];          /* "pkey_set+0x32", or "" */
};

/* The sites closed so far in this process; their count. */
size_t isob_mpk_closed_sites(const struct isob_mpk_closed **out);

/* Test-only: nonzero before a create leaves the strays as they are (the
 * deliberately unclosed variant that the pkey_set attack must win
 * against).  No mechanism sets it. */
extern int isob_mpk_test_leave_strays;

#endif
