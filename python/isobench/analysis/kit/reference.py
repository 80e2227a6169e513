"""Published reference figures (data/reference.csv), shown BESIDE local numbers.

They are never mixed into local statistics: a published figure was measured
on other hardware, with another harness and often another unit, so the only
honest use is to print it next to the closest local number, marked as
published, with its source and hardware.

data/reference.csv is the one reviewed file; one row per figure:

    id              stable name of the figure
    value, unit     the figure as published (cycles, tsc_ticks, us, ...),
                    its digits kept as the source prints them (3.80, not
                    3.8; 46,759 and 12'000 with their thousands separators):
                    Reference.text() prints them back unchanged
    spread          the standard deviation the source gives, if any (also
                    kept as printed: 0.00)
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
    per             what one value is of, where the source says it:
                    one-way (one switch), round trip (in and back: a
                    gated call), per call, per page, per trial, ...
    derived         empty for a figure the source prints; else how it was
                    worked out from printed figures (by the source or by
                    isobench), e.g. "Table 5.1 (v): WRPKRU rows minus plain
                    rows"
    local_quantity  empty: the local configuration's headline stands
                    beside the figure; else the output of that
                    configuration's repetitions whose median does (e.g.
                    work.switch_per_hop: LMbench's context-switch time,
                    the raw hop less the pipe and working-set overhead)

A row maps onto one local configuration or onto none: its local_params
name every parameter that tells that benchmark's configurations apart
(tests/python/test_reference.py checks it), and two rows beside one local
configuration differ in source, table or unit, so a reader tells them apart.
"""

from __future__ import annotations

import csv
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping, Sequence


DATA = Path(__file__).resolve().parents[2] / "data" / "reference.csv"
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
    value_text: str = ""
    spread_text: str = ""
    per: str = ""
    derived: str = ""
    local_quantity: str = ""

    def as_dict(self) -> dict:
        return {**asdict(self), "local_params": dict(self.local_params), "published": True}

    def text(self) -> str:
        """The value as the source printed it (no added or dropped digits):
        11041.67, 3.80, 0.003."""
        return self.value_text or repr(self.value)

    def spread_as_printed(self) -> str | None:
        """The spread as the source printed it (0.00, not 0), or None."""
        return self.spread_text or None


def _param_value(text: str):
    return int(text) if text.lstrip("-").isdigit() else text


def _params(text: str) -> dict:
    out = {}
    for item in shlex.split(text):
        key, _, value = item.partition("=")
        out[key] = _param_value(value)
    return out


def _number(rid: str, name: str, text: str) -> float:
    """A number as a source prints it: 11041.67, 46,759 or 12'000 (the
    thousands separators only group digits)."""
    grouped = text.replace(",", "").replace("'", "")
    if grouped != text and not all(len(g) == 3 for g in
                                   text.split(".")[0].replace("'", ",").split(",")[1:]):
        raise ValueError(f"reference {rid!r}: {name} {text!r} is not a number")
    try:
        return float(grouped)
    except ValueError:
        raise ValueError(f"reference {rid!r}: {name} {text!r} is not a number") from None


def _row(row: dict) -> Reference:
    missing = [k for k in REQUIRED if not (row.get(k) or "").strip()]
    if missing:
        raise ValueError(f"reference {row.get('id')!r}: no {', '.join(missing)}")
    value = row["value"].strip()
    spread = (row.get("spread") or "").strip()
    return Reference(
        id=row["id"], value=_number(row["id"], "value", value), unit=row["unit"],
        spread=_number(row["id"], "spread", spread) if spread else None, subject=row["subject"],
        metric=row.get("metric") or "", hardware=row["hardware"],
        software=row.get("software") or "", source=row["source"], citation=row["citation"],
        link=(row.get("link") or "").strip(), where=row.get("where") or "", local_benchmark=row.get("local_benchmark") or None,
        local_mechanism=row.get("local_mechanism") or None,
        local_params=_params(row.get("local_params") or ""), note=row.get("note") or "",
        value_text=value, spread_text=spread, per=(row.get("per") or "").strip(),
        derived=(row.get("derived") or "").strip(),
        local_quantity=(row.get("local_quantity") or "").strip())


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
