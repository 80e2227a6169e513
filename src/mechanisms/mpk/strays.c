/* Closing the stray PKRU writers of the process (ERIM's rewriting), for
 * the mpk mechanisms (mpk.h, isob_mpk_close_strays).
 *
 * A WRPKRU outside the gate writes PKRU from EAX: untrusted code that
 * reaches one with a value of its choosing opens every key.  glibc exports
 * one as a function, pkey_set(key, rights), so one ordinary call opens the
 * compartment's key.  ERIM inspects the binary and rewrites or refuses what
 * it finds (Vahldiek-Oberwagner et al., USENIX Security 2019, §4); here,
 * before a compartment's key exists, every executable mapping is inspected
 * as `isob inspect` does (src/osprobe/inspect.c) and each page that holds a
 * stray WRPKRU is replaced, atomically by mremap, with a private copy whose
 * WRPKRU bytes are UD2 and INT3: the rest of the page keeps working (in
 * glibc 2.36, pkey_mprotect, which mpk itself calls, and mremap, whose
 * system call returns into the copy at the same offset, share pkey_set's
 * page), and a call of pkey_set raises SIGILL instead of writing PKRU.
 *
 * What is not closed, and why (docs/mechanisms.md says the same):
 *  - XRSTOR in the dynamic loader (_dl_runtime_resolve_xsave and _xsavec)
 *    restores PKRU only when EDX:EAX selects it (bit 9); the loader sets
 *    EAX to a constant without that bit just before, so no call reaches it
 *    with PKRU selected, only a jump to the instruction itself with chosen
 *    registers and stack.  Trapping it would break every lazily bound call
 *    of a library not linked with -z now, so it is left and reported.
 *  - The rewrite assumes each stray is an instruction of its own, as
 *    pkey_set's is; a pattern inside a longer instruction (an immediate)
 *    would change that instruction.  ERIM rewrites the longer instruction;
 *    without a decoder this cannot tell the two apart.
 *  - A library mapped after a create is closed at the next create only.
 *
 * The closing is done once per set of executable mappings: each create
 * reads /proc/self/maps and inspects again only when that set changed. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "isobench/error.h"
#include "isobench/inspect.h"
#include "isobench/osprobe.h"
#include "mpk.h"

#if defined(__x86_64__)

/* The bytes a closed WRPKRU becomes: UD2 (0F 0B), then INT3 (CC) for the
 * one byte left, so that a jump to either offset traps too. */
static const unsigned char closed_bytes[ISOB_INSN_MAX] = {0x0f, 0x0b, 0xcc};

static pthread_mutex_t strays_lock = PTHREAD_MUTEX_INITIALIZER;
static struct isob_mpk_closed strays_closed[ISOB_MPK_CLOSED_MAX];
static size_t strays_n;
/* The executable mappings as last closed (a hash of their lines), and
 * whether there is one. */
static uint64_t strays_sig;
static int strays_sig_valid;

int isob_mpk_test_leave_strays;

/* FNV-1a over the lines of /proc/self/maps whose permissions allow
 * execution: a change of the executable mappings changes it.  0 or a
 * negative errno. */
static int exec_signature(uint64_t *sig)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    uint64_t h = 1469598103934665603ull;
    char buf[8192], line[512];
    size_t ll = 0;
    int rc = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            break;
        }
        if (n == 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n') {
                if (ll + 1 < sizeof line)
                    line[ll++] = buf[i];
                continue;
            }
            line[ll] = 0;
            /* "start-end perms ...": the third character of perms is x. */
            const char *sp = strchr(line, ' ');
            if (sp && strlen(sp) > 4 && sp[3] == 'x')
                for (size_t k = 0; k < ll; k++)
                    h = (h ^ (unsigned char)line[k]) * 1099511628211ull;
            ll = 0;
        }
    }
    close(fd);
    *sig = h;
    return rc;
}

/* Replace the page at page_addr, part of mapping x, with a copy in which
 * every closed site's bytes on it are the trap.  0 or a negative errno. */
static int rewrite_page(const struct isob_inspect *in, uintptr_t page_addr, size_t page)
{
    long mi = isob_inspect_map_of(in, page_addr);
    if (mi < 0)
        return -EFAULT;
    const struct isob_xmap *x = &in->maps[mi];
    unsigned char *copy = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED)
        return -errno;
    /* The inspection's copy, read through /proc/self/mem, also holds
     * execute-only pages. */
    memcpy(copy, x->bytes + (page_addr - x->start), page);
    for (size_t s = 0; s < strays_n; s++) {
        uintptr_t a = (uintptr_t)strays_closed[s].addr;
        for (size_t b = 0; b < ISOB_INSN_MAX; b++)
            if (a + b >= page_addr && a + b < page_addr + page)
                copy[a + b - page_addr] = closed_bytes[b];
    }
    int prot = (x->perms[0] == 'r' ? PROT_READ : 0) | PROT_EXEC;
    if (mprotect(copy, page, prot) != 0 ||
        mremap(copy, page, page, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)page_addr) == MAP_FAILED) {
        int err = -errno;
        munmap(copy, page);
        return err;
    }
    return 0;
}

static int close_locked(char *why, size_t len)
{
    uint64_t sig;
    int rc = exec_signature(&sig);
    if (rc) {
        snprintf(why, len, "cannot read /proc/self/maps to find stray WRPKRUs: %s", isob_strerror(rc));
        return rc;
    }
    if (strays_sig_valid && sig == strays_sig)
        return 0;
    struct isob_inspect in;
    char iwhy[200] = "";
    if ((rc = isob_inspect_load(getpid(), &in, iwhy, sizeof iwhy)) != 0) {
        snprintf(why, len, "cannot inspect the process for stray WRPKRUs: %s", iwhy);
        return rc;
    }
    for (size_t i = 0; i < in.nmaps && rc == 0; i++) {
        const struct isob_xmap *x = &in.maps[i];
        if (x->bytes || x->err == EPERM)
            continue;  /* read, or the kernel's own page or a device's (never read) */
        snprintf(why, len, "cannot inspect %s for stray WRPKRUs: %s", x->path, x->why);
        rc = -(x->err ? x->err : EIO);
    }
    if (rc == 0 && isob_inspect_find(&in) != 0)
        rc = -ENOMEM;
    const struct isob_mpk_site *sites;
    size_t n = isob_mpk_test_sites(&sites);
    for (size_t i = 0; i < n && rc == 0; i++) {
        uintptr_t a = (uintptr_t)sites[i].addr;
        if (sites[i].role != MPK_ROLE_INSN)
            isob_inspect_mark_gate(&in, &in, &a, 1);
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE), first = strays_n;
    for (size_t s = 0; s < in.nsites && rc == 0; s++) {
        const struct isob_site *site = &in.sites[s];
        if (site->gate || site->kind != ISOB_INSN_WRPKRU)
            continue;
        if (strays_n == ISOB_MPK_CLOSED_MAX) {
            snprintf(why, len, "more than %d stray WRPKRUs to close", ISOB_MPK_CLOSED_MAX);
            rc = -E2BIG;
            break;
        }
        struct isob_mpk_closed *c = &strays_closed[strays_n++];
        memset(c, 0, sizeof *c);
        c->addr = (const void *)site->addr;
        c->file_offset = site->file_offset;
        snprintf(c->file, sizeof c->file, "%s", in.maps[site->map].path);
        isob_symbol_of(site->addr, c->symbol, sizeof c->symbol);
    }
    /* Each page that holds a newly closed site's bytes, once. */
    for (size_t s = first; s < strays_n && rc == 0; s++) {
        uintptr_t a = (uintptr_t)strays_closed[s].addr;
        for (uintptr_t p = a & ~(page - 1); p < a + ISOB_INSN_MAX && rc == 0; p += page) {
            int done = 0;
            for (size_t t = first; t < s && !done; t++) {
                uintptr_t b = (uintptr_t)strays_closed[t].addr;
                done = p + page > b && p < b + ISOB_INSN_MAX;
            }
            if (!done && (rc = rewrite_page(&in, p, page)) != 0)
                snprintf(why, len, "cannot replace the page of the stray WRPKRU at %#lx: %s",
                         (unsigned long)a, isob_strerror(rc));
        }
    }
    isob_inspect_free(&in);
    if (rc == 0 && (rc = exec_signature(&strays_sig)) != 0)
        snprintf(why, len, "cannot read /proc/self/maps after closing: %s", isob_strerror(rc));
    strays_sig_valid = rc == 0;
    if (rc)
        strays_n = first;
    return rc;
}

int isob_mpk_close_strays(char *why, size_t len)
{
    if (isob_mpk_test_leave_strays)
        return 0;
    pthread_mutex_lock(&strays_lock);
    int rc = close_locked(why, len);
    pthread_mutex_unlock(&strays_lock);
    return rc;
}

size_t isob_mpk_closed_sites(const struct isob_mpk_closed **out)
{
    pthread_mutex_lock(&strays_lock);
    size_t n = strays_n;
    pthread_mutex_unlock(&strays_lock);
    *out = strays_closed;
    return n;
}

#else /* !__x86_64__ */

int isob_mpk_test_leave_strays;

int isob_mpk_close_strays(char *why, size_t len)
{
    snprintf(why, len, "Intel MPK needs x86-64");
    return -ENOTSUP;
}

size_t isob_mpk_closed_sites(const struct isob_mpk_closed **out)
{
    *out = NULL;
    return 0;
}

#endif
