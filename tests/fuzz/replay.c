/* Runs the fuzz target over files, without libFuzzer: every build (the
 * sanitized one included, tests/fuzz/meson.build) replays the checked-in
 * corpus through the same connection, parser and executor code.
 *
 *   fuzz_replay FILE|DIR...     exit 0 when every input ran, 1 on a
 *                               failure (the target aborts), 2 on bad usage */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The largest input replayed: libFuzzer's -max_len in run.sh is far less. */
#define REPLAY_MAX (16u << 20)

static int replay_file(const char *path, size_t *count)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_replay: %s: cannot open\n", path);
        return -1;
    }
    uint8_t *buf = malloc(REPLAY_MAX);
    size_t n = buf ? fread(buf, 1, REPLAY_MAX, f) : 0;
    int too_big = buf && n == REPLAY_MAX && fgetc(f) != EOF;
    fclose(f);
    if (!buf || too_big) {
        fprintf(stderr, "fuzz_replay: %s: %s\n", path, buf ? "larger than 16 MiB" : "out of memory");
        free(buf);
        return -1;
    }
    /* Named first, so that an input that aborts the target is known. */
    printf("fuzz_replay: %s (%zu bytes)\n", path, n);
    fflush(stdout);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    (*count)++;
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of dir, in name order, so that runs are repeatable. */
static int replay_dir(const char *dir, size_t *count)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "fuzz_replay: %s: cannot open\n", dir);
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **more = realloc(names, cap * sizeof *names);
            if (!more) {
                rc = -1;
                break;
            }
            names = more;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        if (!names[n]) {
            rc = -1;
            break;
        }
        snprintf(names[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
            rc = replay_file(names[i], count);
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_replay FILE|DIR...\n");
        return 2;
    }
    size_t count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "fuzz_replay: %s: no such file or directory\n", argv[i]);
            return 2;
        }
        int rc = S_ISDIR(st.st_mode) ? replay_dir(argv[i], &count) : replay_file(argv[i], &count);
        if (rc)
            return 1;
    }
    printf("fuzz_replay: %zu inputs ran\n", count);
    return count ? 0 : 1;
}
