/* CPU pinning and placement.
 *
 * Every CPU number here is taken from the set of CPUs the process was
 * allowed to run on when it started (its affinity mask, which taskset,
 * cgroups' cpusets and container runtimes narrow), never from the count of
 * CPUs online: on a machine with CPUs 0-7 where isob may use only 2 and 3,
 * there are two CPUs, the first is 2, and the one after 3 is 2 again. */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "isobench/harness.h"

static const char *const placement_names[] = {"same-cpu", "cross-cpu", "unpinned"};

const char *isob_placement_name(enum isob_placement p)
{
    return (unsigned)p < 3 ? placement_names[p] : "?";
}

int isob_placement_parse(const char *s, enum isob_placement *out)
{
    for (unsigned i = 0; i < 3; i++)
        if (strcmp(s, placement_names[i]) == 0) {
            *out = (enum isob_placement)i;
            return 0;
        }
    return -EINVAL;
}

/* The allowed set, read once before the first pinning changes it.  Pinning
 * goes only through isob_pin_self, which reads it first, so the copy is
 * the set the process started with; a forked server inherits the copy. */
static cpu_set_t allowed_set;
static int allowed_known;

static const cpu_set_t *allowed(void)
{
    if (!allowed_known) {
        CPU_ZERO(&allowed_set);
        if (sched_getaffinity(0, sizeof allowed_set, &allowed_set) != 0) {
            /* Without an answer, assume the CPUs online are allowed. */
            long n = sysconf(_SC_NPROCESSORS_ONLN);
            for (long i = 0; i < (n > 0 ? n : 1) && i < CPU_SETSIZE; i++)
                CPU_SET((int)i, &allowed_set);
        }
        allowed_known = 1;
    }
    return &allowed_set;
}

int isob_ncpus(void)
{
    return CPU_COUNT(allowed());
}

int isob_cpu_allowed(int cpu)
{
    return cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, allowed());
}

int isob_first_cpu(void)
{
    return isob_next_cpu_in(allowed(), -1);
}

int isob_next_cpu_in(const cpu_set_t *set, int cpu)
{
    for (int i = 1; i <= CPU_SETSIZE; i++) {
        int c = cpu + i;
        c = c < 0 ? c + CPU_SETSIZE : c % CPU_SETSIZE;
        if (CPU_ISSET(c, set))
            return c == cpu ? -1 : c;
    }
    return -1;
}

int isob_pin_self(int cpu)
{
    cpu_set_t set;
    if (cpu < 0) {
        set = *allowed();
    } else {
        if (cpu >= CPU_SETSIZE)
            return -EINVAL;
        allowed();
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
    }
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        return -errno;
    return 0;
}

int isob_place_self(enum isob_placement p, int client_cpu, char *why, size_t len)
{
    int cpu = p == ISOB_PLACE_UNPINNED ? -1 : client_cpu;
    int rc = isob_pin_self(cpu);
    if (rc && cpu >= 0)
        snprintf(why, len, "pin to CPU %d: %s", cpu, isob_strerror(rc));
    else if (rc)
        snprintf(why, len, "unpin (back to the allowed CPUs): %s", isob_strerror(rc));
    return rc;
}

int isob_server_cpu(enum isob_placement p, int client_cpu)
{
    if (p == ISOB_PLACE_UNPINNED || client_cpu < 0)
        return -1;
    if (p == ISOB_PLACE_SAME_CPU)
        return client_cpu;
    return isob_next_cpu_in(allowed(), client_cpu);
}

int isob_current_cpu(void)
{
    int c = sched_getcpu();
    return c < 0 ? -errno : c;
}

const char *isob_strerror(long err)
{
    if (err < 0)
        err = -err;
    return strerror((int)err);
}

const char *isob_errno_name(long err)
{
    if (err < 0)
        err = -err;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
    const char *n = strerrorname_np((int)err);
    if (n)
        return n;
#endif
    static __thread char num[32];
    snprintf(num, sizeof num, "errno %ld", err);
    return num;
}
