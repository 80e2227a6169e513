"""Synthetic repetitions of known truth, fed through the project's own
headline rule (summary.repetition and summary.headline), to measure how
often the headline's 95% interval covers the truth, how often the `modes`
test fires, and whether any interval has zero width.

Kinds (each repetition is one simulated isob process with its own samples):

    normal       repetition values normal around the truth, CV 5% between
                 processes; samples within a process normal, CV 5%
    lognormal    repetition values lognormal, sigma 0.10 on the log scale
    lognormal-wide  sigma 0.30 between processes, samples within one 2%
                 apart: processes that never overlap, one population (the
                 hardest case for the modes test: its false alarms)
    two-mode     each process falls into a second regime 1/100 of the first
                 (a server that stays awake) with probability 0.3
    two-mode-2x  the same at a factor of 2 (a short region read one way or
                 the other), processes 2% apart within a mode
    q-median     a short region on a counter that steps by 26 ticks (a KVM
                 guest's TSC) with no batched estimate: the headline is the
                 median of samples that take two or three values
    q-batched    a body of 0.4..1.0 ticks timed K = 250 calls at a time on
                 the same counter: every batched pair is a multiple of 26/250

The truth of the quantized kinds is drawn uniformly within a range wider
than a step, so its position between two steps is random, as it is on a
real machine.  Coverage for the two-mode kinds is not defined (no single
value is the truth); what counts there is that the `modes` finding fires
when both regimes are present.

scripts/coverage-table.py prints the table of docs/methodology.md from
this module; tests/python/test_coverage.py asserts bands around it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from isobench.analysis import summary
from isobench.analysis.kit.runs import Config

KINDS = ("normal", "lognormal", "lognormal-wide", "two-mode", "two-mode-2x", "q-median",
         "q-batched")
STEP = 26.0          # TSC step of the KVM guests the project measures on
EMPTY = 46.3         # their empty region, in ticks (mean)
BATCH_K = 250
BATCH_PAIRS = 15


def _header(step: float, empty: float) -> dict:
    return {"counter": "tsc", "unit": "tsc_ticks", "tsc_hz": 2.6e9, "counter_step": step,
            "batch_k": BATCH_K,
            "empty_region": {"median": STEP * round(empty / STEP), "mean": empty,
                             "p5": STEP * math.floor(empty / STEP),
                             "p95": STEP * math.ceil(empty / STEP), "n": 1000}}


def _read(t: float, step: float, rng: random.Random) -> float:
    """A duration t read as the difference of two readings of a counter that
    advances in steps, at a random phase: a multiple of step, t on average."""
    phase = rng.random() * step
    return step * math.floor((t + phase) / step)


@dataclass
class Trial:
    truth: float | None       # None: no single value (two modes)
    both_modes: bool          # the set holds repetitions of two regimes
    headline: dict


def _config(results: list[dict], samples: dict[int, list[float]]) -> Config:
    cfg = Config("switch", "sim", {"placement": "same-cpu"}, "tsc_ticks", "tsc")
    cfg.results = results
    cfg.rep_samples = samples
    cfg.samples = [x for xs in samples.values() for x in xs]
    return cfg


def _result(rid: int, rep: int, xs: list[float], step: float, batched=None, pairs=()) -> dict:
    return {"result_id": rid, "repetition": rep, "header": _header(step, EMPTY),
            "counter": "tsc", "unit": "tsc_ticks", "mean": sum(xs) / len(xs),
            "batched": batched, "batched_reps": list(pairs), "empty_region": EMPTY,
            "params": {}}


def trial(kind: str, n: int, rng: random.Random, samples: int = 41) -> Trial:
    results, per = [], {}
    truth: float | None = None
    modes = set()
    if kind in ("normal", "lognormal", "lognormal-wide", "two-mode", "two-mode-2x"):
        base = 5000.0  # a long region: the median is the headline
        truth = base * (math.exp(-0.05 ** 2 / 2) if kind == "normal" else 1.0)
        for rep in range(1, n + 1):
            if kind == "normal":
                v = base * (1 + rng.gauss(0, 0.05))
            elif kind == "lognormal":
                v = base * math.exp(rng.gauss(0, 0.10))
            elif kind == "lognormal-wide":
                v = base * math.exp(rng.gauss(0, 0.30))
            else:
                factor = 100.0 if kind == "two-mode" else 2.0
                other = rng.random() < 0.3
                modes.add(other)
                v = base * math.exp(rng.gauss(0, 0.02)) / (factor if other else 1.0)
            within = 0.02 if kind == "lognormal-wide" else 0.05
            xs = sorted(round(v * (1 + rng.gauss(0, within))) for _ in range(samples))
            results.append(_result(rep, rep, xs, 2.0))
            per[rep] = xs
    elif kind == "q-median":
        truth = rng.uniform(70.0, 110.0)  # ticks per call, readings included
        for rep in range(1, n + 1):
            v = truth * (1 + rng.gauss(0, 0.005))
            xs = sorted(_read(v + rng.gauss(0, 2.0), STEP, rng) for _ in range(samples))
            results.append(_result(rep, rep, xs, STEP))
            per[rep] = xs
    elif kind == "q-batched":
        truth = rng.uniform(0.4, 1.0)  # ticks per call of the body alone
        for rep in range(1, n + 1):
            b = truth * (1 + rng.gauss(0, 0.005))
            pairs = sorted((_read(2 * BATCH_K * b + rng.gauss(0, 2.0), STEP, rng)
                            - _read(BATCH_K * b + rng.gauss(0, 2.0), STEP, rng)) / BATCH_K
                           for _ in range(BATCH_PAIRS))
            xs = sorted(_read(EMPTY + b + rng.gauss(0, 2.0), STEP, rng) for _ in range(samples))
            results.append(_result(rep, rep, xs, STEP, pairs[len(pairs) // 2], pairs))
            per[rep] = xs
    else:
        raise ValueError(f"unknown kind {kind}")
    cfg = _config(results, per)
    run_empty = summary.empty_regions(results).get(("tsc", "tsc_ticks"))
    reps = [summary.repetition(cfg, r, run_empty) for r in results]
    return Trial(truth, len(modes) == 2, summary.headline(cfg, reps))


@dataclass
class Row:
    kind: str
    n: int
    trials: int
    covered: int          # intervals that hold the truth (single-valued kinds)
    with_interval: int    # headlines with an interval
    zero_width: int       # intervals with high <= low
    modes_fired: int      # headlines with a `modes` list
    both_modes: int       # sets that held both regimes (two-mode kinds)
    modes_on_both: int    # ... and were found
    source: str           # the headline source of the first trial

    @property
    def coverage(self) -> float | None:
        return self.covered / self.with_interval if self.with_interval else None

    @property
    def false_alarms(self) -> float | None:
        """The share of single-regime sets the modes test flagged."""
        single = self.trials - self.both_modes
        return (self.modes_fired - self.modes_on_both) / single if single else None

    @property
    def detected(self) -> float | None:
        return self.modes_on_both / self.both_modes if self.both_modes else None


def simulate(kind: str, n: int, trials: int, seed: int) -> Row:
    rng = random.Random(f"{seed}:{kind}:{n}")
    covered = with_iv = zero = fired = both = found = 0
    source = ""
    for i in range(trials):
        t = trial(kind, n, rng)
        h = t.headline
        source = source or h["source"]
        iv = h["interval"]
        if iv:
            with_iv += 1
            zero += iv["high"] <= iv["low"]
            if t.truth is not None:
                covered += iv["low"] <= t.truth <= iv["high"]
        fired += bool(h["modes"])
        both += t.both_modes
        found += bool(h["modes"]) and t.both_modes
    return Row(kind, n, trials, covered, with_iv, zero, fired, both, found, source)


def table(rows: list[Row]) -> str:
    """The Markdown table of docs/methodology.md."""
    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f}"
    out = ["| kind | n | headline | coverage of 95% interval | zero-width | "
           "`modes` false alarms | `modes` found (both regimes present) |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        cov = pct(r.coverage) if r.kind not in ("two-mode", "two-mode-2x") else "- (no truth)"
        found = f"{pct(r.detected)} of {r.both_modes}" if r.both_modes else "-"
        out.append(f"| {r.kind} | {r.n} | {r.source} | {cov} | {r.zero_width} | "
                   f"{pct(r.false_alarms)} | {found} |")
    return "\n".join(out)
