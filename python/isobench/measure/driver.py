"""The native driver ``isob``: where it is, and the questions asked before a run.

``isob list --json``       what mechanisms and benchmarks exist, which are available
``isob isolation -m M``    who can reach M's trusted heap: the attacker matrix (core/attackers.py)
``isob --version --json``  how the binary was built (optional: tolerated if absent)
``isob --limits --json``   the bounds of its numeric options (validate.Limits)

Measurement runs are in runner.py; this module only asks and parses.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from . import proc
from ..core import records
from ..core import attackers
from ..errors import DriverError, UsageError
from ..core.validate import Limits

ENV_ISOB = "ISOBENCH_ISOB"

# Time-outs of the quick questions (seconds).  An isolation test forks a child
# that must fault; 30 s is generous for that even on a loaded CI machine.
LIST_TIMEOUT = 30.0
ISOLATION_TIMEOUT = 30.0
VERSION_TIMEOUT = 10.0

# Exit codes of isob (kselftest convention for skip).
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SKIP = 0, 1, 2, 4


def repo_root() -> Path:
    # python/isobench/measure/driver.py: the repository root is two levels
    # above the package.
    return Path(__file__).resolve().parents[3]


def find_isob() -> Path:
    env = os.environ.get(ENV_ISOB)
    path = Path(env) if env else repo_root() / "build" / "isob"
    if not path.is_file() or not os.access(path, os.X_OK):
        hint = f"check {ENV_ISOB}" if env else "run `make` first"
        raise UsageError(f"native driver not found at {path}: {hint}")
    return path


@dataclass(frozen=True)
class Mechanism:
    name: str
    summary: str
    available: bool
    reason: str | None
    props: tuple[str, ...] = ()


@dataclass(frozen=True)
class BenchOption:
    """An option only some benchmarks take, as `isob list --json` lists it
    under the benchmark (name "--protect", values, default, summary)."""

    name: str
    values: str
    default: str
    summary: str = ""

    def choices(self) -> tuple[str, ...] | None:
        """The values as a set of names where isob lists them so
        ("yield,preempt", "none,seccomp,...,seccomp-allow:VARIANT"); None where
        they are described in words ("bytes, 0 to 65536"), whose range only
        isob itself can judge (`isob BENCH --check`)."""
        items = self.values.split(",")
        if not all(_NAME_TOKEN.fullmatch(i) for i in items):
            return None
        return tuple(items)


@dataclass(frozen=True)
class Primitive:
    """What a benchmark's --primitive names: oslat lists name, family, table
    (SEIMI's) and whether two contexts take part; pingpong lists names only."""

    name: str
    family: str | None = None
    table: str | None = None
    two_contexts: bool | None = None
    summary: str = ""


@dataclass(frozen=True)
class Confinement:
    """A restriction oslat's measuring process imposes on itself (and
    pingpong's --protect on both endpoints), as `isob list --json` lists it."""

    name: str
    summary: str
    threat: str
    variants: tuple[str, ...]
    available: bool
    reason: str | None


@dataclass(frozen=True)
class Benchmark:
    name: str
    summary: str
    needs_mechanism: bool
    takes_confine: bool = False
    primitives: tuple[Primitive, ...] = ()
    options: tuple[BenchOption, ...] = ()

    def option(self, name: str) -> BenchOption | None:
        return next((o for o in self.options if o.name == name), None)

    def takes(self, name: str) -> bool:
        """Whether isob takes the option `name` ("--depth") for this benchmark:
        one of its own options, --primitive where it lists primitives,
        --confine where it takes confinements."""
        if name == "--confine":
            return self.takes_confine
        if name == "--primitive" and self.primitives:
            return True
        return self.option(name) is not None

    @property
    def families(self) -> tuple[str, ...]:
        """The primitive families --primitive also takes (oslat: ctx, fs, ipc, proc, bw)."""
        return tuple(dict.fromkeys(p.family for p in self.primitives if p.family))


@dataclass(frozen=True)
class Catalog:
    mechanisms: tuple[Mechanism, ...]
    benchmarks: tuple[Benchmark, ...]
    confinements: tuple[Confinement, ...] = ()

    def mechanism(self, name: str) -> Mechanism | None:
        return next((m for m in self.mechanisms if m.name == name), None)

    def benchmark(self, name: str) -> Benchmark | None:
        return next((b for b in self.benchmarks if b.name == name), None)

    def confinement(self, name: str) -> Confinement | None:
        return next((c for c in self.confinements if c.name == name), None)


# A value isob lists as a name among names (see BenchOption.choices).
_NAME_TOKEN = re.compile(r"[a-z0-9][a-z0-9+._-]*(?::[A-Za-z0-9+._-]+)?")


@dataclass(frozen=True)
class Isolation:
    """What ``isobench list`` says about one mechanism's isolation.

    state:     the summary of the attacker matrix (attackers.summary):
               "enforced", "partial", "none", "untested", or "failed" (it
               claims isolation and the in-process cell leaks, or the test
               broke)
    attackers: the five cells, {"in-process", "same-uid", "other-uid",
               "root", "pre-attached"} -> {"verdict", "method", "evidence",
               "condition", ...}
    """

    state: str
    reason: str | None = None
    detail: Mapping = field(default_factory=dict)
    attackers: Mapping = field(default_factory=dict)

    @staticmethod
    def untested(reason: str) -> "Isolation":
        return Isolation("untested", reason, {}, attackers.untested_cells(reason))


def describe_exit(ex: proc.ChildExit, timeout: float, results: int | None = None) -> str | None:
    """Why a child run went wrong, in one phrase; None when it exited normally."""
    after = "" if results is None else f" after {results} result{'s' if results != 1 else ''}"
    if ex.timed_out:
        return f"timed out after {timeout:g} s (isob killed{after})"
    if ex.signal is not None:
        return f"isob killed by signal {ex.signal} ({proc.signal_name(ex.signal)}){after}"
    return None


class Driver:
    def __init__(self, path: Path):
        self.path = path

    def argv(self, *args: str) -> list[str]:
        return [str(self.path), *args]

    def ask(self, args: list[str], timeout: float) -> tuple[list[dict], list[str], proc.ChildExit]:
        """Run isob with args; its JSON lines, its non-JSON lines, and how it ended."""
        lines: list[dict] = []
        garbage: list[str] = []

        def on_line(text: str) -> None:
            if not text.strip():
                return
            try:
                lines.append(records.parse_line(text))
            except records.ProtocolError as e:
                garbage.append(str(e))

        try:
            ex = proc.run_lines(self.argv(*args), timeout=timeout, on_line=on_line)
        except OSError as e:
            raise UsageError(f"cannot run {self.path}: {e.strerror or e}") from None
        return lines, garbage, ex

    def catalog(self, timeout: float = LIST_TIMEOUT) -> Catalog:
        lines, garbage, ex = self.ask(["list", "--json"], timeout)
        what = describe_exit(ex, timeout)
        if what is None and ex.returncode != 0:
            what = f"exited with status {ex.returncode}: {ex.stderr_tail() or 'no message'}"
        listing = next((l for l in lines if l["type"] == "list"), None)
        if what is None and listing is None:
            what = f"printed {garbage[0]}" if garbage else "printed no list line"
        if what is not None:
            raise DriverError(f"`{self.path} list --json` failed: {what}")
        try:
            return _catalog_from(listing)
        except (TypeError, KeyError, ValueError) as e:
            raise DriverError(f"`{self.path} list --json` printed a malformed list: {e}") from None

    def limits(self, timeout: float = LIST_TIMEOUT) -> Limits:
        """The bounds isob enforces on its options, so that a bad value is refused
        before a run is stored rather than by every isob child of the run."""
        lines, garbage, ex = self.ask(["--limits", "--json"], timeout)
        what = describe_exit(ex, timeout)
        if what is None and ex.returncode != 0:
            what = f"exited with status {ex.returncode}: {ex.stderr_tail() or 'no message'}"
        line = next((l for l in lines if l["type"] == "limits"), None)
        if what is None and line is None:
            what = f"printed {garbage[0]}" if garbage else "printed no limits line"
        if what is not None:
            raise DriverError(f"`{self.path} --limits --json` failed: {what}")
        try:
            return Limits.from_line(line)
        except ValueError as e:
            raise DriverError(f"`{self.path} --limits --json` printed {e}") from None

    def check(self, args: list[str], timeout: float = LIST_TIMEOUT) -> None:
        """Ask isob whether it takes a benchmark's options (`isob BENCH ...
        --check`: parsed and checked as a run would, nothing measured):
        UsageError with isob's own line when it refuses them, DriverError when
        it cannot answer.  An isob without --check is not asked."""
        _lines, _garbage, ex = self.ask([*args, "--check"], timeout)
        what = describe_exit(ex, timeout)
        if what is None and ex.returncode == EXIT_OK:
            return
        tail = ex.stderr_tail()
        if what is None and ex.returncode == EXIT_USAGE:
            if "'--check'" in (tail or ""):
                return  # an older isob: each job then finds out for itself
            line = (tail or "refused its options").strip().splitlines()[-1]
            raise UsageError(line.removeprefix("isob: error: ").removesuffix(
                " (see isob --help)"))
        what = what or f"exited with status {ex.returncode}: {tail or 'no message'}"
        raise DriverError(f"`{self.path} {' '.join(args)} --check` failed: {what}")

    def isolation(self, mech: Mechanism, timeout: float = ISOLATION_TIMEOUT) -> Isolation:
        # Asked even when not available here: the line then says why, and
        # still what each cell would cover (its conditions).
        lines, garbage, ex = self.ask(["isolation", "-m", mech.name], timeout)
        line = next((l for l in lines if l["type"] == "isolation"), None)
        if line is None and not mech.available:
            return Isolation.untested(mech.reason or "not available here")
        if line is None:
            why = describe_exit(ex, timeout)
            if why is None:
                why = (f"isob printed {garbage[0]}" if garbage else
                       f"isob printed no isolation line (exit status {ex.returncode}"
                       f"{': ' + ex.stderr_tail() if ex.stderr_tail() else ''})")
            return Isolation.untested(f"isolation test did not run: {why}")
        return _isolation_from(line)

    def inspect(self, timeout: float = ISOLATION_TIMEOUT) -> tuple[list[dict], str | None]:
        """The lines of ``isob inspect --quick`` (ERIM's inspection of an isob
        process: the binary and every library it maps), and why there is no
        result line when there is none."""
        lines, garbage, ex = self.ask(["inspect", "--quick"], timeout)
        if any(l["type"] == "result" for l in lines):
            return lines, None
        why = describe_exit(ex, timeout)
        if why is None:
            why = (f"isob printed {garbage[0]}" if garbage else
                   f"isob printed no result line (exit status {ex.returncode}"
                   f"{': ' + ex.stderr_tail() if ex.stderr_tail() else ''})")
        return lines, f"the inspection did not run: {why}"

    def version(self, timeout: float = VERSION_TIMEOUT) -> dict | None:
        """{"version","cc","cflags"} from ``isob --version --json``; None if it has none.

        Parsed leniently (schema_version and type are optional here): a driver
        without this option must not stop a run, it only leaves the compiler
        fields of the environment empty.
        """
        found, on_line = proc.json_objects(lambda obj: "version" in obj)

        try:
            ex = proc.run_lines(self.argv("--version", "--json"), timeout=timeout, on_line=on_line)
        except OSError:
            return None
        if ex.returncode != 0 or not found:
            return None
        return {k: v for k, v in found[0].items() if k not in ("schema_version", "type")}

# The benchmark orchestrated from Python (kvserver.py; named here to keep
# driver.py free of imports of the runner side).
KV_SERVER = Benchmark("kv-server", "isob serve over each mechanism beside memcached, driven "
                      "by memcaslap (throughput, latency; Python-driven)", True)
# lwC's server use cases (lwcserve.py), also driven from Python; they take
# no mechanism (the server's session mode is in each result's params).
LWC_SERVE = Benchmark("lwc-serve", "isob serve --session shared|fork|prefork|rollback and "
                      "--per-connection under isob "
                      "loadgen, per session length (throughput, latency, CPU; Python-driven)",
                      False,
                      options=(BenchOption("--monitor", "none,inline,procsep,lwc", "",
                                           "HTTP, --session shared, each GET's file calls "
                                           "checked by each reference monitor"),
                               BenchOption("--doc-bytes", "45,900", "45",
                                           "HTTP document sizes"),
                               BenchOption("--tls", "on", "",
                                           "HTTPS handshakes, the key in the server or in "
                                           "an lwc context"),
                               BenchOption("--session",
                                           "shared,prefork,rollback,fork,per-connection",
                                           "shared", "the session modes --monitor and --tls "
                                           "run under"),
                               BenchOption("--tls-key", "rsa2048,ecdsa-p256", "rsa2048",
                                           "the key --tls makes at start-up")))
LWC_CONNS = Benchmark("lwc-conns", "isob serve --per-connection beside -m direct and memcached "
                      "at 16..4096 connections (Python-driven)", False)
LWC_CURVE = Benchmark("lwc-curve", "open-loop latency against offered load of isob serve "
                      "--session shared|rollback beside memcached, up to the knee "
                      "(isob loadgen --rate; Python-driven)", False)
PYTHON_BENCHMARKS = (KV_SERVER, LWC_SERVE, LWC_CONNS, LWC_CURVE)


def _catalog_from(listing: dict) -> Catalog:
    mechs = tuple(
        Mechanism(name=_str(m["name"]), summary=str(m.get("summary") or ""),
                  available=bool(m["available"]), reason=m.get("reason"),
                  props=tuple(m.get("props") or ()))
        for m in listing["mechanisms"])
    benches = tuple(
        Benchmark(name=_str(b["name"]), summary=str(b.get("summary") or ""),
                  needs_mechanism=bool(b.get("needs_mechanism", True)),
                  takes_confine=bool(b.get("takes_confine", False)),
                  primitives=tuple(_primitive(p) for p in b.get("primitives") or ()),
                  options=tuple(_option(o) for o in b.get("options") or ()))
        for b in listing["benchmarks"])
    # kv-server, lwc-serve and lwc-conns run from Python (kvserver.py,
    # lwcserve.py), so isob does not list them.
    for extra in PYTHON_BENCHMARKS:
        if not any(b.name == extra.name for b in benches):
            benches += (extra,)
    confs = tuple(
        Confinement(name=_str(c["name"]), summary=str(c.get("summary") or ""),
                    threat=str(c.get("threat") or ""),
                    variants=tuple(_str(v) for v in c.get("variants") or ()),
                    available=bool(c["available"]), reason=c.get("reason"))
        for c in listing.get("confinements") or ())
    return Catalog(mechs, benches, confs)


def _primitive(p) -> Primitive:
    """A primitive as listed: a name (pingpong) or an object (oslat)."""
    if isinstance(p, str):
        return Primitive(_str(p))
    return Primitive(name=_str(p["name"]), family=p.get("family"), table=p.get("table"),
                     two_contexts=p.get("two_contexts"), summary=str(p.get("summary") or ""))


def _option(o) -> BenchOption:
    return BenchOption(name=_str(o["name"]), values=_str(o["values"]),
                       default=str(o.get("default") or ""), summary=str(o.get("summary") or ""))


def _str(v: object) -> str:
    if not isinstance(v, str) or not v:
        raise ValueError(f"name {v!r} is not a non-empty string")
    return v


DETAIL_KEYS = ("claims", "verdict", "read", "write", "intact", "expected_fault", "target",
               "yama_ptrace_scope", "secret_intact_after", "matrix_version", "caller_tracer_pid",
               "caller_closed", "caller_dumpable")


def _isolation_from(line: dict) -> Isolation:
    verdict = line.get("verdict")
    detail = {k: line.get(k) for k in DETAIL_KEYS}
    reason = line.get("reason")
    if verdict == "skipped":
        why = reason or "isolation test skipped"
        cells = attackers.untested_cells(why)
        raw = line.get("attackers")
        for a, c in (raw.items() if isinstance(raw, Mapping) else ()):
            if a in cells and isinstance(c, Mapping) and isinstance(c.get("condition"), str):
                cells[a]["condition"] = c["condition"]
        return Isolation("untested", why, detail, cells)
    try:
        cells = attackers.cells_from_line(line)
    except ValueError as e:
        why = f"isob printed no usable attacker matrix: {e}"
        return Isolation("untested", why, detail, attackers.untested_cells(why))
    if verdict == "failed":
        return Isolation("failed", reason or "the isolation test broke", detail, cells)
    state = attackers.summary(cells, bool(line.get("claims")))
    if state == "failed":
        why = reason or f"it claims isolation, but in-process: {cells['in-process'].get('evidence')}"
    elif state == "none":
        why = reason or "does not claim isolation"
    elif state == "untested":
        why = reason or cells["in-process"].get("evidence")
    elif state == "partial":
        why = "; ".join(f"{a}: {cells[a]['verdict']} ({cells[a].get('method') or cells[a].get('evidence')})"
                        for a in ("same-uid", "other-uid") if cells[a]["verdict"] != "enforced")
    else:
        why = None
    return Isolation(state, why, detail, cells)
