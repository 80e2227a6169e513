/* The seccomp mechanism's own tests: beyond the conformance suite, show
 * that the filter lets the server's calls through, ends the server with
 * SIGSYS on a forbidden system call, and confines only the server.  Each
 * case forks (tap.h); no case waits without a time-out. */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "isobench/mechanism.h"
#include "isobench/seccomp_mech.h"
#include "tap.h"

/* Calls served in a row by the allowed-calls case. */
#define ALLOWED_CALLS 1000

static struct isob_comp *make(void)
{
    const struct isob_mechanism *m = isob_mechanism_find("seccomp");
    CHECK(m != NULL);
    char why[256] = "";
    if (m->probe(why, sizeof why) != 0)
        SKIP("seccomp: %s", why);
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    struct isob_comp *c = NULL;
    CHECK_EQ_LONG(isob_comp_create(m, &spec, &c), 0);
    return c;
}

static void t_allowed_calls_work(void)
{
    struct isob_comp *c = make();
    struct isob_msg *m = c->mech->shared(c);
    for (int i = 0; i < ALLOWED_CALLS; i++)
        CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_EMPTY), 0);
    m->arg[0] = 40;
    m->arg[1] = 2;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_ADD), 42);
    m->len = 4096;
    for (size_t i = 0; i < 4096; i++)
        m->data[i] = (unsigned char)i;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_ECHO), 4096);
    CHECK_EQ_LONG(m->data[1], (unsigned char)~1u);
    m->arg[0] = EPERM;
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_FAIL), -EPERM);
    /* The count includes the three calls above and the counting call. */
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_COUNT_CALLS), ALLOWED_CALLS + 4);
    isob_comp_destroy(c);
}

static void t_private_entry_needs_selftest(void)
{
    /* The forbidden-call entry is not served to ordinary calls, so a stray
     * call with its number cannot kill the server and hang the caller. */
    struct isob_comp *c = make();
    CHECK_EQ_LONG(isob_call(c, 1000), -ENOSYS);
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_EMPTY), 0);
    isob_comp_destroy(c);
}

static void t_only_the_server_is_confined(void)
{
    struct isob_comp *c = make();
    CHECK_EQ_LONG(isob_call(c, ISOB_ENTRY_EMPTY), 0);
    CHECK_EQ_LONG(prctl(PR_GET_SECCOMP), 0);
    isob_comp_destroy(c);
}

static void t_forbidden_call_kills_with_sigsys(void)
{
    isob_comp_destroy(make()); /* skips where seccomp is missing */
    int sig = -1;
    int rc = isob_seccomp_selftest_forbidden(&sig);
    if (rc)
        fprintf(stderr, "# selftest: %s\n", isob_strerror(rc));
    CHECK_EQ_LONG(rc, 0);
    fprintf(stderr, "# the server ended with signal %d (%s)\n", sig, sig ? strsignal(sig) : "none: it answered");
    CHECK_EQ_LONG(sig, SIGSYS);
}

static void t_clean_exit_is_allowed(void)
{
    isob_comp_destroy(make());
    int st = -1;
    int rc = isob_seccomp_selftest_exit(&st);
    if (rc)
        fprintf(stderr, "# selftest: %s\n", isob_strerror(rc));
    CHECK_EQ_LONG(rc, 0);
    if (WIFSIGNALED(st))
        fprintf(stderr, "# the server was killed by signal %d\n", WTERMSIG(st));
    CHECK(WIFEXITED(st));
    CHECK_EQ_LONG(WEXITSTATUS(st), 0);
}

int main(void)
{
    TAP_CASE(t_allowed_calls_work);
    TAP_CASE(t_private_entry_needs_selftest);
    TAP_CASE(t_only_the_server_is_confined);
    TAP_CASE(t_forbidden_call_kills_with_sigsys);
    TAP_CASE(t_clean_exit_is_allowed);
    return tap_done();
}
