/* ERIM's binary inspection of a process's executable memory (inspect.h). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isobench/error.h"
#include "isobench/inspect.h"
#include "isobench/osprobe.h"

/* The largest maps file read (a line is about 100 bytes). */
#define INSPECT_MAPS_MAX (16u << 20)

static const char *const insn_names[ISOB_INSN__COUNT] = {
    [ISOB_INSN_WRPKRU] = "wrpkru",
    [ISOB_INSN_XRSTOR] = "xrstor",
    [ISOB_INSN_XRSTORS] = "xrstors",
};

const char *isob_insn_name(enum isob_insn k)
{
    return (unsigned)k < ISOB_INSN__COUNT ? insn_names[k] : "?";
}

/* The encodings, from the Intel SDM (vol. 2): WRPKRU is NP 0F 01 EF;
 * XRSTOR is NP 0F AE /5 and XRSTORS NP 0F C7 /3, each with a memory
 * operand (ModRM mod 00, 01 or 10; reg 5 or 3; any r/m, SIB and
 * displacement after it).  With mod 11, 0F AE /5 is LFENCE and 0F C7 /3 is
 * not defined.  REX.W (XRSTOR64) and other prefixes come before the 0F,
 * where a jump skips them, so they do not change what is found. */
int isob_insn_match(const unsigned char *p, size_t n)
{
    if (n < ISOB_INSN_MAX || p[0] != 0x0f)
        return -1;
    unsigned modrm = p[2], mod = modrm >> 6, reg = (modrm >> 3) & 7;
    if (p[1] == 0x01 && modrm == 0xef)
        return ISOB_INSN_WRPKRU;
    if (p[1] == 0xae && mod != 3 && reg == 5)
        return ISOB_INSN_XRSTOR;
    if (p[1] == 0xc7 && mod != 3 && reg == 3)
        return ISOB_INSN_XRSTORS;
    return -1;
}

size_t isob_insn_scan(const unsigned char *buf, size_t len, isob_insn_fn fn, void *ctx)
{
    size_t found = 0;
    if (len < ISOB_INSN_MAX)
        return 0;
    /* Every pattern starts with 0F: find each 0F, then look at the two
     * bytes after it. */
    const unsigned char *p = buf, *last = buf + len - ISOB_INSN_MAX;
    while (p <= last && (p = memchr(p, 0x0f, (size_t)(last - p) + 1)) != NULL) {
        int k = isob_insn_match(p, ISOB_INSN_MAX);
        if (k >= 0) {
            found++;
            if (fn)
                fn(ctx, (size_t)(p - buf), (enum isob_insn)k);
        }
        p++;
    }
    return found;
}

/* The whole of a /proc file, NUL-terminated; NULL with errno set. */
static char *slurp(const char *path, size_t max)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 1u << 14, len = 0;
    char *text = malloc(cap);
    int err = text ? 0 : ENOMEM;
    while (!err) {
        if (len + 1 == cap) {
            char *t = cap < max ? realloc(text, cap * 2) : NULL;
            if (!t) {
                err = ENOMEM;
                break;
            }
            text = t;
            cap *= 2;
        }
        ssize_t n = read(fd, text + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            err = errno;
        else if (n == 0)
            break;
        else
            len += (size_t)n;
    }
    close(fd);
    if (err) {
        free(text);
        errno = err;
        return NULL;
    }
    text[len] = 0;
    return text;
}

/* Copy one mapping through the open /proc/PID/mem; 0 or a negative errno
 * with why. */
static int copy_map(int memfd, struct isob_xmap *x)
{
    size_t want = x->end - x->start;
    x->bytes = malloc(want ? want : 1);
    if (!x->bytes) {
        snprintf(x->why, sizeof x->why, "no memory for a copy of %zu bytes", want);
        return -ENOMEM;
    }
    size_t got = 0;
    while (got < want) {
        size_t chunk = want - got < ISOB_SCAN_CHUNK ? want - got : ISOB_SCAN_CHUNK;
        ssize_t n = pread(memfd, x->bytes + got, chunk, (off_t)(x->start + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int err = n < 0 ? errno : EIO;
            snprintf(x->why, sizeof x->why, "pread of /proc/PID/mem at %#lx (+%#zx): %s",
                     (unsigned long)x->start, got, isob_strerror(-err));
            free(x->bytes);
            x->bytes = NULL;
            return -err;
        }
        got += (size_t)n;
    }
    x->len = got;
    return 0;
}

static int add_map(struct isob_inspect *in, const struct isob_map *m, size_t *cap)
{
    if (in->nmaps == *cap) {
        size_t c = *cap ? *cap * 2 : 32;
        struct isob_xmap *t = realloc(in->maps, c * sizeof *t);
        if (!t)
            return -ENOMEM;
        in->maps = t;
        *cap = c;
    }
    struct isob_xmap *x = &in->maps[in->nmaps++];
    memset(x, 0, sizeof *x);
    x->start = m->start;
    x->end = m->end;
    x->offset = m->offset;
    x->inode = m->inode;
    memcpy(x->perms, m->perms, sizeof x->perms);
    snprintf(x->path, sizeof x->path, "%s", m->path[0] ? m->path : "[anon]");
    return 0;
}

int isob_inspect_load(pid_t pid, struct isob_inspect *in, char *why, size_t whylen)
{
    memset(in, 0, sizeof *in);
    in->pid = pid;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/maps", (long)pid);
    char *text = slurp(path, INSPECT_MAPS_MAX);
    if (!text) {
        int err = errno;
        snprintf(why, whylen, "read %s: %s", path, isob_strerror(-err));
        return -err;
    }
    size_t cap = 0;
    int rc = 0;
    for (char *line = text; line && *line; ) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        struct isob_map m;
        if (isob_map_parse(line, &m) != 0) {
            snprintf(why, whylen, "%s: not a mapping: %.60s", path, line);
            rc = -EINVAL;
            break;
        }
        if (m.perms[2] == 'x' && (rc = add_map(in, &m, &cap)) != 0) {
            snprintf(why, whylen, "out of memory");
            break;
        }
        line = next;
    }
    free(text);
    if (rc) {
        isob_inspect_free(in);
        return rc;
    }
    snprintf(path, sizeof path, "/proc/%ld/mem", (long)pid);
    int memfd = open(path, O_RDONLY | O_CLOEXEC);
    int open_err = memfd < 0 ? errno : 0;
    for (size_t i = 0; i < in->nmaps; i++) {
        struct isob_xmap *x = &in->maps[i];
        struct isob_map m = {.start = x->start, .end = x->end, .rss_kb = -1, .swap_kb = -1};
        memcpy(m.perms, x->perms, sizeof m.perms);
        snprintf(m.path, sizeof m.path, "%s", x->path);
        enum isob_map_class c = isob_map_classify(&m);
        if (c == ISOB_MAP_SPECIAL || c == ISOB_MAP_DEVICE) {
            /* Never read, as scan.c never reads them: the kernel's own
             * page, or a device's registers. */
            x->err = EPERM;
            snprintf(x->why, sizeof x->why, "not read: %s",
                     c == ISOB_MAP_SPECIAL ? "the kernel's own page" : "a device file's mapping");
        } else if (memfd < 0) {
            x->err = open_err;
            snprintf(x->why, sizeof x->why, "open %s: %s", path, isob_strerror(-open_err));
        } else {
            int e = copy_map(memfd, x);
            x->err = e < 0 ? -e : 0;
        }
        if (x->bytes) {
            in->bytes_read += x->len;
        } else {
            in->bytes_unread += x->end - x->start;
            in->unscanned++;
        }
    }
    if (memfd >= 0)
        close(memfd);
    return 0;
}

struct found_ctx {
    struct isob_inspect *in;
    size_t map;
    int spans;
    int oom;
};

static void record(struct found_ctx *f, size_t offset, enum isob_insn k, const unsigned char *bytes)
{
    struct isob_inspect *in = f->in;
    if (in->nsites == in->cap) {
        size_t c = in->cap ? in->cap * 2 : 16;
        struct isob_site *t = realloc(in->sites, c * sizeof *t);
        if (!t) {
            f->oom = 1;
            return;
        }
        in->sites = t;
        in->cap = c;
    }
    const struct isob_xmap *x = &in->maps[f->map];
    struct isob_site *s = &in->sites[in->nsites++];
    memset(s, 0, sizeof *s);
    s->map = f->map;
    s->addr = x->start + offset;
    s->file_offset = x->offset + offset;
    s->kind = k;
    s->spans = f->spans;
    memcpy(s->bytes, bytes, ISOB_INSN_MAX);
}

static void on_site(void *ctx, size_t offset, enum isob_insn k)
{
    struct found_ctx *f = ctx;
    record(f, offset, k, f->in->maps[f->map].bytes + offset);
}

int isob_inspect_find(struct isob_inspect *in)
{
    in->nsites = 0;
    struct found_ctx f = {.in = in};
    for (size_t i = 0; i < in->nmaps; i++) {
        const struct isob_xmap *x = &in->maps[i];
        if (!x->bytes)
            continue;
        f.map = i;
        f.spans = 0;
        isob_insn_scan(x->bytes, x->len, on_site, &f);
        /* A pattern that starts in the last bytes of this mapping and ends
         * in the next one, when both are executable and touch: the CPU
         * decodes across the boundary. */
        const struct isob_xmap *y = i + 1 < in->nmaps ? &in->maps[i + 1] : NULL;
        if (y && y->bytes && y->start == x->end && x->len >= ISOB_INSN_MAX - 1 &&
            y->len >= ISOB_INSN_MAX - 1) {
            unsigned char w[2 * (ISOB_INSN_MAX - 1)];
            memcpy(w, x->bytes + x->len - (ISOB_INSN_MAX - 1), ISOB_INSN_MAX - 1);
            memcpy(w + ISOB_INSN_MAX - 1, y->bytes, ISOB_INSN_MAX - 1);
            f.spans = 1;
            for (size_t o = 0; o < ISOB_INSN_MAX - 1; o++) {
                int k = isob_insn_match(w + o, sizeof w - o);
                if (k >= 0)
                    record(&f, x->len - (ISOB_INSN_MAX - 1) + o, (enum isob_insn)k, w + o);
            }
        }
    }
    return f.oom ? -ENOMEM : 0;
}

size_t isob_inspect_pass(const struct isob_inspect *in)
{
    size_t found = 0;
    for (size_t i = 0; i < in->nmaps; i++)
        if (in->maps[i].bytes)
            found += isob_insn_scan(in->maps[i].bytes, in->maps[i].len, NULL, NULL);
    return found;
}

long isob_inspect_map_of(const struct isob_inspect *in, uintptr_t addr)
{
    for (size_t i = 0; i < in->nmaps; i++)
        if (addr >= in->maps[i].start && addr < in->maps[i].end)
            return (long)i;
    return -1;
}

size_t isob_inspect_mark_gate(struct isob_inspect *in, const struct isob_inspect *self,
                              const uintptr_t *addrs, size_t n)
{
    size_t marked = 0;
    for (size_t a = 0; a < n; a++) {
        long mi = isob_inspect_map_of(self, addrs[a]);
        if (mi < 0)
            continue;
        const struct isob_xmap *g = &self->maps[mi];
        uint64_t off = g->offset + (addrs[a] - g->start);
        for (size_t s = 0; s < in->nsites; s++) {
            struct isob_site *site = &in->sites[s];
            const struct isob_xmap *x = &in->maps[site->map];
            if (!site->gate && site->file_offset == off && x->inode == g->inode &&
                strcmp(x->path, g->path) == 0) {
                site->gate = 1;
                marked++;
            }
        }
    }
    return marked;
}

void isob_inspect_free(struct isob_inspect *in)
{
    for (size_t i = 0; i < in->nmaps; i++)
        free(in->maps[i].bytes);
    free(in->maps);
    free(in->sites);
    memset(in, 0, sizeof *in);
}

void isob_symbol_of(uintptr_t addr, char *out, size_t len)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    out[0] = 0;
    if (!dladdr1((void *)addr, &info, (void **)&sym, RTLD_DL_SYMENT) || !info.dli_sname || !sym)
        return;
    uintptr_t base = (uintptr_t)info.dli_saddr;
    if (addr < base || (sym->st_size && addr >= base + sym->st_size))
        return;
    snprintf(out, len, "%s+%#lx", info.dli_sname, (unsigned long)(addr - base));
}
