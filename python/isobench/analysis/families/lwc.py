"""Sections of lwC's experiments on stock Linux (docs/lwc.md): creation cost
against dirty pages with its least-squares fit, the switch one way and round
trip, the reference monitors and the signing key in a context, each with the
published lwC figures beside it (data/reference.csv) and the speed targets
of the design stated as numbers:

- lwc-create: per resident heap H, the fixed cost as measured at D = 0 (not
  a line's extrapolation), the cost per dirty page on each segment of the
  sweep (0..16, 16..256, 256..4096 pages: weighted least squares per
  repetition, interval over repetitions; one process: the regression's own
  interval), whether one line fits at all (fit.linearity; `bad_fit` with
  `why` when it does not), fork's beside it, and the kernel's own
  copy-on-write fault measured in the same run: the cost per page over the
  same 4,096 fresh writes the COW child made, over that fault's cost, is
  the "within 1.5x" target;
- lwc-switch: one-way and round trip apart, never compared across; lwc
  one-way over process-futex one-way is the "within 1.2x" target;
- refmon: seconds per 10,000 calls per monitor, with intervals over
  repetitions;
- lwc-sign: signatures per second in the process and with the key in a
  restricted context.
"""

from __future__ import annotations

import math
from typing import Mapping

from ..kit import claims, fit, units
from ...core import stats
from ..kit.quantities import (entries, geomean_of, inverse, middle, not_ok, outputs, published,
                              quantity, ratio_of, rep_medians_ns, scaled, time_of)
from ..kit.runs import RunData

# ---- lwc-create ----

FIT_VARIANTS = ("lwc", "fork", "soft-dirty", "uffd-wp")
FIXED_VARIANTS = ("vfork", "posix_spawn", "pthread")
# The design's target: a dirty page costs an lwc at most this many times the
# kernel's own copy-on-write fault (docs/lwc.md, speed to reach).
COW_TARGET = 1.5
# ... and an lwc switch at most this many times a process-futex handoff.
SWITCH_TARGET = 1.2


def _verdict(q: Mapping | None, target: float) -> str | None:
    """Whether a ratio is within target: by its interval where it has one."""
    if q is None or q.get("value") is None:
        return None
    iv = q.get("interval")
    if iv:
        if iv[1] <= target:
            return "within"
        if iv[0] > target:
            return "beyond"
        return "unresolved (the interval spans the target)"
    return ("within" if q["value"] <= target else "beyond") + " (point estimate)"


# A linearity p below this makes a fit `bad_fit`: one line misdescribes the
# cost per dirty page, and `check` says so.  Strict, since a run fits a line
# per variant and heap (8 to 12 of them).
BAD_FIT_P = 0.01


def _rep_points(cells: Mapping[int, Mapping]) -> dict[int, dict[int, float]]:
    """Each repetition's median at each D, in us: {rep: {D: us}}."""
    out: dict[int, dict[int, float]] = {}
    for d, e in sorted(cells.items()):
        for rep, ns in rep_medians_ns(e).items():
            out.setdefault(rep, {})[d] = units.convert(ns, "ns", "us")
    return out


def _weights(per_rep: Mapping[int, Mapping[int, float]]) -> dict[int, float]:
    """1 / (mean over repetitions at D)^2: each point counts by its relative
    error (fit.weighted_line)."""
    at: dict[int, list[float]] = {}
    for pts in per_rep.values():
        for d, y in pts.items():
            at.setdefault(d, []).append(y)
    return {d: 1.0 / max(sum(v) / len(v), 1e-12) ** 2 for d, v in at.items()}


def _over_reps(values: Mapping[int, float], unit: str, one: fit.Line | None = None,
               which: str = "slope") -> dict | None:
    """Per-repetition estimates combined: two or more, their mean with
    Student t over them; one, its value with the regression's own interval
    where `one` (its line) has one."""
    vals = [v for _, v in sorted(values.items())]
    if not vals:
        return None
    if len(vals) >= stats.MIN_REPS_FOR_INTERVAL:
        iv = fit.mean_interval(vals)
        return quantity(sum(vals) / len(vals), [iv.low, iv.high] if iv else None,
                        "repetitions", len(vals), unit)
    iv = fit.line_interval(one, which) if one is not None else None
    return quantity(vals[0], [iv.low, iv.high] if iv else None, "one process", 1, unit)


def _line_in(pts: Mapping[int, float], ws: Mapping[int, float], a: float, b: float
             ) -> fit.Line | None:
    """The weighted line through one repetition's points with a <= D <= b."""
    xs = [d for d in sorted(pts) if a <= d <= b]
    if len(xs) < 2:
        return None
    return fit.weighted_line(xs, [pts[d] for d in xs], [ws[d] for d in xs])


def fit_line(cells: Mapping[int, Mapping]) -> dict:
    """One weighted line intercept + slope x dirty pages, in us, over the
    cells {D: entry}: per repetition through its own medians (weights
    1 / y^2, fit.weighted_line), then the mean over repetitions with
    Student t (one repetition: the regression's own interval)."""
    per_rep = _rep_points(cells)
    ws = _weights(per_rep)
    lines = {rep: l for rep, pts in sorted(per_rep.items())
             if (l := _line_in(pts, ws, -math.inf, math.inf)) is not None}
    out: dict = {"reps": len(lines), "points_per_rep": max((len(p) for p in per_rep.values()),
                                                            default=0),
                 "per_rep": {str(r): {"intercept": l.intercept, "slope": l.slope}
                             for r, l in lines.items()}}
    if not lines:
        out.update(intercept=None, slope=None, method=None)
        return out
    one = next(iter(lines.values())) if len(lines) == 1 else None
    for which in ("intercept", "slope"):
        out[which] = _over_reps({r: getattr(l, which) for r, l in lines.items()}, "us", one,
                                which)
    out["method"] = fit.OVER_REPETITIONS if one is None else fit.REGRESSION
    return out


def segment_fits(cells: Mapping[int, Mapping]) -> list[dict]:
    """The cost per dirty page on each segment of the sweep (fit.segments_of:
    0..16, 16..256, 256..4096, ...): per repetition the weighted line
    through its points on the segment, then over repetitions."""
    per_rep = _rep_points(cells)
    ws = _weights(per_rep)
    out = []
    for a, b in fit.segments_of(list(cells)):
        lines = {rep: l for rep, pts in sorted(per_rep.items())
                 if (l := _line_in(pts, ws, a, b)) is not None}
        one = next(iter(lines.values())) if len(lines) == 1 else None
        out.append({"from": a, "to": b, "points": sum(1 for d in cells if a <= d <= b),
                    "per_rep": {r: l.slope for r, l in lines.items()},
                    "slope": _over_reps({r: l.slope for r, l in lines.items()}, "us", one)})
    return out


def linearity_of(cells: Mapping[int, Mapping]) -> fit.Linearity:
    """Whether one line describes the points (fit.linearity): repetitions'
    medians grouped by D, knots at the segment ends."""
    groups: dict[int, list[float]] = {}
    for pts in _rep_points(cells).values():
        for d, y in pts.items():
            groups.setdefault(d, []).append(y)
    knots = [b for _, b in fit.segments_of(list(cells))][:-1]
    return fit.linearity(groups, knots)


def _why(lin: fit.Linearity, segs: list[dict]) -> tuple[bool, str]:
    """bad_fit and the sentence that says why (or why not)."""
    def seg_text() -> str:
        parts = [f"{s['slope']['value']:.3g} us on {s['from']:g}..{s['to']:g}"
                 for s in segs if s.get("slope") and s["slope"].get("value") is not None]
        return ", ".join(parts)

    if lin.p is None:
        return False, f"linearity {lin.method}"
    stat = (f"F({lin.df[0]}, {lin.df[1]}) = {lin.f:.3g}, " if lin.f is not None else "")
    if lin.p < BAD_FIT_P:
        return True, (f"one line does not fit ({stat}p = {lin.p:.2g} < {BAD_FIT_P:g}): the cost "
                      f"per dirty page changes along D ({seg_text()}); read the segments, not "
                      "the line's slope")
    return False, f"no evidence against one line ({stat}p = {lin.p:.2g})"


def _paired_over(values: Mapping[int, float], cow: Mapping | None,
                 fallback: Mapping | None) -> dict | None:
    """Per-page costs {rep: us} over the COW fault's cost per page, paired
    by repetition; one repetition: the value over the COW median, with the
    fallback's interval (the cost's own) over it."""
    if cow is None:
        return None
    cow_us = {r: units.convert(ns, "ns", "us") for r, ns in rep_medians_ns(cow).items()}
    per = [values[r] / c for r, c in cow_us.items() if r in values and c > 0]
    if len(per) >= stats.MIN_REPS_FOR_INTERVAL:
        if all(v > 0 for v in per):
            q = geomean_of(per, "x")
        else:
            iv = fit.mean_interval(per)
            q = quantity(sum(per) / len(per), [iv.low, iv.high] if iv else None,
                         "repetitions", len(per), "x")
        q["method"] = "per repetition: its cost per page over its own COW fault median; t over repetitions"
        return q
    c = time_of(cow, "us")
    if not c or not c["value"] or fallback is None or fallback.get("value") is None:
        return None
    iv = fallback.get("interval")
    q = quantity(fallback["value"] / c["value"], [iv[0] / c["value"], iv[1] / c["value"]]
                 if iv else None, "one process", 1, "x")
    q["method"] = ("the cost per page's interval over the COW fault's median (its own "
                   "spread not included)")
    return q


def _cow_range(cells: Mapping[int, Mapping], cow: Mapping | None) -> tuple[int, int] | None:
    """The D range the COW comparison is about: from the smallest D to the
    largest swept D at most the pages the COW child wrote (4,096): the
    same number of fresh writes on both sides."""
    if cow is None:
        return None
    pages = middle(outputs(cow, "pages"))
    ds = sorted(cells)
    if not ds or pages is None:
        return None
    top = max((d for d in ds if d <= pages), default=None)
    if top is None or top <= ds[0]:
        return None
    return ds[0], top


def _chord(cells: Mapping[int, Mapping], a: int, b: int) -> dict:
    """The cost per page from D = a to D = b, (y_b - y_a) / (b - a), per
    repetition, combined over repetitions."""
    per = {r: (pts[b] - pts[a]) / (b - a) for r, pts in _rep_points(cells).items()
           if a in pts and b in pts}
    return {"per_rep": per, "value": _over_reps(per, "us")}


def lwc_create(data: RunData, doc: Mapping) -> dict | None:
    es = entries(doc, "lwc-create")
    bad = not_ok(doc, "lwc-create")
    if not es and not bad:
        return None
    cells: dict[tuple[str, int], dict[int, dict]] = {}
    for e in es:
        p = e["params"]
        cells.setdefault((p.get("variant"), p.get("heap_mib")), {})[p.get("dirty_pages")] = e
    heaps = sorted({h for _, h in cells if h is not None})
    fits, fixed, cows = [], [], []
    for h in heaps:
        cow_cells = cells.get(("cow-fault", h)) or {}
        cow = next(iter(cow_cells.values()), None)
        cows.append({"heap_mib": h, "per_page": time_of(cow, "us"),
                     "minflt": middle(outputs(cow, "minflt")) if cow else None,
                     "pages": middle(outputs(cow, "pages")) if cow else None})
        for v in FIT_VARIANTS:
            pts = cells.get((v, h))
            if not pts:
                continue
            line = fit_line(pts)
            segs = segment_fits(pts)
            lin = linearity_of(pts)
            bad_fit, why = _why(lin, segs)
            points = [{"dirty_pages": d, "time": time_of(e, "us"),
                       "minflt_min": min(outputs(e, "minflt_min"), default=None)}
                      for d, e in sorted(pts.items())]
            rng = _cow_range(pts, cow)
            chord = _chord(pts, *rng) if rng else None
            over = _paired_over(chord["per_rep"], cow, chord["value"]) if chord else None
            for sg in segs:
                sg["over_cow"] = _paired_over(sg.pop("per_rep"), cow, sg["slope"])
                sg["verdict"] = _verdict(sg["over_cow"], COW_TARGET) if v == "lwc" else None
            fits.append({"label": f"lwc-create {v} {h} MiB", "variant": v, "heap_mib": h,
                         "points": points,
                         "fixed": time_of(pts.get(0), "us"),
                         "segments": segs,
                         "intercept": line.get("intercept"), "slope": line.get("slope"),
                         "method": line.get("method"), "reps": line["reps"],
                         "linearity": lin.as_dict(), "linearity_p": lin.p,
                         "bad_fit": bad_fit, "why": why,
                         "cow_range": list(rng) if rng else None,
                         "per_page_cow_range": chord["value"] if chord else None,
                         "over_cow": over,
                         "target": COW_TARGET if v == "lwc" else None,
                         "verdict": _verdict(over, COW_TARGET) if v == "lwc" else None,
                         "faults_proved": all(p["minflt_min"] is not None
                                              and p["minflt_min"] >= p["dirty_pages"]
                                              for p in points)})
        for v in FIXED_VARIANTS:
            e = next(iter((cells.get((v, h)) or {}).values()), None)
            if e is not None:
                fixed.append({"variant": v, "heap_mib": h, "time": time_of(e, "us")})
    thp = sorted({str(e["params"].get("thp")) for e in es if e["params"].get("thp")})
    advice = sorted({str(e["params"].get("thp_advice")) for e in es
                     if e["params"].get("thp_advice")})
    return {"unit": "us", "heaps": heaps, "fits": fits, "fixed": fixed, "cow_fault": cows,
            "thp": thp, "thp_advice": advice, "target": COW_TARGET, "bad_fit_p": BAD_FIT_P,
            "published": published(["lwc-create", "lwc-create-per-dirty-page"]),
            "not_ok": bad}


# ---- lwc-switch ----

SWITCH_VARIANTS = ("lwc", "process", "process-futex", "thread", "ucontext", "uthread")
# The published one-way figures that stand beside each local variant: the
# lwC paper's (OSDI 2016) and Konrad's re-run of its microbenchmark (2023).
SWITCH_PUBLISHED = {
    "lwc": ("lwc-switch-lwc", "konrad-lwc-switch-us", "konrad-lwc-switch-cycles"),
    "process": ("lwc-switch-process", "konrad-process-switch-us", "konrad-process-switch-cycles"),
    "thread": ("lwc-switch-kthread", "konrad-kthread-switch-us", "konrad-kthread-switch-cycles"),
    "ucontext": ("lwc-switch-uthread", "konrad-uthread-switch-us", "konrad-uthread-switch-cycles"),
}


def _ns_of(entry: Mapping, key: str) -> float | None:
    f = entry.get("to_ns")
    v = middle(outputs(entry, key))
    return None if v is None or f is None else v * f


def lwc_switch(data: RunData, doc: Mapping) -> dict | None:
    es = entries(doc, "lwc-switch")
    bad = not_ok(doc, "lwc-switch")
    if not es and not bad:
        return None
    by = {(e["params"].get("per"), e["params"].get("placement") or "same-cpu",
           e["params"].get("variant")): e for e in es}
    order = {v: i for i, v in enumerate(SWITCH_VARIANTS)}
    tables = {}
    for per in ("one-way", "round-trip"):
        rows = []
        keys = sorted((k for k in by if k[0] == per),
                      key=lambda k: (k[1] != "same-cpu", k[1], order.get(k[2], 99), k[2]))
        for _, place, variant in keys:
            e = by[(per, place, variant)]
            lwc = by.get((per, place, "lwc"))
            row = {"variant": variant, "placement": place, "time": time_of(e, "us"),
                   "over_lwc": ratio_of(e, lwc) if variant != "lwc" else None,
                   "primitive": e["params"].get("primitive"),
                   "checked": all(a == b for a, b in zip(outputs(e, "b_ran"),
                                                        outputs(e, "round_trips"))),
                   "round_trips": middle(outputs(e, "round_trips"))}
            if per == "one-way":
                row["a_to_b_us"] = units.convert(_ns_of(e, "median_a_to_b"), "ns", "us")
                row["b_to_a_us"] = units.convert(_ns_of(e, "median_b_to_a"), "ns", "us")
                row["published"] = published(SWITCH_PUBLISHED.get(variant, ())) \
                    if place == "same-cpu" else []
            rows.append(row)
        tables[per] = rows
    refs = {r["id"]: r for r in published([i for ids in SWITCH_PUBLISHED.values() for i in ids])}
    relative = {r["id"]: r for r in published([f"{i}-relative" for ids in SWITCH_PUBLISHED.values()
                                               for i in ids])}
    for row in tables["one-way"]:
        for p in row.get("published", []):
            base_id = SWITCH_PUBLISHED["lwc"][SWITCH_PUBLISHED[row["variant"]].index(p["id"])]
            base = refs.get(base_id)
            # The ratio as the source prints it (Konrad: of means; the lwC
            # paper's, as Konrad divides them), else the quotient of the two
            # printed figures, said to be that.
            rel = relative.get(f"{p['id']}-relative")
            if rel is not None:
                p["over_lwc"] = rel["value"]
                p["over_lwc_text"] = rel["text"]
                p["over_lwc_how"] = rel["metric"]
            else:
                p["over_lwc"] = units.ratio(p["value"], base["value"]) if base else None
                p["over_lwc_text"] = None if p["over_lwc"] is None else f"{p['over_lwc']:.2f}"
                p["over_lwc_how"] = "quotient of the two printed figures (by isobench)"
    # lwC's claim: its switch takes less than half the time of a process or
    # kernel thread switch (one way, same CPU).
    verdicts = [claims.judge("lwc-switch-half", r["over_lwc"],
                             f"{r['variant']} / lwc, one way, {r['placement']}", claims.LWC_HERE)
                for r in tables["one-way"] if r["variant"] in ("process", "thread")
                and r["placement"] == "same-cpu"]
    targets = []
    for place in sorted({k[1] for k in by}, key=lambda p: (p != "same-cpu", p)):
        lwc, pf = by.get(("one-way", place, "lwc")), by.get(("one-way", place, "process-futex"))
        if lwc is None or pf is None:
            continue
        q = ratio_of(lwc, pf)
        targets.append({"placement": place, "lwc_over_process_futex": q,
                        "target": SWITCH_TARGET, "verdict": _verdict(q, SWITCH_TARGET)})
    return {"unit": "us", "one_way": tables["one-way"], "round_trip": tables["round-trip"],
            "targets": targets, "target": SWITCH_TARGET, "claims": verdicts, "not_ok": bad}


# ---- refmon ----

REFMON_CALLS = ("open+close", "read-4k", "write-4k", "read-128k", "write-128k")
REFMON_CONFIGS = ("native", "inline", "seccomp", "broker", "ptrace", "lwc-mon")


def refmon(data: RunData, doc: Mapping) -> dict | None:
    es = entries(doc, "refmon")
    bad = not_ok(doc, "refmon")
    if not es and not bad:
        return None
    by = {(e["params"].get("call"), e["params"].get("config")): e for e in es}
    calls = sorted({c for c, _ in by}, key=lambda c: (REFMON_CALLS.index(c)
                                                      if c in REFMON_CALLS else 99, c))
    configs = sorted({m for _, m in by}, key=lambda m: (REFMON_CONFIGS.index(m)
                                                        if m in REFMON_CONFIGS else 99, m))
    rows = []
    for call in calls:
        cells = {}
        for cfg in configs:
            e = by.get((call, cfg))
            if e is None:
                continue
            n = e["params"].get("calls") or 0
            secs = time_of(e, "s")
            seen, expected = outputs(e, "monitored_calls"), outputs(e, "monitored_expected")
            cells[cfg] = {
                "seconds": scaled(secs, 10000.0 / n, "s") if n else None,
                "us_per_call": scaled(time_of(e, "us"), 1.0 / n, "us") if n else None,
                "calls": n, "over_native": ratio_of(e, by.get((call, "native")))
                if cfg != "native" else None,
                "all_monitored": (all(a == b for a, b in zip(seen, expected)) if seen else None),
                "denied_probe": (outputs(e, "probe") or [None])[0]}
        rows.append({"call": call, "cells": cells,
                     "broker_over_lwc_mon": ratio_of(by.get((call, "broker")),
                                                     by.get((call, "lwc-mon")))})
    isolation = {}
    for (_, cfg), e in by.items():
        isolation.setdefault(cfg, e["params"].get("isolation"))
    # lwC's claim (about 2x) beside each call's broker / lwc-mon, with its verdict.
    verdicts = [claims.judge("lwc-refmon-2x", r["broker_over_lwc_mon"], f"{r['call']}: "
                             "broker / lwc-mon", claims.LWC_HERE) for r in rows
                if {"broker", "lwc-mon"} <= set(r["cells"])]
    return {"unit": "s per 10,000 calls", "calls": calls, "configs": configs, "rows": rows,
            "isolation": isolation,
            "fs": sorted({str(e["params"].get("fs")) for e in es if e["params"].get("fs")}),
            "reps": sorted({e["headline"]["reps"] for e in es}),
            "published_note": "lwC (OSDI 2016, Fig. 1): lwc-mon about twice as fast as a "
                              "monitor in a separate process; the bar values are not in the "
                              "text",
            "claims": verdicts,
            "not_ok": bad}


# ---- lwc-sign ----

def lwc_sign(data: RunData, doc: Mapping) -> dict | None:
    es = entries(doc, "lwc-sign")
    bad = not_ok(doc, "lwc-sign")
    if not es and not bad:
        return None
    by = {e["params"].get("variant"): e for e in es}
    rows = []
    for v in sorted(by, key=lambda v: (v != "in-process", v)):
        e = by[v]
        t = time_of(e, "us")
        rows.append({"variant": v, "per_signature": t,
                     "per_second": inverse(t, "1/s", lambda us: units.per_second(
                         units.convert(us, "us", "ns"))),
                     "key_in": e["params"].get("key_in"),
                     "algorithm": e["params"].get("algorithm"),
                     "verified": sum(int(x) for x in outputs(e, "verified")),
                     "signatures": e["params"].get("signatures")})
    over = ratio_of(by.get("lwc"), by.get("in-process"))
    pub = published(["lwc-tls-native", "lwc-tls-key-in-lwc"])
    pub_ratio = (units.ratio(pub[1]["value"], pub[0]["value"]) if len(pub) == 2 else None)
    return {"rows": rows, "lwc_over_in_process": over, "published": pub,
            "published_ratio": pub_ratio,
            "published_caveat": "published, other hardware, another workload: 10,000 TLS "
                                "handshakes of nginx (the signature is one part of each)",
            "not_ok": bad}
