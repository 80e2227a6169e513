"""The environment of a run, read from fixture /proc and /sys trees."""

from isobench.measure import sysinfo
from isobench.core.records import Header

from conftest import FIXTURES, REPO
from test_records import HEADER


def test_kvm_guest():
    env = sysinfo.collect(FIXTURES / "sysroot_kvm")
    assert env["cpu_model"] == "AMD EPYC"
    assert env["microcode"] == "0x1000065"
    assert "constant_tsc" in env["cpu_flags"] and "hypervisor" in env["cpu_flags_relevant"]
    assert env["kernel"] == "6.1.0-test-cloud-amd64"
    assert env["hypervisor"] == "KVM"
    assert env["governor"] is None and "cpufreq" in env["reasons"]["governor"]
    assert (env["smt"], env["smt_control"]) == (False, "notsupported")
    assert env["pmu"] is False
    assert env["perf_event_paranoid"] == 2
    assert env["clocksource"] == "tsc"
    assert env["memory_bytes"] == 4020000 * 1024
    assert env["mitigations"] == {"meltdown": "Not affected",
                                  "spectre_v2": "Mitigation: Retpolines; STIBP: disabled"}
    assert env["tsc_hz"] is None and env["counter"] is None


def test_bare_metal():
    env = sysinfo.collect(FIXTURES / "sysroot_metal")
    assert env["hypervisor"] is None
    assert env["governor"] == "performance"
    assert env["smt"] is True
    assert env["pmu"] is True
    assert env["perf_event_paranoid"] == -1
    assert "pku" in env["cpu_flags_relevant"]


def test_header_fills_counter_fields():
    env = sysinfo.collect(FIXTURES / "sysroot_kvm")
    env = sysinfo.apply_header(env, Header.from_line(HEADER))
    assert (env["counter"], env["tsc_hz"], env["tsc_hz_source"]) == ("tsc", 2.6e9,
                                                                     "tsc_known_freq")
    assert "tsc_hz" not in env["reasons"]
    perf = sysinfo.apply_header(env, Header.from_line({**HEADER, "counter": "perf",
                                                        "tsc_hz": None}))
    assert (perf["pmu"], perf["pmu_source"]) == (True, "isob header")


def test_compiler_and_git():
    env = sysinfo.collect(FIXTURES / "sysroot_kvm", driver_version={"version": "1", "cc": "gcc",
                                                                     "cflags": "-O2"}, repo=REPO)
    assert env["compiler"] == {"version": "1", "cc": "gcc", "cflags": "-O2"}
    # Either a commit with its dirty flag, or None with a reason (no commit yet).
    if env["git"] is None:
        assert env["reasons"]["git"]
    else:
        assert set(env["git"]) == {"commit", "dirty"}


def test_this_machine_does_not_crash():
    env = sysinfo.collect()
    assert isinstance(env["cpu_flags"], list)
    assert isinstance(env["nproc"], int)
