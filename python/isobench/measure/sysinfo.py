"""The machine a run came from: everything that changes what a number means.

collect() reads /proc and /sys (under a root folder, so that tests can point
it at a fixture tree), asks the driver how it was built, and asks git which
commit the tree is at.  Nothing here changes system state.

Every field that cannot be known is None, and reasons[field] says why: "no
governor" must be distinguishable from "forgot to look".  Fields that only
the native driver knows (counter backend, TSC frequency, PMU use) start
unknown and are filled from the first isob header by apply_header().
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Mapping

from .. import __version__
from ..core.records import Header

# Flags that decide which mechanisms and counters can work, or how fast they
# are; `isobench show` prints these, the store keeps all of them.
RELEVANT_FLAGS = ("pku", "ospke", "constant_tsc", "nonstop_tsc", "tsc_known_freq", "rdtscp",
                  "invariant_tsc", "hypervisor", "pcid", "invpcid", "smep", "smap", "ibrs",
                  "ibpb", "stibp", "ssbd", "md_clear", "arch_perfmon", "pdpe1gb", "la57")

# /sys/class/dmi/id/sys_vendor values of common hypervisors.
DMI_VENDORS = {
    "QEMU": "QEMU",
    "VMware, Inc.": "VMware",
    "Microsoft Corporation": "Hyper-V",
    "innotek GmbH": "VirtualBox",
    "Xen": "Xen",
    "Amazon EC2": "KVM",
    "Google": "KVM",
}

# A clock source only a hypervisor provides names that hypervisor.
CLOCKSOURCE_HYPERVISORS = {"kvm-clock": "KVM", "hyperv_clocksource_tsc_page": "Hyper-V",
                           "xen": "Xen", "vmware-tsc": "VMware"}

GIT_TIMEOUT = 5.0

# Files that tell how the machine is set up for measuring (system.py tunes
# some of them).  Turbo has two spellings: intel_pstate's no_turbo (1 = off)
# and the generic cpufreq boost (1 = on).
GOVERNOR_PATH = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
NO_TURBO_PATH = "/sys/devices/system/cpu/intel_pstate/no_turbo"
BOOST_PATH = "/sys/devices/system/cpu/cpufreq/boost"
ASLR_PATH = "/proc/sys/kernel/randomize_va_space"
RDPMC_PATH = "/sys/bus/event_source/devices/cpu/rdpmc"
NMI_WATCHDOG_PATH = "/proc/sys/kernel/nmi_watchdog"
ISOLATED_PATH = "/sys/devices/system/cpu/isolated"


class _Reader:
    """Reads files below root; missing or unreadable files read as None."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def text(self, path: str) -> str | None:
        try:
            return (self.root / path.lstrip("/")).read_text(errors="replace").strip()
        except OSError:
            return None

    def exists(self, path: str) -> bool:
        return (self.root / path.lstrip("/")).exists()

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(self.root / path.lstrip("/")))
        except OSError:
            return []


def collect(root: Path = Path("/"), driver_version: Mapping | None = None,
            repo: Path | None = None) -> dict:
    """The environment of a run, as a JSON-able dict (see the module doc)."""
    r = _Reader(root)
    env: dict = {"isobench_version": __version__}
    reasons: dict[str, str] = {}
    env.update(_cpu(r, reasons))
    env["kernel"] = r.text("/proc/sys/kernel/osrelease") or platform.release()
    env["mitigations"] = _mitigations(r, reasons)
    env["governor"] = _governor(r, reasons)
    env["turbo"] = _turbo(r, reasons)
    env["smt"], env["smt_control"] = _smt(r, reasons)
    env["aslr"] = _int_setting(r, ASLR_PATH, "aslr", reasons)
    env["rdpmc"] = _int_setting(r, RDPMC_PATH, "rdpmc", reasons)
    env["nmi_watchdog"] = _int_setting(r, NMI_WATCHDOG_PATH, "nmi_watchdog", reasons)
    env["isolated_cpus"] = r.text(ISOLATED_PATH)
    if env["isolated_cpus"] is None:
        reasons["isolated_cpus"] = f"no {ISOLATED_PATH}"
    env["hypervisor"] = _hypervisor(r, env["cpu_flags"], reasons)
    env["pmu"], env["pmu_source"] = _pmu_probe(r), "sysfs"
    env["perf_event_paranoid"] = _int(r.text("/proc/sys/kernel/perf_event_paranoid"))
    if env["perf_event_paranoid"] is None:
        reasons["perf_event_paranoid"] = "no /proc/sys/kernel/perf_event_paranoid"
    env["clocksource"] = r.text("/sys/devices/system/clocksource/clocksource0/current_clocksource")
    env["counter"] = env["counter_why"] = env["unit"] = None
    env["tsc_hz"] = env["tsc_hz_source"] = None
    reasons["counter"] = reasons["tsc_hz"] = "no isob header seen (nothing measured)"
    env["compiler"] = _compiler(driver_version, reasons)
    env["git"] = _git(repo, reasons)
    env["python"] = f"{platform.python_implementation()} {platform.python_version()}"
    env["hostname"] = socket.gethostname()
    env["nproc"] = os.cpu_count()
    env["nproc_usable"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    env["memory_bytes"] = _memory(r)
    env["reasons"] = reasons
    return env


def apply_header(env: Mapping, header: Header) -> dict:
    """env with what only the native driver knows, taken from an isob header."""
    out = dict(env)
    reasons = dict(out.get("reasons") or {})
    out["counter"] = header.counter
    out["counter_why"] = header.counter_why
    out["unit"] = header.unit
    out["tsc_hz"] = header.tsc_hz
    out["tsc_hz_source"] = header.tsc_hz_source
    reasons.pop("counter", None)
    reasons.pop("tsc_hz", None)
    if header.tsc_hz is None:
        reasons["tsc_hz"] = f"counter {header.counter} does not use the TSC"
    if header.counter == "perf":
        # The driver opened hardware counters: that settles it.
        out["pmu"], out["pmu_source"] = True, "isob header"
    out["reasons"] = reasons
    return out


def _cpu(r: _Reader, reasons: dict) -> dict:
    info = _first_cpu_block(r.text("/proc/cpuinfo") or "")
    flags = sorted(set(info.get("flags", "").split()))
    if not info:
        reasons["cpu_model"] = "no /proc/cpuinfo"
    microcode = info.get("microcode")
    if microcode is None:
        reasons["microcode"] = "/proc/cpuinfo has no microcode field"
    return {
        "cpu_model": info.get("model name") or info.get("cpu model") or None,
        "cpu_flags": flags,
        "cpu_flags_relevant": [f for f in RELEVANT_FLAGS if f in flags],
        "microcode": microcode,
    }


def _first_cpu_block(text: str) -> dict[str, str]:
    info: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if info:
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            info[key.strip()] = value.strip()
    return info


def _mitigations(r: _Reader, reasons: dict) -> dict[str, str]:
    base = "/sys/devices/system/cpu/vulnerabilities"
    names = r.listdir(base)
    if not names:
        reasons["mitigations"] = f"no {base}"
    return {n: r.text(f"{base}/{n}") or "" for n in names}


def _governor(r: _Reader, reasons: dict) -> str | None:
    gov = r.text(GOVERNOR_PATH)
    if gov is None:
        reasons["governor"] = ("no /sys/devices/system/cpu/cpu0/cpufreq: no cpufreq driver "
                               "(usual in virtual machines)")
    return gov


def _turbo(r: _Reader, reasons: dict) -> bool | None:
    no_turbo = _int(r.text(NO_TURBO_PATH))
    if no_turbo is not None:
        return no_turbo == 0
    boost = _int(r.text(BOOST_PATH))
    if boost is not None:
        return boost == 1
    reasons["turbo"] = (f"neither {NO_TURBO_PATH} nor {BOOST_PATH}: no frequency driver that "
                        "exposes turbo (usual in virtual machines)")
    return None


def _int_setting(r: _Reader, path: str, name: str, reasons: dict) -> int | None:
    value = _int(r.text(path))
    if value is None:
        reasons[name] = f"no {path}"
    return value


def _smt(r: _Reader, reasons: dict) -> tuple[bool | None, str | None]:
    active = r.text("/sys/devices/system/cpu/smt/active")
    control = r.text("/sys/devices/system/cpu/smt/control")
    if active is None:
        reasons["smt"] = "no /sys/devices/system/cpu/smt/active"
        return None, control
    return active == "1", control


def _hypervisor(r: _Reader, flags: list[str], reasons: dict) -> str | None:
    """None on bare metal; else the hypervisor's name as far as it can be told."""
    if "hypervisor" not in flags:
        return None
    kind = r.text("/sys/hypervisor/type")
    if kind:
        return kind.capitalize() if kind.lower() == "xen" else kind
    sources = (r.text("/sys/devices/system/clocksource/clocksource0/available_clocksource")
               or "").split()
    for source, name in CLOCKSOURCE_HYPERVISORS.items():
        if source in sources:
            return name
    vendor = r.text("/sys/class/dmi/id/sys_vendor")
    if vendor:
        return DMI_VENDORS.get(vendor, vendor)
    reasons["hypervisor"] = "CPU flags say virtual machine, but no source names the hypervisor"
    return "unknown"


def _pmu_probe(r: _Reader) -> bool:
    # The kernel registers the "cpu" event source only when it drives a
    # hardware PMU; guests without a virtual PMU have software events only.
    return (r.exists("/sys/bus/event_source/devices/cpu")
            or r.exists("/sys/bus/event_source/devices/cpu_core"))


def _memory(r: _Reader) -> int | None:
    for line in (r.text("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _compiler(driver_version: Mapping | None, reasons: dict) -> dict | None:
    if not driver_version:
        reasons["compiler"] = "isob --version --json gave no answer"
        return None
    return {k: driver_version.get(k) for k in ("version", "cc", "cflags")}


def _git(repo: Path | None, reasons: dict) -> dict | None:
    if repo is None:
        reasons["git"] = "no repository given"
        return None
    head = _run_git(repo, "rev-parse", "HEAD")
    if head is None:
        reasons["git"] = f"git rev-parse HEAD failed in {repo} (not a checkout, or no commit yet)"
        return None
    status = _run_git(repo, "status", "--porcelain", "--untracked-files=no")
    return {"commit": head, "dirty": bool(status) if status is not None else None}


def _run_git(repo: Path, *args: str) -> str | None:
    try:
        p = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                           timeout=GIT_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.strip() if p.returncode == 0 else None
