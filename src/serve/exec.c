/* The command executor of `isob serve`: one parsed command in, its effect
 * on the store and its reply out.  No sockets here, so that the tests and
 * the fuzzer drive exactly the code the server runs.
 *
 * The store lives in a compartment; every operation is one isob_call with
 * the key (and value) laid out in the shared buffer.  A stored value is
 * the client's 32-bit flags (little-endian) followed by its data, so that
 * flags round-trip through a store that knows nothing of them.  Expiry and
 * cas uniques live in the store too; this side only turns the protocol's
 * exptimes into times of the store's clock, and moves that clock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "isob_config.h"
#include "isobench/serve.h"

/* --- buffers --------------------------------------------------------------- */

/* Buffers at least this large are mapped on their own, so that releasing
 * one gives its memory back to the system at once (malloc would keep it in
 * its heap, as it did 719 MiB of it after 800 clients left).  Under
 * AddressSanitizer they come from malloc, whose redzones then guard them. */
#define BUF_MAP_MIN (64u * 1024u)
/* Output buffers double in size up to this, and grow exactly beyond. */
#define BUF_DOUBLE_MAX (2u * ISOB_CONN_OUT_HIGH)
#define BUF_PAGE 4096u

#if defined(__SANITIZE_ADDRESS__)
#define BUF_USE_MAP 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BUF_USE_MAP 0
#endif
#endif
#ifndef BUF_USE_MAP
#define BUF_USE_MAP 1
#endif

/* The capacity a buffer gets for `want` bytes: the small size, or `want`
 * rounded up to whole pages. */
static size_t buf_size_for(size_t want)
{
    if (want <= ISOB_SERVE_BUF_SMALL)
        return ISOB_SERVE_BUF_SMALL;
    return (want + BUF_PAGE - 1) / BUF_PAGE * BUF_PAGE;
}

static int buf_mapped(size_t cap)
{
    return BUF_USE_MAP && cap >= BUF_MAP_MIN;
}

static void buf_sys_free(unsigned char *p, size_t cap)
{
    if (!p)
        return;
    if (buf_mapped(cap))
        munmap(p, cap);
    else
        free(p);
}

void isob_serve_mem_init(struct isob_serve_mem *m, size_t limit)
{
    memset(m, 0, sizeof *m);
    m->limit = limit;
}

void isob_serve_mem_fini(struct isob_serve_mem *m)
{
    while (m->pooled) {
        free(m->pool[--m->pooled]);
        m->used -= ISOB_SERVE_BUF_SMALL;
    }
}

/* Take `bytes` more from the cap, emptying the pool first if that makes
 * room.  A buffer growing past the small size (a value, a long line) may
 * not take the last ISOB_SERVE_MEM_RESERVE-th of the cap: that part stays
 * for small buffers, so that a refusal can still be replied to instead of
 * ending the connection.  0 or -ENOMEM. */
static int mem_charge(struct isob_serve_mem *m, size_t bytes, int large)
{
    if (!m)
        return 0;
    size_t limit = large ? m->limit - m->limit / ISOB_SERVE_MEM_RESERVE : m->limit;
    while ((m->used > limit || limit - m->used < bytes) && m->pooled) {
        free(m->pool[--m->pooled]);
        m->used -= ISOB_SERVE_BUF_SMALL;
    }
    if (m->used > limit || limit - m->used < bytes)
        return -ENOMEM;
    m->used += bytes;
    if (m->used > m->peak)
        m->peak = m->used;
    return 0;
}

static void mem_uncharge(struct isob_serve_mem *m, size_t bytes)
{
    if (m)
        m->used -= bytes;
}

/* Resize *p (capacity *cap, its first `keep` bytes in use) to hold `want`
 * bytes; want 0 releases it.  0 or -ENOMEM, leaving the buffer as it was. */
int isob_serve_buf_resize(struct isob_serve_mem *m, unsigned char **p, size_t *cap, size_t keep,
                          size_t want)
{
    size_t old = *cap, ncap = want ? buf_size_for(want) : 0;
    if (ncap == old)
        return 0;
    if (ncap > old && mem_charge(m, ncap - old, ncap > ISOB_SERVE_BUF_SMALL) != 0)
        return -ENOMEM;
    unsigned char *np = NULL;
    if (ncap == ISOB_SERVE_BUF_SMALL && m && m->pooled) {
        /* Counted while pooled; charged to this buffer now instead. */
        np = m->pool[--m->pooled];
        m->used -= ISOB_SERVE_BUF_SMALL;
    } else if (ncap && buf_mapped(ncap) && buf_mapped(old)) {
        void *q = mremap(*p, old, ncap, MREMAP_MAYMOVE);
        np = q == MAP_FAILED ? NULL : q;
        if (np) {
            *p = np;
            *cap = ncap;
            if (ncap < old)
                mem_uncharge(m, old - ncap);
            return 0;
        }
    } else if (ncap && buf_mapped(ncap)) {
        void *q = mmap(NULL, ncap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        np = q == MAP_FAILED ? NULL : q;
    } else if (ncap) {
        np = malloc(ncap);
    }
    if (ncap && !np) {
        if (ncap > old)
            mem_uncharge(m, ncap - old);
        return -ENOMEM;
    }
    if (np && keep)
        memcpy(np, *p, keep < ncap ? keep : ncap);
    if (*p) {
        if (old == ISOB_SERVE_BUF_SMALL && m && m->pooled < ISOB_SERVE_POOL) {
            /* Kept for the next connection, and still counted. */
            m->pool[m->pooled++] = *p;
            m->used += ISOB_SERVE_BUF_SMALL;
        } else {
            buf_sys_free(*p, old);
        }
    }
    if (ncap < old)
        mem_uncharge(m, old - ncap);
    *p = np;
    *cap = ncap;
    return 0;
}

int isob_buf_reserve(struct isob_buf *b, size_t n)
{
    if (b->cap - b->len >= n)
        return 0;
    if (n > SIZE_MAX / 2 - b->len)
        return -ENOMEM;
    /* Doubling up to what a connection's pipelined small replies take
     * (the high mark and a little more), so that they cost few resizes;
     * beyond, exactly what is asked (in pages), so that a buffer holding
     * one large reply is not twice its size. */
    size_t want = b->len + n;
    if (want < 2 * b->cap && 2 * b->cap <= BUF_DOUBLE_MAX)
        want = 2 * b->cap;
    return isob_serve_buf_resize(b->mem, &b->p, &b->cap, b->len, want);
}

void isob_buf_free(struct isob_buf *b)
{
    isob_serve_buf_resize(b->mem, &b->p, &b->cap, 0, 0);
    b->len = 0;
}

static int put(struct isob_buf *b, const void *s, size_t n)
{
    if (isob_buf_reserve(b, n) != 0)
        return -ENOMEM;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

#define PUT_LIT(b, s) put((b), (s), sizeof(s) - 1)

/* Decimal digits of v at p; returns their count.  Replies are formatted
 * by hand because snprintf on every VALUE line would cost more than the
 * rest of a get. */
static size_t put_u64(unsigned char *p, uint64_t v)
{
    unsigned char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (unsigned char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

/* --- the store ------------------------------------------------------------- */

/* The compartment died under a request: keep why for that request's
 * reply, say so on stderr, and put a fresh compartment in its place.  The
 * data the dead one stored died with it, and the log says that too.  If no
 * fresh one can be made, the dead one stays (it fails every call at once)
 * and the next request tries again; that failure is logged once. */
static void comp_replace(struct isob_serve *s)
{
    const struct isob_mechanism *m = s->comp->mech;
    snprintf(s->comp_died, sizeof s->comp_died, "%s", isob_comp_why(s->comp));
    struct isob_comp *fresh = NULL;
    int rc = isob_comp_create(m, &s->spec, &fresh);
    if (rc == 0) {
        fprintf(stderr, "isob serve: the %s compartment %s; restarted it, and the data it stored "
                "is lost\n", m->name, s->comp_died);
        isob_comp_destroy(s->comp);
        s->comp = fresh;
        s->msg = m->shared(fresh);
        s->restart_failing = 0;
        /* The fresh store starts with its clock at 0 and its own eviction
         * default: give it the server's at once. */
        s->msg->arg[0] = s->store_now;
        s->msg->arg[1] = s->evict;
        s->msg->len = 0;
        isob_call(s->comp, ISOB_ENTRY_KV_CLOCK);
    } else if (!s->restart_failing) {
        fprintf(stderr, "isob serve: the %s compartment %s; restarting it failed (%s), so "
                "requests fail until a restart works\n", m->name, s->comp_died, isob_strerror(rc));
        s->restart_failing = 1;
    }
}

/* Every call into the compartment goes through here (as s->call). */
long isob_serve_call_comp(struct isob_serve *s, unsigned entry)
{
    long r = isob_call(s->comp, entry);
    if (r == -EOWNERDEAD && isob_comp_why(s->comp))
        comp_replace(s);
    return r;
}

/* One request to the store: lengths and the two extra arguments in the
 * message (the key, and value, are already in data). */
static long kv(struct isob_serve *s, unsigned entry, size_t key_len, size_t value_len, int64_t a2,
               int64_t a3)
{
    s->msg->arg[0] = (int64_t)key_len;
    s->msg->arg[1] = (int64_t)value_len;
    s->msg->arg[2] = a2;
    s->msg->arg[3] = a3;
    s->msg->len = (uint32_t)(key_len + value_len);
    return s->call(s, entry);
}

static long kv_stats(struct isob_serve *s, struct isob_kv_stats *out)
{
    s->msg->len = 0;
    long r = s->call(s, ISOB_ENTRY_KV_STATS);
    if (r < 0)
        return r;
    out->items = (uint64_t)s->msg->arg[0];
    out->bytes = (uint64_t)s->msg->arg[1];
    out->limit_bytes = (uint64_t)s->msg->arg[2];
    out->evictions = out->reclaimed = 0;
    if (s->msg->len == 24) {
        memcpy(&out->evictions, s->msg->data, 8);
        memcpy(&out->reclaimed, s->msg->data + 8, 8);
    }
    return 0;
}

/* The coarse clocks: read once per command, and a second's resolution is
 * all that expiry needs, so the cheapest reading will do. */
static void clock_real(struct isob_serve_time *now)
{
    struct timespec m, w;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &m);
    clock_gettime(CLOCK_REALTIME_COARSE, &w);
    now->mono_ns = (uint64_t)m.tv_sec * 1000000000ull + (uint64_t)m.tv_nsec;
    now->unix_s = (int64_t)w.tv_sec;
}

/* The store's clock now: whole seconds since the start, from the base. */
static uint32_t store_time(const struct isob_serve *s, const struct isob_serve_time *t)
{
    uint64_t secs = (t->mono_ns - s->started_ns) / 1000000000ull + ISOB_SERVE_TIME_BASE;
    return secs > UINT32_MAX ? UINT32_MAX : (uint32_t)secs;
}

/* An exptime as memcached reads it, as a time of the store's clock: 0
 * never; negative already past; up to 30 days relative to now; beyond,
 * an absolute Unix time (past if not after the clock's start). */
static uint32_t expiry_of(const struct isob_serve *s, int64_t exptime)
{
    if (exptime == 0)
        return 0;
    if (exptime < 0)
        return 1;
    int64_t t;
    if (exptime > ISOB_SERVE_RELATIVE_MAX)
        t = exptime <= s->epoch_unix ? 1 : exptime - s->epoch_unix;
    else
        t = (int64_t)s->store_now + exptime;
    return t > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

/* Move the store's clock when a second has passed: one call per second at
 * most, as memcached's own clock ticks. */
static long tick(struct isob_serve *s)
{
    struct isob_serve_time t;
    s->clock(&t);
    uint32_t now = store_time(s, &t);
    if (now == s->store_now)
        return 0;
    s->msg->arg[0] = now;
    s->msg->arg[1] = s->evict;
    s->msg->len = 0;
    long r = s->call(s, ISOB_ENTRY_KV_CLOCK);
    if (r == 0)
        s->store_now = now;
    return r;
}

size_t isob_serve_value_max(void)
{
    size_t store = ISOB_KV_MAX_VALUE - ISOB_SERVE_FLAGS_BYTES;
    return store < ISOB_PROTO_MAX_VALUE_LIMIT ? store : ISOB_PROTO_MAX_VALUE_LIMIT;
}

size_t isob_serve_value_limit(void)
{
    size_t max = isob_serve_value_max();
    return max < ISOB_PROTO_DEFAULT_MAX_VALUE ? max : ISOB_PROTO_DEFAULT_MAX_VALUE;
}

size_t isob_serve_in_max(size_t max_value)
{
    size_t storage = ISOB_PROTO_LINE_MAX + 1 + max_value + 2;
    return storage > ISOB_PROTO_GET_LINE_MAX ? storage : ISOB_PROTO_GET_LINE_MAX;
}

int isob_serve_init(struct isob_serve *s, const struct isob_mechanism *m, size_t heap_size,
                    size_t max_value, int server_cpu, size_t buffer_limit)
{
    memset(s, 0, sizeof *s);
    if (max_value > isob_serve_value_max())
        return -EMSGSIZE;
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    spec.heap_size = heap_size;
    spec.server_cpu = server_cpu;
    /* One message holds the longest key and the largest value with its
     * flags; a page more leaves room for any mechanism's own header. */
    size_t need = sizeof(struct isob_msg) + ISOB_PROTO_KEY_MAX + ISOB_SERVE_FLAGS_BYTES + max_value;
    if (spec.shared_size < need + 4096)
        spec.shared_size = (need + 4096 + 4095) / 4096 * 4096;
    int rc = isob_comp_create(m, &spec, &s->comp);
    if (rc)
        return rc;
    s->spec = spec;
    if (s->comp->data_cap < need - sizeof(struct isob_msg)) {
        isob_comp_destroy(s->comp);
        s->comp = NULL;
        return -EMSGSIZE;
    }
    s->msg = m->shared(s->comp);
    s->call = isob_serve_call_comp;
    s->clock = clock_real;
    s->max_value = max_value;
    s->evict = 1;
    isob_serve_mem_init(&s->mem, buffer_limit);
    struct isob_serve_time t;
    s->clock(&t);
    s->started_ns = t.mono_ns;
    s->epoch_unix = t.unix_s - ISOB_SERVE_TIME_BASE;
    return 0;
}

void isob_serve_fini(struct isob_serve *s)
{
    if (s->comp)
        isob_comp_destroy(s->comp);
    s->comp = NULL;
    isob_serve_mem_fini(&s->mem);
}

/* --- the commands ---------------------------------------------------------- */

static int reply(const struct isob_proto_cmd *cmd, struct isob_buf *out, const char *s, size_t n)
{
    return cmd->noreply ? 0 : put(out, s, n);
}

#define REPLY_LIT(cmd, out, s) reply((cmd), (out), (s), sizeof(s) - 1)

/* An error of the store, as a SERVER_ERROR line. */
static int reply_store_error(struct isob_serve *s, const struct isob_proto_cmd *cmd,
                             struct isob_buf *out, long err)
{
    char line[ISOB_COMP_WHY_LEN + 64];
    int n;
    if (err == -EOWNERDEAD && s->comp_died[0])
        n = snprintf(line, sizeof line, "SERVER_ERROR compartment %s\r\n", s->comp_died);
    else
        n = snprintf(line, sizeof line, "SERVER_ERROR %s\r\n", isob_strerror(err));
    return reply(cmd, out, line, (size_t)n);
}

static void put_key(struct isob_serve *s, const unsigned char *key, size_t key_len)
{
    memcpy(s->msg->data, key, key_len);
}

/* get, gets, gat, gats: one store call and one VALUE per key, from the key
 * at keys + *resume on; see isob_serve_exec for when it stops early. */
static int exec_get(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out,
                    size_t out_limit, size_t *resume)
{
    int touch = cmd->op == ISOB_OP_GAT || cmd->op == ISOB_OP_GATS;
    int with_cas = cmd->op == ISOB_OP_GETS || cmd->op == ISOB_OP_GATS;
    unsigned entry = touch ? ISOB_ENTRY_KV_GAT : ISOB_ENTRY_KV_GET;
    int64_t expiry = touch ? (int64_t)expiry_of(s, cmd->exptime) : 0;
    const unsigned char *pos = cmd->keys + *resume, *key;
    size_t key_len;
    size_t cap = s->comp->data_cap;
    for (;;) {
        const unsigned char *at = pos;
        if (!isob_proto_next_key(cmd, &pos, &key, &key_len))
            break;
        if (out->len > out_limit) {
            /* Replies are backed up: fetch nothing more until they drain. */
            *resume = (size_t)(at - cmd->keys);
            return ISOB_SERVE_PAUSE;
        }
        put_key(s, key, key_len);
        long r = kv(s, entry, key_len, 0, expiry, 0);
        if (r == -ENOENT) {
            if (touch) {
                s->st.cmd_touch++;
                s->st.touch_misses++;
            } else {
                s->st.cmd_get++;
                s->st.get_misses++;
            }
            continue;
        }
        if (r >= 0 && (r < ISOB_SERVE_FLAGS_BYTES || (size_t)r > cap))
            r = -EPROTO;  /* not a value this server stored */
        if (r < 0)
            return reply_store_error(s, cmd, out, r);
        const unsigned char *v = s->msg->data;
        uint64_t cas = (uint64_t)s->msg->arg[3];
        uint32_t flags = (uint32_t)v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 |
                         (uint32_t)v[3] << 24;
        size_t n = (size_t)r - ISOB_SERVE_FLAGS_BYTES;
        /* "VALUE " key ' ' flags ' ' bytes [' ' cas] "\r\n" data "\r\n" */
        if (isob_buf_reserve(out, 6 + key_len + 1 + 10 + 1 + 10 + 1 + 20 + 2 + n + 2) != 0) {
            if (out->len) {
                /* Wait for all the replies before it to leave, then fetch
                 * this key again: the emptied buffer may hold it. */
                *resume = (size_t)(at - cmd->keys);
                return ISOB_SERVE_DRAIN;
            }
            s->mem.refusals++;
            static const char oom[] = "SERVER_ERROR out of memory writing get response\r\n";
            return PUT_LIT(out, oom) ? -ENOMEM : ISOB_SERVE_CONTINUE;
        }
        if (touch) {
            s->st.cmd_touch++;
            s->st.touch_hits++;
        } else {
            s->st.cmd_get++;
            s->st.get_hits++;
        }
        unsigned char *p = out->p + out->len;
        memcpy(p, "VALUE ", 6);
        p += 6;
        memcpy(p, key, key_len);
        p += key_len;
        *p++ = ' ';
        p += put_u64(p, flags);
        *p++ = ' ';
        p += put_u64(p, n);
        if (with_cas) {
            *p++ = ' ';
            p += put_u64(p, cas);
        }
        *p++ = '\r';
        *p++ = '\n';
        memcpy(p, v + ISOB_SERVE_FLAGS_BYTES, n);
        p += n;
        *p++ = '\r';
        *p++ = '\n';
        out->len = (size_t)(p - out->p);
    }
    *resume = 0;
    return PUT_LIT(out, "END\r\n");
}

/* --http: GET of a path, the document being the value stored under the
 * path as its key (isob_serve_startup stores ISOB_HTTP_DOC under "/").
 * One store call per request, as a memcached get; the reply is HTTP/1.0,
 * kept open when the request asked for it. */
static int exec_http_file(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out);

static int exec_http_get(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out)
{
    if (s->doc_read)
        return exec_http_file(s, cmd, out);
    const char *conn = cmd->keep_alive ? "keep-alive" : "close";
    char head[160];
    put_key(s, cmd->key, cmd->key_len);
    long r = kv(s, ISOB_ENTRY_KV_GET, cmd->key_len, 0, 0, 0);
    s->st.cmd_get++;
    if (r == -ENOENT) {
        s->st.get_misses++;
        static const char body[] = "not found\n";
        int n = snprintf(head, sizeof head, "HTTP/1.0 404 Not Found\r\nContent-Type: text/plain\r\n"
                         "Content-Length: %zu\r\nConnection: %s\r\n\r\n%s", sizeof body - 1, conn, body);
        if (put(out, head, (size_t)n) != 0)
            return -ENOMEM;
        return cmd->keep_alive ? ISOB_SERVE_CONTINUE : ISOB_SERVE_CLOSE;
    }
    if (r >= 0 && (r < ISOB_SERVE_FLAGS_BYTES || (size_t)r > s->comp->data_cap))
        r = -EPROTO;
    if (r < 0) {
        char why[ISOB_COMP_WHY_LEN + 32];
        int wn = r == -EOWNERDEAD && s->comp_died[0]
                     ? snprintf(why, sizeof why, "compartment %s\n", s->comp_died)
                     : snprintf(why, sizeof why, "%s\n", isob_strerror(r));
        char line[ISOB_COMP_WHY_LEN + 192];
        int n = snprintf(line, sizeof line, "HTTP/1.0 500 Internal Server Error\r\nContent-Type: "
                         "text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", wn, why);
        return put(out, line, (size_t)n) != 0 ? -ENOMEM : ISOB_SERVE_CLOSE;
    }
    size_t body = (size_t)r - ISOB_SERVE_FLAGS_BYTES;
    int n = snprintf(head, sizeof head, "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n"
                     "Content-Length: %zu\r\nConnection: %s\r\n\r\n", body, conn);
    if (isob_buf_reserve(out, (size_t)n + body) != 0) {
        if (out->len)
            return ISOB_SERVE_DRAIN;  /* again once the replies before it are out */
        s->mem.refusals++;
        static const char busy[] = "HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                   "Connection: close\r\n\r\n";
        return PUT_LIT(out, busy) ? -ENOMEM : ISOB_SERVE_CLOSE;
    }
    s->st.get_hits++;
    memcpy(out->p + out->len, head, (size_t)n);
    memcpy(out->p + out->len + (size_t)n, s->msg->data + ISOB_SERVE_FLAGS_BYTES, body);
    out->len += (size_t)n + body;
    return cmd->keep_alive ? ISOB_SERVE_CONTINUE : ISOB_SERVE_CLOSE;
}

/* --http --monitor: the document read from a file through s->doc_read
 * (src/serve/monitor.c), whose system calls the monitor checks; the store
 * is not asked.  A refusal is 403, a missing file 404. */
static int exec_http_file(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out)
{
    const char *conn = cmd->keep_alive ? "keep-alive" : "close";
    char head[200];
    s->st.cmd_get++;
    long r = s->doc_read(s->doc_ctx, (const char *)cmd->key, cmd->key_len, s->doc_buf, s->doc_cap);
    if (r < 0) {
        int status = r == -ENOENT ? 404 : r == -EPERM || r == -EACCES ? 403 : 500;
        const char *text = status == 404 ? "Not Found" : status == 403 ? "Forbidden"
                                                                        : "Internal Server Error";
        char why[96];
        int wn = snprintf(why, sizeof why, "%s\n", isob_strerror((int)r));
        if (status == 404)
            s->st.get_misses++;
        int n = snprintf(head, sizeof head, "HTTP/1.0 %d %s\r\nContent-Type: text/plain\r\n"
                         "Content-Length: %d\r\nConnection: %s\r\n\r\n%s", status, text, wn,
                         status == 404 ? conn : "close", why);
        if (put(out, head, (size_t)n) != 0)
            return -ENOMEM;
        return status == 404 && cmd->keep_alive ? ISOB_SERVE_CONTINUE : ISOB_SERVE_CLOSE;
    }
    size_t body = (size_t)r;
    int n = snprintf(head, sizeof head, "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n"
                     "Content-Length: %zu\r\nConnection: %s\r\n\r\n", body, conn);
    if (isob_buf_reserve(out, (size_t)n + body) != 0) {
        if (out->len)
            return ISOB_SERVE_DRAIN;
        s->mem.refusals++;
        static const char busy[] = "HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                   "Connection: close\r\n\r\n";
        return PUT_LIT(out, busy) ? -ENOMEM : ISOB_SERVE_CLOSE;
    }
    s->st.get_hits++;
    memcpy(out->p + out->len, head, (size_t)n);
    memcpy(out->p + out->len + (size_t)n, s->doc_buf, body);
    out->len += (size_t)n + body;
    return cmd->keep_alive ? ISOB_SERVE_CONTINUE : ISOB_SERVE_CLOSE;
}

static int exec_store(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out)
{
    s->st.cmd_set++;
    if (cmd->key_len + ISOB_SERVE_FLAGS_BYTES + cmd->bytes > s->comp->data_cap) {
        s->st.store_too_large++;
        return REPLY_LIT(cmd, out, "SERVER_ERROR object too large for cache\r\n");
    }
    unsigned entry = cmd->op == ISOB_OP_ADD       ? ISOB_ENTRY_KV_ADD
                     : cmd->op == ISOB_OP_REPLACE ? ISOB_ENTRY_KV_REPLACE
                     : cmd->op == ISOB_OP_CAS     ? ISOB_ENTRY_KV_CAS
                                                  : ISOB_ENTRY_KV_SET;
    unsigned char *d = s->msg->data;
    memcpy(d, cmd->key, cmd->key_len);
    d += cmd->key_len;
    d[0] = (unsigned char)cmd->flags;
    d[1] = (unsigned char)(cmd->flags >> 8);
    d[2] = (unsigned char)(cmd->flags >> 16);
    d[3] = (unsigned char)(cmd->flags >> 24);
    if (cmd->bytes)
        memcpy(d + ISOB_SERVE_FLAGS_BYTES, cmd->data, cmd->bytes);
    long r = kv(s, entry, cmd->key_len, ISOB_SERVE_FLAGS_BYTES + (size_t)cmd->bytes,
                expiry_of(s, cmd->exptime), (int64_t)cmd->cas);
    if (r == 0) {
        s->st.total_items++;
        if (cmd->op == ISOB_OP_CAS)
            s->st.cas_hits++;
        return REPLY_LIT(cmd, out, "STORED\r\n");
    }
    if (cmd->op == ISOB_OP_CAS && (r == -EEXIST || r == -ENOENT)) {
        if (r == -EEXIST) {
            s->st.cas_badval++;
            return REPLY_LIT(cmd, out, "EXISTS\r\n");
        }
        s->st.cas_misses++;
        return REPLY_LIT(cmd, out, "NOT_FOUND\r\n");
    }
    if ((cmd->op == ISOB_OP_ADD && r == -EEXIST) || (cmd->op == ISOB_OP_REPLACE && r == -ENOENT))
        return REPLY_LIT(cmd, out, "NOT_STORED\r\n");
    if (r == -ENOSPC) {
        /* Like memcached: a set that failed must not leave the old value
         * to be read as if the set had never been sent. */
        s->st.store_no_memory++;
        if (cmd->op == ISOB_OP_SET) {
            put_key(s, cmd->key, cmd->key_len);
            kv(s, ISOB_ENTRY_KV_DELETE, cmd->key_len, 0, 0, 0);
        }
        return REPLY_LIT(cmd, out, "SERVER_ERROR out of memory storing object\r\n");
    }
    return reply_store_error(s, cmd, out, r);
}

/* The store's errors to a meta command are always sent. */
static const struct isob_proto_cmd no_quiet;

/* append, prepend: the bytes go into the stored value inside the store,
 * after its flags (which stay, as its expiry does). */
static long store_append(struct isob_serve *s, const struct isob_proto_cmd *cmd, int prepend)
{
    unsigned char *d = s->msg->data;
    memcpy(d, cmd->key, cmd->key_len);
    if (cmd->bytes)
        memcpy(d + cmd->key_len, cmd->data, cmd->bytes);
    s->msg->arg[0] = (int64_t)cmd->key_len;
    s->msg->arg[1] = cmd->bytes;
    s->msg->arg[2] = 2 * ISOB_SERVE_FLAGS_BYTES + prepend;
    s->msg->arg[3] = (int64_t)(ISOB_SERVE_FLAGS_BYTES + s->max_value);
    s->msg->len = (uint32_t)(cmd->key_len + cmd->bytes);
    return s->call(s, ISOB_ENTRY_KV_APPEND);
}

static int exec_append(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out)
{
    s->st.cmd_set++;
    if (cmd->key_len + cmd->bytes > s->comp->data_cap) {
        s->st.store_too_large++;
        return REPLY_LIT(cmd, out, "SERVER_ERROR object too large for cache\r\n");
    }
    long r = store_append(s, cmd, cmd->op == ISOB_OP_PREPEND);
    if (r == 0) {
        s->st.total_items++;
        return REPLY_LIT(cmd, out, "STORED\r\n");
    }
    if (r == -ENOENT)
        return REPLY_LIT(cmd, out, "NOT_STORED\r\n");
    if (r == -EMSGSIZE) {
        s->st.store_too_large++;
        return REPLY_LIT(cmd, out, "SERVER_ERROR object too large for cache\r\n");
    }
    if (r == -ENOSPC) {
        s->st.store_no_memory++;
        return REPLY_LIT(cmd, out, "SERVER_ERROR out of memory storing object\r\n");
    }
    return reply_store_error(s, cmd, out, r);
}

/* incr, decr: the arithmetic happens in the store, on the value after its
 * flags, so that it is one step and keeps flags and expiry. */
static int exec_arith(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out)
{
    put_key(s, cmd->key, cmd->key_len);
    s->msg->arg[0] = (int64_t)cmd->key_len;
    s->msg->arg[1] = (int64_t)cmd->delta;
    s->msg->arg[2] = 2 * ISOB_SERVE_FLAGS_BYTES + (cmd->op == ISOB_OP_DECR);
    s->msg->arg[3] = 0;
    s->msg->len = (uint32_t)cmd->key_len;
    long r = s->call(s, ISOB_ENTRY_KV_INCR);
    uint64_t *hits = cmd->op == ISOB_OP_DECR ? &s->st.decr_hits : &s->st.incr_hits;
    uint64_t *misses = cmd->op == ISOB_OP_DECR ? &s->st.decr_misses : &s->st.incr_misses;
    if (r == 0) {
        (*hits)++;
        unsigned char line[24];
        size_t n = put_u64(line, (uint64_t)s->msg->arg[1]);
        line[n++] = '\r';
        line[n++] = '\n';
        return reply(cmd, out, (const char *)line, n);
    }
    if (r == -ENOENT) {
        (*misses)++;
        return REPLY_LIT(cmd, out, "NOT_FOUND\r\n");
    }
    if (r == -EDOM)
        return REPLY_LIT(cmd, out, "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
    if (r == -ENOSPC) {
        s->st.store_no_memory++;
        return REPLY_LIT(cmd, out, "SERVER_ERROR out of memory\r\n");
    }
    return reply_store_error(s, cmd, out, r);
}

/* " <flag><value>" for each of a meta command's return flags, in the
 * client's order, into p (which has room: see meta_room).  found says
 * whether the item exists: a miss carries k and O only, as in memcached. */
static unsigned char *meta_ret(unsigned char *p, const struct isob_proto_cmd *cmd, int found,
                               uint32_t flags, int64_t ttl, uint64_t cas, size_t size)
{
    const struct isob_proto_meta *m = &cmd->meta;
    for (size_t i = 0; i < m->nret; i++) {
        unsigned char f = m->ret[i];
        if (!found && f != 'k' && f != 'O')
            continue;
        *p++ = ' ';
        *p++ = f;
        switch (f) {
        case 'f':
            p += put_u64(p, flags);
            break;
        case 't':
            if (ttl < 0) {
                *p++ = '-';
                *p++ = '1';
            } else {
                p += put_u64(p, (uint64_t)ttl);
            }
            break;
        case 'c':
            p += put_u64(p, cas);
            break;
        case 's':
            p += put_u64(p, size);
            break;
        case 'k':
            memcpy(p, cmd->key, cmd->key_len);
            p += cmd->key_len;
            break;
        case 'O':
            memcpy(p, cmd->meta.opaque, cmd->meta.opaque_len);
            p += cmd->meta.opaque_len;
            break;
        }
    }
    return p;
}

/* Bytes meta_ret may write for cmd, at most. */
static size_t meta_room(const struct isob_proto_cmd *cmd)
{
    return cmd->meta.nret * (2 + 21) + cmd->key_len + cmd->meta.opaque_len;
}

/* A reply line: code (two letters), the return flags, "\r\n". */
static int meta_line(struct isob_buf *out, const char *code, const struct isob_proto_cmd *cmd,
                     int found, uint32_t flags, int64_t ttl, uint64_t cas, size_t size)
{
    if (isob_buf_reserve(out, 2 + meta_room(cmd) + 2) != 0)
        return -ENOMEM;
    unsigned char *p = out->p + out->len;
    memcpy(p, code, 2);
    p = meta_ret(p + 2, cmd, found, flags, ttl, cas, size);
    *p++ = '\r';
    *p++ = '\n';
    out->len = (size_t)(p - out->p);
    return 0;
}

/* mg: a get (with T, a get and touch) whose reply carries what the flags
 * ask for: VA <size> <flags>\r\n<data>\r\n with v, else HD <flags>; EN for
 * a miss (nothing with q). */
static int exec_mg(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out)
{
    const struct isob_proto_meta *m = &cmd->meta;
    put_key(s, cmd->key, cmd->key_len);
    long r = kv(s, m->touch ? ISOB_ENTRY_KV_GAT : ISOB_ENTRY_KV_GET, cmd->key_len, 0,
                m->touch ? (int64_t)expiry_of(s, cmd->exptime) : 0, 0);
    if (m->touch)
        s->st.cmd_touch++;
    s->st.cmd_get++;
    if (r == -ENOENT) {
        s->st.get_misses++;
        if (m->touch)
            s->st.touch_misses++;
        return m->quiet ? 0 : meta_line(out, "EN", cmd, 0, 0, 0, 0, 0);
    }
    if (r >= 0 && (r < ISOB_SERVE_FLAGS_BYTES || (size_t)r > s->comp->data_cap))
        r = -EPROTO;
    if (r < 0)
        return reply_store_error(s, &no_quiet, out, r);
    s->st.get_hits++;
    if (m->touch)
        s->st.touch_hits++;
    const unsigned char *v = s->msg->data;
    uint32_t flags = (uint32_t)v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 |
                     (uint32_t)v[3] << 24;
    size_t n = (size_t)r - ISOB_SERVE_FLAGS_BYTES;
    uint32_t expiry = (uint32_t)s->msg->arg[2];
    int64_t ttl = expiry == 0 ? -1 : expiry > s->store_now ? (int64_t)(expiry - s->store_now) : 0;
    uint64_t cas = (uint64_t)s->msg->arg[3];
    if (!m->value)
        return meta_line(out, "HD", cmd, 1, flags, ttl, cas, n);
    if (isob_buf_reserve(out, 3 + 20 + meta_room(cmd) + 2 + n + 2) != 0) {
        s->mem.refusals++;
        static const char oom[] = "SERVER_ERROR out of memory writing get response\r\n";
        return PUT_LIT(out, oom);
    }
    unsigned char *p = out->p + out->len;
    memcpy(p, "VA ", 3);
    p += 3;
    p += put_u64(p, n);
    p = meta_ret(p, cmd, 1, flags, ttl, cas, n);
    *p++ = '\r';
    *p++ = '\n';
    memcpy(p, v + ISOB_SERVE_FLAGS_BYTES, n);
    p += n;
    *p++ = '\r';
    *p++ = '\n';
    out->len = (size_t)(p - out->p);
    return 0;
}

/* ms: a store in the mode M names (set, add, append, prepend, replace; a
 * set with C is a cas).  HD (nothing with q), NS, EX or NF. */
static int exec_ms(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out)
{
    const struct isob_proto_meta *m = &cmd->meta;
    enum isob_proto_op op = m->mode == 'E'   ? ISOB_OP_ADD
            : m->mode == 'R' ? ISOB_OP_REPLACE
            : m->mode == 'A' ? ISOB_OP_APPEND
            : m->mode == 'P' ? ISOB_OP_PREPEND
            : m->has_cas     ? ISOB_OP_CAS
                             : ISOB_OP_SET;
    long r;
    s->st.cmd_set++;
    if (cmd->key_len + ISOB_SERVE_FLAGS_BYTES + cmd->bytes > s->comp->data_cap) {
        r = -EMSGSIZE;
    } else if (op == ISOB_OP_APPEND || op == ISOB_OP_PREPEND) {
        r = store_append(s, cmd, op == ISOB_OP_PREPEND);
    } else {
        unsigned entry = op == ISOB_OP_ADD       ? ISOB_ENTRY_KV_ADD
                         : op == ISOB_OP_REPLACE ? ISOB_ENTRY_KV_REPLACE
                         : op == ISOB_OP_CAS     ? ISOB_ENTRY_KV_CAS
                                                    : ISOB_ENTRY_KV_SET;
        unsigned char *d = s->msg->data;
        memcpy(d, cmd->key, cmd->key_len);
        d += cmd->key_len;
        d[0] = (unsigned char)cmd->flags;
        d[1] = (unsigned char)(cmd->flags >> 8);
        d[2] = (unsigned char)(cmd->flags >> 16);
        d[3] = (unsigned char)(cmd->flags >> 24);
        if (cmd->bytes)
            memcpy(d + ISOB_SERVE_FLAGS_BYTES, cmd->data, cmd->bytes);
        r = kv(s, entry, cmd->key_len, ISOB_SERVE_FLAGS_BYTES + (size_t)cmd->bytes,
               expiry_of(s, cmd->exptime), (int64_t)cmd->cas);
    }
    uint64_t cas = r == 0 ? (uint64_t)s->msg->arg[3] : 0;
    if (r == 0) {
        s->st.total_items++;
        if (op == ISOB_OP_CAS)
            s->st.cas_hits++;
        return m->quiet ? 0 : meta_line(out, "HD", cmd, 1, 0, 0, cas, 0);
    }
    if (op == ISOB_OP_CAS && r == -EEXIST) {
        s->st.cas_badval++;
        return meta_line(out, "EX", cmd, 1, 0, 0, 0, 0);
    }
    if (op == ISOB_OP_CAS && r == -ENOENT) {
        s->st.cas_misses++;
        return meta_line(out, "NF", cmd, 1, 0, 0, 0, 0);
    }
    if (r == -EEXIST || r == -ENOENT)
        return meta_line(out, "NS", cmd, 1, 0, 0, 0, 0);
    if (r == -EMSGSIZE) {
        s->st.store_too_large++;
        return PUT_LIT(out, "SERVER_ERROR object too large for cache\r\n");
    }
    if (r == -ENOSPC) {
        s->st.store_no_memory++;
        return PUT_LIT(out, "SERVER_ERROR out of memory storing object\r\n");
    }
    return reply_store_error(s, &no_quiet, out, r);
}

/* md: a delete (with C, only of the item with that cas unique).  HD
 * (nothing with q), NF or EX. */
static int exec_md(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out)
{
    const struct isob_proto_meta *m = &cmd->meta;
    put_key(s, cmd->key, cmd->key_len);
    long r = kv(s, m->has_cas ? ISOB_ENTRY_KV_DELETE_CAS : ISOB_ENTRY_KV_DELETE, cmd->key_len, 0, 0,
                (int64_t)cmd->cas);
    if (r == 0) {
        s->st.delete_hits++;
        return m->quiet ? 0 : meta_line(out, "HD", cmd, 1, 0, 0, 0, 0);
    }
    if (r == -ENOENT) {
        s->st.delete_misses++;
        return meta_line(out, "NF", cmd, 1, 0, 0, 0, 0);
    }
    if (r == -EEXIST)
        return meta_line(out, "EX", cmd, 1, 0, 0, 0, 0);
    return reply_store_error(s, &no_quiet, out, r);
}

static int exec_touch(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out)
{
    s->st.cmd_touch++;
    put_key(s, cmd->key, cmd->key_len);
    long r = kv(s, ISOB_ENTRY_KV_TOUCH, cmd->key_len, 0, expiry_of(s, cmd->exptime), 0);
    if (r == 0) {
        s->st.touch_hits++;
        return REPLY_LIT(cmd, out, "TOUCHED\r\n");
    }
    if (r == -ENOENT) {
        s->st.touch_misses++;
        return REPLY_LIT(cmd, out, "NOT_FOUND\r\n");
    }
    return reply_store_error(s, cmd, out, r);
}

static int exec_delete(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out)
{
    put_key(s, cmd->key, cmd->key_len);
    long r = kv(s, ISOB_ENTRY_KV_DELETE, cmd->key_len, 0, 0, 0);
    if (r == 0) {
        s->st.delete_hits++;
        return REPLY_LIT(cmd, out, "DELETED\r\n");
    }
    if (r == -ENOENT) {
        s->st.delete_misses++;
        return REPLY_LIT(cmd, out, "NOT_FOUND\r\n");
    }
    return reply_store_error(s, cmd, out, r);
}

static int stat_line(struct isob_buf *out, const char *name, unsigned long long v)
{
    char line[96];
    int n = snprintf(line, sizeof line, "STAT %s %llu\r\n", name, v);
    return put(out, line, (size_t)n);
}

static int exec_stats(struct isob_serve *s, struct isob_buf *out)
{
    struct isob_kv_stats kvs = {0};
    long r = kv_stats(s, &kvs);
    if (r < 0) {
        struct isob_proto_cmd none = {0};
        return reply_store_error(s, &none, out, r);
    }
    struct isob_serve_time t;
    s->clock(&t);
    char line[160];
    int n = snprintf(line, sizeof line, "STAT version %s\r\nSTAT mechanism %s\r\nSTAT session %s\r\n",
                     ISOB_VERSION, s->comp->mech->name, s->session ? s->session : "shared");
    const struct isob_serve_stats *st = &s->st;
    const struct { const char *name; unsigned long long v; } lines[] = {
        {"pid", (unsigned long long)getpid()},
        {"uptime", (t.mono_ns - s->started_ns) / 1000000000ull},
        {"time", (unsigned long long)t.unix_s},
        {"pointer_size", sizeof(void *) * 8},
        {"threads", 1},
        {"curr_connections", st->curr_connections},
        {"total_connections", st->total_connections},
        {"rejected_connections", st->rejected_connections},
        {"cmd_get", st->cmd_get},
        {"cmd_set", st->cmd_set},
        {"cmd_flush", st->cmd_flush},
        {"cmd_touch", st->cmd_touch},
        {"get_hits", st->get_hits},
        {"get_misses", st->get_misses},
        {"delete_hits", st->delete_hits},
        {"delete_misses", st->delete_misses},
        {"cas_misses", st->cas_misses},
        {"cas_hits", st->cas_hits},
        {"cas_badval", st->cas_badval},
        {"incr_hits", st->incr_hits},
        {"incr_misses", st->incr_misses},
        {"decr_hits", st->decr_hits},
        {"decr_misses", st->decr_misses},
        {"touch_hits", st->touch_hits},
        {"touch_misses", st->touch_misses},
        {"store_too_large", st->store_too_large},
        {"store_no_memory", st->store_no_memory},
        {"bytes_read", st->bytes_read},
        {"bytes_written", st->bytes_written},
        {"limit_maxbytes", kvs.limit_bytes},
        {"conn_buffer_bytes", s->mem.used},
        {"conn_buffer_peak", s->mem.peak},
        {"conn_buffer_limit", s->mem.limit == SIZE_MAX ? 0 : s->mem.limit},
        {"conn_buffer_oom", s->mem.refusals},
        {"curr_items", kvs.items},
        {"total_items", st->total_items},
        {"evictions", kvs.evictions - s->evictions_base},
        {"reclaimed", kvs.reclaimed - s->reclaimed_base},
        {"bytes", kvs.bytes},
        {"startup_items", s->startup_items},
        {"startup_bytes", s->startup_items * ISOB_SERVE_STARTUP_RECORD},
        {"preloaded_keys", s->preloaded},
        {"startup_usec", s->startup_ns / 1000},
    };
    int rc = put(out, line, (size_t)n);
    for (size_t i = 0; rc == 0 && i < sizeof lines / sizeof lines[0]; i++)
        rc = stat_line(out, lines[i].name, lines[i].v);
    const struct isob_serve_rollback *rb = s->rollback;
    if (rb && rc == 0) {
        /* Summed over every worker; read while the others go on. */
        n = snprintf(line, sizeof line, "STAT rollback_method %s\r\n", rb->method);
        rc = put(out, line, (size_t)n);
        const struct { const char *name; unsigned long long v; } rl[] = {
            {"rollback_workers", rb->workers},
            {"rollback_sessions", __atomic_load_n(&rb->sessions, __ATOMIC_RELAXED)},
            {"rollback_pages", __atomic_load_n(&rb->pages, __ATOMIC_RELAXED)},
            {"rollback_ranges", __atomic_load_n(&rb->ranges, __ATOMIC_RELAXED)},
            {"rollback_usec", __atomic_load_n(&rb->ns, __ATOMIC_RELAXED) / 1000},
            {"rollback_unmapped", __atomic_load_n(&rb->unmapped, __ATOMIC_RELAXED)},
            {"rollback_failed", __atomic_load_n(&rb->failed, __ATOMIC_RELAXED)},
            {"rollback_verified", __atomic_load_n(&rb->verified, __ATOMIC_RELAXED)},
            {"rollback_mismatched_pages", __atomic_load_n(&rb->mismatched, __ATOMIC_RELAXED)},
        };
        for (size_t i = 0; rc == 0 && i < sizeof rl / sizeof rl[0]; i++)
            rc = stat_line(out, rl[i].name, rl[i].v);
    }
    return rc ? rc : PUT_LIT(out, "END\r\n");
}

static int exec_stats_reset(struct isob_serve *s, struct isob_buf *out)
{
    /* The gauges (connections now open) stay; the counters restart, the
     * store's own from where they stand now. */
    struct isob_kv_stats kvs = {0};
    if (kv_stats(s, &kvs) == 0) {
        s->evictions_base = kvs.evictions;
        s->reclaimed_base = kvs.reclaimed;
    }
    uint64_t curr = s->st.curr_connections;
    memset(&s->st, 0, sizeof s->st);
    s->st.curr_connections = curr;
    s->mem.refusals = 0;
    s->mem.peak = s->mem.used;
    return PUT_LIT(out, "RESET\r\n");
}

int isob_serve_exec(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out,
                    size_t out_limit, size_t *resume)
{
    int rc = 0;
    long r = tick(s);
    if (r < 0 && cmd->op != ISOB_OP_NONE && cmd->op != ISOB_OP_QUIT) {
        struct isob_proto_cmd none = {0};
        rc = reply_store_error(s, &none, out, r);
        return rc < 0 ? rc : ISOB_SERVE_CONTINUE;
    }
    switch (cmd->op) {
    case ISOB_OP_NONE:
        break;
    case ISOB_OP_ERROR:
        if (cmd->unlink) {
            put_key(s, cmd->key, cmd->key_len);
            kv(s, ISOB_ENTRY_KV_DELETE, cmd->key_len, 0, 0, 0);
        }
        if (cmd->refused == ISOB_PROTO_TOO_LARGE)
            s->st.store_too_large++;
        rc = reply(cmd, out, cmd->reply, cmd->reply_len ? cmd->reply_len : strlen(cmd->reply));
        if (rc == 0 && cmd->close)
            return ISOB_SERVE_CLOSE;
        break;
    case ISOB_OP_GET:
    case ISOB_OP_GETS:
    case ISOB_OP_GAT:
    case ISOB_OP_GATS:
        rc = exec_get(s, cmd, out, out_limit, resume);
        break;
    case ISOB_OP_SET:
    case ISOB_OP_ADD:
    case ISOB_OP_REPLACE:
    case ISOB_OP_CAS:
        rc = exec_store(s, cmd, out);
        break;
    case ISOB_OP_APPEND:
    case ISOB_OP_PREPEND:
        rc = exec_append(s, cmd, out);
        break;
    case ISOB_OP_INCR:
    case ISOB_OP_DECR:
        rc = exec_arith(s, cmd, out);
        break;
    case ISOB_OP_MG:
        rc = exec_mg(s, cmd, out);
        break;
    case ISOB_OP_MS:
        rc = exec_ms(s, cmd, out);
        break;
    case ISOB_OP_MD:
        rc = exec_md(s, cmd, out);
        break;
    case ISOB_OP_MN:
        rc = PUT_LIT(out, "MN\r\n");
        break;
    case ISOB_OP_TOUCH:
        rc = exec_touch(s, cmd, out);
        break;
    case ISOB_OP_DELETE:
        rc = exec_delete(s, cmd, out);
        break;
    case ISOB_OP_FLUSH_ALL: {
        s->st.cmd_flush++;
        s->msg->len = 0;
        r = s->call(s, ISOB_ENTRY_KV_FLUSH);
        rc = r < 0 ? reply_store_error(s, cmd, out, r) : REPLY_LIT(cmd, out, "OK\r\n");
        break;
    }
    case ISOB_OP_VERSION:
        rc = PUT_LIT(out, "VERSION " ISOB_PROTO_COMPAT_VERSION " " ISOB_PROTO_SERVER_NAME ISOB_VERSION
                          "\r\n");
        break;
    case ISOB_OP_STATS:
        rc = exec_stats(s, out);
        break;
    case ISOB_OP_STATS_RESET:
        rc = exec_stats_reset(s, out);
        break;
    case ISOB_OP_VERBOSITY:
        rc = REPLY_LIT(cmd, out, "OK\r\n");
        break;
    case ISOB_OP_QUIT:
        return ISOB_SERVE_CLOSE;
    case ISOB_OP_HTTP_GET:
        rc = exec_http_get(s, cmd, out);
        if (rc == ISOB_SERVE_DRAIN)
            *resume = 0;
        break;
    }
    return rc;
}
