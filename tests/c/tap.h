/* A tiny TAP test runner.  Each case runs in a forked child with a time-out,
 * so a crash or a hang fails that case and the others still run.
 *
 *   static void t_something(void) { CHECK(x == 1); CHECK_EQ_LONG(a, b); }
 *   int main(void) { TAP_CASE(t_something); ...; return tap_done(); }
 *
 * A case may call SKIP("reason") to report "ok N # SKIP reason". */
#ifndef ISOB_TESTS_TAP_H
#define ISOB_TESTS_TAP_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define TAP_TIMEOUT_S 60   /* per case */
#define TAP_EXIT_SKIP 77

static int tap_n, tap_failed;
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
        alarm(TAP_TIMEOUT_S);
        fn();
        tap_exit(0);
    }
    close(pfd[1]);
    int st = 0;
    waitpid(pid, &st, 0);
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
}

#define TAP_CASE(fn) tap_run(#fn, fn)

static int tap_done(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}

#endif
