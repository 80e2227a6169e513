/* userns: new user, mount and network namespaces, the unprivileged core
 * of a rootless container.  The process becomes uid 0 of a user namespace
 * that maps only its own uid and gid, gets a private mount table and a
 * network namespace of its own whose loopback it brings up (the IPC
 * primitives talk over 127.0.0.1 inside it).
 *
 * Verified by the inodes of /proc/self/ns/{user,mnt,net} differing from
 * those before, uid_map holding the one-line map written, the loopback
 * interface up, and a datagram sent to itself over it arriving. */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isobench/confine.h"

static const char *const un_variants[] = {"user+mnt+net", NULL};

static const int un_flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET;

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int err = n == (ssize_t)strlen(text) ? 0 : (n < 0 ? -errno : -EIO);
    close(fd);
    return err;
}

static int un_probe(char *why, size_t len)
{
    /* Whether unprivileged namespaces are allowed shows only by trying,
     * so a child tries and reports. */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, len, "fork: %s", isob_strerror(-errno));
        return -errno;
    }
    if (pid == 0)
        _exit(unshare(un_flags) == 0 ? 0 : (errno & 0xff));
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        snprintf(why, len, "the namespace probe child did not exit normally");
        return -EIO;
    }
    if (WEXITSTATUS(status) != 0) {
        snprintf(why, len, "unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWNET): %s (user namespaces "
                 "disabled: see user.max_user_namespaces)", isob_strerror(-WEXITSTATUS(status)));
        return -ENOTSUP;
    }
    return 0;
}

/* Set IFF_UP on lo; 0 or -errno.  *flags receives the flags after. */
static int lo_up(int set, short *flags)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    int rc = ioctl(s, SIOCGIFFLAGS, &ifr) == 0 ? 0 : -errno;
    if (rc == 0 && set && !(ifr.ifr_flags & IFF_UP)) {
        ifr.ifr_flags |= IFF_UP;
        rc = ioctl(s, SIOCSIFFLAGS, &ifr) == 0 ? 0 : -errno;
        if (rc == 0)
            rc = ioctl(s, SIOCGIFFLAGS, &ifr) == 0 ? 0 : -errno;
    }
    *flags = ifr.ifr_flags;
    close(s);
    return rc;
}

static int un_apply(struct isob_confine_state *st, const struct isob_confine_req *req, char *why,
                    size_t len)
{
    (void)req;
    uid_t uid = geteuid();
    gid_t gid = getegid();
    st->uid = uid;
    if (unshare(un_flags) != 0) {
        int rc = -errno;
        snprintf(why, len, "unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWNET): %s", isob_strerror(rc));
        return rc;
    }
    char map[64];
    int rc = write_file("/proc/self/setgroups", "deny");
    const char *step = "setgroups";
    if (rc == 0) {
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned)uid);
        rc = write_file("/proc/self/uid_map", map);
        step = "uid_map";
    }
    if (rc == 0) {
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned)gid);
        rc = write_file("/proc/self/gid_map", map);
        step = "gid_map";
    }
    /* Nothing done in the new mount table may reach the one outside. */
    if (rc == 0) {
        rc = mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 ? 0 : -errno;
        step = "making / private";
    }
    short flags = 0;
    if (rc == 0) {
        rc = lo_up(1, &flags);
        step = "bringing lo up";
    }
    if (rc) {
        snprintf(why, len, "user namespace set-up, %s: %s", step, isob_strerror(rc));
        return rc;
    }
    return 0;
}

/* A datagram to itself over 127.0.0.1: 0 when it arrived. */
static int loopback_works(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    struct timeval tv = {.tv_sec = 1};
    char out = 'u', in = 0;
    int rc = 0;
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(s, (struct sockaddr *)&a, &al) != 0 ||
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        sendto(s, &out, 1, 0, (struct sockaddr *)&a, sizeof a) != 1 || recv(s, &in, 1, 0) != 1)
        rc = -errno;
    close(s);
    return rc ? rc : (in == out ? 0 : -EIO);
}

static int un_verify(struct isob_confine_state *st, char *why, size_t len)
{
    unsigned long long user = 0, mnt = 0, net = 0;
    if (isob_ns_inode("user", &user) || isob_ns_inode("mnt", &mnt) || isob_ns_inode("net", &net)) {
        snprintf(why, len, "cannot read /proc/self/ns");
        return -EIO;
    }
    isob_evidence(st, "ns_user", "[%llu,%llu]", st->ns_user, user);
    isob_evidence(st, "ns_mnt", "[%llu,%llu]", st->ns_mnt, mnt);
    isob_evidence(st, "ns_net", "[%llu,%llu]", st->ns_net, net);
    if (user == st->ns_user || mnt == st->ns_mnt || net == st->ns_net) {
        snprintf(why, len, "still in the namespaces it started in (user %s, mnt %s, net %s)",
                 user == st->ns_user ? "same" : "new", mnt == st->ns_mnt ? "same" : "new",
                 net == st->ns_net ? "same" : "new");
        return -EPERM;
    }
    char buf[256] = "";
    int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = 0;
    unsigned inside = 1, outside = 0, count = 0;
    int fields = sscanf(buf, "%u %u %u", &inside, &outside, &count);
    isob_evidence(st, "uid_map", "\"%u %u %u\"", inside, outside, count);
    if (fields != 3 || inside != 0 || outside != (unsigned)st->uid || count != 1 ||
        strchr(buf, '\n') != strrchr(buf, '\n')) {
        snprintf(why, len, "uid_map is not the one-line map 0 %u 1", (unsigned)st->uid);
        return -EPERM;
    }
    short flags = 0;
    int rc = lo_up(0, &flags);
    isob_evidence(st, "lo_flags", "\"0x%x\"", (unsigned)(unsigned short)flags);
    if (rc || !(flags & IFF_UP)) {
        snprintf(why, len, "loopback is not up in the new network namespace");
        return rc ? rc : -ENETDOWN;
    }
    rc = loopback_works();
    isob_evidence(st, "loopback_datagram", "\"%s\"", rc ? isob_strerror(rc) : "arrived");
    if (rc) {
        snprintf(why, len, "a datagram to 127.0.0.1 did not arrive: %s", isob_strerror(rc));
        return rc;
    }
    return 0;
}

const struct isob_confinement isob_confine_userns = {
    .name = "userns",
    .summary = "new user, mount and network namespaces (uid 0 inside, one uid mapped, lo up)",
    .threat = "a rootless container's view: root inside holds no privilege outside, a private "
              "mount table, no network but its own loopback; system calls are not filtered",
    .variants = un_variants,
    .probe = un_probe,
    .apply = un_apply,
    .verify = un_verify,
};
