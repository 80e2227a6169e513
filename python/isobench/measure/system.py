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

`reset` writes as root whatever the state file says, so the state file is
confined (pyperf keeps its state in memory; ours must survive between two
commands):

- it lives in a folder only root (or the user running isobench) can write:
  by default /run/isobench under the sysroot, never beside a store that may
  sit in /tmp; a folder or file writable by others, owned by someone else,
  or a symbolic link is refused, both when tune saves and when reset reads;
- it records only what tune itself changed (each path with the value it had
  before), saved before each write so that a crash loses nothing;
- reset checks every entry before writing any: a known setting, a path that
  matches that setting's own pattern component by component, no `..`, a
  target that stays inside the sysroot after symbolic links are followed,
  and a value of plain characters.  One bad entry and it writes nothing.
"""

from __future__ import annotations

import errno
import fnmatch
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from . import sysinfo
from ..core.text import render as render_table
from ..errors import UsageError
from ..store import now

ENV_SYSROOT = "ISOBENCH_SYSROOT"
# State file history: 1 saved every setting before tune; 2 only those tune
# changed.  reset reads both, under the same checks.
STATE_VERSION = 2
READABLE_STATES = (1, 2)
# Below the sysroot: a root-owned folder that exists only while the machine runs.
STATE_DIR = "/run/isobench"
STATE_NAME = "system-state.json"
# What a saved value may look like (governor names, 0, 1, 2).
SAFE_VALUE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_STATE_BYTES = 1 << 20


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


# ---- the state file ----

def default_state(root: Path) -> Path:
    return root / STATE_DIR.lstrip("/") / STATE_NAME


def _allowed_owners() -> set[int]:
    # Root's files, and the files of the user running isobench: a user can
    # only ever make isobench write what that user could write anyway.
    return {0, os.geteuid()}


def _refuse(path: Path, why: str) -> UsageError:
    return UsageError(f"refusing the state file {path}: {why}; nothing was written")


def _check_folder(path: Path) -> None:
    """The folder of a state file: owned by root or us, writable by no one else."""
    folder = path.parent
    try:
        st = folder.stat()
    except OSError as e:
        raise _refuse(path, f"its folder cannot be read ({e.strerror or e})") from None
    if st.st_uid not in _allowed_owners():
        raise _refuse(path, f"its folder {folder} belongs to uid {st.st_uid}")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise _refuse(path, f"its folder {folder} is writable by others (the default "
                            f"{STATE_DIR} is not)")


def _read_trusted(path: Path) -> str:
    """The state file's text, if it is a regular file (not a link) owned by root
    or us and writable by no one else."""
    _check_folder(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise UsageError(f"no saved system state at {path}: nothing to reset "
                         "(`isobench system tune` saves it)") from None
    except OSError as e:
        why = "it is a symbolic link" if e.errno == errno.ELOOP else e.strerror or str(e)
        raise _refuse(path, why) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, "it is not a regular file")
        if st.st_uid not in _allowed_owners():
            raise _refuse(path, f"it belongs to uid {st.st_uid}, not to root")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise _refuse(path, "it is writable by others")
        data = f.read(MAX_STATE_BYTES + 1)
    if len(data) > MAX_STATE_BYTES:
        raise _refuse(path, "it is too large to be a saved state")
    return data.decode("utf-8", errors="replace")


def _tunable(name: str) -> Tunable | None:
    return next((t for t in TUNABLES if t.name == name), None)


def _matches(path: str, pattern: str) -> bool:
    """path matches the tunable's pattern component by component ('*' never
    spans a '/')."""
    a, b = path.split("/"), pattern.split("/")
    return len(a) == len(b) and all(fnmatch.fnmatchcase(x, y) for x, y in zip(a, b))


def _outside(root: Path, path: str) -> str | None:
    """Why path, below root, must not be read or written: its symbolic links
    lead out of root.  None when it stays inside."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(root / path.lstrip("/"))
    if os.path.commonpath([real_root, real]) != real_root:
        return f"{path} leads outside {root} (to {real})"
    return None


def check_entry(root: Path, name: str, path: object, value: object) -> str | None:
    """Why one saved entry must not be written back, or None when it may."""
    t = _tunable(name)
    if t is None:
        return f"{name!r} is not a setting isobench tunes"
    if not isinstance(path, str) or not path.startswith("/"):
        return f"{path!r} is not an absolute path"
    parts = path.split("/")[1:]
    if any(p in ("", ".", "..") for p in parts):
        return f"{path} is not a plain path (empty, '.' or '..' parts)"
    if not any(_matches(path, pattern) for pattern, _ in t.choices):
        return f"{path} is not a file of the {name} setting"
    outside = _outside(root, path)
    if outside:
        return outside
    if not isinstance(value, str) or not SAFE_VALUE.fullmatch(value):
        return f"the value {value!r} saved for {path} is not a plain value"
    return None


def load_state(path: Path, root: Path | None = None) -> dict:
    """The saved state, every entry checked (see the module docs); UsageError
    naming the first problem otherwise."""
    text = _read_trusted(path)
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get("version") not in READABLE_STATES \
                or not isinstance(doc.get("settings"), dict):
            raise ValueError("unknown format")
    except ValueError as e:
        raise _refuse(path, f"it is not a saved system state ({e})") from None
    if root is not None:
        if doc.get("root") != str(root):
            raise _refuse(path, f"it was saved for the root {doc.get('root')!r}, not {root}")
        for name, values in doc["settings"].items():
            if not isinstance(values, dict):
                raise _refuse(path, f"{name!r} holds no paths")
            for p, v in values.items():
                why = check_entry(root, name, p, v) if v is not None else None
                if why:
                    raise _refuse(path, why)
    return doc


def save_state(path: Path, root: Path, settings: dict) -> None:
    """Write the state atomically into a folder only root (or we) can write."""
    doc = {"version": STATE_VERSION, "saved": now(), "root": str(root), "settings": settings}
    tmp = path.with_name(path.name + ".tmp")
    try:
        if not path.parent.exists():
            path.parent.mkdir(parents=True)
            # Whatever the umask: writable by its owner only.
            os.chmod(path.parent, 0o755)
    except OSError as e:
        raise UsageError(f"cannot save the system state to {path}: {e.strerror or e} "
                         "(nothing was changed)") from None
    try:
        _check_folder(path)
    except UsageError as e:
        raise UsageError(f"{e} (nothing was changed)") from None
    try:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except OSError as e:
        raise UsageError(f"cannot save the system state to {path}: {e.strerror or e} "
                         "(nothing was changed)") from None


# ---- tune and reset ----

def capture(root: Path) -> dict[str, dict[str, str | None]]:
    """The current values of every tunable present here."""
    state = {}
    for t in TUNABLES:
        found = t.present(root)
        if found is not None:
            state[t.name] = _values(root, found[0])
    return state


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
    """Tune in order; before each change, save what it changes.  A state that
    reset has not consumed yet keeps its (earlier, original) values."""
    writer = writer or _write
    earlier = os.path.lexists(state_path)
    saved = load_state(state_path, root)["settings"] if earlier else {}
    outcomes = []
    for t in TUNABLES:
        found = t.present(root)
        if found is None:
            outcomes.append(Outcome(t.name, t.what, "absent", f"not changed: {t.absent}"))
            continue
        paths, wanted = found
        # The same confinement as reset's: a file whose links lead out of the
        # sysroot is neither read nor written (reset would refuse to restore it).
        out = next((why for why in map(lambda p: _outside(root, p), paths) if why), None)
        if out:
            outcomes.append(Outcome(t.name, t.what, "failed", f"{out}: left as it is"))
            continue
        before = _values(root, paths)
        todo = [p for p in paths if before[p] != wanted]
        odd = [p for p in todo if before[p] is None or not SAFE_VALUE.fullmatch(before[p])]
        if odd:
            outcomes.append(Outcome(t.name, t.what, "failed",
                                    f"{odd[0]} holds {before[odd[0]]!r}, which could not be "
                                    "restored: left as it is"))
            continue
        entry = saved.setdefault(t.name, {})
        added = [p for p in todo if p not in entry]
        entry.update({p: before[p] for p in added})
        if added:
            save_state(state_path, root, saved)
        outcome = _apply(root, t, {p: wanted for p in paths}, "changed", writer)
        if outcome.status != "changed" and added:
            for p in added:  # nothing changed: nothing to restore
                del entry[p]
        if not entry:
            del saved[t.name]
        if added and outcome.status != "changed":
            _save_or_remove(state_path, root, saved)
        outcomes.append(outcome)
    if earlier:
        note = (f"kept the state saved earlier in {state_path} (reset has not run since): "
                "it holds the values from before the first tune")
    elif saved:
        note = (f"the previous values of what changed are saved in {state_path}; "
                "`isobench system reset` restores them")
    else:
        note = "nothing was changed, so no state was saved"
    return outcomes, note


def _save_or_remove(path: Path, root: Path, settings: dict) -> None:
    if settings:
        save_state(path, root, settings)
    else:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def reset(root: Path, state_path: Path,
          writer: Callable[[Path, str, str], None] | None = None) -> tuple[list[Outcome], str]:
    """Write the saved values back, in the reverse order of tune; every entry is
    checked (load_state) before the first is written."""
    writer = writer or _write
    saved = load_state(state_path, root)["settings"]
    outcomes = []
    for t in reversed(TUNABLES):
        values = {p: v for p, v in (saved.get(t.name) or {}).items() if v is not None}
        if not values:
            outcomes.append(Outcome(t.name, t.what, "absent",
                                    "tune did not change it: nothing to restore"))
            continue
        outcomes.append(_apply(root, t, values, "restored", writer))
    if any(o.status in FAILURES for o in outcomes):
        return outcomes, f"kept {state_path}: some settings could not be restored"
    state_path.unlink()
    return outcomes, f"restored; removed {state_path}"


def render(outcomes: Sequence[Outcome], note: str | None = None) -> str:
    rows = [[o.name, o.status.upper() if o.status in FAILURES else o.status, o.detail]
            for o in outcomes]
    out = [render_table(("setting", "state", "detail"), rows)]
    if note:
        out += ["", note]
    return "\n".join(out)
