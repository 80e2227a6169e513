/* uthread's context switch (uthread_<arch>.S) keeps every callee-saved
 * register of both contexts.  Each side holds values live across its
 * switches, loaded through volatiles so that the compiler can neither fold
 * nor recompute them: it keeps them in callee-saved registers (x19-x28 and
 * d8-d15 on arm64, rbx and r12-r15 on x86-64) or on the stack.  A register
 * the switch failed to save would come back holding the other side's
 * value, which the copies kept in memory then disagree with.  Plain C, so
 * it runs on every architecture. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "tap.h"

/* The switch and its first frame, as uthread.c declares them. */
void isob_uthread_switch(void **save_sp, void *to_sp);
void *isob_uthread_init(void *stack_top, void (*fn)(void *), void *arg);

/* Round trips between the two contexts, and the second context's stack. */
#define ROUNDS 100
#define STACK_SIZE (64u * 1024u)

static void *main_sp, *ctx_sp;
static volatile long seed_l[2] = {1000, 2000};
static volatile double seed_d[2] = {0.25, 0.75};
static long want_l[2][10];
static double want_d[2][8];
static int ctx_bad, ctx_rounds;

/* Ten integers and eight doubles of side s, all live across every switch;
 * after each switch they must equal the copies in want_l and want_d. */
#define SIDE_LOOP(S, SWITCH, BAD, ROUNDS_DONE)                                          \
    do {                                                                                \
        long l0 = seed_l[S], l1 = l0 + 1, l2 = l0 + 2, l3 = l0 + 3, l4 = l0 + 4;       \
        long l5 = l0 + 5, l6 = l0 + 6, l7 = l0 + 7, l8 = l0 + 8, l9 = l0 + 9;          \
        double d0 = seed_d[S], d1 = d0 + 1, d2 = d0 + 2, d3 = d0 + 3, d4 = d0 + 4;     \
        double d5 = d0 + 5, d6 = d0 + 6, d7 = d0 + 7;                                  \
        for (int r = 0; r < ROUNDS; r++) {                                              \
            long *wl = want_l[S];                                                       \
            double *wd = want_d[S];                                                     \
            wl[0] = l0, wl[1] = l1, wl[2] = l2, wl[3] = l3, wl[4] = l4;                 \
            wl[5] = l5, wl[6] = l6, wl[7] = l7, wl[8] = l8, wl[9] = l9;                 \
            wd[0] = d0, wd[1] = d1, wd[2] = d2, wd[3] = d3;                             \
            wd[4] = d4, wd[5] = d5, wd[6] = d6, wd[7] = d7;                             \
            SWITCH;                                                                     \
            BAD |= l0 != wl[0] || l1 != wl[1] || l2 != wl[2] || l3 != wl[3] ||          \
                   l4 != wl[4] || l5 != wl[5] || l6 != wl[6] || l7 != wl[7] ||          \
                   l8 != wl[8] || l9 != wl[9];                                          \
            BAD |= (d0 != wd[0] || d1 != wd[1] || d2 != wd[2] || d3 != wd[3] ||         \
                    d4 != wd[4] || d5 != wd[5] || d6 != wd[6] || d7 != wd[7]) << 1;     \
            ROUNDS_DONE++;                                                              \
            l0 += 10, l1 += 10, l2 += 10, l3 += 10, l4 += 10;                           \
            l5 += 10, l6 += 10, l7 += 10, l8 += 10, l9 += 10;                           \
            d0 += 8, d1 += 8, d2 += 8, d3 += 8, d4 += 8, d5 += 8, d6 += 8, d7 += 8;     \
        }                                                                               \
    } while (0)

__attribute__((noreturn)) static void ctx_fn(void *arg)
{
    (void)arg;
    SIDE_LOOP(1, isob_uthread_switch(&ctx_sp, main_sp), ctx_bad, ctx_rounds);
    /* Nothing to return to: hand control back for good. */
    for (;;)
        isob_uthread_switch(&ctx_sp, main_sp);
}

static void t_callee_saved_registers_survive_switches(void)
{
    void *stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(stack != MAP_FAILED);
    ctx_sp = isob_uthread_init((char *)stack + STACK_SIZE, ctx_fn, NULL);
    int main_bad = 0, main_rounds = 0;
    /* The first switch starts the context, which switches back at once
     * from inside its loop; after that every switch is one round each. */
    isob_uthread_switch(&main_sp, ctx_sp);
    SIDE_LOOP(0, isob_uthread_switch(&main_sp, ctx_sp), main_bad, main_rounds);
    if (main_bad || ctx_bad)
        fprintf(stderr, "# lost: main %s%s, context %s%s\n", main_bad & 1 ? "integers " : "",
                main_bad & 2 ? "doubles" : "", ctx_bad & 1 ? "integers " : "",
                ctx_bad & 2 ? "doubles" : "");
    CHECK_EQ_LONG(main_rounds, ROUNDS);
    CHECK_EQ_LONG(ctx_rounds, ROUNDS);
    CHECK_EQ_LONG(main_bad, 0);
    CHECK_EQ_LONG(ctx_bad, 0);
}

int main(void)
{
    TAP_CASE(t_callee_saved_registers_survive_switches);
    return tap_done();
}
