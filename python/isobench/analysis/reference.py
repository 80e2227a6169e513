"""Published reference figures (data/reference.csv), shown BESIDE local numbers.

They are never mixed into local statistics: a published figure was measured
on other hardware, with another harness and often another unit, so the only
honest use is to print it next to the closest local number, marked as
published, with its source and hardware.

data/reference.csv is the one reviewed file; one row per figure:

    id              stable name of the figure
    value, unit     the figure as published (cycles, us, ...)
    spread          the standard deviation the source gives, if any
    subject         what was measured, in a few words
    metric          how the source measured it
    hardware        the machine, as the source states it (or says it does not)
    software        OS and system software
    source          short name of the publication; citation: the full reference
    link            a DOI (as https://doi.org/...) or the publisher's URL; empty
                    only for a source with neither (a student report or
                    slides), which `reference` then says
    where           table or figure in the source
    local_benchmark, local_mechanism, local_params
                    the local configuration closest in meaning (optional);
                    local_params is "key=value key=value", a value with
                    spaces in single quotes (cell='0K create')
    note            caveats (secondary sources, known undercounting, ...)
"""

from __future__ import annotations

import csv
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from ..render import table

DATA = Path(__file__).resolve().parents[1] / "data" / "reference.csv"
REQUIRED = ("id", "value", "unit", "subject", "hardware", "source", "citation")


@dataclass(frozen=True)
class Reference:
    id: str
    value: float
    unit: str
    spread: float | None
    subject: str
    metric: str
    hardware: str
    software: str
    source: str
    citation: str
    link: str
    where: str
    local_benchmark: str | None
    local_mechanism: str | None
    local_params: Mapping = field(default_factory=dict)
    note: str = ""

    def as_dict(self) -> dict:
        return {**asdict(self), "local_params": dict(self.local_params), "published": True}

    def text(self) -> str:
        """The value as the source printed it (no added or dropped digits)."""
        return f"{self.value:,g}"


def _param_value(text: str):
    return int(text) if text.lstrip("-").isdigit() else text


def _params(text: str) -> dict:
    out = {}
    for item in shlex.split(text):
        key, _, value = item.partition("=")
        out[key] = _param_value(value)
    return out


def _row(row: dict) -> Reference:
    missing = [k for k in REQUIRED if not (row.get(k) or "").strip()]
    if missing:
        raise ValueError(f"reference {row.get('id')!r}: no {', '.join(missing)}")
    return Reference(
        id=row["id"], value=float(row["value"]), unit=row["unit"],
        spread=float(row["spread"]) if row.get("spread") else None, subject=row["subject"],
        metric=row.get("metric") or "", hardware=row["hardware"],
        software=row.get("software") or "", source=row["source"], citation=row["citation"],
        link=(row.get("link") or "").strip(), where=row.get("where") or "", local_benchmark=row.get("local_benchmark") or None,
        local_mechanism=row.get("local_mechanism") or None,
        local_params=_params(row.get("local_params") or ""), note=row.get("note") or "")


def load(path: Path = DATA) -> list[Reference]:
    with open(path, newline="") as f:
        return [_row(r) for r in csv.DictReader(f)]


def matches(ref: Reference, configs: Sequence) -> list:
    """The local configurations a figure should be shown beside."""
    if not ref.local_benchmark:
        return []
    return [c for c in configs if c.benchmark == ref.local_benchmark
            and c.mechanism == ref.local_mechanism
            and all(c.params.get(k) == v for k, v in ref.local_params.items())]


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
        headers = ("id", "value", "unit", "what", "metric") + (("hw",) if len(hardware) > 1 else ())
        rows = [[r.id, r.text(), r.unit, r.subject, r.metric or "-"]
                + ([f"[{hardware.index(r.hardware) + 1}]"] if len(hardware) > 1 else [])
                for r in group]
        out.append(table.render_fit(headers, rows, {"value"}, flex=(3, 4)))
    return "\n".join(out)
