"""What a stored run means: its results grouped into configurations, with
their statistics, their baseline and their overhead.

This module loads a run and groups it; summary.py turns it into the one
summary document every command renders.  docs/methodology.md states the
rules; the code here and in summary.py is their only implementation.

A configuration is what was measured: benchmark, mechanism and the
parameters that select the measurement (placement, payload, variant, data
size, ...).  Its repetitions (`run --repeat N`, one fresh isob process each)
are the unit of replication: summary.py computes one value per repetition
and every interval and test over them.  The pooled samples only describe
the spread.
"""

from __future__ import annotations

import array
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping, Sequence

import numpy as np

from . import units
from ...core import benchmarks, stats
from ...core.records import NO_MECHANISM, PRIMARY_EVENT, REFERENCES
from ...store import Store

BASELINE = "direct"

# Counters that are an outside client's wall-clock view (kv-server's
# throughput and latencies as memcaslap reports them).  A PMU would not
# change them, so the "no-pmu" check does not count them.
CLIENT_COUNTERS = frozenset({"memcaslap", "loadgen"})

MICRO, MACRO, UNKNOWN_KIND = benchmarks.MICRO, benchmarks.MACRO, "unknown"
# Microbenchmarks isolate one cost (a switch, an OS primitive); macrobenchmarks
# run a workload with its data inside the compartment.  A paper needs both:
# a switch cost alone says little about what an application pays.  Each
# benchmark's record (core/benchmarks.py) says which it is.
BENCHMARK_KINDS = {b.name: b.kind for b in benchmarks.RECORDS}

# Result params that report what happened rather than select what was
# measured (the kv benchmark prints its own mean, request counts, store
# sizes, ...).  They are left out when results are grouped and matched, so
# that repetitions and runs of different length line up.  A benchmark that
# adds such an output param adds it to its record's output_params; if it is
# missing, the only harm is that its repetitions are not pooled.
OUTPUT_PARAMS = benchmarks.output_params()

# Params that describe a configuration at length rather than name it (the
# kvm mechanism's guest and its nested-virtualization caveat): they stay in
# its identity, but a label leaves them out and a table says them once in a
# note (render.table.caveat_notes), so that a row reads "kvm nested=True".
NOTE_PARAMS = frozenset({"caveat", "guest"})

# How a result finds its baseline among the `direct` results of the same run
# and benchmark: direct's params must all equal the result's, except
# placement (a plain call has no second context, so direct runs same-cpu
# only and is the baseline of both placements) and except what is fixed
# here (the switch benchmark's baseline is direct's "entry" variant, the
# same call through the entry table every mechanism uses).  Params only the
# mechanism has (wasm's "checks") are not looked at.
BASELINE_IGNORED = frozenset({"placement"})
BASELINE_FIXED: dict[str, Mapping[str, Any]] = {
    b.name: b.baseline_fixed for b in benchmarks.RECORDS if b.baseline_fixed}
# ...except ERIM's call kinds of switch (a gate around an empty function
# inlined, called directly or through a pointer: mpk's): their baseline is
# direct's same kind, the plain call (analysis/families/callkinds.py subtracts it).
BASELINE_OWN_VARIANT: dict[str, frozenset[str]] = {
    b.name: b.baseline_own_variant for b in benchmarks.RECORDS if b.baseline_own_variant}

# The params that make two numbers different populations: a number is
# averaged or compared only with numbers that agree in all of them (and in
# the benchmark).  Placements differ by orders of magnitude on a VM,
# payloads change what crosses the boundary, and a phase (kv's set, warm-up
# and get) is a different workload.
POPULATION_PARAMS = ("placement", "payload", "variant", "primitive")

# The phase that stands for a benchmark where it has several: kv's headline
# is the time per get; its set and warm-up phases are stored and shown
# apart, never averaged with it.
HEADLINE_PHASE: dict[str, str] = {
    b.name: b.headline_phase for b in benchmarks.RECORDS if b.headline_phase}

# Params that sweep one workload over a range (kv's data size): an average
# of ratios may run over them, since every point is the same population.
SWEEP_PARAMS = ("data_bytes",)


def kind(benchmark: str) -> str:
    return BENCHMARK_KINDS.get(benchmark, UNKNOWN_KIND)


def identity(params: Mapping) -> dict:
    """The params that say what was measured (see OUTPUT_PARAMS)."""
    return {k: v for k, v in params.items() if k not in OUTPUT_PARAMS}


def config_key(benchmark: str, mechanism: str, params: Mapping) -> tuple[str, str, str]:
    return benchmark, mechanism, json.dumps(identity(params), sort_keys=True)


def population(benchmark: str, params: Mapping) -> tuple:
    """What a number may be averaged or compared within: the benchmark and
    its POPULATION_PARAMS.  Numbers with different placements, payloads or
    phases are never pooled."""
    return (benchmark, *(params.get(k) for k in POPULATION_PARAMS))


@dataclass
class Config:
    """One measured configuration and its repetitions (ok results only).

    results holds one stored result per repetition (fresh isob process);
    rep_samples the primary samples of each, by result id, as sorted int64
    arrays.  samples pools them, for descriptions of the spread only:
    intervals and tests take the repetitions as their unit (summary.py)."""

    benchmark: str
    mechanism: str
    params: dict
    unit: str | None
    counter: str | None
    results: list[dict] = field(default_factory=list)
    rep_samples: dict[int, np.ndarray] = field(default_factory=dict)
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
        parts = [f"{k}={v}" for k, v in sorted(self.params.items()) if k not in NOTE_PARAMS]
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

    @cached_property
    def samples(self) -> np.ndarray:
        """The repetitions' primary samples pooled, sorted."""
        parts = list(self.rep_samples.values())
        if not parts:
            return np.empty(0, dtype=np.int64)
        pooled = np.concatenate(parts)
        # Sorted runs, one per repetition: a merge sort ("stable", numpy's
        # timsort) joins them in near-linear time.
        pooled.sort(kind="stable")
        return pooled

    @property
    def sorted_samples(self) -> np.ndarray:
        return self.samples

    @cached_property
    def description(self) -> stats.Description:
        """The spread of the pooled per-call samples (descriptive only)."""
        if not len(self.samples):
            return _described_from_summary(self.results)
        return stats.describe_sorted(self.sorted_samples)

    def ns_factor(self) -> float | None:
        return units.ns_factor(self.unit, self.tsc_hz)


def _described_from_summary(results: Sequence[dict]) -> stats.Description:
    """A description from stored summaries alone (a result imported without samples)."""
    r = results[0] if results else {}
    med, mad = r.get("median"), r.get("mad")
    return stats.Description(
        n=r.get("n") or 0, min=r.get("min"), max=r.get("max"), median=med, p5=r.get("p5"),
        p95=r.get("p95"), p99=None, mad=mad, mean=r.get("mean"), stdev=None, cv=None,
        robust_cv=stats.robust_cv(med, mad), outliers=None)


@dataclass
class RunData:
    """A stored run, loaded for analysis."""

    run: dict
    db: str
    results: list[dict]
    configs: list[Config]
    jobs: list[dict] = field(default_factory=list)  # store.jobs(): order, times, load
    # What of the store could not be read and is left out (Store.skipped, or
    # with load_run(scan=True) every damaged part of the store).
    damage: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> int:
        return self.run["run_id"]

    @property
    def env(self) -> dict:
        return self.run.get("environment") or {}

    def by_key(self) -> dict[tuple[str, str, str], Config]:
        return {c.key: c for c in self.configs}

    def baseline_of(self, cfg: Config) -> Config | None:
        # Only `direct` configurations can be a baseline: searching them
        # alone finds the same one, without a pass over every configuration.
        return find_baseline(cfg, self._directs)

    @cached_property
    def _directs(self) -> list[Config]:
        return [c for c in self.configs if c.mechanism == BASELINE]

    def tsc_hz(self) -> float | None:
        return self.env.get("tsc_hz") or next((c.tsc_hz for c in self.configs if c.tsc_hz), None)


def server_label(mechanism: str) -> str:
    """How a kv-server configuration's server is named in tables and plots:
    the reference program by its name, isob serve by its mechanism."""
    return mechanism if REFERENCES.get("kv-server") == mechanism else f"isob+{mechanism}"


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
    if cfg.params.get("variant") not in BASELINE_OWN_VARIANT.get(cfg.benchmark, ()):
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
        # Sorted once here, as an array (no Python integer per sample): the
        # repetition's order statistics need it sorted.
        cfg.rep_samples[r["result_id"]] = np.sort(_int64(ev.get(PRIMARY_EVENT, ())))
        for name, values in ev.items():
            if name != PRIMARY_EVENT:
                cfg.events.setdefault(name, []).extend(values)
    return list(configs.values())


def _int64(values: Sequence[int]) -> np.ndarray:
    """Samples as an int64 array; the store's unsigned 64-bit buffers are
    read in place (a counter's samples stay below 2**63)."""
    if isinstance(values, (memoryview, array.array)) and (
            getattr(values, "format", None) or values.typecode) == "Q":
        return np.frombuffer(values, dtype=np.int64)
    return np.asarray(values, dtype=np.int64)


def load_run(store: Store, run_id: int, scan: bool = False) -> RunData:
    """A run with its results and samples; a result whose row or samples are
    damaged is left out and reported (Store.skip).  With scan, damage names
    every damaged part of the store (Store.scan: what `isobench check` reports).

    The samples are read in one query (Store.run_samples_intact); only where
    that meets damage are they read result by result, so that the damaged
    ones alone are left out."""
    run = store.run(run_id)
    samples, damaged = store.run_samples_intact(run_id, status="ok")
    results = [r for r in store.results(run_id) if r["result_id"] not in damaged]
    jobs = store.jobs(run_id)
    damage = list(dict.fromkeys(store.skipped + (store.scan() if scan else [])))
    return RunData(run, str(store.path), results, group(results, samples), jobs, damage)
