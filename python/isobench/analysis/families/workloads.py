"""Sections of the workload benchmarks (docs/workloads.md): the Morello
evaluation's tables and the work-per-crossing curve.

- worksweep: the overhead curve per mechanism (ratio to `direct` at the same
  work k per crossing), the fixed cost of a crossing fitted over every k, and
  the break-even work per crossing for 5% and 1% overhead derived from it
  (BREAK_EVEN_RULE);
- cpuwork, memops, pipeio: Morello's tables (CPU kernels, memory
  operations, pipe I/O) per mechanism: the median `out` and `in`, each with
  its interval, and in / out with its interval over repetitions; memops with
  GB/s and page faults, pipeio with the cold first call apart; Morello's
  published figures beside them, marked;
- scale: how many compartments, why it stopped, memory and switch cost
  against the number alive.

Every value comes from the summary document's configurations (headline,
interval, ratio to direct) through quantities.py; the renderers in
render/families/workloads.py show these records and compute nothing.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from ..kit import fit, units
from ...core import stats, student
from ..kit.quantities import (entries, geomean_of, inverse, middle, not_ok, outputs, per_rep,
                              published, quantity, ratio_of, ratio_of_values, time_of)
from ..kit.runs import BASELINE, RunData

# ---- worksweep: overhead against work per crossing ----

# Overheads a reader asks about: the work per crossing at which a mechanism
# costs at most 5%, and at most 1%, more than a plain call.
THRESHOLDS = (0.05, 0.01)

BREAK_EVEN_RULE = (
    "time_mech(k) = c + (1 + g) x time_direct(k): c the fixed cost of a crossing, g how much "
    "slower the work itself runs inside (0: not at all), fitted over every k swept by weighted "
    "least squares on the differences mean(time_mech) - mean(time_direct) at each k (weights 1 "
    "/ their variance over repetitions, each k's relative variance shrunk towards the median "
    "over k, plus the spread tau^2 of c between k where the differences scatter more than "
    "their variances allow: DerSimonian-Laird; interval: Knapp-Hartung, t with K - 2 df).  overhead(k) = c / time_direct(k) + g, "
    "with time_direct(k) = a + b x k (direct's weighted line).  k*: the smallest k with "
    "overhead(k) <= threshold; its band: where the 95% bounds of overhead(k) cross the "
    "threshold.  'not reached': g (its point or, for the band's upper end, its upper bound) is at "
    "or above the threshold, so no amount of work brings the overhead down to it; 'beyond "
    "the sweep': k* lies past the largest k swept (extrapolated along direct's line).  A point "
    "whose ratio interval lies wholly above that of the k before it is flagged non-monotone: "
    "it counts in the fit with its own variance and vetoes nothing.")

# The finest a repetition's time is taken to be known, relative to it: three
# repetitions that agree to the last digit do not get unbounded weight.
REL_FLOOR = 1e-3


def _mean_var(values: Sequence[float], resolution_ns: float) -> tuple[float, float | None, int]:
    """Mean, variance of the mean (None with one value) and count of per-repetition
    times in ns; the variance of one value at least (resolution^2 / 12) and
    (REL_FLOOR x mean)^2."""
    n = len(values)
    m = math.fsum(values) / n
    if n < 2:
        return m, None, n
    s2 = math.fsum((v - m) ** 2 for v in values) / (n - 1)
    s2 = max(s2, resolution_ns ** 2 / 12.0, (REL_FLOOR * m) ** 2)
    return m, s2 / n, n


# How many degrees of freedom the median relative variance over k counts for
# when each k's own is shrunk towards it: as much as three repetitions.
PRIOR_DF = 2.0


def _shrunk(per_k: Mapping[int, tuple[float, float | None, int]]) -> dict[int, float | None]:
    """Each k's variance of the mean, its relative variance shrunk towards
    the median over k (weights: its own df, PRIOR_DF for the median).  Three
    repetitions fix a variance poorly (two df): unshrunk, a k whose three
    happen to agree takes nearly all the weight of the fit."""
    rel = {k: v * n / (m * m) for k, (m, v, n) in per_k.items() if v is not None and m}
    if not rel:
        return {k: v for k, (_, v, _) in per_k.items()}
    prior = float(np.median(list(rel.values())))
    out = {}
    for k, (m, v, n) in per_k.items():
        if k not in rel:
            out[k] = v
            continue
        r = ((n - 1) * rel[k] + PRIOR_DF * prior) / (n - 1 + PRIOR_DF)
        out[k] = r * m * m / n
    return out


def direct_line(times: Mapping[int, float]) -> tuple[float, float] | None:
    """direct's time per call (ns) against k: a + b k, the weighted line
    through its headlines (weights 1 / time^2, fit.weighted_line)."""
    ks = sorted(k for k, v in times.items() if v and v > 0)
    if len(ks) < 2:
        return None
    line = fit.weighted_line(ks, [times[k] for k in ks], [1.0 / times[k] ** 2 for k in ks])
    return line.intercept, line.slope


def crossing_model(mech: Mapping[int, tuple[Sequence[float], float]],
                   base: Mapping[int, tuple[Sequence[float], float]],
                   t_direct) -> dict | None:
    """c and g of time_mech(k) = c + (1 + g) time_direct(k) (BREAK_EVEN_RULE).

    mech, base: {k: (per-repetition times in ns, resolution in ns)};
    t_direct(k): direct's line.  Weighted least squares of the differences
    of the means on [1, t_direct(k)], weights 1 / (var mech + var direct);
    one repetition on either side: weights 1 / time_mech^2 and no interval."""
    ks = sorted(k for k in mech if k in base and mech[k][0] and base[k][0])
    if not ks:
        return None
    stats_m = {k: _mean_var(mech[k][0], mech[k][1]) for k in ks}
    stats_d = {k: _mean_var(base[k][0], base[k][1]) for k in ks}
    shrunk_m, shrunk_d = _shrunk(stats_m), _shrunk(stats_d)
    rows = []
    for k in ks:
        (mm, vm, nm), (md, vd, nd) = stats_m[k], stats_d[k]
        v = df = None
        if vm is not None and vd is not None:
            vm, vd = shrunk_m[k], shrunk_d[k]
            v = vm + vd
            # Welch-Satterthwaite degrees of freedom of this difference.
            df = v * v / (vm * vm / (nm - 1) + vd * vd / (nd - 1))
        rows.append((k, mm - md, v, df, mm))
    point = any(v is None for _, _, v, _, _ in rows)
    x = np.array([t_direct(k) for k, *_ in rows], float)
    y = np.array([d for _, d, *_ in rows], float)
    w = np.array([1.0 / (mm * mm) if point else 1.0 / v for _, _, v, _, mm in rows], float)
    two = len({round(t, 9) for t in x}) >= 2
    X = np.column_stack([np.ones_like(x), x]) if two else np.ones((len(x), 1))
    A = X.T @ (X * w[:, None])
    beta = np.linalg.solve(A, X.T @ (w * y))
    c, g = float(beta[0]), float(beta[1]) if two else 0.0
    out = {"c": c, "g": g, "ks": ks, "basis": "point" if point else "interval",
           "differences": [{"k": k, "ns": d} for k, d, *_ in rows]}
    if point:
        out.update(cov=None, df=None, chi2=None, tau_ns=None, spread_p=None)
        return out
    # The crossing's cost need not be one number: at small k it overlaps the
    # work differently (out-of-order execution), more than the repetitions'
    # scatter allows.  That spread between k, tau^2 (ns^2), is estimated by
    # the method of moments (DerSimonian and Laird, Controlled Clinical
    # Trials 1986, for a meta-regression) and added to every difference's
    # variance: the precise small-k points then share their weight, and the
    # noisy large-k ones still count by their own variance.
    p = X.shape[1]
    dof = len(rows) - p
    resid = y - X @ beta
    chi2 = float((w * resid * resid).sum())
    tau2 = 0.0
    if dof > 0 and chi2 > dof:
        inv = np.linalg.inv(A)
        denom = float(w.sum() - np.trace(inv @ (X.T @ (X * (w * w)[:, None]))))
        tau2 = max(0.0, (chi2 - dof) / denom) if denom > 0 else 0.0
    v = np.array([v for _, _, v, _, _ in rows], float) + tau2
    w = 1.0 / v
    A = X.T @ (X * w[:, None])
    beta = np.linalg.solve(A, X.T @ (w * y))
    c, g = float(beta[0]), float(beta[1]) if two else 0.0
    cov = np.linalg.inv(A)
    if dof > 0:
        # Knapp and Hartung's adjustment (Statistics in Medicine 2003), in
        # its modified form: the covariance scaled by the weighted residuals'
        # mean square where it exceeds 1, Student t with K - p degrees of
        # freedom.  Weights estimated from three repetitions per k make the
        # plain interval too narrow; this one holds its level (the tests
        # simulate it).
        r2 = y - X @ beta
        cov = cov * max(1.0, float((w * r2 * r2).sum()) / dof)
        df = float(dof)
    else:
        df = 1.0
    full = np.zeros((2, 2))
    full[:p, :p] = cov
    out.update(c=c, g=g, cov=full.tolist(), df=max(df, 1.0), chi2=chi2,
               tau_ns=math.sqrt(tau2),
               spread_p=fit.f_sf(chi2 / dof, dof, 1e6) if dof > 0 else None)
    return out


def _overhead_bounds(model: Mapping, t, q: float | None):
    """overhead at direct's time t (a number or an array): estimate, lower
    and upper 95% bound (q: the t quantile of the model's df)."""
    t = np.asarray(t, float)
    o = model["c"] / t + model["g"]
    if model.get("cov") is None or q is None:
        return o, o, o
    (vc, cg), (_, vg) = model["cov"]
    se = np.sqrt(np.maximum(vc / (t * t) + 2 * cg / t + vg, 0.0))
    return o, o - q * se, o + q * se


# The band's search runs up to this many times direct's time at the
# largest k swept (k* far past the sweep is reported as beyond it anyway).
_SEARCH = 1e6


def _crossing_t(f, t0: float, t1: float, threshold: float) -> float | None:
    """The smallest t in [t0, t1] from which f(t) <= threshold on (f falls
    with t, as c / t does): a log grid, then bisection.  t0 when f(t0) is
    already at or below; None when f(t1) is still above."""
    if f(t0) <= threshold:
        return t0
    if f(t1) > threshold:
        return None
    grid = np.geomspace(t0, t1, 600)
    above = np.nonzero(f(grid) > threshold)[0]
    i = int(above[-1])
    lo, hi = float(grid[i]), float(grid[i + 1])
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        if f(mid) > threshold:
            lo = mid
        else:
            hi = mid
    return hi


def break_even(model: Mapping | None, line: tuple[float, float] | None, threshold: float,
               ks: Sequence[int]) -> dict:
    """k* and its band for one threshold (BREAK_EVEN_RULE)."""
    out = {"threshold": threshold, "k": None, "bound": "not reached", "band": None,
           "band_bounds": None, "work_ns": None, "work_band_ns": None,
           "basis": model["basis"] if model else None,
           "largest_k": max(ks) if ks else None}
    if model is None or line is None or line[1] <= 0:
        out["bound"] = "no model"
        return out
    a, b = line
    t0 = max(a, 1e-9)
    t1 = (a + b * max(ks)) * _SEARCH

    def k_of(t: float | None) -> tuple[float | None, str]:
        if t is None:
            return None, "not reached"
        k = max((t - a) / b, 0.0)
        if k <= 0:
            return 0.0, "any"
        return k, ("beyond the sweep" if k > max(ks) else "=")

    q = (student.t_quantile(1.0 - (1.0 - stats.CI_LEVEL) / 2.0, model["df"])
         if model.get("cov") is not None else None)
    est = _crossing_t(lambda t: _overhead_bounds(model, t, q)[0], t0, t1, threshold)
    out["k"], out["bound"] = k_of(est)
    out["work_ns"] = est if est is not None and out["k"] else (a if out["k"] == 0 else None)
    if model.get("cov") is not None:
        lo_t = _crossing_t(lambda t: _overhead_bounds(model, t, q)[1], t0, t1, threshold)
        hi_t = _crossing_t(lambda t: _overhead_bounds(model, t, q)[2], t0, t1, threshold)
        (klo, blo), (khi, bhi) = k_of(lo_t), k_of(hi_t)
        out["band"], out["band_bounds"] = [klo, khi], [blo, bhi]
        out["work_band_ns"] = [lo_t, hi_t]
    return out


def non_monotone(points: Sequence[Mapping]) -> list[int]:
    """The k > 0 whose ratio interval lies wholly above the interval of the
    k swept before it: the overhead rose with more work."""
    out, prev = [], None
    for p in sorted(points, key=lambda p: p["k"]):
        r = p.get("ratio")
        if p["k"] <= 0 or not r or not r.get("interval"):
            prev = None
            continue
        lo, hi = r["interval"]
        if prev is not None and lo > prev:
            out.append(p["k"])
        prev = hi
    return out


def _rep_values(e: Mapping) -> tuple[list[float], float]:
    """An entry's per-repetition headline values and resolution, in ns."""
    f = e.get("to_ns")
    h = e["headline"]
    if f is None:
        return [], 0.0
    return [v * f for v in h.get("values") or [] if v is not None], (h.get("resolution") or 0) * f


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
    line = direct_line(direct_ns)
    base = {k: _rep_values(e) for k, e in direct.items()}
    out = []
    for (mech, place), pts in sorted(curves.items(), key=lambda kv: (kv[0][0] != BASELINE, kv[0])):
        points = []
        for k in sorted(pts):
            e = pts[k]
            r = e.get("ratio")
            ratio = quantity(r["value"], [r["interval"]["low"], r["interval"]["high"]]
                             if r and r.get("interval") else None, "repetitions",
                             e["headline"]["reps"], "x", r.get("note")) if r else None
            if ratio is not None and r.get("modes"):
                ratio["modes"] = True
            points.append({"k": k, "time": time_of(e, "ns"), "ratio": ratio,
                           "ns_per_iteration": middle(outputs(e, "ns_per_iteration"))})
        model, be, flags = None, [], []
        if mech != BASELINE and line is not None:
            model = crossing_model({k: _rep_values(e) for k, e in pts.items()}, base,
                                   lambda k: line[0] + line[1] * k)
            be = [break_even(model, line, t, sorted(pts)) for t in THRESHOLDS]
            flags = non_monotone(points)
        out.append({"mechanism": mech, "placement": place, "points": points,
                    "model": _model_record(model), "break_even": be, "non_monotone": flags})
    return {"thresholds": list(THRESHOLDS), "rule": BREAK_EVEN_RULE,
            "ks": sorted({k for pts in curves.values() for k in pts}),
            "direct_line": ({"a_ns": line[0], "b_ns_per_k": line[1]} if line else None),
            "curves": out, "not_ok": not_ok(doc, "worksweep"),
            "baseline": "direct at the same k (same seeds, same checked values)"}


def _model_record(model: Mapping | None) -> dict | None:
    """c and g as quantities (ns, fraction) with their 95% intervals."""
    if model is None:
        return None
    q = student.t_quantile(1.0 - (1.0 - stats.CI_LEVEL) / 2.0, model["df"]) \
        if model.get("cov") is not None else None

    def one(v: float, var: float | None, unit: str) -> dict:
        iv = [v - q * math.sqrt(var), v + q * math.sqrt(var)] if q is not None else None
        return quantity(v, iv, "repetitions" if iv else None, 0, unit)

    cov = model.get("cov")
    return {"c": one(model["c"], cov[0][0] if cov else None, "ns"),
            "g": one(model["g"], cov[1][1] if cov else None, "x"),
            "basis": model["basis"], "df": model.get("df"), "tau_ns": model.get("tau_ns"),
            "spread_p": model.get("spread_p"), "ks": model["ks"],
            "differences": model["differences"]}


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
                        "out_text": normal["text"], "in_text": r["text"],
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
            # Printed in ms to three decimals: each value is known to half a
            # step (0.0005 ms), so their quotient only to a range.
            half = 0.5 * 10.0 ** -_decimals(o["text"]), 0.5 * 10.0 ** -_decimals(i["text"])
            lo = (i["value"] - half[1]) / (o["value"] + half[0])
            hi = (i["value"] + half[1]) / (o["value"] - half[0]) if o["value"] > half[0] else None
            pub.append({"variant": name, "payload": 1024, "cold": bool(cold),
                        "out_us": units.convert(o["value"], o["unit"], "us"),
                        "in_us": units.convert(i["value"], i["unit"], "us"),
                        "out_text": f"{o['text']} {o['unit']}", "in_text": f"{i['text']} {i['unit']}",
                        "in_over_out": units.ratio(i["value"], o["value"]),
                        "in_over_out_range": [lo, hi],
                        "source": i["source"], "where": i["where"], "note": i["note"]})
    return {"unit": "us", "rows": rows, "published": pub,
            "published_caveat": "published, other hardware (Arm Morello), other ABI: one "
                                "1024-byte message per trial, printed in ms to three decimals "
                                "(1 us steps); the in-compartment read waited for the producer",
            "not_ok": not_ok(doc, "pipeio")}


def _decimals(text: str) -> int:
    """How many decimals a number was printed with ("0.003": 3)."""
    return len(text.partition(".")[2])


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
