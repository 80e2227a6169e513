"""A configuration's ratio to another (its baseline, a plain call, no
protection), the same estimator on both sides, with its interval over
repetitions: summary.py stores it with every configuration, and the
families that set a configuration against another (oslat, microkernel)
take the same rule from here.

Both sides are summary-document entries (summary.configuration): a
headline with its source (MEDIAN or BATCHED), the values of its
repetitions and their resolution, and the repetitions themselves."""

from __future__ import annotations

from typing import Mapping, Sequence

from ...core import stats
from . import units

# A region at least this many counter steps and empty regions long is
# measured well by its per-call median: the reading cost inside it is then
# at most 1/20 of the value, and quantization at most one step in 20.
HEADLINE_MIN_STEPS = 20

MEDIAN, BATCHED = "median", "batched"


def majority(k: int, n: int) -> bool:
    return 2 * k > n


def resolution_of(reps: Sequence[dict], source: str) -> float:
    """What one repetition's value under source is known to: the counter step
    for a median, step / K for a batched estimate (the coarsest over reps)."""
    key = "counter_step" if source == MEDIAN else "batched_resolution"
    return max((r[key] or 0.0 for r in reps if r.get(key) is not None), default=0.0)


def _side(entry: Mapping, source: str) -> tuple[list[float], float, float | None, bool]:
    """(values, resolution, value, mixed) of entry under source: its headline
    when that is its source, else its repetitions' values of that estimator
    (mixed when it has none)."""
    h = entry["headline"]
    if h["source"] == source:
        return h["values"], h["resolution"], h["value"], False
    reps = entry["repetitions"]
    vals = [r.get(source) for r in reps]
    if vals and all(isinstance(v, (int, float)) and v > 0 for v in vals):
        return vals, resolution_of(reps, source), stats.geomean(vals), False
    return h["values"], h["resolution"], h["value"], True


def _trusted_batched(entry: Mapping) -> bool:
    """Whether entry's batched estimate may stand for it in a ratio: every
    repetition has one and a strict majority agree with their medians."""
    rule = entry["headline"].get("rule") or {}
    n = rule.get("reps") or 0
    return n > 0 and rule.get("batched_reps") == n and majority(rule.get("batched_agree", 0), n)


def _numerator(x: Mapping, base: Mapping) -> tuple[str, list[float], float, float]:
    """(source, values, resolution, value) of x for its ratio to base.

    Both sides of a ratio estimate the cost of the call; the estimator is
    the same on both wherever it can be.  A median includes the reading
    cost (the empty region), a batched estimate cancels it: a long region's
    median over a short baseline's median would divide by mostly reading
    cost.  So where x's headline is a median but the baseline's is batched,
    x's own batched estimate stands in when it is trustworthy (every
    repetition has one, a majority agree with their medians); else x's
    median stays, and the ratio is marked mixed (its reading cost is at
    most 1/HEADLINE_MIN_STEPS of a long region by the headline rule)."""
    hx, hb = x["headline"], base["headline"]
    if hx["source"] == MEDIAN and hb["source"] == BATCHED and _trusted_batched(x):
        vals, res, value, missing = _side(x, BATCHED)
        if not missing and value and value > 0:
            return BATCHED, list(vals), res, value
    return hx["source"], list(hx["values"]), hx["resolution"], hx["value"]


def ratio_of(x: Mapping, base: Mapping) -> dict | None:
    """x over base, the same estimator on both sides wherever they have one
    in common (_numerator): value, overhead, the interval over repetitions,
    and the resolution both carry."""
    hx, hb = x["headline"], base["headline"]
    if not hx["value"] or not hb["value"] or hx["value"] <= 0 or hb["value"] <= 0:
        return None
    source, xvals, xres, xvalue = _numerator(x, base)
    if source == MEDIAN and hb["source"] == BATCHED:
        # A median over a batched baseline: x's batched estimate is not
        # trustworthy, and the baseline's median is mostly reading cost.
        bvals, bres, bvalue, mixed = list(hb["values"]), hb["resolution"], hb["value"], True
    else:
        bvals, bres, bvalue, mixed = _side(base, source)
    if not bvalue or bvalue <= 0:
        return None
    value = units.ratio(xvalue, bvalue)
    iv = None
    note = None
    modes = bool(hx.get("modes")) or (bool(hb.get("modes")) and hb["source"] == source)
    if modes:
        note = "repetitions in separate groups (modes): no interval"
    else:
        iv = stats.ratio_interval(xvals, bvals, xres, bres)
    if iv is None and note is None:
        n = min(len(xvals), len(bvals))
        note = (f"{n} repetition{'s' if n != 1 else ''}: a ratio needs at least "
                f"{stats.MIN_REPS_FOR_INTERVAL} on each side for an interval "
                "(`--repeat`)") if n < stats.MIN_REPS_FOR_INTERVAL else \
            "a repetition's value is not positive: no interval"
    if source != hx["source"]:
        note = ((note + "; ") if note else "") + (
            "batched estimates on both sides (the headline is the median, which "
            "includes the reading cost that the baseline's batched estimate cancels)")
    if mixed:
        note = ((note + "; ") if note else "") + (
            f"a {hx['source']} over the baseline's {hb['source']}: no estimator both have "
            "that is trustworthy (the median's reading cost is at most "
            f"1/{HEADLINE_MIN_STEPS} of a long region)")
    # One step of either side moves the ratio by its relative resolution.
    relative = xres / xvalue + bres / bvalue
    return {"to": base["label"], "to_key": base["key"], "value": value,
            "overhead": value - 1.0, "interval": iv.as_dict() if iv else None, "note": note,
            "source": source, "base_source": hb["source"] if mixed else source,
            "values": list(xvals), "resolution_of_values": xres, "numerator": xvalue,
            "base_value": bvalue, "base_values": list(bvals), "base_resolution": bres,
            "mixed": mixed, "resolution": value * relative, "relative_resolution": relative,
            "quantized": relative * HEADLINE_MIN_STEPS > 1.0, "modes": modes}
