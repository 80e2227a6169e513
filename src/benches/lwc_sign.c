/* lwc-sign: signatures with the key in a light-weight context against
 * signatures in the caller's own process (lwC's key-isolation use case:
 * 10,000 TLS handshakes, 99.7 s native against 100.4 s with the private
 * key in an lwC; Litton et al., OSDI 2016).
 *
 * Ed25519 through the system's libcrypto, SIGN_COUNT signatures of
 * SIGN_MSG_BYTES-byte messages (a different message each), one sample per
 * signature:
 *   in-process  the caller signs with its own key
 *   lwc         the key lives only in a holder context, restricted
 *               (lwc_key.h); each signature is a switch there and back,
 *               message and signature in shared memory
 * Every signature is checked against the public key afterwards, outside
 * the timed region (params.verified).  lwc_restrict drops this process's
 * CAP_SYS_PTRACE, so in-process runs first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "isobench/bench.h"
#include "isobench/lwc_key.h"
#include "xclock.h"

#define SIGN_COUNT 10000
#define SIGN_MSG_BYTES 64

static void make_msg(unsigned char *m, size_t i)
{
    for (size_t j = 0; j < SIGN_MSG_BYTES; j++)
        m[j] = (unsigned char)(i * 131 + j * 7);
}

static void sign_emit(struct isob_xclock *x, const char *variant, const char *where, struct isob_samples *s,
                      size_t verified, const char *failure)
{
    char params[640];
    snprintf(params, sizeof params,
             "{\"variant\":\"%s\",\"algorithm\":\"Ed25519\",\"library\":\"libcrypto\",\"signatures\":%d,"
             "\"message_bytes\":%d,\"verified\":%zu,\"key_in\":\"%s\",\"timebase\":\"%s\"}",
             variant, SIGN_COUNT, SIGN_MSG_BYTES, verified, where, x->tsc ? "tsc" : "clock");
    char reason[160];
    if (!failure && verified != SIGN_COUNT) {
        snprintf(reason, sizeof reason, "%zu of %d signatures verify", verified, SIGN_COUNT);
        failure = reason;
    }
    isob_emit_result(&x->ctx, "lwc-sign", params, failure ? NULL : s, NULL, failure ? "failed" : "ok",
                     failure, NULL);
}

static int lwc_sign_run(struct isob_bench_ctx *ctx)
{
    struct isob_xclock x;
    int rc = isob_xclock_open(&x, ctx);
    if (rc)
        return rc;
    char why[160];
    if (isob_key_probe(why, sizeof why) != 0) {
        isob_emit_result(&x.ctx, "lwc-sign", "{}", NULL, NULL, "skipped", why, NULL);
        isob_xclock_close(&x, ctx);
        return 0;
    }
    struct isob_samples s;
    unsigned char *sigs = malloc((size_t)SIGN_COUNT * ISOB_SIG_BYTES);
    if (!sigs || isob_samples_alloc(&s, SIGN_COUNT, 1) != 0) {
        free(sigs);
        isob_xclock_close(&x, ctx);
        return -ENOMEM;
    }
    unsigned char msg[SIGN_MSG_BYTES];
    for (int variant = 0; variant < 2; variant++) {
        const char *name = variant ? "lwc" : "in-process";
        const char *where = variant ? "a restricted lwc context" : "this process";
        const char *failure = NULL;
        char reason[160];
        unsigned char pubkey[ISOB_PUB_BYTES];
        void *key = NULL;
        struct isob_keyholder k = {.h = -1};
        if (variant == 0) {
            key = isob_key_generate();
            if (!key)
                failure = "libcrypto could not make an Ed25519 key";
        } else {
            unsigned char raw[ISOB_KEY_BYTES];
            if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
                failure = "getrandom failed";
            } else if ((rc = isob_keyholder_open(&k, raw, 1)) != 0) {
                snprintf(reason, sizeof reason, "starting the key holder: %s", isob_strerror(rc));
                failure = reason;
            } else {
                memcpy(pubkey, k.pub, sizeof pubkey);
            }
        }
        s.n = 0;
        for (size_t i = 0; i < SIGN_COUNT && !failure; i++) {
            make_msg(msg, i);
            uint64_t t0 = isob_xclock_now(&x);
            rc = variant ? isob_keyholder_sign(&k, msg, sizeof msg, sigs + i * ISOB_SIG_BYTES)
                         : isob_key_sign(key, msg, sizeof msg, sigs + i * ISOB_SIG_BYTES);
            uint64_t t1 = isob_xclock_now(&x);
            if (rc) {
                snprintf(reason, sizeof reason, "signature %zu: %s", i, isob_strerror(rc));
                failure = reason;
            }
            s.v[s.n++] = t1 - t0;
        }
        /* The checks: in-process, the key object itself (a private key
         * carries its public half); for the holder, its public key. */
        void *pub = NULL;
        if (!failure)
            pub = variant ? isob_key_public(pubkey) : key;
        size_t verified = 0;
        for (size_t i = 0; i < SIGN_COUNT && pub && !failure; i++) {
            make_msg(msg, i);
            verified += isob_key_verify(pub, msg, sizeof msg, sigs + i * ISOB_SIG_BYTES) == 1;
        }
        sign_emit(&x, name, where, &s, verified, failure);
        if (pub && pub != key)
            isob_key_free(pub);
        if (key)
            isob_key_free(key);
        isob_keyholder_close(&k);
    }
    isob_samples_free(&s);
    free(sigs);
    isob_xclock_close(&x, ctx);
    return 0;
}

const struct isob_bench isob_bench_lwc_sign = {
    .name = "lwc-sign",
    .summary = "10,000 Ed25519 signatures with the key in a restricted lwc context vs in-process",
    .needs_mechanism = 0,
    .run = lwc_sign_run,
};
