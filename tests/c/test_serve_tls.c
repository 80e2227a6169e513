/* `isob serve --http --tls`: HTTPS handshakes succeed with the key in the
 * server (process) and with the key only in a light-weight context (lwc);
 * and the property lwC's isolated OpenSSL key is about: under lwc the
 * private key's bytes are nowhere in the serving process's memory, while
 * the context that signs holds them.  The scan reads every readable
 * mapping of the process through /proc/PID/mem and looks for the key's
 * private scalar, big-endian (as DER and PEM carry it) and little-endian
 * (as OpenSSL's BIGNUM words hold it on this machine).  The broken variant
 * is --tls process, the key where OpenSSL keeps it: the same scan finds
 * it there, which is what shows the scan can find it at all.
 *
 * The server (isob_serve_main) runs in a child on a loopback port it
 * picks; handshakes are made with isob tlsload (in another child).
 * Nothing is timed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/loadgen.h"
#include "isobench/serve.h"
#include "tap.h"
#include "children.h"

#ifdef ISOB_HAVE_LIBSSL
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

struct srv {
    pid_t pid;
    unsigned port;
    int err;
};

/* The server's process is forked before this one knows the key (ready()
 * makes it), so that the key is in the server only if the server put it
 * there; it starts serving when go() says so. */
static int go_fd = -1;

static pid_t fork_serve(const char *const *args, int *err)
{
    int pfd[2], gfd[2];
    CHECK(pipe(pfd) == 0 && pipe(gfd) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (tap_skip_fd >= 0)
            close(tap_skip_fd);
        close(pfd[0]);
        close(gfd[1]);
        char b;
        if (read(gfd[0], &b, 1) != 1)
            _exit(3);
        close(gfd[0]);
        dup2(pfd[1], 2);
        char *argv[32];
        int argc = 0;
        argv[argc++] = "serve";
        for (; args[argc - 1] && argc < 31; argc++)
            argv[argc] = (char *)args[argc - 1];
        argv[argc] = NULL;
        _exit(isob_serve_main(argc, argv));
    }
    close(pfd[1]);
    close(gfd[0]);
    go_fd = gfd[1];
    *err = pfd[0];
    return pid;
}

/* Let the forked server start; wait for its ready line. */
static struct srv go(pid_t pid, int err)
{
    CHECK(write(go_fd, "g", 1) == 1);
    close(go_fd);
    struct srv s = {pid, 0, err};
    char line[1024];
    const char *at = NULL;
    /* Lines before the ready one (the workers started) are passed over;
     * the server's end of the pipe ends the wait. */
    for (int lines = 0; !at && lines < 16; lines++) {
        size_t n = 0;
        while (n < sizeof line - 1 && read(s.err, line + n, 1) == 1 && line[n++] != '\n')
            ;
        line[n] = 0;
        at = strstr(line, "listening on 127.0.0.1:");
        if (!n)
            break;
    }
    if (!at)
        fprintf(stderr, "# the server said: %s\n", line);
    CHECK(at != NULL);
    s.port = (unsigned)atoi(at + strlen("listening on 127.0.0.1:"));
    return s;
}

static int stop_serve(struct srv *s, char *said, size_t len)
{
    kill(s->pid, SIGTERM);
    int st = 0;
    CHECK(waitpid(s->pid, &st, 0) == s->pid);
    size_t n = 0;
    ssize_t r;
    while (n < len - 1 && (r = read(s->err, said + n, len - 1 - n)) > 0)
        n += (size_t)r;
    said[n] = 0;
    close(s->err);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* isob tlsload --handshakes n against port: its exit status. */
static int handshakes(unsigned port, int n)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        char p[16], c[16];
        snprintf(p, sizeof p, "%u", port);
        snprintf(c, sizeof c, "%d", n);
        char *argv[] = {"tlsload", "--port", p, "--handshakes", c, NULL};
        _exit(isob_tlsload_main(5, argv));
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A fresh key written to the PEM file key_file; its scalar both ways round. */
static char key_file[64];
static unsigned char scalar_be[32], scalar_le[32];

static void make_key(void)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    CHECK(k != NULL);
    BIGNUM *d = NULL;
    CHECK(EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_PRIV_KEY, &d) == 1);
    CHECK(BN_bn2binpad(d, scalar_be, 32) == 32);
    for (int i = 0; i < 32; i++)
        scalar_le[i] = scalar_be[31 - i];
    BN_clear_free(d);
    FILE *f = fopen(key_file, "w");
    CHECK(f && PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) == 1);
    fclose(f);
    EVP_PKEY_free(k);
}

/* Whether the scalar occurs in pid's readable memory; -1 where the memory
 * could not be read at all. */
static int key_in(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *maps = fopen(path, "r");
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    int mem = open(path, O_RDONLY);
    if (!maps || mem < 0) {
        if (maps)
            fclose(maps);
        if (mem >= 0)
            close(mem);
        return -1;
    }
    static unsigned char buf[1u << 20];
    char line[512];
    int found = 0;
    size_t regions = 0;
    while (!found && fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r' ||
            strstr(line, "[vvar") || strstr(line, "[vsyscall]"))
            continue;
        /* Overlapping reads, so that a key across two reads is seen. */
        for (unsigned long at = lo; !found && at < hi;) {
            size_t want = hi - at < sizeof buf ? hi - at : sizeof buf;
            ssize_t n = pread(mem, buf, want, (off_t)at);
            if (n <= 0)
                break;
            regions++;
            found = memmem(buf, (size_t)n, scalar_be, 32) || memmem(buf, (size_t)n, scalar_le, 32);
            if ((size_t)n < 32 || at + (unsigned long)n >= hi)
                break;
            at += (unsigned long)n - 31;
        }
    }
    fclose(maps);
    close(mem);
    return regions ? found : -1;
}

/* The processes directly below pid. */
static int children_of(pid_t pid, pid_t *out, int max)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    FILE *f = fopen(path, "r");
    int n = 0, c;
    while (f && n < max && fscanf(f, "%d", &c) == 1)
        out[n++] = c;
    if (f)
        fclose(f);
    return n;
}

/* A build with AddressSanitizer maps terabytes of readable shadow memory in
 * the server: a scan of all it can read would not end.  That build says
 * so; the ordinary build scans. */
#if defined(__SANITIZE_ADDRESS__)
#define TLS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TLS_SANITIZED 1
#endif
#endif

static void check_key(const char *where)
{
#ifdef TLS_SANITIZED
    SKIP("the sanitized server maps terabytes of readable shadow memory, too much to scan for "
         "the key (%s); the build without sanitizers runs this scan", where);
#endif
    snprintf(key_file, sizeof key_file, "/tmp/isob-test-tls-key.XXXXXX");
    int kfd = mkstemp(key_file);
    CHECK(kfd >= 0);
    close(kfd);
    const char *args[] = {"-m", "direct", "--port", "0", "--heap-mb", "4", "--http", "--tls", where,
                          "--tls-key-file", key_file, NULL};
    int err;
    pid_t pid = fork_serve(args, &err);
    make_key();
    struct srv s = go(pid, err);
    unlink(key_file);  /* whoever holds the key read it already */
    CHECK_EQ_LONG(handshakes(s.port, 5), 0);
    int in_server = key_in(s.pid);
    CHECK(in_server >= 0);
    pid_t kids[8];
    int nk = children_of(s.pid, kids, 8);
    int in_holder = 0;
    for (int i = 0; i < nk; i++)
        in_holder |= key_in(kids[i]) == 1;
    char said[2048];
    CHECK_EQ_LONG(stop_serve(&s, said, sizeof said), 0);
    if (strcmp(where, "lwc") == 0) {
        /* The property: the serving process never has the key ... */
        CHECK_EQ_LONG(in_server, 0);
        /* ... and the scan would have seen it: the context holds it, and
         * made every signature. */
        CHECK(nk >= 1 && in_holder);
        if (!strstr(said, "the key's context made 5 signatures"))
            fprintf(stderr, "# the server said: %s", said);
        CHECK(strstr(said, "the key's context made 5 signatures") != NULL);
    } else {
        /* The broken variant: the key where OpenSSL keeps it is found. */
        CHECK_EQ_LONG(in_server, 1);
    }
}

static void t_key_in_process_is_found(void) { check_key("process"); }
static void t_key_in_lwc_is_not_in_the_server(void) { check_key("lwc"); }

/* One HTTPS session against port: the handshake, one GET and its reply;
 * the ServerHello's random into rnd.  0, or -1 where any step failed. */
static int session_random(unsigned port, unsigned char rnd[32])
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    CHECK(ctx != NULL);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    SSL *ssl = SSL_new(ctx);
    int rc = -1;
    char reply[512];
    static const char get[] = "GET / HTTP/1.0\r\n\r\n";
    if (fd >= 0 && ssl && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        SSL_set_fd(ssl, fd) == 1 && SSL_connect(ssl) == 1 &&
        SSL_get_server_random(ssl, rnd, 32) == 32 &&
        SSL_write(ssl, get, (int)sizeof get - 1) == (int)sizeof get - 1 &&
        SSL_read(ssl, reply, sizeof reply) > 0 && strncmp(reply, "HTTP/1.", 7) == 0)
        rc = 0;
    SSL_free(ssl);
    if (fd >= 0)
        close(fd);
    SSL_CTX_free(ctx);
    return rc;
}

/* A rollback restores the worker's memory, OpenSSL's random generators
 * with it: the worker must reseed before each session, or every session
 * after a rollback draws the same randomness as the one before it (the
 * same server random, the same key share).  One worker, so that both
 * sessions are served from the same snapshot; the broken variant, the
 * reseed left out, sends the same random twice. */
static void t_rollback_does_not_repeat_randomness(void)
{
    const char *args[] = {"-m", "direct", "--port", "0", "--heap-mb", "4", "--http", "--tls",
                          "process", "--session", "rollback", "--workers", "1", NULL};
    int err;
    pid_t pid = fork_serve(args, &err);
    struct srv s = go(pid, err);
    unsigned char a[32], b[32], c[32];
    CHECK_EQ_LONG(session_random(s.port, a), 0);
    CHECK_EQ_LONG(session_random(s.port, b), 0);
    CHECK_EQ_LONG(session_random(s.port, c), 0);
    char said[4096];
    CHECK_EQ_LONG(stop_serve(&s, said, sizeof said), 0);
    if (strstr(said, "rolling back by fork")) {
        /* Each session a fresh fork: OpenSSL reseeds on its own there. */
        SKIP("this kernel rolls back by fork here (no uffd or soft-dirty), which restores no "
             "generator's state: %s", said);
    }
    /* The sessions before the last were rolled back (the last one's
     * rollback may come after the stop). */
    const char *rb = strstr(said, "isob serve: rollback by ");
    const char *n = rb ? strstr(rb + strlen("isob serve: rollback by "), ": ") : NULL;
    if (!n || atoi(n + 2) < 2)
        fprintf(stderr, "# the server said: %s", said);
    CHECK(n != NULL && atoi(n + 2) >= 2);
    CHECK(memcmp(a, b, 32) != 0 && memcmp(b, c, 32) != 0 && memcmp(a, c, 32) != 0);
}

static void t_bad_options_refused(void)
{
    static const char *const cases[][12] = {
        {"-m", "direct", "--tls", "lwc", NULL},
        {"-m", "direct", "--http", "--tls", "enclave", NULL},
        {"-m", "direct", "--http", "--tls", "lwc", "--session", "fork", NULL},
        {"-m", "direct", "--http", "--tls-key-file", "/nonexistent", NULL},
        {"-m", "direct", "--http", "--tls", "lwc", "--monitor", "lwc", NULL},
        {"-m", "direct", "--http", "--tls", "lwc", "--tls-key", "dsa1024", NULL},
        {"-m", "direct", "--http", "--tls", "process", "--per-connection", NULL},
    };
    static const char *const says[] = {"needs --http", "neither process nor lwc",
                                       "per session", "need --tls", "measured apart",
                                       "neither rsa2048 nor ecdsa-p256", "--per-connection"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pid_t pid;
        int pfd[2];
        CHECK(pipe(pfd) == 0);
        if ((pid = fork()) == 0) {
            close(pfd[0]);
            dup2(pfd[1], 2);
            char *argv[16];
            int argc = 0;
            argv[argc++] = "serve";
            for (; cases[i][argc - 1]; argc++)
                argv[argc] = (char *)cases[i][argc - 1];
            argv[argc] = NULL;
            _exit(isob_serve_main(argc, argv));
        }
        close(pfd[1]);
        char err[1024];
        size_t n = 0;
        ssize_t r;
        while (n < sizeof err - 1 && (r = read(pfd[0], err + n, sizeof err - 1 - n)) > 0)
            n += (size_t)r;
        err[n] = 0;
        close(pfd[0]);
        int st = 0;
        CHECK(waitpid(pid, &st, 0) == pid);
        if (!strstr(err, says[i]))
            fprintf(stderr, "# case %zu said: %s", i, err);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2 && strstr(err, says[i]));
    }
}

/* A key file that holds no key: one line, before listening. */
static void t_bad_key_file(void)
{
    const char *args[] = {"-m", "direct", "--port", "0", "--http", "--tls", "lwc",
                          "--tls-key-file", "/nonexistent/key.pem", NULL};
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(pfd[0]);
        dup2(pfd[1], 2);
        char *argv[16];
        int argc = 0;
        argv[argc++] = "serve";
        for (; args[argc - 1]; argc++)
            argv[argc] = (char *)args[argc - 1];
        argv[argc] = NULL;
        _exit(isob_serve_main(argc, argv));
    }
    close(pfd[1]);
    char err[1024];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof err - 1 && (r = read(pfd[0], err + n, sizeof err - 1 - n)) > 0)
        n += (size_t)r;
    err[n] = 0;
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    CHECK(strstr(err, "no RSA or EC P-256 private key in /nonexistent/key.pem") != NULL);
    CHECK(strstr(err, "listening") == NULL);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    TAP_CASE(t_key_in_process_is_found);
    TAP_CASE(t_key_in_lwc_is_not_in_the_server);
    TAP_CASE(t_bad_options_refused);
    TAP_CASE(t_bad_key_file);
    TAP_CASE(t_rollback_does_not_repeat_randomness);
    return tap_done();
}

#else

static void t_skip(void) { SKIP("built without libssl (install libssl-dev and rebuild)"); }

int main(void)
{
    TAP_CASE(t_skip);
    return tap_done();
}

#endif
