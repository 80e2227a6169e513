"""`isobench compare RUN_A RUN_B`: the same configurations in two runs.

Results are matched by benchmark, mechanism and the params that select the
measurement (analysis.identity).  Each run is normalized to its OWN `direct`
baseline (analysis.find_baseline: for switch, direct's "entry" variant at the
same payload; cross-cpu results are normalized by direct's same-cpu result,
since a plain call has no second context to place), so two machines are
compared by what isolation costs on each, not by how fast each one is:

    ratio = (median_B / direct_B) / (median_A / direct_A)

`direct` itself, and benchmarks without a mechanism (pingpong), have no
baseline: they are compared in absolute terms (in ns where the units
differ), and kept apart from the normalized rows in the averages.  Every
ratio has a bootstrap interval (all medians resampled) and a Mann-Whitney p
(on the normalized samples); averages are geometric means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from . import stats, table
from .analysis import Config, RunData

NORMALIZED, ABSOLUTE = "vs direct", "absolute"


@dataclass
class Row:
    a: Config
    b: Config
    basis: str
    a_value: float
    b_value: float
    unit: str
    ratio: float
    ci: stats.Interval
    test: stats.MannWhitney
    warnings: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"benchmark": self.a.benchmark, "mechanism": self.a.mechanism,
                "params": self.a.params, "basis": self.basis, "a": self.a_value,
                "b": self.b_value, "unit": self.unit, "ratio": self.ratio,
                "ci": self.ci.as_dict(), "p": self.test.p, "u": self.test.u,
                "effect": self.test.effect, "n_a": self.test.n1, "n_b": self.test.n2,
                "warnings": list(self.warnings)}


def _few(cfg: Config, side: str) -> list[str]:
    n = len(cfg.samples)
    if n >= stats.MIN_VALUES_FOR_TEST:
        return []
    return [f"{side} has {n} value{'s' if n != 1 else ''}, fewer than "
            f"{stats.MIN_VALUES_FOR_TEST}: p and the interval mean little"]


def _normalized(a: Config, ab: Config, b: Config, bb: Config, seed: int) -> Row:
    ma, mab, mb, mbb = (c.sorted_samples for c in (a, ab, b, bb))
    ra = stats.ratio(stats.percentile_sorted(ma, 0.5), stats.percentile_sorted(mab, 0.5))
    rb = stats.ratio(stats.percentile_sorted(mb, 0.5), stats.percentile_sorted(mbb, 0.5))
    ci = stats.normalized_ratio_ci(ma, mab, mb, mbb, seed, key=a.key)
    base_a, base_b = stats.percentile_sorted(mab, 0.5), stats.percentile_sorted(mbb, 0.5)
    test = stats.mann_whitney_u([x / base_a for x in a.samples], [y / base_b for y in b.samples])
    return Row(a, b, NORMALIZED, ra, rb, "x direct", stats.ratio(rb, ra), ci, test,
               tuple(_few(a, "A") + _few(b, "B")))


def _absolute(a: Config, b: Config, seed: int) -> Row | None:
    if a.unit == b.unit:
        xs, ys, unit = a.sorted_samples, b.sorted_samples, a.unit or "?"
    elif a.ns(1.0) is not None and b.ns(1.0) is not None:
        xs = [a.ns(x) for x in a.sorted_samples]
        ys = [b.ns(y) for y in b.sorted_samples]
        unit = "ns"
    else:
        return None
    c = stats.compare_samples(xs, ys, seed, key=a.key)
    return Row(a, b, ABSOLUTE, stats.percentile_sorted(xs, 0.5), stats.percentile_sorted(ys, 0.5),
               unit, c.ratio, c.ci, c.test, tuple(_few(a, "A") + _few(b, "B")))


def compare(a: RunData, b: RunData, seed: int = stats.BOOTSTRAP_SEED) -> dict:
    """The comparison as a document (see render for the text form)."""
    b_by = b.by_key()
    rows: list[Row] = []
    skipped: list[str] = []
    for ca in a.configs:
        cb = b_by.get(ca.key)
        if cb is None or not ca.samples or not cb.samples:
            continue
        ab, bb = a.baseline_of(ca), b.baseline_of(cb)
        try:
            if ab is not None and bb is not None and ab.samples and bb.samples:
                rows.append(_normalized(ca, ab, cb, bb, seed))
                continue
            row = _absolute(ca, cb, seed)
        except stats.ZeroBaseline:
            # A median of zero (a damaged store, or a region shorter than the
            # counter's step) has no ratio: say so instead of failing.
            skipped.append(f"{ca.label}: a median of zero, so no ratio")
            continue
        if row is None:
            skipped.append(f"{ca.label}: units {ca.unit} and {cb.unit} cannot be converted")
        else:
            rows.append(row)
    a_keys = {c.key for c in a.configs}
    return {"rows": rows, "skipped": skipped,
            "only_a": [c.label for c in a.configs if c.key not in b_by],
            "only_b": [c.label for c in b.configs if c.key not in a_keys],
            "geomean": {basis: _geomean(rows, basis) for basis in (NORMALIZED, ABSOLUTE)},
            "bootstrap": {"resamples": stats.BOOTSTRAP_RESAMPLES, "seed": seed,
                          "level": stats.CI_LEVEL}}


def _geomean(rows: Sequence[Row], basis: str) -> dict | None:
    ratios = [r.ratio for r in rows if r.basis == basis]
    return stats.aggregate_ratios(ratios) if ratios else None


def _run_dict(data: RunData) -> dict:
    env = data.env
    return {"run_id": data.run_id, "db": data.db, "started": data.run.get("started"),
            "cpu_model": env.get("cpu_model"), "kernel": env.get("kernel"),
            "hypervisor": env.get("hypervisor"), "counter": env.get("counter")}


def document(a: RunData, b: RunData, result: dict, findings: dict) -> dict:
    return {"a": _run_dict(a), "b": _run_dict(b),
            "rows": [r.as_dict() for r in result["rows"]],
            "geomean": result["geomean"], "skipped": result["skipped"],
            "only_a": result["only_a"], "only_b": result["only_b"],
            "bootstrap": result["bootstrap"], "findings": findings}


HEADERS = ("benchmark", "mechanism", "placement", "payload", "variant", "basis", "A", "B",
           "B/A", "95% CI", "p", "note")
RIGHT = {"payload", "A", "B", "B/A", "95% CI", "p"}


def _fmt_p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _value(v: float, unit: str) -> str:
    return f"{v:.2f}x" if unit == "x direct" else f"{table.fmt_num(v)} {unit}"


def _note(r: Row) -> str:
    if r.warnings:
        return "few values"
    if r.ci.low == r.ci.high == r.ratio == 1.0:
        # Quantized counters often give identical medians while the tails
        # differ; p then speaks about the tails, not the median.
        return "equal medians" + ("; tails differ" if r.test.p < 0.05 else "")
    return "" if r.test.p < 0.05 else "not significant"


def _row_cells(r: Row) -> list[str]:
    p = r.a.params
    note = _note(r)
    return [r.a.benchmark, r.a.mechanism, str(p.get("placement", "-")),
            str(p.get("payload", "-")), table.variant_text(p), r.basis, _value(r.a_value, r.unit),
            _value(r.b_value, r.unit), f"{r.ratio:.3f}",
            f"{r.ci.low:.3f}..{r.ci.high:.3f}", _fmt_p(r.test.p), note]


def _machine(d: dict) -> str:
    parts = [d.get("cpu_model"), d.get("kernel") and f"Linux {d['kernel']}", d.get("hypervisor")]
    return ", ".join(str(x) for x in parts if x) or "machine unknown"


def render(doc_rows: Sequence[Row], doc: dict) -> str:
    a, b = doc["a"], doc["b"]
    out = [f"A: run {a['run_id']} in {a['db']} ({_machine(a)})",
           f"B: run {b['run_id']} in {b['db']} ({_machine(b)})",
           "B/A: for 'vs direct' rows, (B / B's direct) / (A / A's direct): what isolation "
           "costs on B relative to A;",
           "     for 'absolute' rows, median B / median A.  95% CI: bootstrap "
           f"({doc['bootstrap']['resamples']} resamples, seed {doc['bootstrap']['seed']}); "
           "p: Mann-Whitney U, two-sided.", ""]
    out.append(table.render(HEADERS, [_row_cells(r) for r in doc_rows], RIGHT)
               if doc_rows else "(no results in common)")
    out.append("")
    for basis, g in doc["geomean"].items():
        if g:
            out.append(f"geometric mean of B/A over {g['n']} '{basis}' result(s): "
                       f"{g['value']:.3f}")
    for r in doc_rows:
        for w in r.warnings:
            out.append(f"warning: {r.a.label}: {w}")
    for key, label in (("only_a", "only in A"), ("only_b", "only in B")):
        if doc[key]:
            out.append(f"{len(doc[key])} result(s) {label}, not compared")
    for s in doc["skipped"]:
        out.append(f"not compared: {s}")
    for side, ids in doc["findings"].items():
        if ids:
            out.append(f"soundness of run {side}: {', '.join(ids)} (see `isobench check`)")
    return "\n".join(out)
