/* seccomp-allow: an allow-list seccomp filter, the kind container runtimes
 * install (Docker's default profile allows about 300 calls).  Variants:
 *
 *   1         one rule that allows every call: the least a filter can be;
 *   300       300 rules, one per allowed call, in a linear chain with the
 *             benchmark's own calls last (the longest walk); every other
 *             call fails with EPERM;
 *   300-args  the same 300 calls, each rule also comparing the call's first
 *             argument with a value no call passes.
 *
 * Since Linux 5.11 the kernel runs a new filter once per call number when
 * it is installed and caches every number it allows without looking at
 * arguments, so that later calls skip the program entirely: variants 1 and
 * 300 should cost next to nothing there.  A rule that reads an argument
 * cannot be decided in advance, so 300-args runs the program on every call
 * and shows what a filter walk costs.
 *
 * Verified by /proc/self/status (Seccomp: 2, one more filter) and, for the
 * 300-rule variants, by the probe call, which is not in the list, failing
 * with EPERM. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/seccomp.h>
#include <seccomp.h>

#include "isobench/confine.h"

/* Rules of the long variants: about the size of a container runtime's list. */
#define SA_RULES 300
/* Call numbers looked at when building the list (x86-64 ends below 512). */
#define SA_MAX_NR 512
/* The value the argument-checking rules compare the first argument with:
 * not a canonical address, a descriptor, a pid or a flag set. */
#define SA_POISON 0xdead5ec05ecc0badULL

enum { SA_ONE = 0, SA_300 = 1, SA_300_ARGS = 2 };
static const char *const sa_variants[] = {"1", "300", "300-args", NULL};

/* Calls an allow-list of this size leaves out: administration of the
 * machine, kernel modules and keys, other processes' memory, mounts and
 * namespaces, obsolete calls, and the probe call (personality). */
static const char *const sa_denied[] = {
    "acct", "add_key", "adjtimex", "afs_syscall", "bpf", "clock_adjtime", "clock_settime",
    "create_module", "delete_module", "epoll_ctl_old", "epoll_wait_old", "fanotify_init",
    "fanotify_mark", "finit_module", "fsconfig", "fsmount", "fsopen", "fspick",
    "get_kernel_syms", "getpmsg", "init_module", "io_uring_enter", "io_uring_register",
    "io_uring_setup", "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl",
    "lookup_dcookie", "mount", "mount_setattr", "move_mount", "name_to_handle_at", "nfsservctl",
    "open_by_handle_at", "open_tree", "perf_event_open", "personality", "pivot_root",
    "process_vm_readv", "process_vm_writev", "ptrace", "putpmsg", "query_module", "quotactl",
    "quotactl_fd", "reboot", "request_key", "security", "setdomainname", "sethostname", "setns",
    "settimeofday", "swapoff", "swapon", "_sysctl", "sysfs", "syslog", "tuxcall", "umount2",
    "unshare", "uselib", "userfaultfd", "ustat", "vhangup", "vserver", NULL,
};

static int sa_probe(char *why, size_t len)
{
    if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &(unsigned){SECCOMP_RET_ERRNO}) != 0) {
        snprintf(why, len, "seccomp(SECCOMP_GET_ACTION_AVAIL): %s (kernel without seccomp filters)",
                 isob_strerror(-errno));
        return -ENOTSUP;
    }
    return 0;
}

static int contains(const int *v, size_t n, int x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* The allowed calls in chain order: calls the benchmark does not measure
 * in ascending number, then the measured ones.  Returns how many, or -errno. */
static int sa_list(const struct isob_confine_req *req, int *out, char *why, size_t len)
{
    int denied[128];
    size_t nd = 0;
    for (size_t i = 0; sa_denied[i] && nd < sizeof denied / sizeof denied[0]; i++) {
        int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, sa_denied[i]);
        if (nr >= 0)
            denied[nd++] = nr;
    }
    int measured[SA_RULES];
    size_t nm = 0;
    for (size_t i = 0; i < req->ncalls; i++) {
        if (req->calls[i] == ISOB_CONFINE_PROBE_NR) {
            snprintf(why, len, "the benchmark measures the probe call (personality)");
            return -EINVAL;
        }
        if (!contains(measured, nm, req->calls[i]) && nm < SA_RULES)
            measured[nm++] = req->calls[i];
    }
    size_t n = 0;
    for (int nr = 0; nr < SA_MAX_NR && n + nm < SA_RULES; nr++) {
        if (contains(denied, nd, nr) || contains(measured, nm, nr))
            continue;
        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
        if (!name)
            continue;
        free(name);
        out[n++] = nr;
    }
    for (size_t i = 0; i < nm; i++)
        out[n++] = measured[i];
    return (int)n;
}

static int sa_apply(struct isob_confine_state *st, const struct isob_confine_req *req, char *why,
                    size_t len)
{
    struct isob_bpf b = {0};
    isob_bpf_prologue(&b);
    if (st->variant == SA_ONE) {
        isob_bpf_stmt(&b, BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        st->rules = 1;
    } else {
        int list[SA_RULES];
        int n = sa_list(req, list, why, len);
        if (n < 0) {
            isob_bpf_free(&b);
            return n;
        }
        for (int i = 0; i < n; i++) {
            if (st->variant == SA_300_ARGS) {
                /* nr matches: allow unless the first argument is the poison
                 * value; no match: on to the next rule with nr still loaded. */
                isob_bpf_jump(&b, BPF_JMP | BPF_JEQ | BPF_K, (unsigned)list[i], 0, 6);
                isob_bpf_stmt(&b, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
                isob_bpf_jump(&b, BPF_JMP | BPF_JEQ | BPF_K, (unsigned)(SA_POISON & 0xffffffffu), 0, 2);
                isob_bpf_stmt(&b, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]) + 4);
                isob_bpf_jump(&b, BPF_JMP | BPF_JEQ | BPF_K, (unsigned)(SA_POISON >> 32), 1, 0);
                isob_bpf_stmt(&b, BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
                isob_bpf_stmt(&b, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
            } else {
                isob_bpf_jump(&b, BPF_JMP | BPF_JEQ | BPF_K, (unsigned)list[i], 0, 1);
                isob_bpf_stmt(&b, BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
            }
        }
        isob_bpf_stmt(&b, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
        st->rules = n;
    }
    int rc = isob_bpf_load(&b, 0);
    size_t insns = b.n;
    isob_bpf_free(&b);
    if (rc < 0) {
        snprintf(why, len, "installing a %d-rule filter (%zu instructions): %s", st->rules, insns,
                 isob_strerror(rc));
        return rc;
    }
    return 0;
}

static int sa_verify(struct isob_confine_state *st, char *why, size_t len)
{
    int rc = isob_confine_check_filters(st, 1, why, len);
    if (rc)
        return rc;
    isob_evidence(st, "rules", "%d", st->rules);
    isob_evidence(st, "args_checked", "%s", st->variant == SA_300_ARGS ? "true" : "false");
    errno = 0;
    long r = syscall(ISOB_CONFINE_PROBE_NR, ISOB_CONFINE_PROBE_ARG);
    int err = r < 0 ? errno : 0;
    isob_evidence(st, "probe_call", "\"%s\"", err ? isob_strerror(-err) : "allowed");
    if (st->variant == SA_ONE) {
        /* One rule allows everything, so the probe must run. */
        if (err) {
            snprintf(why, len, "the allow-all filter denied the probe call: %s", isob_strerror(-err));
            return -EPROTO;
        }
        return 0;
    }
    isob_evidence(st, "default_action", "\"EPERM\"");
    if (err != EPERM) {
        snprintf(why, len, "the probe call, not in the list, %s instead of failing with EPERM",
                 err ? isob_strerror(-err) : "ran");
        return -EPROTO;
    }
    return 0;
}

const struct isob_confinement isob_confine_seccomp_allow = {
    .name = "seccomp-allow",
    .summary = "seccomp allow-list filter: 1 rule, 300 rules, 300 rules checking an argument",
    .threat = "a compromised process limited to about 300 system calls, the rest failing with "
              "EPERM (variant 1 allows all: cost only); arguments of allowed calls are not "
              "restricted",
    .variants = sa_variants,
    .probe = sa_probe,
    .apply = sa_apply,
    .verify = sa_verify,
};
