/* Key isolation with a light-weight context (include/isobench/lwc_key.h):
 * the key's bytes occur nowhere in the caller's readable memory once the
 * holder has it, the caller cannot read the holder's memory, and the
 * holder signs with exactly that key.  Each check is shown to be able to
 * fail: the scan finds the key while the caller still has it, and the
 * read works before the restriction.
 *
 * The scan never puts the key itself in memory: it looks for the key
 * XOR a random mask, one byte at a time in registers. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/lwc.h"
#include "isobench/lwc_key.h"
#include "tap.h"

#define CASE_ALARM_S tap_limit(300)
/* Bytes read per step of the scan. */
#define SCAN_CHUNK (1u << 20)
/* Signatures made before the final scan. */
#define SIGNATURES 100

static unsigned char key[ISOB_KEY_BYTES];
static unsigned char mask[ISOB_KEY_BYTES], masked[ISOB_KEY_BYTES];
/* A value the holder has at a known address, for the read check. */
static volatile uint64_t canary = 0xc0ffee11c0ffee11ull;

static void need_crypto(void)
{
    char why[128];
    if (isob_key_probe(why, sizeof why) != 0)
        SKIP("%s", why);
}

static void fresh_key(void)
{
    CHECK_EQ_LONG(getrandom(key, sizeof key, 0), (long)sizeof key);
    CHECK_EQ_LONG(getrandom(mask, sizeof mask, 0), (long)sizeof mask);
    for (size_t i = 0; i < sizeof key; i++)
        masked[i] = key[i] ^ mask[i];
}

static int key_at(const unsigned char *p)
{
    for (size_t j = 0; j < ISOB_KEY_BYTES; j++)
        if ((unsigned char)(p[j] ^ mask[j]) != masked[j])
            return 0;
    return 1;
}

/* Occurrences of the key in this process's readable memory, read with
 * process_vm_readv on itself so that pages that cannot be read are
 * skipped instead of faulting. */
static long scan_self(void)
{
    unsigned char *buf = mmap(NULL, SCAN_CHUNK + ISOB_KEY_BYTES, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(buf != MAP_FAILED);
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    char line[512];
    long found = 0, regions = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r')
            continue;
        if (strstr(line, "[vvar") || strstr(line, "[vsyscall]"))
            continue;
        if (lo == (uintptr_t)buf)
            continue;  /* the scan's own buffer */
        regions++;
        for (unsigned long at = lo; at < hi; at += SCAN_CHUNK) {
            /* Each step overlaps the last by the key's length but one, so
             * a copy across the boundary is seen. */
            unsigned long from = at > lo ? at - (ISOB_KEY_BYTES - 1) : at;
            size_t want = (size_t)((at + SCAN_CHUNK < hi ? at + SCAN_CHUNK : hi) - from);
            struct iovec l = {buf, want}, r = {(void *)from, want};
            ssize_t n = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
            for (ssize_t i = 0; i + ISOB_KEY_BYTES <= n; i++)
                if ((unsigned char)(buf[i] ^ mask[0]) == masked[0] && key_at(buf + i))
                    found++;
        }
    }
    fclose(f);
    munmap(buf, SCAN_CHUNK + ISOB_KEY_BYTES);
    CHECK(regions > 0);
    return found;
}

/* The signature of msg under key, made in a forked helper so that no
 * copy of the key reaches this process's libcrypto state. */
static void sign_elsewhere(const char *msg, unsigned char sig[ISOB_SIG_BYTES])
{
    int p[2];
    CHECK_EQ_LONG(pipe(p), 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        void *k = isob_key_new(key);
        unsigned char s[ISOB_SIG_BYTES];
        int ok = k && isob_key_sign(k, msg, strlen(msg), s) == 0 && write(p[1], s, sizeof s) == sizeof s;
        _exit(ok ? 0 : 1);
    }
    close(p[1]);
    CHECK_EQ_LONG(read(p[0], sig, ISOB_SIG_BYTES), ISOB_SIG_BYTES);
    close(p[0]);
    int st;
    CHECK_EQ_LONG(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void t_key_nowhere_in_caller_memory(void)
{
    alarm(CASE_ALARM_S);
#if defined(__SANITIZE_ADDRESS__)
    /* Scanning every readable page of this process means scanning
     * AddressSanitizer's resident shadow too: the plain build runs this. */
    SKIP("AddressSanitizer's shadow makes the whole-process scan too long; the plain build runs it");
#endif
    need_crypto();
    fresh_key();
    const char *probe_msg = "the holder signs with exactly this key";
    unsigned char want[ISOB_SIG_BYTES];
    sign_elsewhere(probe_msg, want);
    /* The scan can fail: the caller holds the key now. */
    long before = scan_self();
    fprintf(stderr, "# before the holder: %ld copies of the key\n", before);
    CHECK(before >= 1);
    struct isob_keyholder k;
    CHECK_EQ_LONG(isob_keyholder_open(&k, key, 1), 0);
    CHECK(k.restricted);
    unsigned char sig[ISOB_SIG_BYTES];
    /* Ed25519 is deterministic: the same signature means the same key. */
    CHECK_EQ_LONG(isob_keyholder_sign(&k, probe_msg, strlen(probe_msg), sig), 0);
    CHECK(memcmp(sig, want, sizeof sig) == 0);
    void *pub = isob_key_public(k.pub);
    CHECK(pub != NULL);
    for (int i = 0; i < SIGNATURES; i++) {
        char msg[64];
        snprintf(msg, sizeof msg, "message %d", i);
        CHECK_EQ_LONG(isob_keyholder_sign(&k, msg, strlen(msg), sig), 0);
        CHECK_EQ_LONG(isob_key_verify(pub, msg, strlen(msg), sig), 1);
        msg[0] ^= 1;
        CHECK_EQ_LONG(isob_key_verify(pub, msg, strlen(msg), sig), 0);
    }
    isob_key_free(pub);
    long after = scan_self();
    fprintf(stderr, "# with the holder, after %d signatures: %ld copies\n", SIGNATURES, after);
    CHECK_EQ_LONG(after, 0);
    isob_keyholder_close(&k);
}

static void t_holder_unreadable_by_caller(void)
{
    alarm(CASE_ALARM_S);
    need_crypto();
    fresh_key();
    struct isob_keyholder k;
    CHECK_EQ_LONG(isob_keyholder_open(&k, key, 0), 0);
    pid_t holder = lwc_pid(k.h);
    CHECK(holder > 0);
    uint64_t v = 0;
    struct iovec l = {&v, sizeof v}, r = {(void *)&canary, sizeof v};
    /* The read can succeed: before the restriction it does. */
    CHECK_EQ_LONG(process_vm_readv(holder, &l, 1, &r, 1, 0), (long)sizeof v);
    CHECK(v == canary);
    CHECK_EQ_LONG(lwc_restrict(k.h), 0);
    v = 0;
    CHECK_EQ_LONG(process_vm_readv(holder, &l, 1, &r, 1, 0), -1);
    CHECK_EQ_LONG(errno, EPERM);
    CHECK_EQ_LONG(v, 0);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)holder);
    CHECK_EQ_LONG(open(path, O_RDONLY), -1);
    CHECK(errno == EACCES || errno == EPERM);
    /* The holder runs under its seccomp filter. */
    snprintf(path, sizeof path, "/proc/%d/status", (int)holder);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    char line[256];
    int seccomp = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Seccomp: %d", &seccomp) == 1)
            break;
    fclose(f);
    CHECK_EQ_LONG(seccomp, 2);
    /* And still signs. */
    unsigned char sig[ISOB_SIG_BYTES];
    CHECK_EQ_LONG(isob_keyholder_sign(&k, "x", 1, sig), 0);
    isob_keyholder_close(&k);
}

static void t_bad_input(void)
{
    alarm(CASE_ALARM_S);
    need_crypto();
    fresh_key();
    struct isob_keyholder k;
    CHECK_EQ_LONG(isob_keyholder_open(&k, key, 0), 0);
    static char big[ISOB_KEY_MSG_MAX + 1];
    unsigned char sig[ISOB_SIG_BYTES];
    CHECK_EQ_LONG(isob_keyholder_sign(&k, big, sizeof big, sig), -EMSGSIZE);
    CHECK_EQ_LONG(isob_keyholder_sign(&k, big, sizeof big - 1, sig), 0);
    /* A holder that dies is a failed signature, not a hang. */
    CHECK_EQ_LONG(kill(lwc_pid(k.h), SIGKILL), 0);
    int rc;
    while ((rc = isob_keyholder_sign(&k, "x", 1, sig)) == 0)
        ;
    CHECK_EQ_LONG(rc, -EOWNERDEAD);
    isob_keyholder_close(&k);
    for (size_t i = 0; i < sizeof key; i++)
        CHECK_EQ_LONG(key[i], 0);  /* wiped */
}

int main(void)
{
    TAP_CASE(t_key_nowhere_in_caller_memory);
    TAP_CASE(t_holder_unreadable_by_caller);
    TAP_CASE(t_bad_input);
    return tap_done();
}
