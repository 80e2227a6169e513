/* The children of the calling process, read from /proc, for tests that check
 * that nothing they started outlives them.  Include after tap.h (CHECK). */
#ifndef ISOB_TESTS_CHILDREN_H
#define ISOB_TESTS_CHILDREN_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* How many children this process has; the first `max` of their pids go to
 * out (out may be NULL when max is 0). */
static inline int tap_children(pid_t *out, int max)
{
    DIR *d = opendir("/proc");
    CHECK(d != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid = atoi(e->d_name);
        if (pid <= 0)
            continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        int ppid = 0;
        /* The command name may hold spaces and parentheses: the state and
         * the parent's pid follow the last ')'. */
        if (fgets(buf, sizeof buf, f)) {
            char *q = strrchr(buf, ')');
            if (!q || sscanf(q + 2, "%*c %d", &ppid) != 1)
                ppid = 0;
        }
        fclose(f);
        if (ppid != getpid())
            continue;
        if (n < max)
            out[n] = pid;
        n++;
    }
    closedir(d);
    return n;
}

#endif
