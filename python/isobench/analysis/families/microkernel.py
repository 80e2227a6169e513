"""The microkernel sections (docs/microkernel.md): the CHERI microkernel
slides' experiments (Lauterbach, TU Dresden 2023) with protection toggled
at run time in one binary.

    ipc       pingpong: primitive x payload x protection, same-cpu and
              cross-cpu in tables of their own (never averaged together),
              p5/p95 of the pooled round trips, and each protection against
              none in the same run; the slides' figures beside them
    delegate  delegate: variant x region x depth: per hop, end to end,
              revocation, and what was checked
    sched     sched: kind x N x slice x mode x cpus: makespan against the
              ideal ceil(N / CPUs) * W_solo, switches, cost per switch

Every value is a configuration's headline from the summary document; the
statistics made here are ratios over repetitions (kit/ratios.py,
stats.geomean_interval) and medians of what isob reported per repetition.
Times are shown in microseconds where the unit converts (TSC ticks with the
run's TSC frequency, ns as measured); TSC ticks are never called cycles.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ..kit import units
from ...core import stats
from ..kit.ratios import ratio_of
from ..kit.runs import RunData

PINGPONG, DELEGATE, SCHED = "pingpong", "delegate", "sched"
NONE = "none"
PLACEMENTS = ("same-cpu", "cross-cpu", "unpinned")

# The slides' figures (data/reference.csv) shown with the IPC table.
SLIDES_PREFIX = "cheri-ukernel-"


def _us(ns: float | None) -> float | None:
    return units.convert(ns, "ns", "us")


def _entries(doc: Mapping, bench: str) -> list[dict]:
    return [e for e in doc["configs"] if e["benchmark"] == bench]


def _problems(doc: Mapping, bench: str) -> list[dict]:
    return [{"status": r["status"], "reason": r["reason"],
             "where": " ".join(f"{k}={v}" for k, v in (r["params"] or {}).items()) or bench}
            for r in doc["results"] if r["benchmark"] == bench and r["status"] != "ok"]


def _time(e: Mapping) -> dict:
    """A configuration's headline in us (where its unit converts), its own
    value and unit, and the pooled samples' p5 and p95 in us."""
    h, d = e["headline"], e["distribution"]
    iv = h.get("interval_ns")
    f = e.get("to_ns")
    return {"value": h["value"], "unit": e["unit"], "us": _us(h["ns"]),
            "interval_us": [_us(iv[0]), _us(iv[1])] if iv else None,
            "p5_us": _us(d["p5"] * f) if f is not None and d.get("p5") is not None else None,
            "p95_us": _us(d["p95"] * f) if f is not None and d.get("p95") is not None else None,
            "reps": h["reps"], "source": h["source"]}


def _work_medians(e: Mapping, keys: Sequence[str]) -> dict:
    """The median over repetitions of each numeric work member isob printed."""
    out = {}
    for k in keys:
        vals = [w[k] for w in (r["outputs"].get("work") or {} for r in e["repetitions"])
                if isinstance(w.get(k), (int, float)) and not isinstance(w.get(k), bool)]
        out[k] = stats.median(vals) if vals else None
    return out


def _work_sums(e: Mapping, keys: Sequence[str]) -> dict:
    out = {}
    for k in keys:
        vals = [w[k] for w in (r["outputs"].get("work") or {} for r in e["repetitions"])
                if isinstance(w.get(k), int) and not isinstance(w.get(k), bool)]
        out[k] = sum(vals) if vals else None
    return out


# ---- ipc: pingpong ----

def build_ipc(data: RunData, doc: Mapping) -> dict | None:
    entries = _entries(doc, PINGPONG)
    problems = _problems(doc, PINGPONG)
    if not entries and not problems:
        return None
    seen = list(dict.fromkeys(str(e["params"].get("protect", NONE)) for e in entries))
    prots = sorted(seen, key=lambda p: (p != NONE, seen.index(p)))
    groups: dict[str, dict[tuple, dict]] = {}
    for e in entries:
        p = e["params"]
        row_key = (p.get("primitive"), p.get("payload"))
        place = str(p.get("placement") or "-")
        row = groups.setdefault(place, {}).setdefault(
            row_key, {"primitive": p.get("primitive"), "payload": p.get("payload"),
                      "cells": {}, "_e": {}})
        row["_e"][str(p.get("protect", NONE))] = e
    tables = []
    for place in sorted(groups, key=lambda x: PLACEMENTS.index(x) if x in PLACEMENTS else 9):
        rows = []
        for row in groups[place].values():
            base = row["_e"].get(NONE)
            for prot, e in row["_e"].items():
                cell = _time(e)
                if prot != NONE and base is not None:
                    b = base["headline"]["ns"]
                    cell["vs_none"] = ratio_of(e, base)
                    cell["delta_us"] = (_us(e["headline"]["ns"] - b)
                                        if b is not None and e["headline"]["ns"] is not None
                                        else None)
                cell["checked"] = _work_sums(e, ("ops", "echoed", "full_checks",
                                                 "stamp_checks", "bad_replies"))
                row["cells"][prot] = cell
            del row["_e"]
            rows.append(row)
        tables.append({"placement": place, "protections": [p for p in prots if any(
            p in r["cells"] for r in rows)], "rows": rows})
    virtual = any((r["outputs"].get("work") or {}).get("virtualized")
                  for e in entries for r in e["repetitions"])
    return {"tables": tables, "protections": prots, "virtualized": virtual,
            "problems": problems, "slides": _slides(doc)}


def _slides(doc: Mapping) -> list[dict]:
    """The slides' figures, derived ones flagged, with the local row each
    maps onto (a Linux round trip in its own unit, never cycles)."""
    out = []
    for ref in doc.get("published") or ():
        if not ref["id"].startswith(SLIDES_PREFIX):
            continue
        derived = bool(ref.get("derived")) or ref["metric"].startswith("derived") \
            or ref["note"].startswith("derived")
        local = [{"label": l["label"], "value": l["value"], "unit": l["unit"],
                  "us": _us(l["ns"])} for l in ref.get("local") or ()]
        out.append({"id": ref["id"], "value": ref["value"], "text": ref["text"], "unit": ref["unit"],
                    "subject": ref["subject"], "metric": ref["metric"], "derived": derived,
                    "source": ref["source"], "hardware": ref["hardware"], "local": local})
    return out


# ---- delegate ----

def build_delegate(data: RunData, doc: Mapping) -> dict | None:
    entries = _entries(doc, DELEGATE)
    problems = _problems(doc, DELEGATE)
    if not entries and not problems:
        return None
    rows: dict[tuple, dict] = {}
    for e in entries:
        p = e["params"]
        key = (p.get("variant"), p.get("region"), p.get("depth"), p.get("placement"))
        row = rows.setdefault(key, {"variant": key[0], "region": key[1], "depth": key[2],
                                    "placement": key[3], "isolation": p.get("isolation"),
                                    "hop": None, "end_to_end": None, "revoke": {},
                                    "checked": {}})
        metric = p.get("metric")
        if metric == "hop":
            row["hop"] = _time(e)
            row["checked"].update(_work_sums(e, ("checksums_verified",)))
        elif metric == "end-to-end":
            row["end_to_end"] = _time(e)
        elif metric == "revoke":
            how = str(p.get("revoke"))
            row["revoke"][how] = {**_time(e), **_work_sums(e, ("holders_probed",
                                                               "holders_faulted")),
                                  "fault_expected": _first_work(e, "fault_expected")}
    variants = list(dict.fromkeys(k[0] for k in rows))
    order = sorted(rows, key=lambda k: (variants.index(k[0]), k[1] or 0, str(k[3]), k[2] or 0))
    return {"rows": [rows[k] for k in order], "problems": problems,
            "revocations": sorted({h for r in rows.values() for h in r["revoke"]})}


def _first_work(e: Mapping, key: str):
    for r in e["repetitions"]:
        v = (r["outputs"].get("work") or {}).get(key)
        if v is not None:
            return v
    return None


# ---- sched ----

def _makespan_ratio(e: Mapping) -> dict | None:
    """Makespan over the ideal, per repetition (each isob process measured
    its own W_solo), as the geometric mean over repetitions with its
    interval: 1 = as fast as N*W spread perfectly over the CPUs used."""
    ratios = []
    for r in e["repetitions"]:
        ideal = (r["outputs"].get("work") or {}).get("ideal_ns")
        if r.get("median") and isinstance(ideal, (int, float)) and ideal > 0 and r["median"] > 0:
            ratios.append(units.ratio(r["median"], ideal))
    if not ratios:
        return None
    g = stats.geomean(ratios)
    iv = (stats.geomean_interval(ratios) if len(ratios) >= stats.MIN_REPS_FOR_INTERVAL
          else None)
    return {"value": g, "overhead_pct": 100.0 * (g - 1.0), "reps": len(ratios),
            "interval": iv.as_dict() if iv else None}


def build_sched(data: RunData, doc: Mapping) -> dict | None:
    entries = _entries(doc, SCHED)
    problems = _problems(doc, SCHED)
    if not entries and not problems:
        return None
    rows = []
    for e in entries:
        p = e["params"]
        med = _work_medians(e, ("ideal_ns", "voluntary_switches", "involuntary_switches",
                                "ns_per_switch_median", "overhead_pct_median", "cpus_used"))
        done = _work_sums(e, ("slices_done", "slices_expected"))
        rows.append({"kind": p.get("kind"), "workers": p.get("workers"),
                     "slice_us": p.get("slice_us"), "mode": p.get("mode"),
                     "cpus": p.get("cpus"), "makespan": _time(e),
                     "ideal_us": _us(med["ideal_ns"]), "vs_ideal": _makespan_ratio(e),
                     "isob_overhead_pct_median": med["overhead_pct_median"],
                     "voluntary": med["voluntary_switches"],
                     "involuntary": med["involuntary_switches"],
                     "ns_per_switch": med["ns_per_switch_median"], "cpus_used": med["cpus_used"],
                     "work_checked": done})
    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    rows.sort(key=lambda r: (str(r["mode"]), str(r["cpus"]), r["slice_us"] or 0,
                             kinds.index(r["kind"]), r["workers"] or 0))
    return {"rows": rows, "kinds": kinds, "problems": problems}
