"""The numbers the family sections are made of, each a small JSON-able record
computed from the summary document's configurations (summary.py), so that
every section states a value, its interval and what the interval is over in
the same way:

    {"value": 12.3, "interval": [11.9, 12.8] or None,
     "between": "repetitions" | "one process" | None, "reps": 3, "unit": "us"}

A time is a configuration's headline converted with units.py; a ratio of two
configurations is the ratio of their headlines with the Welch t interval over
repetitions (stats.ratio_interval), as summary.py gives every ratio to
`direct`.  Nothing here is shown: render/ reads these records."""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence

from . import reference, units
from ...core import stats


def entries(doc: Mapping, benchmark: str) -> list[dict]:
    """The configurations of one benchmark that have a headline value."""
    return [c for c in doc["configs"] if c["benchmark"] == benchmark
            and c["headline"]["value"] is not None]


def not_ok(doc: Mapping, benchmark: str) -> list[dict]:
    """Failed and skipped results of one benchmark, one record per (mechanism,
    status, reason): the params all its results share, how many distinct
    configurations (cells) and results (over repetitions) it stands for."""
    groups: dict[tuple, dict] = {}
    for r in doc["results"]:
        if r["benchmark"] != benchmark or r["status"] == "ok":
            continue
        p = r.get("params") or {}
        key = (r["mechanism"], r["status"], r.get("reason"))
        g = groups.get(key)
        cell = tuple(sorted((k, str(v)) for k, v in p.items()))
        if g is None:
            groups[key] = {"mechanism": r["mechanism"], "status": r["status"],
                           "reason": r.get("reason"), "params": dict(p), "cells": {cell},
                           "results": 1}
            continue
        g["params"] = {k: v for k, v in g["params"].items() if p.get(k) == v}
        g["cells"].add(cell)
        g["results"] += 1
    return [{**g, "cells": len(g["cells"]), "repetitions": g["results"] // len(g["cells"])}
            for g in groups.values()]


def quantity(value: float | None, interval: Sequence[float] | None, between: str | None,
             reps: int, unit: str, note: str | None = None) -> dict:
    out = {"value": value, "interval": list(interval) if interval else None,
           "between": between if interval else None, "reps": reps, "unit": unit}
    if note:
        out["note"] = note
    return out


def time_of(entry: Mapping | None, unit: str) -> dict | None:
    """entry's headline as a time in `unit` (ns, us, ms, s), with its
    interval; None for no entry, and a value of None where the entry's unit
    does not convert to time (core cycles)."""
    if entry is None:
        return None
    h = entry["headline"]
    ns, iv = h.get("ns"), h.get("interval_ns")
    if ns is None:
        return quantity(None, None, None, h["reps"], unit,
                        f"{entry['unit']} do not convert to time")
    lo_hi = [units.convert(v, "ns", unit) for v in iv] if iv else None
    return quantity(units.convert(ns, "ns", unit), lo_hi, h.get("between"), h["reps"], unit)


def ratio_of(a: Mapping | None, b: Mapping | None) -> dict | None:
    """a's headline over b's (same unit), with the Welch t interval of the
    log ratio over repetitions where both have two or more."""
    if a is None or b is None or a["unit"] != b["unit"]:
        return None
    ha, hb = a["headline"], b["headline"]
    if not ha["value"] or not hb["value"] or ha["value"] <= 0 or hb["value"] <= 0:
        return None
    if ha.get("modes") or hb.get("modes"):
        # Repetitions in separate groups: no interval describes them (the
        # summary's own ratios say the same).
        out = quantity(units.ratio(ha["value"], hb["value"]), None, "repetitions",
                       min(ha["reps"], hb["reps"]), "x",
                       "repetitions in separate groups (modes): no interval")
        out["modes"] = True
        return out
    iv = stats.ratio_interval(ha["values"], hb["values"], ha["resolution"], hb["resolution"])
    return quantity(units.ratio(ha["value"], hb["value"]), [iv.low, iv.high] if iv else None,
                    "repetitions", min(ha["reps"], hb["reps"]), "x")


def ratio_of_values(a: Sequence[float], b: Sequence[float], step_a: float = 0.0,
                    step_b: float = 0.0) -> dict | None:
    """The ratio of the geometric means of two sets of positive per-repetition
    values, with the Welch t interval of its log over repetitions (each side
    widened by its resolution, step_a and step_b, as stats.ratio_interval)."""
    a = [v for v in a if v is not None]
    b = [v for v in b if v is not None]
    if not a or not b or any(v <= 0 for v in (*a, *b)):
        return None
    iv = stats.ratio_interval(a, b, step_a, step_b)
    return quantity(units.ratio(stats.geomean(a), stats.geomean(b)),
                    [iv.low, iv.high] if iv else None, "repetitions", min(len(a), len(b)), "x")


def geomean_of(values: Sequence[float], unit: str) -> dict | None:
    """The geometric mean of positive per-repetition values with its t interval."""
    vs = [v for v in values if v is not None]
    if not vs or any(v <= 0 for v in vs):
        return None
    iv = stats.geomean_interval(vs)
    return quantity(stats.geomean(vs), [iv.low, iv.high] if iv else None, "repetitions",
                    len(vs), unit)


def per_rep(entry: Mapping, fn: Callable[[Mapping, float], float | None]) -> list[float]:
    """fn(repetition, its median in ns) for each repetition of entry that has
    a median: per-repetition values derived from the median (per iteration,
    per call), in repetition order."""
    f = entry.get("to_ns")
    if f is None:
        return []
    out = []
    for r in entry["repetitions"]:
        if r.get("median") is None:
            continue
        v = fn(r, r["median"] * f)
        if v is not None:
            out.append(v)
    return out


def rep_medians_ns(entry: Mapping) -> dict[int, float]:
    """Each repetition's median in ns, by repetition number."""
    f = entry.get("to_ns")
    if f is None:
        return {}
    return {r["repetition"]: r["median"] * f for r in entry["repetitions"]
            if r.get("median") is not None}


def outputs(entry: Mapping, key: str) -> list:
    """The output param `key` of each repetition that has it."""
    return [r["outputs"][key] for r in entry["repetitions"] if key in (r.get("outputs") or {})]


def middle(values: Iterable[float]) -> float | None:
    """The median of the numbers among values (an int where it is whole: counts)."""
    vs = sorted(v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool))
    if not vs:
        return None
    m = stats.percentile_sorted(vs, 0.5)
    return int(m) if all(isinstance(v, int) for v in vs) and m.is_integer() else m


def inverse(q: Mapping | None, unit: str, fn: Callable[[float], float | None]) -> dict | None:
    """A quantity mapped through a decreasing function (a time into a rate):
    the value and both interval ends through fn, the ends swapped."""
    if q is None or q.get("value") is None:
        return None
    iv = q.get("interval")
    lo_hi = [fn(iv[1]), fn(iv[0])] if iv else None
    if lo_hi and None in lo_hi:
        lo_hi = None
    return quantity(fn(q["value"]), lo_hi, q.get("between"), q["reps"], unit)


def published(ids: Sequence[str]) -> list[dict]:
    """The published figures with these ids (data/reference.csv), in this order."""
    refs = {r.id: r for r in reference.load()}
    return [{**refs[i].as_dict(), "text": refs[i].text()} for i in ids if i in refs]


def scaled(q: Mapping | None, factor: float, unit: str) -> dict | None:
    """A quantity times a positive constant (a total per call, per page)."""
    if q is None or q.get("value") is None:
        return None
    iv = q.get("interval")
    return quantity(q["value"] * factor, [iv[0] * factor, iv[1] * factor] if iv else None,
                    q.get("between"), q["reps"], unit)
