"""Versioned interchange: what isobench writes for other programs, and reads back.

Every JSON document isobench prints (`--json` of every command) and every
export carries ``schema_version``: one number for the whole interface, so a
reader knows what it holds.  Its history:

    1  `export --format json` only, as "export_version": 1.
    2  "export_version": 2: results have "repetition"; the run has "options"
       and "aggregates".
    3  "schema_version" in every --json output and every export (CSV: a
       first column); exports say "format": "isobench-run-export".  Runs
       have "uid" (the same run in two stores has the same uid), "end_reason"
       and "origin" (where an imported run came from); exports have "jobs"
       (order, start and end, load of the machine, see load.py); results
       have "job_id", "started" and "finished" (ISO 8601, UTC), and
       "batched_reps" (every (K, 2K) pair's estimate behind "batched"; null
       for results measured before they were kept).  `run --json` and
       `show --json` carry the run's summary document as "summary".
       Added since, readers ignoring it: each run of `runs --json` has
       "damaged" (null, or what of the run's own row cannot be read); an
       import from a damaged store records what it left out in the run's
       origin as "left_out".

`isobench import FILE` reads an export of version 1 to 3, or another store,
and refuses anything else with one line.  Everything in a document is
checked before any of it is stored (validate_run): a damaged or foreign
file never leaves half a run behind.  Benchmark, mechanism, parameter,
event and unit names are held to the form isob gives them
(core/validate.py: stored_name_problem, params_problem), so that a
name cannot turn into markup, a formula or a terminal sequence; free text
(host names, reasons, the command line) is stored as it is and escaped by
every output.  Reading another store that is damaged imports every intact
run and leaves out, naming each, what cannot be read.
"""

from __future__ import annotations

import array
import gzip
import json
import re
import shutil
import sqlite3
import stat
import tempfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Callable, Mapping

from ..errors import StoreError, UsageError
from ..core import validate
from ..core.records import PRIMARY_EVENT, STATUSES
from . import (ENVIRONMENT_KINDS, HEADER_KINDS, INT_MAX, INT_MIN, JOB_STATUSES,
               OPTION_KINDS, RUN_STATUSES, SCHEMA_VERSION as STORE_SCHEMA, Store,
               member_kind_problem, now)

SCHEMA_VERSION = 3
READABLE = (1, 2, 3)
EXPORT_FORMAT = "isobench-run-export"

# Where a file is an SQLite database.
SQLITE_MAGIC = b"SQLite format 3\x00"

_UID = re.compile(r"[0-9a-f]{32}")


def stamp(doc: Mapping) -> dict:
    """doc with schema_version first."""
    return {"schema_version": SCHEMA_VERSION, **{k: v for k, v in doc.items()
                                                  if k != "schema_version"}}


def export_document(store: Store, run_id: int, samples: bool = True) -> dict:
    """The whole run as `export --format json` writes it: the run, its jobs and
    its results, with every raw sample unless samples is False.  The store
    is named by its file name only: an export leaves the machine, the path
    of its store need not."""
    doc = stamp({"format": EXPORT_FORMAT, "db": store.path.name, **store.run(run_id)})
    doc["jobs"] = store.jobs(run_id)
    results = store.results(run_id)
    jobs = {j["job_id"] for j in doc["jobs"]}
    for r in results:
        if r.get("job_id") not in jobs:
            r["job_id"] = None  # its job is damaged and left out: the result stays
    if samples:
        # Read in one query and decompressed on several threads; where that
        # meets damage, result by result, leaving out only the damaged ones.
        every, damaged = store.run_samples_intact(run_id)
        results = [r for r in results if r["result_id"] not in damaged]
        for r in results:
            r["samples"] = {k: v.tolist() for k, v in every.get(r["result_id"], {}).items()}
    doc["results"] = results
    return doc


# ---- compressed files ----
# An export is compressed when its file name ends in .gz (gzip) or .zst
# (zstd, where this Python has a zstd module: compression.zstd from Python
# 3.14, or the zstandard package); an import recognizes either by its first
# bytes, whatever the name.

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# gzip's level for exports: 1 is several times faster than 9 on sample
# text, and its files are not much larger.
GZIP_LEVEL = 1
# How much of a file an import reads at a time (for its progress).
CHUNK = 4 << 20

Progress = Callable[[str, int, int], None]  # (stage, done, total)


def zstd_module():
    """This Python's zstd module, or None."""
    try:
        from compression import zstd  # type: ignore[import-not-found]  # Python 3.14
        return zstd
    except ImportError:
        pass
    try:
        import zstandard  # type: ignore[import-not-found]
        return zstandard
    except ImportError:
        return None


NO_ZSTD = ("this Python has no zstd module (Python 3.14 has compression.zstd; or `pip install "
           "zstandard`)")


def compression_of(name: str) -> str | None:
    """"gzip", "zstd" or None by a file name's ending; UsageError for .zst
    where this Python cannot write zstd."""
    if name.endswith(".gz"):
        return "gzip"
    if name.endswith(".zst"):
        if zstd_module() is None:
            raise UsageError(f"{name}: cannot write zstd, {NO_ZSTD}; name the file .gz or .json")
        return "zstd"
    return None


def open_for_writing(path: Path, name: str | None = None) -> BinaryIO:
    """A binary stream that writes path, compressed by the ending of name
    (default: path's own name)."""
    kind = compression_of(name or path.name)
    if kind == "gzip":
        return gzip.open(path, "wb", compresslevel=GZIP_LEVEL)
    if kind == "zstd":
        return zstd_module().open(path, "wb")
    return open(path, "wb")


def read_bytes(path: Path, progress: Progress | None = None) -> bytes:
    """The bytes of an export, decompressed where it is gzip or zstd (by its
    first bytes); UsageError when it cannot be read."""
    zstd = zstd_module()
    damaged = (OSError, EOFError, zlib.error, ValueError) + (
        (zstd.ZstdError,) if zstd is not None and hasattr(zstd, "ZstdError") else ())
    try:
        size = path.stat().st_size
        with open(path, "rb") as raw:
            head = raw.read(4)
            raw.seek(0)
            if head.startswith(GZIP_MAGIC):
                f = gzip.GzipFile(fileobj=raw, mode="rb")
            elif head == ZSTD_MAGIC:
                if zstd is None:
                    raise UsageError(f"{path} is zstd-compressed, and {NO_ZSTD}")
                f = zstd.open(raw, "rb")
            else:
                f = raw
            parts = []
            while True:
                chunk = f.read(CHUNK)
                if not chunk:
                    break
                parts.append(chunk)
                if progress is not None:
                    # How far into the file: the size decompressed is not
                    # known in advance.
                    progress("reading", min(raw.tell(), size), size)
            return b"".join(parts)
    except damaged as e:
        raise UsageError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None


# ---- reading documents ----

class Invalid(ValueError):
    """Where and why a document is not an isobench run export."""


def _need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise Invalid(f"{where}: {what}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and INT_MIN <= v <= INT_MAX


def _is_num(v: Any) -> bool:
    return (_is_int(v) or isinstance(v, float)) and v == v and v not in (float("inf"),
                                                                      float("-inf"))


def _counts(values: Any) -> array.array | None:
    """values as unsigned 64-bit integers, or None unless it is a list of
    integers from 0 to 2^64 - 1 (no bool, no float).  A run holds millions:
    the array's own conversion checks the range (OverflowError) and refuses
    what is not an integer (TypeError), and one pass over the types finds
    a bool, which it would take as 0 or 1."""
    if not isinstance(values, list):
        return None
    try:
        out = array.array("Q", values)
    except (OverflowError, TypeError):
        return None
    return out if not values or set(map(type, values)) == {int} else None


def _opt(v: Any, kind) -> bool:
    return v is None or isinstance(v, kind)


def _kinds(obj: dict, kinds: dict, where: str, what: str) -> None:
    why = member_kind_problem(obj, kinds)
    _need(why is None, where, f"{what}{why}")


def document_version(doc: Any, where: str) -> int:
    """The interchange version of an export; Invalid when it is none this reads."""
    _need(isinstance(doc, dict), where, "not a JSON object")
    version = doc.get("schema_version", doc.get("export_version"))
    if "schema_version" not in doc and "export_version" not in doc:
        raise Invalid(f"{where}: not an isobench export (no schema_version)")
    _need(_is_int(version), where, f"schema_version {version!r} is not a number")
    if version not in READABLE:
        newer = version > max(READABLE)
        raise Invalid(f"{where}: schema_version {version} is not one this isobench reads "
                      f"({min(READABLE)} to {max(READABLE)})"
                      + ("; upgrade isobench" if newer else ""))
    if version >= 3:
        _need(doc.get("format") == EXPORT_FORMAT, where,
              f"not a run export (format {doc.get('format')!r}; `isobench export RUN "
              "--format json` writes one)")
    return version


def validate_run(doc: Any, where: str) -> dict:
    """The export document, checked through; Invalid naming the first problem."""
    document_version(doc, where)
    _need(isinstance(doc.get("started"), str), where, "no 'started' time")
    _need(_opt(doc.get("finished"), str), where, "'finished' is not a time")
    _need(doc.get("status", "ok") in RUN_STATUSES, where,
          f"status {doc.get('status')!r} is not one of {', '.join(RUN_STATUSES)}")
    argv = doc.get("argv", [])
    _need(isinstance(argv, list) and all(isinstance(a, str) for a in argv), where,
          "'argv' is not a list of strings")
    _need(isinstance(doc.get("environment", {}), dict), where, "'environment' is not an object")
    env = doc.get("environment") or {}
    _kinds(env, ENVIRONMENT_KINDS, where, "environment: ")
    _need(_opt(doc.get("options"), dict), where, "'options' is not an object")
    opts = doc.get("options") or {}
    _kinds(opts, OPTION_KINDS, where, "options: ")
    _need(_opt(doc.get("aggregates"), list), where, "'aggregates' is not a list")
    _need(_opt(doc.get("end_reason"), str), where, "'end_reason' is not a string")
    uid = doc.get("uid")
    _need(uid is None or (isinstance(uid, str) and _UID.fullmatch(uid) is not None), where,
          f"uid {uid!r} is not 32 hex digits")
    jobs = doc.get("jobs") or []
    _need(isinstance(jobs, list), where, "'jobs' is not a list")
    job_ids = set()
    for i, j in enumerate(jobs, 1):
        w = f"{where}: job {i}"
        _need(isinstance(j, dict), w, "not an object")
        _need(_is_int(j.get("seq")) and j["seq"] >= 1, w, "'seq' is not a count")
        for k in ("benchmark", "mechanism", "started"):
            _need(isinstance(j.get(k), str) and j[k] != "", w, f"no '{k}'")
        for k in ("benchmark", "mechanism"):
            why = validate.stored_name_problem(k, j[k])
            _need(why is None, w, str(why))
        _need(_is_int(j.get("repetition", 1)) and j.get("repetition", 1) >= 1, w,
              "'repetition' is not a count")
        _need(_opt(j.get("finished"), str), w, "'finished' is not a time")
        _need(j.get("status", "done") in JOB_STATUSES, w, f"status {j.get('status')!r}")
        _need(_opt(j.get("load"), dict), w, "'load' is not an object")
        _need(j.get("job_id") is None or _is_int(j["job_id"]), w, "'job_id' is not a number")
        job_ids.add(j.get("job_id"))
    results = doc.get("results")
    _need(isinstance(results, list), where, "'results' is not a list")
    for i, r in enumerate(results, 1):
        _validate_result(r, f"{where}: result {i}", job_ids)
    return doc


def _validate_result(r: Any, w: str, job_ids: set) -> None:
    _need(isinstance(r, dict), w, "not an object")
    for k in ("benchmark", "mechanism"):
        _need(isinstance(r.get(k), str) and r[k] != "", w, f"no '{k}'")
    for k in ("benchmark", "mechanism"):
        why = validate.stored_name_problem(k, r[k])
        _need(why is None, w, str(why))
    _need(isinstance(r.get("params", {}), dict), w, "'params' is not an object")
    why = validate.params_problem(r.get("params", {}))
    _need(why is None, w, str(why))
    for k in ("unit", "counter"):
        if r.get(k) is not None:
            why = validate.stored_name_problem(k, r[k])
            _need(why is None, w, str(why))
    _need(r.get("status", "ok") in STATUSES, w,
          f"status {r.get('status')!r} is not one of {', '.join(STATUSES)}")
    for k in ("unit", "counter", "reason", "started", "finished"):
        _need(_opt(r.get(k), str), w, f"'{k}' is not a string")
    for k in ("n", "dropped", "repetition"):
        _need(r.get(k) is None or (_is_int(r[k]) and r[k] >= 0), w, f"'{k}' is not a count")
    for k in ("min", "max", "median", "p5", "p95", "mad", "mean", "batched", "empty_region",
              "warmup"):
        _need(r.get(k) is None or _is_num(r[k]), w, f"'{k}' is not a number")
    _need(_opt(r.get("header"), dict), w, "'header' is not an object")
    _kinds(r.get("header") or {}, HEADER_KINDS, w, "header: ")
    _need(r.get("job_id") is None or r["job_id"] in job_ids, w,
          f"job_id {r.get('job_id')!r} names no job of the run")
    samples = r.get("samples") or {}
    _need(isinstance(samples, dict), w, "'samples' is not an object")
    lengths = set()
    for event, values in samples.items():
        why = validate.stored_name_problem("event", event)
        _need(why is None, w, f"sample {why}")
        counts = _counts(values)
        _need(counts is not None, w, f"samples of {event!r} are not a list of 64-bit counts")
        samples[event] = counts  # as checked, and as the store takes them
        lengths.add(len(values))
    _need(len(lengths) <= 1, w, "its events have different numbers of samples")
    if r.get("status", "ok") == "ok" and r.get("median") is None:
        _need(bool(samples.get(PRIMARY_EVENT)), w, "ok, but neither samples nor a median")


# ---- importing ----

def _kind(path: Path) -> str:
    """'store' or 'json' by content; UsageError for what cannot be read at all."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise UsageError(f"no file {path}") from None
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        # A FIFO would block for ever, a directory is no export.
        raise UsageError(f"{path} is not a regular file")
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    return "store" if head == SQLITE_MAGIC else "json"


def read_json(path: Path, progress: Progress | None = None) -> dict:
    data = read_bytes(path, progress)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path} is neither an isobench export (JSON) nor a store") from None
    del data
    if progress is not None:
        progress("parsing", 0, 1)
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise UsageError(f"{path} is not valid JSON ({e}): not an isobench export") from None
    except RecursionError:
        raise UsageError(f"{path} nests arrays or objects too deeply for JSON this reads: "
                         "not an isobench export") from None
    if progress is not None:
        progress("checking", 0, 1)
    try:
        return validate_run(doc, str(path))
    except Invalid as e:
        raise UsageError(str(e)) from None


def documents(path: Path, run_ids: list[int] | None = None,
              progress: Progress | None = None) -> list[tuple[dict, dict]]:
    """(document, origin) of each run in an export or a store, all validated
    before the first is imported."""
    path = Path(path)
    if _kind(path) == "json":
        if run_ids:
            raise UsageError("--run selects runs of a store; an export holds one run")
        doc = read_json(path, progress)
        return [(doc, {"source": str(path.resolve()), "format": "export",
                       "run_id": doc.get("run_id"), "imported": now()})]
    with _readable_store(path) as src:
        wanted = run_ids or src.run_ids()
        out = []
        for run_id in wanted:
            before = len(src.skipped)
            try:
                doc = export_document(src, src.resolve_run(str(run_id)), samples=True)
            except StoreError as e:
                if run_ids:
                    raise  # asked for by its id: say why it cannot be read
                # Every intact run of a damaged store is still imported: the
                # way to copy what can be read into a new store.
                src.skip(str(e))
                continue
            left_out = src.skipped[before:]
            try:
                validate_run(doc, f"{path}: run {run_id}")
            except Invalid as e:
                raise StoreError(str(e)) from None
            origin = {"source": str(path.resolve()), "format": "store", "run_id": run_id,
                      "imported": now()}
            if left_out:
                origin["left_out"] = left_out  # damaged parts not imported
            out.append((doc, origin))
        return out


class _readable_store:
    """Another store opened for reading without changing it: one written by an
    older isobench is upgraded in a temporary copy, not in place."""

    def __init__(self, path: Path):
        self.path = path
        self.tmp: tempfile.TemporaryDirectory | None = None
        self.store: Store | None = None

    def __enter__(self) -> Store:
        try:
            conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
            finally:
                conn.close()
        except sqlite3.Error as e:
            raise StoreError(f"{self.path} is not an isobench store: {e}") from None
        path = self.path
        if 0 < version < STORE_SCHEMA:
            self.tmp = tempfile.TemporaryDirectory(prefix="isobench-import-")
            path = Path(self.tmp.name) / self.path.name
            shutil.copyfile(self.path, path)
        self.store = Store.open(path, create=False)
        return self.store

    def __exit__(self, *exc) -> None:
        if self.store is not None:
            self.store.close()
        if self.tmp is not None:
            self.tmp.cleanup()


def import_into(store: Store, path: Path, run_ids: list[int] | None = None,
                tags: Mapping[str, Any] | None = None,
                progress: Progress | None = None) -> list[dict]:
    """Import every run of path (an export or a store) into store; one record
    per run: source_run_id, run_id, uid, and skipped when the same run (same
    uid) is already there.  tags (e.g. the host and campaign a run came
    from) are added to each imported run's origin."""
    out = []
    for doc, origin in documents(path, run_ids, progress):
        origin = {**origin, **(tags or {})}
        uid = doc.get("uid")
        existing = store.run_by_uid(uid) if uid else None
        if existing is not None:
            out.append({"source_run_id": origin.get("run_id"), "run_id": existing, "uid": uid,
                        "skipped": True})
            continue
        run_id = store.import_run(
            doc, origin=origin,
            progress=(lambda done, total: progress("storing", done, total)) if progress else None)
        out.append({"source_run_id": origin.get("run_id"), "run_id": run_id,
                    "uid": store.run(run_id)["uid"], "skipped": False})
    return out
