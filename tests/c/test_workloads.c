/* The workloads (worksweep, cpuwork, memops, pipeio, scale) and the work
 * entries under them: the kernels give the same bits natively, through a
 * process and in wasm; the maths routines are maths; the host calls do
 * their I/O where the compartment lives and a wasm guest only on
 * descriptors it was granted; and every sanity check fails when the work
 * is not done (a zero-trip loop, a skipped write, a wrong value, a dead
 * compartment).  No test asserts a duration. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>

#include "isobench/bench.h"
#include "isobench/host.h"
#include "isobench/work.h"
#include "isob_wasm.h"
#include "../../src/benches/workload.h"
#include "tap.h"
#include "children.h"

extern const struct isob_mechanism isob_mech_direct, isob_mech_process_futex, isob_mech_wasm,
    isob_mech_seccomp;

/* Under qemu-user (ISOB_TEST_EMULATED) page faults are the emulator's and
 * the process mechanisms' robust futex lists do not exist: the cases that
 * rest on either run in the native build. */
#define SKIP_IF_EMULATED(what)                                                        \
    do {                                                                              \
        if (getenv("ISOB_TEST_EMULATED"))                                             \
            SKIP("%s: not what qemu-user emulates; the native build runs it", what);  \
    } while (0)

static struct isob_comp *make_with(const struct isob_mechanism *m, size_t heap, const int *fds,
                                   unsigned nfds)
{
    char why[256] = "";
    if (m->probe(why, sizeof why) != 0)
        SKIP("%s: %s", m->name, why);
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    if (heap)
        spec.heap_size = heap;
    for (unsigned i = 0; i < nfds; i++)
        spec.host_fds[i] = fds[i];
    spec.n_host_fds = nfds;
    struct isob_comp *c = NULL;
    int rc = isob_comp_create(m, &spec, &c);
    if (rc)
        fprintf(stderr, "# create %s: %s\n", m->name, isob_strerror(rc));
    CHECK_EQ_LONG(rc, 0);
    c->mech->shared(c)->len = 0;
    return c;
}

static struct isob_comp *make(const struct isob_mechanism *m, size_t heap)
{
    return make_with(m, heap, NULL, 0);
}

static long call2(struct isob_comp *c, unsigned entry, int64_t a0, int64_t a1)
{
    struct isob_msg *m = c->mech->shared(c);
    m->arg[0] = a0;
    m->arg[1] = a1;
    m->arg[2] = 0;
    m->arg[3] = 0;
    return isob_call(c, entry);
}

static int64_t double_bits(double d)
{
    union { double d; int64_t i; } u = {d};
    return u.i;
}

/* ---- the kernels: the same bits everywhere ---- */

#define N_KERNEL 5000u

static void check_kernels(const struct isob_mechanism *m)
{
    struct isob_comp *c = make(m, isob_work_heap_size(N_KERNEL * 4));
    struct isob_msg *msg = c->mech->shared(c);
    for (uint64_t k = 0; k <= 1000; k += 250) {
        uint64_t want = isob_work_kernel(k, 42 + k);
        CHECK_EQ_LONG(call2(c, ISOB_ENTRY_WORK, (int64_t)k, 42 + (int64_t)k), isob_work_fold31(want));
        CHECK((uint64_t)msg->arg[2] == want);
    }
    static const unsigned entries[] = {ISOB_ENTRY_CPU_INT, ISOB_ENTRY_CPU_FLOAT, ISOB_ENTRY_CPU_MATHS};
    uint64_t (*const fns[])(uint32_t, uint64_t) = {isob_work_cpu_int, isob_work_cpu_float, isob_work_cpu_maths};
    for (int i = 0; i < 3; i++) {
        uint64_t want = fns[i](N_KERNEL, 3);
        CHECK_EQ_LONG(call2(c, entries[i], N_KERNEL, 3), isob_work_fold31(want));
        if ((uint64_t)msg->arg[2] != want)
            fprintf(stderr, "# %s: kernel %d: %#llx in, %#llx out\n", m->name, i,
                    (unsigned long long)msg->arg[2], (unsigned long long)want);
        CHECK((uint64_t)msg->arg[2] == want);
    }
    uint32_t *a = malloc(N_KERNEL * 4);
    CHECK(a != NULL);
    uint64_t want = isob_work_cpu_array(a, N_KERNEL, 9);
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_CPU_ARRAY, N_KERNEL, 9), isob_work_fold31(want));
    CHECK((uint64_t)msg->arg[2] == want);
    /* An array larger than the arena is refused, not run past its end. */
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_CPU_ARRAY, 4 * N_KERNEL, 9), -ENOMEM);
    static const unsigned mentries[] = {ISOB_ENTRY_MATH_SIN, ISOB_ENTRY_MATH_COS, ISOB_ENTRY_MATH_TAN,
                                        ISOB_ENTRY_MATH_SQRT, ISOB_ENTRY_MATH_LOG};
    double (*const mfns[])(double) = {isob_work_sin, isob_work_cos, isob_work_tan, isob_work_sqrt,
                                      isob_work_log};
    for (double x = 0; x < 1e8; x = x * 3 + 1.25) {
        for (int i = 0; i < 5; i++) {
            CHECK_EQ_LONG(call2(c, mentries[i], double_bits(x), 0), 0);
            CHECK(msg->arg[1] == double_bits(mfns[i](x)));
        }
    }
    free(a);
    isob_comp_destroy(c);
}

static void t_kernels_direct(void) { check_kernels(&isob_mech_direct); }
static void t_kernels_process(void) { check_kernels(&isob_mech_process_futex); }
/* Another compiler, another ABI, the same bits: the maths use only
 * operations IEEE 754 defines exactly. */
static void t_kernels_wasm(void) { check_kernels(&isob_mech_wasm); }

/* The maths routines compute what their names say (checked against libm,
 * which the trusted code cannot use). */
static void t_maths_are_maths(void)
{
    for (double x = 0.5; x < 1e8; x = x * 1.37 + 0.11) {
        double tol = 1e-12 + 1e-15 * x;
        CHECK(fabs(isob_work_sin(x) - sin(x)) < tol);
        CHECK(fabs(isob_work_cos(x) - cos(x)) < tol);
        CHECK(fabs(isob_work_sqrt(x) - sqrt(x)) <= 2e-16 * sqrt(x));
        CHECK(fabs(isob_work_log(x) - log(x)) < 1e-14 * (1 + fabs(log(x))));
        double t = tan(x);
        CHECK(fabs(isob_work_tan(x) - t) < tol * (1 + t * t));
    }
    CHECK(isnan(isob_work_sqrt(-1)) && isob_work_sqrt(0) == 0);
    CHECK(isinf(isob_work_log(0)) && isnan(isob_work_log(-1)));
    CHECK(isnan(isob_work_sin(1e300)));
}

/* ---- memory and host calls ---- */

static void t_mem_closed_form(void)
{
    size_t words = 12345;
    uint64_t *p = malloc(words * 8);
    CHECK(p != NULL);
    for (uint64_t seed = 0; seed < 3; seed++) {
        isob_work_mem_write(p, words, seed * 0x1111);
        CHECK(isob_work_mem_read(p, words) == isob_work_mem_expected(words, seed * 0x1111));
    }
    CHECK(isob_work_mem_expected(0, 5) == 0);
    free(p);
}

/* The block is fresh memory inside the compartment: its first write
 * faults where the compartment runs, as malloc's would here. */
static void check_mem_entries(const struct isob_mechanism *m)
{
    size_t bytes = 4u << 20;
    struct isob_comp *c = make(m, isob_work_heap_size(bytes));
    struct isob_msg *msg = c->mech->shared(c);
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_MEM_ALLOC, (int64_t)bytes, 0), 0);
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_MEM_ALLOC, (int64_t)bytes, 0), -EBUSY);
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_HOST_FAULTS, 0, 0), 0);
    int64_t f0 = msg->arg[1];
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_MEM_WRITE, 77, 0), 0);
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_HOST_FAULTS, 0, 0), 0);
    int64_t f1 = msg->arg[1];
    CHECK(f1 - f0 >= (int64_t)(bytes / (2u << 20)));
    CHECK(call2(c, ISOB_ENTRY_MEM_READ, 0, 0) >= 0);
    CHECK((uint64_t)msg->arg[2] == isob_work_mem_expected(bytes / 8, 77));
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_MEM_FREE, 0, 0), 0);
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_MEM_READ, 0, 0), -EINVAL);
    /* Freed pages were handed back: a new block reads as zeros. */
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_MEM_ALLOC, 4096, 0), 0);
    CHECK(call2(c, ISOB_ENTRY_MEM_READ, 0, 0) == 0 && msg->arg[2] == 0);
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_MEM_FREE, 0, 0), 0);
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_MEM_ALLOC, (int64_t)bytes * 2, 0), -ENOMEM);
    isob_comp_destroy(c);
}

static void t_mem_entries_direct(void) { check_mem_entries(&isob_mech_direct); }
static void t_mem_entries_process(void) { check_mem_entries(&isob_mech_process_futex); }
static void t_mem_entries_wasm(void) { check_mem_entries(&isob_mech_wasm); }

/* The compartment writes to a pipe and reads from it; a wasm guest only
 * on descriptors granted to it. */
static void check_io_entries(const struct isob_mechanism *m, int wasm)
{
    int p[2];
    CHECK(pipe(p) == 0);
    struct isob_comp *c = make_with(m, isob_work_heap_size(2 * ISOB_WORK_IO_MAX), p, 2);
    struct isob_msg *msg = c->mech->shared(c);
    unsigned char want[100], got[100];
    isob_work_io_fill(want, sizeof want, 5);
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_IO_FILL, 5, sizeof want), isob_checksum(want, sizeof want));
    if (wasm) {
        CHECK_EQ_LONG(call2(c, ISOB_ENTRY_IO_WRITE, p[1], sizeof want), -EBADF);
        CHECK_EQ_LONG(isob_host_grant_fd(c, p[1]), 0);
    }
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_IO_WRITE, p[1], sizeof want), (long)sizeof want);
    CHECK_EQ_LONG(msg->arg[3], 1);
    CHECK_EQ_LONG(read(p[0], got, sizeof got), (long)sizeof got);
    CHECK(memcmp(want, got, sizeof want) == 0);
    CHECK_EQ_LONG(write(p[1], want, 60), 60);
    if (wasm) {
        CHECK_EQ_LONG(call2(c, ISOB_ENTRY_IO_READ, p[0], 60), -EBADF);
        CHECK_EQ_LONG(isob_host_grant_fd(c, p[0]), 0);
    }
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_IO_READ, p[0], 60), 60);
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_IO_SUM, 60, 0), isob_checksum(want, 60));
    CHECK_EQ_LONG(call2(c, ISOB_ENTRY_IO_WRITE, p[1], ISOB_WORK_IO_MAX + 1), -EINVAL);
    isob_comp_destroy(c);
    close(p[0]);
    close(p[1]);
}

/* The wasm host call checks what the guest hands it: a buffer must lie in
 * linear memory, a discard must be page-aligned, an unknown call is
 * refused.  Called as the guest's import would call it. */
uint64_t Z_isobZ_host_call(void *env, uint32_t op, uint64_t a0, uint64_t a1, uint64_t a2);
static void t_wasm_host_call_checks_the_guest(void)
{
    struct isob_comp *c = make(&isob_mech_wasm, 0);
    struct isob_wasm_linear lin;
    CHECK_EQ_LONG(isob_wasm_linear(c, &lin), 0);
    int p[2];
    CHECK(pipe(p) == 0);
    CHECK_EQ_LONG(isob_host_grant_fd(c, p[1]), 0);
    uint64_t size = lin.size;
    CHECK_EQ_LONG((int64_t)Z_isobZ_host_call(c, ISOB_HOST_WRITE, (uint64_t)p[1], size - 8, 8), 8);
    CHECK_EQ_LONG((int64_t)Z_isobZ_host_call(c, ISOB_HOST_WRITE, (uint64_t)p[1], size - 8, 9), -EFAULT);
    CHECK_EQ_LONG((int64_t)Z_isobZ_host_call(c, ISOB_HOST_WRITE, (uint64_t)p[1], size + 4096, 1), -EFAULT);
    CHECK_EQ_LONG((int64_t)Z_isobZ_host_call(c, ISOB_HOST_WRITE, (uint64_t)p[1], 8, UINT64_MAX - 4), -EFAULT);
    CHECK_EQ_LONG((int64_t)Z_isobZ_host_call(c, ISOB_HOST_READ, (uint64_t)p[0], 0, 8), -EBADF);
    CHECK_EQ_LONG((int64_t)Z_isobZ_host_call(c, ISOB_HOST_DISCARD, 0, 100, 4096), -EINVAL);
    CHECK_EQ_LONG((int64_t)Z_isobZ_host_call(c, ISOB_HOST_DISCARD, 0, size, 4096), -EFAULT);
    CHECK_EQ_LONG((int64_t)Z_isobZ_host_call(c, 99, 0, 0, 0), -ENOSYS);
    isob_comp_destroy(c);
    close(p[0]);
    close(p[1]);
}

static void t_io_entries_direct(void) { check_io_entries(&isob_mech_direct, 0); }
static void t_io_entries_process(void) { check_io_entries(&isob_mech_process_futex, 0); }
static void t_io_entries_wasm(void) { check_io_entries(&isob_mech_wasm, 1); }

/* Short reads are looped and counted: a SOCK_SEQPACKET read returns one
 * message at a time, so two messages make one short read. */
static void t_short_reads_are_looped(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0);
    unsigned char out[20], in[20];
    isob_work_io_fill(out, sizeof out, 1);
    CHECK_EQ_LONG(write(sv[1], out, 8), 8);
    CHECK_EQ_LONG(write(sv[1], out + 8, 12), 12);
    uint64_t shorts = 0;
    CHECK_EQ_LONG(isob_work_io_read(sv[0], in, sizeof in, &shorts), 20);
    CHECK_EQ_LONG(shorts, 1);
    CHECK(memcmp(in, out, sizeof in) == 0);
    close(sv[1]);
    /* The writer gone before all bytes came: an error, not a short count. */
    CHECK_EQ_LONG(isob_work_io_read(sv[0], in, sizeof in, &shorts), -EPIPE);
    close(sv[0]);
}

/* ---- the benchmarks' checks, fed broken work ---- */

static struct isob_fake_clock fake;

/* Run benchmark `name` (or fn) on mechanism m; returns its output. */
static char *run_bench(const struct isob_mechanism *m, const char *name,
                       int (*fn)(struct isob_bench_ctx *, const void *), const void *arg,
                       struct isob_bench_opts o, int real_clock, int *failed)
{
    struct isob_counter ctr;
    if (real_clock) {
        struct isob_counter_opts co = {.force = "clock", .scope = ISOB_SCOPE_THREAD, .cpu = -1};
        CHECK_EQ_LONG(isob_counter_init(&ctr, &co), 0);
    } else {
        fake.now = 0;
        fake.read_cost = 7;
        isob_counter_init_fake(&ctr, &fake);
    }
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    CHECK(f != NULL);
    o.placements = 1u << ISOB_PLACE_SAME_CPU;
    o.client_cpu = -1;
    struct isob_bench_ctx ctx = {.ctr = &ctr, .mech = m, .out = f, .opts = o};
    if (fn) {
        CHECK_EQ_LONG(fn(&ctx, arg), 0);
    } else {
        const struct isob_bench *b = isob_bench_find(name);
        CHECK(b != NULL);
        CHECK_EQ_LONG(b->run(&ctx), 0);
    }
    fclose(f);
    isob_counter_close(&ctr);
    *failed = ctx.failed;
    return out;
}

/* The result line holding every one of the given fragments. */
static char *line_with(char *out, const char *a, const char *b, const char *c)
{
    for (char *line = out; line && *line;) {
        char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        char *copy = strndup(line, n);
        if (strstr(copy, "\"type\":\"result\"") && strstr(copy, a) && (!b || strstr(copy, b)) &&
            (!c || strstr(copy, c)))
            return copy;
        free(copy);
        line = end ? end + 1 : NULL;
    }
    fprintf(stderr, "# no result line with %s %s %s in:\n%s\n", a, b ? b : "", c ? c : "", out);
    CHECK(0);
    return NULL;
}

/* Morello's write loop: the inner bound is words / 1e6 rounded down, 0
 * for any block smaller than 8 MB, so nothing is written. */
static void zero_trip_write(uint64_t *p, size_t words, uint64_t seed)
{
    volatile size_t iterations = 1000000;
    for (size_t i = 0; i < words; i++)
        for (size_t j = 0; j < iterations / (words * 8); j++)
            p[i] = seed + i;
}

/* A write that skips the last page of the block. */
static void skipping_write(uint64_t *p, size_t words, uint64_t seed)
{
    isob_work_mem_write(p, words - 4096 / 8, seed);
}

static int memops_with(struct isob_bench_ctx *ctx, const void *k)
{
    return isob_memops_run_with(ctx, k);
}

static struct isob_bench_opts memops_opts(void)
{
    struct isob_bench_opts o = {.n = 100, .nsizes = 1, .sizes = {2u << 20}};
    return o;
}

static void t_memops_ok(void)
{
    int failed = 1;
    char *out = run_bench(&isob_mech_direct, "memops", NULL, NULL, memops_opts(), 1, &failed);
    if (failed)
        fprintf(stderr, "%s", out);
    CHECK_EQ_LONG(failed, 0);
    char *w = line_with(out, "\"where\":\"in\"", "\"step\":\"write\"", NULL);
    /* Fresh memory faults (512 pages of 4 KiB, or one huge page). */
    CHECK(strstr(w, "\"status\":\"ok\"") && !strstr(w, "\"minor_faults\":[0,"));
    free(w);
    w = line_with(out, "\"where\":\"out\"", "\"step\":\"read\"", NULL);
    CHECK(strstr(w, "\"status\":\"ok\"") && strstr(w, "\"gbps\":"));
    free(w);
    free(out);
}

static void t_memops_catches_a_zero_trip_write(void)
{
    SKIP_IF_EMULATED("page-fault counts");
    struct isob_memops_kernels k = isob_memops_native;
    k.write = zero_trip_write;
    int failed = 0;
    char *out = run_bench(&isob_mech_direct, NULL, memops_with, &k, memops_opts(), 1, &failed);
    CHECK_EQ_LONG(failed, 1);
    char *w = line_with(out, "\"where\":\"out\"", "\"step\":\"write\"", NULL);
    CHECK(strstr(w, "\"status\":\"failed\"") && strstr(w, "the memory was not touched"));
    CHECK(!strstr(w, "\"samples\""));
    free(w);
    /* memset and in did their work and stand. */
    w = line_with(out, "\"where\":\"out\"", "\"step\":\"memset\"", NULL);
    CHECK(strstr(w, "\"status\":\"ok\""));
    free(w);
    free(out);
}

static void t_memops_catches_a_skipped_page(void)
{
    struct isob_memops_kernels k = isob_memops_native;
    k.write = skipping_write;
    int failed = 0;
    char *out = run_bench(&isob_mech_direct, NULL, memops_with, &k, memops_opts(), 1, &failed);
    CHECK_EQ_LONG(failed, 1);
    /* The faults look right (one page short is still fresh memory); the
     * sum does not. */
    char *w = line_with(out, "\"where\":\"out\"", "\"step\":\"write\"", NULL);
    CHECK(strstr(w, "\"status\":\"failed\"") && strstr(w, "not every word was written"));
    CHECK(!strstr(w, "not touched"));
    free(w);
    free(out);
}

/* With glibc filling each block inside malloc, out's write is not a first
 * touch: out is skipped with the reason, in still runs. */
static void t_memops_skips_out_under_malloc_perturb(void)
{
    setenv("MALLOC_PERTURB_", "7", 1);
    int failed = 1;
    char *out = run_bench(&isob_mech_direct, "memops", NULL, NULL, memops_opts(), 1, &failed);
    CHECK_EQ_LONG(failed, 0);
    char *w = line_with(out, "\"where\":\"out\"", "\"step\":\"write\"", NULL);
    CHECK(strstr(w, "\"status\":\"skipped\"") && strstr(w, "MALLOC_PERTURB_"));
    free(w);
    w = line_with(out, "\"where\":\"in\"", "\"step\":\"write\"", NULL);
    CHECK(strstr(w, "\"status\":\"ok\""));
    free(w);
    free(out);
}

/* A mechanism like direct whose compartment skips MEM_WRITE, or returns
 * the seed for WORK (a kernel loop that never ran), or a wrong maths
 * result: the in side's checks must catch each. */
static unsigned broken_entry;
static long broken_call(struct isob_comp *c, unsigned entry)
{
    if (entry == broken_entry) {
        struct isob_msg *m = isob_mech_direct.shared(c);
        if (entry == ISOB_ENTRY_WORK) {
            m->arg[2] = m->arg[1];
            return isob_work_fold31((uint64_t)m->arg[1]);
        }
        if (entry == ISOB_ENTRY_CPU_INT) {
            m->arg[2] = (int64_t)(uint32_t)m->arg[1];
            return isob_work_fold31((uint64_t)m->arg[2]);
        }
        return 0;
    }
    return isob_mech_direct.call(c, entry);
}
static int broken_create(const struct isob_comp_spec *s, struct isob_comp **o) { return isob_mech_direct.create(s, o); }
static struct isob_msg *broken_shared(struct isob_comp *c) { return isob_mech_direct.shared(c); }
static void broken_destroy(struct isob_comp *c) { isob_mech_direct.destroy(c); }
static const struct isob_mechanism broken_mech = {
    .name = "test-broken", .summary = "direct with one entry that does not do its work",
    .props = ISOB_TEST_ONLY, .probe = isob_probe_always, .create = broken_create, .call = broken_call,
    .shared = broken_shared, .destroy = broken_destroy,
};

static void t_memops_catches_a_skipped_write_inside(void)
{
    SKIP_IF_EMULATED("page-fault counts");
#if defined(__SANITIZE_ADDRESS__)
    /* The compartment of `direct` is this process, whose sanitizer shadow
     * takes (and, under memory pressure, retakes) page faults of its own
     * during the step; the plain build counts the step's alone. */
    SKIP("AddressSanitizer's shadow faults are counted with the step's; the plain build runs this");
#endif
    broken_entry = ISOB_ENTRY_MEM_WRITE;
    int failed = 0;
    char *out = run_bench(&broken_mech, "memops", NULL, NULL, memops_opts(), 1, &failed);
    CHECK_EQ_LONG(failed, 1);
    char *w = line_with(out, "\"where\":\"in\"", "\"step\":\"write\"", NULL);
    CHECK(strstr(w, "\"status\":\"failed\"") && strstr(w, "not touched"));
    free(w);
    w = line_with(out, "\"where\":\"out\"", "\"step\":\"write\"", NULL);
    CHECK(strstr(w, "\"status\":\"ok\""));
    free(w);
    free(out);
}

static void t_worksweep_catches_a_zero_trip_kernel(void)
{
    struct isob_bench_opts o = {.n = 40, .warmup = 2, .batch_k = 10, .batch_reps = 3, .quick = 1};
    int failed = 1;
    broken_entry = ~0u;
    char *out = run_bench(&broken_mech, "worksweep", NULL, NULL, o, 0, &failed);
    CHECK_EQ_LONG(failed, 0);
    char *k0 = line_with(out, "\"k\":0,", NULL, NULL), *k1e6 = line_with(out, "\"k\":1000000,", NULL, NULL);
    CHECK(strstr(k0, "\"status\":\"ok\"") && strstr(k1e6, "\"status\":\"ok\""));
    CHECK(strstr(k1e6, "\"value\":"));
    free(k0);
    free(k1e6);
    free(out);
    broken_entry = ISOB_ENTRY_WORK;
    out = run_bench(&broken_mech, "worksweep", NULL, NULL, o, 0, &failed);
    CHECK_EQ_LONG(failed, 1);
    /* With k = 0 the loop does nothing either way: the value is right. */
    k0 = line_with(out, "\"k\":0,", NULL, NULL);
    CHECK(strstr(k0, "\"status\":\"ok\""));
    char *k10 = line_with(out, "\"k\":10,", NULL, NULL);
    CHECK(strstr(k10, "\"status\":\"failed\"") && strstr(k10, "other than the kernel's"));
    free(k0);
    free(k10);
    free(out);
}

/* A kernel whose loop never runs. */
static uint64_t zero_trip_int(uint32_t n, uint64_t seed)
{
    (void)n;
    return (uint32_t)seed;
}

static int cpuwork_with(struct isob_bench_ctx *ctx, const void *k)
{
    return isob_cpuwork_run_with(ctx, k);
}

static void t_cpuwork_catches_a_zero_trip_kernel(void)
{
    struct isob_cpuwork_kernels k = isob_cpuwork_native;
    k.cpu_int = zero_trip_int;
    struct isob_bench_opts o = {.iterations = 200000};
    int failed = 0;
    char *out = run_bench(&isob_mech_direct, NULL, cpuwork_with, &k, o, 1, &failed);
    CHECK_EQ_LONG(failed, 1);
    char *l = line_with(out, "\"where\":\"out\"", "\"kernel\":\"int\"", NULL);
    CHECK(strstr(l, "\"status\":\"failed\"") && strstr(l, "differs from in's"));
    free(l);
    l = line_with(out, "\"where\":\"in\"", "\"kernel\":\"int\"", NULL);
    CHECK(strstr(l, "\"status\":\"failed\"") && strstr(l, "differs from out's"));
    free(l);
    l = line_with(out, "\"where\":\"lib-in-compartment\"", "\"kernel\":\"maths\"", NULL);
    CHECK(strstr(l, "\"status\":\"ok\"") && strstr(l, "\"crossings_per_trial\":"));
    free(l);
    CHECK(!strstr(out, "\"where\":\"lib-in-compartment\",\"kernel\":\"int\""));
    free(out);
    /* The same zero-trip kernel inside: in fails, and out stands on its
     * own plausibility. */
    broken_entry = ISOB_ENTRY_CPU_INT;
    out = run_bench(&broken_mech, "cpuwork", NULL, NULL, o, 1, &failed);
    CHECK_EQ_LONG(failed, 1);
    l = line_with(out, "\"where\":\"in\"", "\"kernel\":\"int\"", NULL);
    CHECK(strstr(l, "\"status\":\"failed\"") && strstr(l, "differs"));
    free(l);
    l = line_with(out, "\"where\":\"in\"", "\"kernel\":\"float\"", NULL);
    CHECK(strstr(l, "\"status\":\"ok\""));
    free(l);
    free(out);
}

/* A time per iteration below a cycle fails even when values agree (a
 * clock that hardly moves stands in for a loop that did not run). */
static void t_cpuwork_bounds_ns_per_iteration(void)
{
    struct isob_bench_opts o = {.iterations = 200000};
    int failed = 0;
    char *out = run_bench(&isob_mech_direct, "cpuwork", NULL, NULL, o, 0, &failed);
    CHECK_EQ_LONG(failed, 1);
    char *l = line_with(out, "\"where\":\"out\"", "\"kernel\":\"int\"", NULL);
    CHECK(strstr(l, "\"status\":\"failed\"") && strstr(l, "implausible"));
    free(l);
    free(out);
}

/* seccomp's server may not make system calls: the in placements needing
 * host calls are skipped with the reason, never run. */
static void t_filtered_mechanism_skips_in(void)
{
    char why[256];
    if (isob_mech_seccomp.probe(why, sizeof why) != 0)
        SKIP("seccomp: %s", why);
    CHECK(!isob_host_calls_ok(&isob_mech_seccomp, why, sizeof why));
    CHECK(strstr(why, "filters") != NULL);
    CHECK(isob_host_calls_ok(&isob_mech_process_futex, why, sizeof why));
    int failed = 1;
    char *out = run_bench(&isob_mech_seccomp, "memops", NULL, NULL, memops_opts(), 1, &failed);
    CHECK_EQ_LONG(failed, 0);
    char *l = line_with(out, "\"where\":\"in\"", "\"step\":\"write\"", NULL);
    CHECK(strstr(l, "\"status\":\"skipped\"") && strstr(l, "filters the compartment's system calls"));
    free(l);
    l = line_with(out, "\"where\":\"out\"", "\"step\":\"write\"", NULL);
    CHECK(strstr(l, "\"status\":\"ok\""));
    free(l);
    free(out);
}

static void t_pipeio_verifies_each_transfer(void)
{
    SKIP_IF_EMULATED("process-futex's robust handoff");
    struct isob_bench_opts o = {.n = 20, .quick = 1};
    const struct isob_mechanism *ms[] = {&isob_mech_direct, &isob_mech_process_futex};
    for (int i = 0; i < 2; i++) {
        int failed = 1;
        char *out = run_bench(ms[i], "pipeio", NULL, NULL, o, 1, &failed);
        if (failed)
            fprintf(stderr, "# %s\n", out);
        CHECK_EQ_LONG(failed, 0);
        char *l = line_with(out, "\"where\":\"in\"", "\"variant\":\"roundtrip\"", "\"payload\":65536,");
        CHECK(strstr(l, "\"status\":\"ok\"") && strstr(l, "\"operations\":21,") && strstr(l, "\"verified\":21,"));
        CHECK(strstr(l, "\"cold\":") && strstr(l, "\"n\":20,"));
        free(l);
        l = line_with(out, "\"where\":\"in\"", "\"variant\":\"stream\"", "\"payload\":1,");
        CHECK(strstr(l, "\"status\":\"ok\"") && strstr(l, "\"write_calls\":20480,"));
        free(l);
        free(out);
    }
}

/* ---- scale ---- */

/* process-futex, but the server of the third compartment dies right after
 * it is created; or, with enospc_after, creation fails like pkey_alloc
 * out of keys. */
static int creates, kill_at = -1, enospc_after = -1;
static int dying_create(const struct isob_comp_spec *s, struct isob_comp **o)
{
    if (creates == enospc_after)
        return -ENOSPC;
    pid_t before[64], after[64];
    int nb = tap_children(before, 64);
    CHECK(nb <= 64);
    int rc = isob_mech_process_futex.create(s, o);
    if (rc == 0 && creates == kill_at) {
        int na = tap_children(after, 64);
        CHECK(na <= 64);
        for (int i = 0; i < na; i++) {
            int old = 0;
            for (int j = 0; j < nb; j++)
                old |= after[i] == before[j];
            if (!old) {
                kill(after[i], SIGKILL);
                siginfo_t si;
                /* Dead, and left for its mechanism to reap. */
                waitid(P_PID, (id_t)after[i], &si, WEXITED | WNOWAIT);
            }
        }
    }
    creates++;
    return rc;
}
static long dying_call(struct isob_comp *c, unsigned e) { return isob_mech_process_futex.call(c, e); }
static struct isob_msg *dying_shared(struct isob_comp *c) { return isob_mech_process_futex.shared(c); }
static void dying_destroy(struct isob_comp *c) { isob_mech_process_futex.destroy(c); }
/* The mechanism's word on the limit, once creating ran out of keys. */
static const char *dying_limit_why(void)
{
    return creates == enospc_after ? "the test's key table is full (4 keys, in test_workloads.c)" : NULL;
}
static const struct isob_mechanism dying_mech = {
    .name = "test-dying", .summary = "process-futex whose third server dies",
    .props = ISOB_TEST_ONLY | ISOB_SEPARATE_AS | ISOB_TWO_CONTEXTS, .probe = isob_probe_always,
    .create = dying_create, .call = dying_call, .shared = dying_shared, .destroy = dying_destroy,
    .limit_why = dying_limit_why,
};

static void t_scale_counts_and_cleans_up(void)
{
    SKIP_IF_EMULATED("process-futex's robust handoff");
    struct isob_bench_opts o = {.limit = 12, .quick = 1};
    int failed = 1;
    char *out = run_bench(&isob_mech_process_futex, "scale", NULL, NULL, o, 1, &failed);
    CHECK_EQ_LONG(failed, 0);
    char *l = line_with(out, "\"variant\":\"create\"", NULL, NULL);
    CHECK(strstr(l, "\"created\":12,") && strstr(l, "\"dead\":0,") && strstr(l, "\"n\":12,"));
    free(l);
    l = line_with(out, "\"variant\":\"switch\"", "\"live\":10,", NULL);
    CHECK(strstr(l, "\"status\":\"ok\"") && strstr(l, "\"processes\":11,") && strstr(l, "\"calls_verified\":600"));
    free(l);
    l = line_with(out, "\"variant\":\"switch\"", "\"live\":12,", NULL);
    free(l);
    l = line_with(out, "\"variant\":\"destroy\"", NULL, NULL);
    CHECK(strstr(l, "\"status\":\"ok\"") && strstr(l, "\"processes_left\":0,"));
    free(l);
    free(out);
    pid_t left[4];
    CHECK_EQ_LONG(tap_children(left, 4), 0);
}

static void t_scale_reports_a_death(void)
{
    SKIP_IF_EMULATED("process-futex's robust handoff");
    struct isob_bench_opts o = {.limit = 12, .quick = 1};
    creates = 0;
    kill_at = 2;
    int failed = 1;
    char *out = run_bench(&dying_mech, "scale", NULL, NULL, o, 1, &failed);
    char *l = line_with(out, "\"variant\":\"create\"", NULL, NULL);
    CHECK(strstr(l, "\"created\":3,") && strstr(l, "\"dead\":1,") && strstr(l, "died"));
    free(l);
    l = line_with(out, "\"variant\":\"destroy\"", NULL, NULL);
    CHECK(strstr(l, "\"destroyed\":3,") && strstr(l, "\"processes_left\":0,"));
    free(l);
    free(out);
    pid_t left[4];
    CHECK_EQ_LONG(tap_children(left, 4), 0);
}

static void t_scale_reports_the_errno(void)
{
    SKIP_IF_EMULATED("process-futex's robust handoff");
    struct isob_bench_opts o = {.limit = 100, .quick = 1};
    creates = 0;
    kill_at = -1;
    enospc_after = 4;
    int failed = 1;
    char *out = run_bench(&dying_mech, "scale", NULL, NULL, o, 1, &failed);
    CHECK_EQ_LONG(failed, 0);
    char *l = line_with(out, "\"variant\":\"create\"", NULL, NULL);
    CHECK(strstr(l, "\"created\":4,") && strstr(l, "\"errno\":28,") && strstr(l, "\"errno_name\":\"ENOSPC\""));
    /* The cause names the limit in the mechanism's words. */
    CHECK(strstr(l, "create number 5 failed: ") && strstr(l, "the test's key table is full (4 keys"));
    free(l);
    free(out);
}

static void t_memops_refuses_sizes_beyond_memory(void)
{
    const struct isob_bench *b = isob_bench_find("memops");
    CHECK(b && b->check);
    struct isob_bench_opts o = {.nsizes = 1, .sizes = {(size_t)1 << 50}};
    char why[256] = "";
    CHECK_EQ_LONG(b->check(&o, why, sizeof why), -ENOMEM);
    CHECK(strstr(why, "MemAvailable") != NULL);
    o.sizes[0] = 4096;
    CHECK_EQ_LONG(b->check(&o, why, sizeof why), -EINVAL);
    o.sizes[0] = 4u << 20;
    CHECK_EQ_LONG(b->check(&o, why, sizeof why), 0);
}

int main(void)
{
    printf("TAP version 13\n");
    TAP_CASE(t_kernels_direct);
    TAP_CASE(t_kernels_process);
    TAP_CASE(t_kernels_wasm);
    TAP_CASE(t_maths_are_maths);
    TAP_CASE(t_mem_closed_form);
    TAP_CASE(t_mem_entries_direct);
    TAP_CASE(t_mem_entries_process);
    TAP_CASE(t_mem_entries_wasm);
    TAP_CASE(t_io_entries_direct);
    TAP_CASE(t_io_entries_process);
    TAP_CASE(t_io_entries_wasm);
    TAP_CASE(t_wasm_host_call_checks_the_guest);
    TAP_CASE(t_short_reads_are_looped);
    TAP_CASE(t_memops_ok);
    TAP_CASE(t_memops_catches_a_zero_trip_write);
    TAP_CASE(t_memops_catches_a_skipped_page);
    TAP_CASE(t_memops_catches_a_skipped_write_inside);
    TAP_CASE(t_memops_skips_out_under_malloc_perturb);
    TAP_CASE(t_memops_refuses_sizes_beyond_memory);
    TAP_CASE(t_worksweep_catches_a_zero_trip_kernel);
    TAP_CASE(t_cpuwork_catches_a_zero_trip_kernel);
    TAP_CASE(t_cpuwork_bounds_ns_per_iteration);
    TAP_CASE(t_filtered_mechanism_skips_in);
    TAP_CASE(t_pipeio_verifies_each_transfer);
    TAP_CASE(t_scale_counts_and_cleans_up);
    TAP_CASE(t_scale_reports_a_death);
    TAP_CASE(t_scale_reports_the_errno);
    return tap_done();
}
