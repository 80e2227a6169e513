/* The arm64 timer, the generic timer's virtual count CNTVCT_EL0: whether it
 * can serve as a clock here, and its frequency.  The reading itself is in
 * arch_arm64.h. */
#include <errno.h>
#include <stdio.h>

#include "isobench/harness.h"

/* The architecture makes the system counter count at one fixed frequency
 * on every CPU, whatever the cores' clocks do, and Linux lets user space
 * read it (emulating the read on CPUs whose timer errata make it trap).
 * What can still be wrong is the frequency: firmware programs CNTFRQ_EL0,
 * and one that did not leaves ticks that cannot be related to time. */
int isob_timer_usable(char *why, size_t len)
{
    if (isob_timer_freq() == 0) {
        snprintf(why, len, "CNTFRQ_EL0 reads 0: firmware did not program the timer's frequency");
        return -ENOTSUP;
    }
    return 0;
}

int isob_timer_hz(double *hz, const char **source)
{
    uint64_t f = isob_timer_freq();
    if (f == 0)
        return -ENOTSUP;
    *hz = (double)f;
    *source = "CNTFRQ_EL0";
    return 0;
}
