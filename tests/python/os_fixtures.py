"""Synthetic stored runs of oslat, pingpong, delegate and sched, with known
values: each result's samples are one number repeated (times a small
per-repetition factor), so every headline, ratio and average the sections
compute is known in advance.  They load like fixtures/*_run.json
(fixture_runs.load_doc)."""

from __future__ import annotations

import copy

from fixture_runs import fixture

# Repetition k's samples are value * REP_FACTORS[k]: their geometric mean is
# value * GEO (used to state expected headlines), and a ratio of two cells
# with the same factors is exactly the ratio of their values.
REP_FACTORS = (0.99, 1.0, 1.01)

HEADER = {"counter": "clock", "unit": "ns", "counter_why": "fixture: CLOCK_MONOTONIC_RAW",
          "tsc_hz": None, "tsc_hz_source": None,
          "empty_region": {"median": 10, "mean": 10.0, "min": 10, "p5": 10, "p95": 10, "n": 20},
          "counter_step": 1}

# oslat cells: (table, family, primitive, cell, none's value in ns).
OSLAT_CELLS = (
    ("IV", "ctx", "ctx", "2p/0K", 4000.0),
    ("IV", "ctx", "ctx", "2p/0K overhead", 1000.0),
    ("IV", "ctx", "ctx", "8p/16K", 9000.0),
    ("V", "fs", "file", "0K create", 20000.0),
    ("V", "fs", "mmap", "64M", 800000.0),
    ("V", "fs", "mmap", "4K", 5000.0),
    ("V", "fs", "select-file", "100 fds", 1000.0),
    ("VI", "ipc", "pipe", "1B", 3000.0),
    ("VI", "ipc", "udp", "4B", 6000.0),
    ("III", "proc", "null-syscall", "getppid", 100.0),
    ("III", "proc", "fork-exit", "fork+exit", 200000.0),
    ("III", "proc", "vdso-clock", "clock_gettime", 25.0),
)


def _doc(results: list[dict], argv: list[str]) -> dict:
    doc = fixture("clean_run")
    doc["argv"] = argv
    doc["results"] = results
    doc["aggregates"] = []
    doc["options"] = {"repeat": len(REP_FACTORS), "seed": 1}
    doc.pop("jobs", None)
    return doc


def result(bench: str, params: dict, value: float | None, rep: int, status: str = "ok",
           reason: str | None = None, n: int = 21) -> dict:
    samples = [round(value * REP_FACTORS[rep - 1])] * n if value is not None else []
    return {"benchmark": bench, "mechanism": "-", "params": copy.deepcopy(params),
            "unit": "ns", "counter": "clock", "status": status, "reason": reason, "dropped": 0,
            "warmup": 10, "batched": None, "empty_region": 10.0, "repetition": rep,
            "header": dict(HEADER), "samples": {"primary": samples} if samples else {}}


def oslat_run(factors: dict[tuple[str, str], float], cells=OSLAT_CELLS,
              per_cell: dict | None = None, skipped: dict | None = None) -> dict:
    """An oslat run: every cell under each (confine, variant) of factors, its
    value none's times the factor (per_cell[(column, primitive, cell)] overrides
    a factor); skipped[(confine, variant)] = reason skips that column."""
    results = []
    for rep in range(1, len(REP_FACTORS) + 1):
        for (conf, variant), factor in factors.items():
            for table, family, prim, cell, base in cells:
                params = {"family": family, "primitive": prim, "cell": cell, "table": table,
                          "placement": "same-cpu", "confine": conf, "confine_variant": variant,
                          "confine_threat": f"the threat model of {conf}",
                          "confine_evidence": {"seccomp": 0}, "confine_events": None,
                          "budget_ms": 100, "work": {"ops": 21}}
                if prim == "ctx" and not cell.endswith("overhead"):
                    params["work"]["switch_per_hop"] = base * factor - 1000.0
                f = (per_cell or {}).get((f"{conf}:{variant}", prim, cell), factor)
                results.append(result("oslat", params, base * f, rep))
        for (conf, variant), reason in (skipped or {}).items():
            params = {"family": "proc", "primitive": "null-syscall", "table": "III",
                      "placement": "same-cpu", "confine": conf, "confine_variant": variant}
            results.append(result("oslat", params, None, rep, "skipped", reason))
    return _doc(results, ["isobench", "run", "oslat"])


def pingpong_run() -> dict:
    """pingpong: futex and pipe, payload 0, none and seccomp (x1.5), same-cpu
    and cross-cpu (x10)."""
    results = []
    for rep in range(1, len(REP_FACTORS) + 1):
        for place, pf in (("same-cpu", 1.0), ("cross-cpu", 10.0)):
            for prim, base in (("futex", 2000.0), ("pipe", 3000.0)):
                for prot, f in (("none", 1.0), ("seccomp", 1.5)):
                    params = {"placement": place, "primitive": prim, "payload": 0,
                              "protect": prot,
                              "protect_confinement": "none" if prot == "none" else "seccomp-allow",
                              "protect_variant": "default" if prot == "none" else "300-args",
                              "spread": {"p5": 1, "p50": 2, "p95": 3},
                              "delta_vs_none": None,
                              "work": {"ops": 21, "echoed": 21, "full_checks": 21,
                                       "stamp_checks": 0, "bad_replies": 0, "virtualized": True}}
                    results.append(result("pingpong", params, base * pf * f, rep))
    return _doc(results, ["isobench", "run", "pingpong", "--protect", "none,seccomp"])


def delegate_run() -> dict:
    """delegate: threads and processes, 4 KiB, depth 1 and 4: hop, end to end,
    and for processes both revocations."""
    results = []
    for rep in range(1, len(REP_FACTORS) + 1):
        for variant, vf in (("threads", 1.0), ("processes", 3.0)):
            for depth in (1, 4):
                base = {"variant": variant, "region": 4096, "depth": depth,
                        "placement": "same-cpu", "isolation": f"isolation of {variant}"}
                results.append(result("delegate", {**base, "metric": "hop",
                                                   "work": {"checksums_verified": depth}},
                                      2000.0 * vf, rep))
                results.append(result("delegate", {**base, "metric": "end-to-end",
                                                   "work": {"checksums_verified": depth}},
                                      2000.0 * vf * depth, rep))
                if variant == "processes":
                    for how, fault in (("truncate", "SIGBUS"), ("unmap", "SIGSEGV")):
                        results.append(result("delegate", {
                            **base, "metric": "revoke", "revoke": how,
                            "work": {"holders_probed": depth, "holders_faulted": depth,
                                     "fault_expected": fault}}, 5000.0 * depth, rep))
    return _doc(results, ["isobench", "run", "delegate"])


def sched_run() -> dict:
    """sched: threads and processes, N 1 and 4, one CPU, yield: the makespan
    is ideal_ns times 1.0 (N=1) and 1.25 (N=4, processes 1.5)."""
    results = []
    for rep in range(1, len(REP_FACTORS) + 1):
        for kind, kf in (("threads", 1.25), ("processes", 1.5)):
            for n in (1, 4):
                ideal = 1_000_000.0 * n
                ratio = 1.0 if n == 1 else kf
                params = {"kind": kind, "workers": n, "slice_us": 10, "mode": "yield",
                          "cpus": "one",
                          "work": {"ideal_ns": ideal * REP_FACTORS[rep - 1],
                                   "slices_done": 100 * n, "slices_expected": 100 * n,
                                   "voluntary_switches": 0, "involuntary_switches": 10 * n,
                                   "ns_per_switch_median": 500.0, "cpus_used": 1,
                                   "overhead_pct_median": 100 * (ratio - 1)}}
                results.append(result("sched", params, ideal * ratio, rep))
    return _doc(results, ["isobench", "run", "sched"])
