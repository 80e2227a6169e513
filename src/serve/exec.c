/* The command executor of `isob serve`: one parsed command in, its effect
 * on the store and its reply out.  No sockets here, so that the tests and
 * the fuzzer drive exactly the code the server runs.
 *
 * The store lives in a compartment; every operation is one isob_call with
 * the key (and value) laid out in the shared buffer.  A stored value is
 * the client's 32-bit flags (little-endian) followed by its data, so that
 * flags round-trip through a store that knows nothing of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "isob_config.h"
#include "isobench/serve.h"

/* The smallest capacity of a reply buffer; it doubles from there. */
#define BUF_MIN (1u * 1024u)

int isob_buf_reserve(struct isob_buf *b, size_t n)
{
    if (b->cap - b->len >= n)
        return 0;
    size_t cap = b->cap ? b->cap : BUF_MIN;
    while (cap - b->len < n)
        cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p)
        return -ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

void isob_buf_free(struct isob_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
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
    } else if (!s->restart_failing) {
        fprintf(stderr, "isob serve: the %s compartment %s; restarting it failed (%s), so "
                "requests fail until a restart works\n", m->name, s->comp_died, isob_strerror(rc));
        s->restart_failing = 1;
    }
}

/* Every call into the compartment goes through here. */
static long comp_call(struct isob_serve *s, unsigned entry)
{
    long r = isob_call(s->comp, entry);
    if (r == -EOWNERDEAD && isob_comp_why(s->comp))
        comp_replace(s);
    return r;
}

static long comp_set(struct isob_serve *s, size_t key_len, size_t value_len)
{
    s->msg->arg[0] = (int64_t)key_len;
    s->msg->arg[1] = (int64_t)value_len;
    s->msg->len = (uint32_t)(key_len + value_len);
    return comp_call(s, ISOB_ENTRY_KV_SET);
}

static long comp_get(struct isob_serve *s, size_t key_len)
{
    s->msg->arg[0] = (int64_t)key_len;
    s->msg->len = (uint32_t)key_len;
    return comp_call(s, ISOB_ENTRY_KV_GET);
}

static long comp_del(struct isob_serve *s, size_t key_len)
{
    s->msg->arg[0] = (int64_t)key_len;
    s->msg->len = (uint32_t)key_len;
    return comp_call(s, ISOB_ENTRY_KV_DELETE);
}

static long comp_flush(struct isob_serve *s)
{
    s->msg->len = 0;
    return comp_call(s, ISOB_ENTRY_KV_FLUSH);
}

static long comp_stats(struct isob_serve *s, struct isob_kv_stats *out)
{
    s->msg->len = 0;
    long r = comp_call(s, ISOB_ENTRY_KV_STATS);
    if (r < 0)
        return r;
    out->items = (uint64_t)s->msg->arg[0];
    out->bytes = (uint64_t)s->msg->arg[1];
    out->limit_bytes = (uint64_t)s->msg->arg[2];
    return 0;
}

const struct isob_serve_store isob_serve_store_comp = {
    .set = comp_set, .get = comp_get, .del = comp_del, .flush = comp_flush, .stats = comp_stats,
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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

int isob_serve_init(struct isob_serve *s, const struct isob_mechanism *m, size_t heap_size,
                    size_t max_value, int server_cpu)
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
    s->store = &isob_serve_store_comp;
    s->max_value = max_value;
    s->started_ns = now_ns();
    return 0;
}

void isob_serve_fini(struct isob_serve *s)
{
    if (s->comp)
        isob_comp_destroy(s->comp);
    s->comp = NULL;
}

static int reply(const struct isob_proto_cmd *cmd, struct isob_buf *out, const char *s, size_t n)
{
    return cmd->noreply ? 0 : put(out, s, n);
}

#define REPLY_LIT(cmd, out, s) reply((cmd), (out), (s), sizeof(s) - 1)

/* An error of the store, as a SERVER_ERROR line; a compartment that died
 * under the request says how ("SERVER_ERROR compartment died: signal 9
 * (Killed)"). */
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

static int exec_get(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out)
{
    const unsigned char *pos = cmd->keys, *key;
    size_t key_len;
    size_t cap = s->comp->data_cap;
    while (isob_proto_next_key(cmd, &pos, &key, &key_len)) {
        s->st.cmd_get++;
        put_key(s, key, key_len);
        long r = s->store->get(s, key_len);
        if (r == -ENOENT) {
            s->st.get_misses++;
            continue;
        }
        if (r >= 0 && (r < ISOB_SERVE_FLAGS_BYTES || (size_t)r > cap))
            r = -EPROTO;  /* not a value this server stored */
        if (r < 0)
            return reply_store_error(s, cmd, out, r);
        s->st.get_hits++;
        const unsigned char *v = s->msg->data;
        uint32_t flags = (uint32_t)v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 |
                         (uint32_t)v[3] << 24;
        size_t n = (size_t)r - ISOB_SERVE_FLAGS_BYTES;
        /* "VALUE " key ' ' flags ' ' bytes [' ' cas] "\r\n" data "\r\n" */
        if (isob_buf_reserve(out, 6 + key_len + 1 + 10 + 1 + 20 + 2 + 2 + n + 2) != 0)
            return -ENOMEM;
        unsigned char *p = out->p + out->len;
        memcpy(p, "VALUE ", 6);
        p += 6;
        memcpy(p, key, key_len);
        p += key_len;
        *p++ = ' ';
        p += put_u64(p, flags);
        *p++ = ' ';
        p += put_u64(p, n);
        if (cmd->op == ISOB_OP_GETS) {
            /* The store keeps no version, so there is no cas unique to
             * give; 0 says so (and cas itself is refused). */
            memcpy(p, " 0", 2);
            p += 2;
        }
        *p++ = '\r';
        *p++ = '\n';
        memcpy(p, v + ISOB_SERVE_FLAGS_BYTES, n);
        p += n;
        *p++ = '\r';
        *p++ = '\n';
        out->len = (size_t)(p - out->p);
    }
    return PUT_LIT(out, "END\r\n");
}

static int exec_store(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out)
{
    s->st.cmd_set++;
    if (cmd->key_len + ISOB_SERVE_FLAGS_BYTES + cmd->bytes > s->comp->data_cap)
        return REPLY_LIT(cmd, out, "SERVER_ERROR object too large for cache\r\n");
    if (cmd->op != ISOB_OP_SET) {
        /* The store only overwrites, so add and replace ask first; the
         * server runs one command at a time, so nothing can come between. */
        put_key(s, cmd->key, cmd->key_len);
        long r = s->store->get(s, cmd->key_len);
        if (r < 0 && r != -ENOENT)
            return reply_store_error(s, cmd, out, r);
        if ((cmd->op == ISOB_OP_ADD) == (r >= 0))
            return REPLY_LIT(cmd, out, "NOT_STORED\r\n");
    }
    unsigned char *d = s->msg->data;
    memcpy(d, cmd->key, cmd->key_len);
    d += cmd->key_len;
    d[0] = (unsigned char)cmd->flags;
    d[1] = (unsigned char)(cmd->flags >> 8);
    d[2] = (unsigned char)(cmd->flags >> 16);
    d[3] = (unsigned char)(cmd->flags >> 24);
    memcpy(d + ISOB_SERVE_FLAGS_BYTES, cmd->data, cmd->bytes);
    long r = s->store->set(s, cmd->key_len, ISOB_SERVE_FLAGS_BYTES + (size_t)cmd->bytes);
    if (r == 0) {
        s->st.total_items++;
        return REPLY_LIT(cmd, out, "STORED\r\n");
    }
    if (r == -ENOSPC) {
        /* Like memcached: a set that failed must not leave the old value
         * to be read as if the set had never been sent. */
        if (cmd->op == ISOB_OP_SET) {
            put_key(s, cmd->key, cmd->key_len);
            s->store->del(s, cmd->key_len);
        }
        return REPLY_LIT(cmd, out, "SERVER_ERROR out of memory storing object\r\n");
    }
    return reply_store_error(s, cmd, out, r);
}

static int exec_delete(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out)
{
    put_key(s, cmd->key, cmd->key_len);
    long r = s->store->del(s, cmd->key_len);
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
    struct isob_kv_stats kv = {0};
    long r = s->store->stats(s, &kv);
    if (r < 0) {
        struct isob_proto_cmd none = {0};
        return reply_store_error(s, &none, out, r);
    }
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    char line[160];
    int n = snprintf(line, sizeof line, "STAT version %s\r\nSTAT mechanism %s\r\n", ISOB_VERSION,
                     s->comp->mech->name);
    const struct isob_serve_stats *st = &s->st;
    const struct { const char *name; unsigned long long v; } lines[] = {
        {"pid", (unsigned long long)getpid()},
        {"uptime", (now_ns() - s->started_ns) / 1000000000ull},
        {"time", (unsigned long long)wall.tv_sec},
        {"pointer_size", sizeof(void *) * 8},
        {"threads", 1},
        {"curr_connections", st->curr_connections},
        {"total_connections", st->total_connections},
        {"rejected_connections", st->rejected_connections},
        {"cmd_get", st->cmd_get},
        {"cmd_set", st->cmd_set},
        {"cmd_flush", st->cmd_flush},
        {"get_hits", st->get_hits},
        {"get_misses", st->get_misses},
        {"delete_hits", st->delete_hits},
        {"delete_misses", st->delete_misses},
        {"bytes_read", st->bytes_read},
        {"bytes_written", st->bytes_written},
        {"limit_maxbytes", kv.limit_bytes},
        {"curr_items", kv.items},
        {"total_items", st->total_items},
        {"bytes", kv.bytes},
    };
    int rc = put(out, line, (size_t)n);
    for (size_t i = 0; rc == 0 && i < sizeof lines / sizeof lines[0]; i++)
        rc = stat_line(out, lines[i].name, lines[i].v);
    return rc ? rc : PUT_LIT(out, "END\r\n");
}

int isob_serve_exec(struct isob_serve *s, const struct isob_proto_cmd *cmd, struct isob_buf *out)
{
    int rc = 0;
    switch (cmd->op) {
    case ISOB_OP_NONE:
        break;
    case ISOB_OP_ERROR:
        if (cmd->unlink) {
            put_key(s, cmd->key, cmd->key_len);
            s->store->del(s, cmd->key_len);
        }
        rc = reply(cmd, out, cmd->reply, strlen(cmd->reply));
        if (rc == 0 && cmd->close)
            return ISOB_SERVE_CLOSE;
        break;
    case ISOB_OP_GET:
    case ISOB_OP_GETS:
        rc = exec_get(s, cmd, out);
        break;
    case ISOB_OP_SET:
    case ISOB_OP_ADD:
    case ISOB_OP_REPLACE:
        rc = exec_store(s, cmd, out);
        break;
    case ISOB_OP_DELETE:
        rc = exec_delete(s, cmd, out);
        break;
    case ISOB_OP_FLUSH_ALL: {
        s->st.cmd_flush++;
        long r = s->store->flush(s);
        rc = r < 0 ? reply_store_error(s, cmd, out, r) : REPLY_LIT(cmd, out, "OK\r\n");
        break;
    }
    case ISOB_OP_VERSION:
        rc = PUT_LIT(out, "VERSION " ISOB_VERSION "\r\n");
        break;
    case ISOB_OP_STATS:
        rc = exec_stats(s, out);
        break;
    case ISOB_OP_STATS_RESET: {
        /* The gauges (connections now open) stay; the counters restart. */
        uint64_t curr = s->st.curr_connections;
        memset(&s->st, 0, sizeof s->st);
        s->st.curr_connections = curr;
        rc = PUT_LIT(out, "RESET\r\n");
        break;
    }
    case ISOB_OP_VERBOSITY:
        rc = REPLY_LIT(cmd, out, "OK\r\n");
        break;
    case ISOB_OP_QUIT:
        return ISOB_SERVE_CLOSE;
    }
    return rc < 0 ? rc : ISOB_SERVE_CONTINUE;
}

size_t isob_serve_feed(struct isob_serve *s, struct isob_proto *p, const unsigned char *in,
                       size_t len, struct isob_buf *out, size_t out_limit, int *close,
                       size_t *need)
{
    size_t off = 0;
    *close = 0;
    *need = 0;
    while (off < len && out->len <= out_limit) {
        struct isob_proto_cmd cmd;
        if (isob_proto_parse(p, in + off, len - off, &cmd, need) == ISOB_PROTO_MORE)
            break;
        off += cmd.consumed;
        if (isob_serve_exec(s, &cmd, out) != ISOB_SERVE_CONTINUE) {
            *close = 1;
            break;
        }
    }
    return off;
}

