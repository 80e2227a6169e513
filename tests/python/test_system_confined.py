"""`system reset` writes as root only what `system tune` changed, only below
the sysroot, and only from a state file no one else could have planted.
Each hostile state file is refused with one line and nothing is written:
not in the fake sysroot, not outside it."""

import json
import os
import shutil

import pytest

from isobench.measure import system

from conftest import FIXTURES, assert_one_error_line

GOV0 = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
NO_TURBO = "/sys/devices/system/cpu/intel_pstate/no_turbo"
ASLR = "/proc/sys/kernel/randomize_va_space"


def put(root, rel, text):
    path = root / rel.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


@pytest.fixture
def machine(tmp_path):
    """A fake sysroot, a file outside it that an attack would aim at, and a
    state folder only its owner can write."""
    root = tmp_path / "root"
    shutil.copytree(FIXTURES / "sysroot_metal", root)
    for cpu in (0, 1):
        put(root, f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor", "powersave")
    put(root, NO_TURBO, "0")
    put(root, "/proc/sys/kernel/nmi_watchdog", "1")
    put(root, ASLR, "2")
    put(root, "/proc/sys/kernel/core_pattern", "core")
    outside = tmp_path / "outside" / "etc" / "passwd"
    outside.parent.mkdir(parents=True)
    outside.write_text("root:x:0:0\n")
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o755)
    os.chmod(state_dir, 0o755)
    return root, outside, state_dir / "system-state.json"


def snapshot(*folders):
    out = {}
    for folder in folders:
        for p in sorted(folder.rglob("*")):
            if p.is_file() and not p.is_symlink():
                out[str(p)] = p.read_bytes()
    return out


def plant(state, root, settings, version=2, mode=0o644):
    state.write_text(json.dumps({"version": version, "saved": "2024-01-01T00:00:00+00:00",
                                 "root": str(root), "settings": settings}))
    os.chmod(state, mode)


def refused(isobench, root, outside, state, needle):
    before = snapshot(root, outside.parent)
    p = isobench("system", "reset", "--state", str(state), ISOBENCH_SYSROOT=str(root))
    line = assert_one_error_line(p)
    assert "refusing the state file" in line and "nothing was written" in line
    assert needle in line, line
    assert snapshot(root, outside.parent) == before
    return line


@pytest.mark.parametrize("settings, needle", [
    ({"aslr": {"/proc/sys/kernel/../../../../outside/etc/passwd": "0"}}, "not a plain path"),
    ({"aslr": {"/proc/sys/kernel/core_pattern": "0"}}, "is not a file of the aslr setting"),
    ({"governor": {"/sys/devices/system/cpu/cpu0/x/cpufreq/scaling_governor": "performance"}},
     "is not a file of the governor setting"),
    ({"core-pattern": {"/proc/sys/kernel/core_pattern": "|/bin/sh"}},
     "is not a setting isobench tunes"),
    ({"aslr": {"proc/sys/kernel/randomize_va_space": "0"}}, "not an absolute path"),
    ({"aslr": {ASLR: "0\n/bin/sh"}}, "is not a plain value"),
    ({"aslr": {ASLR: "$(reboot)"}}, "is not a plain value"),
    ({"aslr": ["x"]}, "holds no paths"),
])
def test_hostile_entries_are_refused(isobench, machine, settings, needle):
    root, outside, state = machine
    # A good entry first: reset must check everything before writing anything.
    plant(state, root, {"turbo": {NO_TURBO: "1"}, **settings})
    refused(isobench, root, outside, state, needle)
    assert state.exists()


def test_a_symlink_out_of_the_sysroot_is_refused(isobench, machine):
    root, outside, state = machine
    target = root / ASLR.lstrip("/")
    target.unlink()
    target.symlink_to(outside)
    plant(state, root, {"aslr": {ASLR: "0"}})
    refused(isobench, root, outside, state, "leads outside")
    assert outside.read_text() == "root:x:0:0\n"


def test_a_state_writable_by_others_is_refused(isobench, machine):
    root, outside, state = machine
    plant(state, root, {"turbo": {NO_TURBO: "1"}}, mode=0o666)
    refused(isobench, root, outside, state, "writable by others")


def test_a_state_in_a_folder_writable_by_others_is_refused(isobench, machine):
    root, outside, state = machine
    plant(state, root, {"turbo": {NO_TURBO: "1"}})
    os.chmod(state.parent, 0o1777)  # like /tmp
    refused(isobench, root, outside, state, "is writable by others")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_state_owned_by_another_user_is_refused(isobench, machine):
    root, outside, state = machine
    plant(state, root, {"turbo": {NO_TURBO: "1"}})
    os.chown(state, 65534, 65534)
    refused(isobench, root, outside, state, "belongs to uid 65534")


def test_a_symlinked_state_is_refused(isobench, machine, tmp_path):
    root, outside, state = machine
    real = state.parent / "real.json"
    plant(real, root, {"turbo": {NO_TURBO: "1"}})
    state.symlink_to(real)
    refused(isobench, root, outside, state, "symbolic link")


def test_a_state_for_another_root_is_refused(isobench, machine, tmp_path):
    root, outside, state = machine
    plant(state, tmp_path / "elsewhere", {"turbo": {NO_TURBO: "1"}})
    refused(isobench, root, outside, state, "was saved for the root")


def test_a_fifo_state_does_not_hang(isobench, machine):
    root, outside, state = machine
    os.mkfifo(state, 0o644)
    refused(isobench, root, outside, state, "not a regular file")


def test_tune_refuses_a_folder_others_can_write(isobench, machine, tmp_path):
    root, outside, _ = machine
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    before = snapshot(root)
    p = isobench("system", "tune", "--state", str(shared / "s.json"), ISOBENCH_SYSROOT=str(root))
    line = assert_one_error_line(p)
    assert "writable by others" in line and "nothing was changed" in line
    assert snapshot(root) == before and not (shared / "s.json").exists()


def test_tune_records_only_what_it_changed(machine):
    root, outside, state = machine

    def writer(r, path, value):
        if path == NO_TURBO:
            raise PermissionError(13, "Permission denied")
        system._write(r, path, value)

    outcomes, note = system.tune(root, state, writer=writer)
    status = {o.name: o.status for o in outcomes}
    assert status == {"governor": "changed", "turbo": "denied", "nmi-watchdog": "changed",
                      "aslr": "already"}
    saved = json.loads(state.read_text())
    assert saved["version"] == system.STATE_VERSION
    # turbo could not be changed and ASLR needed no change: neither is recorded.
    assert set(saved["settings"]) == {"governor", "nmi-watchdog"}
    assert saved["settings"]["nmi-watchdog"] == {"/proc/sys/kernel/nmi_watchdog": "1"}


def test_tune_that_changes_nothing_saves_nothing(machine):
    root, outside, state = machine
    system.tune(root, state)
    system.reset(root, state)
    for cpu in (0, 1):
        put(root, f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor", "performance")
    put(root, NO_TURBO, "1")
    put(root, "/proc/sys/kernel/nmi_watchdog", "0")
    outcomes, note = system.tune(root, state)
    assert {o.status for o in outcomes} == {"already"}
    assert not state.exists() and "no state was saved" in note


def test_reset_still_restores_a_good_state(isobench, machine):
    root, outside, state = machine
    plant(state, root, {"turbo": {NO_TURBO: "1"}, "governor": {GOV0: "ondemand"}})
    p = isobench("system", "reset", "--state", str(state), ISOBENCH_SYSROOT=str(root))
    assert p.returncode == 0, p.stderr
    assert (root / NO_TURBO.lstrip("/")).read_text().strip() == "1"
    assert (root / GOV0.lstrip("/")).read_text().strip() == "ondemand"
    assert not state.exists()


def test_tune_does_not_follow_a_symlink_out_of_the_sysroot(isobench, machine):
    """tune is confined like reset: a setting's file whose link leads out of
    the sysroot is neither read nor written, and says so."""
    root, outside, state = machine
    target = root / NO_TURBO.lstrip("/")
    target.unlink()
    target.symlink_to(outside)
    outside.write_text("0\n")  # turbo on: tune would write 1 through the link
    p = isobench("system", "tune", "--state", str(state), ISOBENCH_SYSROOT=str(root))
    assert "leads outside" in p.stdout + p.stderr, p.stdout + p.stderr
    assert outside.read_text() == "0\n"
    saved = json.loads(state.read_text())["settings"] if state.exists() else {}
    assert "turbo" not in saved
    # The other settings were tuned, and reset restores them.
    assert (root / GOV0.lstrip("/")).read_text().strip() == "performance"
    p = isobench("system", "reset", "--state", str(state), ISOBENCH_SYSROOT=str(root))
    assert p.returncode == 0, p.stderr
    assert outside.read_text() == "0\n"
