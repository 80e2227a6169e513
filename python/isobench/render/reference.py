"""`isobench reference` as text: the published figures (analysis/kit/reference.py,
data/reference.csv) one block per source, marked as measured elsewhere."""

from __future__ import annotations

from typing import Sequence

from ..analysis.kit.reference import Reference
from .kit import table

NO_LINK = "no DOI or public URL (unpublished report or slides)"


def render(refs: Sequence[Reference]) -> str:
    """One block per source: its citation and DOI or URL, the hardware, and
    a table of its figures with what was measured and the metric (how the
    source measured it) in columns of their own; at most table.WIDTH wide."""
    out = ["Published figures (measured elsewhere; never mixed into local statistics)"]
    by_source: dict[str, list[Reference]] = {}
    for r in refs:
        by_source.setdefault(r.source, []).append(r)
    for source, group in by_source.items():
        hardware = list(dict.fromkeys(r.hardware for r in group))
        out += ["", source,
                table.wrap(f"  {group[0].citation}", indent="    "),
                table.wrap(f"  {group[0].link or NO_LINK}", indent="    ")]
        if len(hardware) == 1:
            out.append(table.wrap(f"  hardware: {hardware[0]}", indent="    "))
        else:
            for i, h in enumerate(hardware, 1):
                out.append(table.wrap(f"  hardware [{i}]: {h}", indent="    "))
        headers = ("id", "value", "unit", "per") + (("hw",) if len(hardware) > 1 else ())
        rows = [[r.id, value_cell(r), r.unit, r.per or "-"]
                + ([f"[{hardware.index(r.hardware) + 1}]"] if len(hardware) > 1 else [])
                for r in group]
        lines = table.render(headers, rows, {"value"}).splitlines()
        out += lines[:2]
        # Under each figure, indented: what was measured, how, and where.
        for line, r in zip(lines[2:], group):
            out.append(line)
            note = f"; {r.note}" if r.note else ""
            out.append(table.wrap(f"    {r.subject}: {metric_cell(r)} ({r.where or 'no table'})"
                                  f"{note}", indent="      "))
    return "\n".join(out)


def value_cell(r: Reference) -> str:
    """The value and its spread as the source printed them: "3.80 (sd 0.00)"."""
    return r.text() + (f" (sd {r.spread_as_printed()})" if r.spread_as_printed() else "")


def metric_cell(r: Reference) -> str:
    """The metric, and for a derived figure how it was derived."""
    return (r.metric or "-") + (f" [derived: {r.derived}]" if r.derived else "")
