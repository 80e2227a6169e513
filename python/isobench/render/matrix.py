"""The isolation matrix (core/attackers.py) as text: one row per mechanism,
each cell in a few words, the probes' context and each cell's condition.
``list``, ``show`` and the report print it from here."""

from __future__ import annotations

from typing import Mapping, Sequence

from ..core.attackers import ATTACKERS, fork_window, untested_cells
from .kit.table import render, wrap

# Short names of the probes, for table cells.
PROBE_SHORT = {
    "process_vm_readv": "vm_readv", "process_vm_writev": "vm_writev",
    "/proc/PID/mem read": "mem-read", "/proc/PID/mem write": "mem-write",
    "ptrace PEEKDATA": "ptrace", "pidfd_getfd": "pidfd_getfd",
}


def short_cell(attacker: str, cell: Mapping, expected_fault: str | None = None) -> str:
    """A cell in a few words: the verdict and what decided it; a same-uid
    cell with a fork window adds its precondition and the verdict against a
    dumpable caller."""
    text = _short_cell(attacker, cell, expected_fault)
    fw = fork_window(cell) if attacker == "same-uid" else None
    if fw:
        held = cell.get("verdict") == "enforced"
        text += (f", if {fw['precondition']}" if held else "") + f" (dumpable caller: {fw['dumpable_caller']})"
    return text


def _short_cell(attacker: str, cell: Mapping, expected_fault: str | None) -> str:
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
