/* ERIM's binary inspection: every instruction in a process's executable
 * memory that can write PKRU, the register of x86 protection keys.
 *
 * MPK isolates only as long as no code but the gate's can change PKRU.
 * Two user-mode instructions do: WRPKRU (0F 01 EF), which writes EAX into
 * it, and XRSTOR (0F AE /5, any memory operand), which restores it from an
 * XSAVE area when EDX:EAX selects component 9.  An attacker who controls
 * the flow of the untrusted side jumps to any byte, not only to the
 * instruction starts a disassembler sees, so ERIM's inspection looks at
 * EVERY byte offset of executable memory, sequences across instruction
 * boundaries included (Vahldiek-Oberwagner et al., ERIM, USENIX Security
 * 2019, §4; cited by Konrad 2023, §2.1.2).  A prefix before the opcode
 * does not matter: a jump lands after it.  XRSTORS (0F C7 /3) is reported
 * too, but it is privileged and faults at CPL 3.
 *
 * The scan reads each executable mapping of a process through
 * /proc/PID/mem (so that an execute-only mapping is read as well), then
 * matches the copy.  A mapping that cannot be read is listed with the
 * reason and counted as unscanned, never as clean. */
#ifndef ISOBENCH_INSPECT_H
#define ISOBENCH_INSPECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The longest pattern, in bytes (opcode and ModRM). */
#define ISOB_INSN_MAX 3

enum isob_insn {
    ISOB_INSN_WRPKRU,    /* 0F 01 EF: PKRU <- EAX (ECX, EDX must be 0) */
    ISOB_INSN_XRSTOR,    /* 0F AE /5, mod != 11b: PKRU <- memory, if EDX:EAX bit 9 */
    ISOB_INSN_XRSTORS,   /* 0F C7 /3, mod != 11b: as XRSTOR, CPL 0 only (#GP at CPL 3) */
    ISOB_INSN__COUNT
};

const char *isob_insn_name(enum isob_insn k);  /* "wrpkru", "xrstor", "xrstors" */

/* The instruction whose encoding starts at p, with n bytes readable there;
 * -1 for none. */
int isob_insn_match(const unsigned char *p, size_t n);

/* Call fn(ctx, offset, kind) for every match in buf[0..len), at every byte
 * offset, in order; the number of matches. */
typedef void (*isob_insn_fn)(void *ctx, size_t offset, enum isob_insn k);
size_t isob_insn_scan(const unsigned char *buf, size_t len, isob_insn_fn fn, void *ctx);

/* The symbol of this process that holds addr, as "name+0xoff", or "" (a
 * static function, a stripped or static binary). */
void isob_symbol_of(uintptr_t addr, char *out, size_t len);

/* One executable mapping of the target. */
struct isob_xmap {
    uintptr_t start, end;
    uint64_t offset;            /* of its first byte in the file */
    unsigned long inode;
    char perms[5];
    char path[256];             /* "[anon]" for an anonymous mapping */
    unsigned char *bytes;       /* its copy; NULL when it could not be read */
    size_t len;                 /* bytes copied (end - start when read) */
    int err;                    /* errno of the failed read, 0 when read */
    char why[160];              /* why it is unscanned, "" when read */
};

/* A site: where a pattern starts. */
struct isob_site {
    size_t map;                 /* index in the mappings */
    uintptr_t addr;
    uint64_t file_offset;       /* offset in the mapping's file */
    enum isob_insn kind;
    unsigned char bytes[ISOB_INSN_MAX];
    int gate;                   /* 1: a recorded gate site (isob_inspect_mark_gate) */
    int spans;                  /* 1: starts in this mapping and ends in the next */
};

struct isob_inspect {
    pid_t pid;
    struct isob_xmap *maps;
    size_t nmaps;
    struct isob_site *sites;
    size_t nsites, cap;
    uint64_t bytes_read;        /* bytes of the mappings read */
    uint64_t bytes_unread;      /* bytes of the mappings that could not be */
    size_t unscanned;           /* mappings that could not be read */
};

/* Read the executable mappings of pid (its maps file, then each mapping
 * through /proc/PID/mem).  0, or a negative errno when the maps file itself
 * cannot be read (why says which and why); a mapping that cannot be read
 * is recorded in it, not an error. */
int isob_inspect_load(pid_t pid, struct isob_inspect *in, char *why, size_t whylen);

/* Find every site in the copies (and across two mappings that touch);
 * 0 or -ENOMEM.  Sites found before are dropped. */
int isob_inspect_find(struct isob_inspect *in);

/* One pass of the matcher over every copy, without recording anything:
 * what the benchmark times.  The number of matches. */
size_t isob_inspect_pass(const struct isob_inspect *in);

/* Mark the sites that are the recorded gate instructions at addrs (n of
 * them, addresses in the calling process).  The target may be another
 * process running the same file: sites are matched by file (inode and
 * path) and file offset, through the caller's own maps in self.  The
 * number of sites marked. */
size_t isob_inspect_mark_gate(struct isob_inspect *in, const struct isob_inspect *self,
                              const uintptr_t *addrs, size_t n);

/* The mapping of self that holds addr, or -1. */
long isob_inspect_map_of(const struct isob_inspect *in, uintptr_t addr);

void isob_inspect_free(struct isob_inspect *in);

#endif
