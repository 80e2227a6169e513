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

    region = median - empty region          (per repetition; the empty
                                             region is the run's: the median
                                             over its processes of their means)
    long   = region >= HEADLINE_MIN_STEPS * max(counter step, empty region)
    long in a strict majority of repetitions -> the per-call median
    no batched estimate                      -> the per-call median
    batched agrees with the median in a
      strict majority of repetitions         -> the batched estimate
    otherwise                                -> the median, and the configuration
                                                carries `batched-unreliable`

"Agrees" means the batched estimate's interval (the order-statistic
interval of the median of its (K, 2K) pairs) reaches into the range from
half the median's interval less the empty region's p95 up to the larger of
the median's interval and the per-call mean, each end widened by one
counter step (see BATCHED_MIN_FRACTION for why).  The counts the rule
decided on are stored with the headline (`rule`), so one disagreeing
process of five cannot flip it unseen.

The unit of replication is the repetition (a fresh isob process): each
repetition gives one value by the rule above, a configuration's headline
is their geometric mean, and its interval is Student's t over their logs,
widened by their resolution (the counter step for a median, step / K for
a batched estimate), which is systematic and not divided by n.  With one
repetition, the interval is that process's own order-statistic interval,
and says so; a ratio then has no interval.  Repetitions that fall into
separate groups (stats.modes) get no interval: the headline lists the
groups (`modes`) and its value is the largest group's.  A ratio uses the
numerator's estimator on both sides (the baseline's repetitions keep
their medians and batched estimates for this).

Document history ("summary_version"):

    1  first version; measurement.quick and measurement.n (the --quick and
       --n values the run's processes measured with) added within it;
       headline.rule, modes, relative_resolution, batched_disagreements,
       outside_spread, ratio.source, base_value, resolution and quantized
       added within it (keys are only ever added).
"""

from __future__ import annotations

import json
from typing import Mapping, Sequence

from .. import __version__
from . import checks, sections
from .kit import averages, cpu, reference, runs, tails, units
from .families import lwcserve
from ..core import stats
from ..core.records import NO_MECHANISM, REFERENCES
from .kit.ratios import BATCHED, HEADLINE_MIN_STEPS, MEDIAN, majority, ratio_of, resolution_of
from .kit.runs import Config, RunData

SUMMARY_VERSION = 1


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


def _batched_interval(pairs: Sequence[float], resolution: float = 0.0) -> stats.Interval | None:
    xs = sorted(pairs)
    iv = stats.median_interval(xs)
    if iv is None and xs:
        # Too few pairs for a 95% interval: their range, at the coverage it has.
        iv = stats.Interval(xs[0], xs[-1], 1.0 - 2.0 * 0.5 ** len(xs),
                            "range of the batched pairs", len(xs))
    if iv is not None and resolution > 0 and iv.high - iv.low <= resolution:
        # As median_interval does for a step: pairs that all read the same
        # quantized value are known to +-step/K, not exactly.
        med = stats.percentile_sorted(xs, 0.5)
        iv = stats.Interval(med - resolution, med + resolution, iv.level, iv.method, iv.n,
                            quantized=True)
    return iv


def batch_size(r: Mapping) -> int | None:
    """K, the calls per batch of r's batched estimate, as its process recorded it."""
    k = (r.get("header") or {}).get("batch_k")
    return int(k) if isinstance(k, (int, float)) and k >= 1 else None


def empty_regions(results: Sequence[Mapping]) -> dict[tuple, float]:
    """The empty region of a run, per (counter, unit): the median over its
    processes of each one's mean empty region.  The median of one process's
    empty region is quantized (26, 52 or 78 ticks on a counter that steps by
    26) and would move the long-region threshold by a factor from one
    process to the next; the mean over many readings does not."""
    seen: dict[tuple, list[float]] = {}
    for r in results:
        h = r.get("header") or {}
        er = h.get("empty_region") if isinstance(h.get("empty_region"), Mapping) else {}
        v = er.get("mean", er.get("median", r.get("empty_region")))
        if isinstance(v, (int, float)):
            seen.setdefault((r.get("counter"), r.get("unit")), []).append(float(v))
    return {k: stats.median(v) for k, v in seen.items()}


def repetition(cfg: Config, r: Mapping, run_empty: float | None = None) -> dict:
    """Everything about one repetition (one isob process) of cfg.  run_empty:
    the run's empty region (empty_regions) for the long-region rule; without
    it, this process's own."""
    h = r.get("header") or {}
    step = float(h.get("counter_step") or 0)
    empty, empty_p5, empty_p95 = _empty(r)
    xs = cfg.rep_samples.get(r["result_id"], ())  # a sorted array (runs.group)
    have = len(xs) > 0
    med = stats.percentile_sorted(xs, 0.5) if have else r.get("median")
    mi = stats.median_interval(xs, step) if have else None
    pairs = list(r.get("batched_reps") or ())
    batched = r.get("batched")
    k = batch_size(r)
    # (t(2K) - t(K)) / K: two readings one step apart move it by step / K.
    batched_resolution = (step / k if k else step) if batched is not None else None
    bi = _batched_interval(pairs, batched_resolution or 0.0) if pairs else None
    sorted_pairs = sorted(pairs)
    rule_empty = empty if run_empty is None else run_empty
    region = None if med is None else med - rule_empty
    threshold = HEADLINE_MIN_STEPS * max(step, rule_empty)
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
        "p5": stats.percentile_sorted(xs, 0.05) if have else None,
        "p95": stats.percentile_sorted(xs, 0.95) if have else None,
        "batched": batched, "batched_pairs": len(pairs),
        "batched_interval": bi.as_dict() if bi else None,
        "batched_p5": stats.percentile_sorted(sorted_pairs, 0.05) if pairs else None,
        "batched_p95": stats.percentile_sorted(sorted_pairs, 0.95) if pairs else None,
        "batch_k": k, "batched_resolution": batched_resolution,
        "counter_step": step, "empty_region": {"median": empty, "p5": empty_p5, "p95": empty_p95},
        "rule_empty_region": rule_empty,
        "region": region, "long_threshold": threshold,
        "long": region is not None and region >= threshold and region > 0,
        "batched_agrees": agree, "dropped": r.get("dropped") or 0,
        "outputs": {k: v for k, v in (r.get("params") or {}).items()
                    if k in runs.OUTPUT_PARAMS},
    }


# ---- the headline of a configuration ----

def _rule(reps: Sequence[dict]) -> dict:
    """The counts the headline rule decides on: each by a strict majority of
    the repetitions, so that one process of five cannot flip it."""
    n = len(reps)
    regions = sorted(r["region"] for r in reps if r["region"] is not None)
    return {
        "reps": n, "long_reps": sum(1 for r in reps if r["long"]),
        "long_threshold": stats.median([r["long_threshold"] for r in reps]) if reps else None,
        "empty_region": stats.median([r["rule_empty_region"] for r in reps]) if reps else None,
        "region": stats.percentile_sorted(regions, 0.5) if regions else None,
        "batched_reps": sum(1 for r in reps if r["batched"] is not None),
        "batched_agree": sum(1 for r in reps if r["batched_agrees"] is True),
        "batched_disagree": sum(1 for r in reps if r["batched_agrees"] is False),
    }


def _choose(reps: Sequence[dict], unit: str | None) -> tuple[str, str, bool]:
    """(source, why, batched-unreliable) by the headline rule: long when a
    strict majority of the repetitions are long; the batched estimate when
    every repetition has one and a strict majority of them agree with their
    median.  batched-unreliable: the disagreement changed the headline."""
    rule = _rule(reps)
    n, u = rule["reps"], unit or ""
    if n and majority(rule["long_reps"], n):
        return MEDIAN, (f"long region: median - empty region = {rule['region']:,.0f} {u} >= "
                        f"{HEADLINE_MIN_STEPS} x max(counter step, empty region) = "
                        f"{rule['long_threshold']:,.0f} in {rule['long_reps']} of {n} "
                        "repetitions"), False
    if not n or rule["batched_reps"] < n:
        return MEDIAN, ("short region without a batched estimate: the median, which "
                        "includes the reading cost"), False
    if not majority(rule["batched_agree"], n):
        return MEDIAN, (f"short region, but the batched estimate disagrees with the median "
                        f"less the empty region beyond their spreads in "
                        f"{rule['batched_disagree']} of {n} repetitions (batched-unreliable): "
                        "the median, which includes the reading cost"), True
    why = "short region: the batched estimate, in which the reading cost cancels"
    if rule["batched_disagree"]:
        why += (f" (it disagrees with the median in {rule['batched_disagree']} of {n} "
                "repetitions: a minority, so the rule stands)")
    return BATCHED, why, False


def _within(rep: dict, source: str) -> stats.Interval | None:
    d = rep["median_interval"] if source == MEDIAN else rep["batched_interval"]
    return stats.Interval(**d) if d else None


def _spread(rep: dict, source: str) -> tuple[float, float] | None:
    lo, hi = (rep["p5"], rep["p95"]) if source == MEDIAN else (rep["batched_p5"],
                                                                 rep["batched_p95"])
    return None if lo is None or hi is None else (lo, hi)


def number(v: float) -> str:
    """A value for a sentence: 127,582 or 0.624 (four significant digits)."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def _modes_text(groups: Sequence[stats.Mode], reps: Sequence[dict], unit: str | None) -> str:
    parts = []
    for m in groups:
        which = ", ".join(str(reps[i]["repetition"]) for i in m.members)
        span = (number(m.value) if m.low == m.high else
                f"{number(m.value)} ({number(m.low)}..{number(m.high)})")
        parts.append(f"{m.count} at {span} {unit or ''} (rep {which})".replace("  ", " "))
    return "; ".join(parts)


def headline(cfg: Config, reps: Sequence[dict]) -> dict:
    """The headline of cfg: source, value, interval, ns, flags."""
    source, why, unreliable = _choose(reps, cfg.unit)
    rule = _rule(reps)
    used = [r for r in reps if (r[source] if source == MEDIAN else r["batched"]) is not None]
    values = [r[source] for r in used]
    resolution = resolution_of(used, source)
    note = None
    interval = None
    groups: list[stats.Mode] = []
    if not values:
        value = None
    elif all(v > 0 for v in values):
        groups = stats.modes(values, [_spread(r, source) for r in used])
        if len(groups) > 1:
            main = stats.main_mode(groups)
            value = main.value
            note = (f"the repetitions fall into {len(groups)} groups "
                    f"({_modes_text(groups, used, cfg.unit)}): no single interval; the value "
                    f"is the geometric mean of the {'largest' if main.count > 1 else 'first'} "
                    "group; repeat (`--repeat`) until the groups are understood")
        else:
            groups = []
            value = stats.geomean(values)
            if len(values) >= stats.MIN_REPS_FOR_INTERVAL:
                interval = stats.geomean_interval(values, resolution)
            else:
                interval = _within(used[0], source)
                note = ("one repetition: the interval is that process's own (order statistics); "
                        "nothing is known about the next process: repeat (`--repeat`)")
    else:
        value = stats.median(values)
        note = "a repetition's value is not positive: no geometric mean and no interval"
    long = bool(rule["reps"]) and majority(rule["long_reps"], rule["reps"])
    relative = resolution / value if value and value > 0 and resolution else 0.0
    # A value less than HEADLINE_MIN_STEPS of its resolution is known only
    # coarsely (a short median on a stepping counter, a batched estimate of
    # a few steps / K); a long region's median is at least that many steps.
    quantized = relative * HEADLINE_MIN_STEPS > 1.0 or (source == MEDIAN and not long and any(
        (r["median_interval"] or {}).get("quantized") for r in used))
    # The same test within the processes: a median headline outside the
    # p5..p95 of its own samples stands for none of them.
    d = cfg.description
    outside = (source == MEDIAN and value is not None and d.p5 is not None
               and not d.p5 <= value <= d.p95)
    f = cfg.ns_factor()
    return {
        "value": value, "source": source, "why": why, "unit": cfg.unit,
        "values": values, "resolution": resolution, "relative_resolution": relative,
        "reps": len(values),
        "interval": interval.as_dict() if interval else None,
        "between": "repetitions" if len(values) >= stats.MIN_REPS_FOR_INTERVAL and interval else
                   ("one process" if interval else None),
        "note": note, "ns": units.to_ns(value, cfg.unit, cfg.tsc_hz),
        "interval_ns": (units.scale([interval.low, interval.high], f)
                        if interval and f is not None else None),
        "quantized": quantized, "batched_unreliable": unreliable,
        "batched_disagreements": rule["batched_disagree"] if rule["batched_reps"] else 0,
        "rule": rule,
        "modes": [{**m.as_dict(), "repetitions": [used[i]["repetition"] for i in m.members]}
                  for m in groups] or None,
        "outside_spread": ({"value": value, "p5": d.p5, "p95": d.p95} if outside else None),
    }


def _role(cfg: Config) -> str:
    if runs.is_baseline(cfg):
        return "baseline"
    if runs.is_reference(cfg):
        return "reference"
    if cfg.mechanism == runs.BASELINE:
        return "direct-variant"
    if cfg.mechanism == NO_MECHANISM:
        return "primitive"
    return "mechanism"


def _headline_phase(cfg: Config) -> bool:
    """Whether cfg is the phase that stands for its benchmark (kv: get)."""
    want = runs.HEADLINE_PHASE.get(cfg.benchmark)
    return want is None or cfg.params.get("variant") == want


def configuration(cfg: Config, run_empty: float | None = None) -> dict:
    """cfg's entry of the summary document.  run_empty: the run's empty
    region for cfg's counter (empty_regions); without it, cfg's own."""
    if run_empty is None:
        run_empty = empty_regions(cfg.results).get((cfg.counter, cfg.unit))
    reps = [repetition(cfg, r, run_empty) for r in cfg.results]
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
    # p99 only where every repetition timed enough requests to carry it
    # (tails.py); else the table gives the maximum, `max (n=...)`.
    events = [int(o["latency_events"]) for o in outs
              if isinstance(o.get("latency_events"), (int, float))]
    out["latency_events_min"] = min(events) if events else None
    out["latency_p99_enough"] = bool(events) and all(tails.enough(n, 0.99) for n in events)
    out["latency_max_ns"] = mid("latency_max_ns")
    # The headline: the server's CPU per request, per repetition, and the
    # ratio to memcached's under the same load (analysis/kit/cpu.py).
    per = lambda key, es: [o.get(key) for o in es]
    # The clock's step only where part of the server's time was counted in
    # ticks; the client's (memcaslap's rusage once reaped) is kept in us.
    step = cpu.resolution(per("ops", outs), ticked=[cpu.counted_in_ticks(o) for o in outs])
    out["server_cpu"] = cpu.per_request(per("server_cpu_us_per_req", outs), step)
    out["client_cpu"] = cpu.per_request(per("client_cpu_us_per_req", outs))
    out["client_costs_more"] = cpu.higher_side(per("client_cpu_us_per_req", outs),
                                               per("server_cpu_us_per_req", outs)) == "client"
    busy = lambda key: [o[key] for o in outs if isinstance(o.get(key), (int, float))]
    out["saturated"] = lwcserve.saturation(
        stats.mean(busy("client_busy")) if busy("client_busy") else None,
        stats.mean(busy("server_busy")) if busy("server_busy") else None)
    out["server_cpu_vs_reference"] = None
    if ref is not None:
        ref_outs = [r["outputs"] for r in ref["repetitions"]]
        out["server_cpu_vs_reference"] = cpu.ratio(per("server_cpu_us_per_req", outs),
                                                   per("server_cpu_us_per_req", ref_outs),
                                                   step, cpu.resolution(
                                                       per("ops", ref_outs),
                                                       ticked=[cpu.counted_in_ticks(o)
                                                               for o in ref_outs]))
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
    data sizes): never over placements, payloads or phases.  Each has its 95%
    interval over repetitions (averages.average_ratio), and the mechanisms of
    one population are averaged over the sizes they all share, so that their
    averages compare; n says how many.  A mechanism with more sizes of its
    own also has the average over all of them (`own`)."""
    by_key = {tuple(c["key"]): c for c in configs}
    pops: dict[tuple, dict[tuple, list[averages.Row]]] = {}
    for c in configs:
        if c["ratio"] is None or not c["headline_phase"]:
            continue
        base = by_key.get(tuple(c["ratio"]["to_key"]))
        if base is None:
            continue
        p = c["params"]
        pop = runs.population(c["benchmark"], p)
        # Params that are neither the population nor a sweep (a mechanism's
        # own, such as wasm's checks) make another column, never a row.
        extra = tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in p.items()
                             if k not in runs.POPULATION_PARAMS and k not in runs.SWEEP_PARAMS))
        sweep = tuple((k, p[k]) for k in runs.SWEEP_PARAMS if k in p)
        pops.setdefault(pop, {}).setdefault((c["mechanism"], extra), []).append(
            averages.Row.of_ratio(sweep, c["ratio"]))
    out = []
    for (bench, *pop), columns in pops.items():
        population = {k: v for k, v in zip(runs.POPULATION_PARAMS, pop) if v is not None}
        over = sorted({k for rows in columns.values() for r in rows for k, _ in r.key})
        common = averages.shared(columns, min_rows=2)
        # The name shows the extra params that tell columns apart, not those
        # every column has alike (kv's key and value sizes).
        alike = set.intersection(*(set(extra) for _, extra in columns))
        for (mech, extra), rows in columns.items():
            agg = common.averages.get((mech, extra))
            own = common.own.get((mech, extra))
            if agg is None and own is None:
                continue  # an average of one number is that number
            on_shared = agg is not None
            agg = agg or own
            name = " ".join([bench, mech, *(f"{k}={json.loads(v)}" for k, v in extra
                                           if (k, v) not in alike),
                             *(f"{k}={v}" for k, v in population.items())])
            out.append({"name": f"{name}: ratio to direct over {', '.join(over) or 'configs'}",
                        "benchmark": bench, "mechanism": mech, "population": population,
                        "params": {k: json.loads(v) for k, v in extra},
                        "over": over, **agg,
                        "rows": [dict(k) for k in agg["rows"]],
                        # Whether n counts the rows every column of the population
                        # shares (comparable with their averages) or only its own.
                        "shared": on_shared,
                        "own": ({**own, "rows": [dict(k) for k in own["rows"]]}
                                if own is not None and on_shared else None),
                        "left_out": [dict(r.key) for r in rows
                                     if r.key not in agg["rows"]]})
    return out


# ---- published figures ----

# An output named for its unit (handshake_seconds, latency_p50_us) is in
# that unit, not its configuration's: (suffix, unit, ns per unit).
QUANTITY_UNITS = (("_seconds", "s", 1e9), ("_us", "us", 1e3), ("_ns", "ns", 1.0))


def published(data: RunData, by_key: Mapping[tuple, dict]) -> list[dict]:
    out = []
    for ref in reference.load():
        local = []
        for c in reference.matches(ref, data.configs):
            e = by_key[tuple(c.key)]
            h = e["headline"]
            value, ns, source, unit = h["value"], h["ns"], h["source"], c.unit
            if ref.local_quantity:
                value = _output_median(e, ref.local_quantity)
                ns = None if value is None or e.get("to_ns") is None else value * e["to_ns"]
                named = [(u, f) for suffix, u, f in QUANTITY_UNITS
                         if ref.local_quantity.endswith(suffix)]
                if named:
                    unit = named[0][0]
                    ns = None if value is None else value * named[0][1]
                source = f"median of {ref.local_quantity} over repetitions"
            local.append({"label": e["label"], "mechanism": c.mechanism, "params": c.params,
                          "placement": c.placement, "value": value, "unit": unit,
                          "ns": ns, "source": source, "quantity": ref.local_quantity or None})
        out.append({**ref.as_dict(), "text": ref.text(), "local": local})
    return out


def _output_median(e: Mapping, path: str) -> float | None:
    """The median over a configuration's repetitions of the output at path
    ("work.switch_per_hop"), or None where no repetition has it."""
    vals = []
    for r in e["repetitions"]:
        v = r.get("outputs") or {}
        for part in path.split("."):
            v = v.get(part) if isinstance(v, Mapping) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            vals.append(float(v))
    return stats.median(sorted(vals)) if vals else None


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
    empties = empty_regions(data.results)
    entries = [configuration(c, empties.get((c.counter, c.unit))) for c in data.configs]
    by_key = {tuple(e["key"]): e for e in entries}
    for c, e in zip(data.configs, entries):
        base = data.baseline_of(c)
        if base is not None:
            e["ratio"] = ratio_of(e, by_key[tuple(base.key)])
    refs = {e["benchmark"]: e for e in entries if e["role"] == "reference"}
    for e in entries:
        if e["benchmark"] in REFERENCES:
            # The reference program (kv-server's memcached): no ratio of it
            # to itself (an interval around 1 would read as a measured
            # difference).
            ref = refs.get(e["benchmark"])
            e["kv_server"] = _kv_server(e, None if ref is e else ref)
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
                    "max(counter step, empty region) in most repetitions (the run's empty "
                    "region), else the batched estimate unless it disagrees with the median "
                    "less the empty region in most repetitions (then the median)",
        "headline_min_steps": HEADLINE_MIN_STEPS,
        "min_reps_for_test": stats.MIN_REPS_FOR_VERDICT,
        "replication_unit": "repetition (one isob process)",
        "value": "geometric mean of the repetitions' values",
        "interval": "Student t on the logs of the repetitions' values "
                    f"(>= {stats.MIN_REPS_FOR_INTERVAL} repetitions); with one, the "
                    "process's own order-statistic interval of its median",
        "ratio_interval": "Welch t on the log ratio over repetitions, the same estimator "
                          "on both sides, widened by both resolutions",
        "resolution": "counter step (median) or step / K (batched): a systematic error, "
                      "(step / x)^2 / 12 on the log scale, not divided by the repetitions",
        "modes": "repetitions in separate groups (a factor of 10, or of 1.5 beyond each "
                 "process's own p5..p95): the groups, and no interval",
        "test": "Welch t on the log ratio of ratios over repetitions (compare), Holm's "
                f"correction over its rows; no verdict below {stats.MIN_REPS_FOR_VERDICT} "
                "repetitions per side",
        "level": stats.CI_LEVEL,
        "quantized": "a headline less than 20 resolution steps is flagged quantized; an "
                     "order-statistic interval spanning at most one step is shown as "
                     "median +- step",
        "averages": "geometric means of ratios within one population "
                    f"({', '.join(runs.POPULATION_PARAMS)}), over "
                    f"{', '.join(runs.SWEEP_PARAMS)} only",
    }


def config_by_key(doc: Mapping) -> dict[tuple, dict]:
    return {tuple(c["key"]): c for c in doc["configs"]}
