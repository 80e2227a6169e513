/* The workloads' kernels and entries (include/isobench/work.h).
 *
 * Freestanding like trusted.c: no libc headers, no system calls (the few
 * the workloads need go through isob_host_call), no globals.  The native
 * build links this file once, into the library: the benchmarks' `out`
 * placement calls these very functions, and the entries run them inside a
 * compartment, so in and out run the same object code.  The wasm
 * mechanisms compile the same source to wasm32.
 *
 * Every kernel returns a value that depends on all of its iterations, so
 * the caller can check it against the same kernel run elsewhere: a loop
 * that did not run, or ran short, gives a different value. */
#include "isobench/work.h"
#include "kv.h"

/* Error values as negative errno numbers (no errno.h here). */
#define W_EIO 5
#define W_ENOMEM 12
#define W_EBUSY 16
#define W_EINVAL 22
#define W_EPIPE 32
#define W_EINTR 4

/* The state page must not overlap the key-value store's header, which the
 * first work entry rewrites to disable the store. */
_Static_assert(ISOB_KV_OFFSET + sizeof(struct kv_store) + KV_ALIGN <= ISOB_WORK_OFFSET,
               "the work state overlaps the key-value store's header");

/* ---- worksweep ---- */

uint64_t isob_work_kernel(uint64_t k, uint64_t seed)
{
    /* A 64-bit LCG step and an xorshift: each iteration depends on the
     * last through a multiply, so no compiler can collapse or vectorise
     * the loop and its cost per iteration is fixed. */
    uint64_t x = seed;
    for (uint64_t i = 0; i < k; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        x ^= x >> 29;
    }
    return x;
}

/* ---- cpuwork: Morello's kernels ---- */

uint64_t isob_work_cpu_int(uint32_t n, uint64_t seed)
{
    /* Morello's int kernel with defined widths: its `int` overflowed,
     * which is undefined in C; unsigned 32-bit arithmetic wraps the same
     * way on every target, wasm32 included. */
    uint32_t r = (uint32_t)seed;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t sq = i * i;
        r += sq / (i + 1);
        r -= sq % (i + 1);
        r *= i + 1;
        r /= i + 2;
    }
    return r;
}

uint64_t isob_work_cpu_float(uint32_t n, uint64_t seed)
{
    /* The int kernel's four steps in float; float has no remainder, so
     * the second step subtracts a second quotient. */
    float r = (float)(uint32_t)seed;
    for (uint32_t i = 0; i < n; i++) {
        float f = (float)i;
        r += f * f / (f + 1.0f);
        r -= f * f / (f + 2.0f);
        r *= f + 1.0f;
        r /= f + 2.0f;
    }
    union { float f; uint32_t u; } b = {r};
    return b.u;
}

uint64_t isob_work_cpu_array(uint32_t *a, uint32_t n, uint64_t seed)
{
    /* Initialise, multiply by 2, divide by 2 (Morello's steps), then sum,
     * which proves every element went through all three. */
    for (uint32_t i = 0; i < n; i++)
        a[i] = i * 2654435761u + (uint32_t)seed;
    for (uint32_t i = 0; i < n; i++)
        a[i] *= 2;
    for (uint32_t i = 0; i < n; i++)
        a[i] /= 2;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += a[i];
    return sum;
}

uint64_t isob_work_cpu_maths(uint32_t n, uint64_t seed)
{
    /* Morello's sin(i)*cos(i)*tan(i)*sqrt(i)*log(i+1), accumulated so the
     * result depends on every iteration.  The lib-in-compartment loop
     * (src/benches/cpuwork.c) multiplies in this same order. */
    double acc = 0.0;
    for (uint32_t i = 0; i < n; i++) {
        double x = isob_work_maths_x(i, seed);
        acc += isob_work_sin(x) * isob_work_cos(x) * isob_work_tan(x) * isob_work_sqrt(x) *
               isob_work_log(x + 1.0);
    }
    union { double d; uint64_t u; } b = {acc};
    return b.u;
}

/* ---- the maths routines ----
 * Only +, -, *, / and conversions, which IEEE 754 defines exactly, so the
 * native and the wasm32 builds give the same bits (neither contracts to
 * fused multiply-adds: x86-64's baseline and wasm32 have none).  The
 * constants are hexadecimal so that no compiler rounds them differently. */

#define W_NAN (__builtin_nan(""))
#define W_INF (__builtin_inf())
/* Largest |x| the sine family reduces accurately: k * the pi/2 parts stay
 * exact while k < 2^27. */
#define W_TRIG_MAX 0x1p30
#define W_TWO_OVER_PI 0x1.45f306dc9c883p-1
/* pi/2 in three parts: 25 bits, 25 more bits, and the rest. */
#define W_PIO2_1 0x1.921fb50000000p+0
#define W_PIO2_2 0x1.110b460000000p-26
#define W_PIO2_3 0x1.1a62633145c07p-54

/* x = k * pi/2 + r with |r| <= about pi/4; *quadrant = k mod 4. */
static double w_reduce(double x, unsigned *quadrant)
{
    double kf = x * W_TWO_OVER_PI;
    int64_t k = (int64_t)(kf < 0 ? kf - 0.5 : kf + 0.5);
    double kd = (double)k;
    *quadrant = (unsigned)((uint64_t)k & 3u);
    return ((x - kd * W_PIO2_1) - kd * W_PIO2_2) - kd * W_PIO2_3;
}

/* Taylor series on |r| <= pi/4, truncated where the next term is below
 * 1e-16. */
static double w_sin_r(double r)
{
    double z = r * r;
    return r + r * z * (-0x1.5555555555555p-3 + z * (0x1.1111111111111p-7 +
           z * (-0x1.a01a01a01a01ap-13 + z * (0x1.71de3a556c734p-19 + z * (-0x1.ae64567f544e4p-26 +
           z * (0x1.6124613a86d09p-33 + z * -0x1.ae7f3e733b81fp-41))))));
}

static double w_cos_r(double r)
{
    double z = r * r;
    return 1.0 + z * (-0x1.0000000000000p-1 + z * (0x1.5555555555555p-5 + z * (-0x1.6c16c16c16c17p-10 +
           z * (0x1.a01a01a01a01ap-16 + z * (-0x1.27e4fb7789f5cp-22 + z * (0x1.1eed8eff8d898p-29 +
           z * (-0x1.93974a8c07c9dp-37 + z * 0x1.ae7f3e733b81fp-45)))))));
}

static void w_sincos(double x, double *s, double *c)
{
    if (!(x > -W_TRIG_MAX && x < W_TRIG_MAX)) {
        *s = *c = W_NAN;
        return;
    }
    unsigned q;
    double r = w_reduce(x, &q);
    double sr = w_sin_r(r), cr = w_cos_r(r);
    switch (q) {
    case 0: *s = sr; *c = cr; break;
    case 1: *s = cr; *c = -sr; break;
    case 2: *s = -sr; *c = -cr; break;
    default: *s = -cr; *c = sr; break;
    }
}

double isob_work_sin(double x)
{
    double s, c;
    w_sincos(x, &s, &c);
    return s;
}

double isob_work_cos(double x)
{
    double s, c;
    w_sincos(x, &s, &c);
    return c;
}

double isob_work_tan(double x)
{
    double s, c;
    w_sincos(x, &s, &c);
    return s / c;
}

double isob_work_sqrt(double x)
{
    if (!(x > 0))
        return x == 0 ? x : W_NAN;
    if (x > 0x1.fffffffffffffp+1023)
        return x;
    /* Halving the exponent gives a start within 6%; five Newton steps
     * take that below an ulp.  Subnormal x would start far off and are
     * outside the routine's use. */
    union { double d; uint64_t u; } b = {x};
    b.u = (b.u >> 1) + 0x1ff8000000000000ull;
    double y = b.d;
    for (int i = 0; i < 5; i++)
        y = 0.5 * (y + x / y);
    return y;
}

double isob_work_log(double x)
{
    if (!(x > 0))
        return x == 0 ? -W_INF : W_NAN;
    if (x > 0x1.fffffffffffffp+1023)
        return x;
    union { double d; uint64_t u; } b = {x};
    int e = (int)((b.u >> 52) & 0x7ff);
    if (e == 0) {
        /* Subnormal: scale into the normal range first. */
        b.d = x * 0x1p54;
        e = (int)((b.u >> 52) & 0x7ff) - 54;
    }
    e -= 1023;
    b.u = (b.u & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    double m = b.d;  /* x = m * 2^e, 1 <= m < 2 */
    if (m > 0x1.6a09e667f3bcdp+0) {  /* sqrt(2): keep m near 1 */
        m *= 0.5;
        e++;
    }
    /* log(m) = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), s = (m-1)/(m+1),
     * |s| <= 0.172: ten terms leave less than 1e-17. */
    double s = (m - 1.0) / (m + 1.0), z = s * s;
    double p = z * (0x1.5555555555555p-2 + z * (0x1.999999999999ap-3 + z * (0x1.2492492492492p-3 +
               z * (0x1.c71c71c71c71cp-4 + z * (0x1.745d1745d1746p-4 + z * (0x1.3b13b13b13b14p-4 +
               z * (0x1.1111111111111p-4 + z * (0x1.e1e1e1e1e1e1ep-5 + z * (0x1.af286bca1af28p-5 +
               z * 0x1.8618618618618p-5)))))))));
    double lm = 2.0 * s + 2.0 * s * p;
    /* e * ln 2 in two parts, the first exact for any exponent. */
    double ed = (double)e;
    return ed * 0x1.62e42fee00000p-1 + (ed * 0x1.a39ef35793c76p-33 + lm);
}

/* ---- memops ---- */

void isob_work_mem_write(uint64_t *p, size_t words, uint64_t seed)
{
    for (size_t i = 0; i < words; i++)
        p[i] = seed + (uint64_t)i * ISOB_WORK_MEM_K;
}

void isob_work_mem_fill(void *p, size_t bytes, int c)
{
    /* On x86-64 the fill is the trusted code's own: a call to the C
     * library's memset would leave the trusted text, and under mpk run code
     * outside it with the key open (src/trusted/window.c).  One `rep
     * stosb`, the string instruction that the C library's memset itself
     * uses for blocks this large on CPUs with fast string operations (the
     * direction flag is clear: the ABI, and the MPK gate, see to it).
     * Elsewhere there is no such window: the C library's memset natively
     * (the compiler calls it for this), guest.c's loop in wasm.  The
     * test-only leaky window build (window.c) keeps that call on x86-64. */
#if defined(__x86_64__) && !defined(ISOB_WINDOW_LEAKY)
    __asm__ __volatile__("rep stosb" : "+D"(p), "+c"(bytes) : "a"(c) : "memory");
#else
    __builtin_memset(p, c, bytes);
#endif
}

uint64_t isob_work_mem_read(const uint64_t *p, size_t words)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < words; i++)
        sum += p[i];
    return sum;
}

uint64_t isob_work_mem_expected(size_t words, uint64_t seed)
{
    /* sum of seed + i*K over i < n = n*seed + K * n(n-1)/2, mod 2^64; the
     * halving is done on whichever factor is even, so nothing is lost. */
    uint64_t n = words;
    uint64_t tri = (n % 2 == 0) ? (n / 2) * (n - 1) : n * ((n - 1) / 2);
    if (n == 0)
        tri = 0;
    return n * seed + tri * ISOB_WORK_MEM_K;
}

/* ---- pipeio ---- */

void isob_work_io_fill(unsigned char *buf, size_t len, uint64_t seed)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (unsigned char)((uint64_t)i * 31u + seed);
}

int64_t isob_work_io_write(int fd, const unsigned char *buf, size_t len, uint64_t *calls)
{
    size_t done = 0;
    while (done < len) {
        int64_t r = isob_host_call(ISOB_HOST_WRITE, fd, (int64_t)(uintptr_t)(buf + done),
                                   (int64_t)(len - done));
        (*calls)++;
        if (r == -W_EINTR)
            continue;
        if (r < 0)
            return r;
        if (r == 0)
            return -W_EIO;
        done += (size_t)r;
    }
    return (int64_t)done;
}

int64_t isob_work_io_read(int fd, unsigned char *buf, size_t len, uint64_t *shorts)
{
    size_t done = 0;
    while (done < len) {
        int64_t r = isob_host_call(ISOB_HOST_READ, fd, (int64_t)(uintptr_t)(buf + done),
                                   (int64_t)(len - done));
        if (r == -W_EINTR)
            continue;
        if (r < 0)
            return r;
        if (r == 0)
            return -W_EPIPE;  /* the writer went away before len bytes */
        if ((size_t)r < len - done)
            (*shorts)++;
        done += (size_t)r;
    }
    return (int64_t)done;
}

/* ---- the entries ---- */

#define WORK_MAGIC 0x6b726f7762736931ull  /* "1isbwork" */

/* The work entries' state, at ISOB_WORK_OFFSET in the heap. */
struct work_state {
    uint64_t magic;
    uint64_t block_bytes;  /* memops: bytes of the live block, 0 when none */
};

/* The state, set up by the first work entry, which also takes the heap
 * from the store (see work.h); NULL when the heap has no arena. */
static struct work_state *work_state(struct isob_trusted *t)
{
    if (t->heap_size <= ISOB_WORK_ARENA)
        return 0;
    struct work_state *w = (struct work_state *)(void *)(t->heap + ISOB_WORK_OFFSET);
    if (w->magic != WORK_MAGIC) {
        kv_init(t->heap, kv_header_end());
        w->magic = WORK_MAGIC;
        w->block_bytes = 0;
    }
    return w;
}

static size_t arena_size(const struct isob_trusted *t)
{
    return t->heap_size - ISOB_WORK_ARENA;
}

static unsigned char *arena(struct isob_trusted *t)
{
    return t->heap + ISOB_WORK_ARENA;
}

static long ret64(struct isob_msg *msg, uint64_t v)
{
    msg->arg[2] = (int64_t)v;
    return isob_work_fold31(v);
}

/* The maths entries pass doubles as their bits. */
static double arg_double(int64_t bits)
{
    union { int64_t i; double d; } b = {bits};
    return b.d;
}

static long ret_double(struct isob_msg *msg, double v)
{
    union { double d; int64_t i; } b = {v};
    msg->arg[1] = b.i;
    return 0;
}

static int fd_ok(int64_t fd)
{
    return fd >= 0 && fd <= 0x7fffffff;
}

/* a0 and a1: the message's arg[0] and arg[1], as isob_work_call read them. */
static long io_entry(struct isob_trusted *t, unsigned entry, struct isob_msg *msg, int64_t a0, int64_t a1)
{
    unsigned char *out = arena(t), *in = out + ISOB_WORK_IO_MAX;
    if (arena_size(t) < 2u * ISOB_WORK_IO_MAX)
        return -W_ENOMEM;
    uint64_t count = 0;
    int64_t r;
    switch (entry) {
    case ISOB_ENTRY_IO_FILL: {
        uint64_t len = (uint64_t)a1;
        if (len > ISOB_WORK_IO_MAX)
            return -W_EINVAL;
        isob_work_io_fill(out, (size_t)len, (uint64_t)a0);
        return (long)isob_checksum(out, (size_t)len);
    }
    case ISOB_ENTRY_IO_WRITE:
        if (!fd_ok(a0) || (uint64_t)a1 > ISOB_WORK_IO_MAX)
            return -W_EINVAL;
        r = isob_work_io_write((int)a0, out, (size_t)a1, &count);
        msg->arg[3] = (int64_t)count;
        return (long)r;
    case ISOB_ENTRY_IO_READ:
        if (!fd_ok(a0) || (uint64_t)a1 > ISOB_WORK_IO_MAX)
            return -W_EINVAL;
        r = isob_work_io_read((int)a0, in, (size_t)a1, &count);
        msg->arg[3] = (int64_t)count;
        return (long)r;
    case ISOB_ENTRY_IO_ROUNDTRIP: {
        int64_t a2 = ISOB_MSG_ONCE(msg->arg[2]);
        if (!fd_ok(a0) || !fd_ok(a1) || (uint64_t)a2 > ISOB_WORK_IO_MAX)
            return -W_EINVAL;
        size_t len = (size_t)a2;
        uint64_t calls = 0;
        r = isob_work_io_write((int)a0, out, len, &calls);
        if (r >= 0)
            r = isob_work_io_read((int)a1, in, len, &count);
        msg->arg[3] = (int64_t)count;
        return (long)r;
    }
    case ISOB_ENTRY_IO_SUM:
        if ((uint64_t)a0 > ISOB_WORK_IO_MAX)
            return -W_EINVAL;
        return (long)isob_checksum(in, (size_t)a0);
    case ISOB_ENTRY_IO_STREAM: {
        int64_t times = ISOB_MSG_ONCE(msg->arg[2]);
        if (!fd_ok(a0) || a1 <= 0 || (uint64_t)a1 > ISOB_WORK_IO_MAX || times < 0)
            return -W_EINVAL;
        size_t chunk = (size_t)a1;
        for (int64_t i = 0; i < times; i++) {
            r = isob_work_io_write((int)a0, out, chunk, &count);
            if (r < 0) {
                msg->arg[3] = (int64_t)count;
                return (long)r;
            }
        }
        msg->arg[3] = (int64_t)count;
        return 0;
    }
    default:
        return -W_EINVAL;
    }
}

/* a0: the message's arg[0], as isob_work_call read it. */
static long mem_entry(struct isob_trusted *t, struct work_state *w, unsigned entry,
                      struct isob_msg *msg, int64_t a0)
{
    unsigned char *block = arena(t);
    switch (entry) {
    case ISOB_ENTRY_MEM_ALLOC: {
        uint64_t bytes = (uint64_t)a0;
        if (w->block_bytes)
            return -W_EBUSY;
        if (bytes == 0 || bytes % 8 != 0)
            return -W_EINVAL;
        if (bytes > arena_size(t))
            return -W_ENOMEM;
        uint64_t pages = (bytes + ISOB_WORK_PAGE - 1) / ISOB_WORK_PAGE * ISOB_WORK_PAGE;
        int64_t r = isob_host_call(ISOB_HOST_DISCARD, 0, (int64_t)(uintptr_t)block, (int64_t)pages);
        if (r < 0)
            return (long)r;
        w->block_bytes = bytes;
        msg->arg[1] = (int64_t)ISOB_WORK_ARENA;
        return 0;
    }
    case ISOB_ENTRY_MEM_FREE: {
        if (!w->block_bytes)
            return -W_EINVAL;
        uint64_t pages = (w->block_bytes + ISOB_WORK_PAGE - 1) / ISOB_WORK_PAGE * ISOB_WORK_PAGE;
        w->block_bytes = 0;
        int64_t r = isob_host_call(ISOB_HOST_DISCARD, 0, (int64_t)(uintptr_t)block, (int64_t)pages);
        return r < 0 ? (long)r : 0;
    }
    default:
        break;
    }
    if (!w->block_bytes)
        return -W_EINVAL;
    size_t words = (size_t)(w->block_bytes / 8);
    uint64_t *p = (uint64_t *)(void *)block;
    switch (entry) {
    case ISOB_ENTRY_MEM_WRITE:
        isob_work_mem_write(p, words, (uint64_t)a0);
        return 0;
    case ISOB_ENTRY_MEM_FILL:
        isob_work_mem_fill(p, (size_t)w->block_bytes, (int)(a0 & 0xff));
        return 0;
    case ISOB_ENTRY_MEM_READ:
        return ret64(msg, isob_work_mem_read(p, words));
    default:
        return -W_EINVAL;
    }
}

long isob_work_call(struct isob_trusted *t, unsigned entry, struct isob_msg *msg, size_t cap)
{
    (void)cap;
    /* Each argument read once (trusted.h): the untrusted side may change
     * the message while an entry runs, so the entries check and use these
     * copies only (the I/O entries read their arg[2] once themselves). */
    int64_t a0 = ISOB_MSG_ONCE(msg->arg[0]), a1 = ISOB_MSG_ONCE(msg->arg[1]);
    uint64_t n = (uint64_t)a0, seed = (uint64_t)a1;
    switch (entry) {
    case ISOB_ENTRY_WORK:
        /* A bound, so that a garbled k cannot keep the compartment busy
         * for ever (2^40 iterations is about an hour). */
        if (n > (1ull << 40))
            return -W_EINVAL;
        return ret64(msg, isob_work_kernel(n, seed));
    case ISOB_ENTRY_CPU_INT:
    case ISOB_ENTRY_CPU_FLOAT:
    case ISOB_ENTRY_CPU_MATHS:
        if (n > 0x80000000ull)
            return -W_EINVAL;
        return ret64(msg, entry == ISOB_ENTRY_CPU_INT ? isob_work_cpu_int((uint32_t)n, seed)
                          : entry == ISOB_ENTRY_CPU_FLOAT ? isob_work_cpu_float((uint32_t)n, seed)
                          : isob_work_cpu_maths((uint32_t)n, seed));
    case ISOB_ENTRY_MATH_SIN:
        return ret_double(msg, isob_work_sin(arg_double(a0)));
    case ISOB_ENTRY_MATH_COS:
        return ret_double(msg, isob_work_cos(arg_double(a0)));
    case ISOB_ENTRY_MATH_TAN:
        return ret_double(msg, isob_work_tan(arg_double(a0)));
    case ISOB_ENTRY_MATH_SQRT:
        return ret_double(msg, isob_work_sqrt(arg_double(a0)));
    case ISOB_ENTRY_MATH_LOG:
        return ret_double(msg, isob_work_log(arg_double(a0)));
    case ISOB_ENTRY_HOST_FAULTS: {
        int64_t r = isob_host_call(ISOB_HOST_MINFLT, 0, 0, 0);
        if (r < 0)
            return (long)r;
        msg->arg[1] = r;
        return 0;
    }
    default:
        break;
    }
    /* The rest use the arena. */
    struct work_state *w = work_state(t);
    if (!w)
        return -W_ENOMEM;
    switch (entry) {
    case ISOB_ENTRY_CPU_ARRAY:
        if (n > 0x80000000ull || n * 4 > arena_size(t))
            return -W_ENOMEM;
        if (w->block_bytes)
            return -W_EBUSY;
        return ret64(msg, isob_work_cpu_array((uint32_t *)(void *)arena(t), (uint32_t)n, seed));
    case ISOB_ENTRY_MEM_ALLOC:
    case ISOB_ENTRY_MEM_WRITE:
    case ISOB_ENTRY_MEM_FILL:
    case ISOB_ENTRY_MEM_READ:
    case ISOB_ENTRY_MEM_FREE:
        return mem_entry(t, w, entry, msg, a0);
    default:
        if (w->block_bytes)
            return -W_EBUSY;
        return io_entry(t, entry, msg, a0, a1);
    }
}
