/* The mpk mechanisms' closing of stray WRPKRUs (src/mechanisms/mpk/strays.c),
 * natively, in the ordinary (dynamically linked) build, where the C
 * library's pkey_set is in libc.so: the isolation test's in-process cell
 * calls pkey_set(key, 0) from untrusted code and must lose the secret only
 * on the deliberately unclosed variant (isob_mpk_test_leave_strays).  The
 * statically linked copy of the same attack runs in tests/vm (mpk-native
 * here, mpk-vm under QEMU TCG).  Each case runs in a fresh child, whose C
 * library pages are as the loader mapped them.  Without PKU every case
 * says SKIP with the probe's reason. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isobench/isolation.h"
#include "isobench/mechanism.h"
#include "mpk.h"
#include "tap.h"

static const struct isob_mechanism *need(const char *name)
{
    const struct isob_mechanism *m = isob_mechanism_find(name);
    char why[256] = "";
    if (!m)
        SKIP("%s is not registered in this build", name);
    if (m->probe(why, sizeof why) != 0)
        SKIP("%s: %s", name, why);
    return m;
}

static void matrix_cell(const char *name, int leave, struct isob_isolation *r)
{
    const struct isob_mechanism *m = need(name);
    isob_mpk_test_leave_strays = leave;
    CHECK_EQ_LONG(isob_isolation_test(m, r), 0);
    printf("# %s%s: verdict %s; in-process %s: %s\n", name, leave ? " (strays left)" : "", r->verdict,
           isob_cell_verdict_name(r->cells[ISOB_ATK_IN_PROCESS].verdict),
           r->cells[ISOB_ATK_IN_PROCESS].evidence);
}

/* The mechanism as it is: the call of pkey_set traps, the cell holds, and
 * the closed site is libc's pkey_set. */
static void closed(const char *name)
{
    struct isob_isolation r;
    matrix_cell(name, 0, &r);
    CHECK(r.cells[ISOB_ATK_IN_PROCESS].verdict == ISOB_CELL_ENFORCED);
    CHECK(strcmp(r.verdict, "enforced") == 0);
    CHECK(strstr(r.cells[ISOB_ATK_IN_PROCESS].evidence, "trapped in pkey_set") != NULL);
    const struct isob_mpk_closed *c;
    size_t n = isob_mpk_closed_sites(&c), in_pkey_set = 0;
    for (size_t i = 0; i < n; i++) {
        printf("# closed: WRPKRU at %s+%#llx (%s)\n", c[i].file, (unsigned long long)c[i].file_offset,
               c[i].symbol[0] ? c[i].symbol : "no symbol");
        in_pkey_set += strncmp(c[i].symbol, "pkey_set+", 9) == 0;
    }
    CHECK_EQ_LONG(in_pkey_set, 1);
}

/* The deliberately unclosed variant: one call of pkey_set opens the key. */
static void unclosed(const char *name)
{
    struct isob_isolation r;
    matrix_cell(name, 1, &r);
    CHECK(r.cells[ISOB_ATK_IN_PROCESS].verdict == ISOB_CELL_LEAKS);
    CHECK(strstr(r.cells[ISOB_ATK_IN_PROCESS].evidence, "the read got the secret") != NULL);
    CHECK(strstr(r.cells[ISOB_ATK_IN_PROCESS].evidence, "its WRPKRU at pkey_set+") != NULL);
}

static void t_mpk_closed(void) { closed("mpk"); }
static void t_mpk_bridge_closed(void) { closed("mpk-bridge"); }
static void t_mpk_unclosed_leaks(void) { unclosed("mpk"); }
static void t_mpk_bridge_unclosed_leaks(void) { unclosed("mpk-bridge"); }

/* The rest of pkey_set's page keeps working: pkey_alloc, pkey_mprotect and
 * pkey_free (set-up and destroy use them) through many create/destroy
 * cycles, and pkey_get reads PKRU. */
static void t_page_still_works(void)
{
    const struct isob_mechanism *m = need("mpk");
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    for (int i = 0; i < 40; i++) {
        struct isob_comp *c = NULL;
        CHECK_EQ_LONG(isob_comp_create(m, &spec, &c), 0);
        CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_EMPTY), 0);
        isob_comp_destroy(c);
    }
    const struct isob_mpk_closed *c;
    CHECK(isob_mpk_closed_sites(&c) >= 1);
    CHECK_EQ_LONG(pkey_get(1), PKEY_DISABLE_ACCESS);  /* PKRU closed: key 1 access-disabled */
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* What the closing costs at create: printed, never asserted.  The first
 * create inspects and rewrites; later ones only read /proc/self/maps. */
static void t_create_cost(void)
{
    const struct isob_mechanism *m = need("mpk");
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    enum { N = 200 };
    double first = 0, later = 0, unclosed_us = 0;
    for (int pass = 0; pass < 2; pass++) {
        isob_mpk_test_leave_strays = pass == 1;
        for (int i = 0; i < N + 1; i++) {
            struct isob_comp *c = NULL;
            double t0 = now_us();
            CHECK_EQ_LONG(isob_comp_create(m, &spec, &c), 0);
            double t = now_us() - t0;
            isob_comp_destroy(c);
            if (pass == 0 && i == 0)
                first = t;
            else if (pass == 0)
                later += t / N;
            else if (i > 0)
                unclosed_us += t / N;
        }
    }
    printf("# create of mpk: first (inspects, closes) %.0f us; later, closed %.1f us each; "
           "without the closing %.1f us each (mean of %d)\n", first, later, unclosed_us, N);
}

int main(void)
{
    TAP_CASE(t_mpk_closed);
    TAP_CASE(t_mpk_bridge_closed);
    TAP_CASE(t_mpk_unclosed_leaks);
    TAP_CASE(t_mpk_bridge_unclosed_leaks);
    TAP_CASE(t_page_still_works);
    TAP_CASE(t_create_cost);
    return tap_done();
}
