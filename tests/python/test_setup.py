"""scripts/setup-system.sh: `make run` installs only what running needs, and
nothing the set-up installs starts (or enables) a daemon.

The installation itself runs against stand-ins for apt-get, systemctl and
update-rc.d (on PATH), with the policy file and systemd's run directory in
a temporary folder: the system is never touched."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from conftest import REPO, limit

SETUP = REPO / "scripts" / "setup-system.sh"
# Tools only the tests use, and the Debian packages that bring them: none
# belongs in the runtime set, each in the test set.
TEST_ONLY = {
    "qemu-system-x86": "the MPK tests' emulator",
    "qemu-user": "the arm64 tests' emulator",
    "gcc-aarch64-linux-gnu": "the arm64 cross compiler",
    "libc6-dev-arm64-cross": "the arm64 C library",
    "libclang-rt-14-dev": "the fuzzer's runtime",
    "openssh-server": "the campaign tests' sshd",
    "texlive-latex-base": "the paper tests' LaTeX",
    "texlive-latex-recommended": "the paper tests' booktabs",
    "poppler-utils": "the paper tests' pdffonts",
    "cpio": "the MPK tests' initramfs",
}
# What records each stand-in's calls, one line each.
STUB = """#!/bin/sh
echo "$(basename "$0") $*" >>"$STUB_LOG"
"""
# apt-get also records whether the policy in force refuses a service start
# at the moment it installs, as invoke-rc.d would ask it (policy-rc.d(8)).
APT_GET = STUB + """case "$1" in install)
  if [ -x "$POLICY_RC_D" ]; then "$POLICY_RC_D" ssh start; echo "policy: $?" >>"$STUB_LOG"
  else echo "policy: none" >>"$STUB_LOG"; fi
  exit "${APT_GET_RC:-0}";;
esac
"""


def listed(which: str) -> list[str]:
    p = subprocess.run(["bash", str(SETUP), "--list", which], capture_output=True, text=True,
                       timeout=limit(60))
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def test_runtime_set_holds_no_test_only_package():
    runtime, test = set(listed("runtime")), set(listed("test"))
    assert runtime and test
    assert not runtime & test, f"in both sets: {runtime & test}"
    assert not runtime & set(TEST_ONLY), \
        "test-only in the runtime set: " + ", ".join(f"{p} ({TEST_ONLY[p]})"
                                                   for p in sorted(runtime & set(TEST_ONLY)))
    assert set(TEST_ONLY) <= test, f"missing from the test set: {set(TEST_ONLY) - test}"
    # What `make run` does need stays in the runtime set.
    assert {"meson", "ninja-build", "gcc", "memcached", "libmemcached-tools",
            "libseccomp-dev"} <= runtime


def test_bad_option_is_one_line_and_exit_2():
    p = subprocess.run(["bash", str(SETUP), "--bogus"], capture_output=True, text=True,
                       timeout=limit(60))
    assert p.returncode == 2
    assert p.stdout == "" and len(p.stderr.splitlines()) == 1 and "usage:" in p.stderr


def install(tmp_path: Path, *packages: str, systemd: bool = True, sysv: tuple[str, ...] = (),
            apt_rc: int = 0) -> tuple[subprocess.CompletedProcess, list[str]]:
    """install_without_daemons PACKAGES with the stand-ins: (the run, the
    stand-ins' log lines)."""
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    for name, text in (("apt-get", APT_GET), ("systemctl", STUB), ("update-rc.d", STUB)):
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    log = tmp_path / "calls.log"
    log.write_text("")
    run_dir = tmp_path / "run-systemd-system"
    if systemd:
        run_dir.mkdir(exist_ok=True)
    init_d = tmp_path / "init.d"
    init_d.mkdir(exist_ok=True)
    for name in sysv:
        (init_d / name).write_text("#!/bin/sh\n")
    env = {**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}",
           "STUB_LOG": str(log), "POLICY_RC_D": str(tmp_path / "policy-rc.d"),
           "SYSTEMD_RUNNING_DIR": str(run_dir), "INIT_D": str(init_d),
           "APT_GET_RC": str(apt_rc)}
    p = subprocess.run(["bash", "-c", f'source "{SETUP}"; install_without_daemons "$@"',
                        "setup", *packages], capture_output=True, text=True, env=env,
                       timeout=limit(60))
    return p, log.read_text().splitlines()


def test_install_refuses_service_starts_then_disables_services(tmp_path):
    p, calls = install(tmp_path, "openssh-server", "memcached", "cpio")
    assert p.returncode == 0, p.stderr
    assert calls[0] == "apt-get install -y -qq --no-install-recommends openssh-server memcached cpio"
    # While the packages installed, every start was refused (101: forbidden).
    assert calls[1] == "policy: 101"
    # Afterwards the policy is gone, and each service is disabled and
    # stopped; a package without one (cpio) is left alone.
    assert not (tmp_path / "policy-rc.d").exists()
    assert calls[2:] == ["systemctl disable --now --quiet ssh.service",
                         "systemctl disable --now --quiet ssh.socket",
                         "systemctl disable --now --quiet memcached.service"]


def test_without_systemd_running_services_are_still_disabled(tmp_path):
    p, calls = install(tmp_path, "memcached", systemd=False, sysv=("memcached",))
    assert p.returncode == 0, p.stderr
    assert calls[1] == "policy: 101"
    assert calls[2:] == ["systemctl disable --quiet memcached.service",
                         "update-rc.d memcached disable"]


def test_a_policy_already_there_is_put_back(tmp_path):
    mine = tmp_path / "policy-rc.d"
    mine.write_text("#!/bin/sh\n# the machine's own\nexit 0\n")
    mine.chmod(0o750)
    p, calls = install(tmp_path, "openssh-server")
    assert p.returncode == 0, p.stderr
    assert calls[1] == "policy: 101"
    assert mine.read_text() == "#!/bin/sh\n# the machine's own\nexit 0\n"
    assert stat.S_IMODE(mine.stat().st_mode) == 0o750


def test_a_failed_install_removes_the_policy_too(tmp_path):
    p, calls = install(tmp_path, "openssh-server", apt_rc=100)
    assert p.returncode == 100
    assert calls[1] == "policy: 101"
    assert not (tmp_path / "policy-rc.d").exists()
    assert not any(c.startswith("systemctl") for c in calls)


def make_dry(target: str) -> list[str]:
    """The commands `make TARGET` would run from scratch (make -n -B)."""
    p = subprocess.run(["make", "-n", "-B", "--no-print-directory", target], cwd=REPO,
                       capture_output=True, text=True, timeout=limit(60))
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_make_run_installs_the_runtime_set_and_builds_only_isob():
    lines = make_dry("run")
    assert "bash scripts/setup-system.sh --runtime" in lines
    assert not any("setup-system.sh --test" in l or l.strip() == "bash scripts/setup-system.sh"
                   for l in lines)
    ninja = [l for l in lines if l.startswith("ninja ")]
    assert ninja == ["ninja -C build isob isob-oslat-tiny"], ninja


def test_make_test_installs_the_test_set():
    assert "bash scripts/setup-system.sh --test" in make_dry("test-c")
