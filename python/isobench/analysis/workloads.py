"""Sections of the workload benchmarks (docs/workloads.md): the Morello
evaluation's tables and the work-per-crossing curve.

- worksweep: the overhead curve per mechanism (ratio to `direct` at the same
  work k per crossing) and the break-even work per crossing for 5% and 1%
  overhead, by the rule in break_even();
- cpuwork, memops, pipeio: Morello's tables (CPU kernels, memory
  operations, pipe I/O) per mechanism: the median `out` and `in`, each with
  its interval, and in / out with its interval over repetitions; memops with
  GB/s and page faults, pipeio with the cold first call apart; Morello's
  published figures beside them, marked;
- scale: how many compartments, why it stopped, memory and switch cost
  against the number alive.

Every value comes from the summary document's configurations (headline,
interval, ratio to direct) through quantities.py; the renderers in
render/workloads.py show these records and compute nothing.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from . import units
from .quantities import (entries, geomean_of, inverse, middle, not_ok, outputs, per_rep,
                         published, quantity, ratio_of, ratio_of_values, time_of)
from .runs import BASELINE, RunData

# ---- worksweep: overhead against work per crossing ----

# Overheads a reader asks about: the work per crossing at which a mechanism
# costs at most 5%, and at most 1%, more than a plain call.
THRESHOLDS = (0.05, 0.01)

BREAK_EVEN_RULE = (
    "overhead(k) = ratio to direct at the same k - 1.  Swept: the smallest k (k > 0) from which "
    "on, at every larger k of the sweep, the upper end of the ratio's 95% interval over "
    "repetitions lies below 1 + threshold (with one repetition: the ratio itself, labelled "
    "'point').  Interpolated: where the curve crosses the threshold between the last k above "
    "it and that k, linear in log k and log overhead (an overhead at or below 0 taken as "
    "threshold / 1000); its band is the same crossing of the interval's lower and upper ends.  "
    "Work: direct's time for that k, interpolated the same way.  '<=' means the overhead is "
    "already below the threshold at the smallest k > 0 swept; 'not within the sweep', that "
    "it never stays below up to the largest k.")


# An overhead at or below zero (a mechanism as fast as direct, within noise)
# is taken as this fraction of the threshold when interpolating on log scales,
# so that the interpolation stays monotone in the points: a lower curve never
# crosses later than a higher one.
_FLOOR = 1e-3


def _interp_log(x0: float, y0: float, x1: float, y1: float, y: float) -> float:
    """The x at which the line through (x0, y0), (x1, y1) on log-log scales
    reaches y (0 < y < y0); a y1 at or below zero counts as y * _FLOOR."""
    y1 = max(y1, y * _FLOOR)
    lx0, lx1 = math.log(x0), math.log(x1)
    fy0, fy1, fy = math.log(y0), math.log(y1), math.log(y)
    if fy1 == fy0:
        return x1
    return math.exp(lx0 + (lx1 - lx0) * (fy - fy0) / (fy1 - fy0))


def crossing(ks: Sequence[float], ys: Sequence[float | None], threshold: float) -> dict:
    """Where the curve ys(ks) (ks increasing, all > 0) falls below threshold
    for good: {"k": ..., "bound": "=" | "<=" | "not reached", "index": i}.

    index is the first k from which on every y is below the threshold; k
    interpolates between it and the k before ("="), or is that first k itself
    when there is no point before it to interpolate from ("<=": at most).
    A missing y counts as not below."""
    i = len(ks)
    while i > 0 and ys[i - 1] is not None and ys[i - 1] < threshold:
        i -= 1
    if i == len(ks):
        return {"k": None, "bound": "not reached", "index": None}
    if i == 0 or ys[i - 1] is None:
        # Below from the first point on, or the point before is missing: at most ks[i].
        return {"k": ks[i], "bound": "<=", "index": i}
    prev = ys[i - 1]
    k = _interp_log(ks[i - 1], prev, ks[i], ys[i], threshold)
    return {"k": min(max(k, ks[i - 1]), ks[i]), "bound": "=", "index": i}


def _interp_curve(ks: Sequence[float], vs: Sequence[float], k: float | None) -> float | None:
    """vs(k) by log-log interpolation between swept ks (all > 0)."""
    if k is None or not ks:
        return None
    pts = [(a, b) for a, b in zip(ks, vs) if b is not None and b > 0]
    if not pts:
        return None
    if k <= pts[0][0]:
        return pts[0][1] if k == pts[0][0] else None
    for (k0, v0), (k1, v1) in zip(pts, pts[1:]):
        if k0 <= k <= k1:
            t = (math.log(k) - math.log(k0)) / (math.log(k1) - math.log(k0))
            return math.exp(math.log(v0) + t * (math.log(v1) - math.log(v0)))
    return None


def break_even(points: Sequence[Mapping], direct_ns: Mapping[int, float],
               threshold: float) -> dict:
    """The work per crossing at which a mechanism's overhead falls below
    threshold (see BREAK_EVEN_RULE).  points: the curve's points with
    "k" and "ratio" (a quantity, or None)."""
    pts = [p for p in points if p["k"] > 0 and p.get("ratio") and p["ratio"]["value"]]
    ks = [p["k"] for p in pts]
    point = [p["ratio"]["value"] - 1.0 for p in pts]
    have_iv = bool(pts) and all(p["ratio"]["interval"] for p in pts)
    low = [p["ratio"]["interval"][0] - 1.0 for p in pts] if have_iv else None
    high = [p["ratio"]["interval"][1] - 1.0 for p in pts] if have_iv else None
    swept = crossing(ks, high if have_iv else point, threshold)
    est = crossing(ks, point, threshold)
    band = [crossing(ks, low, threshold), crossing(ks, high, threshold)] if have_iv else None
    dks = sorted(k for k in direct_ns if k > 0)
    dvs = [direct_ns[k] for k in dks]

    def work(c: Mapping | None) -> float | None:
        if c is None or c["k"] is None:
            return None
        return _interp_curve(dks, dvs, c["k"])

    return {
        "threshold": threshold,
        "basis": "interval" if have_iv else "point",
        "swept_k": ks[swept["index"]] if swept["index"] is not None else None,
        "swept_bound": swept["bound"],
        "k": est["k"], "bound": est["bound"],
        "band": [band[0]["k"], band[1]["k"]] if band else None,
        "band_bounds": [band[0]["bound"], band[1]["bound"]] if band else None,
        "work_ns": work(est),
        "work_band_ns": [work(band[0]), work(band[1])] if band else None,
        "largest_k": ks[-1] if ks else None,
    }


def worksweep(data: RunData, doc: Mapping) -> dict | None:
    es = entries(doc, "worksweep")
    if not es:
        return None
    curves: dict[tuple[str, str], dict[int, dict]] = {}
    for e in es:
        place = e["params"].get("placement") or "same-cpu"
        curves.setdefault((e["mechanism"], place), {})[e["params"]["k"]] = e
    direct = next((pts for (m, _), pts in curves.items() if m == BASELINE), {})
    direct_ns = {k: e["headline"]["ns"] for k, e in direct.items()
                 if e["headline"].get("ns") is not None}
    out = []
    for (mech, place), pts in sorted(curves.items(), key=lambda kv: (kv[0][0] != BASELINE, kv[0])):
        points = []
        for k in sorted(pts):
            e = pts[k]
            r = e.get("ratio")
            ratio = quantity(r["value"], [r["interval"]["low"], r["interval"]["high"]]
                             if r and r.get("interval") else None, "repetitions",
                             e["headline"]["reps"], "x") if r else None
            points.append({"k": k, "time": time_of(e, "ns"), "ratio": ratio,
                           "ns_per_iteration": middle(outputs(e, "ns_per_iteration"))})
        be = ([break_even(points, direct_ns, t) for t in THRESHOLDS]
              if mech != BASELINE else [])
        out.append({"mechanism": mech, "placement": place, "points": points, "break_even": be})
    return {"thresholds": list(THRESHOLDS), "rule": BREAK_EVEN_RULE,
            "ks": sorted({k for pts in curves.values() for k in pts}),
            "curves": out, "not_ok": not_ok(doc, "worksweep"),
            "baseline": "direct at the same k (same seeds, same checked values)"}


# ---- the Morello tables: out and in, per mechanism ----

def _by(es: Sequence[dict], *keys: str) -> dict[tuple, dict]:
    """Entries by (mechanism, placement, *params[keys], where)."""
    out = {}
    for e in es:
        p = e["params"]
        out[(e["mechanism"], p.get("placement") or "same-cpu", *(p.get(k) for k in keys),
             p.get("where"))] = e
    return out


def _abi(*es: Mapping | None) -> str | None:
    """The `abi` label of an entry whose code inside is not out's (wasm)."""
    for e in es:
        if e is not None and e["params"].get("abi"):
            return str(e["params"]["abi"])
    return None


CPU_KERNELS = ("maths", "int", "float", "array")  # Morello's Table 5 order
# Morello's published builds: (id suffix, short name, what it is).
CPU_PUBLISHED = (("normal", "plain", "out: plain ABI, no compartment"),
                 ("secure", "purecap (T5)", "in: purecap ABI in a c18n compartment (Table 5)"),
                 ("benchmark", "purecap-benchmark (T6)",
                  "in: purecap-benchmark ABI in a c18n compartment (Table 6)"))


def _per_iteration(entry: Mapping | None) -> list[float]:
    """ns per iteration of each repetition: its median over its own iteration count."""
    if entry is None:
        return []

    def one(r: Mapping, ns: float) -> float | None:
        n = (r.get("outputs") or {}).get("iterations") or entry["params"].get("iterations")
        return ns / n if n else None

    return per_rep(entry, one)


def cpuwork(data: RunData, doc: Mapping) -> dict | None:
    es = entries(doc, "cpuwork")
    if not es:
        return None
    by = _by(es, "kernel")
    rows = []
    groups = sorted({k[:3] for k in by}, key=lambda g: (
        CPU_KERNELS.index(g[2]) if g[2] in CPU_KERNELS else 99, g[0] != BASELINE, g[0], g[1]))
    for mech, place, kernel in groups:
        out_e, in_e = by.get((mech, place, kernel, "out")), by.get((mech, place, kernel, "in"))
        lib_e = by.get((mech, place, kernel, "lib-in-compartment"))
        any_e = out_e or in_e or lib_e
        row = {"kernel": kernel, "mechanism": mech, "placement": place,
               "out": time_of(out_e, "ms"), "in": time_of(in_e, "ms"),
               "in_over_out": ratio_of(in_e, out_e), "abi": _abi(in_e, lib_e),
               "trial_iterations": any_e["params"].get("trial_iterations"),
               "scaled": any_e["params"].get("scaled"), "lib": None}
        if lib_e is not None:
            lib_it, out_it = _per_iteration(lib_e), _per_iteration(out_e)
            row["lib"] = {
                "ns_per_iteration": geomean_of(lib_it, "ns"),
                "out_ns_per_iteration": geomean_of(out_it, "ns"),
                "over_out": ratio_of_values(lib_it, out_it),
                "iterations": middle(outputs(lib_e, "iterations")),
                "crossings_per_trial": middle(outputs(lib_e, "crossings_per_trial")),
            }
        rows.append(row)
    refs = {r["id"]: r for r in published(
        [f"morello-cpu-{k}-{v}" for k in CPU_KERNELS for v, _, _ in CPU_PUBLISHED])}
    pub = []
    for k in CPU_KERNELS:
        normal = refs.get(f"morello-cpu-{k}-normal")
        for v, build, label in CPU_PUBLISHED[1:]:
            r = refs.get(f"morello-cpu-{k}-{v}")
            if normal is None or r is None:
                continue
            pub.append({"kernel": k, "build": build, "label": label, "out_ms": normal["value"], "in_ms": r["value"],
                        "in_over_out": units.ratio(r["value"], normal["value"]),
                        "source": r["source"], "where": r["where"], "hardware": r["hardware"],
                        "note": r["note"]})
    return {"unit": "ms", "rows": rows, "published": pub,
            "published_caveat": "published, other hardware (Arm Morello), other ABI: their in "
                                "and out builds differ in ABI as well as in compartments, all "
                                "at -O0, means of CPU time over 1e8 iterations per trial",
            "not_ok": not_ok(doc, "cpuwork")}


MEM_STEPS = ("alloc", "write", "memset", "read", "free")


def _faults(entry: Mapping | None) -> dict | None:
    """The page faults counted per trial over every repetition: median, min, max."""
    if entry is None:
        return None
    counts = [c for lst in outputs(entry, "minor_faults") for c in (lst or [])]
    if not counts:
        return None
    return {"median": middle(counts), "min": min(counts), "max": max(counts), "trials": len(counts),
            "pages_4k": entry["params"].get("pages_4k"),
            "fault_site": (outputs(entry, "fault_site") or [None])[0]}


def _gbps(entry: Mapping | None, t: Mapping | None, bytes_param: str) -> dict | None:
    """The rate of moving entry's params[bytes_param] bytes in time t (a time
    record in its own unit: ms for memops, us for pipeio)."""
    if entry is None or t is None:
        return None
    nbytes = entry["params"].get(bytes_param)
    return inverse(t, "GB/s", lambda v: units.gb_per_s(nbytes, units.convert(v, t["unit"], "ns")))


def memops(data: RunData, doc: Mapping) -> dict | None:
    es = entries(doc, "memops")
    if not es:
        return None
    by = _by(es, "size_bytes", "step")
    rows = []
    groups = sorted({k[:4] for k in by}, key=lambda g: (
        g[2], MEM_STEPS.index(g[3]) if g[3] in MEM_STEPS else 99, g[0] != BASELINE, g[0], g[1]))
    for mech, place, size, step in groups:
        out_e, in_e = by.get((mech, place, size, step, "out")), by.get((mech, place, size, step, "in"))
        t_out, t_in = time_of(out_e, "ms"), time_of(in_e, "ms")
        moves = step in ("write", "memset", "read")
        rows.append({"size_bytes": size, "size_mib": (out_e or in_e)["params"].get("size_mib"),
                     "step": step, "mechanism": mech, "placement": place,
                     "out": t_out, "in": t_in, "in_over_out": ratio_of(in_e, out_e),
                     "gbps_out": _gbps(out_e, t_out, "size_bytes") if moves else None,
                     "gbps_in": _gbps(in_e, t_in, "size_bytes") if moves else None,
                     "faults_out": _faults(out_e), "faults_in": _faults(in_e),
                     "thp": (out_e or in_e)["params"].get("thp"), "abi": _abi(in_e)})
    return {"unit": "ms", "rows": rows, "published": [],
            "published_note": "Morello's memory section published no figures: it ends with its "
                              "pseudo-code, and its artefact's write and read loops had a bound "
                              "of 0, so they never touched the blocks",
            "not_ok": not_ok(doc, "memops")}


PIPE_VARIANTS = ("write", "read", "roundtrip", "stream")


def _cold(entry: Mapping | None) -> dict | None:
    """The first (cold) call of each repetition, kept out of the samples: the
    median over repetitions, in us."""
    if entry is None or entry.get("to_ns") is None:
        return None
    colds = [c * entry["to_ns"] for c in outputs(entry, "cold") if isinstance(c, (int, float))]
    if not colds:
        return None
    return {"value": units.convert(middle(colds), "ns", "us"), "unit": "us", "reps": len(colds),
            "min": units.convert(min(colds), "ns", "us"), "max": units.convert(max(colds), "ns", "us")}


def pipeio(data: RunData, doc: Mapping) -> dict | None:
    es = entries(doc, "pipeio")
    if not es:
        return None
    by = _by(es, "payload", "variant")
    rows = []
    groups = sorted({k[:4] for k in by}, key=lambda g: (
        PIPE_VARIANTS.index(g[3]) if g[3] in PIPE_VARIANTS else 99, g[2], g[0] != BASELINE,
        g[0], g[1]))
    for mech, place, payload, variant in groups:
        out_e = by.get((mech, place, payload, variant, "out"))
        in_e = by.get((mech, place, payload, variant, "in"))
        t_out, t_in = time_of(out_e, "us"), time_of(in_e, "us")
        stream = variant == "stream"
        rows.append({"variant": variant, "payload": payload, "mechanism": mech, "placement": place,
                     "out": t_out, "in": t_in, "in_over_out": ratio_of(in_e, out_e),
                     "cold_out": _cold(out_e), "cold_in": _cold(in_e),
                     "gbps_out": _gbps(out_e, t_out, "stream_bytes") if stream else None,
                     "gbps_in": _gbps(in_e, t_in, "stream_bytes") if stream else None,
                     "short_reads": sum(int(x) for e in (out_e, in_e) if e
                                        for x in outputs(e, "short_reads")),
                     "io_by_in": (outputs(in_e, "io_by") or [None])[0] if in_e else None,
                     "abi": _abi(in_e)})
    refs = {r["id"]: r for r in published(
        [f"morello-pipe-{v}-{w}" for v in ("write", "read", "write-cold", "read-cold")
         for w in ("out", "in")])}
    pub = []
    for name in ("write", "read"):
        for cold in ("", "-cold"):
            o, i = refs.get(f"morello-pipe-{name}{cold}-out"), refs.get(f"morello-pipe-{name}{cold}-in")
            if o is None or i is None:
                continue
            pub.append({"variant": name, "payload": 1024, "cold": bool(cold),
                        "out_us": units.convert(o["value"], o["unit"], "us"),
                        "in_us": units.convert(i["value"], i["unit"], "us"),
                        "in_over_out": units.ratio(i["value"], o["value"]),
                        "source": i["source"], "where": i["where"], "note": i["note"]})
    return {"unit": "us", "rows": rows, "published": pub,
            "published_caveat": "published, other hardware (Arm Morello), other ABI: one "
                                "1024-byte message per trial, printed in ms to three decimals "
                                "(1 us steps); the in-compartment read waited for the producer",
            "not_ok": not_ok(doc, "pipeio")}


# ---- scale ----

def scale(data: RunData, doc: Mapping) -> dict | None:
    es = entries(doc, "scale")
    bad = not_ok(doc, "scale")
    if not es and not bad:
        return None
    mechs: dict[tuple[str, str], dict] = {}
    for e in es:
        key = (e["mechanism"], e["params"].get("placement") or "same-cpu")
        m = mechs.setdefault(key, {"create": None, "destroy": None, "switch": {}})
        v = e["params"].get("variant")
        if v == "switch":
            m["switch"][e["params"]["live"]] = e
        elif v in ("create", "destroy"):
            m[v] = e
    rows, curves = [], []
    for (mech, place), m in sorted(mechs.items()):
        c, d = m["create"], m["destroy"]
        ns = sorted(m["switch"])
        last = m["switch"][ns[-1]] if ns else None

        def out1(e, key):
            vals = outputs(e, key) if e is not None else []
            return vals[0] if vals else None

        created = outputs(c, "created") if c else []
        rows.append({
            "mechanism": mech, "placement": place,
            "created": [min(created), max(created)] if created else None,
            "limit_asked": c["params"].get("limit_asked") if c else None,
            "limit_cap": out1(c, "limit_cap"), "cause": out1(c, "cause"),
            "errno": out1(c, "errno"), "errno_name": out1(c, "errno_name"),
            "dead": sum(int(x) for x in outputs(c, "dead")) if c else None,
            "create": time_of(c, "us"), "destroy": time_of(d, "us"),
            "processes_left": sum(int(x) for x in outputs(d, "processes_left")) if d else None,
            "pss_kib_per_compartment": middle(outputs(last, "pss_kb_per_compartment")) if last else None,
            "pss_at": ns[-1] if ns else None,
            "mem_available_mib": out1(c, "mem_available_mib"),
        })
        base = m["switch"].get(ns[0]) if ns else None
        curves.append({"mechanism": mech, "placement": place, "points": [
            {"live": n, "time": time_of(m["switch"][n], "ns"),
             "over_first": ratio_of(m["switch"][n], base) if n != ns[0] else None,
             "pss_kib": middle(outputs(m["switch"][n], "pss_kb")),
             "pss_kib_per_compartment": middle(outputs(m["switch"][n], "pss_kb_per_compartment")),
             "calls_verified": middle(outputs(m["switch"][n], "calls_verified"))}
            for n in ns]})
    return {"rows": rows, "curves": curves, "not_ok": bad}
