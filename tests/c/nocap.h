/* Give up CAP_SYS_PTRACE, for tests of attackers "of the same uid": where
 * the tests run as root, the capability would open any process's memory,
 * dumpable or not.  The kernel also refuses a process access to a target
 * whose permitted capabilities it does not hold, so a test gives it up
 * before it starts the processes it attacks, and they lack it too.
 * Include after tap.h (CHECK). */
#ifndef ISOB_TESTS_NOCAP_H
#define ISOB_TESTS_NOCAP_H

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline void tap_drop_ptrace_cap(void)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    CHECK(syscall(SYS_capget, &h, d) == 0);
    d[CAP_TO_INDEX(CAP_SYS_PTRACE)].effective &= ~CAP_TO_MASK(CAP_SYS_PTRACE);
    d[CAP_TO_INDEX(CAP_SYS_PTRACE)].permitted &= ~CAP_TO_MASK(CAP_SYS_PTRACE);
    d[CAP_TO_INDEX(CAP_SYS_PTRACE)].inheritable &= ~CAP_TO_MASK(CAP_SYS_PTRACE);
    CHECK(syscall(SYS_capset, &h, d) == 0);
}

#endif
