"""Exports of a stored run: CSV (one row per result, summaries) and JSON
(the whole run: environment, results, headers and raw samples).

JSON export format history (the "export_version" key):

    1  first version.
    2  each result has "repetition" (1..N of `run --repeat N`); the run has
       "options" (repeat, seed, job order) and "aggregates" (null when none
       were recorded).  A version 2 document can be loaded into a store with
       Store.import_run.  Added since, optional for a reader: each result's
       "batched_reps" (every (K, 2K) pair's estimate; null when not kept).
"""

from __future__ import annotations

import csv
import io
import json

from .store import Store

EXPORT_VERSION = 2
FORMATS = ("csv", "json")

CSV_COLUMNS = ("run_id", "result_id", "benchmark", "mechanism", "placement", "payload",
               "variant", "params", "unit", "counter", "status", "reason", "n", "min", "max",
               "median", "p5", "p95", "mad", "mean", "batched", "empty_region", "dropped",
               "warmup", "repetition")


def export_csv(store: Store, run_id: int) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in store.results(run_id):
        p = r["params"]
        w.writerow({**r, "run_id": run_id, "params": json.dumps(p, sort_keys=True),
                    "placement": p.get("placement", ""), "payload": p.get("payload", ""),
                    "variant": p.get("variant", "")})
    return buf.getvalue()


def export_json(store: Store, run_id: int, samples: bool = True) -> str:
    doc = {"export_version": EXPORT_VERSION, "db": str(store.path), **store.run(run_id)}
    results = store.results(run_id)
    if samples:
        for r in results:
            r["samples"] = {k: list(v) for k, v in store.samples(r["result_id"]).items()}
    doc["results"] = results
    return json.dumps(doc, indent=1, sort_keys=False) + "\n"


def export(store: Store, run_id: int, fmt: str, samples: bool = True) -> str:
    if fmt == "csv":
        return export_csv(store, run_id)
    return export_json(store, run_id, samples=samples)
