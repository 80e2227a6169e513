/* Private interface of the mpk mechanisms, for their tests only.
 *
 * The benchmark never calls these: they exist so that the QEMU TCG test
 * (tests/vm/mpk_init.c) can show that the gate's check catches what it is
 * there to catch. */
#ifndef ISOBENCH_MPK_H
#define ISOBENCH_MPK_H

#include <stdint.h>

#include "isobench/mechanism.h"

/* The protection key that tags compartment c's trusted memory, or -1 when c
 * is not an mpk compartment. */
int isob_mpk_test_pkey(struct isob_comp *c);

/* Corrupt the PKRU value that compartment c's gate writes when it closes,
 * so that it would leave the trusted memory open, as a stray store in the
 * untrusted side could.  The gate's next return must then abort(). */
void isob_mpk_test_corrupt_gate(struct isob_comp *c);

#endif
