"""The summary document of a run: every number isobench shows, computed once.

`build(data)` turns a loaded run (runs.RunData) into one JSON-ready
document: per configuration its headline number with the rule that chose
it, its interval, its ratio to the baseline, the flags that qualify it;
the averages; the soundness findings; the published figures matched to
local configurations.  `isobench show`, `run`, `report` (which writes it
as stats.json), `check`, `compare` and the plots all render this document
and compute no statistic of their own.  docs/methodology.md is the prose
version of the rules below.

The headline rule (one number per configuration):

    region = median - empty region          (per repetition)
    long   = region >= HEADLINE_MIN_STEPS * max(counter step, empty region)
    long, or no batched estimate          -> the per-call median
    short, batched agrees with the median -> the batched estimate
    short, batched disagrees              -> the median, and the configuration
                                             carries `batched-unreliable`

"Agrees" means the batched estimate's interval (the order-statistic
interval of the median of its (K, 2K) pairs) reaches into the range from
half the median's interval less the empty region's p95 up to the larger of
the median's interval and the per-call mean, each end widened by one
counter step (see BATCHED_MIN_FRACTION for why).

The unit of replication is the repetition (a fresh isob process): each
repetition gives one value by the rule above, a configuration's headline
is their geometric mean, and its interval is Student's t over their logs.
With one repetition, the interval is that process's own order-statistic
interval, and says so; a ratio then has no interval.

Document history ("summary_version"):

    1  first version; measurement.quick and measurement.n (the --quick and
       --n values the run's processes measured with) added within it.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from .. import __version__
from . import checks, reference, runs, sections, stats, units
from .runs import Config, RunData

SUMMARY_VERSION = 1

# A region at least this many counter steps and empty regions long is
# measured well by its per-call median: the reading cost inside it is then
# at most 1/20 of the value, and quantization at most one step in 20.
HEADLINE_MIN_STEPS = 20

# The batched estimate agrees with the per-call median when their intervals
# reach into [BATCHED_MIN_FRACTION * (median - empty region), max(median,
# mean)] (each end widened by one counter step).  Above both is impossible
# for a sound estimate: every per-call sample holds one whole call.  Below the
# median less the readings it may fall, since calls back to back overlap in
# the pipeline and the fences of a per-call region wait for the call to
# retire -- on the KVM guests here by 10-35% for bodies of 10-300 ticks --
# but an estimate under half of it measures another regime: a server that
# stays awake between calls, a wake-up that is skipped.
BATCHED_MIN_FRACTION = 0.5

MEDIAN, BATCHED = "median", "batched"


# ---- one repetition ----

def _empty(r: Mapping) -> tuple[float, float, float]:
    """(median, p5, p95) of the empty region of the process r came from."""
    h = r.get("header") or {}
    er = h.get("empty_region") if isinstance(h.get("empty_region"), Mapping) else {}
    med = er.get("median", r.get("empty_region"))
    if med is None:
        return 0.0, 0.0, 0.0
    # Results measured before isob printed the percentiles: the minimum
    # bounds the cost from below, and the same distance above the median
    # stands in for the upper bound.
    p5 = er.get("p5", er.get("min", med))
    p95 = er.get("p95", med + (med - p5))
    return float(med), float(p5), float(p95)


def _batched_interval(pairs: Sequence[float]) -> stats.Interval | None:
    xs = sorted(pairs)
    iv = stats.median_interval(xs)
    if iv is None and xs:
        # Too few pairs for a 95% interval: their range, at the coverage it has.
        iv = stats.Interval(xs[0], xs[-1], 1.0 - 2.0 * 0.5 ** len(xs),
                            "range of the batched pairs", len(xs))
    return iv


def repetition(cfg: Config, r: Mapping) -> dict:
    """Everything about one repetition (one isob process) of cfg."""
    h = r.get("header") or {}
    step = float(h.get("counter_step") or 0)
    empty, empty_p5, empty_p95 = _empty(r)
    xs = cfg.rep_samples.get(r["result_id"], ())  # a sorted array (runs.group)
    have = len(xs) > 0
    med = stats.percentile_sorted(xs, 0.5) if have else r.get("median")
    mi = stats.median_interval(xs, step) if have else None
    pairs = list(r.get("batched_reps") or ())
    batched = r.get("batched")
    bi = _batched_interval(pairs) if pairs else None
    region = None if med is None else med - empty
    threshold = HEADLINE_MIN_STEPS * max(step, empty)
    agree = None
    if batched is not None and med is not None:
        lo = BATCHED_MIN_FRACTION * ((mi.low if mi else med) - empty_p95) - step
        # The batched estimate averages K calls, so where calls are skewed
        # it sits nearer their mean than their median: the mean, which also
        # holds every call, bounds it from above as well as the median does.
        hi = max(mi.high if mi else med, r.get("mean") or med) + step
        blo, bhi = (bi.low, bi.high) if bi else (batched, batched)
        agree = bhi >= lo and blo <= hi
    return {
        "repetition": r.get("repetition") or 1, "result_id": r["result_id"],
        "n": len(xs) if have else r.get("n"), "median": med,
        "median_interval": mi.as_dict() if mi else None, "mean": r.get("mean"),
        "batched": batched, "batched_pairs": len(pairs),
        "batched_interval": bi.as_dict() if bi else None,
        "counter_step": step, "empty_region": {"median": empty, "p5": empty_p5, "p95": empty_p95},
        "region": region, "long_threshold": threshold,
        "long": region is not None and region >= threshold and region > 0,
        "batched_agrees": agree, "dropped": r.get("dropped") or 0,
        "outputs": {k: v for k, v in (r.get("params") or {}).items()
                    if k in runs.OUTPUT_PARAMS},
    }


# ---- the headline of a configuration ----

def _long(reps: Sequence[dict]) -> bool:
    regions = sorted(r["region"] for r in reps if r["region"] is not None)
    if not regions:
        return False
    region = stats.percentile_sorted(regions, 0.5)
    return region > 0 and region >= stats.median([r["long_threshold"] for r in reps])


def _choose(reps: Sequence[dict], unit: str | None) -> tuple[str, str, bool]:
    """(source, why, batched-unreliable) by the headline rule."""
    regions = sorted(r["region"] for r in reps if r["region"] is not None)
    region = stats.percentile_sorted(regions, 0.5) if regions else None
    threshold = stats.median([r["long_threshold"] for r in reps])
    have_batched = all(r["batched"] is not None for r in reps)
    unreliable = have_batched and any(r["batched_agrees"] is False for r in reps)
    u = unit or ""
    if _long(reps):
        return MEDIAN, (f"long region: median - empty region = {region:,.0f} {u} >= "
                        f"{HEADLINE_MIN_STEPS} x max(counter step, empty region) = "
                        f"{threshold:,.0f}"), unreliable
    if not have_batched:
        return MEDIAN, ("short region without a batched estimate: the median, which "
                        "includes the reading cost"), unreliable
    if unreliable:
        return MEDIAN, ("short region, but the batched estimate disagrees with the median "
                        "less the empty region beyond their spreads (batched-unreliable): "
                        "the median, which includes the reading cost"), unreliable
    return BATCHED, ("short region: the batched estimate, in which the reading cost "
                     "cancels"), unreliable


def _within(rep: dict, source: str) -> stats.Interval | None:
    d = rep["median_interval"] if source == MEDIAN else rep["batched_interval"]
    return stats.Interval(**d) if d else None


def headline(cfg: Config, reps: Sequence[dict]) -> dict:
    """The headline of cfg: source, value, interval, ns, flags."""
    source, why, unreliable = _choose(reps, cfg.unit)
    values = [r["median"] if source == MEDIAN else r["batched"] for r in reps]
    values = [v for v in values if v is not None]
    resolution = max((r["counter_step"] for r in reps), default=0.0) if source == MEDIAN else 0.0
    note = None
    interval = None
    if not values:
        value = None
    elif all(v > 0 for v in values):
        value = stats.geomean(values)
        if len(values) >= stats.MIN_REPS_FOR_INTERVAL:
            interval = stats.geomean_interval(values, resolution)
        else:
            interval = _within(reps[0], source)
            note = ("one repetition: the interval is that process's own (order statistics); "
                    "nothing is known about the next process: repeat (`--repeat`)")
    else:
        value = stats.median(values)
        note = "a repetition's value is not positive: no geometric mean and no interval"
    # A long region's median is at least HEADLINE_MIN_STEPS steps: one step
    # of quantization is then a small part of it.  A short one's is not.
    quantized = source == MEDIAN and not _long(reps) and any(
        (r["median_interval"] or {}).get("quantized") for r in reps)
    f = cfg.ns_factor()
    return {
        "value": value, "source": source, "why": why, "unit": cfg.unit,
        "values": values, "resolution": resolution, "reps": len(values),
        "interval": interval.as_dict() if interval else None,
        "between": "repetitions" if len(values) >= stats.MIN_REPS_FOR_INTERVAL else
                   ("one process" if interval else None),
        "note": note, "ns": units.to_ns(value, cfg.unit, cfg.tsc_hz),
        "interval_ns": (units.scale([interval.low, interval.high], f)
                        if interval and f is not None else None),
        "quantized": quantized, "batched_unreliable": unreliable,
    }


def ratio_of(x: Mapping, base: Mapping) -> dict | None:
    """x's headline over base's: value, overhead and the interval over repetitions."""
    hx, hb = x["headline"], base["headline"]
    if not hx["value"] or not hb["value"] or hx["value"] <= 0 or hb["value"] <= 0:
        return None
    value = units.ratio(hx["value"], hb["value"])
    iv = stats.ratio_interval(hx["values"], hb["values"], hx["resolution"], hb["resolution"])
    note = None
    if iv is None:
        n = min(hx["reps"], hb["reps"])
        note = (f"{n} repetition{'s' if n != 1 else ''}: a ratio needs at least "
                f"{stats.MIN_REPS_FOR_INTERVAL} on each side for an interval "
                "(`--repeat`)") if n < stats.MIN_REPS_FOR_INTERVAL else \
            "a repetition's value is not positive: no interval"
    return {"to": base["label"], "to_key": base["key"], "value": value,
            "overhead": value - 1.0, "interval": iv.as_dict() if iv else None, "note": note}


def _role(cfg: Config) -> str:
    if runs.is_baseline(cfg):
        return "baseline"
    if runs.is_reference(cfg):
        return "reference"
    if cfg.mechanism == runs.BASELINE:
        return "direct-variant"
    if cfg.mechanism == runs.NO_MECHANISM:
        return "primitive"
    return "mechanism"


def _headline_phase(cfg: Config) -> bool:
    """Whether cfg is the phase that stands for its benchmark (kv: get)."""
    want = runs.HEADLINE_PHASE.get(cfg.benchmark)
    return want is None or cfg.params.get("variant") == want


def configuration(cfg: Config) -> dict:
    reps = [repetition(cfg, r) for r in cfg.results]
    d = cfg.description
    h = headline(cfg, reps)
    return {
        "key": list(cfg.key), "label": cfg.label, "benchmark": cfg.benchmark,
        "kind": cfg.kind, "mechanism": cfg.mechanism, "params": cfg.params,
        "unit": cfg.unit, "counter": cfg.counter, "role": _role(cfg),
        "headline_phase": _headline_phase(cfg),
        "to_ns": cfg.ns_factor(), "repetitions": reps,
        "headline": h, "between_cv": stats.between_cv(h["values"]),
        "distribution": {**{k: v for k, v in d.as_dict().items() if k != "outliers"},
                         "outliers": d.outliers.count if d.outliers else None},
        "dropped": cfg.dropped, "ratio": None,
    }


# ---- kv-server: servers beside memcached ----

def _kv_server(entry: dict, ref: dict | None) -> dict:
    """Throughput and latency of one kv-server configuration, and their
    ratios to memcached's (the reference server) in the same run."""
    outs = [r["outputs"] for r in entry["repetitions"]]

    def values(key: str) -> list[float]:
        return [float(o[key]) for o in outs if isinstance(o.get(key), (int, float)) and o[key] > 0]

    def gm(key: str) -> float | None:
        v = values(key)
        return stats.geomean(v) if v else None

    def mid(key: str) -> float | None:
        v = values(key)
        return stats.median(v) if v else None

    out = {"ops_per_s": gm("ops_per_s"), "latency_avg_ns": gm("latency_avg_ns"),
           "latency_p50_hi_ns": mid("latency_p50_hi_ns"),
           "latency_p99_hi_ns": mid("latency_p99_hi_ns"),
           "throughput_vs_reference": None, "latency_vs_reference": None}
    if ref is not None:
        ref_outs = [r["outputs"] for r in ref["repetitions"]]
        for key, name in (("ops_per_s", "throughput_vs_reference"),
                          ("latency_avg_ns", "latency_vs_reference")):
            mine = values(key)
            theirs = [float(o[key]) for o in ref_outs
                      if isinstance(o.get(key), (int, float)) and o[key] > 0]
            if mine and theirs:
                iv = stats.ratio_interval(mine, theirs)
                out[name] = {"value": units.ratio(stats.geomean(mine), stats.geomean(theirs)),
                             "interval": iv.as_dict() if iv else None}
    return out


# ---- averages ----

def aggregates(configs: Sequence[dict]) -> list[dict]:
    """Geometric means of ratios to the baseline, per benchmark, mechanism and
    population (runs.POPULATION_PARAMS), over the sweep params only (kv's
    data sizes): never over placements, payloads or phases."""
    groups: dict[tuple, list[dict]] = {}
    for c in configs:
        if c["ratio"] is None or not c["headline_phase"]:
            continue
        pop = runs.population(c["benchmark"], c["params"])
        groups.setdefault((c["mechanism"], *pop), []).append(c)
    out = []
    for (mech, bench, *pop), members in groups.items():
        if len(members) < 2:
            continue  # an average of one number is that number
        over = sorted({k for c in members for k in c["params"] if k in runs.SWEEP_PARAMS})
        population = {k: v for k, v in zip(runs.POPULATION_PARAMS, pop) if v is not None}
        name = " ".join([bench, mech, *(f"{k}={v}" for k, v in population.items())])
        agg = stats.aggregate_ratios([c["ratio"]["value"] for c in members])
        out.append({"name": f"{name}: ratio to direct over {', '.join(over) or 'configs'}",
                    "benchmark": bench, "mechanism": mech, "population": population,
                    "over": over, **agg})
    return out


# ---- published figures ----

def published(data: RunData, by_key: Mapping[tuple, dict]) -> list[dict]:
    out = []
    for ref in reference.load():
        local = []
        for c in reference.matches(ref, data.configs):
            e = by_key[tuple(c.key)]
            h = e["headline"]
            local.append({"label": e["label"], "mechanism": c.mechanism, "params": c.params,
                          "placement": c.placement, "value": h["value"], "unit": c.unit,
                          "ns": h["ns"], "source": h["source"]})
        out.append({**ref.as_dict(), "text": ref.text(), "local": local})
    return out


# ---- the run ----

def _measurement(results: Sequence[Mapping]) -> dict:
    """How the run measured: counters and why, TSC frequencies, empty regions, steps."""
    headers = [r["header"] for r in results if r.get("header")]
    counters = list(dict.fromkeys((h.get("counter"), h.get("counter_why")) for h in headers))
    tsc = list(dict.fromkeys((h.get("tsc_hz"), h.get("tsc_hz_source")) for h in headers))
    empties = [h["empty_region"] for h in headers if isinstance(h.get("empty_region"), Mapping)]
    medians = [e["median"] for e in empties if e.get("median") is not None]
    means = [e["mean"] for e in empties if e.get("mean") is not None]
    steps = sorted({h["counter_step"] for h in headers if h.get("counter_step")})
    return {"counters": [list(c) for c in counters], "tsc": [list(t) for t in tsc],
            # How much each process measured (isob's --quick and --n), for
            # `compare` to say when two runs differ in it.
            "quick": sorted({bool(h.get("quick")) for h in headers if "quick" in h}),
            "n": sorted({h["n"] for h in headers if isinstance(h.get("n"), int)}),
            "unit": headers[0].get("unit") if headers else None,
            "empty_region_median": [min(medians), max(medians)] if medians else None,
            "empty_region_mean": [min(means), max(means)] if means else None,
            "counter_steps": steps}


def _result_row(r: Mapping) -> dict:
    return {"result_id": r["result_id"], "benchmark": r["benchmark"],
            "mechanism": r["mechanism"], "params": r.get("params") or {},
            "status": r["status"], "reason": r.get("reason"),
            "repetition": r.get("repetition") or 1, "unit": r.get("unit")}


def build(data: RunData) -> dict:
    """The summary document of a run."""
    entries = [configuration(c) for c in data.configs]
    by_key = {tuple(e["key"]): e for e in entries}
    for c, e in zip(data.configs, entries):
        base = data.baseline_of(c)
        if base is not None:
            e["ratio"] = ratio_of(e, by_key[tuple(base.key)])
    refs = {e["benchmark"]: e for e in entries if e["role"] == "reference"}
    for e in entries:
        if e["benchmark"] == "kv-server":
            e["kv_server"] = _kv_server(e, refs.get("kv-server"))
    run = data.run
    opts = run.get("options") or {}
    doc = {
        "summary_version": SUMMARY_VERSION, "isobench_version": __version__,
        "run": {"run_id": data.run_id, "db": data.db, "started": run.get("started"),
                "finished": run.get("finished"), "status": run.get("status"),
                "argv": run.get("argv") or [], "options": opts,
                "owner": run.get("owner"), "end_reason": run.get("end_reason"),
                "environment": data.env},
        "method": method(),
        "measurement": _measurement(data.results),
        "configs": entries,
        "results": [_result_row(r) for r in data.results],
        "aggregates": aggregates(entries),
        "published": published(data, by_key),
    }
    doc["sections"] = sections.build(data, doc)
    doc["findings"] = [f.as_dict() for f in checks.run_checks(data, doc)]
    return doc


def method() -> dict:
    """The rules the numbers follow, stated with the document."""
    return {
        "headline": f"per-call median when median - empty region >= {HEADLINE_MIN_STEPS} x "
                    "max(counter step, empty region), else the batched estimate unless it "
                    "disagrees with the median less the empty region (then the median)",
        "headline_min_steps": HEADLINE_MIN_STEPS,
        "min_reps_for_test": stats.min_reps_for_test(),
        "replication_unit": "repetition (one isob process)",
        "value": "geometric mean of the repetitions' values",
        "interval": "Student t on the logs of the repetitions' values "
                    f"(>= {stats.MIN_REPS_FOR_INTERVAL} repetitions); with one, the "
                    "process's own order-statistic interval of its median",
        "ratio_interval": "Welch t on the log ratio over repetitions",
        "test": "Mann-Whitney U on the repetitions' values, exact without ties; "
                f"no p below {stats.min_reps_for_test()} repetitions per side",
        "level": stats.CI_LEVEL,
        "quantized": "an order-statistic interval spanning at most one counter step is "
                     "shown as median +- step and flagged quantized",
        "averages": "geometric means of ratios within one population "
                    f"({', '.join(runs.POPULATION_PARAMS)}), over "
                    f"{', '.join(runs.SWEEP_PARAMS)} only",
    }


def config_by_key(doc: Mapping) -> dict[tuple, dict]:
    return {tuple(c["key"]): c for c in doc["configs"]}
