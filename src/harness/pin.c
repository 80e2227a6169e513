/* CPU pinning and placement. */
#include <sched.h>
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

int isob_ncpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        /* Count what the process may use, not what the machine has. */
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        return n > 0 ? (int)n : CPU_COUNT(&set);
    }
    return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

int isob_pin_self(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (cpu < 0) {
        for (int i = 0; i < isob_ncpus() && i < CPU_SETSIZE; i++)
            CPU_SET(i, &set);
    } else {
        CPU_SET(cpu, &set);
    }
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        return -errno;
    return 0;
}

int isob_server_cpu(enum isob_placement p, int client_cpu)
{
    if (p == ISOB_PLACE_UNPINNED || client_cpu < 0)
        return -1;
    if (p == ISOB_PLACE_SAME_CPU)
        return client_cpu;
    int n = isob_ncpus();
    return n > 1 ? (client_cpu + 1) % n : -1;
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
