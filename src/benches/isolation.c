/* The isolation test (see include/isobench/isolation.h). */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "isobench/isolation.h"

static sigjmp_buf fault_jmp;
static volatile sig_atomic_t fault_sig, fault_code;

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    fault_sig = sig;
    fault_code = si->si_code;
    siglongjmp(fault_jmp, 1);
}

static const char *segv_code_name(int code)
{
    switch (code) {
    case SEGV_MAPERR:
        return "SEGV_MAPERR: address not mapped";
    case SEGV_ACCERR:
        return "SEGV_ACCERR: access denied";
#ifdef SEGV_PKUERR
    case SEGV_PKUERR:
        return "SEGV_PKUERR: protection key denied";
#endif
    default:
        return "other code";
    }
}

static void describe_fault(char *buf, size_t len)
{
    snprintf(buf, len, "fault: %s (%s)", fault_sig == SIGSEGV ? "SIGSEGV" : "SIGBUS",
             fault_sig == SIGSEGV ? segv_code_name(fault_code) : "bus error");
}

int isob_isolation_test(const struct isob_mechanism *m, struct isob_isolation *r)
{
    memset(r, 0, sizeof *r);
    r->claims = (m->props & ISOB_ISOLATES_MEMORY) != 0;
    r->intact = -1;
    char why[256] = "";
    if (m->probe(why, sizeof why) != 0) {
        r->verdict = "skipped";
        snprintf(r->reason, sizeof r->reason, "%s", why);
        return 0;
    }
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    spec.server_cpu = -1;
    struct isob_comp *c;
    int rc = isob_comp_create(m, &spec, &c);
    if (rc) {
        r->verdict = "failed";
        snprintf(r->reason, sizeof r->reason, "create: %s", isob_strerror(rc));
        return 0;
    }
    struct isob_msg *msg = m->shared(c);
    msg->arg[0] = (int64_t)ISOB_SECRET;
    long ret = isob_call(c, ISOB_ENTRY_SECRET_PLANT);
    volatile uint64_t *addr = (volatile uint64_t *)(uintptr_t)msg->arg[1];
    if (ret != 0 || !addr) {
        r->verdict = "failed";
        snprintf(r->reason, sizeof r->reason, "planting the secret failed: %ld", ret);
        isob_comp_destroy(c);
        return 0;
    }

    struct sigaction sa, old_segv, old_bus;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);

    /* Volatile: they change between sigsetjmp and a siglongjmp out of the
     * fault handler, after which non-volatile locals are indeterminate (a
     * register copy made write_landed 1 after a faulting write). */
    volatile int read_leaked = 0, write_landed = 0;
    if (sigsetjmp(fault_jmp, 1) == 0) {
        uint64_t v = *addr;
        read_leaked = v == ISOB_SECRET;
        snprintf(r->read, sizeof r->read, "%s", read_leaked ? "no fault: read the secret"
                                                            : "no fault, but the address holds other data");
    } else {
        describe_fault(r->read, sizeof r->read);
    }
    if (sigsetjmp(fault_jmp, 1) == 0) {
        *addr = ~ISOB_SECRET;
        write_landed = 1;
        snprintf(r->write, sizeof r->write, "no fault: the write went through");
    } else {
        describe_fault(r->write, sizeof r->write);
    }
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);

    msg->arg[0] = (int64_t)ISOB_SECRET;
    r->intact = isob_call(c, ISOB_ENTRY_SECRET_CHECK) == 1;
    if (write_landed && r->intact)
        snprintf(r->write, sizeof r->write, "no fault, but the secret was not changed (other memory)");
    isob_comp_destroy(c);

    int held = !read_leaked && r->intact;
    if (!r->claims)
        r->verdict = "none";
    else if (held)
        r->verdict = "enforced";
    else {
        r->verdict = "leaked";
        snprintf(r->reason, sizeof r->reason, "the untrusted side %s%s%s",
                 read_leaked ? "read the secret" : "", read_leaked && !r->intact ? " and " : "",
                 !r->intact ? "changed the secret" : "");
    }
    return 0;
}
