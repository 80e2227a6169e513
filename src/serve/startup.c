/* The start-up of `isob serve` (serve.h): what the store holds before the
 * first client.  Every item goes in through isob_serve_exec, as a client's
 * set would, and must be answered STORED. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "isobench/loadgen.h"
#include "isobench/serve.h"
#include "../trusted/kv.h"

/* Bytes of the longest key start-up stores (loadgen's are 12). */
#define KEY_ROOM 32

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

size_t isob_serve_startup_heap(const struct isob_serve_startup *su)
{
    size_t items = su->startup_mb * ((1u << 20) / ISOB_SERVE_STARTUP_RECORD);
    size_t heap = 0;
    if (items)
        heap += isob_kv_heap_size(items, ISOB_SERVE_STARTUP_KEY_LEN,
                                  ISOB_SERVE_FLAGS_BYTES + ISOB_SERVE_STARTUP_VALUE);
    if (su->preload_keys)
        heap += isob_kv_heap_size(su->preload_keys, 12, ISOB_SERVE_FLAGS_BYTES + su->preload_value);
    return heap;
}

void isob_serve_startup_value(size_t i, unsigned char *v, size_t n)
{
    /* Letters, so that a value reads as text in a capture; the item number
     * in the pattern, so that no two items are alike. */
    for (size_t j = 0; j < n; j++)
        v[j] = (unsigned char)('a' + (i * 7 + j * 13 + (j >> 12)) % 26);
}

/* Store one item through the executor; 0 or a negative errno. */
static int store(struct isob_serve *s, struct isob_buf *out, const char *key, size_t key_len,
                 const unsigned char *value, size_t n)
{
    struct isob_proto_cmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.op = ISOB_OP_SET;
    cmd.key = (const unsigned char *)key;
    cmd.key_len = key_len;
    cmd.bytes = (uint32_t)n;
    cmd.data = value;
    size_t resume = 0;
    out->len = 0;
    int r = isob_serve_exec(s, &cmd, out, SIZE_MAX, &resume);
    if (r < 0)
        return r;
    if (out->len == 8 && memcmp(out->p, "STORED\r\n", 8) == 0)
        return 0;
    /* The reply says why: a full store, or a dead compartment. */
    return out->len > 12 && memcmp(out->p, "SERVER_ERROR out of memory", 26) == 0 ? -ENOSPC
                                                                               : -EPROTO;
}

int isob_serve_startup(struct isob_serve *s, const struct isob_serve_startup *su)
{
    uint64_t t0 = mono_ns();
    struct isob_buf out = {0};
    size_t room = ISOB_SERVE_STARTUP_VALUE > su->preload_value ? ISOB_SERVE_STARTUP_VALUE
                                                               : su->preload_value;
    size_t doc = su->doc_bytes ? su->doc_bytes : ISOB_HTTP_DOC_BYTES;
    if (room < doc + 1)
        room = doc + 1;
    unsigned char *value = malloc(room);
    int rc = value ? 0 : -ENOMEM;
    char key[KEY_ROOM];
    if (rc == 0 && s->http) {
        rc = isob_http_doc(doc, (char *)value) == 0 ? 0 : -EINVAL;
        if (rc == 0)
            rc = store(s, &out, "/", 1, value, doc);
    }
    for (size_t k = 0; rc == 0 && k < su->preload_keys; k++) {
        int kl = isob_lg_key(k, key, sizeof key);
        isob_lg_value(k, (char *)value, su->preload_value);
        rc = store(s, &out, key, (size_t)kl, value, su->preload_value);
        if (rc == 0)
            s->preloaded++;
    }
    size_t items = su->startup_mb * ((1u << 20) / ISOB_SERVE_STARTUP_RECORD);
    for (size_t i = 0; rc == 0 && i < items; i++) {
        int kl = snprintf(key, sizeof key, ISOB_SERVE_STARTUP_KEY, i);
        isob_serve_startup_value(i, value, ISOB_SERVE_STARTUP_VALUE);
        rc = store(s, &out, key, (size_t)kl, value, ISOB_SERVE_STARTUP_VALUE);
        if (rc == 0)
            s->startup_items++;
    }
    free(value);
    isob_buf_free(&out);
    /* What start-up did is no client's: the counters start at zero. */
    memset(&s->st, 0, sizeof s->st);
    s->startup_ns = mono_ns() - t0;
    return rc;
}
