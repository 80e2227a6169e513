"""What a stored run means: its results grouped into configurations, with
their statistics, their baseline and their overhead.

Reports, `check` and `compare` all read runs through this module, so that
each number (a median's interval, a ratio to `direct`, an average of
ratios) is computed by one rule everywhere.  docs/methodology.md states the
rules; the code below is their only implementation.

A configuration is what was measured: benchmark, mechanism and the
parameters that select the measurement (placement, payload, variant, data
size, ...).  Its repetitions (`run --repeat N`, one fresh isob process each)
are pooled for the within-statistics, and their medians give the spread
between repetitions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping, Sequence

from . import stats
from .records import NO_MECHANISM, PRIMARY_EVENT
from .store import Store

BASELINE = "direct"

# Results that are not isob under a mechanism but an outside program run
# beside it as the point of comparison (kv-server runs real memcached next
# to `isob serve`).  They are measured in the same run and the same way, but
# have no `direct` baseline: they are a baseline of their own, and the
# kv-server table gives every server's ratio to them.
REFERENCES: dict[str, str] = {"kv-server": "memcached"}

# Counters that are an outside client's wall-clock view (kv-server's
# throughput and latencies as memcaslap reports them).  A PMU would not
# change them, so the "no-pmu" check does not count them.
CLIENT_COUNTERS = frozenset({"memcaslap"})

MICRO, MACRO, UNKNOWN_KIND = "micro", "macro", "unknown"
# Microbenchmarks isolate one cost (a switch, an OS primitive); macrobenchmarks
# run a workload with its data inside the compartment.  A paper needs both:
# a switch cost alone says little about what an application pays.
BENCHMARK_KINDS = {"switch": MICRO, "pingpong": MICRO, "oslat": MICRO, "delegate": MICRO,
                   "sched": MICRO, "kv": MACRO, "kv-server": MACRO}

# Result params that report what happened rather than select what was
# measured (the kv benchmark prints its own mean, request counts, store
# sizes, ...).  They are left out when results are grouped and matched, so
# that repetitions and runs of different length line up.  A benchmark that
# adds such an output param should add it here; if it is missing, the only
# harm is that its repetitions are not pooled.
OUTPUT_PARAMS = frozenset({
    "mean", "requests", "verified", "pmu_reason", "sample_stride", "iterations",
    "iterations_asked", "entries", "store_bytes", "heap_bytes", "store_ratio", "heap_ratio",
    "throughput", "ops_per_s", "ops_per_sec", "requests_per_s", "elapsed_s", "errors",
    # kv-server (kvserver.py): what memcaslap reported, and labels of it.
    "ops", "get_misses", "latency_source", "samples", "latency_events", "latency_min_ns",
    "latency_avg_ns", "latency_max_ns", "latency_std_ns", "latency_p50_lo_ns",
    "latency_p50_hi_ns", "latency_p95_lo_ns", "latency_p95_hi_ns", "latency_p99_lo_ns",
    "latency_p99_hi_ns",
    # oslat: the confinement's evidence and what each primitive did and checked.
    "work", "confine_evidence", "confine_events", "confine_threat", "budget_ms",
    # pingpong, delegate, sched (docs/microkernel.md): the protection's evidence,
    # percentiles and the delta against none computed in the same run.
    "protect_evidence", "protect_threat", "spread", "delta_vs_none",
})

# How a result finds its baseline among the `direct` results of the same run
# and benchmark: direct's params must all equal the result's, except
# placement (a plain call has no second context, so direct runs same-cpu
# only and is the baseline of both placements) and except what is fixed
# here (the switch benchmark's baseline is direct's "entry" variant, the
# same call through the entry table every mechanism uses).  Params only the
# mechanism has (wasm's "checks") are not looked at.
BASELINE_IGNORED = frozenset({"placement"})
BASELINE_FIXED: dict[str, dict[str, Any]] = {"switch": {"variant": "entry"}}

# Units that carry no absolute value (a result stored as a ratio or a
# percentage); the "relative-only" check looks for them.
RELATIVE_UNITS = frozenset({"ratio", "relative", "%", "percent", "x", "normalized"})


def kind(benchmark: str) -> str:
    return BENCHMARK_KINDS.get(benchmark, UNKNOWN_KIND)


def identity(params: Mapping) -> dict:
    """The params that say what was measured (see OUTPUT_PARAMS)."""
    return {k: v for k, v in params.items() if k not in OUTPUT_PARAMS}


def config_key(benchmark: str, mechanism: str, params: Mapping) -> tuple[str, str, str]:
    return benchmark, mechanism, json.dumps(identity(params), sort_keys=True)


def to_ns(value: float | None, unit: str | None, tsc_hz: float | None) -> float | None:
    """value in nanoseconds where the unit allows it (core cycles never do)."""
    if value is None:
        return None
    if unit == "ns":
        return float(value)
    if unit == "tsc_ticks" and tsc_hz:
        return value * 1e9 / tsc_hz
    return None


@dataclass
class Config:
    """One measured configuration and its repetitions (ok results only)."""

    benchmark: str
    mechanism: str
    params: dict
    unit: str | None
    counter: str | None
    results: list[dict] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)
    events: dict[str, list[int]] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return config_key(self.benchmark, self.mechanism, self.params)

    @property
    def kind(self) -> str:
        return kind(self.benchmark)

    @property
    def placement(self) -> str | None:
        return self.params.get("placement")

    @property
    def header(self) -> Mapping:
        return next((r["header"] for r in self.results if r.get("header")), None) or {}

    @property
    def tsc_hz(self) -> float | None:
        return self.header.get("tsc_hz")

    @property
    def label(self) -> str:
        parts = [f"{k}={v}" for k, v in sorted(self.params.items())]
        return " ".join([self.benchmark, self.mechanism, *parts])

    @property
    def dropped(self) -> int:
        return sum(r.get("dropped") or 0 for r in self.results)

    @property
    def repetitions(self) -> int:
        return len(self.results)

    @property
    def rep_medians(self) -> list[float]:
        return [r["median"] for r in self.results if r.get("median") is not None]

    @property
    def between_cv(self) -> float | None:
        return stats.between_cv(self.rep_medians)

    @property
    def batched(self) -> float | None:
        values = [r["batched"] for r in self.results if r.get("batched") is not None]
        return stats.median(values) if values else None

    @cached_property
    def sorted_samples(self) -> list[int]:
        return sorted(self.samples)

    @cached_property
    def quick(self) -> stats.Description:
        """The description without the bootstrap interval (for checks and tables)."""
        return self.describe(ci=False)

    def describe(self, ci: bool = True, seed: int | None = None) -> stats.Description:
        if not self.samples:
            return _described_from_summary(self.results)
        return stats.describe(self.sorted_samples, ci=ci, seed=seed, key=self.key)

    def ns(self, value: float | None) -> float | None:
        return to_ns(value, self.unit, self.tsc_hz)


def _described_from_summary(results: Sequence[dict]) -> stats.Description:
    """A description from stored summaries alone (a result imported without samples)."""
    r = results[0] if results else {}
    med, mad = r.get("median"), r.get("mad")
    return stats.Description(
        n=r.get("n") or 0, min=r.get("min"), max=r.get("max"), median=med, p5=r.get("p5"),
        p95=r.get("p95"), p99=None, mad=mad, mean=r.get("mean"), stdev=None, cv=None,
        robust_cv=stats.robust_cv(med, mad), outliers=None, ci=None)


@dataclass
class Overhead:
    """A configuration against its baseline: ratio = x / baseline, overhead = ratio - 1."""

    config: Config
    baseline: Config
    ratio: float
    ci: stats.Interval

    @property
    def overhead(self) -> float:
        return self.ratio - 1.0


@dataclass
class RunData:
    """A stored run, loaded for analysis."""

    run: dict
    db: str
    results: list[dict]
    configs: list[Config]
    seed: int = stats.BOOTSTRAP_SEED

    @property
    def run_id(self) -> int:
        return self.run["run_id"]

    @property
    def env(self) -> dict:
        return self.run.get("environment") or {}

    @property
    def stored_aggregates(self) -> list[dict]:
        return list(self.run.get("aggregates") or [])

    def by_key(self) -> dict[tuple[str, str, str], Config]:
        return {c.key: c for c in self.configs}

    def baseline_of(self, cfg: Config) -> Config | None:
        return find_baseline(cfg, self.configs)

    def overhead_of(self, cfg: Config) -> Overhead | None:
        base = self.baseline_of(cfg)
        if base is None or not base.samples or not cfg.samples or not base.quick.median:
            return None
        r = stats.ratio(cfg.quick.median, base.quick.median)
        ci = stats.ratio_of_medians_ci(base.sorted_samples, cfg.sorted_samples, self.seed,
                                       key=("overhead", cfg.key))
        return Overhead(cfg, base, r, ci)

    def tsc_hz(self) -> float | None:
        return self.env.get("tsc_hz") or next((c.tsc_hz for c in self.configs if c.tsc_hz), None)


def is_baseline(cfg: Config) -> bool:
    """Whether cfg is what other results are normalized to (direct's entry variant
    for switch; direct for every other benchmark)."""
    return cfg.mechanism == BASELINE and all(
        cfg.params.get(k) == v for k, v in BASELINE_FIXED.get(cfg.benchmark, {}).items())


def is_reference(cfg: Config) -> bool:
    """Whether cfg is an outside reference program (see REFERENCES), not a mechanism."""
    return REFERENCES.get(cfg.benchmark) == cfg.mechanism


def needs_baseline(cfg: Config) -> bool:
    """Whether cfg is compared with a `direct` baseline: not direct itself, not a
    mechanism-less primitive (pingpong), not an outside reference program."""
    return cfg.mechanism not in (BASELINE, NO_MECHANISM) and not is_reference(cfg)


def find_baseline(cfg: Config, configs: Sequence[Config]) -> Config | None:
    """cfg's `direct` baseline among configs (see BASELINE_IGNORED/BASELINE_FIXED)."""
    if not needs_baseline(cfg):
        return None
    want = {k: v for k, v in cfg.params.items() if k not in BASELINE_IGNORED}
    want.update(BASELINE_FIXED.get(cfg.benchmark, {}))
    found = [c for c in configs
             if c.benchmark == cfg.benchmark and c.mechanism == BASELINE and c.unit == cfg.unit
             and all(want.get(k, _MISSING) == v for k, v in c.params.items()
                     if k not in BASELINE_IGNORED)]
    same_place = [c for c in found if c.placement == cfg.placement]
    return (same_place or found or [None])[0]


_MISSING = object()


def group(results: Sequence[dict], samples: Mapping[int, Mapping[str, Sequence[int]]]) -> list[Config]:
    """The ok results grouped into configurations, in the order first seen."""
    configs: dict[tuple, Config] = {}
    for r in sorted(results, key=lambda r: (r.get("repetition") or 1, r["result_id"])):
        if r["status"] != "ok":
            continue
        key = (config_key(r["benchmark"], r["mechanism"], r["params"]), r.get("unit"))
        cfg = configs.get(key)
        if cfg is None:
            cfg = configs[key] = Config(r["benchmark"], r["mechanism"], identity(r["params"]),
                                        r.get("unit"), r.get("counter"))
        cfg.results.append(r)
        ev = samples.get(r["result_id"], {})
        cfg.samples.extend(ev.get(PRIMARY_EVENT, ()))
        for name, values in ev.items():
            if name != PRIMARY_EVENT:
                cfg.events.setdefault(name, []).extend(values)
    return list(configs.values())


def load_run(store: Store, run_id: int, seed: int | None = None) -> RunData:
    run = store.run(run_id)
    results = store.results(run_id)
    samples = {r["result_id"]: store.samples(r["result_id"]) for r in results
               if r["status"] == "ok"}
    return RunData(run, str(store.path), results, group(results, samples),
                   stats.BOOTSTRAP_SEED if seed is None else seed)


def aggregates(data: RunData) -> list[dict]:
    """Geometric means of the ratios to `direct`, per benchmark, mechanism and
    placement (placements are never averaged together: on a VM they differ
    by orders of magnitude)."""
    groups: dict[tuple, list[float]] = {}
    for cfg in data.configs:
        base = data.baseline_of(cfg)
        if base is None or not base.quick.median or cfg.quick.median is None:
            continue
        key = (cfg.benchmark, cfg.mechanism, cfg.placement)
        groups.setdefault(key, []).append(stats.ratio(cfg.quick.median, base.quick.median))
    out = []
    for (bench, mech, placement), ratios in groups.items():
        agg = stats.aggregate_ratios(ratios)
        out.append({"name": f"{bench} {mech} {placement or ''}".strip() + ": ratio to direct",
                    "benchmark": bench, "mechanism": mech, "placement": placement, **agg})
    return out
