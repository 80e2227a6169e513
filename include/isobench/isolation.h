/* The isolation test: from the untrusted side, read and then write a secret
 * planted in the trusted heap, by its address.  For a mechanism that claims
 * ISOB_ISOLATES_MEMORY both attempts must fault or miss, and the secret must
 * be intact afterwards.  Faults are caught with a signal handler in the
 * calling process, so run it in a child process (isob does). */
#ifndef ISOBENCH_ISOLATION_H
#define ISOBENCH_ISOLATION_H

#include "isobench/mechanism.h"

/* The secret planted in the trusted heap. */
#define ISOB_SECRET 0x5ec2e7c0ffee1234ull

struct isob_isolation {
    int claims;          /* the mechanism claims ISOB_ISOLATES_MEMORY */
    const char *verdict; /* "enforced", "leaked", "none", "skipped", "failed" */
    char read[160];      /* what the read attempt met */
    char write[160];     /* what the write attempt met */
    int intact;          /* 1 intact, 0 changed, -1 unknown */
    char reason[256];    /* why skipped/failed/leaked */
};

/* Run the test; returns 0 when it could run (see r->verdict). */
int isob_isolation_test(const struct isob_mechanism *m, struct isob_isolation *r);

#endif
