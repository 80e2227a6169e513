/* `isob serve --http --tls process|lwc`: HTTPS with OpenSSL (TLS 1.3, an
 * RSA 2048 or ECDSA P-256 key made at start-up, or one from a file, and a
 * self-signed certificate), as lwC's nginx with and
 * without its private key isolated (Litton et al., OSDI 2016, "Isolating
 * OpenSSL keys": 10,000 handshakes took 99.7 s natively and 100.4 s with
 * the key's code in an lwC).
 *
 *   process  the key in the server's memory, as OpenSSL keeps it: the
 *            baseline (and the variant whose key a memory scan finds)
 *   lwc      the key only in a light-weight context (include/isobench/lwc.h)
 *            that loads or generates it after it was created, makes the
 *            certificate, and then only signs: the server's key object
 *            holds the public key and an EC_KEY_METHOD (or RSA_METHOD)
 *            whose sign switches to the context with the digest (or, for
 *            RSA, the block OpenSSL padded) and gets the signature back
 *            through one shared page.  lwc_restrict then takes the
 *            server's access to the context's memory away.
 *
 * Under --session rollback and prefork each worker makes its own key's
 * context (and key); a process key is made once, before the workers.  A
 * rollback restores OpenSSL's random generators with the rest of the
 * worker's memory, so a worker reseeds them before each session
 * (serve_tls_reseed): without it every session after a rollback would
 * send the same server random and key share as the one before.
 *
 * Sessions are never resumed (no tickets, no session cache): every
 * connection is a full handshake with one signature.  The connection's
 * reads and writes go through SSL_read and SSL_write on the non-blocking
 * socket (serve_io_read, serve_io_send), the handshake on the first
 * events (serve_tls_handshake). */
#define OPENSSL_SUPPRESS_DEPRECATED 1  /* EC_KEY_METHOD: OpenSSL 3 keeps it for engines */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "isobench/lwc.h"
#include "server_impl.h"

#ifndef ISOB_HAVE_LIBSSL

int serve_tls_probe(char *why, size_t len)
{
    snprintf(why, len, "built without libssl (install libssl-dev and rebuild)");
    return -ENOTSUP;
}
int serve_tls_init(const struct serve_opts *o) { (void)o; return 1; }
void serve_tls_fini(void) {}
int serve_tls_conn_new(struct conn *c) { (void)c; return -ENOTSUP; }
void serve_tls_conn_free(struct conn *c) { (void)c; }
int serve_tls_handshake(struct conn *c) { (void)c; return -1; }
ssize_t serve_io_read(struct conn *c, void *buf, size_t n, int flags)
{
    return recv(c->fd, buf, n, flags);
}
ssize_t serve_io_send(struct conn *c, const void *p, size_t n)
{
    return send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}
void serve_tls_close_notify(struct conn *c) { (void)c; }
void serve_tls_reseed(void) {}
void serve_tls_warm(void) {}

#else

#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/* The page the server and the key's context share: a digest in, a DER
 * signature out; at start the certificate, DER, out. */
#define TLS_PAGE_DATA 8192
struct tls_page {
    int32_t rc;
    uint32_t len;
    int32_t op, padding;     /* TLS_OP_*; RSA: OpenSSL's padding argument */
    unsigned char data[TLS_PAGE_DATA];
};

static struct {
    SSL_CTX *ctx;
    int holder;              /* lwc: the key's context, else -1 */
    struct tls_page *page;
    size_t page_len;
    EC_KEY_METHOD *meth;
    RSA_METHOD *rsa_meth;
    uint64_t signatures;     /* signatures the context made for us */
} T = {.holder = -1};

/* What the key's context is asked to do (tls_page.op). */
enum { TLS_OP_ECDSA = 1, TLS_OP_RSA = 2 };

int serve_tls_probe(char *why, size_t len)
{
    (void)why;
    (void)len;
    return 0;
}

/* The key: from a PEM file (an RSA or EC P-256 private key), or a fresh
 * one of the type asked for. */
static EVP_PKEY *load_key(const char *file, enum serve_tls_key type)
{
    if (!file)
        return type == TLS_RSA2048 ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256");
    FILE *f = fopen(file, "r");
    if (!f)
        return NULL;
    EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    if (k && EVP_PKEY_get_base_id(k) != EVP_PKEY_EC && EVP_PKEY_get_base_id(k) != EVP_PKEY_RSA) {
        EVP_PKEY_free(k);
        k = NULL;
    }
    return k;
}

/* A self-signed certificate for key, valid for a day. */
static X509 *make_cert(EVP_PKEY *key)
{
    X509 *x = X509_new();
    X509_NAME *n = x ? X509_NAME_new() : NULL;
    int ok = x && n && X509_set_version(x, 2) &&
             ASN1_INTEGER_set(X509_get_serialNumber(x), 1) &&
             X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
             X509_gmtime_adj(X509_getm_notAfter(x), 86400) && X509_set_pubkey(x, key) &&
             X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"isob serve",
                                        -1, -1, 0) &&
             X509_set_subject_name(x, n) && X509_set_issuer_name(x, n) &&
             X509_sign(x, key, EVP_sha256()) > 0;
    X509_NAME_free(n);
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

/* The key's context: load or make the key, hand the certificate over,
 * then sign each digest that comes, for ever. */
static __attribute__((noreturn)) void holder_main(int caller, const char *file,
                                                  enum serve_tls_key type, struct tls_page *pg)
{
    EVP_PKEY *key = load_key(file, type);
    X509 *cert = key ? make_cert(key) : NULL;
    unsigned char *p = pg->data;
    int len = cert ? i2d_X509(cert, NULL) : -1;
    if (len > 0 && len <= TLS_PAGE_DATA && i2d_X509(cert, &p) == len) {
        pg->len = (uint32_t)len;
        pg->rc = 0;
    } else {
        pg->rc = key ? -EPROTO : -ENOKEY;
    }
    X509_free(cert);
    const EC_KEY *ec = key && EVP_PKEY_get_base_id(key) == EVP_PKEY_EC
                           ? EVP_PKEY_get0_EC_KEY(key) : NULL;
    const RSA *rsa = key && EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA
                         ? EVP_PKEY_get0_RSA(key) : NULL;
    for (;;) {
        lwc_switch(caller, NULL, NULL, NULL);
        if (pg->op == TLS_OP_RSA) {
            /* OpenSSL padded the block (PSS, in TLS 1.3); the raw private
             * operation is the key's. */
            int size = rsa ? RSA_size(rsa) : 0;
            if (!rsa || pg->len > (uint32_t)size || size > TLS_PAGE_DATA / 2) {
                pg->rc = -EINVAL;
                continue;
            }
            unsigned char in[TLS_PAGE_DATA / 2];
            memcpy(in, pg->data, pg->len);
            int n = RSA_private_encrypt((int)pg->len, in, pg->data, (RSA *)rsa, pg->padding);
            pg->rc = n > 0 ? 0 : -EPROTO;
            pg->len = n > 0 ? (uint32_t)n : 0;
            continue;
        }
        unsigned int sl = ec ? (unsigned)ECDSA_size(ec) : 0;
        if (!ec || pg->len > 64 || sl > TLS_PAGE_DATA - 64) {
            pg->rc = -EINVAL;
            continue;
        }
        unsigned char dg[64];
        memcpy(dg, pg->data, pg->len);
        pg->rc = ECDSA_sign(0, dg, (int)pg->len, pg->data, &sl, (EC_KEY *)ec) == 1 ? 0 : -EPROTO;
        pg->len = sl;
    }
}

/* EC_KEY_METHOD sign of the server's public-only key: the digest to the
 * key's context and its DER signature back. */
static int holder_sign(int type, const unsigned char *dgst, int dlen, unsigned char *sig,
                       unsigned int *siglen, const BIGNUM *kinv, const BIGNUM *r, EC_KEY *eckey)
{
    (void)type, (void)kinv, (void)r, (void)eckey;
    if (dlen < 0 || dlen > 64)
        return 0;
    memcpy(T.page->data, dgst, (size_t)dlen);
    T.page->len = (uint32_t)dlen;
    T.page->op = TLS_OP_ECDSA;
    if (lwc_switch(T.holder, NULL, NULL, NULL) < 0 || T.page->rc != 0)
        return 0;
    memcpy(sig, T.page->data, T.page->len);
    *siglen = T.page->len;
    T.signatures++;
    return 1;
}

static ECDSA_SIG *holder_sign_sig(const unsigned char *dgst, int dlen, const BIGNUM *kinv,
                                  const BIGNUM *r, EC_KEY *eckey)
{
    unsigned char der[256];
    unsigned int n = 0;
    if (!holder_sign(0, dgst, dlen, der, &n, kinv, r, eckey))
        return NULL;
    const unsigned char *p = der;
    return d2i_ECDSA_SIG(NULL, &p, n);
}

/* RSA_METHOD priv_enc of the server's public-only key: the padded block to
 * the key's context and the raw signature back. */
static int holder_rsa_priv_enc(int flen, const unsigned char *from, unsigned char *to, RSA *rsa,
                               int padding)
{
    int size = RSA_size(rsa);
    if (flen < 0 || flen > size || size > TLS_PAGE_DATA / 2)
        return -1;
    memcpy(T.page->data, from, (size_t)flen);
    T.page->len = (uint32_t)flen;
    T.page->op = TLS_OP_RSA;
    T.page->padding = padding;
    if (lwc_switch(T.holder, NULL, NULL, NULL) < 0 || T.page->rc != 0 ||
        T.page->len > (uint32_t)size)
        return -1;
    memcpy(to, T.page->data, T.page->len);
    T.signatures++;
    return (int)T.page->len;
}

/* A key object of the certificate's public key whose private operation is
 * the key's context's: 0 with *pk, or -EPROTO. */
static int public_signer(X509 *cert, EVP_PKEY **pk)
{
    EVP_PKEY *cpk = cert ? X509_get0_pubkey(cert) : NULL;
    *pk = NULL;
    if (cpk && EVP_PKEY_get_base_id(cpk) == EVP_PKEY_RSA) {
        const RSA *crsa = EVP_PKEY_get0_RSA(cpk);
        const BIGNUM *n = NULL, *e = NULL;
        RSA_get0_key(crsa, &n, &e, NULL);
        T.rsa_meth = T.rsa_meth ? T.rsa_meth : RSA_meth_dup(RSA_get_default_method());
        RSA *pub = T.rsa_meth ? RSA_new() : NULL;
        BIGNUM *n2 = BN_dup(n), *e2 = BN_dup(e);
        int owned = 0;  /* n2 and e2 belong to pub */
        if (!pub || !n2 || !e2 || !RSA_meth_set_priv_enc(T.rsa_meth, holder_rsa_priv_enc) ||
            !RSA_set_method(pub, T.rsa_meth) || !(owned = RSA_set0_key(pub, n2, e2, NULL))) {
            RSA_free(pub);
            if (!owned) {
                BN_free(n2);
                BN_free(e2);
            }
            return -EPROTO;
        }
        *pk = EVP_PKEY_new();
        if (!*pk || !EVP_PKEY_assign_RSA(*pk, pub)) {
            EVP_PKEY_free(*pk);
            *pk = NULL;
            RSA_free(pub);
            return -EPROTO;
        }
        return 0;
    }
    EC_KEY *pub = NULL;
    const EC_KEY *cec = cpk ? EVP_PKEY_get0_EC_KEY(cpk) : NULL;
    T.meth = T.meth ? T.meth : EC_KEY_METHOD_new(EC_KEY_get_default_method());
    if (cec && T.meth && (pub = EC_KEY_new())) {
        EC_KEY_METHOD_set_sign(T.meth, holder_sign, NULL, holder_sign_sig);
        if (!EC_KEY_set_method(pub, T.meth) || !EC_KEY_set_group(pub, EC_KEY_get0_group(cec)) ||
            !EC_KEY_set_public_key(pub, EC_KEY_get0_public_key(cec))) {
            EC_KEY_free(pub);
            pub = NULL;
        }
    }
    *pk = pub ? EVP_PKEY_new() : NULL;
    if (!*pk || !EVP_PKEY_assign_EC_KEY(*pk, pub)) {
        EVP_PKEY_free(*pk);
        EC_KEY_free(pub);
        *pk = NULL;
        return -EPROTO;
    }
    return 0;
}

/* lwc: the context that holds the key; the certificate it made, and a key
 * object of the public key that signs through it. */
static int holder_start(const char *file, enum serve_tls_key type, X509 **cert, EVP_PKEY **pk)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    T.page_len = (sizeof *T.page + ps - 1) & ~(ps - 1);
    T.page = lwc_alloc_shared(T.page_len);
    if (!T.page)
        return -ENOMEM;
    struct lwc_spec sp[2] = {
        {.res = LWC_RES_VM, .how = LWC_SHARED, .vm = {T.page, T.page_len}},
        /* None of the server's descriptors (its sockets) go in. */
        {.res = LWC_RES_FD, .how = LWC_UNMAP, .fd = {3, INT_MAX}},
    };
    int caller;
    int h = lwc_create(sp, 2, 0, &caller, NULL);
    if (h == LWC_SWITCHED)
        holder_main(caller, file, type, T.page);
    if (h < 0)
        return h;
    T.holder = h;
    int rc = lwc_switch(h, NULL, NULL, NULL);
    if (rc == 0)
        rc = T.page->rc;
    if (rc)
        return rc;
    const unsigned char *p = T.page->data;
    *cert = d2i_X509(NULL, &p, T.page->len);
    rc = public_signer(*cert, pk);
    if (rc)
        return rc;
    /* From here on the server cannot read the context's memory. */
    return lwc_restrict(h);
}

int serve_tls_init(const struct serve_opts *o)
{
    X509 *cert = NULL;
    EVP_PKEY *pk = NULL;
    int rc = 0;
    if (o->tls == TLS_KEY_LWC) {
        rc = holder_start(o->tls_key, o->tls_key_type, &cert, &pk);
    } else {
        pk = load_key(o->tls_key, o->tls_key_type);
        cert = pk ? make_cert(pk) : NULL;
        rc = pk && cert ? 0 : pk ? -EPROTO : -ENOKEY;
    }
    if (rc == 0) {
        T.ctx = SSL_CTX_new(TLS_server_method());
        rc = T.ctx && SSL_CTX_set_min_proto_version(T.ctx, TLS1_3_VERSION) &&
                     SSL_CTX_use_certificate(T.ctx, cert) == 1 &&
                     SSL_CTX_use_PrivateKey(T.ctx, pk) == 1 && SSL_CTX_check_private_key(T.ctx) == 1
                 ? 0 : -EPROTO;
    }
    if (rc == 0) {
        /* Every connection a full handshake: no tickets, no cache. */
        SSL_CTX_set_session_cache_mode(T.ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_num_tickets(T.ctx, 0);
        SSL_CTX_set_options(T.ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_mode(T.ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    }
    X509_free(cert);
    EVP_PKEY_free(pk);
    if (rc) {
        unsigned long e = ERR_peek_last_error();
        char ebuf[160] = "";
        if (e)
            ERR_error_string_n(e, ebuf, sizeof ebuf);
        fprintf(stderr, "isob serve: error: --tls %s: %s%s%s\n",
                o->tls == TLS_KEY_LWC ? "lwc" : "process",
                rc == -ENOKEY ? "no RSA or EC P-256 private key in " : isob_strerror(rc),
                rc == -ENOKEY ? (o->tls_key ? o->tls_key : "(generated)") : "",
                e ? ebuf : "");
        serve_tls_fini();
        return 1;
    }
    return 0;
}

void serve_tls_fini(void)
{
    if (T.holder >= 0) {
        fprintf(stderr, "isob serve: the key's context made %llu signatures\n",
                (unsigned long long)T.signatures);
        lwc_destroy(T.holder);
    }
    T.holder = -1;
    if (T.page)
        lwc_free_shared(T.page);
    T.page = NULL;
    SSL_CTX_free(T.ctx);
    T.ctx = NULL;
    /* T.meth stays: a key object freed later may still point at it. */
}

int serve_tls_conn_new(struct conn *c)
{
    SSL *s = T.ctx ? SSL_new(T.ctx) : NULL;
    if (!s || SSL_set_fd(s, c->fd) != 1) {
        SSL_free(s);
        return -ENOMEM;
    }
    SSL_set_accept_state(s);
    c->tls = s;
    c->tls_ready = 0;
    return 0;
}

void serve_tls_conn_free(struct conn *c)
{
    SSL_free(c->tls);
    c->tls = NULL;
}

/* What an SSL call's failure asks for: -1 with errno EAGAIN and c->events
 * set to what it waits for, or -1 with another errno. */
static int tls_wait(struct conn *c, int ret)
{
    int e = SSL_get_error(c->tls, ret);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        c->events = e == SSL_ERROR_WANT_READ ? EPOLLIN : EPOLLOUT;
        errno = EAGAIN;
        return -1;
    }
    ERR_clear_error();
    errno = e == SSL_ERROR_ZERO_RETURN ? 0 : e == SSL_ERROR_SYSCALL && errno ? errno : EPROTO;
    return e == SSL_ERROR_ZERO_RETURN ? 0 : -1;
}

int serve_tls_handshake(struct conn *c)
{
    int r = SSL_do_handshake(c->tls);
    if (r == 1) {
        c->tls_ready = 1;
        c->events = EPOLLIN;
        return 1;
    }
    return tls_wait(c, r) < 0 && errno == EAGAIN ? 0 : -1;
}

ssize_t serve_io_read(struct conn *c, void *buf, size_t n, int flags)
{
    if (!c->tls)
        return recv(c->fd, buf, n, flags);
    int r = SSL_read(c->tls, buf, n > INT_MAX ? INT_MAX : (int)n);
    return r > 0 ? r : tls_wait(c, r);
}

ssize_t serve_io_send(struct conn *c, const void *p, size_t n)
{
    if (!c->tls)
        return send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    int r = SSL_write(c->tls, p, n > INT_MAX ? INT_MAX : (int)n);
    if (r > 0)
        return r;
    r = tls_wait(c, r);
    return r == 0 ? -1 : r;
}

void serve_tls_close_notify(struct conn *c)
{
    if (c->tls && c->tls_ready)
        SSL_shutdown(c->tls);
}

void serve_tls_warm(void)
{
    unsigned char b[16];
    /* The public and private generators are made on first use. */
    if (RAND_bytes(b, sizeof b) != 1 || RAND_priv_bytes(b, sizeof b) != 1)
        ERR_clear_error();
    OPENSSL_cleanse(b, sizeof b);
}

void serve_tls_reseed(void)
{
    /* The primary generator reseeds from the kernel; the per-thread
     * public and private ones see its reseed count change and reseed from
     * it before their next output. */
    unsigned char fresh[32];
    if (RAND_poll() != 1 || getentropy(fresh, sizeof fresh) != 0) {
        /* Without fresh entropy a session would repeat the last one's
         * randomness: better no session than that. */
        static const char msg[] = "isob serve: a worker cannot reseed OpenSSL's random "
                                  "generator after its rollback; it exits\n";
        ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)n;
        _exit(3);
    }
    RAND_add(fresh, sizeof fresh, sizeof fresh);
    OPENSSL_cleanse(fresh, sizeof fresh);
}

#endif
