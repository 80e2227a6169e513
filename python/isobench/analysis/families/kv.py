"""The kv section: time per get of direct and every mechanism's ratio to it,
per data size, as a paper's table holds them (render/paper.py's kv.tex and
the kv overhead plot read it).

Each ratio carries what a reader needs not to misread it:

    interval      its 95% interval over repetitions (ratios.ratio_of)
    reading       "slower" or "faster" only where the interval excludes 1;
                  "no difference shown" where it includes 1 (a ratio of 0.6
                  whose interval holds 1 is not faster than direct); "no
                  interval" below two repetitions a side
    quantized     both values are medians read on a counter that advances in
                  steps (the headlines' `quantized` flag), or either is fewer
                  than STEPS_FEW steps: the ratio is then a ratio of step
                  counts (5 steps / 4 steps = 1.25), and
    resolution    how far one counter step on each side moves the ratio,
                  ratio * (step_x / x + step_b / b), relative and absolute

The averages are summary.aggregates' (geometric means of the ratios over
the sizes every mechanism of the placement shares, with their intervals).

Every row says how its gets were timed (params "reading", `isob kv
--reading`): per-request, two counter readings around every get, or
per-pass, two around a whole pass of gets divided by its gets (Konrad
2023, section 3.3: counters read once per iteration), so that the reading's
own cost is shared out among the gets as in his figures.  A run stored
before the option existed timed per request.
"""

from __future__ import annotations

import json
from typing import Mapping

from ..kit import averages, runs
from ..kit.runs import RunData

BENCHMARK = "kv"

# Below this many counter steps a value is a count of a few steps: its ratio
# to another such value moves by a large fraction with one step.  It is the
# headline rule's threshold for a region the median measures well
# (ratios.HEADLINE_MIN_STEPS).
STEPS_FEW = 20

SLOWER, FASTER, SAME, NONE = "slower", "faster", "no difference shown", "no interval"

# How the gets were timed (isob kv --reading), in the words the section uses.
PER_REQUEST, PER_PASS = "per-request", "per-pass"
READINGS = {
    PER_REQUEST: "two counter readings around every get; the time per get includes one "
                 "reading's cost (the empty region)",
    PER_PASS: "two counter readings around a whole pass of gets, divided by the gets of the "
              "pass (Konrad 2023, section 3.3), so one reading's cost is shared out among "
              "them; the pass includes the front end's own work per get (the key, the check "
              "of the reply)",
}


def reading_of(params: Mapping) -> str:
    """A kv result's reading; per-request where it has none (stored before
    --reading existed, when every get was timed on its own)."""
    return str(params.get("reading") or PER_REQUEST)


def _steps(h: Mapping) -> float | None:
    res = h.get("resolution") or 0.0
    return h["value"] / res if res > 0 and h.get("value") else None


def ratio_cell(x: Mapping, base: Mapping) -> dict | None:
    """The ratio record of x (a kv configuration with a ratio) to its
    baseline, with its reading and its quantization."""
    r = x.get("ratio")
    if r is None:
        return None
    hx, hb = x["headline"], base["headline"]
    one = averages.includes_one(r.get("interval"))
    reading = NONE if one is None else SAME if one else (SLOWER if r["value"] > 1 else FASTER)
    sx, sb = _steps(hx), _steps(hb)
    few = any(s is not None and s < STEPS_FEW for s in (sx, sb))
    quantized = bool(hx.get("quantized") or hb.get("quantized") or few)
    rel = sum(1.0 / s for s in (sx, sb) if s) if quantized else 0.0
    return {"value": r["value"], "interval": r.get("interval"), "note": r.get("note"),
            "includes_one": one, "reading": reading, "quantized": quantized,
            "steps": [sx, sb], "few_steps": few,
            "resolution_rel": rel, "resolution": rel * r["value"]}


def _extra(params: Mapping) -> dict:
    """The params of a configuration besides its population and data size."""
    return {k: v for k, v in sorted(params.items())
            if k not in runs.POPULATION_PARAMS and k not in runs.SWEEP_PARAMS}


def _json(d: Mapping) -> str:
    return json.dumps(d, sort_keys=True)


def build(data: RunData, doc: Mapping) -> dict | None:
    configs = [c for c in doc["configs"] if c["benchmark"] == BENCHMARK and c["headline_phase"]
               and isinstance(c["params"].get("data_bytes"), int)
               and c["headline"]["value"] is not None]
    if not configs:
        return None
    by_key = {tuple(c["key"]): c for c in doc["configs"]}
    sizes = sorted({c["params"]["data_bytes"] for c in configs})
    rows: dict[tuple[str, str, str], dict] = {}
    for c in configs:
        place = c["params"].get("placement") or "same-cpu"
        extra = _extra(c["params"])
        row = rows.setdefault((c["mechanism"], place, _json(extra)), {
            "mechanism": c["mechanism"], "placement": place, "params": extra,
            "reading": reading_of(c["params"]), "role": c["role"], "cells": {}})
        h = c["headline"]
        cell = {"value": h["value"], "unit": c["unit"], "ns": h.get("ns"),
                "interval": h.get("interval"), "interval_ns": h.get("interval_ns"),
                "quantized": bool(h.get("quantized")), "resolution": h.get("resolution"),
                "reps": h["reps"], "ratio": None}
        base = by_key.get(tuple(c["ratio"]["to_key"])) if c.get("ratio") else None
        if base is not None:
            cell["ratio"] = ratio_cell(c, base)
        row["cells"][str(c["params"]["data_bytes"])] = cell
    aggs = {(a["mechanism"], a["population"].get("placement"), _json(a.get("params") or {})): a
            for a in doc["aggregates"] if a["benchmark"] == BENCHMARK}
    # A row's label names the params that tell it from the others (wasm's
    # checks), not those every row has alike (the key and value sizes).
    first = next(iter(rows.values()))["params"]
    alike = {k for k, v in first.items() if all(r["params"].get(k) == v for r in rows.values())}
    shared: dict[str, list[int]] = {}
    for key, row in rows.items():
        a = aggs.get(key)
        row["label"] = " ".join([row["mechanism"], *(f"{k}={v}" for k, v in row["params"].items()
                                                     if k not in alike
                                                     and k not in runs.NOTE_PARAMS)])
        row["average"] = a
        if a is not None and a.get("shared"):
            shared[place] = [r["data_bytes"] for r in a["rows"]]
    ratios = [cell["ratio"] for row in rows.values() for cell in row["cells"].values()
              if cell["ratio"]]
    steps = sorted({(c["resolution"], c["unit"]) for row in rows.values()
                    for c in row["cells"].values() if c["resolution"]})
    present = list(dict.fromkeys(r["reading"] for r in rows.values()))
    return {"sizes": sizes, "rows": list(rows.values()), "shared_sizes": shared,
            "readings": {k: READINGS.get(k, k) for k in present},
            "counter_steps": [list(x) for x in steps],
            "any_quantized": any(r["quantized"] for r in ratios),
            "largest_resolution_rel": max((r["resolution_rel"] for r in ratios), default=0.0),
            "any_includes_one": any(r["includes_one"] for r in ratios),
            "baseline": runs.BASELINE}
