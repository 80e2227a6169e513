/* The isolation matrix (see include/isobench/isolation.h). */
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/bench.h"
#include "isobench/inspect.h"
#include "isobench/isolation.h"
#include "isobench/server.h"

static sigjmp_buf fault_jmp;
static volatile sig_atomic_t fault_sig, fault_code;

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    fault_sig = sig;
    fault_code = si->si_code;
    siglongjmp(fault_jmp, 1);
}

static const char *const attacker_names[ISOB_ATK__COUNT] = {
    [ISOB_ATK_IN_PROCESS] = "in-process",
    [ISOB_ATK_SAME_UID] = "same-uid",
    [ISOB_ATK_OTHER_UID] = "other-uid",
    [ISOB_ATK_ROOT] = "root",
    [ISOB_ATK_PRE_ATTACHED] = "pre-attached",
};

const char *isob_attacker_name(enum isob_attacker a)
{
    return (unsigned)a < ISOB_ATK__COUNT ? attacker_names[a] : "?";
}

const char *isob_cell_verdict_name(int v)
{
    switch (v) {
    case ISOB_CELL_ENFORCED: return "enforced";
    case ISOB_CELL_LEAKS: return "leaks";
    case ISOB_CELL_NOT_APPLICABLE: return "not-applicable";
    default: return "untested";
    }
}

const char *isob_segv_code_name(int code)
{
    static __thread char other[32];
    switch (code) {
    case SEGV_MAPERR: return "SEGV_MAPERR";
    case SEGV_ACCERR: return "SEGV_ACCERR";
#ifdef SEGV_PKUERR
    case SEGV_PKUERR: return "SEGV_PKUERR";
#endif
    default:
        snprintf(other, sizeof other, "si_code %d", code);
        return other;
    }
}

static const char *errno_name(int err)
{
    return isob_errno_name(err);
}

/* Append to a fixed buffer, cutting what does not fit. */
static void add(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(char *buf, size_t len, const char *fmt, ...)
{
    size_t used = strnlen(buf, len);
    if (used + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

static int expected_fault(const struct isob_mechanism *m)
{
    if (m->fault_code)
        return m->fault_code;
    return (m->props & ISOB_SEPARATE_AS) ? SEGV_MAPERR : 0;
}

static void describe_fault(char *buf, size_t len)
{
    if (fault_sig == SIGSEGV)
        snprintf(buf, len, "fault: SIGSEGV (%s)", isob_segv_code_name(fault_code));
    else
        snprintf(buf, len, "fault: SIGBUS (si_code %d)", (int)fault_code);
}

/* The caller's own step before it creates a compartment of its own
 * process (server.h), as isob_comp_create takes it (isob_caller_harden):
 * only where the compartment is another process, which then inherits it.
 * An in-process compartment's secret is in the caller, whose own threads
 * are its same-uid attacker, and which any code of the process could make
 * dumpable again: the step would change what that cell measures, not what
 * the mechanism defends.  0 closed (or, with *stays set, allowed to stay
 * dumpable by ISOB_ALLOW_DUMPABLE=1), 1 not applicable, or a negative
 * errno. */
static int close_caller(const struct isob_mechanism *m, int *stays)
{
    char why[200];
    *stays = 0;
    return (m->props & ISOB_SEPARATE_AS) ? isob_caller_harden(0, stays, why, sizeof why) : 1;
}

static long plant(struct isob_comp *c, uint64_t *trusted_addr)
{
    struct isob_msg *msg = c->mech->shared(c);
    msg->arg[0] = (int64_t)ISOB_SECRET;
    msg->arg[1] = 0;
    long ret = isob_call(c, ISOB_ENTRY_SECRET_PLANT);
    *trusted_addr = (uint64_t)msg->arg[1];
    return ret;
}

/* 1 intact, 0 changed, a negative errno when the compartment did not say. */
static long secret_intact(struct isob_comp *c)
{
    c->mech->shared(c)->arg[0] = (int64_t)ISOB_SECRET;
    long ret = isob_call(c, ISOB_ENTRY_SECRET_CHECK);
    return ret < 0 ? ret : ret == 1;
}

/* The caller reads, then writes, the secret by its address. */
static void in_process_by_address(struct isob_comp *c, uint64_t trusted_addr, struct isob_isolation *r)
{
    struct isob_cell *cell = &r->cells[ISOB_ATK_IN_PROCESS];
    volatile uint64_t *addr = (volatile uint64_t *)(uintptr_t)trusted_addr;
    struct sigaction sa, old_segv, old_bus;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);

    /* Volatile: they change between sigsetjmp and a siglongjmp out of the
     * fault handler, after which non-volatile locals are indeterminate. */
    volatile int read_leaked = 0, read_other = 0, read_fault = 0, write_fault = 0, wrote = 0;
    volatile int read_code = 0, write_code = 0;
    if (sigsetjmp(fault_jmp, 1) == 0) {
        uint64_t v = *addr;
        read_leaked = v == ISOB_SECRET;
        read_other = !read_leaked;
        snprintf(r->read, sizeof r->read, "%s", read_leaked ? "no fault: read the secret"
                                                            : "no fault, but the address holds other data");
    } else {
        read_fault = fault_sig;
        read_code = fault_code;
        describe_fault(r->read, sizeof r->read);
    }
    /* Where the read found other data the address is not the secret's in
     * this process, and a write would only damage the caller. */
    if (read_other) {
        snprintf(r->write, sizeof r->write, "not tried: the address holds other data here");
    } else if (sigsetjmp(fault_jmp, 1) == 0) {
        *addr = ~ISOB_SECRET;
        wrote = 1;
        snprintf(r->write, sizeof r->write, "no fault: the write went through");
    } else {
        write_fault = fault_sig;
        write_code = fault_code;
        describe_fault(r->write, sizeof r->write);
    }
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);

    long ok = secret_intact(c);
    r->intact = ok < 0 ? -1 : (int)ok;
    if (wrote && r->intact == 1)
        snprintf(r->write, sizeof r->write, "no fault, but the secret was not changed (other memory)");

    int expect = r->expect_fault;
    snprintf(cell->method, sizeof cell->method,
             "the caller reads, then writes, the secret by its address under a SIGSEGV handler");
    snprintf(cell->evidence, sizeof cell->evidence, "read: %s; write: %s; secret %s", r->read, r->write,
             r->intact == 1 ? "intact" : r->intact == 0 ? "changed" : "unknown");
    if (expect)
        add(cell->evidence, sizeof cell->evidence, "; expected %s", isob_segv_code_name(expect));

    int leaked = read_leaked || r->intact == 0;
    if (!r->claims) {
        r->verdict = "none";
        cell->verdict = leaked ? ISOB_CELL_LEAKS : ISOB_CELL_UNTESTED;
        if (!leaked)
            snprintf(r->reason, sizeof r->reason,
                     "claims no isolation, yet nothing leaked: the test did not reach the heap");
    } else if (leaked) {
        r->verdict = "leaked";
        cell->verdict = ISOB_CELL_LEAKS;
        snprintf(r->reason, sizeof r->reason, "the untrusted side %s%s%s",
                 read_leaked ? "read the secret" : "", read_leaked && r->intact == 0 ? " and " : "",
                 r->intact == 0 ? "changed the secret" : "");
    } else if (expect && read_fault == SIGSEGV && read_code == expect && write_fault == SIGSEGV &&
               write_code == expect && r->intact == 1) {
        r->verdict = "enforced";
        cell->verdict = ISOB_CELL_ENFORCED;
    } else {
        /* Nothing leaked, but not for the reason the mechanism gives: the
         * test did not show what it is there to show. */
        r->verdict = "unexpected";
        cell->verdict = ISOB_CELL_UNTESTED;
        if (!expect)
            snprintf(r->reason, sizeof r->reason, "the mechanism declares no expected fault (fault_code)");
        else if (r->intact != 1)
            snprintf(r->reason, sizeof r->reason, "the compartment could not say whether the secret is intact");
        else
            snprintf(r->reason, sizeof r->reason, "expected %s on both the read and the write",
                     isob_segv_code_name(expect));
    }
    if (r->reason[0] && cell->verdict != ISOB_CELL_LEAKS)
        add(cell->evidence, sizeof cell->evidence, " (%s)", r->reason);
}

/* The in-process cell of a mechanism with an escape op. */
static void in_process_escape(struct isob_comp *c, uint64_t trusted_addr, struct isob_isolation *r)
{
    struct isob_cell *cell = &r->cells[ISOB_ATK_IN_PROCESS];
    int rc = c->mech->escape(c, trusted_addr, cell);
    long ok = secret_intact(c);
    r->intact = ok < 0 ? -1 : (int)ok;
    if (rc) {
        cell->verdict = ISOB_CELL_UNTESTED;
        snprintf(r->reason, sizeof r->reason, "escape attempts: %s", isob_strerror(rc));
        add(cell->evidence, sizeof cell->evidence, " (%s)", r->reason);
    } else if (cell->verdict == ISOB_CELL_ENFORCED && r->intact != 1) {
        cell->verdict = ISOB_CELL_LEAKS;
        add(cell->evidence, sizeof cell->evidence, "; but the secret was changed");
    }
    snprintf(r->read, sizeof r->read, "escape attempts by the untrusted side (see the in-process cell)");
    r->write[0] = 0;
    if (cell->verdict == ISOB_CELL_ENFORCED) {
        r->verdict = r->claims ? "enforced" : "unexpected";
    } else if (cell->verdict == ISOB_CELL_LEAKS) {
        r->verdict = r->claims ? "leaked" : "none";
        if (!r->reason[0])
            add(r->reason, sizeof r->reason, "%s", cell->evidence);
    } else {
        r->verdict = "unexpected";
    }
}

static void all_untested(struct isob_isolation *r, const char *why)
{
    for (int a = 0; a < ISOB_ATK__COUNT; a++) {
        r->cells[a].verdict = ISOB_CELL_UNTESTED;
        snprintf(r->cells[a].evidence, sizeof r->cells[a].evidence, "%s", why);
    }
}

/* A cell from the results of the probes of one identity.  A probe leaks
 * when it read or changed the secret; pidfd_getfd leaks when it is granted
 * on a compartment's own process (its descriptors are the compartment's),
 * and is only reported on the caller's, whose descriptors are its own. */
static int probe_leaks(const struct isob_osprobe_result *r, int p, int self)
{
    return r->secret_seen || r->secret_changed ||
           (p == ISOB_OSP_PIDFD_GETFD && !self && r->outcome == ISOB_OSP_GRANTED);
}

static void os_cell(struct isob_cell *cell, enum isob_identity id, int self)
{
    char leaked[200] = "", seen[480] = "";
    int leaks = 0, denied = 0, counted = 0;
    for (int p = 0; p < ISOB_OSP__COUNT; p++) {
        const struct isob_osprobe_result *r = &cell->res[p];
        const char *name = isob_osprobe_name((enum isob_osprobe)p);
        int informational = p == ISOB_OSP_PIDFD_GETFD && self;
        int leak = probe_leaks(r, p, self);
        add(seen, sizeof seen, "%s%s: ", p ? "; " : "", name);
        if (r->secret_seen)
            add(seen, sizeof seen, "read the secret");
        else if (r->secret_changed)
            add(seen, sizeof seen, "overwrote the secret%s", r->restored ? " (restored)" : "");
        else if (r->outcome == ISOB_OSP_DENIED)
            add(seen, sizeof seen, "%s", errno_name(r->err));
        else if (r->outcome == ISOB_OSP_UNTESTED)
            add(seen, sizeof seen, "untested (%s)", r->note[0] ? r->note : r->err ? errno_name(r->err) : "not tried");
        else
            add(seen, sizeof seen, "granted%s", informational ? " (its own descriptors: not counted)" : "");
        if (r->outcome == ISOB_OSP_GRANTED && !r->secret_seen && !r->secret_changed && r->note[0] &&
            p != ISOB_OSP_PIDFD_GETFD)
            add(seen, sizeof seen, " (%s)", r->note);
        if (informational)
            continue;
        counted++;
        if (leak) {
            add(leaked, sizeof leaked, "%s%s", leaks ? ", " : "", name);
            leaks++;
        } else if (r->outcome == ISOB_OSP_DENIED) {
            denied++;
        }
    }
    if (leaks) {
        cell->verdict = ISOB_CELL_LEAKS;
        snprintf(cell->method, sizeof cell->method, "%s, as %s", leaked, cell->who.how);
    } else if (denied == counted) {
        cell->verdict = ISOB_CELL_ENFORCED;
        snprintf(cell->method, sizeof cell->method, "all %d probes refused, as %s", counted, cell->who.how);
    } else {
        cell->verdict = ISOB_CELL_UNTESTED;
        snprintf(cell->method, sizeof cell->method, "not every probe could run and none got through, as %s",
                 cell->who.how);
    }
    snprintf(cell->evidence, sizeof cell->evidence, "%s", seen);
    /* Why it went the way it did, where the kernel's rule is plain. */
    if (leaks && self && id == ISOB_ID_SAME_UID)
        add(cell->evidence, sizeof cell->evidence,
            "; the prober is a thread of the caller, whose own memory the kernel lets it reach");
    if (id == ISOB_ID_ROOT)
        add(cell->evidence, sizeof cell->evidence, "; %s", cell->who.cap_sys_ptrace
            ? "CAP_SYS_PTRACE held, which passes the kernel's ptrace access check, dumpable or not"
            : "CAP_SYS_PTRACE not held");
}

/* The same-uid cell when the caller is root.  A thread of root without
 * capabilities still cannot reach a process that holds them (the kernel's
 * capability-subset rule), which would make every compartment look closed
 * for a reason that is not the mechanism's.  So the caller is played by a
 * helper switched to an unprivileged uid (dumpable, like any process of an
 * ordinary user): it creates a compartment of its own and probes it from
 * a thread, as an unprivileged untrusted side would. */
struct same_uid_report {
    int rc;
    char why[160];
    int self;
    struct isob_identity_info who;
    struct isob_osprobe_result res[ISOB_OSP__COUNT];
    long intact;
    long tracer_pid;   /* the helper's TracerPid when it created the compartment */
    int closed;        /* its isob_caller_close_to_readers() */
};

static void same_uid_helper(void *arg, void *out)
{
    const struct isob_mechanism *m = arg;
    struct same_uid_report *rep = out;
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    struct isob_comp *c;
    uint64_t trusted_addr = 0;
    /* As the matrix's own caller does (begin). */
    rep->tracer_pid = isob_tracer_pid(0);
    int stays;
    rep->closed = close_caller(m, &stays);
    rep->rc = isob_comp_create(m, &spec, &c);
    if (rep->rc) {
        snprintf(rep->why, sizeof rep->why, "create as uid %d: %s", ISOB_OSP_OTHER_UID, isob_strerror(rep->rc));
        return;
    }
    struct isob_place where = {0, 0};
    if (plant(c, &trusted_addr) != 0 || !trusted_addr) {
        rep->rc = -EIO;
        snprintf(rep->why, sizeof rep->why, "planting the secret as uid %d failed", ISOB_OSP_OTHER_UID);
    } else {
        where.addr = (uintptr_t)trusted_addr;
        rep->rc = m->locate ? m->locate(c, trusted_addr, &where) : 0;
        if (rep->rc)
            snprintf(rep->why, sizeof rep->why, "cannot locate the trusted heap: %s", isob_strerror(rep->rc));
    }
    if (rep->rc == 0) {
        rep->self = where.pid == 0 || where.pid == getpid();
        struct isob_osprobe_target t = {rep->self ? getpid() : where.pid, where.addr, ISOB_SECRET, 0};
        rep->rc = isob_osprobe_as(ISOB_ID_SAME_UID, &t, rep->res, &rep->who);
        if (rep->rc)
            snprintf(rep->why, sizeof rep->why, "%s", rep->who.why);
        snprintf(rep->who.how, sizeof rep->who.how, "a thread of an unprivileged caller (uid %ld) probing its own compartment",
                 rep->who.uid);
        rep->intact = secret_intact(c);
    }
    isob_comp_destroy(c);
}

static void same_uid_as_root(const struct isob_mechanism *m, struct isob_cell *cell, struct isob_isolation *r)
{
    struct same_uid_report rep;
    char why[160] = "";
    int rc = isob_osprobe_helper(ISOB_OSP_OTHER_UID, same_uid_helper, (void *)m, &rep, sizeof rep, why, sizeof why);
    if (rc == 0 && rep.rc != 0) {
        rc = rep.rc;
        snprintf(why, sizeof why, "%s", rep.why);
    }
    if (rc) {
        cell->verdict = ISOB_CELL_UNTESTED;
        snprintf(cell->method, sizeof cell->method, "not probed");
        snprintf(cell->evidence, sizeof cell->evidence, "%s", why);
        return;
    }
    cell->who = rep.who;
    memcpy(cell->res, rep.res, sizeof rep.res);
    cell->probed = 1;
    r->same_uid_self = rep.self;
    r->same_uid_tracer_pid = rep.tracer_pid;
    os_cell(cell, ISOB_ID_SAME_UID, rep.self);
    if (rep.intact != 1) {
        r->secret_intact_after = rep.intact < 0 ? -1 : 0;
        add(cell->evidence, sizeof cell->evidence, "; the secret was %s afterwards",
            rep.intact < 0 ? "of unknown state" : "left changed");
    }
}

/* The fork window (isolation.h): a racer against the server's fork, in a
 * helper that stands for a freshly started caller (dumpable, as every
 * process is when it starts; as root: uid ISOB_OSP_OTHER_UID), which
 * creates compartments while the racer spins: as isob_comp_create leaves
 * it (non-dumpable before the fork), or allowed to stay dumpable. */
struct race_arg {
    const struct isob_mechanism *m;
    int dumpable;
};

struct race_report {
    int rc;
    char why[160];
    int stays;              /* the caller was dumpable at creation */
    int tries, seen, opened, first_read, refused_err;
};

/* How long one run may take: ISOB_RACE_TRIES creations, each a fork. */
#define RACE_HELPER_TIMEOUT_MS 120000

static void race_helper(void *arg, void *out)
{
    const struct race_arg *ra = arg;
    struct race_report *rep = out;
    prctl(PR_SET_DUMPABLE, 1);
    struct isob_racer racer;
    rep->rc = isob_racer_start(&racer, rep->why, sizeof rep->why);
    if (rep->rc)
        return;
    for (int i = 0; i < ISOB_RACE_TRIES; i++) {
        if ((rep->rc = isob_racer_arm(&racer)) != 0) {
            snprintf(rep->why, sizeof rep->why, "the racer did not answer: %s", isob_strerror(rep->rc));
            break;
        }
        struct isob_comp_spec spec;
        isob_spec_defaults(&spec);
        spec.allow_dumpable = ra->dumpable;
        struct isob_comp *c;
        rep->rc = isob_comp_create(ra->m, &spec, &c);
        /* As the server inherited it: nothing made the caller dumpable
         * again between its fork and here. */
        rep->stays = prctl(PR_GET_DUMPABLE) == 1;
        if (rep->rc) {
            const char *w = isob_comp_create_why();
            snprintf(rep->why, sizeof rep->why, "create: %s", w ? w : isob_strerror(rep->rc));
            struct isob_racer_try t;
            isob_racer_collect(&racer, 0, 0, 0, &t);
            break;
        }
        uint64_t addr = 0;
        struct isob_place where = {0, 0};
        if (plant(c, &addr) != 0 || !addr) {
            rep->rc = -EIO;
            snprintf(rep->why, sizeof rep->why, "planting the secret failed");
        } else {
            where.addr = (uintptr_t)addr;
            rep->rc = ra->m->locate ? ra->m->locate(c, addr, &where) : 0;
            if (rep->rc)
                snprintf(rep->why, sizeof rep->why, "locating the secret: %s", isob_strerror(rep->rc));
            else if (where.pid == 0 || where.pid == getpid()) {
                rep->rc = -EINVAL;
                snprintf(rep->why, sizeof rep->why, "the trusted heap is in the caller's own process");
            }
        }
        struct isob_racer_try t = {0};
        int crc = isob_racer_collect(&racer, rep->rc ? 0 : where.pid, where.addr, ISOB_SECRET, &t);
        isob_comp_destroy(c);
        if (rep->rc)
            break;
        if (crc) {
            rep->rc = crc;
            snprintf(rep->why, sizeof rep->why, "the racer did not answer: %s", isob_strerror(crc));
            break;
        }
        rep->tries++;
        rep->seen += t.seen;
        rep->opened += t.opened;
        if (t.seen && !t.opened)
            rep->refused_err = t.err;
        if (t.secret_seen && !rep->first_read)
            rep->first_read = rep->tries;
        /* The window is shown once the secret was read. */
        if (rep->first_read)
            break;
    }
    isob_racer_stop(&racer);
}

int isob_fork_race(const struct isob_mechanism *m, int dumpable, struct isob_race *out)
{
    struct race_arg ra = {m, dumpable};
    struct race_report rep;
    memset(&rep, 0, sizeof rep);
    memset(out, 0, sizeof *out);
    struct isob_cred cred = {geteuid() == 0 ? ISOB_OSP_OTHER_UID : -1, 0, RACE_HELPER_TIMEOUT_MS};
    char why[160] = "";
    int rc = isob_osprobe_helper_cred(&cred, race_helper, &ra, &rep, sizeof rep, why, sizeof why);
    out->dumpable = rep.stays;
    out->tries = rep.tries;
    out->seen = rep.seen;
    out->opened = rep.opened;
    out->first_read = rep.first_read;
    out->refused_err = rep.refused_err;
    out->ran = rc == 0;
    if (rc || (rep.rc && !rep.first_read)) {
        out->verdict = ISOB_CELL_UNTESTED;
        snprintf(out->why, sizeof out->why, "%s", rc ? why : rep.why);
    } else if (rep.first_read) {
        out->verdict = ISOB_CELL_LEAKS;
    } else if (dumpable && !rep.stays && rep.tries) {
        out->verdict = ISOB_CELL_UNTESTED;
        snprintf(out->why, sizeof out->why, "the caller was not dumpable at creation");
    } else if (rep.seen == 0) {
        out->verdict = ISOB_CELL_UNTESTED;
        snprintf(out->why, sizeof out->why, "the racer never met the server's process id in %d tries "
                 "(other processes took the ids it spun over)", rep.tries);
    } else if (dumpable) {
        /* The window was there and not won: no claim either way. */
        out->verdict = ISOB_CELL_UNTESTED;
        snprintf(out->why, sizeof out->why, "the racer did not win the window in %d tries", rep.tries);
    } else {
        out->verdict = rep.opened ? ISOB_CELL_UNTESTED : ISOB_CELL_ENFORCED;
        if (rep.opened)
            snprintf(out->why, sizeof out->why, "the racer opened the server but read other data");
    }
    return rc;
}

static void race_describe(const struct isob_race *x, char *ev, size_t n)
{
    add(ev, n, "%s caller at creation: ", x->dumpable ? "a dumpable" : "a non-dumpable");
    if (!x->ran || (x->verdict == ISOB_CELL_UNTESTED && x->tries == 0)) {
        add(ev, n, "not raced (%s)", x->why);
        return;
    }
    add(ev, n, "%d tr%s, the racer met the server's process id in %d", x->tries, x->tries == 1 ? "y" : "ies",
        x->seen);
    if (x->first_read)
        add(ev, n, ", opened /proc/SERVER/mem before the server's hardening and read the secret through it "
                   "afterwards at try %d", x->first_read);
    else if (x->opened)
        add(ev, n, ", opened /proc/SERVER/mem %d time%s but read other data", x->opened, x->opened == 1 ? "" : "s");
    else if (x->seen)
        add(ev, n, ", its every open refused (%s)", errno_name(x->refused_err));
    if (x->why[0] && !x->first_read)
        add(ev, n, " (%s)", x->why);
}

/* The same-uid cell of a separate address space, after its probes: the
 * two racer runs, and the cell leaks when the racer read the secret from
 * a caller as this matrix's caller created it. */
static void race_cell(const struct isob_mechanism *m, struct isob_cell *cell, const struct isob_isolation *r)
{
    cell->raced = 1;
    isob_fork_race(m, 0, &cell->race[0]);
    isob_fork_race(m, 1, &cell->race[1]);
    add(cell->evidence, sizeof cell->evidence, "; fork-window racer: ");
    race_describe(&cell->race[0], cell->evidence, sizeof cell->evidence);
    add(cell->evidence, sizeof cell->evidence, "; ");
    race_describe(&cell->race[1], cell->evidence, sizeof cell->evidence);
    const struct isob_race *as_here = &cell->race[r->caller_dumpable ? 1 : 0];
    if (as_here->verdict == ISOB_CELL_LEAKS) {
        cell->verdict = ISOB_CELL_LEAKS;
        snprintf(cell->method, sizeof cell->method, "/proc/PID/mem opened in the fork window and read after "
                 "hardening, by a same-uid racer (%s caller at creation)",
                 as_here->dumpable ? "a dumpable" : "a non-dumpable");
    } else if (as_here->verdict == ISOB_CELL_UNTESTED && cell->verdict == ISOB_CELL_ENFORCED) {
        /* The probes were refused, but the window was not tried. */
        cell->verdict = ISOB_CELL_UNTESTED;
        add(cell->method, sizeof cell->method, "; the fork window untested");
    }
}

/* The pre-attached cell.  A helper stands for a freshly started caller
 * (dumpable, as every process is when it starts; as root: uid
 * ISOB_OSP_OTHER_UID, as for the same-uid cell); the tracer of osprobe.h
 * attaches to it first, then it does what the matrix's caller does: makes
 * itself non-dumpable, creates the compartment, plants the secret; then the
 * tracer reads the process that holds it.  Twice: with the naive tracer,
 * which does not hide from TracerPid, and with the hiding one
 * (ISOB_TRACER_HIDE), which rewrites TracerPid to 0 in what its tracees
 * read; the cell is the worse of the two. */
struct tracer_report {
    char why[160];          /* why the tracer did not attach */
    int attach_rc;
    long tracer;            /* the tracer's pid */
    long tracer_pid;        /* the caller's TracerPid at creation, as the caller read it */
    int closed;             /* the caller's isob_caller_close_to_readers(), as it saw it */
    int create_rc;
    int step_rc;            /* planting or locating the secret; the tracer's probe */
    const char *step;
    int self;               /* the secret is in the caller's own process */
    long target_pid;
    long intact;
    struct isob_tracer_stats stats;
    struct isob_osprobe_result res[ISOB_TRACER_PROBES];
};

struct tracer_arg {
    const struct isob_mechanism *m;
    unsigned flags;         /* isob_tracer_attach_mode's */
};

/* How long the traced helper may take: every system call stops twice. */
#define TRACER_HELPER_TIMEOUT_MS 30000

static void pre_attached_helper(void *arg, void *out)
{
    const struct tracer_arg *ta = arg;
    const struct isob_mechanism *m = ta->m;
    struct tracer_report *rep = out;
    /* A process is dumpable when it starts; the matrix's own caller is
     * not any more (begin), and this helper is its fork. */
    prctl(PR_SET_DUMPABLE, 1);
    struct isob_tracer t;
    rep->attach_rc = isob_tracer_attach_mode(&t, ta->flags, rep->why, sizeof rep->why);
    if (rep->attach_rc)
        return;
    rep->tracer = t.pid;
    rep->tracer_pid = isob_tracer_pid(0);
    int stays;
    rep->closed = close_caller(m, &stays);
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    struct isob_comp *c;
    rep->create_rc = isob_comp_create(m, &spec, &c);
    if (rep->create_rc == 0) {
        uint64_t addr = 0;
        struct isob_place where = {0, 0};
        if (plant(c, &addr) != 0 || !addr) {
            rep->step = "planting the secret";
            rep->step_rc = -EIO;
        } else {
            where.addr = (uintptr_t)addr;
            rep->step_rc = m->locate ? m->locate(c, addr, &where) : 0;
            rep->step = "locating the secret";
        }
        if (rep->step_rc == 0) {
            rep->self = where.pid == 0 || where.pid == getpid();
            rep->target_pid = rep->self ? getpid() : where.pid;
            struct isob_osprobe_target tg = {(pid_t)rep->target_pid, where.addr, ISOB_SECRET, 0};
            rep->step = "the tracer's probe";
            rep->step_rc = isob_tracer_probe(&t, &tg, rep->res);
            rep->intact = secret_intact(c);
        }
        isob_comp_destroy(c);
    }
    isob_tracer_stop(&t, &rep->stats);
}

/* One tracer's run: its verdict (enum isob_cell_verdict), its account
 * added to ev, and the probes that read the secret added to leaked. */
static int tracer_run(const struct tracer_report *rep, int rc, const char *why, char *ev, size_t n,
                      char *leaked, size_t leaked_len)
{
    if (rc) {
        add(ev, n, "not probed: %s", why);
        return ISOB_CELL_UNTESTED;
    }
    if (rep->attach_rc) {
        int refused = rep->attach_rc == -EPERM || rep->attach_rc == -EACCES;
        add(ev, n, "%s%s", refused ? "the kernel refused the attach: " : "", rep->why);
        return refused ? ISOB_CELL_ENFORCED : ISOB_CELL_UNTESTED;
    }
    const struct isob_tracer_stats *st = &rep->stats;
    add(ev, n, "attached (pid %ld), followed %d process%s, rewrote PR_SET_DUMPABLE 0 to 1 %d time%s, faked "
               "PR_GET_DUMPABLE %d time%s",
        rep->tracer, st->followed, st->followed == 1 ? "" : "es", st->set_rewritten,
        st->set_rewritten == 1 ? "" : "s", st->get_faked, st->get_faked == 1 ? "" : "s");
    if (st->hides)
        add(ev, n, ", rewrote TracerPid to 0 %d time%s", st->tracerpid_hidden,
            st->tracerpid_hidden == 1 ? "" : "s");
    add(ev, n, "; the caller read TracerPid %ld at creation; its non-dumpable step %s", rep->tracer_pid,
        rep->closed == 1 ? "not taken (in-process)" : rep->closed ? isob_strerror(rep->closed) : "reported success");
    if (rep->create_rc) {
        /* The same creation succeeded untraced (begin), so a refusal is the
         * server's check of TracerPid (server.h), which says EPERM. */
        if (rep->create_rc == -ISOB_ETRACED) {
            add(ev, n, "; creation refused (%s): the server found itself traced after making itself "
                       "non-dumpable and held no trusted heap", isob_errno_name(rep->create_rc));
            return ISOB_CELL_ENFORCED;
        }
        add(ev, n, "; creation failed while traced: %s", isob_strerror(rep->create_rc));
        return ISOB_CELL_UNTESTED;
    }
    if (rep->step_rc) {
        add(ev, n, "; %s failed: %s", rep->step, isob_strerror(rep->step_rc));
        return ISOB_CELL_UNTESTED;
    }
    add(ev, n, "; %s (pid %ld)", rep->self ? "the caller's own process" : "created; the compartment's process",
        rep->target_pid);
    int leaks = 0, denied = 0;
    for (int p = 0; p < ISOB_TRACER_PROBES; p++) {
        const struct isob_osprobe_result *pr = &rep->res[p];
        add(ev, n, "; %s: ", isob_tracer_probe_name(p));
        if (pr->secret_seen) {
            add(ev, n, "read the secret");
            if (leaked)
                add(leaked, leaked_len, "%s%s", leaks ? ", " : "", isob_tracer_probe_name(p));
            leaks++;
        } else if (pr->outcome == ISOB_OSP_DENIED) {
            add(ev, n, "%s", errno_name(pr->err));
            denied++;
        } else if (pr->outcome == ISOB_OSP_GRANTED) {
            add(ev, n, "granted, other data");
        } else {
            add(ev, n, "untested (%s)", pr->note[0] ? pr->note : errno_name(pr->err));
        }
    }
    if (rep->intact != 1)
        add(ev, n, "; the secret was %s afterwards", rep->intact < 0 ? "of unknown state" : "changed");
    return leaks ? ISOB_CELL_LEAKS : denied == ISOB_TRACER_PROBES ? ISOB_CELL_ENFORCED : ISOB_CELL_UNTESTED;
}

static void pre_attached_cell(const struct isob_mechanism *m, struct isob_cell *cell, struct isob_isolation *r)
{
    static const char *const who[2] = {"a tracer that does not hide",
                                       "one that rewrites TracerPid to 0 in what its tracees read"};
    struct tracer_report rep[2];
    int rc[2], verdict[2];
    char why[2][160], leaked[2][80];
    struct isob_cred cred = {geteuid() == 0 ? ISOB_OSP_OTHER_UID : -1, 0, TRACER_HELPER_TIMEOUT_MS};
    long uid = cred.uid >= 0 ? cred.uid : (long)getuid();
    const char *yama = r->yama < 0 ? "absent" : r->yama == 0 ? "0" : r->yama == 1 ? "1" : r->yama == 2 ? "2" : "3";
    snprintf(cell->evidence, sizeof cell->evidence, "Yama ptrace_scope: %s", yama);
    for (int i = 0; i < 2; i++) {
        struct tracer_arg ta = {m, i ? ISOB_TRACER_HIDE : 0};
        memset(&rep[i], 0, sizeof rep[i]);
        why[i][0] = leaked[i][0] = 0;
        rc[i] = isob_osprobe_helper_cred(&cred, pre_attached_helper, &ta, &rep[i], sizeof rep[i], why[i],
                                         sizeof why[i]);
        add(cell->evidence, sizeof cell->evidence, "; %s: ", who[i]);
        verdict[i] = tracer_run(&rep[i], rc[i], why[i], cell->evidence, sizeof cell->evidence, leaked[i],
                                sizeof leaked[i]);
        cell->truns[i].ran = rc[i] == 0;
        cell->truns[i].verdict = verdict[i];
        cell->truns[i].attach_rc = rc[i] ? 0 : rep[i].attach_rc;
        cell->truns[i].create_rc = rc[i] || rep[i].attach_rc ? 0 : rep[i].create_rc;
        cell->truns[i].caller_tracer_pid = rep[i].tracer_pid;
        cell->truns[i].stats = rep[i].stats;
    }
    /* The worse of the two: leaks if either read the secret, enforced only
     * if both were kept out. */
    int shown = verdict[1] == ISOB_CELL_LEAKS || verdict[0] != ISOB_CELL_LEAKS ? 1 : 0;
    cell->verdict = verdict[0] == ISOB_CELL_LEAKS || verdict[1] == ISOB_CELL_LEAKS ? ISOB_CELL_LEAKS
                    : verdict[0] == ISOB_CELL_ENFORCED && verdict[1] == ISOB_CELL_ENFORCED ? ISOB_CELL_ENFORCED
                    : ISOB_CELL_UNTESTED;
    if (rc[shown] == 0 && rep[shown].attach_rc == 0) {
        cell->traced = 1;
        cell->tstats = rep[shown].stats;
        if (rep[shown].create_rc == 0 && rep[shown].step_rc == 0) {
            memcpy(cell->tres, rep[shown].res, sizeof rep[shown].res);
            cell->tprobed = 1;
        }
    }
    if (cell->verdict == ISOB_CELL_LEAKS)
        snprintf(cell->method, sizeof cell->method, "%s, by a uid %ld tracer attached to the caller before "
                 "creation%s", leaked[shown], uid, verdict[0] == ISOB_CELL_LEAKS ? "" : " that hides from TracerPid");
    else
        snprintf(cell->method, sizeof cell->method,
                 "a uid %ld tracer seizes the caller before creation, follows forks, keeps them dumpable; "
                 "once as is, once hiding from TracerPid; process_vm_readv, /proc/PID/mem", uid);
}

/* What each cell covers, and under what it was measured and holds. */
static void conditions(const struct isob_mechanism *m, struct isob_isolation *r)
{
    const char *yama = r->yama < 0 ? "absent" : r->yama == 0 ? "0" : r->yama == 1 ? "1" : r->yama == 2 ? "2" : "3";
    char *c = r->cells[ISOB_ATK_IN_PROCESS].condition;
    size_t n = sizeof r->cells[0].condition;
    if (!r->claims)
        snprintf(c, n, "none claimed: the caller's loads and stores reach the compartment's memory");
    else if (m->escape)
        snprintf(c, n, "covers the guest's own attempts on host memory (the mechanism's escape tests); "
                       "the host's code is trusted and not tested");
#ifdef SEGV_PKUERR
    else if (m->fault_code == SEGV_PKUERR)
        snprintf(c, n, "covers loads and stores by address from untrusted code (PKRU denies the trusted "
                       "key) and a call of the C library's pkey_set(key, 0) (closed: create traps "
                       "stray WRPKRUs); not a jump with chosen registers to an XRSTOR (the dynamic "
                       "loader's), nor sigreturn frames (a handler's or a forged one that writes PKRU), nor the "
                       "kernel's ways into an open window (rseq abort handlers, signals on an alternate "
                       "stack, io_uring task work), nor C library "
                       "code replaced before create (set-up calls it with the new key open), nor "
                       "system calls that undo the key (pkey_mprotect to key 0, a freed key another "
                       "thread keeps open, madvise, mprotect that writes a closed WRPKRU back): "
                       "not defended, shown in tests/vm and mpk-strays (docs/mechanisms.md)");
#endif
    else if (m->props & ISOB_SEPARATE_AS)
        snprintf(c, n, "covers loads and stores by address from the caller: the trusted heap is not mapped "
                       "in the caller's address space");
    else
        snprintf(c, n, "covers loads and stores by address from the caller while the compartment is closed");

    c = r->cells[ISOB_ATK_SAME_UID].condition;
    int separate = (m->props & ISOB_SEPARATE_AS) != 0;
    long tracer = geteuid() == 0 ? r->same_uid_tracer_pid : r->caller_tracer_pid;
    if (separate)
        snprintf(c, n, "for compartments created by a caller non-dumpable at creation (isob_comp_create makes "
                       "it so before the fork; ISOB_ALLOW_DUMPABLE=1 leaves it dumpable, and a same-uid racer "
                       "then opens /proc/SERVER/mem in the fork window: fork_window) while no process traced "
                       "the caller (Yama ptrace_scope: %s; the caller's TracerPid at creation: %ld); this "
                       "caller was %s at creation; a tracer attached before creation is the pre-attached cell",
                 yama, tracer, r->caller_dumpable ? "dumpable (ISOB_ALLOW_DUMPABLE=1)" : "non-dumpable");
    else
        snprintf(c, n, "the secret lives in the caller's own process: any thread of it reaches it, and a "
                       "separate same-uid process while the caller is dumpable (Yama ptrace_scope: %s)", yama);
    if (strcmp(m->name, "lwc") == 0)
        add(c, n, "; the context's own view of its creator is not tested here: LWC_UNMAP hides a range "
                  "from it, and only a non-dumpable creator (caller_closed) keeps it from reading it "
                  "(docs/lwc.md)");
    if (r->cells[ISOB_ATK_SAME_UID].probed)
        add(r->cells[ISOB_ATK_SAME_UID].evidence, sizeof r->cells[0].evidence,
            "; Yama ptrace_scope: %s; the caller's TracerPid at creation: %ld", yama, tracer);

    snprintf(r->cells[ISOB_ATK_OTHER_UID].condition, n,
             "another uid without capabilities: the kernel's uid check, whatever the mechanism");
    snprintf(r->cells[ISOB_ATK_ROOT].condition, n,
             "root with CAP_SYS_PTRACE passes the kernel's ptrace access check; shown, never counted in "
             "the summary");
    snprintf(r->cells[ISOB_ATK_PRE_ATTACHED].condition, n,
             "a same-uid tracer attached to the caller before the compartment existed, which follows forks and "
             "rewrites the dumpability calls; measured twice, as is (TracerPid names it) and hiding (it "
             "rewrites TracerPid to 0 in what its tracees read); the cell is the worse of the two: the "
             "server's own check of TracerPid stops only the first; never counted in the summary");
}

static void os_cells(const struct isob_mechanism *m, struct isob_comp *c, uint64_t trusted_addr,
                     struct isob_isolation *r)
{
    struct isob_place where = {0, (uintptr_t)trusted_addr};
    int rc = c->mech->locate ? c->mech->locate(c, trusted_addr, &where) : 0;
    if (rc) {
        char why[160];
        snprintf(why, sizeof why, "cannot locate the trusted heap for OS-level probes: %s", isob_strerror(rc));
        for (int a = ISOB_ATK_SAME_UID; a < ISOB_ATK__COUNT; a++)
            snprintf(r->cells[a].evidence, sizeof r->cells[a].evidence, "%s", why);
        return;
    }
    r->os_target_self = where.pid == 0 || where.pid == getpid();
    r->os_target_pid = where.pid ? (long)where.pid : (long)getpid();
    r->os_target_addr = where.addr;
    r->same_uid_self = r->os_target_self;
    struct isob_osprobe_target t = {(pid_t)r->os_target_pid, where.addr, ISOB_SECRET, 0};
    r->secret_intact_after = 1;
    static const enum isob_identity ids[] = {ISOB_ID_SAME_UID, ISOB_ID_OTHER_UID, ISOB_ID_ROOT};
    for (int i = 0; i < 3; i++) {
        struct isob_cell *cell = &r->cells[ISOB_ATK_SAME_UID + i];
        if (ids[i] == ISOB_ID_SAME_UID && geteuid() == 0) {
            same_uid_as_root(m, cell, r);
            continue;
        }
        rc = isob_osprobe_as(ids[i], &t, cell->res, &cell->who);
        if (rc) {
            cell->verdict = ISOB_CELL_UNTESTED;
            snprintf(cell->method, sizeof cell->method, "not probed");
            snprintf(cell->evidence, sizeof cell->evidence, "%s", cell->who.why);
        } else {
            cell->probed = 1;
            os_cell(cell, ids[i], r->os_target_self);
        }
        /* Every write was put back; the trusted side confirms it, and a
         * secret left changed is planted again so that the next identity
         * probes the same thing. */
        long ok = secret_intact(c);
        if (ok != 1) {
            r->secret_intact_after = ok < 0 ? -1 : 0;
            add(cell->evidence, sizeof cell->evidence, "; the secret was %s afterwards",
                ok < 0 ? "of unknown state" : "left changed");
            uint64_t again;
            plant(c, &again);
        }
    }
    if (m->props & ISOB_SEPARATE_AS)
        race_cell(m, &r->cells[ISOB_ATK_SAME_UID], r);
    pre_attached_cell(m, &r->cells[ISOB_ATK_PRE_ATTACHED], r);
}

/* Set up: probe, create, plant.  0 with *cp and *trusted_addr, or 1 when
 * the verdict is already known (skipped, failed). */
static int begin(const struct isob_mechanism *m, struct isob_isolation *r, struct isob_comp **cp,
                 uint64_t *trusted_addr)
{
    memset(r, 0, sizeof *r);
    r->claims = (m->props & ISOB_ISOLATES_MEMORY) != 0;
    r->intact = -1;
    r->yama = isob_yama_ptrace_scope();
    r->secret_intact_after = -1;
    r->expect_fault = m->escape ? 0 : expected_fault(m);
    char why[256] = "";
    if (m->probe(why, sizeof why) != 0) {
        r->verdict = "skipped";
        snprintf(r->reason, sizeof r->reason, "%s", why);
        all_untested(r, why);
        return 1;
    }
    struct isob_comp_spec spec;
    isob_spec_defaults(&spec);
    spec.server_cpu = -1;
    /* The caller's own defence first (server.h): no same-uid process may
     * attach to it from here on, and its servers are closed from birth. */
    r->caller_tracer_pid = isob_tracer_pid(0);
    r->same_uid_tracer_pid = r->caller_tracer_pid;
    r->caller_closed = close_caller(m, &r->caller_dumpable);
    int rc = isob_comp_create(m, &spec, cp);
    if (rc) {
        r->verdict = "failed";
        const char *why_create = isob_comp_create_why();
        snprintf(r->reason, sizeof r->reason, "create: %s", why_create ? why_create : isob_strerror(rc));
        all_untested(r, r->reason);
        return 1;
    }
    long ret = plant(*cp, trusted_addr);
    if (ret != 0 || !*trusted_addr) {
        r->verdict = "failed";
        snprintf(r->reason, sizeof r->reason, "planting the secret failed: %ld", ret);
        all_untested(r, r->reason);
        isob_comp_destroy(*cp);
        return 1;
    }
    return 0;
}

/* glibc exports a WRPKRU as a function since 2.27: pkey_set(key, rights). */
#if defined(__x86_64__) && defined(SEGV_PKUERR) && defined(__GLIBC__) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 27))
#define HAVE_PKEY_SET 1

/* Where the forked attacker was when it faulted (1 in pkey_set, 2 in the
 * read), for its exit code. */
static volatile sig_atomic_t pkey_set_step;

static void on_pkey_set_fault(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    int kind = sig == SIGILL || sig == SIGTRAP ? 1 : sig == SIGSEGV && si->si_code == SEGV_PKUERR ? 2 : 3;
    _exit(10 * pkey_set_step + kind);
}

struct pkey_set_found {
    size_t off;
    int n;
};

static void on_pkey_set_wrpkru(void *ctx, size_t off, enum isob_insn k)
{
    struct pkey_set_found *f = ctx;
    if (k == ISOB_INSN_WRPKRU && !f->n++)
        f->off = off;
}

/* The untrusted side calls the C library's exported PKRU writer,
 * pkey_set(key, 0) for every key, then reads the secret by its address: an
 * ordinary call, within "jumps to any instruction with any registers".  In
 * a child, so that keys it opens stay open in the child only.  Appends to
 * the in-process cell; 1 when the secret was read. */
static int in_process_pkey_set(uint64_t trusted_addr, struct isob_isolation *r)
{
    struct isob_cell *cell = &r->cells[ISOB_ATK_IN_PROCESS];
    const unsigned char *fn = (const unsigned char *)(uintptr_t)&pkey_set;
    /* Its WRPKRU, as isob inspect finds it; none when the mechanism
     * closed it (UD2 in its place). */
    struct pkey_set_found f = {0, 0};
    isob_insn_scan(fn, 128, on_pkey_set_wrpkru, &f);
    Dl_info info;
    const char *file = dladdr(fn, &info) && info.dli_fname ? info.dli_fname : "the program";
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    char site[96];
    if (f.n)
        snprintf(site, sizeof site, "its WRPKRU at pkey_set+%#zx in %s", f.off, base);
    else
        snprintf(site, sizeof site, "its WRPKRU closed, a trap in its place");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        add(cell->evidence, sizeof cell->evidence, "; pkey_set(key, 0): not tried: fork: %s",
            isob_strerror(-errno));
        return -1;
    }
    if (pid == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_pkey_set_fault;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, NULL);
        sigaction(SIGBUS, &sa, NULL);
        sigaction(SIGILL, &sa, NULL);
        sigaction(SIGTRAP, &sa, NULL);
        alarm(60);
        pkey_set_step = 1;
        for (int k = 1; k < 16; k++)
            pkey_set(k, 0);
        pkey_set_step = 2;
        uint64_t v = *(volatile uint64_t *)(uintptr_t)trusted_addr;
        _exit(v == ISOB_SECRET ? 0 : 1);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    const char *what = code == 0 ? "returned, then the read got the secret"
                       : code == 1 ? "returned, then the read found other data"
                       : code == 11 ? "trapped in pkey_set (SIGILL or SIGTRAP)"
                       : code == 12 ? "SEGV_PKUERR in pkey_set"
                       : code == 21 ? "returned, then the read trapped (SIGILL or SIGTRAP)"
                       : code == 22 ? "returned, then the read faulted: SIGSEGV (SEGV_PKUERR)"
                       : code == 13 || code == 23 ? "another fault"
                                                  : "the attacker died otherwise";
    add(cell->evidence, sizeof cell->evidence,
        "; then called the C library's pkey_set(key, 0) for keys 1-15 (%s) and read again: %s", site,
        what);
    if (code == 0)
        return 1;
    /* Held when pkey_set could not write PKRU or the read still met the
     * key; anything else did not test what it is there to test. */
    return code == 11 || code == 22 ? 0 : -1;
}
#endif

static void in_process(struct isob_comp *c, uint64_t trusted_addr, struct isob_isolation *r)
{
    if (c->mech->escape) {
        in_process_escape(c, trusted_addr, r);
        return;
    }
    in_process_by_address(c, trusted_addr, r);
#ifdef HAVE_PKEY_SET
    struct isob_cell *cell = &r->cells[ISOB_ATK_IN_PROCESS];
    if (r->claims && c->mech->fault_code == SEGV_PKUERR && cell->verdict == ISOB_CELL_ENFORCED) {
        add(cell->method, sizeof cell->method, "; then calls pkey_set(key, 0), glibc's WRPKRU, and reads");
        int got = in_process_pkey_set(trusted_addr, r);
        if (got == 1) {
            cell->verdict = ISOB_CELL_LEAKS;
            r->verdict = "leaked";
            snprintf(r->reason, sizeof r->reason,
                     "the untrusted side called the C library's pkey_set(key, 0) and read the secret");
        } else if (got < 0) {
            cell->verdict = ISOB_CELL_UNTESTED;
            r->verdict = "unexpected";
            snprintf(r->reason, sizeof r->reason, "the pkey_set attack did not show what it tests");
            add(cell->evidence, sizeof cell->evidence, " (%s)", r->reason);
        }
    }
#elif defined(SEGV_PKUERR)
    if (r->claims && c->mech->fault_code == SEGV_PKUERR)
        add(r->cells[ISOB_ATK_IN_PROCESS].evidence, sizeof r->cells[0].evidence,
            "; no pkey_set to call: this C library exports none (isob inspect lists any other stray)");
#endif
}

int isob_isolation_test(const struct isob_mechanism *m, struct isob_isolation *r)
{
    struct isob_comp *c;
    uint64_t trusted_addr;
    if (begin(m, r, &c, &trusted_addr))
        return 0;
    in_process(c, trusted_addr, r);
    for (int a = ISOB_ATK_SAME_UID; a < ISOB_ATK__COUNT; a++)
        snprintf(r->cells[a].evidence, sizeof r->cells[a].evidence, "not run (in-process test only)");
    isob_comp_destroy(c);
    return 0;
}

int isob_isolation_matrix(const struct isob_mechanism *m, struct isob_isolation *r)
{
    struct isob_comp *c;
    uint64_t trusted_addr;
    if (begin(m, r, &c, &trusted_addr)) {
        /* What each cell would cover, beside why it is untested. */
        conditions(m, r);
        return 0;
    }
    in_process(c, trusted_addr, r);
    /* The in-process attempts may have changed a secret that was not
     * protected; the OS-level probes start from the planted value. */
    uint64_t again;
    if (plant(c, &again) != 0 || again != trusted_addr)
        all_untested(r, "the secret could not be planted again at the same address");
    else
        os_cells(m, c, trusted_addr, r);
    conditions(m, r);
    isob_comp_destroy(c);
    return 0;
}

static void emit_cell(struct isob_jw *w, const char *key, const struct isob_cell *cell, int self)
{
    isob_jw_obj(w, key);
    isob_jw_str(w, "verdict", isob_cell_verdict_name(cell->verdict));
    isob_jw_str(w, "method", cell->method[0] ? cell->method : NULL);
    isob_jw_str(w, "evidence", cell->evidence[0] ? cell->evidence : NULL);
    isob_jw_str(w, "condition", cell->condition[0] ? cell->condition : NULL);
    if (cell->raced) {
        isob_jw_str(w, "precondition", "caller non-dumpable at creation");
        isob_jw_str(w, "dumpable_caller", isob_cell_verdict_name(cell->race[1].verdict));
        isob_jw_arr(w, "fork_window");
        for (int i = 0; i < 2; i++) {
            const struct isob_race *x = &cell->race[i];
            isob_jw_obj(w, NULL);
            isob_jw_str(w, "caller", i ? "dumpable" : "non-dumpable");
            isob_jw_bool(w, "caller_dumpable", x->dumpable);
            isob_jw_str(w, "verdict", isob_cell_verdict_name(x->verdict));
            isob_jw_int(w, "tries", x->tries);
            isob_jw_int(w, "seen", x->seen);
            isob_jw_int(w, "opened", x->opened);
            if (x->first_read)
                isob_jw_int(w, "secret_read_at", x->first_read);
            else
                isob_jw_raw(w, "secret_read_at", "null");
            isob_jw_str(w, "refused_errno", x->refused_err ? errno_name(x->refused_err) : NULL);
            isob_jw_str(w, "why", x->why[0] ? x->why : NULL);
            isob_jw_close(w, '}');
        }
        isob_jw_close(w, ']');
    }
    if (cell->traced) {
        isob_jw_obj(w, "tracer");
        isob_jw_int(w, "followed", cell->tstats.followed);
        isob_jw_int(w, "set_dumpable_rewritten", cell->tstats.set_rewritten);
        isob_jw_int(w, "get_dumpable_faked", cell->tstats.get_faked);
        isob_jw_bool(w, "hides", cell->tstats.hides);
        isob_jw_int(w, "tracerpid_hidden", cell->tstats.tracerpid_hidden);
        isob_jw_close(w, '}');
        isob_jw_arr(w, "tracers");
        for (int i = 0; i < 2; i++) {
            const struct isob_tracer_stats *st = &cell->truns[i].stats;
            isob_jw_obj(w, NULL);
            isob_jw_bool(w, "hides", i == 1);
            isob_jw_str(w, "verdict", isob_cell_verdict_name(cell->truns[i].verdict));
            isob_jw_bool(w, "attached", cell->truns[i].ran && st->attached);
            isob_jw_str(w, "attach_errno", cell->truns[i].attach_rc ? errno_name(-cell->truns[i].attach_rc) : NULL);
            isob_jw_str(w, "create_errno", cell->truns[i].create_rc ? errno_name(-cell->truns[i].create_rc) : NULL);
            isob_jw_int(w, "caller_tracer_pid", cell->truns[i].caller_tracer_pid);
            isob_jw_int(w, "followed", st->followed);
            isob_jw_int(w, "set_dumpable_rewritten", st->set_rewritten);
            isob_jw_int(w, "get_dumpable_faked", st->get_faked);
            isob_jw_int(w, "tracerpid_hidden", st->tracerpid_hidden);
            isob_jw_close(w, '}');
        }
        isob_jw_close(w, ']');
        isob_jw_arr(w, "probes");
        for (int p = 0; p < ISOB_TRACER_PROBES && cell->tprobed; p++) {
            const struct isob_osprobe_result *r = &cell->tres[p];
            static const char *const outcomes[] = {"untested", "denied", "granted"};
            isob_jw_obj(w, NULL);
            isob_jw_str(w, "probe", isob_tracer_probe_name(p));
            isob_jw_str(w, "outcome", outcomes[r->outcome]);
            isob_jw_str(w, "errno", r->err ? errno_name(r->err) : NULL);
            isob_jw_bool(w, "secret_seen", r->secret_seen);
            isob_jw_str(w, "note", r->note[0] ? r->note : NULL);
            isob_jw_bool(w, "leak", r->secret_seen);
            isob_jw_close(w, '}');
        }
        isob_jw_close(w, ']');
    }
    if (cell->probed) {
        isob_jw_obj(w, "identity");
        isob_jw_str(w, "how", cell->who.how);
        isob_jw_int(w, "uid", cell->who.uid);
        isob_jw_int(w, "gid", cell->who.gid);
        isob_jw_bool(w, "cap_sys_ptrace", cell->who.cap_sys_ptrace);
        isob_jw_close(w, '}');
        isob_jw_arr(w, "probes");
        for (int p = 0; p < ISOB_OSP__COUNT; p++) {
            const struct isob_osprobe_result *r = &cell->res[p];
            static const char *const outcomes[] = {"untested", "denied", "granted"};
            isob_jw_obj(w, NULL);
            isob_jw_str(w, "probe", isob_osprobe_name((enum isob_osprobe)p));
            isob_jw_str(w, "outcome", outcomes[r->outcome]);
            isob_jw_str(w, "errno", r->err ? errno_name(r->err) : NULL);
            isob_jw_bool(w, "secret_seen", r->secret_seen);
            isob_jw_bool(w, "secret_changed", r->secret_changed);
            if (r->secret_changed)
                isob_jw_bool(w, "restored", r->restored);
            isob_jw_str(w, "note", r->note[0] ? r->note : NULL);
            isob_jw_bool(w, "leak", probe_leaks(r, p, self));
            isob_jw_close(w, '}');
        }
        isob_jw_close(w, ']');
    }
    isob_jw_close(w, '}');
}

void isob_isolation_emit(FILE *f, const struct isob_mechanism *m, const struct isob_isolation *r)
{
    struct isob_jw w;
    char buf[64];
    isob_jw_begin(&w, f, "isolation");
    isob_jw_int(&w, "matrix_version", ISOB_MATRIX_VERSION);
    isob_jw_str(&w, "mechanism", m->name);
    isob_jw_bool(&w, "claims", r->claims);
    /* The in-process test in words, as before the matrix existed. */
    isob_jw_str(&w, "verdict", r->verdict);
    isob_jw_str(&w, "read", r->read[0] ? r->read : NULL);
    isob_jw_str(&w, "write", r->write[0] ? r->write : NULL);
    if (r->intact < 0)
        isob_jw_raw(&w, "intact", "null");
    else
        isob_jw_bool(&w, "intact", r->intact);
    isob_jw_str(&w, "reason", r->reason[0] ? r->reason : NULL);
    isob_jw_str(&w, "expected_fault", r->expect_fault ? isob_segv_code_name(r->expect_fault) : NULL);
    if (r->os_target_pid) {
        isob_jw_obj(&w, "target");
        isob_jw_str(&w, "process", r->os_target_self ? "caller" : "compartment");
        isob_jw_int(&w, "pid", r->os_target_pid);
        snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)r->os_target_addr);
        isob_jw_str(&w, "address", buf);
        isob_jw_close(&w, '}');
    } else {
        isob_jw_raw(&w, "target", "null");
    }
    if (r->yama < 0)
        isob_jw_raw(&w, "yama_ptrace_scope", "null");
    else
        isob_jw_int(&w, "yama_ptrace_scope", r->yama);
    static const char *const yama_words[] = {
        "0: classic ptrace permissions", "1: only ancestors (or a declared tracer) may attach",
        "2: only CAP_SYS_PTRACE may attach", "3: no process may attach"};
    isob_jw_str(&w, "yama", r->yama < 0 ? "absent (no Yama in this kernel)"
                            : r->yama <= 3 ? yama_words[r->yama] : "an unknown ptrace_scope");
    isob_jw_int(&w, "caller_tracer_pid", r->caller_tracer_pid);
    isob_jw_bool(&w, "caller_dumpable", r->caller_dumpable);
    if (r->caller_closed == 1)
        isob_jw_raw(&w, "caller_closed", "null");
    else
        isob_jw_bool(&w, "caller_closed", r->caller_closed == 0 && !r->caller_dumpable);
    if (r->secret_intact_after < 0)
        isob_jw_raw(&w, "secret_intact_after", "null");
    else
        isob_jw_bool(&w, "secret_intact_after", r->secret_intact_after);
    isob_jw_obj(&w, "attackers");
    for (int a = 0; a < ISOB_ATK__COUNT; a++)
        emit_cell(&w, isob_attacker_name((enum isob_attacker)a), &r->cells[a],
                  a == ISOB_ATK_SAME_UID ? r->same_uid_self : r->os_target_self);
    isob_jw_close(&w, '}');
    isob_jw_end(&w);
}
