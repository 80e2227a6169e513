"""The isolation matrix: who can reach a compartment's secret, per attacker.

``isob isolation -m M`` measures five cells (src/benches/isolation.c):

    in-process    the untrusted side itself (read and write by address;
                  wasm: the guest's escape attempts)
    same-uid      OS-level probes (process_vm_*, /proc/PID/mem, ptrace,
    other-uid     pidfd_getfd) as an unprivileged process of the caller's
    root          uid, as another uid, and as root
    pre-attached  a same-uid tracer attached to the caller before the
                  compartment existed, which follows the fork, keeps the
                  server dumpable and reads it (process_vm_readv,
                  /proc/PID/mem); run as is and hiding from TracerPid
                  (``tracers``), the worse of the two

each ``{"verdict", "method", "evidence", "condition"}``, the verdict one of
CELL_VERDICTS, the condition what the cell covers and under what it was
measured and holds (the same-uid cell of a separate address space: "for
compartments created while no process traced the caller", with Yama's
ptrace_scope and the caller's TracerPid at creation in its evidence, and
created by a caller non-dumpable at creation).  A line of matrix version 1
has no conditions and no pre-attached cell: that cell is then untested,
with the reason.

The fork window (matrix version 3).  The kernel checks /proc/PID/mem at
open, not at read, so a same-uid racer that opens a server between its
fork and its own hardening reads the trusted heap later.  isob's
creations make the caller non-dumpable before the fork (unless
ISOB_ALLOW_DUMPABLE=1), so the same-uid cell of a separate address space
holds under the precondition "caller non-dumpable at creation" and carries
the racer's runs (``fork_window``: such a caller, and a dumpable one) with
``dumpable_caller``, the verdict against a dumpable caller.  The cell
itself is the run of the caller as the matrix's own caller created it:
``leaks`` when isob ran with ISOB_ALLOW_DUMPABLE=1 and the racer won.
This module owns the matrix's data: the cells of an isolation line
(cells_from_line), what a run records of them (for_environment) and the
one-word summary (the rule below, also in docs/mechanisms.md).
render/matrix.py is the one rendering of it that ``list``, ``show`` and the
report print; analysis/families/inspect.py adds ERIM's binary inspection to
the MPK mechanisms' in-process cells, which read ``leaks`` where it finds a
stray PKRU writer that a call reaches and mpk did not close.

The summary rule:

    none      the in-process cell leaks: the mechanism itself isolates nothing
              (that another uid cannot read it is the OS's doing)
    failed    the same, for a mechanism that claims isolation: a defect
    untested  the in-process cell could not be tested
    enforced  in-process, same-uid and other-uid are all enforced
    partial   in-process is enforced, and same-uid or other-uid is not (it
              leaks, or could not be tested)

Root and pre-attached are shown but never lower the summary: root gets
through everything but a few kernel features this matrix does not use,
and the summary holds under the same-uid cell's condition, which the
pre-attached cell tests the other side of.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

ATTACKERS = ("in-process", "same-uid", "other-uid", "root", "pre-attached")
OS_ATTACKERS = ATTACKERS[1:]
# Cells a line of matrix version 1 does not have.
LATER_ATTACKERS = {"pre-attached": 2}
CELL_VERDICTS = ("enforced", "leaks", "not-applicable", "untested")
SUMMARIES = ("enforced", "partial", "none", "untested", "failed")


@dataclass(frozen=True)
class Cell:
    verdict: str
    method: str | None = None
    evidence: str | None = None
    condition: str | None = None

    def __post_init__(self):
        if self.verdict not in CELL_VERDICTS:
            raise ValueError(f"cell verdict {self.verdict!r} is not one of {', '.join(CELL_VERDICTS)}")


FORK_WINDOW_PRECONDITION = "caller non-dumpable at creation"


def fork_window(cell: Mapping) -> dict | None:
    """The fork window of a same-uid cell (module docstring): {"precondition",
    "dumpable_caller": the verdict against a dumpable caller, "runs": the
    racer's runs}; None where the cell has none (an in-process mechanism, a
    matrix before version 3)."""
    runs = cell.get("fork_window")
    if not isinstance(runs, Sequence) or not runs:
        return None
    dumpable = cell.get("dumpable_caller")
    return {"precondition": cell.get("precondition") or FORK_WINDOW_PRECONDITION,
            "dumpable_caller": dumpable if dumpable in CELL_VERDICTS else "untested",
            "runs": [dict(r) for r in runs if isinstance(r, Mapping)]}


def untested_cells(why: str | None) -> dict[str, dict]:
    """Every cell untested for one reason (a mechanism not available here, a
    test that did not run)."""
    return {a: {"verdict": "untested", "method": None, "evidence": why, "condition": None} for a in ATTACKERS}


def cells_from_line(line: Mapping) -> dict[str, dict]:
    """The ``attackers`` member of an isolation line, validated: every
    attacker present, every verdict known.  ValueError otherwise."""
    raw = line.get("attackers")
    if not isinstance(raw, Mapping):
        raise ValueError("no attackers matrix")
    version = line.get("matrix_version")
    out = {}
    for a in ATTACKERS:
        c = raw.get(a)
        if c is None and a in LATER_ATTACKERS and isinstance(version, int) and version < LATER_ATTACKERS[a]:
            c = {"verdict": "untested", "method": None,
                 "evidence": f"not measured: matrix version {version} has no {a} cell", "condition": None}
        if not isinstance(c, Mapping):
            raise ValueError(f"no {a!r} cell")
        Cell(str(c.get("verdict")), c.get("method"), c.get("evidence"), c.get("condition"))  # validates
        out[a] = {"condition": None, **c}
    return out


def summary(cells: Mapping[str, Mapping], claims: bool) -> str:
    """The one-word summary of a matrix (the rule in the module docstring)."""
    verdict = {a: (cells.get(a) or {}).get("verdict", "untested") for a in ATTACKERS}
    inp = verdict["in-process"]
    if inp == "leaks":
        return "failed" if claims else "none"
    if inp != "enforced":
        return "untested"
    if all(verdict[a] == "enforced" for a in ("same-uid", "other-uid")):
        return "enforced"
    return "partial"


def from_environment(env: Mapping | None) -> tuple[list[dict], dict] | None:
    """The matrix a run recorded in its environment, as (mechanisms, context),
    or None when the run has none."""
    iso = (env or {}).get("isolation")
    if not isinstance(iso, Mapping) or not isinstance(iso.get("mechanisms"), Sequence):
        return None
    return [dict(m) for m in iso["mechanisms"]], dict(iso.get("context") or {})


def for_environment(mechanisms: Sequence[Mapping], context: Mapping) -> dict[str, Any]:
    """What a run records of the matrix (env["isolation"])."""
    keep = ("name", "available", "isolation", "isolation_reason", "isolation_detail", "attackers")
    return {"context": dict(context), "mechanisms": [{k: m.get(k) for k in keep} for m in mechanisms]}
