/* isob scrape: the outside reader.  Who, outside a compartment's process,
 * can read its memory, and do they find what it holds?
 *
 * A target holds a 32-byte random canary (getrandom) in the middle of a
 * guard region of a known pattern (trusted.h, ISOB_ENTRY_CANARY):
 *
 *   a mechanism   in its compartment's trusted heap, planted through the
 *                 trusted side; the process that holds that heap (the
 *                 compartment's server, or the caller for in-process
 *                 mechanisms) is the target
 *   plain         in the heap of an ordinary process
 *   pipe-writer,  two processes that pass the canary over a pipe: the
 *   pipe-reader   writer keeps it in its heap and writes it twice, the
 *                 reader reads one copy into its heap, and the other stays
 *                 in the pipe's buffer (kernel memory, which none of these
 *                 readers can reach)
 *
 * Readers (osprobe.h, isob_scan) read the target's mappings as its own
 * /proc/PID/smaps lists them, never [vvar], [vsyscall], I/O or device
 * mappings, up to a budget of bytes: /proc/PID/mem, process_vm_readv, and
 * ptrace PEEKDATA (the first pages of each mapping and the canary's page).
 * They only read.  Each runs as every identity of enum isob_scrape_id, in
 * a helper process of its own that dies with isob.
 *
 * Run as root, the targets belong to an unprivileged uid
 * (ISOB_SCRAPE_TARGET_UID), as a user's program would; otherwise to the
 * caller's uid, and the identities that need root are untested, with the
 * reason.  The orchestrator never holds the canary whole (struct
 * isob_canary), and forks every target before any reader, so a copy of
 * its own cannot be what a reader finds.
 *
 * What each cell should be is not decided here: the Python side compares
 * the cells with python/isobench/data/scrape-expected.csv (docs/scrape.md). */
#ifndef ISOBENCH_SCRAPE_H
#define ISOBENCH_SCRAPE_H

#include <stdint.h>
#include <stdio.h>

#include "isobench/osprobe.h"

/* Version of the `scrape` line.  History:
 *   1  first version. */
#define ISOB_SCRAPE_VERSION 1

/* The uid and gid the targets run as when isob runs as root: an
 * unprivileged uid of no account, other than the other-uid reader's
 * (ISOB_OSP_OTHER_UID). */
#define ISOB_SCRAPE_TARGET_UID 65533

/* How long one reader helper may take: three readers over the whole budget
 * on a loaded machine. */
#define ISOB_SCRAPE_READER_TIMEOUT_MS 120000

/* The readers' identities: the columns of the matrix. */
enum isob_scrape_id {
    ISOB_SCR_ROOT,                 /* uid 0 with every capability */
    ISOB_SCR_ROOT_NO_PTRACE,       /* uid 0, CAP_SYS_PTRACE dropped from every set */
    ISOB_SCR_SAME_UID,             /* the target's uid, no capabilities */
    ISOB_SCR_SAME_UID_NONDUMPABLE, /* the same, the target's process made non-dumpable first */
    ISOB_SCR_OTHER_UID,            /* another unprivileged uid (ISOB_OSP_OTHER_UID) */
    ISOB_SCR_USERNS,               /* the target's uid in a user namespace of its own */
    ISOB_SCR__COUNT
};

struct isob_scrape_opts {
    uint64_t budget;        /* bytes per reader and target; 0: ISOB_SCAN_DEFAULT_BUDGET */
    unsigned ptrace_pages;  /* 0: ISOB_SCAN_DEFAULT_PTRACE_PAGES */
};

struct isob_scrape_cell {
    int available;          /* the reader could become this identity */
    char why[160];          /* why not */
    struct isob_identity_info who;
    int target_dumpable;    /* the target process while it was read: 1, 0, -1 unknown */
    int intact_after;       /* the region's checksum unchanged afterwards: 1, 0, -1 unknown */
    struct isob_scan_result res[ISOB_SCAN__COUNT];
};

struct isob_scrape_report {
    char target[48];
    const char *kind;       /* "mechanism", "process", "pipe" */
    const char *status;     /* "ok", "skipped" (the mechanism cannot run here), "failed" */
    char reason[256];
    const char *holder;     /* which process holds the canary, in words */
    long euid;              /* isob's effective uid */
    int yama;               /* Yama's ptrace_scope, -1 absent */
    long target_uid;
    long pid;               /* the target process */
    uintptr_t canary_addr;  /* the canary's address in it */
    uint32_t sum_before;    /* the region's checksum right after planting */
    int maps_read;          /* the plan came from the target's smaps */
    char maps_why[160];     /* else why not (the plan is then the canary's page) */
    int canary_in_plan;     /* the plan covers the canary's address */
    uint64_t budget;
    unsigned ptrace_pages;
    struct isob_scan_plan plan;
    struct isob_scrape_cell cells[ISOB_SCR__COUNT];
};

const char *isob_scrape_id_name(enum isob_scrape_id id);

/* 0 when name is a target (plain, pipe-writer, pipe-reader, or a listed
 * mechanism), else -ENOENT. */
int isob_scrape_target_valid(const char *name);

/* Set up the target, read it as every identity, tear it down.  Returns 0
 * when it ran (rep->status says how it went); run it in a process of its
 * own (isob does): it forks helpers and waits for them. */
int isob_scrape_run(const char *target, const struct isob_scrape_opts *o, struct isob_scrape_report *rep);

/* The report as one `scrape` JSON line (schema in docs/design.md). */
void isob_scrape_emit(FILE *f, const struct isob_scrape_report *rep);

void isob_scrape_report_free(struct isob_scrape_report *rep);

#endif
