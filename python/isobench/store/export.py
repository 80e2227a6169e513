"""Exports of a stored run: CSV (one row per result, summaries) and JSON
(the whole run: environment, jobs, results and headers; the raw samples
with --samples).

Both carry the interchange schema_version (interchange.py keeps its
history): the JSON document as its first key, the CSV as its first column.
A JSON export is read back by `isobench import`.

Both are written as a stream, the JSON one result a line after the run's
own members (indented), so that a run of millions of samples is written in
seconds, to a file compressed by its name's ending (.gz, .zst: see
interchange.open_for_writing) or to stdout.
"""

from __future__ import annotations

import csv
import io
import json
from typing import BinaryIO, Callable

import numpy as np

from .interchange import SCHEMA_VERSION, export_document
from . import Store
from ..core.records import RUN_COLUMNS, run_columns
from ..core.validate import csv_text

FORMATS = ("csv", "json")

CSV_COLUMNS = ("schema_version", "run_id", "result_id", "benchmark", "mechanism", "placement",
               "payload", "variant", "params", "unit", "counter", "status", "reason", "n", "min",
               "max", "median", "p5", "p95", "mad", "mean", "batched", "empty_region", "dropped",
               "warmup", "repetition", "started", "finished", *RUN_COLUMNS)

# (done, total) results written.
Progress = Callable[[int, int], None]


def _cell(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return csv_text(v)


def write_csv(store: Store, run_id: int, out: BinaryIO, progress: Progress | None = None) -> None:
    same = run_columns(store.run(run_id))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    results = store.results(run_id)
    for i, r in enumerate(results, 1):
        p = r["params"]
        row = {**r, "schema_version": SCHEMA_VERSION, "run_id": run_id,
               "params": json.dumps(p, sort_keys=True),
               "placement": p.get("placement", ""), "payload": p.get("payload", ""),
               "variant": p.get("variant", ""), **same}
        w.writerow({k: _cell(v) for k, v in row.items()})
        if progress is not None:
            progress(i, len(results))
    out.write(buf.getvalue().encode())


# Powers of ten below 2^64, for counts_json.
_POW10 = 10 ** np.arange(20, dtype=np.uint64)


def counts_json(values) -> bytes:
    """Unsigned 64-bit integers (a buffer of them) as a JSON array, digit by
    digit with numpy: several times faster than json.dumps of a list, for the
    millions of samples a run holds."""
    a = np.frombuffer(values, dtype=np.uint64) if not isinstance(values, np.ndarray) else values
    if a.size == 0:
        return b"[]"
    top = int(a.max())
    if top >= 10 ** 19:  # one more digit than _POW10 counts: rare, let json do it
        return json.dumps(a.tolist()).encode()
    width = len(str(top))
    v = a.astype(np.uint32 if top < 2 ** 32 else np.uint64)
    # One row per value: its digits right-aligned in width columns, then a comma.
    cells = np.empty((a.size, width + 1), dtype=np.uint8)
    cells[:, width] = ord(",")
    for col in range(width - 1, -1, -1):
        q = v // 10
        cells[:, col] = v - q * 10 + ord("0")
        v = q
    digits = np.ones(a.size, dtype=np.int8)
    for k in range(1, width):
        digits += a >= _POW10[k]
    keep = np.arange(width + 1)[None, :] >= (width - digits)[:, None]
    return b"[" + cells[keep].tobytes()[:-1] + b"]"


def write_json(store: Store, run_id: int, out: BinaryIO, samples: bool = False,
               progress: Progress | None = None) -> None:
    """The document of interchange.export_document, written as it is made:
    the run's members indented, then its results one a line."""
    doc = export_document(store, run_id, samples=False)
    results = doc.pop("results")
    every, damaged = store.run_samples_intact(run_id) if samples else (None, set())
    results = [r for r in results if r["result_id"] not in damaged]
    head = json.dumps(doc, indent=1)
    # head ends with "\n}": the results go before that brace.
    out.write((head[:-2] + ',\n "results": [').encode())
    for i, r in enumerate(results):
        out.write(b",\n" if i else b"\n")
        text = json.dumps(r, separators=(",", ":")).encode()
        if every is None:
            out.write(text)
        else:
            events = every.pop(r["result_id"], {})
            out.write(text[:-1] + b',"samples":{')
            for j, (event, values) in enumerate(events.items()):
                out.write((b"," if j else b"") + json.dumps(event).encode() + b":")
                out.write(counts_json(values))
            out.write(b"}}")
        if progress is not None:
            progress(i + 1, len(results))
    out.write(b"\n ]\n}\n")


def write(store: Store, run_id: int, fmt: str, out: BinaryIO, samples: bool = False,
          progress: Progress | None = None) -> None:
    if fmt == "csv":
        write_csv(store, run_id, out, progress)
    else:
        write_json(store, run_id, out, samples=samples, progress=progress)


def export(store: Store, run_id: int, fmt: str, samples: bool = False) -> str:
    """The export as text (write() to a stream is what the CLI uses)."""
    buf = io.BytesIO()
    write(store, run_id, fmt, buf, samples=samples)
    return buf.getvalue().decode()
