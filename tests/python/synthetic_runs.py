"""Synthetic stored runs for the family sections: results of known value,
built in the export format (`isobench export --format json`) and loaded into
a fresh store with fixture_runs.load_doc, so that each section is computed
from a real summary document whose every number is known in advance.

Samples are in ns (counter `clock`, step 1, an empty region of 1 ns), so a
headline is the median of the samples given, and a repetition's samples
scatter a little around the value asked for."""

from __future__ import annotations

from typing import Iterable, Mapping

from isobench.analysis import summary

from fixture_runs import load_doc

HEADER = {"counter": "clock", "unit": "ns", "counter_why": "synthetic", "tsc_hz": None,
          "tsc_hz_source": None, "counter_step": 1,
          "empty_region": {"median": 1, "mean": 1.0, "min": 1, "p5": 1, "p95": 1, "n": 100}}

ENVIRONMENT = {"cpu_model": "synthetic CPU", "kernel": "6.1.0", "hypervisor": None,
               "counter": "clock", "unit": "ns", "tsc_hz": None, "nproc": 2,
               "mechanism_props": {"direct": [], "process-futex": ["isolates_memory",
                                                                    "separate_as", "two_contexts"]}}


def samples_around(value: float, n: int = 21, spread: float = 0.001) -> list[int]:
    """n integer samples whose median is round(value), spread symmetrically."""
    mid = n // 2
    return sorted(max(1, round(value * (1 + spread * (i - mid) / max(mid, 1)))) for i in range(n))


def result(benchmark: str, mechanism: str, params: Mapping, value: float | None = None,
           rep: int = 1, samples: Iterable[int] | None = None, status: str = "ok",
           reason: str | None = None) -> dict:
    """One stored result; its samples are `samples`, or centred on value."""
    r = {"benchmark": benchmark, "mechanism": mechanism, "params": dict(params), "unit": "ns",
         "counter": "clock", "status": status, "reason": reason, "dropped": 0, "warmup": 0,
         "batched": None, "batched_reps": [], "empty_region": 1.0, "repetition": rep,
         "header": dict(HEADER)}
    if status == "ok":
        r["samples"] = {"primary": list(samples) if samples is not None
                        else samples_around(value)}
    return r


def run_doc(results: list[dict], repeat: int = 3, about: str = "synthetic") -> dict:
    return {"_about": about, "export_version": 2, "started": "2024-05-01T10:00:00+00:00",
            "finished": "2024-05-01T10:05:00+00:00", "argv": ["isobench", "run"],
            "status": "ok", "environment": dict(ENVIRONMENT),
            "options": {"repeat": repeat, "seed": 1}, "aggregates": [], "results": results}


def summary_of(tmp_path, results: list[dict], repeat: int = 3) -> dict:
    """The summary document of a synthetic run stored in a fresh store."""
    return summary.build(load_doc(tmp_path, run_doc(results, repeat)))


def rep_factor(rep: int) -> float:
    """A small, known difference between repetitions (so intervals are narrow
    but not empty)."""
    return 1.0 + 0.002 * (rep - 2)
