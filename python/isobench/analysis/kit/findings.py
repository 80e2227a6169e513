"""What a soundness check finds (Finding), the table entry that names a
check (Check) and what its function returns when it fires (Fired), with
their severities, the SoK flaws they guard against and the words a
finding names its subjects with.  analysis/checks.py holds the checks."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Mapping, Sequence

from .runs import Config, RunData

DOC = "docs/reducing-variance.md"

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITIES = (ERROR, WARNING, INFO)


# Flaws of the SoK's Table I that a check guards against, by their labels
# there.  B5 (incorrect averaging across benchmark scores) is excluded by
# construction for our own averages (every average of ratios is a geometric
# mean, stats.aggregate_ratios); percentage-geomean points it out where a
# published average made otherwise is shown beside ours.  F4 (relative
# numbers only) is excluded by construction: every ratio is shown beside
# the absolute values it came from.
SOK = {
    "B1": "B1 microbenchmarks representing overall performance",
    "B4": "B4 no indication of significance of data",
    "B5": "B5 incorrect averaging across benchmark scores",
    "D1": "D1 no proper baseline",
    "F1": "F1 missing platform specification",
    "F2": "F2 missing software versions",
}


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str
    what: str
    next: str
    sok: str | None = None
    subjects: tuple[str, ...] = ()

    @property
    def doc(self) -> str:
        return f"{DOC}#{self.id}"

    def as_dict(self) -> dict:
        return {**asdict(self), "subjects": list(self.subjects), "doc": self.doc}


@dataclass(frozen=True)
class Check:
    """One entry of the checks table: its id, severity and SoK flaw are
    fixed here, so that the function only decides whether it fires."""

    id: str
    severity: str
    run: Callable[[RunData, Mapping], "Fired | None"]
    sok: str | None = None


@dataclass(frozen=True)
class Fired:
    """What a check function returns when it fires; severity, where given,
    replaces the check's own (batched-unreliable is a warning only where it
    changed a headline)."""

    what: str
    next: str
    subjects: tuple[str, ...] = ()
    severity: str | None = None


def subjects_of(configs: Iterable[Config]) -> tuple[str, ...]:
    return tuple(c.label for c in configs)


def some(labels: Sequence[str], limit: int = 3) -> str:
    more = f" and {len(labels) - limit} more" if len(labels) > limit else ""
    return "; ".join(labels[:limit]) + more


def where(r: Mapping) -> str:
    p = r.get("params") or {}
    parts = [f"{k}={p[k]}" for k in ("placement", "payload", "variant", "data_bytes") if k in p]
    rep = r.get("repetition") or 1
    return " ".join([r["benchmark"], r["mechanism"], *parts]) + (f" (rep {rep})" if rep > 1 else "")
