"""`isobench system show|check|tune|reset`: the machine state that matters to measuring.

`tune` sets what it is allowed to (the TUNABLES, in order), after saving
the previous values to a state file; `reset` writes the saved values back in
the reverse order and removes the file.  The choices follow pyperf's
`system tune`: frequency governor `performance`, turbo off, the NMI
watchdog off (it holds a hardware counter, so perf groups get multiplexed),
and ASLR at full randomization -- left on, as pyperf does, because the
mechanisms are deployed with it and `run --repeat` samples several layouts
in fresh processes instead of freezing one lucky or unlucky layout.

SMT, isolated CPUs, perf_event_paranoid, rdpmc and the clock source are
shown but never changed: they are boot parameters or security settings
whose right value depends on the machine's other users.

Every path is read below a root folder (`/` unless ISOBENCH_SYSROOT says
otherwise), so the tests run all of this against a fake /sys and /proc.
Where a setting does not exist (no cpufreq in a VM) or cannot be written (not
root), `tune` says so for that setting and leaves it as it was.
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from . import sysinfo, table
from .errors import UsageError
from .store import now

ENV_SYSROOT = "ISOBENCH_SYSROOT"
STATE_VERSION = 1


@dataclass(frozen=True)
class Tunable:
    name: str
    what: str
    # (path pattern, value tune writes): the first pattern present here is used.
    choices: tuple[tuple[str, str], ...]
    absent: str  # why it may not exist

    def present(self, root: Path) -> tuple[list[str], str] | None:
        for pattern, wanted in self.choices:
            paths = sorted("/" + str(p.relative_to(root))
                           for p in root.glob(pattern.lstrip("/")) if p.is_file())
            if paths:
                return paths, wanted
        return None


TUNABLES: tuple[Tunable, ...] = (
    Tunable("governor", "CPU frequency governor",
            (("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor", "performance"),),
            "no cpufreq driver (usual in virtual machines: the host sets the frequency)"),
    Tunable("turbo", "turbo boost",
            ((sysinfo.NO_TURBO_PATH, "1"), (sysinfo.BOOST_PATH, "0")),
            "neither intel_pstate/no_turbo nor cpufreq/boost (usual in virtual machines)"),
    Tunable("nmi-watchdog", "NMI watchdog (holds a hardware counter)",
            ((sysinfo.NMI_WATCHDOG_PATH, "0"),), "kernel without the NMI watchdog"),
    Tunable("aslr", "address space layout randomization",
            ((sysinfo.ASLR_PATH, "2"),), "no /proc/sys/kernel/randomize_va_space"),
)


@dataclass(frozen=True)
class Outcome:
    name: str
    what: str
    status: str  # ok, would-change, changed, already, restored, absent, denied, failed, shown
    detail: str

    def as_dict(self) -> dict:
        return {"name": self.name, "what": self.what, "status": self.status,
                "detail": self.detail}


FAILURES = ("denied", "failed")


def sysroot() -> Path:
    return Path(os.environ.get(ENV_SYSROOT) or "/")


def _read(root: Path, path: str) -> str | None:
    try:
        return (root / path.lstrip("/")).read_text().strip()
    except OSError:
        return None


def _write(root: Path, path: str, value: str) -> None:
    """The only place that changes system state (tests replace it to deny writes)."""
    with open(root / path.lstrip("/"), "w") as f:
        f.write(value + "\n")


def _values(root: Path, paths: Sequence[str]) -> dict[str, str | None]:
    return {p: _read(root, p) for p in paths}


def _summary(values: dict[str, str | None]) -> str:
    distinct = sorted({str(v) for v in values.values()})
    if len(values) > 1 and len(distinct) == 1:
        return f"{distinct[0]} (all {len(values)} CPUs)"
    return ", ".join(f"{p}: {v}" for p, v in values.items()) if len(values) > 1 else distinct[0]


# ---- show ----

def show_tunable(t: Tunable, root: Path) -> Outcome:
    found = t.present(root)
    if found is None:
        return Outcome(t.name, t.what, "absent", t.absent)
    paths, wanted = found
    values = _values(root, paths)
    state = "ok" if all(v == wanted for v in values.values()) else "would-change"
    return Outcome(t.name, t.what, state,
                   f"{_summary(values)}; tune sets {wanted} ({paths[0]}"
                   f"{' ...' if len(paths) > 1 else ''})")


def _shown(env: dict) -> list[Outcome]:
    reasons = env.get("reasons") or {}

    def item(name: str, what: str, value, advice: str) -> Outcome:
        text = ("unknown" if value is None else ("yes" if value else "no")
                if isinstance(value, bool) else str(value))
        if value is None and name in reasons:
            text += f" ({reasons[name]})"
        return Outcome(name, what, "shown", f"{text}; {advice}")

    iso = env.get("isolated_cpus")
    return [
        item("smt", "SMT (hyper-threading) active", env.get("smt"),
             "off is best: a busy sibling shares the core"),
        item("perf_event_paranoid", "perf_event_paranoid", env.get("perf_event_paranoid"),
             "<= 2 for per-thread counters, <= 0 for --scope cpu"),
        item("rdpmc", "rdpmc from user space", env.get("rdpmc"),
             "1 or 2 lets isob read counters without a system call"),
        item("isolated_cpus", "isolated CPUs (isolcpus=)", iso if iso else "none",
             "isolating the measured CPUs keeps other tasks off them"),
        item("clocksource", "clock source", env.get("clocksource"), "tsc is best"),
        item("hypervisor", "hypervisor", env.get("hypervisor") or "none (bare metal)",
             "bare metal for absolute numbers"),
        item("pmu", "hardware PMU", env.get("pmu"), "needed for core cycles"),
    ]


def show(root: Path) -> list[Outcome]:
    env = sysinfo.collect(root)
    return [show_tunable(t, root) for t in TUNABLES] + _shown(env)


# ---- tune and reset ----

def capture(root: Path) -> dict[str, dict[str, str | None]]:
    """The current values of every tunable present here."""
    state = {}
    for t in TUNABLES:
        found = t.present(root)
        if found is not None:
            state[t.name] = _values(root, found[0])
    return state


def save_state(path: Path, root: Path, settings: dict) -> None:
    doc = {"version": STATE_VERSION, "saved": now(), "root": str(root), "settings": settings}
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        tmp.replace(path)
    except OSError as e:
        raise UsageError(f"cannot save the system state to {path}: {e.strerror or e} "
                         "(nothing was changed)") from None


def load_state(path: Path) -> dict:
    if not path.exists():
        raise UsageError(f"no saved system state at {path}: nothing to reset "
                         "(`isobench system tune` saves it)")
    try:
        doc = json.loads(path.read_text())
        if doc.get("version") != STATE_VERSION or not isinstance(doc.get("settings"), dict):
            raise ValueError("unknown format")
    except (OSError, ValueError) as e:
        raise UsageError(f"{path} is not a saved system state: {e}") from None
    return doc


def _apply(root: Path, t: Tunable, targets: dict[str, str], done: str,
           writer: Callable[[Path, str, str], None]) -> Outcome:
    """Write targets {path: value}; all of them or, on any error, none."""
    before = _values(root, list(targets))
    todo = {p: v for p, v in targets.items() if before[p] != v}
    if not todo:
        return Outcome(t.name, t.what, "already", _summary({p: before[p] for p in targets}))
    written: list[str] = []
    try:
        for p, v in todo.items():
            writer(root, p, v)
            written.append(p)
    except OSError as e:
        for p in written:  # leave the setting as it was
            try:
                writer(root, p, before[p] or "")
            except OSError:
                pass
        denied = isinstance(e, PermissionError) or e.errno in (errno.EACCES, errno.EPERM,
                                                               errno.EROFS)
        why = "no permission (run as root)" if denied else f"the kernel refused: {e.strerror or e}"
        return Outcome(t.name, t.what, "denied" if denied else "failed",
                       f"{why}; left at {_summary(before)}")
    return Outcome(t.name, t.what, done,
                   f"{_summary({p: before[p] for p in todo})} -> {_summary(todo)}")


def tune(root: Path, state_path: Path,
         writer: Callable[[Path, str, str], None] | None = None) -> tuple[list[Outcome], str]:
    """Save the state (unless a saved one is waiting for reset), then tune in order."""
    writer = writer or _write
    if state_path.exists():
        note = (f"kept the state saved earlier in {state_path} (reset has not run since): "
                "it holds the values from before the first tune")
    else:
        save_state(state_path, root, capture(root))
        note = f"previous state saved to {state_path}; `isobench system reset` restores it"
    outcomes = []
    for t in TUNABLES:
        found = t.present(root)
        if found is None:
            outcomes.append(Outcome(t.name, t.what, "absent", f"not changed: {t.absent}"))
            continue
        paths, wanted = found
        outcomes.append(_apply(root, t, {p: wanted for p in paths}, "changed", writer))
    return outcomes, note


def reset(root: Path, state_path: Path,
          writer: Callable[[Path, str, str], None] | None = None) -> tuple[list[Outcome], str]:
    """Write the saved values back, in the reverse order of tune."""
    writer = writer or _write
    saved = load_state(state_path)["settings"]
    outcomes = []
    for t in reversed(TUNABLES):
        values = {p: v for p, v in (saved.get(t.name) or {}).items() if v is not None}
        if not values:
            outcomes.append(Outcome(t.name, t.what, "absent", "nothing saved for it"))
            continue
        outcomes.append(_apply(root, t, values, "restored", writer))
    if any(o.status in FAILURES for o in outcomes):
        return outcomes, f"kept {state_path}: some settings could not be restored"
    state_path.unlink()
    return outcomes, f"restored; removed {state_path}"


def render(outcomes: Sequence[Outcome], note: str | None = None) -> str:
    rows = [[o.name, o.status.upper() if o.status in FAILURES else o.status, o.detail]
            for o in outcomes]
    out = [table.render(("setting", "state", "detail"), rows)]
    if note:
        out += ["", note]
    return "\n".join(out)
