/* A tiny TAP test runner.  Each case runs in a forked child with a time-out,
 * so a crash or a hang fails that case and the others still run.
 *
 *   static void t_something(void) { CHECK(x == 1); CHECK_EQ_LONG(a, b); }
 *   int main(void) { TAP_CASE(t_something); ...; return tap_done(); }
 *
 * A case may call SKIP("reason") to report "ok N # SKIP reason".
 *
 * The per-case alarm only turns a hang into a failure; it bounds no speed.
 * It is tap_case_s (TAP_TIMEOUT_S unless the program sets more for costly
 * cases) times tap_scale(): 4 in a sanitizer build (whose
 * code runs several times slower), times ISOB_TIME_SCALE when the
 * environment sets it (a number >= 1, for a machine slower still).  Each
 * case's time is printed beside its limit ("# time: ..."), so that a limit
 * creeping close shows in the test log (and in make test's time report)
 * before it trips. */
#ifndef ISOB_TESTS_TAP_H
#define ISOB_TESTS_TAP_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TAP_TIMEOUT_S 300  /* per case, before tap_scale() */
#define TAP_EXIT_SKIP 77

/* AddressSanitizer's macro under gcc, its feature test under clang. */
#if defined(__SANITIZE_ADDRESS__)
#define TAP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define TAP_SANITIZED 1
#endif
#endif
#ifdef TAP_SANITIZED
#define TAP_SAN_SCALE 4
#else
#define TAP_SAN_SCALE 1
#endif

/* The factor every time-out of a test is multiplied by (see above).  A bad
 * ISOB_TIME_SCALE ends the program with one line: a time-out silently left
 * unscaled would fail later with a misleading reason. */
static inline double tap_scale(void)
{
    static double scale;
    if (scale == 0) {
        const char *env = getenv("ISOB_TIME_SCALE");
        double user = 1;
        if (env && *env) {
            char *end;
            user = strtod(env, &end);
            if (*end || !(user >= 1 && user <= 1000)) {
                fprintf(stderr, "ISOB_TIME_SCALE=%s: not a number from 1 to 1000\n", env);
                exit(2);
            }
        }
        scale = TAP_SAN_SCALE * user;
    }
    return scale;
}

/* seconds scaled by tap_scale(), for a case's own alarms. */
static inline unsigned tap_limit(unsigned seconds)
{
    return (unsigned)(seconds * tap_scale() + 0.5);
}

static int tap_n, tap_failed;
static unsigned tap_case_s = TAP_TIMEOUT_S;   /* a case's alarm before tap_scale() */
static char tap_skip_reason[256];
static int tap_skip_fd = -1;   /* write end of the pipe that carries a skip reason */
static int tap_confined;       /* the case confined its own process (tap_mark_confined) */

/* A case that confines its own process (seccomp, a tracer, namespaces)
 * says so: such a process may not make the system calls a sanitizer's leak
 * check makes at exit (ptrace, clone), so it leaves through exit_group
 * directly, unchecked for leaks. */
static inline void tap_mark_confined(void) { tap_confined = 1; }

static inline void __attribute__((noreturn)) tap_exit(int code)
{
    if (tap_confined) {
        fflush(NULL);
        syscall(SYS_exit_group, code);
    }
    exit(code);
}

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "# %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
            tap_exit(1);                                                              \
        }                                                                             \
    } while (0)

#define CHECK_EQ_LONG(a, b)                                                           \
    do {                                                                              \
        long long tap_a_ = (long long)(a), tap_b_ = (long long)(b);                   \
        if (tap_a_ != tap_b_) {                                                       \
            fprintf(stderr, "# %s:%d: %s == %s failed: %lld != %lld\n", __FILE__,     \
                    __LINE__, #a, #b, tap_a_, tap_b_);                                \
            tap_exit(1);                                                              \
        }                                                                             \
    } while (0)

#define SKIP(...)                                                                     \
    do {                                                                              \
        dprintf(tap_skip_fd, __VA_ARGS__);                                            \
        tap_exit(TAP_EXIT_SKIP);                                                      \
    } while (0)

static void tap_run(const char *name, void (*fn)(void))
{
    int n = ++tap_n;
    unsigned limit = tap_limit(tap_case_s);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fflush(stdout);
    fflush(stderr);
    int pfd[2];
    if (pipe(pfd) != 0) {
        perror("pipe");
        exit(2);
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        tap_skip_fd = pfd[1];
        alarm(limit);
        fn();
        tap_exit(0);
    }
    close(pfd[1]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ssize_t got = read(pfd[0], tap_skip_reason, sizeof tap_skip_reason - 1);
    tap_skip_reason[got > 0 ? got : 0] = 0;
    close(pfd[0]);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        printf("ok %d - %s\n", n, name);
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == TAP_EXIT_SKIP) {
        printf("ok %d - %s # SKIP %s\n", n, name, tap_skip_reason);
    } else {
        tap_failed++;
        if (WIFSIGNALED(st))
            printf("not ok %d - %s (killed by signal %d%s)\n", n, name, WTERMSIG(st),
                   WTERMSIG(st) == SIGALRM ? ": time-out" : "");
        else
            printf("not ok %d - %s (exit %d)\n", n, name, WEXITSTATUS(st));
    }
    printf("# time: %s: %.3f s of its %u s limit\n", name,
           (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, limit);
}

#define TAP_CASE(fn) tap_run(#fn, fn)

static int tap_done(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}

#endif
