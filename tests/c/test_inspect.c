/* ERIM's binary inspection (include/isobench/inspect.h): the patterns, the
 * scan at every byte offset, and the inspection of a live process's
 * executable mappings, where the MPK gate's recorded WRPKRUs must be found
 * and marked, a planted WRPKRU must be found as a stray, and a mapping
 * that cannot be read must be counted as unscanned. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/inspect.h"
#include "mpk.h"
#include "tap.h"

#define PAGE 4096

static int match(const char *hex_bytes_len3, size_t n)
{
    return isob_insn_match((const unsigned char *)hex_bytes_len3, n);
}

/* Each encoding, and its neighbours that write no PKRU. */
static void t_patterns(void)
{
    CHECK_EQ_LONG(match("\x0f\x01\xef", 3), ISOB_INSN_WRPKRU);
    CHECK_EQ_LONG(match("\x0f\x01\xee", 3), -1);              /* RDPKRU */
    CHECK_EQ_LONG(match("\x0f\x01\xef", 2), -1);              /* cut short */
    /* XRSTOR: reg 5 with every mod but 11b, any r/m. */
    for (unsigned mod = 0; mod < 4; mod++)
        for (unsigned rm = 0; rm < 8; rm++) {
            char b[3] = {0x0f, (char)0xae, (char)(mod << 6 | 5 << 3 | rm)};
            CHECK_EQ_LONG(match(b, 3), mod == 3 ? -1 : ISOB_INSN_XRSTOR);  /* 11b: LFENCE */
            b[1] = (char)0xc7;
            b[2] = (char)(mod << 6 | 3 << 3 | rm);
            CHECK_EQ_LONG(match(b, 3), mod == 3 ? -1 : ISOB_INSN_XRSTORS);
        }
    CHECK_EQ_LONG(match("\x0f\xae\x20", 3), -1);              /* XSAVE [rax]: /4 */
    CHECK_EQ_LONG(match("\x0f\xae\x28", 3), ISOB_INSN_XRSTOR); /* XRSTOR [rax] */
    CHECK_EQ_LONG(match("\x0f\xc7\x08", 3), -1);              /* CMPXCHG8B [rax]: /1 */
    CHECK(strcmp(isob_insn_name(ISOB_INSN_WRPKRU), "wrpkru") == 0);
}

struct seen {
    size_t off[16];
    int kind[16];
    size_t n;
};

static void on_site(void *ctx, size_t off, enum isob_insn k)
{
    struct seen *s = ctx;
    if (s->n < 16) {
        s->off[s->n] = off;
        s->kind[s->n] = (int)k;
    }
    s->n++;
}

/* A WRPKRU hidden in an immediate (mov eax, 0x00ef010f) is not an
 * instruction a disassembler lists, but a jump into the middle of the mov
 * runs it: the scan finds it at its byte offset, as it finds one in the
 * last three bytes of the buffer. */
static void t_every_offset(void)
{
    unsigned char buf[64];
    memset(buf, 0x90, sizeof buf);
    const unsigned char mov[] = {0xb8, 0x0f, 0x01, 0xef, 0x00};
    memcpy(buf + 7, mov, sizeof mov);
    const unsigned char xr[] = {0x48, 0x0f, 0xae, 0x6c, 0x24, 0x40};  /* xrstor64 [rsp+0x40] */
    memcpy(buf + 20, xr, sizeof xr);
    memcpy(buf + sizeof buf - 3, "\x0f\x01\xef", 3);
    struct seen s = {0};
    CHECK_EQ_LONG(isob_insn_scan(buf, sizeof buf, on_site, &s), 3);
    CHECK_EQ_LONG(s.n, 3);
    CHECK_EQ_LONG(s.off[0], 8);
    CHECK_EQ_LONG(s.kind[0], ISOB_INSN_WRPKRU);
    CHECK_EQ_LONG(s.off[1], 21);
    CHECK_EQ_LONG(s.kind[1], ISOB_INSN_XRSTOR);
    CHECK_EQ_LONG(s.off[2], sizeof buf - 3);
    /* One byte short of the last pattern: it is not there. */
    CHECK_EQ_LONG(isob_insn_scan(buf, sizeof buf - 1, NULL, NULL), 2);
}

#if defined(__x86_64__)

static const struct isob_site *site_at(const struct isob_inspect *in, uintptr_t addr)
{
    for (size_t i = 0; i < in->nsites; i++)
        if (in->sites[i].addr == addr)
            return &in->sites[i];
    return NULL;
}

static size_t gate_addrs(uintptr_t *out, size_t cap)
{
    const struct isob_mpk_site *sites;
    size_t n = isob_mpk_test_sites(&sites), k = 0;
    for (size_t i = 0; i < n && k < cap; i++)
        if (sites[i].role != MPK_ROLE_INSN)
            out[k++] = (uintptr_t)sites[i].addr;
    return k;
}

/* This process: the gate's recorded WRPKRUs are found and marked, and
 * nothing else is; a WRPKRU planted in an executable page is a stray. */
static void t_self_gate_and_stray(void)
{
    unsigned char *page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED);
    memset(page, 0xc3, PAGE);
    memcpy(page + 100, "\xb8\x0f\x01\xef\x00", 5);
    CHECK(mprotect(page, PAGE, PROT_READ | PROT_EXEC) == 0);
    struct isob_inspect in;
    char why[256] = "";
    CHECK_EQ_LONG(isob_inspect_load(getpid(), &in, why, sizeof why), 0);
    CHECK(in.bytes_read > 0);
    CHECK_EQ_LONG(isob_inspect_find(&in), 0);
    uintptr_t g[16];
    size_t ng = gate_addrs(g, 16);
    CHECK(ng > 0);
    CHECK_EQ_LONG(isob_inspect_mark_gate(&in, &in, g, ng), ng);
    for (size_t i = 0; i < ng; i++) {
        const struct isob_site *s = site_at(&in, g[i]);
        CHECK(s != NULL);
        CHECK(s->gate && s->kind == ISOB_INSN_WRPKRU);
    }
    size_t marked = 0;
    for (size_t i = 0; i < in.nsites; i++)
        marked += in.sites[i].gate;
    CHECK_EQ_LONG(marked, ng);
    const struct isob_site *stray = site_at(&in, (uintptr_t)page + 101);
    CHECK(stray != NULL);
    CHECK(!stray->gate && stray->kind == ISOB_INSN_WRPKRU);
    CHECK(strcmp(in.maps[stray->map].path, "[anon]") == 0);
    CHECK_EQ_LONG(stray->file_offset, 101);
    /* A pass finds what the recorded scan found. */
    CHECK_EQ_LONG(isob_inspect_pass(&in), in.nsites);
    printf("# %zu executable mappings, %llu bytes read, %zu sites, %zu of them the gate's\n", in.nmaps,
           (unsigned long long)in.bytes_read, in.nsites, marked);
    isob_inspect_free(&in);
    munmap(page, PAGE);
}

/* An executable mapping that cannot be read (a file mapping's page past
 * the end of the file) is unscanned, with the reason, never clean. */
static void t_unreadable_is_unscanned(void)
{
    char path[] = "/tmp/isob-inspect-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    static const unsigned char code[PAGE] = {0xc3};
    CHECK(write(fd, code, sizeof code) == (ssize_t)sizeof code);
    unsigned char *p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    CHECK(p != MAP_FAILED);
    struct isob_inspect in;
    char why[256] = "";
    CHECK_EQ_LONG(isob_inspect_load(getpid(), &in, why, sizeof why), 0);
    long mi = isob_inspect_map_of(&in, (uintptr_t)p);
    CHECK(mi >= 0);
    const struct isob_xmap *x = &in.maps[mi];
    printf("# the mapping past the end of its file: %s\n", x->why);
    CHECK(x->bytes == NULL);
    CHECK(x->err != 0 && x->why[0] != 0);
    CHECK(in.unscanned >= 1);
    CHECK(in.bytes_unread >= 2 * PAGE);
    isob_inspect_free(&in);
    munmap(p, 2 * PAGE);
    close(fd);
}

/* A WRPKRU whose first two bytes end one executable mapping and whose
 * last starts the next, touching one: found, and said to span them. */
static void t_span_between_mappings(void)
{
    unsigned char *p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    memset(p, 0xc3, 2 * PAGE);
    p[PAGE - 2] = 0x0f;
    p[PAGE - 1] = 0x01;
    p[PAGE] = 0xef;
    /* Different permissions keep the two mappings apart. */
    CHECK(mprotect(p, PAGE, PROT_READ | PROT_EXEC) == 0);
    CHECK(mprotect(p + PAGE, PAGE, PROT_READ | PROT_WRITE | PROT_EXEC) == 0 ||
          mprotect(p + PAGE, PAGE, PROT_EXEC) == 0);
    struct isob_inspect in;
    char why[256] = "";
    CHECK_EQ_LONG(isob_inspect_load(getpid(), &in, why, sizeof why), 0);
    CHECK_EQ_LONG(isob_inspect_find(&in), 0);
    const struct isob_site *s = site_at(&in, (uintptr_t)p + PAGE - 2);
    CHECK(s != NULL);
    CHECK(s->spans && s->kind == ISOB_INSN_WRPKRU);
    isob_inspect_free(&in);
    munmap(p, 2 * PAGE);
}

/* Another process (a forked copy of this one): read through its
 * /proc/PID/mem, its gate sites matched by file and offset. */
static void t_other_process(void)
{
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        alarm(tap_limit(300));
        for (;;)
            pause();
    }
    struct isob_inspect self, other;
    char why[256] = "";
    CHECK_EQ_LONG(isob_inspect_load(getpid(), &self, why, sizeof why), 0);
    int rc = isob_inspect_load(child, &other, why, sizeof why);
    if (rc == 0)
        rc = isob_inspect_find(&other);
    uintptr_t g[16];
    size_t ng = gate_addrs(g, 16);
    size_t marked = rc == 0 ? isob_inspect_mark_gate(&other, &self, g, ng) : 0;
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    CHECK_EQ_LONG(rc, 0);
    CHECK(other.bytes_read > 0);
    CHECK_EQ_LONG(marked, ng);
    isob_inspect_free(&self);
    isob_inspect_free(&other);
}

/* A process that is gone: the maps cannot be read, which is an error with
 * its reason, not an empty (clean) result. */
static void t_gone_process(void)
{
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    struct isob_inspect in;
    char why[256] = "";
    CHECK(isob_inspect_load(child, &in, why, sizeof why) < 0);
    printf("# %s\n", why);
    CHECK(strstr(why, "maps") != NULL);
}

#endif

int main(void)
{
    TAP_CASE(t_patterns);
    TAP_CASE(t_every_offset);
#if defined(__x86_64__)
    TAP_CASE(t_self_gate_and_stray);
    TAP_CASE(t_unreadable_is_unscanned);
    TAP_CASE(t_span_between_mappings);
    TAP_CASE(t_other_process);
    TAP_CASE(t_gone_process);
#endif
    return tap_done();
}
