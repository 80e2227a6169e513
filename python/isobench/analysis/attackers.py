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
ptrace_scope and the caller's TracerPid at creation in its evidence).  A
line of matrix version 1 has no conditions and no pre-attached cell: that
cell is then untested, with the reason.
This module owns the one-word summary (the rule below, also in
docs/mechanisms.md) and the one rendering of the matrix that ``list``,
``show`` and the report print.

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

# Short names of the probes, for table cells.
PROBE_SHORT = {
    "process_vm_readv": "vm_readv", "process_vm_writev": "vm_writev",
    "/proc/PID/mem read": "mem-read", "/proc/PID/mem write": "mem-write",
    "ptrace PEEKDATA": "ptrace", "pidfd_getfd": "pidfd_getfd",
}



@dataclass(frozen=True)
class Cell:
    verdict: str
    method: str | None = None
    evidence: str | None = None
    condition: str | None = None

    def __post_init__(self):
        if self.verdict not in CELL_VERDICTS:
            raise ValueError(f"cell verdict {self.verdict!r} is not one of {', '.join(CELL_VERDICTS)}")


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


def short_cell(attacker: str, cell: Mapping, expected_fault: str | None = None) -> str:
    """A cell in a few words: the verdict and what decided it."""
    v = cell.get("verdict", "untested")
    probes = cell.get("probes") or []
    if attacker == "in-process":
        if v == "enforced":
            return f"enforced ({expected_fault})" if expected_fault else "enforced (traps)"
        return v
    if v == "leaks" and probes:
        got = [PROBE_SHORT.get(p["probe"], p["probe"]) for p in probes if p.get("leak")]
        text = "leaks: " + ",".join(got) if got else "leaks"
        # The pre-attached cell runs a naive tracer and one that hides from
        # TracerPid: say so where only the hiding one got in.
        runs = cell.get("tracers") or []
        if (attacker == "pre-attached" and len(runs) == 2 and runs[1].get("verdict") == "leaks"
                and runs[0].get("verdict") != "leaks"):
            text += " (hiding)"
        return text
    if v == "enforced" and probes:
        errs = sorted({p["errno"] for p in probes if p.get("errno")})
        return f"enforced ({'/'.join(errs)})" if errs else "enforced"
    if v == "enforced" and attacker == "pre-attached":
        ev = cell.get("evidence") or ""
        if "creation refused" in ev:
            return "enforced (refused traced)"
        if "refused the attach" in ev:
            return "enforced (attach refused)"
    return v


def matrix_rows(mechanisms: Sequence[Mapping], brief: bool = False) -> list[list[str]]:
    """One row per mechanism: name, summary, then the four cells in short
    (brief: the verdict word alone, for tables of at most 100 columns)."""
    rows = []
    for m in mechanisms:
        cells = m.get("attackers") or untested_cells(None)
        detail = m.get("isolation_detail") or {}
        rows.append([m["name"], "FAILED" if m.get("isolation") == "failed" else m.get("isolation", "-"),
                     *((cells.get(a) or {}).get("verdict", "untested") if brief else
                       short_cell(a, cells.get(a) or {}, detail.get("expected_fault"))
                       for a in ATTACKERS)])
    return rows


MATRIX_HEADERS = ("mechanism", "isolation", *ATTACKERS)


def context_line(context: Mapping | None) -> str:
    """Who ran the probes, and what Yama allows."""
    c = context or {}
    yama = c.get("yama_ptrace_scope")
    who = c.get("euid")
    return ("probes run here as "
            + ("root" if who == 0 else f"uid {who}" if who is not None else "an unknown uid")
            + "; Yama ptrace_scope: " + ("absent" if yama is None else str(yama)))


def format_matrix(mechanisms: Sequence[Mapping], context: Mapping | None = None,
                  brief: bool = False, listing: bool = False) -> str:
    """The matrix as text: a table, then why each untested cell is untested
    (brief: verdict words only, and no notes on untested cells, within 100
    columns; listing: as `isobench list` shows it, which points to its own
    --wide)."""
    # The one table renderer; imported here to keep this module light.
    from ..render.table import render, wrap
    rows = matrix_rows(mechanisms, brief)
    notes = []
    for m in mechanisms:
        cells = m.get("attackers") or {}
        for a in ATTACKERS:
            c = cells.get(a) or {}
            if c.get("verdict") == "untested" and m.get("available", True) and c.get("evidence"):
                notes.append(f"  {m['name']} {a}: untested: {c['evidence']}")
    if brief:
        where = ("`isobench list --wide` (and --json)" if listing
                 else "--wide, or `isobench list --wide`")
        out = [wrap("Isolation by attacker (measured here; " + context_line(context) + ")"),
               render(MATRIX_HEADERS, rows)]
        if listing and notes:
            out += ["Untested cells:", *(wrap(n, indent="    ") for n in notes)]
        out.append(wrap(f"Each cell's evidence and the condition it holds under: {where}; "
                        "rule: docs/mechanisms.md.", indent=""))
        return "\n".join(out)
    out = ["Isolation by attacker (measured here; " + context_line(context) + ")",
           render(MATRIX_HEADERS, rows)]
    if notes:
        out += ["Untested cells:", *notes]
    conds = condition_lines(mechanisms)
    if conds:
        out += ["Conditions (what each cell covers, and under what it holds):", *conds]
    out.append("Each cell's method and evidence: `isobench list --json` (attackers); rule: "
               "docs/mechanisms.md.")
    return "\n".join(out)


def condition_lines(mechanisms: Sequence[Mapping]) -> list[str]:
    """Each cell's condition once, with the mechanisms it is the condition
    of, in the order of ATTACKERS: the text under the matrix."""
    groups: dict[tuple[str, str], list[str]] = {}
    for m in mechanisms:
        for a in ATTACKERS:
            cond = ((m.get("attackers") or {}).get(a) or {}).get("condition")
            if cond:
                groups.setdefault((a, cond), []).append(m["name"])
    out = []
    for a in ATTACKERS:
        for (att, cond), names in groups.items():
            if att == a:
                out.append(f"  {a} ({', '.join(names)}): {cond}")
    return out


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


# ---- ERIM's binary inspection as evidence of the MPK mechanisms ----

def with_inspection(mechanisms: Sequence[dict], lines: Sequence[Mapping],
                    why: str | None) -> list[str]:
    """Attach the inspection of an isob process (``isob inspect``: the binary
    the mpk mechanisms run in and every library it maps) to the in-process
    cell of each MPK mechanism, as ``inspection``, and state each stray
    WRPKRU or XRSTOR in its evidence with the attack it enables.  The
    in-process verdict is left as measured: it covers loads and stores, and
    a stray site is reached only by an attacker who controls the untrusted
    side's control flow.  A mechanism not available here keeps its evidence
    (why it is not); the scan is attached all the same.  Returns the lines
    to print under the matrix."""
    from .inspect import summary_of  # the site records and their attacks
    mpk = [m for m in mechanisms if str(m.get("name", "")).startswith("mpk")]
    if not mpk:
        return []
    scan = summary_of(lines) if why is None else None
    if scan is None:
        scan = {"status": "untested", "reason": why or "isob inspect printed no result"}
    out = []
    for m in mpk:
        cells = m.setdefault("attackers", untested_cells(None))
        cell = cells.setdefault("in-process", {"verdict": "untested", "method": None,
                                               "evidence": None})
        cell["inspection"] = scan
        strays = scan.get("strays") or []
        if strays and m.get("available", True):
            extra = "stray PKRU writers outside the gate: " + "; ".join(strays)
            cell["evidence"] = f"{cell['evidence']}; {extra}" if cell.get("evidence") else extra
    names = ", ".join(m["name"] for m in mpk)
    if scan.get("status") != "ok":
        out.append(f"{names}: ERIM's binary inspection: untested: "
                   f"{scan.get('reason') or 'no reason given'}")
        return out
    unscanned = scan.get("unscanned") or []
    out.append(f"{names}: ERIM's binary inspection of {scan.get('target_exe') or 'isob'} and "
               f"its libraries ({scan.get('mappings')} executable mappings, "
               f"{len(unscanned)} unscanned): {scan.get('gate_sites_found')} of "
               f"{scan.get('gate_sites_recorded')} recorded gate WRPKRUs, "
               f"{len(scan.get('strays') or [])} stray sites user mode can run"
               + (" (mpk is not available here: the sites are in the binary all the same)"
                  if not any(m.get("available", True) for m in mpk) else ""))
    out += [f"  {s}" for s in scan.get("strays") or []]
    out += [f"  UNSCANNED {u.get('file')} {u.get('range')}: {u.get('why')}" for u in unscanned]
    return out
