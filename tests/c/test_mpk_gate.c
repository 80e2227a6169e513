/* The MPK call gate's code and gate state, checked on any x86-64 machine:
 * none of this needs protection keys, so it runs where the mechanisms
 * themselves skip.  What the gate does with keys is tested under QEMU TCG
 * (tests/vm, mpk-vm) and natively where the CPU has PKU (mpk-native). */
#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "isobench/inspect.h"
#include "mpk.h"
#include "tap.h"

/* Longest x86 instruction, in bytes. */
#define X86_MAX_INSN 15

/* The patterns of ERIM's inspection (inspect.h), on three readable bytes. */
static int is_wrpkru(const unsigned char *p) { return isob_insn_match(p, 3) == ISOB_INSN_WRPKRU; }

/* XRSTOR (0F AE /5) and XRSTORS (0F C7 /3) with a memory operand restore
 * PKRU from memory as WRPKRU writes it from EAX. */
static int is_xrstor(const unsigned char *p)
{
    int k = isob_insn_match(p, 3);
    return k == ISOB_INSN_XRSTOR || k == ISOB_INSN_XRSTORS;
}

/* ERIM's binary inspection, on the gate's own code: every WRPKRU encoding
 * in it, at any byte offset, is one of the recorded opening or closing
 * WRPKRUs, and there is no XRSTOR. */
static void t_gate_code_inspected(void)
{
    size_t len = 0;
    const unsigned char *text = isob_mpk_test_text(&len);
    const struct isob_mpk_site *sites;
    size_t n = isob_mpk_test_sites(&sites);
    CHECK(text && len > 0 && n > 0);
    size_t found = 0, recorded = 0;
    for (size_t s = 0; s < n; s++)
        recorded += sites[s].role != MPK_ROLE_INSN;
    for (size_t i = 0; i + 3 <= len; i++) {
        CHECK(!is_xrstor(text + i));
        if (!is_wrpkru(text + i))
            continue;
        found++;
        int known = 0;
        for (size_t s = 0; s < n; s++)
            known |= sites[s].addr == text + i && sites[s].role != MPK_ROLE_INSN;
        if (!known)
            fprintf(stderr, "# unrecorded WRPKRU encoding at gate offset %zu\n", i);
        CHECK(known);
    }
    CHECK_EQ_LONG(found, recorded);
    /* Five gates (mpk's, mpk-bridge's and the three of ERIM's call kinds)
     * with an opening and a closing WRPKRU each, and the closing sequence
     * that set-up uses. */
    CHECK_EQ_LONG(found, 11);
    printf("# %zu gate instructions recorded in %zu bytes, %zu of them WRPKRU\n", n, len, found);
}

/* Each gate's recorded instructions lie in the gate's code, in order, with
 * no room between neighbours for an instruction that was not recorded,
 * and with one opening WRPKRU before one closing WRPKRU. */
static void t_sites_cover_each_gate(void)
{
    size_t len = 0;
    const unsigned char *text = isob_mpk_test_text(&len);
    const struct isob_mpk_site *sites;
    size_t n = isob_mpk_test_sites(&sites);
    for (uint32_t g = MPK_GATE_INLINE; g < MPK_GATE_COUNT; g++) {
        const unsigned char *prev = NULL;
        int opens = 0, closes = 0, count = 0;
        for (size_t s = 0; s < n; s++) {
            if (sites[s].gate != g)
                continue;
            const unsigned char *a = sites[s].addr;
            CHECK(a >= text && a < text + len);
            if (prev)
                CHECK(a > prev && a - prev <= X86_MAX_INSN);
            if (sites[s].role == MPK_ROLE_OPEN) {
                CHECK(closes == 0);
                opens++;
            }
            closes += sites[s].role == MPK_ROLE_CLOSE;
            if (sites[s].role != MPK_ROLE_INSN)
                CHECK(is_wrpkru(a));
            prev = a;
            count++;
        }
        CHECK(count > 0);
        CHECK_EQ_LONG(opens, g == MPK_GATE_CLOSE ? 0 : 1);
        CHECK_EQ_LONG(closes, 1);
    }
}

/* The gate state pages are PROT_NONE before any compartment exists, so
 * that nothing can be planted in a slot before its key tags it. */
static void t_slots_sealed(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    uintptr_t lo = (uintptr_t)isob_mpk_slots, hi = lo + sizeof isob_mpk_slots;
    char line[512];
    int covered = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) != 3)
            continue;
        if (a <= lo && hi <= b) {
            printf("# gate state %#lx-%#lx in %s", (unsigned long)lo, (unsigned long)hi, line);
            CHECK(strcmp(perms, "---p") == 0);
            covered = 1;
        }
    }
    fclose(f);
    CHECK(covered);
}

/* The probe tells the CPU's missing PKU from the kernel's refusal. */
static void t_probe_says_why(void)
{
    const struct isob_mechanism *m = isob_mechanism_find("mpk");
    CHECK(m != NULL);
    char why[256] = "";
    int rc = m->probe(why, sizeof why);
    unsigned a = 0, b = 0, c = 0, d = 0;
    int pku = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 3));
    printf("# probe: %d %s\n", rc, why);
    if (!pku) {
        CHECK_EQ_LONG(rc, -ENOTSUP);
        CHECK(strstr(why, "CPU has no PKU") != NULL);
    } else {
        CHECK(rc == 0 || strstr(why, "OSPKE") || strstr(why, "pkey_alloc"));
    }
}

int main(void)
{
    TAP_CASE(t_gate_code_inspected);
    TAP_CASE(t_sites_cover_each_gate);
    TAP_CASE(t_slots_sealed);
    TAP_CASE(t_probe_says_why);
    return tap_done();
}
