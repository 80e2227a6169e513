/* Key isolation with a light-weight context (lwC's sensitive-data use
 * case, Litton et al., OSDI 2016, Algorithm 3): an Ed25519 signing key
 * that lives only in a context; the caller sends messages and gets
 * signatures back, and never holds the key.
 *
 *     unsigned char key[32];               read from wherever keys come
 *     struct isob_keyholder k;
 *     isob_keyholder_open(&k, key, 1);     key is wiped here, the context
 *                                          holds it, the caller is restricted
 *     isob_keyholder_sign(&k, msg, len, sig);
 *     isob_keyholder_close(&k);
 *
 * The context is created as a snapshot (so it has the key), then the
 * caller's copy is wiped; at its first switch the context loads the key
 * into the system's libcrypto, wipes its own raw copy and publishes the
 * public key.  With restrict, lwc_restrict follows: the holder is
 * non-dumpable and refuses itself process_vm_*, ptrace and pidfd_getfd,
 * and the caller gives up CAP_SYS_PTRACE, so the kernel refuses it every
 * way into the holder's memory (lwc.h).  Messages and signatures travel in
 * memory of lwc_alloc_shared. */
#ifndef ISOBENCH_LWC_KEY_H
#define ISOBENCH_LWC_KEY_H

#include <stddef.h>
#include <sys/types.h>

#define ISOB_KEY_BYTES 32       /* an Ed25519 private key (its seed) */
#define ISOB_PUB_BYTES 32
#define ISOB_SIG_BYTES 64
#define ISOB_KEY_MSG_MAX 4096   /* bytes of one message */

struct isob_keyholder {
    int h;                      /* the holder context */
    struct isob_key_page *page; /* shared: message in, signature out */
    size_t page_len;
    unsigned char pub[ISOB_PUB_BYTES];
    int restricted;
};

/* 0 when this build can sign (libcrypto was found), else -ENOTSUP with
 * the reason in why. */
int isob_key_probe(char *why, size_t len);

/* Start a holder for key, which is wiped here whatever the outcome.  0 or
 * -errno (-EOWNERDEAD when the holder died; -EINVAL when libcrypto
 * refused the key). */
int isob_keyholder_open(struct isob_keyholder *k, unsigned char key[ISOB_KEY_BYTES], int restrict_it);
/* Sign len bytes of msg (at most ISOB_KEY_MSG_MAX) in the holder. */
int isob_keyholder_sign(struct isob_keyholder *k, const void *msg, size_t len,
                        unsigned char sig[ISOB_SIG_BYTES]);
void isob_keyholder_close(struct isob_keyholder *k);

/* Signing and checking in this process, with libcrypto (the baseline and
 * the checks).  A key object is opaque here. */
void *isob_key_new(const unsigned char key[ISOB_KEY_BYTES]);       /* NULL on error */
void *isob_key_generate(void);
void *isob_key_public(const unsigned char pub[ISOB_PUB_BYTES]);
int isob_key_sign(void *key, const void *msg, size_t len, unsigned char sig[ISOB_SIG_BYTES]);
/* 1 when sig is msg's signature under the public key. */
int isob_key_verify(void *pub, const void *msg, size_t len, const unsigned char sig[ISOB_SIG_BYTES]);
void isob_key_free(void *key);

#endif
