"""Which configurations of a run are not yet measured precisely enough.

`isobench run --target-ci PCT` keeps adding repetitions (fresh isob
processes) to the (benchmark, mechanism) pairs whose headline interval is
wider than +-PCT% of the headline, up to a cap, as Kalibera and Jones
("Rigorous benchmarking in reasonable time", ISMM 2013) recommend and
pyperf's rigorous mode does: the number of repetitions follows from the
precision asked for, not from a fixed count.

The width of an interval [low, high] around a value v is its larger
half, max(high - v, v - low) / v: the log-space intervals of the headline
are asymmetric, and the larger side is the one a reader must allow for.

A configuration with no interval yet (fewer than two repetitions, a value
that is not positive, repetitions in separate modes) is not precise: more
repetitions are what can give it one.  A pair whose results failed is not
extended: repeating a failure adds no precision, and the run already
reports it as failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from .kit import runs
from . import summary


@dataclass(frozen=True)
class Wide:
    """A configuration whose headline is not yet within the target."""
    benchmark: str
    mechanism: str
    label: str
    reps: int
    width: float | None  # the larger half of the interval over the value; None: no interval
    modes: int = 0       # groups its repetitions fall into (0: one)

    def text(self) -> str:
        what = (f"+-{100 * self.width:.1f}%" if self.width is not None
                else f"repetitions in {self.modes} modes" if self.modes
                else "no interval yet")
        return f"{self.label}: {what} after {self.reps} repetition{'s' if self.reps != 1 else ''}"


def width(headline: Mapping) -> float | None:
    """The larger half of the headline's interval as a fraction of its value."""
    iv, v = headline.get("interval"), headline.get("value")
    if not iv or not v or v <= 0:
        return None
    return max(iv["high"] - v, v - iv["low"]) / v


def wide(configs: Sequence[Mapping], target: float) -> list[Wide]:
    """The configurations (summary entries) whose headline's interval is wider
    than target (a fraction: 0.02 for +-2%), or that have none yet."""
    out = []
    for c in configs:
        h = c["headline"]
        if h.get("value") is None:
            continue  # nothing measured (skipped or failed throughout)
        w = width(h)
        if w is None or w > target:
            out.append(Wide(c["benchmark"], c["mechanism"], c["label"], h.get("reps") or 0, w,
                            len(h.get("modes") or ())))
    return out


def failed_pairs(results: Sequence[Mapping]) -> set[tuple[str, str]]:
    """The (benchmark, mechanism) pairs with a failed result."""
    return {(r["benchmark"], r["mechanism"]) for r in results if r.get("status") == "failed"}


def assess(data: runs.RunData, target: float) -> tuple[list[Wide], set[tuple[str, str]]]:
    """The configurations of the run not yet within target, and the pairs
    that are not extended because a result failed."""
    entries = [summary.configuration(c) for c in data.configs]
    return wide(entries, target), failed_pairs(data.results)
