/* One cell of the isolation matrix (isolation.h) and the secret its
 * attackers go for.  A header of its own, with no code behind it, because
 * a mechanism with an escape op (mechanism.h; wasm) fills a cell itself:
 * mechanisms include this, and leave the matrix, whose code is
 * src/benches/isolation.c, to the layer above them. */
#ifndef ISOBENCH_ISOLATION_CELL_H
#define ISOBENCH_ISOLATION_CELL_H

#include "isobench/osprobe.h"

/* The secret planted in the trusted heap. */
#define ISOB_SECRET 0x5ec2e7c0ffee1234ull

enum isob_cell_verdict {
    ISOB_CELL_UNTESTED = 0,
    ISOB_CELL_ENFORCED,
    ISOB_CELL_LEAKS,
    ISOB_CELL_NOT_APPLICABLE,
};

/* Tries of the racer per run; the dumpable caller's run stops at its
 * first read of the secret. */
#define ISOB_RACE_TRIES 30

/* One run of the fork-window racer (isolation.h). */
struct isob_race {
    int ran;              /* the helper reported (else verdict untested, why says why) */
    int verdict;          /* enum isob_cell_verdict */
    int dumpable;         /* the caller stayed dumpable at creation */
    int tries;            /* compartments created */
    int seen;             /* tries in which the racer met the server's process id */
    int opened;           /* tries in which it opened /proc/SERVER/mem */
    int first_read;       /* the try (from 1) of its first read of the secret; 0: none */
    int refused_err;      /* the errno of its last refused open */
    char why[160];
};

struct isob_cell {
    int verdict;          /* enum isob_cell_verdict */
    char method[200];     /* what was tried, or what got through */
    char evidence[1024];  /* what was seen: fault codes, errno, trap kinds */
    char condition[768];  /* what it covers; under what it was measured and holds */
    /* OS-level cells only. */
    int probed;           /* the probes ran (res and who are valid) */
    struct isob_identity_info who;
    struct isob_osprobe_result res[ISOB_OSP__COUNT];
    /* The pre-attached cell only. */
    int traced;           /* the tracer shown attached (tstats): the one that read the
                           * secret, else the hiding one */
    int tprobed;          /* and its probes ran (tres) */
    struct isob_osprobe_result tres[ISOB_TRACER_PROBES];
    struct isob_tracer_stats tstats;
    /* The same-uid cell of a separate address space only: the racer runs,
     * [0] the caller non-dumpable at creation, [1] a dumpable caller. */
    int raced;
    struct isob_race race[2];
    struct {              /* each run: [0] the naive tracer, [1] the hiding one */
        int ran;          /* the helper reported (else verdict untested) */
        int verdict;      /* enum isob_cell_verdict of this run alone */
        int attach_rc;    /* 0 or the attach's negative errno */
        int create_rc;    /* 0 or the creation's negative errno while traced */
        long caller_tracer_pid; /* the TracerPid the traced caller read */
        struct isob_tracer_stats stats;
    } truns[2];
};

#endif
