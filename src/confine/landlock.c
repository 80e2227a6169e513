/* landlock: a Landlock domain that lets the process write only beneath the
 * benchmark's test directory.  The ruleset handles every filesystem right
 * the kernel's ABI knows, and grants:
 *
 *   the test directory          every right (files are created and removed there);
 *   /usr /bin /sbin /lib /lib64 read and execute (the shell and its libraries);
 *   /etc/ld.so.cache, /etc/netconfig   read (the dynamic loader; ONC RPC's transports);
 *   /dev/null, /dev/zero        read and write (the null I/O primitive);
 *   the benchmark's executables read and execute.
 *
 * From ABI 6 on it also scopes signals and abstract UNIX sockets to the
 * domain.  TCP rights (ABI 4) are not handled: the benchmark binds and
 * connects to ports it learns only while measuring, and a ruleset
 * allowing them all would restrict nothing.  The ABI version is recorded.
 *
 * Verified by an open of a file outside the domain, which must fail with
 * EACCES, and a file created and removed inside the test directory. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/landlock.h>

#include "isobench/confine.h"

/* Rights newer than the oldest kernel headers isobench builds with. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)
/* The rights of ABI 1: execute through make_sym, bits 0 to 12. */
#define LL_FS_ABI1 ((1ULL << 13) - 1)
#define LL_FILE_RIGHTS (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
                        LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |  \
                        LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define LL_READ_EXEC (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR | \
                      LANDLOCK_ACCESS_FS_EXECUTE)

/* The ruleset attribute as of ABI 6; older kernels take a prefix of it. */
struct ll_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

static const char *const ll_variants[] = {"test-dir", NULL};

static int ll_abi(void)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi < 0 ? -errno : (int)abi;
}

static int ll_probe(char *why, size_t len)
{
    int abi = ll_abi();
    if (abi < 0) {
        snprintf(why, len, "Landlock unavailable: %s (kernel without it, or not in the lsm= list)",
                 isob_strerror(abi));
        return -ENOTSUP;
    }
    return 0;
}

static uint64_t ll_handled(int abi)
{
    uint64_t fs = LL_FS_ABI1;
    if (abi >= 2)
        fs |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    return fs;
}

/* Allow `rights` beneath path; a file gets only the rights a file can
 * have (the kernel refuses directory rights on it).  A missing path is no
 * error: /lib64 does not exist everywhere. */
static int ll_rule(int ruleset, const char *path, uint64_t rights, uint64_t handled, int *count)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    struct stat sb;
    struct landlock_path_beneath_attr pb = {.allowed_access = rights & handled, .parent_fd = fd};
    if (fstat(fd, &sb) == 0 && !S_ISDIR(sb.st_mode))
        pb.allowed_access &= LL_FILE_RIGHTS;
    long rc = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
    int err = rc == 0 ? 0 : -errno;
    close(fd);
    if (err == 0)
        (*count)++;
    return err;
}

static int ll_apply(struct isob_confine_state *st, const struct isob_confine_req *req, char *why,
                    size_t len)
{
    if (!req->dir) {
        snprintf(why, len, "no test directory to confine the process to");
        return -EINVAL;
    }
    int abi = ll_abi();
    if (abi < 0) {
        snprintf(why, len, "Landlock unavailable: %s", isob_strerror(abi));
        return abi;
    }
    st->abi = abi;
    /* A file the process can open now and must not open once confined. */
    static const char *const outside[] = {"/etc/passwd", "/etc/hostname", "/proc/version", NULL};
    st->probe_path[0] = 0;
    for (size_t i = 0; outside[i]; i++) {
        int fd = open(outside[i], O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            snprintf(st->probe_path, sizeof st->probe_path, "%s", outside[i]);
            break;
        }
    }
    if (!st->probe_path[0]) {
        snprintf(why, len, "no file outside the test directory to check the domain with");
        return -ENOENT;
    }
    snprintf(st->inside_path, sizeof st->inside_path, "%s/.landlock-check", req->dir);

    struct ll_attr attr = {.handled_access_fs = ll_handled(abi)};
    size_t attr_size = sizeof attr.handled_access_fs;
    if (abi >= 6) {
        attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
        attr_size = sizeof attr;
    }
    int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
    if (rs < 0) {
        int rc = -errno;
        snprintf(why, len, "landlock_create_ruleset (ABI %d): %s", abi, isob_strerror(rc));
        return rc;
    }
    const uint64_t all = attr.handled_access_fs;
    static const char *const sys_dirs[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64", NULL};
    static const char *const sys_files[] = {"/etc/ld.so.cache", "/etc/netconfig", NULL};
    static const char *const devices[] = {"/dev/null", "/dev/zero", NULL};
    int rc = ll_rule(rs, req->dir, all, all, &st->rules);
    const char *failed = req->dir;
    for (size_t i = 0; rc == 0 && sys_dirs[i]; i++)
        rc = ll_rule(rs, failed = sys_dirs[i], LL_READ_EXEC, all, &st->rules);
    for (size_t i = 0; rc == 0 && sys_files[i]; i++)
        rc = ll_rule(rs, failed = sys_files[i], LANDLOCK_ACCESS_FS_READ_FILE, all, &st->rules);
    for (size_t i = 0; rc == 0 && devices[i]; i++)
        rc = ll_rule(rs, failed = devices[i],
                     LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE, all, &st->rules);
    for (size_t i = 0; rc == 0 && req->exec && req->exec[i]; i++)
        rc = ll_rule(rs, failed = req->exec[i],
                     LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_EXECUTE, all, &st->rules);
    if (rc) {
        snprintf(why, len, "Landlock rule for %s: %s", failed, isob_strerror(rc));
        close(rs);
        return rc;
    }
    /* Unprivileged processes need no_new_privs to restrict themselves;
     * set it for root too, so that both measure the same thing. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        syscall(SYS_landlock_restrict_self, rs, 0) != 0) {
        rc = -errno;
        snprintf(why, len, "landlock_restrict_self: %s", isob_strerror(rc));
        close(rs);
        return rc;
    }
    close(rs);
    return 0;
}

static int ll_verify(struct isob_confine_state *st, char *why, size_t len)
{
    isob_evidence(st, "abi", "%d", st->abi);
    isob_evidence(st, "rules", "%d", st->rules);
    isob_evidence(st, "handled_fs", "\"0x%llx\"", (unsigned long long)ll_handled(st->abi));
    isob_evidence(st, "scoped", "%s", st->abi >= 6 ? "\"abstract-unix-socket,signal\"" : "null");
    isob_evidence(st, "net", "\"not handled\"");
    if (!st->probe_path[0] || !st->inside_path[0]) {
        snprintf(why, len, "no Landlock domain was set up in this process");
        return -EPERM;
    }
    int fd = open(st->probe_path, O_RDONLY | O_CLOEXEC);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0)
        close(fd);
    isob_evidence(st, "outside_open", "\"%s: %s\"", st->probe_path,
                  err ? isob_strerror(-err) : "opened");
    if (err != EACCES) {
        snprintf(why, len, "open(%s) outside the domain %s, not EACCES", st->probe_path,
                 err ? isob_strerror(-err) : "succeeded");
        return -EPERM;
    }
    fd = open(st->inside_path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 || close(fd) != 0 || unlink(st->inside_path) != 0) {
        int rc = -errno;
        snprintf(why, len, "creating %s inside the domain: %s", st->inside_path, isob_strerror(rc));
        return rc;
    }
    isob_evidence(st, "inside_create", "\"ok\"");
    return 0;
}

const struct isob_confinement isob_confine_landlock = {
    .name = "landlock",
    .summary = "Landlock domain: writes only beneath the test directory, system files read-only",
    .threat = "a compromised process cannot read or write files outside the test directory "
              "and the system files it needs (read-only); network and other processes' memory "
              "are not restricted",
    .variants = ll_variants,
    .probe = ll_probe,
    .apply = ll_apply,
    .verify = ll_verify,
};
