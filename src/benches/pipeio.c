/* pipeio: pipe I/O out of and inside a compartment (Morello's pipe
 * experiment, with each cost measured apart and the producer kept out of
 * the reader's time).
 *
 * Per size (1, 64, 1024, 4096, 65536 B) and variant:
 *   write      one write of the payload, the reader idle and the pipe empty
 *              (the pipe is drained and the bytes verified after each
 *              sample, untimed);
 *   read       one read of a payload already in the pipe (written before
 *              the sample, untimed), short reads looped;
 *   roundtrip  write the payload to an echo process, which returns it
 *              complemented, and read the reply (lat_pipe style);
 *   stream     write a stream of payload-sized chunks; a reader process
 *              sums every byte and answers with the sum; the sample runs
 *              from the first write to the answer.
 * "where" in params: `out` makes the system calls here; `in` makes them
 * from the compartment's trusted code through the host-call interface
 * (isobench/work.h): in this process for in-process mechanisms, in the
 * server for process mechanisms, through an import for wasm.  Mechanisms
 * that filter the compartment's system calls cannot do I/O inside and skip
 * `in`.  Every transfer is verified; the first call of each result is
 * reported apart ("cold"), never among the samples. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/host.h"
#include "isobench/work.h"
#include "workload.h"

static const size_t pio_sizes[] = {1, 64, 1024, 4096, 65536};
#define PIO_NSIZES (sizeof pio_sizes / sizeof pio_sizes[0])

#define PIO_PIPE_BYTES (256 * 1024)          /* F_SETPIPE_SZ: room for a payload and its reply */
#define PIO_BUDGET_NS 1000000000ull          /* per result: samples stop after about this long */
#define PIO_BUDGET_NS_QUICK 100000000ull     /* ... with --quick */
#define PIO_STREAM_BYTES (64u << 20)         /* a stream moves at most this much */
#define PIO_STREAM_BYTES_QUICK (8u << 20)
#define PIO_STREAM_WRITES 16384u             /* ... in at most this many writes */
#define PIO_STREAM_WRITES_QUICK 2048u
#define PIO_STREAM_REPS 10                   /* streams per result */
#define PIO_SEED 0x70697065u                 /* the payload's pattern */

enum { V_WRITE, V_READ, V_RT, V_STREAM, V_N };
static const char *const pio_variants[V_N] = {"write", "read", "roundtrip", "stream"};
enum { P_OUT, P_IN };
static const char *const pio_where[2] = {"out", "in"};

struct pio_run {
    struct wl *w;
    const char *placement;
    struct isob_comp *c;       /* NULL when `in` cannot run */
    const char *in_skip;
    char in_why[256];
    int a[2], b[2];            /* data pipe (to the reader side), reply pipe */
    unsigned char *obuf, *ibuf, *scratch;
    pid_t helper;              /* echo or stream reader, 0 when none */
};

/* What one result came to. */
struct pio_tally {
    uint64_t ops, bad, shorts, calls;
    uint64_t cold;             /* the first call, in counter readings */
    double gbps;               /* stream: median rate */
    char why[200];
};

static void pio_bad(struct pio_tally *t, const char *what, long got, long want)
{
    if (!t->bad)
        snprintf(t->why, sizeof t->why, "%s: got %ld, expected %ld", what, got, want);
    t->bad++;
}

/* Plain loops for the helpers and the untimed drains. */
static int pio_read_full(int fd, unsigned char *buf, size_t len)
{
    uint64_t shorts = 0;
    return isob_work_io_read(fd, buf, len, &shorts) == (int64_t)len ? 0 : -EIO;
}

static int pio_write_full(int fd, const unsigned char *buf, size_t len)
{
    uint64_t calls = 0;
    return isob_work_io_write(fd, buf, len, &calls) == (int64_t)len ? 0 : -EIO;
}

/* The echo: read len bytes, return them complemented, until the parent
 * goes away. */
static void pio_echo(struct pio_run *r, size_t len)
{
    for (;;) {
        if (pio_read_full(r->a[0], r->scratch, len) != 0)
            _exit(1);
        for (size_t i = 0; i < len; i++)
            r->scratch[i] = (unsigned char)~r->scratch[i];
        if (pio_write_full(r->b[1], r->scratch, len) != 0)
            _exit(1);
    }
}

/* The stream reader: per stream, read total bytes in whatever pieces come,
 * and answer with their byte sum and count. */
static void pio_sink(struct pio_run *r, uint64_t total)
{
    for (;;) {
        uint64_t got = 0, sum = 0;
        while (got < total) {
            ssize_t n = read(r->a[0], r->scratch, ISOB_WORK_IO_MAX);
            if (n <= 0)
                _exit(1);
            for (ssize_t i = 0; i < n; i++)
                sum += r->scratch[i];
            got += (uint64_t)n;
        }
        uint64_t ans[2] = {sum, got};
        if (pio_write_full(r->b[1], (const unsigned char *)ans, sizeof ans) != 0)
            _exit(1);
    }
}

static int pio_helper_start(struct pio_run *r, int variant, size_t len, uint64_t total)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        /* A helper outliving the benchmark would block on its pipe for ever. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (variant == V_RT)
            pio_echo(r, len);
        else
            pio_sink(r, total);
        _exit(0);
    }
    r->helper = pid;
    return 0;
}

static void pio_helper_stop(struct pio_run *r)
{
    if (r->helper > 0) {
        kill(r->helper, SIGKILL);
        waitpid(r->helper, NULL, 0);
    }
    r->helper = 0;
}

/* One operation of a variant, between two readings of backend BE.  Returns
 * the ticks; checks the transfer afterwards, untimed. */
__attribute__((always_inline)) static inline uint64_t
pio_op_as(enum isob_backend be, struct pio_run *r, int variant, int where, size_t len,
          long want, struct pio_tally *t)
{
    struct isob_counter *ctr = r->w->wctx.ctr;
    struct isob_msg *msg = r->c ? r->c->mech->shared(r->c) : NULL;
    struct isob_snap a, b;
    long got = 0;
    uint64_t n = 0, calls = 0;  /* short reads, write calls */
    if (variant == V_READ && pio_write_full(r->a[1], r->obuf, len) != 0) {
        pio_bad(t, "filling the pipe before a read", -1, (long)len);
        return 0;
    }
    if (where == P_IN) {
        msg->arg[0] = variant == V_READ ? r->a[0] : r->a[1];
        msg->arg[1] = variant == V_RT ? r->b[0] : (int64_t)len;
        msg->arg[2] = (int64_t)len;
        msg->arg[3] = 0;
    }
    unsigned entry = variant == V_WRITE ? ISOB_ENTRY_IO_WRITE
                     : variant == V_READ ? ISOB_ENTRY_IO_READ : ISOB_ENTRY_IO_ROUNDTRIP;
    isob_read_as(be, ctr, &a);
    isob_clobber();
    if (where == P_IN) {
        got = isob_call(r->c, entry);
    } else if (variant == V_WRITE) {
        got = (long)isob_work_io_write(r->a[1], r->obuf, len, &calls);
    } else if (variant == V_READ) {
        got = (long)isob_work_io_read(r->a[0], r->ibuf, len, &n);
    } else {
        got = (long)isob_work_io_write(r->a[1], r->obuf, len, &calls);
        if (got >= 0)
            got = (long)isob_work_io_read(r->b[0], r->ibuf, len, &n);
    }
    isob_clobber();
    isob_read_as(be, ctr, &b);
    t->ops++;
    /* The check of what was read, untimed: inside the compartment through
     * a second entry, so that neither placement times a checksum. */
    if (where == P_IN) {
        if (variant == V_WRITE)
            calls = (uint64_t)msg->arg[3];
        else
            n = (uint64_t)msg->arg[3];
        if (got == (long)len && variant != V_WRITE) {
            msg->arg[0] = (int64_t)len;
            got = isob_call(r->c, ISOB_ENTRY_IO_SUM);
        } else if (got >= 0 && variant != V_WRITE) {
            got = -EIO;
        }
    } else if (got >= 0 && variant != V_WRITE) {
        got = (long)isob_checksum(r->ibuf, len);
    }
    if (variant == V_WRITE) {
        t->calls += calls;
        /* Drain what was written and check it, untimed. */
        if (got == (long)len && pio_read_full(r->a[0], r->scratch, len) == 0)
            got = (long)isob_checksum(r->scratch, len);
        else if (got >= 0)
            got = -EIO;
    } else {
        t->shorts += n;
    }
    if (got != want)
        pio_bad(t, variant == V_WRITE ? "checksum of the bytes drained from the pipe"
                   : "checksum of the bytes read", got, want);
    return b.v[0] - a.v[0];
}

static void pio_measure(struct pio_run *r, int variant, int where, size_t len, long want,
                        struct isob_samples *s, struct pio_tally *t)
{
    struct wl *w = r->w;
    uint64_t budget = w->wctx.opts.quick ? PIO_BUDGET_NS_QUICK : PIO_BUDGET_NS;
    ISOB_DISPATCH(w->wctx.ctr, be_, {
        t->cold = pio_op_as(be_, r, variant, where, len, want, t);
        uint64_t t0 = isob_clock_ns();
        while (s->n < s->cap && !t->bad) {
            s->v[s->n * s->nev] = pio_op_as(be_, r, variant, where, len, want, t);
            s->n++;
            if (s->n % 64 == 0 && isob_clock_ns() - t0 > budget)
                break;
        }
    });
}

/* One stream: 0 and its ticks, or a negative errno. */
static int pio_stream_once(struct pio_run *r, int where, size_t chunk, uint32_t chunks, uint64_t want,
                           struct pio_tally *t, uint64_t *ticks)
{
    struct isob_msg *msg = r->c ? r->c->mech->shared(r->c) : NULL;
    uint64_t ans[2] = {0, 0}, calls = 0;
    long rc = 0;
    if (where == P_IN) {
        msg->arg[0] = r->a[1];
        msg->arg[1] = (int64_t)chunk;
        msg->arg[2] = chunks;
        msg->arg[3] = 0;
    }
    uint64_t a = wl_read(r->w);
    if (where == P_IN) {
        rc = isob_call(r->c, ISOB_ENTRY_IO_STREAM);
        calls = (uint64_t)msg->arg[3];
    } else {
        for (uint32_t i = 0; i < chunks && rc >= 0; i++)
            rc = (long)isob_work_io_write(r->a[1], r->obuf, chunk, &calls);
    }
    int ok = rc >= 0 && pio_read_full(r->b[0], (unsigned char *)ans, sizeof ans) == 0;
    *ticks = wl_read(r->w) - a;
    t->ops++;
    t->calls += calls;
    if (!ok) {
        pio_bad(t, "the stream", rc, 0);
        return rc < 0 ? (int)rc : -EIO;
    }
    if (ans[1] != (uint64_t)chunk * chunks)
        pio_bad(t, "bytes the reader received", (long)ans[1], (long)((uint64_t)chunk * chunks));
    else if (ans[0] != want)
        pio_bad(t, "byte sum the reader computed", (long)ans[0], (long)want);
    return t->bad ? -EIO : 0;
}

static void pio_emit(struct pio_run *r, int variant, int where, size_t len, const struct isob_samples *s,
                     const struct pio_tally *t, uint32_t chunks)
{
    struct wl *w = r->w;
    struct wl_params p;
    if (wl_params_begin(&p, r->placement) == 0) {
        isob_jw_str(&p.jw, "where", pio_where[where]);
        isob_jw_str(&p.jw, "variant", pio_variants[variant]);
        isob_jw_int(&p.jw, "payload", (long long)len);
        if (t) {
            wl_jw_u64(&p.jw, "operations", t->ops);
            wl_jw_u64(&p.jw, "verified", t->ops - t->bad);
            if (variant == V_STREAM) {
                isob_jw_int(&p.jw, "chunks", chunks);
                wl_jw_u64(&p.jw, "stream_bytes", (uint64_t)len * chunks);
                isob_jw_double(&p.jw, "gbps", t->gbps);
            } else {
                wl_jw_u64(&p.jw, "cold", t->cold);
            }
            if (variant == V_WRITE || variant == V_STREAM)
                wl_jw_u64(&p.jw, "write_calls", t->calls);
            else
                wl_jw_u64(&p.jw, "short_reads", t->shorts);
        }
        isob_jw_str(&p.jw, "io_by", where == P_OUT ? "this process"
                    : strncmp(w->wctx.mech->name, "wasm", 4) == 0 ? "the host, for the guest's imported host_call"
                    : (w->wctx.mech->props & ISOB_SEPARATE_AS) ? "the compartment's server process"
                    : "the compartment's code, in this process");
    }
    const char *reason = t && t->bad ? t->why : (!s || s->n == 0) ? "no sample" : NULL;
    if (where == P_IN && !r->c)
        reason = r->in_why;
    wl_emit(w, wl_params_end(&p, w->wctx.mech), reason ? NULL : s, NULL, t ? 1 : 0,
            reason ? "failed" : "ok", reason);
    wl_params_free(&p);
}

static void pio_skip(struct pio_run *r, int variant, int where, size_t len, const char *why)
{
    struct wl_params p;
    if (wl_params_begin(&p, r->placement) == 0) {
        isob_jw_str(&p.jw, "where", pio_where[where]);
        isob_jw_str(&p.jw, "variant", pio_variants[variant]);
        isob_jw_int(&p.jw, "payload", (long long)len);
    }
    wl_emit(r->w, wl_params_end(&p, r->w->wctx.mech), NULL, NULL, 0, "skipped", why);
    wl_params_free(&p);
}

static void pio_ops(struct pio_run *r, int variant, size_t len)
{
    unsigned nev = r->w->wctx.ctr->nev;
    long want = (long)isob_checksum(r->obuf, len);
    if (variant == V_RT) {
        for (size_t i = 0; i < len; i++)
            r->scratch[i] = (unsigned char)~r->obuf[i];
        want = (long)isob_checksum(r->scratch, len);
        int rc = pio_helper_start(r, V_RT, len, 0);
        if (rc) {
            char why[160];
            snprintf(why, sizeof why, "fork of the echo process: %s", isob_strerror(rc));
            for (int where = 0; where < 2; where++)
                pio_skip(r, variant, where, len, why);
            return;
        }
    }
    for (int where = 0; where < 2; where++) {
        if (where == P_IN && r->in_skip) {
            pio_skip(r, variant, where, len, r->in_skip);
            continue;
        }
        struct isob_samples s;
        struct pio_tally t;
        memset(&t, 0, sizeof t);
        if (isob_samples_alloc(&s, r->w->wctx.opts.n, nev) != 0) {
            snprintf(t.why, sizeof t.why, "out of memory for samples");
            t.bad = 1;
            pio_emit(r, variant, where, len, NULL, &t, 0);
            continue;
        }
        if (where == P_OUT || r->c)
            pio_measure(r, variant, where, len, want, &s, &t);
        pio_emit(r, variant, where, len, &s, &t, 0);
        isob_samples_free(&s);
    }
    pio_helper_stop(r);
}

static void pio_stream(struct pio_run *r, size_t len)
{
    const struct isob_bench_opts *o = &r->w->wctx.opts;
    uint32_t writes = o->quick ? PIO_STREAM_WRITES_QUICK : PIO_STREAM_WRITES;
    uint32_t cap = (uint32_t)((o->quick ? PIO_STREAM_BYTES_QUICK : PIO_STREAM_BYTES) / len);
    uint32_t chunks = writes < cap ? writes : cap;
    uint64_t bytesum = 0;
    for (size_t i = 0; i < len; i++)
        bytesum += r->obuf[i];
    uint64_t want = bytesum * chunks;
    int rc = pio_helper_start(r, V_STREAM, len, (uint64_t)len * chunks);
    if (rc) {
        char why[160];
        snprintf(why, sizeof why, "fork of the stream reader: %s", isob_strerror(rc));
        for (int where = 0; where < 2; where++)
            pio_skip(r, V_STREAM, where, len, why);
        return;
    }
    for (int where = 0; where < 2; where++) {
        if (where == P_IN && r->in_skip) {
            pio_skip(r, V_STREAM, where, len, r->in_skip);
            continue;
        }
        struct isob_samples s;
        struct pio_tally t;
        double g[PIO_STREAM_REPS];
        memset(&t, 0, sizeof t);
        if (isob_samples_alloc(&s, PIO_STREAM_REPS, r->w->wctx.ctr->nev) != 0) {
            snprintf(t.why, sizeof t.why, "out of memory for samples");
            t.bad = 1;
            pio_emit(r, V_STREAM, where, len, NULL, &t, chunks);
            continue;
        }
        for (int i = 0; i < PIO_STREAM_REPS && (where == P_OUT || r->c); i++) {
            uint64_t ticks;
            if (pio_stream_once(r, where, len, chunks, want, &t, &ticks) != 0)
                break;
            s.v[s.n * s.nev] = ticks;
            double ns = wl_ns(r->w, (double)ticks);
            g[s.n++] = ns > 0 ? (double)len * chunks / ns : 0;
        }
        t.gbps = s.n ? isob_median_double(g, s.n) : 0;
        if (!t.bad && t.gbps > WL_MAX_GBPS) {
            snprintf(t.why, sizeof t.why, "implausible: %.1f GB/s through a pipe, above %.0f GB/s",
                     t.gbps, WL_MAX_GBPS);
            t.bad = 1;
        }
        pio_emit(r, V_STREAM, where, len, &s, &t, chunks);
        isob_samples_free(&s);
    }
    pio_helper_stop(r);
}

static void pio_placement(struct wl *w, const char *placement, int server_cpu, void *arg)
{
    (void)arg;
    const struct isob_mechanism *m = w->wctx.mech;
    struct pio_run r = {.w = w, .placement = placement, .a = {-1, -1}, .b = {-1, -1}};
    char why[256];
    r.obuf = malloc(ISOB_WORK_IO_MAX);
    r.ibuf = malloc(ISOB_WORK_IO_MAX);
    r.scratch = malloc(ISOB_WORK_IO_MAX);
    /* The pipes first: a process mechanism's server inherits them when
     * the compartment is created (spec.host_fds says which to keep). */
    if (!r.obuf || !r.ibuf || !r.scratch || pipe(r.a) != 0 || pipe(r.b) != 0) {
        snprintf(why, sizeof why, "set-up: %s", isob_strerror(r.obuf && r.ibuf && r.scratch ? -errno : -ENOMEM));
        struct wl_params p;
        if (wl_params_begin(&p, placement) == 0)
            isob_jw_str(&p.jw, "where", pio_where[P_OUT]);
        wl_emit(w, wl_params_end(&p, m), NULL, NULL, 0, "failed", why);
        wl_params_free(&p);
        goto out;
    }
    fcntl(r.a[1], F_SETPIPE_SZ, PIO_PIPE_BYTES);
    fcntl(r.b[1], F_SETPIPE_SZ, PIO_PIPE_BYTES);
    isob_work_io_fill(r.obuf, ISOB_WORK_IO_MAX, PIO_SEED);
    if (!isob_host_calls_ok(m, why, sizeof why)) {
        snprintf(r.in_why, sizeof r.in_why, "%s", why);
        r.in_skip = r.in_why;
    } else {
        struct isob_comp_spec spec;
        isob_spec_defaults(&spec);
        spec.server_cpu = server_cpu;
        spec.heap_size = isob_work_heap_size(2 * ISOB_WORK_IO_MAX);
        int fds[4] = {r.a[0], r.a[1], r.b[0], r.b[1]};
        memcpy(spec.host_fds, fds, sizeof fds);
        spec.n_host_fds = 4;
        int rc = isob_comp_create(m, &spec, &r.c);
        for (int i = 0; rc == 0 && i < 4; i++)
            rc = isob_host_grant_fd(r.c, fds[i]);
        struct isob_msg *msg = rc == 0 ? r.c->mech->shared(r.c) : NULL;
        if (rc == 0) {
            msg->len = 0;
            msg->arg[0] = PIO_SEED;
            msg->arg[1] = ISOB_WORK_IO_MAX;
            long sum = isob_call(r.c, ISOB_ENTRY_IO_FILL);
            if (sum != (long)isob_checksum(r.obuf, ISOB_WORK_IO_MAX))
                rc = sum < 0 ? (int)sum : -EPROTO;
        }
        if (rc) {
            snprintf(r.in_why, sizeof r.in_why, "create and fill: %s", isob_strerror(rc));
            if (r.c)
                isob_comp_destroy(r.c);
            r.c = NULL;
        }
    }
    for (size_t i = 0; i < PIO_NSIZES; i++) {
        for (int v = 0; v < V_STREAM; v++)
            pio_ops(&r, v, pio_sizes[i]);
        pio_stream(&r, pio_sizes[i]);
    }
out:
    if (r.c)
        isob_comp_destroy(r.c);
    for (int i = 0; i < 2; i++) {
        if (r.a[i] >= 0)
            close(r.a[i]);
        if (r.b[i] >= 0)
            close(r.b[i]);
    }
    free(r.obuf);
    free(r.ibuf);
    free(r.scratch);
}

static int pio_run_bench(struct isob_bench_ctx *ctx)
{
    struct wl w;
    int rc = wl_begin(&w, ctx, "pipeio");
    if (rc)
        return rc;
    wl_each_placement(&w, pio_placement, NULL);
    wl_end(&w);
    return 0;
}

const struct isob_bench isob_bench_pipeio = {
    .name = "pipeio",
    .summary = "pipe write, read, round trip and stream of 1 B to 64 KiB, out and from inside the compartment",
    .needs_mechanism = 1,
    .run = pio_run_bench,
};
