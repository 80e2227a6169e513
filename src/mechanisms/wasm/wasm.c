/* wasm, wasm-bounds: software fault isolation with WebAssembly.
 *
 * The trusted component (src/trusted/) and guest.c are compiled to one
 * wasm32 module, which wasm2c translates to C at build time; the C is
 * linked in twice (meson.build).  The guest's trusted heap and message
 * buffer live in its linear memory.  A call copies the message (header and
 * msg->len bytes) into the guest's buffer, runs the guest's
 * isob_guest_call, and copies the message back out, as production
 * embeddings (RLBox) copy arguments in and out of the sandbox.
 *
 * The two mechanisms differ only in how the guest is kept inside its
 * linear memory:
 *   wasm         guard pages: the memory sits at the start of an 8 GiB
 *                inaccessible reservation, every address a guest can form
 *                falls inside it, and a fault there becomes a trap;
 *   wasm-bounds  explicit checks: the generated code compares every access
 *                with the memory's size; nothing is reserved around it.
 *
 * In wasm's threat model the sandbox is untrusted and the host is trusted:
 * the guard that matters is that guest code cannot reach host memory
 * (tests/c/test_wasm.c).  For the generic isolation test the "address" of
 * the secret is what the trusted code sees, a linear-memory offset, which
 * names nothing in the host's address space.
 *
 * Traps (out-of-bounds access, stack exhaustion, ...) end the call with a
 * negative errno and leave the compartment usable. */
#include "isob_wasm_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isob_wasm.h"
#include "isobench/isolation_cell.h"
#include "isobench/mechanism.h"
#include "isobench/work.h"

extern const struct isob_mechanism isob_mech_wasm, isob_mech_wasm_bounds;

#if ISOB_WASM_AVAILABLE
#include <pthread.h>
#include <setjmp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "isob_wasm_bounds.h"
#include "isob_wasm_guard.h"
#include "wasm-rt-impl.h"
#include "wasm_memory.h"

/* Largest heap and shared buffer: together with the module's own data and
 * shadow stack they must fit in the 4 GiB of wasm32 linear memory. */
#define WASM_MAX_REGION ((size_t)1 << 30)

/* One wasm2c translation of the guest, behind signatures common to both,
 * so that one body of code drives either. */
typedef uint64_t guest_fn(void *inst, uint32_t a, uint64_t b);

struct wasm_variant {
    int guard_pages;
    size_t instance_size;
    pthread_once_t *once;
    void (*init_module)(void);
    guest_fn *instantiate;
    void (*free)(void *inst);
    wasm_rt_memory_t *(*memory)(void *inst);
    uint32_t *(*stack_pointer)(void *inst);
    guest_fn *init;  /* (heap_size, shared_size) -> message offset or -errno */
    guest_fn *call;  /* (entry, -) -> the entry's result */
    guest_fn *peek;  /* (offset, -) -> 8 bytes read there */
    guest_fn *poke;  /* (offset, value) -> 0 */
    guest_fn *call_indirect;  /* (table index, -) -> what the function there returns */
    uint32_t (*table_size)(void *inst);  /* entries of the function table */
};

/* The glue between the common signatures and the names wasm2c gives one
 * module (Z_<module>Z_<export>). */
#define WASM_VARIANT(V, GUARD)                                                         \
    typedef Z_isob_wasm_##V##_instance_t V##_inst;                                     \
    static pthread_once_t V##_once = PTHREAD_ONCE_INIT;                                \
    static void V##_init_module(void)                                                  \
    {                                                                                  \
        wasm_rt_init();                                                                \
        Z_isob_wasm_##V##_init_module();                                               \
    }                                                                                  \
    static uint64_t V##_instantiate(void *i, uint32_t a, uint64_t env)                 \
    {                                                                                  \
        (void)a;                                                                       \
        Z_isob_wasm_##V##_instantiate((V##_inst *)i,                                   \
                                      (struct Z_isob_instance_t *)(uintptr_t)env);     \
        return 0;                                                                      \
    }                                                                                  \
    static void V##_free(void *i) { Z_isob_wasm_##V##_free((V##_inst *)i); }           \
    static wasm_rt_memory_t *V##_memory(void *i)                                       \
    {                                                                                  \
        return Z_isob_wasm_##V##Z_memory((V##_inst *)i);                               \
    }                                                                                  \
    static uint32_t *V##_stack_pointer(void *i)                                        \
    {                                                                                  \
        return Z_isob_wasm_##V##Z___stack_pointer((V##_inst *)i);                      \
    }                                                                                  \
    static uint64_t V##_init(void *i, uint32_t heap, uint64_t shared)                  \
    {                                                                                  \
        return Z_isob_wasm_##V##Z_isob_guest_init((V##_inst *)i, heap, (uint32_t)shared); \
    }                                                                                  \
    static uint64_t V##_call(void *i, uint32_t entry, uint64_t b)                      \
    {                                                                                  \
        (void)b;                                                                       \
        return Z_isob_wasm_##V##Z_isob_guest_call((V##_inst *)i, entry);               \
    }                                                                                  \
    static uint64_t V##_peek(void *i, uint32_t offset, uint64_t b)                     \
    {                                                                                  \
        (void)b;                                                                       \
        return Z_isob_wasm_##V##Z_isob_guest_peek((V##_inst *)i, offset);              \
    }                                                                                  \
    static uint64_t V##_poke(void *i, uint32_t offset, uint64_t value)                 \
    {                                                                                  \
        Z_isob_wasm_##V##Z_isob_guest_poke((V##_inst *)i, offset, value);              \
        return 0;                                                                      \
    }                                                                                  \
    static uint64_t V##_call_indirect(void *i, uint32_t index, uint64_t b)             \
    {                                                                                  \
        (void)b;                                                                       \
        return Z_isob_wasm_##V##Z_isob_guest_call_indirect((V##_inst *)i, index);      \
    }                                                                                  \
    static uint32_t V##_table_size(void *i)                                            \
    {                                                                                  \
        return Z_isob_wasm_##V##Z___indirect_function_table((V##_inst *)i)->size;      \
    }                                                                                  \
    static const struct wasm_variant V##_variant = {                                   \
        GUARD, sizeof(V##_inst), &V##_once, V##_init_module, V##_instantiate, V##_free, \
        V##_memory, V##_stack_pointer, V##_init, V##_call, V##_peek, V##_poke,        \
        V##_call_indirect, V##_table_size,                                             \
    };

WASM_VARIANT(guard, 1)
WASM_VARIANT(bounds, 0)

struct wasm_comp {
    struct isob_comp base;
    const struct wasm_variant *v;
    void *inst;                 /* the wasm2c instance: globals and memory */
    wasm_rt_memory_t *mem;      /* its linear memory (the struct does not move) */
    unsigned char *guard_base;  /* the guard reservation, NULL for wasm-bounds */
    uint32_t *sp;               /* the guest's shadow stack pointer */
    uint32_t sp_at_rest;        /* its value between calls */
    uint32_t msg_off;           /* offset of the guest's message buffer */
    struct isob_msg *msg;       /* the host's message buffer */
    size_t shared_size;
    int last_trap;              /* the wasm-rt trap code of the last trapped guest call */
    int fds[ISOB_WASM_MAX_FDS]; /* descriptors its host calls may use */
    unsigned nfds;
};

/* What a trap becomes for the caller. */
static long trap_errno(int trap)
{
    switch (trap) {
    case WASM_RT_TRAP_OOB:
        return -EFAULT;          /* an access outside linear memory */
    case WASM_RT_TRAP_EXHAUSTION:
        return -ENOMEM;          /* call stack exhausted, or no memory to instantiate */
    case WASM_RT_TRAP_DIV_BY_ZERO:
    case WASM_RT_TRAP_INT_OVERFLOW:
    case WASM_RT_TRAP_INVALID_CONVERSION:
        return -EDOM;            /* an arithmetic trap */
    default:
        return -ENOEXEC;         /* unreachable, a bad indirect call, an exception */
    }
}

/* Run fn as guest code.  wasm-rt reports a trap by a longjmp to
 * wasm_rt_jmp_buf.  This is wasm_rt_impl_try() but for the setjmp: in
 * signal-handler mode wasm-rt uses sigsetjmp(buf, 1), whose saving of the
 * signal mask is a system call on every call into the guest, and would be
 * most of what a call costs.  The mask need not be saved because the fault
 * handler runs with SA_NODEFER and so never leaves SIGSEGV blocked.
 * Returns 0 with the guest's result in *ret, or a negative errno. */
static long guarded(struct wasm_comp *w, guest_fn *fn, uint32_t a, uint64_t b, uint64_t *ret)
{
    long rc;
    WASM_RT_SAVE_STACK_DEPTH();
    wasm_rt_set_unwind_target(&wasm_rt_jmp_buf);
    isob_wasm_guard_active = w->guard_base;
    int trap;
    switch (sigsetjmp(wasm_rt_jmp_buf, 0)) {
    case 0:
        *ret = fn(w->inst, a, b);
        isob_wasm_guard_active = NULL;
        return 0;
    case WASM_RT_TRAP_OOB:
        trap = WASM_RT_TRAP_OOB;
        break;
    case WASM_RT_TRAP_DIV_BY_ZERO:
        trap = WASM_RT_TRAP_DIV_BY_ZERO;
        break;
    case WASM_RT_TRAP_INT_OVERFLOW:
        trap = WASM_RT_TRAP_INT_OVERFLOW;
        break;
    case WASM_RT_TRAP_INVALID_CONVERSION:
        trap = WASM_RT_TRAP_INVALID_CONVERSION;
        break;
    case WASM_RT_TRAP_EXHAUSTION:
        trap = WASM_RT_TRAP_EXHAUSTION;
        break;
    case WASM_RT_TRAP_CALL_INDIRECT:
        trap = WASM_RT_TRAP_CALL_INDIRECT;
        break;
    default:
        trap = WASM_RT_TRAP_UNREACHABLE;
        break;
    }
    w->last_trap = trap;
    rc = trap_errno(trap);
    isob_wasm_guard_active = NULL;
    /* A trap leaves the shadow stack pointer wherever the trapping function
     * had moved it; put it back, or every trap would leak guest stack. */
    if (w->sp)
        *w->sp = w->sp_at_rest;
    return rc;
}

static int wasm_probe_variant(const struct wasm_variant *v, char *why, size_t len)
{
    if (!v->guard_pages)
        return 0;
    if (sizeof(void *) < 8) {
        snprintf(why, len, "guard pages need a 64-bit address space");
        return -ENOTSUP;
    }
    /* The kernel step: an address-space limit (ulimit -v) can refuse the
     * reservation even though it costs no memory. */
    void *p = mmap(NULL, ISOB_WASM_GUARD_RESERVATION, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        snprintf(why, len, "cannot reserve 8 GiB of address space for guard pages: %s", strerror(errno));
        return -ENOTSUP;
    }
    munmap(p, ISOB_WASM_GUARD_RESERVATION);
    return 0;
}

static void wasm_destroy(struct isob_comp *c)
{
    struct wasm_comp *w = (struct wasm_comp *)c;
    if (w->inst) {
        w->v->free(w->inst);
        free(w->inst);
    }
    isob_unmap(w->msg, w->shared_size);
    free(w);
}

static int wasm_create_variant(const struct wasm_variant *v, const struct isob_comp_spec *spec,
                               struct isob_comp **out)
{
    if (spec->shared_size <= sizeof(struct isob_msg) || spec->shared_size > WASM_MAX_REGION ||
        spec->heap_size > WASM_MAX_REGION)
        return -EINVAL;
    int rc;
    if (v->guard_pages && (rc = isob_wasm_fault_handler_install()) != 0)
        return rc;
    pthread_once(v->once, v->init_module);
    struct wasm_comp *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->v = v;
    w->shared_size = spec->shared_size;
    w->msg = isob_map(spec->shared_size, 0);
    /* Zeroed, so that freeing a half-built instance frees only what exists. */
    w->inst = calloc(1, v->instance_size);
    if (!w->msg || !w->inst) {
        wasm_destroy(&w->base);
        return -ENOMEM;
    }
    uint64_t off;
    /* The instance of the "isob" module the guest imports host_call from
     * is the compartment itself (Z_isobZ_host_call below). */
    rc = (int)guarded(w, v->instantiate, 0, (uint64_t)(uintptr_t)w, &off);
    if (rc == 0) {
        w->mem = v->memory(w->inst);
        w->guard_base = v->guard_pages ? w->mem->data : NULL;
        rc = (int)guarded(w, v->init, (uint32_t)spec->heap_size, spec->shared_size, &off);
    }
    if (rc == 0 && (int64_t)off < 0)
        rc = (int)(int64_t)off;
    /* The guest is not trusted to place its buffer inside its memory: the
     * host copies into it on every call, so check once here.  Memory only
     * grows, so the check stays true. */
    if (rc == 0 && off + spec->shared_size > w->mem->size)
        rc = -EPROTO;
    if (rc != 0) {
        wasm_destroy(&w->base);
        return rc;
    }
    w->msg_off = (uint32_t)off;
    w->sp = v->stack_pointer(w->inst);
    w->sp_at_rest = *w->sp;
    w->base.data_cap = spec->shared_size - sizeof(struct isob_msg);
    *out = &w->base;
    return 0;
}

static long wasm_call(struct isob_comp *c, unsigned entry)
{
    struct wasm_comp *w = (struct wasm_comp *)c;
    struct isob_msg *m = w->msg;
    size_t cap = c->data_cap;
    /* The data pointer is read afresh each time: growing a bounds-checked
     * memory may move it, and the guest can grow its memory. */
    size_t n = m->len < cap ? m->len : cap;
    memcpy(w->mem->data + w->msg_off, m, sizeof *m + n);
    uint64_t ret;
    long rc = guarded(w, w->v->call, entry, 0, &ret);
    if (rc != 0)
        return rc;
    const unsigned char *g = w->mem->data + w->msg_off;
    memcpy(m, g, sizeof *m);
    /* The length is the guest's word now: bound it before copying by it. */
    n = m->len < cap ? m->len : cap;
    memcpy(m->data, g + sizeof *m, n);
    return (long)(int64_t)ret;
}

static struct wasm_comp *as_wasm(struct isob_comp *c)
{
    if (!c || (c->mech != &isob_mech_wasm && c->mech != &isob_mech_wasm_bounds))
        return NULL;
    return (struct wasm_comp *)c;
}

/* The guest's host calls (isobench/work.h), as WASI gives a module its
 * system calls: the guest names buffers by linear-memory offset, and each
 * is checked to lie inside the memory; it may use only the descriptors
 * granted to its compartment.  Runs on the thread inside guarded(), so a
 * fault here would be the host's own and is not caught as a trap. */
u64 Z_isobZ_host_call(struct Z_isob_instance_t *env, u32 op, u64 a0, u64 a1, u64 a2)
{
    struct wasm_comp *w = (struct wasm_comp *)env;
    uint64_t size = w->mem->size;
    int64_t r;
    if (op == ISOB_HOST_MINFLT) {
        struct rusage ru;
        r = getrusage(RUSAGE_SELF, &ru) == 0 ? (int64_t)ru.ru_minflt : -errno;
        return (u64)r;
    }
    if (a1 > size || a2 > size - a1)
        return (u64)(int64_t)-EFAULT;
    unsigned char *buf = w->mem->data + a1;
    switch (op) {
    case ISOB_HOST_WRITE:
    case ISOB_HOST_READ: {
        unsigned i = 0;
        while (i < w->nfds && (u64)(int64_t)w->fds[i] != a0)
            i++;
        if (i == w->nfds)
            return (u64)(int64_t)-EBADF;
        ssize_t n = op == ISOB_HOST_WRITE ? write(w->fds[i], buf, (size_t)a2)
                                          : read(w->fds[i], buf, (size_t)a2);
        r = n < 0 ? -errno : (int64_t)n;
        break;
    }
    case ISOB_HOST_DISCARD:
        /* Linear memory starts on a page, so offsets on pages are
         * addresses on pages. */
        if (a1 % ISOB_WORK_PAGE || a2 % ISOB_WORK_PAGE)
            r = -EINVAL;
        else
            r = madvise(buf, (size_t)a2, MADV_DONTNEED) == 0 ? 0 : -errno;
        break;
    default:
        r = -ENOSYS;
        break;
    }
    return (u64)r;
}

int isob_wasm_grant_fd(struct isob_comp *c, int fd)
{
    struct wasm_comp *w = as_wasm(c);
    if (!w)
        return -EINVAL;
    if (fd < 0)
        return -EBADF;
    if (w->nfds == ISOB_WASM_MAX_FDS)
        return -ENOSPC;
    w->fds[w->nfds++] = fd;
    return 0;
}

int isob_wasm_linear(struct isob_comp *c, struct isob_wasm_linear *out)
{
    struct wasm_comp *w = as_wasm(c);
    if (!w)
        return -EINVAL;
    out->base = w->mem->data;
    out->size = w->mem->size;
    out->reserved = w->v->guard_pages ? ISOB_WASM_GUARD_RESERVATION : w->mem->size;
    out->msg_offset = w->msg_off;
    return 0;
}

int isob_wasm_peek(struct isob_comp *c, uint32_t offset, uint64_t *value)
{
    struct wasm_comp *w = as_wasm(c);
    return w ? (int)guarded(w, w->v->peek, offset, 0, value) : -EINVAL;
}

int isob_wasm_poke(struct isob_comp *c, uint32_t offset, uint64_t value)
{
    struct wasm_comp *w = as_wasm(c);
    uint64_t ignored;
    return w ? (int)guarded(w, w->v->poke, offset, value, &ignored) : -EINVAL;
}

/* The secret's place for OS-level readers: the host address of its
 * linear-memory offset, in the caller's own process. */
static int wasm_locate(struct isob_comp *c, uint64_t trusted_addr, struct isob_place *out)
{
    struct wasm_comp *w = (struct wasm_comp *)c;
    if (trusted_addr > w->mem->size || w->mem->size - trusted_addr < sizeof(uint64_t))
        return -EFAULT;
    out->pid = 0;
    out->addr = (uintptr_t)(w->mem->data + trusted_addr);
    return 0;
}

static const char *trap_name(int trap)
{
    switch (trap) {
    case WASM_RT_TRAP_OOB: return "out-of-bounds";
    case WASM_RT_TRAP_CALL_INDIRECT: return "call_indirect";
    case WASM_RT_TRAP_EXHAUSTION: return "exhaustion";
    case WASM_RT_TRAP_UNREACHABLE: return "unreachable";
    default: return "arithmetic";
    }
}

/* One escape attempt: it must trap, with the trap kind given.  Counts the
 * attempt in *tried, a trap of that kind in *trapped; an attempt that
 * returned went somewhere it must not (*escaped); another trap kind is
 * noted.  Returns what guarded() did. */
static long attempt(struct wasm_comp *w, guest_fn *fn, uint32_t a, uint64_t b, int want,
                    int *tried, int *trapped, int *escaped, char *odd, size_t len)
{
    uint64_t ret;
    w->last_trap = WASM_RT_TRAP_NONE;
    long rc = guarded(w, fn, a, b, &ret);
    (*tried)++;
    if (rc == 0)
        (*escaped)++;
    else if (w->last_trap == want)
        (*trapped)++;
    else if (!odd[0])
        snprintf(odd, len, "a %s trap where %s was expected (argument 0x%x)", trap_name(w->last_trap),
                 trap_name(want), a);
    return rc;
}

/* The in-process cell of wasm: in its threat model the guest is the
 * untrusted side and the host is trusted, so the attempts are the guest's.
 * It loads and stores past the end of its linear memory (the first byte
 * after it, an access straddling the end, the last 32-bit offset) and
 * calls through the function table at indices that hold nothing (the null
 * entry 0, the first index past the end, the last 32-bit index): each must
 * trap, out-of-bounds or call_indirect.  Before that, the guest reads the
 * secret at its offset, which proves that the hooks reach its memory and
 * that a trap below is the sandbox at work.  The host reads the secret too,
 * at base + offset: it reads the guest by design. */
static int wasm_escape(struct isob_comp *c, uint64_t trusted_addr, struct isob_cell *cell)
{
    struct wasm_comp *w = (struct wasm_comp *)c;
    snprintf(cell->method, sizeof cell->method,
             "guest code loads and stores past the end of its linear memory and calls outside "
             "its function table; each must trap");
    if (trusted_addr > w->mem->size || w->mem->size - trusted_addr < sizeof(uint64_t))
        return -EPROTO;
    uint64_t v = 0;
    long rc = guarded(w, w->v->peek, (uint32_t)trusted_addr, 0, &v);
    if (rc != 0 || v != ISOB_SECRET) {
        cell->verdict = ISOB_CELL_UNTESTED;
        snprintf(cell->evidence, sizeof cell->evidence,
                 "the guest could not read its own secret (%s): the attempts would prove nothing",
                 rc ? isob_strerror(rc) : "other data");
        return 0;
    }
    uint64_t host_view;
    memcpy(&host_view, w->mem->data + trusted_addr, sizeof host_view);

    const uint32_t size = w->mem->size;
    const uint32_t offsets[] = {size, size - 4, 0xfffffff8u};
    int mem_tried = 0, mem_trapped = 0, call_tried = 0, call_trapped = 0, escaped = 0;
    char odd[160] = "";
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
        attempt(w, w->v->peek, offsets[i], 0, WASM_RT_TRAP_OOB, &mem_tried, &mem_trapped, &escaped, odd,
                sizeof odd);
        attempt(w, w->v->poke, offsets[i], ~ISOB_SECRET, WASM_RT_TRAP_OOB, &mem_tried, &mem_trapped,
                &escaped, odd, sizeof odd);
    }
    const uint32_t table = w->v->table_size(w->inst);
    const uint32_t indices[] = {0, table, 0xffffffffu};
    for (size_t i = 0; i < sizeof indices / sizeof indices[0]; i++)
        attempt(w, w->v->call_indirect, indices[i], 0, WASM_RT_TRAP_CALL_INDIRECT, &call_tried,
                &call_trapped, &escaped, odd, sizeof odd);

    snprintf(cell->evidence, sizeof cell->evidence,
             "%d of %d loads and stores past the end (offsets 0x%x, 0x%x, 0x%x; memory 0x%x bytes) "
             "trapped out-of-bounds; %d of %d indirect calls (indices 0, %u, 0x%x; table of %u) trapped "
             "call_indirect; %s%s; the host read the secret at base + 0x%llx, as it may by design",
             mem_trapped, mem_tried, offsets[0], offsets[1], offsets[2], size, call_trapped, call_tried,
             table, indices[2], table, escaped ? "ESCAPED: " : "", escaped ? "an attempt returned without a trap"
                                                                              : "no attempt returned",
             (unsigned long long)trusted_addr);
    if (odd[0]) {
        size_t used = strlen(cell->evidence);
        snprintf(cell->evidence + used, sizeof cell->evidence - used, "; %s", odd);
    }
    if (escaped)
        cell->verdict = ISOB_CELL_LEAKS;
    else if (mem_trapped == mem_tried && call_trapped == call_tried && host_view == ISOB_SECRET)
        cell->verdict = ISOB_CELL_ENFORCED;
    else
        cell->verdict = ISOB_CELL_UNTESTED;
    return 0;
}

static int wasm_guard_probe(char *why, size_t len)
{
    return wasm_probe_variant(&guard_variant, why, len);
}

static int wasm_bounds_probe(char *why, size_t len)
{
    return wasm_probe_variant(&bounds_variant, why, len);
}

static int wasm_guard_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    return wasm_create_variant(&guard_variant, spec, out);
}

static int wasm_bounds_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    return wasm_create_variant(&bounds_variant, spec, out);
}

static struct isob_msg *wasm_shared(struct isob_comp *c)
{
    return ((struct wasm_comp *)c)->msg;
}

#else /* !ISOB_WASM_AVAILABLE: the tools were missing at build time. */

static int wasm_unavailable(char *why, size_t len)
{
    snprintf(why, len, "%s", ISOB_WASM_UNAVAILABLE_WHY);
    return -ENOTSUP;
}

#define wasm_guard_probe wasm_unavailable
#define wasm_bounds_probe wasm_unavailable

static int wasm_no_create(const struct isob_comp_spec *spec, struct isob_comp **out)
{
    (void)spec;
    (void)out;
    return -ENOTSUP;
}

#define wasm_guard_create wasm_no_create
#define wasm_bounds_create wasm_no_create
/* Never reached either: no compartment to probe. */
#define wasm_locate NULL
#define wasm_escape NULL

/* Never reached: no compartment can be created. */
static long wasm_call(struct isob_comp *c, unsigned entry)
{
    (void)c;
    (void)entry;
    return -ENOTSUP;
}

static struct isob_msg *wasm_shared(struct isob_comp *c)
{
    (void)c;
    return NULL;
}

static void wasm_destroy(struct isob_comp *c)
{
    (void)c;
}

int isob_wasm_linear(struct isob_comp *c, struct isob_wasm_linear *out)
{
    (void)c;
    (void)out;
    return -ENOTSUP;
}

int isob_wasm_peek(struct isob_comp *c, uint32_t offset, uint64_t *value)
{
    (void)c;
    (void)offset;
    (void)value;
    return -ENOTSUP;
}

int isob_wasm_poke(struct isob_comp *c, uint32_t offset, uint64_t value)
{
    (void)c;
    (void)offset;
    (void)value;
    return -ENOTSUP;
}

int isob_wasm_grant_fd(struct isob_comp *c, int fd)
{
    (void)c;
    (void)fd;
    return -ENOTSUP;
}

/* The guest's import, which tests call directly; without a guest there is
 * nothing to serve. */
uint64_t Z_isobZ_host_call(void *env, uint32_t op, uint64_t a0, uint64_t a1, uint64_t a2)
{
    (void)env, (void)op, (void)a0, (void)a1, (void)a2;
    return (uint64_t)(int64_t)-ENOTSUP;
}
#endif

const struct isob_mechanism isob_mech_wasm = {
    .name = "wasm",
    .summary = "WebAssembly SFI (wasm2c): linear memory bounded by guard pages in an 8 GiB reservation",
    .props = ISOB_ISOLATES_MEMORY,
    .result_params = "\"checks\":\"guard-pages\"",
    .probe = wasm_guard_probe,
    .create = wasm_guard_create,
    .call = wasm_call,
    .shared = wasm_shared,
    .destroy = wasm_destroy,
    .locate = wasm_locate,
    .escape = wasm_escape,
};

const struct isob_mechanism isob_mech_wasm_bounds = {
    .name = "wasm-bounds",
    .summary = "WebAssembly SFI (wasm2c): an explicit bounds check on every linear-memory access",
    .props = ISOB_ISOLATES_MEMORY,
    .result_params = "\"checks\":\"bounds\"",
    .probe = wasm_bounds_probe,
    .create = wasm_bounds_create,
    .call = wasm_call,
    .shared = wasm_shared,
    .destroy = wasm_destroy,
    .locate = wasm_locate,
    .escape = wasm_escape,
};
