/* An Ed25519 key held in a light-weight context (include/isobench/lwc_key.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "isobench/lwc.h"
#include "isobench/lwc_key.h"

#ifdef ISOB_HAVE_LIBCRYPTO
#include <openssl/evp.h>
#endif

/* What caller and holder share. */
struct isob_key_page {
    uint32_t len;
    unsigned char pub[ISOB_PUB_BYTES];
    unsigned char sig[ISOB_SIG_BYTES];
    unsigned char msg[ISOB_KEY_MSG_MAX];
};

int isob_key_probe(char *why, size_t len)
{
#ifdef ISOB_HAVE_LIBCRYPTO
    (void)why;
    (void)len;
    return 0;
#else
    snprintf(why, len, "built without libcrypto (install libssl-dev and rebuild)");
    return -ENOTSUP;
#endif
}

#ifdef ISOB_HAVE_LIBCRYPTO

void *isob_key_new(const unsigned char key[ISOB_KEY_BYTES])
{
    return EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, key, ISOB_KEY_BYTES);
}

void *isob_key_generate(void)
{
    EVP_PKEY *pk = NULL;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
    if (c && EVP_PKEY_keygen_init(c) == 1 && EVP_PKEY_keygen(c, &pk) != 1)
        pk = NULL;
    EVP_PKEY_CTX_free(c);
    return pk;
}

void *isob_key_public(const unsigned char pub[ISOB_PUB_BYTES])
{
    return EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, ISOB_PUB_BYTES);
}

int isob_key_sign(void *key, const void *msg, size_t len, unsigned char sig[ISOB_SIG_BYTES])
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    size_t sl = ISOB_SIG_BYTES;
    /* Ed25519 signs in one shot, with no separate digest. */
    int ok = c && EVP_DigestSignInit(c, NULL, NULL, NULL, key) == 1 &&
             EVP_DigestSign(c, sig, &sl, msg, len) == 1 && sl == ISOB_SIG_BYTES;
    EVP_MD_CTX_free(c);
    return ok ? 0 : -EINVAL;
}

int isob_key_verify(void *pub, const void *msg, size_t len, const unsigned char sig[ISOB_SIG_BYTES])
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    int ok = c && EVP_DigestVerifyInit(c, NULL, NULL, NULL, pub) == 1 &&
             EVP_DigestVerify(c, sig, ISOB_SIG_BYTES, msg, len) == 1;
    EVP_MD_CTX_free(c);
    return ok;
}

void isob_key_free(void *key)
{
    EVP_PKEY_free(key);
}

static int public_of(void *key, unsigned char pub[ISOB_PUB_BYTES])
{
    size_t pl = ISOB_PUB_BYTES;
    return EVP_PKEY_get_raw_public_key(key, pub, &pl) == 1 && pl == ISOB_PUB_BYTES ? 0 : -EINVAL;
}

#else

void *isob_key_new(const unsigned char key[ISOB_KEY_BYTES]) { (void)key; return NULL; }
void *isob_key_generate(void) { return NULL; }
void *isob_key_public(const unsigned char pub[ISOB_PUB_BYTES]) { (void)pub; return NULL; }
int isob_key_sign(void *key, const void *msg, size_t len, unsigned char sig[ISOB_SIG_BYTES])
{
    (void)key; (void)msg; (void)len; (void)sig;
    return -ENOTSUP;
}
int isob_key_verify(void *pub, const void *msg, size_t len, const unsigned char sig[ISOB_SIG_BYTES])
{
    (void)pub; (void)msg; (void)len; (void)sig;
    return 0;
}
void isob_key_free(void *key) { (void)key; }
static int public_of(void *key, unsigned char pub[ISOB_PUB_BYTES])
{
    (void)key; (void)pub;
    return -ENOTSUP;
}

#endif

/* The holder: load the key, wipe the raw copy, publish the public key,
 * then sign whatever comes, for ever. */
static __attribute__((noreturn)) void holder_main(int caller, unsigned char *key, struct isob_key_page *pg)
{
    void *pk = isob_key_new(key);
    explicit_bzero(key, ISOB_KEY_BYTES);
    int rc = pk ? public_of(pk, pg->pub) : -EINVAL;
    struct lwc_msg out = {{(uint64_t)(int64_t)rc}};
    for (;;) {
        lwc_switch(caller, &out, NULL, NULL);
        uint32_t len = pg->len;
        rc = !pk ? -EINVAL : len > ISOB_KEY_MSG_MAX ? -EMSGSIZE : isob_key_sign(pk, pg->msg, len, pg->sig);
        out.w[0] = (uint64_t)(int64_t)rc;
    }
}

int isob_keyholder_open(struct isob_keyholder *k, unsigned char key[ISOB_KEY_BYTES], int restrict_it)
{
    memset(k, 0, sizeof *k);
    k->h = -1;
    char why[128];
    int rc = isob_key_probe(why, sizeof why);
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    k->page_len = (sizeof *k->page + ps - 1) & ~(ps - 1);
    if (rc == 0 && !(k->page = lwc_alloc_shared(k->page_len)))
        rc = errno ? -errno : -ENOMEM;
    if (rc) {
        explicit_bzero(key, ISOB_KEY_BYTES);
        return rc;
    }
    struct lwc_spec sp[2] = {
        {.res = LWC_RES_VM, .how = LWC_SHARED, .vm = {k->page, k->page_len}},
        /* The holder needs no descriptor of the caller's. */
        {.res = LWC_RES_FD, .how = LWC_UNMAP, .fd = {3, INT_MAX}},
    };
    int caller;
    int h = lwc_create(sp, 2, 0, &caller, NULL);
    if (h == LWC_SWITCHED)
        holder_main(caller, key, k->page);
    /* From here on only the holder has the key. */
    explicit_bzero(key, ISOB_KEY_BYTES);
    if (h < 0) {
        lwc_free_shared(k->page);
        k->page = NULL;
        return h;
    }
    k->h = h;
    struct lwc_msg in;
    rc = lwc_switch(h, NULL, NULL, &in);
    if (rc == 0)
        rc = (int)(int64_t)in.w[0];
    if (rc == 0) {
        memcpy(k->pub, k->page->pub, ISOB_PUB_BYTES);
        if (restrict_it) {
            rc = lwc_restrict(h);
            k->restricted = rc == 0;
        }
    }
    if (rc)
        isob_keyholder_close(k);
    return rc;
}

int isob_keyholder_sign(struct isob_keyholder *k, const void *msg, size_t len,
                        unsigned char sig[ISOB_SIG_BYTES])
{
    if (len > ISOB_KEY_MSG_MAX)
        return -EMSGSIZE;
    memcpy(k->page->msg, msg, len);
    k->page->len = (uint32_t)len;
    struct lwc_msg in;
    int rc = lwc_switch(k->h, NULL, NULL, &in);
    if (rc == 0)
        rc = (int)(int64_t)in.w[0];
    if (rc == 0)
        memcpy(sig, k->page->sig, ISOB_SIG_BYTES);
    return rc;
}

void isob_keyholder_close(struct isob_keyholder *k)
{
    if (k->h > 0)
        lwc_destroy(k->h);
    if (k->page)
        lwc_free_shared(k->page);
    k->h = -1;
    k->page = NULL;
}
