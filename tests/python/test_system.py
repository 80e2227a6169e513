"""`isobench system`: show, tune and reset against a fake /sys and /proc
(never the real ones), including settings that are absent or not writable."""

import json
import shutil

import pytest

from isobench.measure import sysinfo, system

from conftest import FIXTURES, assert_one_error_line

GOV = "sys/devices/system/cpu/cpu{}/cpufreq/scaling_governor"
NO_TURBO = "sys/devices/system/cpu/intel_pstate/no_turbo"
NMI = "proc/sys/kernel/nmi_watchdog"
ASLR = "proc/sys/kernel/randomize_va_space"


def put(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def read(root, rel):
    return (root / rel).read_text().strip()


@pytest.fixture
def metal(tmp_path):
    """A bare-metal machine in its everyday state: powersave, turbo, watchdog on."""
    root = tmp_path / "root"
    shutil.copytree(FIXTURES / "sysroot_metal", root)
    for cpu in (0, 1):
        put(root, GOV.format(cpu), "powersave")
    put(root, NO_TURBO, "0")
    put(root, NMI, "1")
    put(root, ASLR, "2")
    put(root, "sys/devices/system/cpu/isolated", "")
    put(root, "sys/bus/event_source/devices/cpu/rdpmc", "1")
    return root


@pytest.fixture
def kvm(tmp_path):
    root = tmp_path / "kvm"
    shutil.copytree(FIXTURES / "sysroot_kvm", root)
    return root


def by_name(outcomes):
    return {o.name: o for o in outcomes}


def test_sysinfo_reads_the_new_fields(metal, kvm):
    env = sysinfo.collect(metal)
    assert (env["turbo"], env["aslr"], env["nmi_watchdog"], env["rdpmc"]) == (True, 2, 1, 1)
    assert env["isolated_cpus"] == ""
    env = sysinfo.collect(kvm)
    assert env["turbo"] is None and "turbo" in env["reasons"]
    assert env["aslr"] is None and env["rdpmc"] is None


def test_show(metal):
    o = by_name(system.show(metal))
    assert o["governor"].status == "would-change"
    assert "powersave (all 2 CPUs)" in o["governor"].detail
    assert o["turbo"].status == "would-change" and o["nmi-watchdog"].status == "would-change"
    assert o["aslr"].status == "ok"
    for shown in ("smt", "perf_event_paranoid", "rdpmc", "isolated_cpus", "clocksource",
                  "hypervisor", "pmu"):
        assert o[shown].status == "shown", shown


def test_tune_then_reset_restores_everything(metal, tmp_path):
    state = tmp_path / "state" / "system-state.json"
    outcomes, note = system.tune(metal, state)
    o = by_name(outcomes)
    assert [x.name for x in outcomes] == ["governor", "turbo", "nmi-watchdog", "aslr"]
    assert [o[n].status for n in ("governor", "turbo", "nmi-watchdog", "aslr")] == [
        "changed", "changed", "changed", "already"]
    assert (read(metal, GOV.format(0)), read(metal, GOV.format(1))) == ("performance",) * 2
    assert (read(metal, NO_TURBO), read(metal, NMI)) == ("1", "0")
    saved = json.loads(state.read_text())["settings"]
    assert saved["governor"] == {"/" + GOV.format(0): "powersave", "/" + GOV.format(1): "powersave"}
    assert saved["turbo"] == {"/" + NO_TURBO: "0"}
    # Only what tune changed: ASLR was already at 2.
    assert set(saved) == {"governor", "turbo", "nmi-watchdog"}
    assert "saved" in note

    outcomes, note = system.reset(metal, state)
    assert [x.name for x in outcomes] == ["aslr", "nmi-watchdog", "turbo", "governor"]
    assert by_name(outcomes)["governor"].status == "restored"
    assert by_name(outcomes)["aslr"].status == "absent"
    assert "did not change it" in by_name(outcomes)["aslr"].detail
    assert (read(metal, GOV.format(1)), read(metal, NO_TURBO), read(metal, NMI)) == (
        "powersave", "0", "1")
    assert not state.exists() and "removed" in note


def test_a_second_tune_keeps_the_first_saved_state(metal, tmp_path):
    state = tmp_path / "s.json"
    system.tune(metal, state)
    _, note = system.tune(metal, state)
    assert "kept the state saved earlier" in note
    assert json.loads(state.read_text())["settings"]["turbo"] == {"/" + NO_TURBO: "0"}
    system.reset(metal, state)
    assert read(metal, NO_TURBO) == "0"


def test_absent_settings_change_nothing(kvm, tmp_path):
    before = {p: p.read_text() for p in kvm.rglob("*") if p.is_file()}
    outcomes, _ = system.tune(kvm, tmp_path / "s.json")
    assert {o.status for o in outcomes} == {"absent"}
    assert "cpufreq" in by_name(outcomes)["governor"].detail
    assert {p: p.read_text() for p in kvm.rglob("*") if p.is_file()} == before


def test_denied_setting_is_left_as_it_was(metal, tmp_path):
    def writer(root, path, value):
        if path.endswith("cpu1/cpufreq/scaling_governor") or path.endswith("no_turbo"):
            raise PermissionError(13, "Permission denied")
        system._write(root, path, value)

    outcomes, _ = system.tune(metal, tmp_path / "s.json", writer=writer)
    o = by_name(outcomes)
    assert (o["governor"].status, o["turbo"].status, o["nmi-watchdog"].status) == (
        "denied", "denied", "changed")
    assert "run as root" in o["governor"].detail
    # cpu0 was written first and put back: the setting is all or nothing.
    assert (read(metal, GOV.format(0)), read(metal, NO_TURBO)) == ("powersave", "0")


def test_reset_without_saved_state(metal, tmp_path):
    with pytest.raises(system.UsageError, match="nothing to reset"):
        system.reset(metal, tmp_path / "none.json")


def test_cli_show_tune_reset(isobench, metal, tmp_path):
    state = tmp_path / "st.json"
    env = {"ISOBENCH_SYSROOT": str(metal)}
    doc, p = isobench.json("system", "show", "--json", **env)
    assert p.returncode == 0 and doc["action"] == "show"
    assert {s["name"] for s in doc["settings"]} >= {"governor", "turbo", "aslr", "smt",
                                                   "isolated_cpus", "rdpmc"}
    p = isobench("system", "tune", "--state", str(state), **env)
    assert p.returncode == 0, p.stderr
    assert "changed" in p.stdout and state.exists()
    assert read(metal, GOV.format(0)) == "performance"
    doc, p = isobench.json("system", "reset", "--state", str(state), "--json", **env)
    assert p.returncode == 0
    assert read(metal, GOV.format(0)) == "powersave" and not state.exists()
    line = assert_one_error_line(isobench("system", "reset", "--state", str(state), **env))
    assert "nothing to reset" in line


def test_cli_default_state_file_is_in_a_root_folder(isobench, metal):
    p = isobench("system", "tune", ISOBENCH_SYSROOT=str(metal))
    assert p.returncode == 0, p.stderr
    state = metal / "run" / "isobench" / "system-state.json"
    assert state.exists() and not (isobench.db.parent / "system-state.json").exists()
    assert oct(state.parent.stat().st_mode & 0o777) == "0o755"
    assert state.stat().st_mode & 0o022 == 0
    p = isobench("system", "reset", ISOBENCH_SYSROOT=str(metal))
    assert p.returncode == 0, p.stderr
    assert read(metal, GOV.format(0)) == "powersave" and not state.exists()


def test_cli_unwritable_state_changes_nothing(isobench, metal, tmp_path):
    (tmp_path / "plain-file").write_text("x")
    p = isobench("system", "tune", "--state", str(tmp_path / "plain-file" / "s.json"),
                 ISOBENCH_SYSROOT=str(metal))
    assert "nothing was changed" in assert_one_error_line(p)
    assert read(metal, GOV.format(0)) == "powersave"


def test_cli_system_check(isobench, kvm, metal):
    # Machine findings are warnings: the exit status says so only with --strict.
    doc, p = isobench.json("system", "check", "--json", ISOBENCH_SYSROOT=str(kvm))
    assert p.returncode == 0
    assert [f["id"] for f in doc["findings"]] == ["virtual-machine", "pmu-missing"]
    assert {f["severity"] for f in doc["findings"]} == {"warning"}
    p = isobench("system", "check", "--strict", ISOBENCH_SYSROOT=str(kvm))
    assert p.returncode == 3 and "WARNING virtual-machine" in p.stdout
    doc, p = isobench.json("system", "check", "--json", ISOBENCH_SYSROOT=str(metal))
    assert [f["id"] for f in doc["findings"]] == ["frequency-scaling", "smt-active"]
    assert_one_error_line(isobench("system", "fly"))
