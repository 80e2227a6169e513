/* The memcached text protocol parser (see include/isobench/proto.h).
 *
 * It follows memcached's own behaviour where clients can observe it: tokens
 * are separated by runs of spaces, a line ends at "\n" with an optional
 * "\r" before it, a data block is read as exactly <bytes> + 2 bytes and
 * must end in "\r\n", and a value that is too large is refused with its
 * data skipped, so that the stream stays in step with the client. */
#include <string.h>

#include "isobench/proto.h"

/* A command line has at most this many tokens, as in memcached (the meta
 * commands take many flags), get and gets excepted: their keys are walked,
 * not tokenized. */
#define MAX_TOKENS 24

/* Bytes may not exceed this, as in memcached (it reads them into an int
 * and adds 2 for the "\r\n"). */
#define MAX_BYTES_FIELD 2147483645u

/* The replies the parser produces; each is one full line. */
static const char R_ERROR[] = "ERROR\r\n";
static const char R_FORMAT[] = "CLIENT_ERROR bad command line format\r\n";
static const char R_DELETE_USAGE[] =
    "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n";
static const char R_TOO_LARGE[] = "SERVER_ERROR object too large for cache\r\n";
static const char R_BAD_CHUNK[] = "CLIENT_ERROR bad data chunk\r\n";
static const char R_LINE_TOO_LONG[] = "CLIENT_ERROR line too long\r\n";
static const char R_FLUSH_DELAY[] = "CLIENT_ERROR delayed flush_all not supported\r\n";
static const char R_BAD_EXPTIME[] = "CLIENT_ERROR invalid exptime argument\r\n";
static const char R_NO_MEMORY[] = "SERVER_ERROR out of memory storing object\r\n";
static const char R_BAD_DELTA[] = "CLIENT_ERROR invalid numeric delta argument\r\n";
static const char R_BAD_TOKEN[] = "CLIENT_ERROR bad token in command line format\r\n";
static const char R_BAD_FLAG[] = "CLIENT_ERROR invalid flag\r\n";
static const char R_DUP_FLAG[] = "CLIENT_ERROR duplicate flag\r\n";
static const char R_MD_FLAG[] = "CLIENT_ERROR invalid or duplicate flag\r\n";
static const char R_BAD_MODE[] = "CLIENT_ERROR invalid mode for ms M token\r\n";
static const char R_OPAQUE_LONG[] = "CLIENT_ERROR opaque token too long\r\n";
static const char R_CAS_MODE[] =
    "CLIENT_ERROR ms C is supported in set mode (MS) only\r\n";
/* The reply to a binary-protocol request: one response header of that
 * protocol (magic 0x81, status 0x0083 "not supported", a body of the
 * message's length), so that a binary client reads a clean error, and the
 * message as its body, for a person reading the bytes. */
#define BINARY_TEXT "isob serve speaks the memcached text protocol only"
static const char R_BINARY[] = "\x81\x00\x00\x00\x00\x00\x00\x83"
                               "\x00\x00\x00\x32\x00\x00\x00\x00"
                               "\x00\x00\x00\x00\x00\x00\x00\x00" BINARY_TEXT;
_Static_assert(sizeof(BINARY_TEXT) - 1 == 0x32, "the header's body length is the message's");

struct tok {
    const unsigned char *p;
    size_t n;
};

void isob_proto_init(struct isob_proto *p, size_t max_value)
{
    p->max_value = max_value;
    p->swallow = 0;
    p->refuse = 0;
    p->scanned = 0;
}

static int tok_is(const struct tok *t, const char *s)
{
    size_t n = strlen(s);
    return t->n == n && memcmp(t->p, s, n) == 0;
}

/* Splits s[0..n) at runs of spaces.  Returns the number of tokens, or
 * MAX_TOKENS + 1 when there are more than MAX_TOKENS. */
static size_t tokenize(const unsigned char *s, size_t n, struct tok *t)
{
    size_t nt = 0, i = 0;
    while (i < n) {
        while (i < n && s[i] == ' ')
            i++;
        if (i == n)
            break;
        size_t start = i;
        while (i < n && s[i] != ' ')
            i++;
        if (nt == MAX_TOKENS)
            return MAX_TOKENS + 1;
        t[nt].p = s + start;
        t[nt].n = i - start;
        nt++;
    }
    return nt;
}

/* A key is 1 to 250 bytes with no whitespace and no NUL (spaces never
 * reach here: they separate tokens).  Other control bytes are allowed, as
 * memcached allows them: memaslap, the usual load generator, puts bytes
 * 0x10..0x1f in every key.  Bytes >= 0x80 are allowed too, for UTF-8. */
static int key_ok(const unsigned char *k, size_t n)
{
    if (n == 0 || n > ISOB_PROTO_KEY_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (k[i] == 0 || (k[i] >= '\t' && k[i] <= '\r'))
            return 0;
    return 1;
}

/* Decimal digits only (no sign, no spaces), at most max.  0 or -1. */
static int parse_u64(const struct tok *t, uint64_t max, uint64_t *out)
{
    if (t->n == 0 || t->n > 20)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < t->n; i++) {
        unsigned d = (unsigned)t->p[i] - '0';
        if (d > 9 || v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

/* An exptime: a 32-bit signed number, as memcached reads it. */
static int parse_exptime(const struct tok *t, int64_t *out)
{
    struct tok digits = *t;
    int neg = t->n > 0 && t->p[0] == '-';
    if (neg) {
        digits.p++;
        digits.n--;
    }
    uint64_t v;
    if (parse_u64(&digits, neg ? 2147483648u : 2147483647u, &v) != 0)
        return -1;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

static int error(struct isob_proto_cmd *cmd, const char *reply, size_t consumed)
{
    cmd->op = ISOB_OP_ERROR;
    cmd->reply = reply;
    cmd->consumed = consumed;
    return ISOB_PROTO_CMD;
}

/* Skips leading spaces; 1 if the line then starts with "get ", "gets ",
 * "gat " or "gats ".  Only these may be longer than ISOB_PROTO_LINE_MAX. */
static int is_get_line(const unsigned char *in, size_t len)
{
    size_t i = 0;
    while (i < len && in[i] == ' ')
        i++;
    in += i;
    len -= i;
    return (len >= 4 && (memcmp(in, "get ", 4) == 0 || memcmp(in, "gat ", 4) == 0)) ||
           (len >= 5 && (memcmp(in, "gets ", 5) == 0 || memcmp(in, "gats ", 5) == 0));
}

/* set, add, replace, append, prepend, cas:
 *   <cmd> <key> <flags> <exptime> <bytes> [<cas unique>] [noreply]\r\n<data>\r\n
 * (append and prepend read flags and exptime, and keep the item's own, as
 * memcached does).
 * A token after the last number other than "noreply" is ignored, as
 * memcached ignores it; any other count of tokens is an unknown command. */
static int parse_storage(struct isob_proto *p, struct isob_proto_cmd *cmd, enum isob_proto_op op,
                         const struct tok *t, size_t nt, const unsigned char *in,
                         size_t len, size_t line_total, size_t *need)
{
    size_t base = op == ISOB_OP_CAS ? 6 : 5;
    if (nt != base && nt != base + 1)
        return error(cmd, R_ERROR, line_total);
    cmd->noreply = nt == base + 1 && tok_is(&t[base], "noreply");
    uint64_t flags, bytes, cas = 0;
    int64_t exptime;
    int ok = key_ok(t[1].p, t[1].n) && parse_u64(&t[2], UINT32_MAX, &flags) == 0 &&
             parse_exptime(&t[3], &exptime) == 0 &&
             parse_u64(&t[4], MAX_BYTES_FIELD, &bytes) == 0 &&
             (op != ISOB_OP_CAS || parse_u64(&t[5], UINT64_MAX, &cas) == 0);
    if (!ok) {
        /* noreply cannot be trusted on a line that does not parse, so
         * the error is always sent (memcached's protocol.txt allows it). */
        cmd->noreply = 0;
        return error(cmd, R_FORMAT, line_total);
    }
    cmd->key = t[1].p;
    cmd->key_len = t[1].n;
    cmd->flags = (uint32_t)flags;
    cmd->exptime = exptime;
    cmd->bytes = (uint32_t)bytes;
    cmd->cas = cas;
    if (bytes > p->max_value || p->refuse) {
        /* The data may be far larger than any buffer: skip it as it
         * arrives instead of waiting for all of it.  A set that is refused
         * must not leave the old value to be read, as in memcached. */
        p->swallow = bytes + 2;
        cmd->unlink = op == ISOB_OP_SET;
        int no_memory = bytes <= p->max_value;
        p->refuse = 0;
        cmd->refused = no_memory ? ISOB_PROTO_NO_MEMORY : ISOB_PROTO_TOO_LARGE;
        return error(cmd, no_memory ? R_NO_MEMORY : R_TOO_LARGE, line_total);
    }
    size_t total = line_total + (size_t)bytes + 2;
    if (len < total) {
        *need = total;
        return ISOB_PROTO_MORE;
    }
    const unsigned char *data = in + line_total;
    if (data[bytes] != '\r' || data[bytes + 1] != '\n')
        return error(cmd, R_BAD_CHUNK, total);
    cmd->op = op;
    cmd->data = data;
    cmd->consumed = total;
    return ISOB_PROTO_CMD;
}

/* get|gets <key>+ and gat|gats <exptime> <key>+: every key is checked
 * here, so that a bad key fails the whole command before any value has
 * been sent.  rest..end is the line after the command's name. */
static int parse_get(struct isob_proto_cmd *cmd, enum isob_proto_op op, const unsigned char *rest,
                     const unsigned char *end, size_t line_total)
{
    while (rest < end && *rest == ' ')
        rest++;
    while (end > rest && end[-1] == ' ')
        end--;
    if (rest == end)
        return error(cmd, R_ERROR, line_total);  /* no argument at all, as memcached */
    if (op == ISOB_OP_GAT || op == ISOB_OP_GATS) {
        const unsigned char *e = rest;
        while (e < end && *e != ' ')
            e++;
        struct tok t = {rest, (size_t)(e - rest)};
        if (parse_exptime(&t, &cmd->exptime) != 0)
            return error(cmd, R_BAD_EXPTIME, line_total);
        rest = e;
        while (rest < end && *rest == ' ')
            rest++;
    }
    cmd->keys = rest;
    cmd->keys_len = (size_t)(end - rest);
    const unsigned char *pos = rest, *k;
    size_t kn;
    int first = 1;
    while (isob_proto_next_key(cmd, &pos, &k, &kn)) {
        if (!key_ok(k, kn))
            return error(cmd, R_FORMAT, line_total);
        if (first) {
            cmd->key = k;
            cmd->key_len = kn;
            first = 0;
        }
    }
    cmd->op = op;
    cmd->consumed = line_total;
    return ISOB_PROTO_CMD;
}

int isob_proto_next_key(const struct isob_proto_cmd *cmd, const unsigned char **pos,
                        const unsigned char **key, size_t *key_len)
{
    const unsigned char *p = *pos, *end = cmd->keys + cmd->keys_len;
    while (p < end && *p == ' ')
        p++;
    if (p == end)
        return 0;
    const unsigned char *start = p;
    while (p < end && *p != ' ')
        p++;
    *key = start;
    *key_len = (size_t)(p - start);
    *pos = p;
    return 1;
}

/* delete <key> [0] [noreply] */
static int parse_delete(struct isob_proto_cmd *cmd, const struct tok *t, size_t nt,
                        size_t line_total)
{
    if (nt < 2 || nt > 4)
        return error(cmd, R_ERROR, line_total);
    if (nt > 2) {
        int zero = tok_is(&t[2], "0");
        int noreply = tok_is(&t[nt - 1], "noreply");
        int valid = (nt == 3 && (zero || noreply)) || (nt == 4 && zero && noreply);
        if (!valid)
            return error(cmd, R_DELETE_USAGE, line_total);
        cmd->noreply = noreply;
    }
    if (!key_ok(t[1].p, t[1].n)) {
        cmd->noreply = 0;
        return error(cmd, R_FORMAT, line_total);
    }
    cmd->op = ISOB_OP_DELETE;
    cmd->key = t[1].p;
    cmd->key_len = t[1].n;
    cmd->consumed = line_total;
    return ISOB_PROTO_CMD;
}

/* flush_all [delay] [noreply]: only an immediate flush is offered; a
 * delay is refused rather than ignored. */
static int parse_flush(struct isob_proto_cmd *cmd, const struct tok *t, size_t nt,
                       size_t line_total)
{
    if (nt > 3)
        return error(cmd, R_ERROR, line_total);
    int noreply = nt > 1 && tok_is(&t[nt - 1], "noreply");
    size_t args = nt - 1 - (size_t)noreply;
    if (args > 1)
        return error(cmd, R_FORMAT, line_total);
    if (args == 1) {
        int64_t delay;
        if (parse_exptime(&t[1], &delay) != 0)
            return error(cmd, R_BAD_EXPTIME, line_total);
        if (delay != 0) {
            cmd->noreply = noreply;
            return error(cmd, R_FLUSH_DELAY, line_total);
        }
    }
    cmd->noreply = noreply;
    cmd->op = ISOB_OP_FLUSH_ALL;
    cmd->consumed = line_total;
    return ISOB_PROTO_CMD;
}

/* verbosity <level> [noreply]: accepted for clients that send it; the
 * server has no log to make more verbose.  As memcached: a last token
 * "noreply" silences the reply whatever else the line holds, a token after
 * the level is ignored, and a level that is not a number is refused. */
static int parse_verbosity(struct isob_proto_cmd *cmd, const struct tok *t, size_t nt,
                           size_t line_total)
{
    uint64_t level;
    if (nt < 2 || nt > 3)
        return error(cmd, R_ERROR, line_total);
    cmd->noreply = tok_is(&t[nt - 1], "noreply");
    if (parse_u64(&t[1], UINT32_MAX, &level) != 0)
        return error(cmd, R_FORMAT, line_total);
    cmd->op = ISOB_OP_VERBOSITY;
    cmd->consumed = line_total;
    return ISOB_PROTO_CMD;
}

/* A number as memcached reads a delta (strtoull): an optional sign, then
 * decimal digits, no overflow; "-" only where the negated number stays
 * below 2^63 (so "-0" is 0 and "-1" is refused). */
static int parse_delta(const struct tok *t, uint64_t *out)
{
    struct tok digits = *t;
    int neg = 0;
    if (t->n > 0 && (t->p[0] == '+' || t->p[0] == '-')) {
        neg = t->p[0] == '-';
        digits.p++;
        digits.n--;
    }
    uint64_t v;
    if (parse_u64(&digits, UINT64_MAX, &v) != 0)
        return -1;
    if (neg) {
        v = 0 - v;
        if (v >> 63)
            return -1;
    }
    *out = v;
    return 0;
}

/* incr|decr <key> <delta> [noreply]: a token other than "noreply" after
 * the delta is ignored, as memcached does. */
static int parse_arith(struct isob_proto_cmd *cmd, enum isob_proto_op op, const struct tok *t,
                       size_t nt, size_t line_total)
{
    if (nt != 3 && nt != 4)
        return error(cmd, R_ERROR, line_total);
    cmd->noreply = nt == 4 && tok_is(&t[3], "noreply");
    if (!key_ok(t[1].p, t[1].n)) {
        cmd->noreply = 0;
        return error(cmd, R_FORMAT, line_total);
    }
    if (parse_delta(&t[2], &cmd->delta) != 0)
        return error(cmd, R_BAD_DELTA, line_total);
    cmd->op = op;
    cmd->key = t[1].p;
    cmd->key_len = t[1].n;
    cmd->consumed = line_total;
    return ISOB_PROTO_CMD;
}

/* The flags of a meta command, t[0..nt): each token is one flag letter and
 * its argument.  `allowed` lists the letters this command takes; the return
 * flags among them go to meta->ret in order.  0, or the reply to refuse the
 * command with. */
static const char *meta_flags(struct isob_proto_cmd *cmd, const struct tok *t, size_t nt,
                              const char *allowed, const char *returned)
{
    struct isob_proto_meta *m = &cmd->meta;
    unsigned seen = 0;
    for (size_t i = 0; i < nt; i++) {
        unsigned char f = t[i].p[0];
        const char *at = strchr(allowed, f);
        if (f == 0 || !at)
            return R_BAD_FLAG;
        unsigned bit = 1u << (at - allowed);
        if (seen & bit)
            return R_DUP_FLAG;
        seen |= bit;
        struct tok arg = {t[i].p + 1, t[i].n - 1};
        uint64_t u;
        switch (f) {
        case 'v':
            m->value = 1;
            break;
        case 'q':
            m->quiet = 1;
            break;
        case 'O':
            if (t[i].n > ISOB_PROTO_OPAQUE_MAX)
                return R_OPAQUE_LONG;
            m->opaque = arg.p;
            m->opaque_len = arg.n;
            break;
        case 'T':
            if (parse_exptime(&arg, &cmd->exptime) != 0)
                return R_BAD_TOKEN;
            m->touch = 1;
            break;
        case 'C':
            if (parse_u64(&arg, UINT64_MAX, &cmd->cas) != 0)
                return R_BAD_TOKEN;
            m->has_cas = 1;
            break;
        case 'F':
            if (parse_u64(&arg, UINT32_MAX, &u) != 0)
                return R_FORMAT;
            cmd->flags = (uint32_t)u;
            break;
        case 'M':
            if (arg.n != 1 || !strchr("SEAPR", arg.p[0]) || arg.p[0] == 0)
                return R_BAD_MODE;
            m->mode = (char)arg.p[0];
            break;
        default:
            break;
        }
        if (strchr(returned, f))
            m->ret[m->nret++] = f;
    }
    return 0;
}

/* mg <key> <flags>*, md <key> <flags>*, ms <key> <datalen> <flags>*\r\n<data>\r\n
 * and mn.  Replies follow memcached 1.6 (HD, VA, EN, NS, EX, NF, MN). */
static int parse_meta(struct isob_proto *p, struct isob_proto_cmd *cmd, enum isob_proto_op op,
                      const struct tok *t, size_t nt, const unsigned char *in, size_t len,
                      size_t line_total, size_t *need)
{
    if (op == ISOB_OP_MN) {
        cmd->op = op;
        cmd->consumed = line_total;
        return ISOB_PROTO_CMD;
    }
    if (nt < 2)
        return error(cmd, R_ERROR, line_total);
    if (op == ISOB_OP_MS && nt < 3)
        return error(cmd, R_FORMAT, line_total);
    if (!key_ok(t[1].p, t[1].n))
        return error(cmd, R_FORMAT, line_total);
    cmd->key = t[1].p;
    cmd->key_len = t[1].n;
    const char *bad;
    if (op == ISOB_OP_MG) {
        bad = meta_flags(cmd, t + 2, nt - 2, "vfctksqOT", "fctksO");
    } else if (op == ISOB_OP_MD) {
        /* md words every flag error alike, as memcached. */
        bad = meta_flags(cmd, t + 2, nt - 2, "qCkO", "kO");
        if (bad && bad != R_OPAQUE_LONG)
            bad = R_MD_FLAG;
    } else {
        uint64_t bytes;
        if (parse_u64(&t[2], MAX_BYTES_FIELD, &bytes) != 0)
            return error(cmd, R_FORMAT, line_total);
        cmd->meta.mode = 'S';
        bad = meta_flags(cmd, t + 3, nt - 3, "FTCMqkcO", "ckO");
        if (!bad && cmd->meta.has_cas && cmd->meta.mode != 'S')
            bad = R_CAS_MODE;
        cmd->bytes = (uint32_t)bytes;
        if (!bad && (bytes > p->max_value || p->refuse)) {
            int no_memory = bytes <= p->max_value;
            p->refuse = 0;
            cmd->refused = no_memory ? ISOB_PROTO_NO_MEMORY : ISOB_PROTO_TOO_LARGE;
            bad = no_memory ? R_NO_MEMORY : R_TOO_LARGE;
        }
        if (bad) {
            /* The data is skipped as it arrives, as memcached skips it. */
            p->swallow = bytes + 2;
            cmd->meta.quiet = 0;
            return error(cmd, bad, line_total);
        }
        size_t total = line_total + (size_t)bytes + 2;
        if (len < total) {
            *need = total;
            return ISOB_PROTO_MORE;
        }
        const unsigned char *data = in + line_total;
        if (data[bytes] != '\r' || data[bytes + 1] != '\n')
            return error(cmd, R_BAD_CHUNK, total);
        cmd->data = data;
        cmd->op = op;
        cmd->consumed = total;
        return ISOB_PROTO_CMD;
    }
    if (bad)
        return error(cmd, bad, line_total);
    cmd->op = op;
    cmd->consumed = line_total;
    return ISOB_PROTO_CMD;
}

/* touch <key> <exptime> [noreply] */
static int parse_touch(struct isob_proto_cmd *cmd, const struct tok *t, size_t nt,
                       size_t line_total)
{
    if (nt != 3 && nt != 4)
        return error(cmd, R_ERROR, line_total);
    cmd->noreply = nt == 4 && tok_is(&t[3], "noreply");
    if (!key_ok(t[1].p, t[1].n)) {
        cmd->noreply = 0;
        return error(cmd, R_FORMAT, line_total);
    }
    if (parse_exptime(&t[2], &cmd->exptime) != 0) {
        cmd->noreply = 0;
        return error(cmd, R_BAD_EXPTIME, line_total);
    }
    cmd->op = ISOB_OP_TOUCH;
    cmd->key = t[1].p;
    cmd->key_len = t[1].n;
    cmd->consumed = line_total;
    return ISOB_PROTO_CMD;
}

/* version, quit, stats: extra tokens are ignored, as memcached does. */
static int simple(struct isob_proto_cmd *cmd, enum isob_proto_op op, size_t line_total)
{
    cmd->op = op;
    cmd->consumed = line_total;
    return ISOB_PROTO_CMD;
}

int isob_proto_parse(struct isob_proto *p, const unsigned char *in, size_t len,
                     struct isob_proto_cmd *cmd, size_t *need)
{
    memset(cmd, 0, sizeof *cmd);
    *need = 0;
    if (len == 0)
        return ISOB_PROTO_MORE;
    if (p->swallow) {
        size_t n = len < p->swallow ? len : (size_t)p->swallow;
        p->swallow -= n;
        cmd->op = ISOB_OP_NONE;
        cmd->consumed = n;
        return ISOB_PROTO_CMD;
    }

    /* A binary-protocol request: refused at once, without waiting for the
     * rest of its header, and the connection closed (its bytes cannot be
     * skipped without speaking that protocol). */
    if (in[0] == 0x80) {
        cmd->close = 1;
        cmd->reply_len = sizeof R_BINARY - 1;
        return error(cmd, R_BINARY, len);
    }

    /* The line: the limits are checked the same way whether the line came
     * whole or byte by byte, so the outcome never depends on chunking.
     * Bytes already searched for its end are not searched again, so that a
     * line sent a byte at a time costs its length, not its square. */
    size_t scan = len < ISOB_PROTO_GET_LINE_MAX ? len : ISOB_PROTO_GET_LINE_MAX;
    size_t from = p->scanned <= scan ? p->scanned : 0;
    const unsigned char *nl = memchr(in + from, '\n', scan - from);
    if (!nl) {
        if (len >= ISOB_PROTO_GET_LINE_MAX ||
            (len > ISOB_PROTO_LINE_MAX && !is_get_line(in, len))) {
            p->scanned = 0;
            cmd->close = 1;
            return error(cmd, R_LINE_TOO_LONG, len);
        }
        p->scanned = scan;
        return ISOB_PROTO_MORE;
    }
    p->scanned = 0;
    size_t line_len = (size_t)(nl - in), line_total = line_len + 1;
    if (line_len > ISOB_PROTO_LINE_MAX && !is_get_line(in, line_len)) {
        cmd->close = 1;
        return error(cmd, R_LINE_TOO_LONG, line_total);
    }
    const unsigned char *end = nl;
    if (end > in && end[-1] == '\r')
        end--;

    /* The command name decides how the rest is read. */
    const unsigned char *s = in;
    while (s < end && *s == ' ')
        s++;
    const unsigned char *name = s;
    while (s < end && *s != ' ')
        s++;
    struct tok cmdname = {name, (size_t)(s - name)};
    if (tok_is(&cmdname, "get"))
        return parse_get(cmd, ISOB_OP_GET, s, end, line_total);
    if (tok_is(&cmdname, "gets"))
        return parse_get(cmd, ISOB_OP_GETS, s, end, line_total);
    if (tok_is(&cmdname, "gat"))
        return parse_get(cmd, ISOB_OP_GAT, s, end, line_total);
    if (tok_is(&cmdname, "gats"))
        return parse_get(cmd, ISOB_OP_GATS, s, end, line_total);

    struct tok t[MAX_TOKENS];
    size_t nt = tokenize(in, (size_t)(end - in), t);
    if (nt == 0)
        return error(cmd, R_ERROR, line_total);
    if (nt > MAX_TOKENS)
        return error(cmd, R_ERROR, line_total);  /* more than any command takes, as memcached says */

    switch (cmdname.n) {
    case 2:
        if (tok_is(&cmdname, "mg"))
            return parse_meta(p, cmd, ISOB_OP_MG, t, nt, in, len, line_total, need);
        if (tok_is(&cmdname, "ms"))
            return parse_meta(p, cmd, ISOB_OP_MS, t, nt, in, len, line_total, need);
        if (tok_is(&cmdname, "md"))
            return parse_meta(p, cmd, ISOB_OP_MD, t, nt, in, len, line_total, need);
        if (tok_is(&cmdname, "mn"))
            return parse_meta(p, cmd, ISOB_OP_MN, t, nt, in, len, line_total, need);
        break;
    case 3:
        if (tok_is(&cmdname, "set"))
            return parse_storage(p, cmd, ISOB_OP_SET, t, nt, in, len, line_total, need);
        if (tok_is(&cmdname, "add"))
            return parse_storage(p, cmd, ISOB_OP_ADD, t, nt, in, len, line_total, need);
        if (tok_is(&cmdname, "cas"))
            return parse_storage(p, cmd, ISOB_OP_CAS, t, nt, in, len, line_total, need);
        break;
    case 4:
        if (tok_is(&cmdname, "quit"))
            return simple(cmd, ISOB_OP_QUIT, line_total);
        if (tok_is(&cmdname, "incr"))
            return parse_arith(cmd, ISOB_OP_INCR, t, nt, line_total);
        if (tok_is(&cmdname, "decr"))
            return parse_arith(cmd, ISOB_OP_DECR, t, nt, line_total);
        break;
    case 5:
        if (tok_is(&cmdname, "stats")) {
            if (nt == 1)
                return simple(cmd, ISOB_OP_STATS, line_total);
            if (nt == 2 && tok_is(&t[1], "reset"))
                return simple(cmd, ISOB_OP_STATS_RESET, line_total);
            /* Like memcached for a statistics group it does not have. */
            return error(cmd, R_ERROR, line_total);
        }
        if (tok_is(&cmdname, "touch"))
            return parse_touch(cmd, t, nt, line_total);
        break;
    case 6:
        if (tok_is(&cmdname, "delete"))
            return parse_delete(cmd, t, nt, line_total);
        if (tok_is(&cmdname, "append"))
            return parse_storage(p, cmd, ISOB_OP_APPEND, t, nt, in, len, line_total, need);
        break;
    case 7:
        if (tok_is(&cmdname, "replace"))
            return parse_storage(p, cmd, ISOB_OP_REPLACE, t, nt, in, len, line_total, need);
        if (tok_is(&cmdname, "version"))
            return simple(cmd, ISOB_OP_VERSION, line_total);
        if (tok_is(&cmdname, "prepend"))
            return parse_storage(p, cmd, ISOB_OP_PREPEND, t, nt, in, len, line_total, need);
        break;
    case 9:
        if (tok_is(&cmdname, "flush_all"))
            return parse_flush(cmd, t, nt, line_total);
        if (tok_is(&cmdname, "verbosity"))
            return parse_verbosity(cmd, t, nt, line_total);
        break;
    }
    /* Everything else is a command this server does not have: memcached's
     * reply for those. */
    return error(cmd, R_ERROR, line_total);
}
