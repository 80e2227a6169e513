"""Exports of a stored run: CSV (one row per result, summaries) and JSON
(the whole run: environment, jobs, results, headers and raw samples).

Both carry the interchange schema_version (interchange.py keeps its
history): the JSON document as its first key, the CSV as its first column.
A JSON export is read back by `isobench import`.
"""

from __future__ import annotations

import csv
import io
import json

from .interchange import SCHEMA_VERSION, export_document
from . import Store

FORMATS = ("csv", "json")

CSV_COLUMNS = ("schema_version", "run_id", "result_id", "benchmark", "mechanism", "placement",
               "payload", "variant", "params", "unit", "counter", "status", "reason", "n", "min",
               "max", "median", "p5", "p95", "mad", "mean", "batched", "empty_region", "dropped",
               "warmup", "repetition", "started", "finished")


def export_csv(store: Store, run_id: int) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in store.results(run_id):
        p = r["params"]
        w.writerow({**r, "schema_version": SCHEMA_VERSION, "run_id": run_id,
                    "params": json.dumps(p, sort_keys=True),
                    "placement": p.get("placement", ""), "payload": p.get("payload", ""),
                    "variant": p.get("variant", "")})
    return buf.getvalue()


def export_json(store: Store, run_id: int, samples: bool = True) -> str:
    return json.dumps(export_document(store, run_id, samples), indent=1) + "\n"


def export(store: Store, run_id: int, fmt: str, samples: bool = True) -> str:
    if fmt == "csv":
        return export_csv(store, run_id)
    return export_json(store, run_id, samples=samples)
