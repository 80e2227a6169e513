/* inspect: ERIM's binary inspection (inspect.h) of a process's executable
 * memory, as a check and as a cost.
 *
 * The target is this isob process (the binary and every library it maps)
 * or --pid PID.  Every executable mapping is copied out through
 * /proc/PID/mem and matched at every byte offset for WRPKRU, XRSTOR and
 * XRSTORS.  Each site is reported with its file, file offset, bytes and
 * whether it is one of the MPK gate's recorded WRPKRUs (the isob_mpk_sites
 * section; a target running another copy of the same file is matched by
 * file and offset).  A mapping that cannot be read is reported with the
 * reason and counted as unscanned.
 *
 * The cost: INSPECT_PASSES passes of the matcher over every copy, each
 * timed on its own (after one untimed pass), with the cross-process clock
 * of the lwc benchmarks (the TSC where usable, else CLOCK_MONOTONIC_RAW);
 * params.pages is what one pass covers, so that the Python side gives the
 * time per 4 KiB page beside ERIM's published 3.5 to 6.2 us (Konrad 2023,
 * §2.1.2; 17.7 ms for 3,918 pages, §3.1.2).  Every pass must find the same
 * number of sites as the recorded scan, or the result fails.
 *
 * x86-64 only: arm64 has no WRPKRU (its protection keys, POE, are
 * POR_EL0, written by MSR), so there the benchmark says SKIP. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isobench/bench.h"
#include "isobench/inspect.h"
#include "isobench/osprobe.h"
#include "mpk.h"
#include "xclock.h"

#define INSPECT_PASSES 100          /* timed passes of the matcher */
#define INSPECT_QUICK_PASSES 20     /* --quick */
#define INSPECT_PID_MAX 4194304     /* Linux's PID_MAX_LIMIT on 64-bit */

static const struct isob_bench_option in_options[] = {
    {"--pid", "a process id", "this isob process", "the process whose executable mappings are inspected"},
    {NULL, NULL, NULL, NULL},
};

/* --pid: digits, 1 to PID_MAX_LIMIT, and a process that exists. */
static int in_parse_pid(const char *text, pid_t *pid, char *why, size_t len)
{
    char *end;
    errno = 0;
    long v = text && *text >= '0' && *text <= '9' ? strtol(text, &end, 10) : -1;
    if (v <= 0 || errno || *end || v > INSPECT_PID_MAX) {
        snprintf(why, len, "--pid: '%s' is not a process id (1 to %d)", text ? text : "", INSPECT_PID_MAX);
        return -EINVAL;
    }
    if (kill((pid_t)v, 0) != 0 && errno == ESRCH) {
        snprintf(why, len, "--pid %ld: no such process", v);
        return -EINVAL;
    }
    *pid = (pid_t)v;
    return 0;
}

static int in_check(const struct isob_bench_opts *o, char *why, size_t len)
{
    pid_t pid;
    return o->pid ? in_parse_pid(o->pid, &pid, why, len) : 0;
}

#if defined(__x86_64__)

/* The address in self of the target's site, where self maps the same file. */
static uintptr_t self_addr(const struct isob_inspect *self, const struct isob_xmap *x, uint64_t off)
{
    for (size_t i = 0; i < self->nmaps; i++) {
        const struct isob_xmap *m = &self->maps[i];
        if (m->inode == x->inode && x->inode && strcmp(m->path, x->path) == 0 && off >= m->offset &&
            off < m->offset + (m->end - m->start))
            return m->start + (uintptr_t)(off - m->offset);
    }
    return 0;
}

/* The mpk mechanisms close every stray WRPKRU of their process before a
 * create (src/mechanisms/mpk/strays.c).  For a scan of this process, one
 * mpk compartment is created and destroyed after the sites are found, so
 * that each stray can be reported as closed or open as a program that
 * uses mpk would have it.  1 when the closing ran, 0 with why. */
static int close_as_mpk(char *why, size_t len)
{
    const struct isob_mechanism *m = isob_mechanism_find("mpk");
    if (!m) {
        snprintf(why, len, "mpk is not in this build");
        return 0;
    }
    if (m->probe(why, len) != 0)
        return 0;
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    struct isob_comp *c = NULL;
    int rc = isob_comp_create(m, &spec, &c);
    if (rc) {
        const char *lw = m->limit_why ? m->limit_why() : NULL;
        snprintf(why, len, "create mpk: %s", lw ? lw : isob_strerror(rc));
        return 0;
    }
    isob_comp_destroy(c);
    return 1;
}

/* 1 when the stray at addr was closed by mpk (in its record of closed
 * sites, and no longer the instruction in memory), 0 when it is open. */
static int site_closed(const struct isob_site *site, const struct isob_xmap *m)
{
    const struct isob_mpk_closed *closed;
    size_t n = isob_mpk_closed_sites(&closed);
    for (size_t i = 0; i < n; i++)
        if ((uintptr_t)closed[i].addr == site->addr)
            return m->perms[0] != 'r' ||
                   isob_insn_match((const unsigned char *)site->addr, ISOB_INSN_MAX) != (int)site->kind;
    return 0;
}

static void in_emit(struct isob_xclock *x, const struct isob_inspect *in, const struct isob_inspect *self,
                    int is_self, size_t gates_recorded, size_t gates_found, unsigned passes,
                    struct isob_samples *s, const char *failure, int closing, const char *closing_why)
{
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (!f) {
        isob_emit_result(&x->ctx, "inspect", "{}", NULL, NULL, "failed", "out of memory", NULL);
        return;
    }
    struct isob_jw w = {.f = f, .comma = 0};
    fputc('{', f);
    isob_jw_str(&w, "target", is_self ? "self" : "pid");
    char exe[300] = "";
    for (size_t i = 0; i < in->nmaps && !exe[0]; i++)
        if (in->maps[i].inode)
            snprintf(exe, sizeof exe, "%s", in->maps[i].path);
    isob_jw_str(&w, "target_exe", exe[0] ? exe : NULL);
    isob_jw_str(&w, "patterns", "wrpkru 0F 01 EF; xrstor 0F AE /5 (mod != 11b); xrstors 0F C7 /3 "
                                "(mod != 11b); at every byte offset");
    isob_jw_int(&w, "passes", passes);
    isob_jw_int(&w, "pages", (long long)((in->bytes_read + ISOB_SCAN_PAGE - 1) / ISOB_SCAN_PAGE));
    isob_jw_int(&w, "bytes_scanned", (long long)in->bytes_read);
    isob_jw_int(&w, "mappings", (long long)in->nmaps);
    isob_jw_int(&w, "mappings_unscanned", (long long)in->unscanned);
    isob_jw_int(&w, "bytes_unscanned", (long long)in->bytes_unread);
    isob_jw_int(&w, "gate_sites_recorded", (long long)gates_recorded);
    isob_jw_int(&w, "gate_sites_found", (long long)gates_found);
    size_t stray = 0;
    for (size_t i = 0; i < in->nsites; i++)
        stray += !in->sites[i].gate;
    isob_jw_int(&w, "stray_sites", (long long)stray);
    isob_jw_str(&w, "mpk_closing", closing ? "applied" : NULL);
    isob_jw_str(&w, "mpk_closing_why", closing ? NULL : closing_why);
    isob_jw_arr(&w, "sites");
    for (size_t i = 0; i < in->nsites; i++) {
        const struct isob_site *site = &in->sites[i];
        const struct isob_xmap *m = &in->maps[site->map];
        char t[64], sym[200];
        isob_jw_obj(&w, NULL);
        isob_jw_str(&w, "file", m->path);
        snprintf(t, sizeof t, "%#llx", (unsigned long long)site->file_offset);
        isob_jw_str(&w, "offset", t);
        snprintf(t, sizeof t, "%#lx", (unsigned long)site->addr);
        isob_jw_str(&w, "address", t);
        isob_jw_str(&w, "insn", isob_insn_name(site->kind));
        snprintf(t, sizeof t, "%02x %02x %02x", site->bytes[0], site->bytes[1], site->bytes[2]);
        isob_jw_str(&w, "bytes", t);
        isob_jw_bool(&w, "gate", site->gate);
        if (site->gate || !closing)
            isob_jw_raw(&w, "closed", "null");
        else
            isob_jw_bool(&w, "closed", site_closed(site, m));
        if (site->spans)
            isob_jw_bool(&w, "spans_mappings", 1);
        uintptr_t here = is_self ? site->addr : self_addr(self, m, site->file_offset);
        sym[0] = 0;
        if (here)
            isob_symbol_of(here, sym, sizeof sym);
        isob_jw_str(&w, "symbol", sym[0] ? sym : NULL);
        isob_jw_close(&w, '}');
    }
    isob_jw_close(&w, ']');
    isob_jw_arr(&w, "unscanned");
    for (size_t i = 0; i < in->nmaps; i++) {
        const struct isob_xmap *m = &in->maps[i];
        if (m->bytes)
            continue;
        char t[64];
        isob_jw_obj(&w, NULL);
        isob_jw_str(&w, "file", m->path);
        snprintf(t, sizeof t, "%#lx-%#lx", (unsigned long)m->start, (unsigned long)m->end);
        isob_jw_str(&w, "range", t);
        isob_jw_str(&w, "perms", m->perms);
        isob_jw_str(&w, "why", m->why);
        isob_jw_close(&w, '}');
    }
    isob_jw_close(&w, ']');
    fputc('}', f);
    int bad = fclose(f) != 0;
    isob_emit_result(&x->ctx, "inspect", bad ? "{}" : buf, failure ? NULL : s, NULL,
                     failure ? "failed" : "ok", failure, NULL);
    free(buf);
}

static int in_run(struct isob_bench_ctx *ctx)
{
    pid_t pid = getpid();
    char why[256] = "";
    int is_self = 1;
    if (ctx->opts.pid) {
        if (in_parse_pid(ctx->opts.pid, &pid, why, sizeof why) != 0) {
            isob_emit_result(ctx, "inspect", "{}", NULL, NULL, "failed", why, NULL);
            return 0;
        }
        is_self = pid == getpid();
    }
    struct isob_xclock x;
    int rc = isob_xclock_open(&x, ctx);
    if (rc)
        return rc;
    struct isob_inspect self, target;
    memset(&target, 0, sizeof target);
    if ((rc = isob_inspect_load(getpid(), &self, why, sizeof why)) != 0) {
        isob_emit_result(&x.ctx, "inspect", "{}", NULL, NULL, "failed", why, NULL);
        isob_xclock_close(&x, ctx);
        return 0;
    }
    struct isob_inspect *in = &self;
    if (!is_self) {
        if ((rc = isob_inspect_load(pid, &target, why, sizeof why)) != 0) {
            isob_emit_result(&x.ctx, "inspect", "{\"target\":\"pid\"}", NULL, NULL, "failed", why, NULL);
            isob_inspect_free(&self);
            isob_xclock_close(&x, ctx);
            return 0;
        }
        in = &target;
    }
    /* The gate's recorded WRPKRUs (an opening or a closing one each). */
    const struct isob_mpk_site *sites;
    size_t n = isob_mpk_test_sites(&sites), gates = 0;
    uintptr_t *addrs = calloc(n ? n : 1, sizeof *addrs);
    unsigned passes = ctx->opts.quick ? INSPECT_QUICK_PASSES : INSPECT_PASSES;
    struct isob_samples s = {0};
    const char *failure = NULL;
    char reason[200];
    if (!addrs || isob_samples_alloc(&s, passes, 1) != 0 || isob_inspect_find(in) != 0) {
        isob_samples_free(&s);
        free(addrs);
        isob_inspect_free(&self);
        isob_inspect_free(&target);
        isob_xclock_close(&x, ctx);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        if (sites[i].role != MPK_ROLE_INSN)
            addrs[gates++] = (uintptr_t)sites[i].addr;
    size_t found = isob_inspect_mark_gate(in, &self, addrs, gates);
    free(addrs);
    char closing_why[256] = "the target is another process: the mpk creates of that process close its strays";
    int closing = is_self ? close_as_mpk(closing_why, sizeof closing_why) : 0;
    /* Sites that span two mappings are found apart from the passes. */
    size_t expect = 0;
    for (size_t i = 0; i < in->nsites; i++)
        expect += !in->sites[i].spans;
    if (in->bytes_read == 0) {
        failure = "no executable mapping could be read: nothing was scanned";
    } else {
        volatile size_t sink = isob_inspect_pass(in);  /* untimed: caches and TLB warm */
        (void)sink;
        for (unsigned p = 0; p < passes; p++) {
            uint64_t t0 = isob_xclock_now(&x);
            size_t got = isob_inspect_pass(in);
            uint64_t t1 = isob_xclock_now(&x);
            s.v[s.n++] = t1 - t0;
            if (got != expect && !failure) {
                snprintf(reason, sizeof reason, "pass %u found %zu sites, the recorded scan %zu", p, got,
                         expect);
                failure = reason;
            }
        }
    }
    in_emit(&x, in, &self, is_self, gates, found, passes, &s, failure, closing, closing_why);
    isob_samples_free(&s);
    isob_inspect_free(&self);
    isob_inspect_free(&target);
    isob_xclock_close(&x, ctx);
    return 0;
}

#else /* !__x86_64__ */

static int in_run(struct isob_bench_ctx *ctx)
{
    isob_emit_result(ctx, "inspect", "{}", NULL, NULL, "skipped",
                     "no WRPKRU or XRSTOR on this architecture: PKRU and its instructions are "
                     "x86's (arm64's protection keys, POE, are written with MSR POR_EL0)", NULL);
    ctx->skipped = 1;
    return 0;
}

#endif

const struct isob_bench isob_bench_inspect = {
    .name = "inspect",
    .summary = "ERIM's binary inspection: WRPKRU/XRSTOR at every byte of executable memory, "
               "and its cost per page",
    .needs_mechanism = 0,
    .run = in_run,
    .check = in_check,
    .options = in_options,
};
