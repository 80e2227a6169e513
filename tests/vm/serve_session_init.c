/* /init of a QEMU guest that runs the rollback cases of
 * tests/c/test_serve_session.c (/test_serve_session_static)
 * under another kernel than the build machine's: the cloud kernel of
 * run-vm-init.sh, a Linux 6.1 with soft-dirty bits and without
 * userfaultfd's asynchronous write-protect, where --session rollback runs
 * by softdirty.  It mounts /proc (a rollback reads /proc/self/maps,
 * pagemap and clear_refs), brings the loopback up, runs the cases whose
 * names hold "rollback" or "prefork", prints SERVE-VM-RESULT and powers
 * the guest off. */
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    mount("proc", "/proc", "proc", 0, NULL);
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq r;
    memset(&r, 0, sizeof r);
    strcpy(r.ifr_name, "lo");
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &r) != 0 ||
        (r.ifr_flags |= IFF_UP, ioctl(s, SIOCSIFFLAGS, &r)) != 0)
        printf("# the loopback could not be brought up\n");
    struct utsname u;
    uname(&u);
    printf("# guest kernel %s\n", u.release);
    fflush(stdout);
    setenv("ISOB_TEST_CASES", "rollback,prefork", 1);
    pid_t p = fork();
    if (p == 0) {
        execl("/test_serve_session_static", "test_serve_session_static", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(p, &st, 0);
    printf("SERVE-VM-RESULT: %s\n",
           WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "pass" : "fail");
    fflush(stdout);
    sync();
    reboot(RB_POWER_OFF);
    return 0;
}
