"""The store: ONE SQLite file holding runs, their results and raw samples.

Layout (schema version 3, kept in PRAGMA user_version):

    runs      one row per `isobench run`: when, how it was invoked, how it
              ended, and the machine it ran on (environment, JSON); options
              (JSON: repeat, seed, the order jobs ran in) and aggregates
              (JSON list: figures averaged over results, each saying how it
              was averaged, which `isobench check` inspects)
    results   one row per measured configuration (benchmark, mechanism,
              params) and repetition with the summary statistics of its
              samples, so that tables need not decompress anything; header is
              the isob header line the result came under (JSON)
    samples   the raw per-iteration samples of a result, one row per event
              (PRIMARY_EVENT for the result's own unit, then perf events),
              as zlib-compressed little-endian unsigned 64-bit integers

Each result is committed as soon as it is known, so a run that crashes or is
interrupted keeps everything measured before.

Schema history and migration notes:

    1  first version.
    2  results.repetition: which of the run's `--repeat N` fresh processes a
       result came from, 1..N (stores of version 1 ran everything once, so
       their rows become repetition 1); runs.options and runs.aggregates
       (NULL for runs stored by version 1: no options were recorded and no
       aggregates computed).
    3  results.batched_reps: JSON list of every (K, 2K) pair's estimate
       behind results.batched, in measuring order (isob's "batched_reps");
       NULL for results stored before, whose pairs were never kept.
    (next) add a MIGRATIONS entry with the SQL that turns version N-1 into N;
           open() applies the missing steps in order inside one transaction.
           Never edit a released step: stores in the wild are at every version.
"""

from __future__ import annotations

import array
import json
import sqlite3
import sys
import zlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from . import stats
from .errors import StoreError, UsageError
from .records import PRIMARY_EVENT, Result, thaw

SAMPLE_ENCODING = "zlib-u64le"

MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE runs (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        started     TEXT NOT NULL,     -- ISO 8601, UTC
        finished    TEXT,              -- NULL while running (or if isobench died)
        argv        TEXT NOT NULL,     -- JSON list: the command line
        status      TEXT NOT NULL,     -- running | ok | failed | interrupted
        environment TEXT NOT NULL      -- JSON object, see sysinfo.py
    );
    CREATE TABLE results (
        id           INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id       INTEGER NOT NULL REFERENCES runs(id),
        benchmark    TEXT NOT NULL,
        mechanism    TEXT NOT NULL,
        params       TEXT NOT NULL,    -- JSON object, sorted keys
        unit         TEXT,
        counter      TEXT,
        status       TEXT NOT NULL,    -- ok | failed | skipped
        reason       TEXT,
        n            INTEGER NOT NULL, -- samples summarised
        min          INTEGER,
        max          INTEGER,
        median       REAL,
        p5           REAL,
        p95          REAL,
        mad          REAL,
        mean         REAL,
        batched      REAL,
        empty_region REAL,
        dropped      INTEGER NOT NULL,
        warmup       INTEGER,
        header       TEXT              -- JSON object or NULL
    );
    CREATE INDEX results_by_run ON results(run_id);
    CREATE TABLE samples (
        result_id INTEGER NOT NULL REFERENCES results(id),
        event     TEXT NOT NULL,
        count     INTEGER NOT NULL,
        encoding  TEXT NOT NULL,
        data      BLOB NOT NULL,
        PRIMARY KEY (result_id, event)
    );
    """,
    2: """
    ALTER TABLE results ADD COLUMN repetition INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE runs ADD COLUMN options TEXT;
    ALTER TABLE runs ADD COLUMN aggregates TEXT;
    """,
    3: """
    ALTER TABLE results ADD COLUMN batched_reps TEXT;
    """,
}
SCHEMA_VERSION = max(MIGRATIONS)

RUN_STATUSES = ("running", "ok", "failed", "interrupted")

# The summary columns, in table order; shared by the store and the exports.
SUMMARY_COLUMNS = ("n", "min", "max", "median", "p5", "p95", "mad", "mean")
RESULT_COLUMNS = ("id", "benchmark", "mechanism", "params", "unit", "counter", "status",
                  "reason", *SUMMARY_COLUMNS, "batched", "batched_reps", "empty_region",
                  "dropped", "warmup", "repetition")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def encode_samples(values: Iterable[int]) -> bytes:
    a = array.array("Q", values)
    if sys.byteorder == "big":
        a.byteswap()
    return zlib.compress(a.tobytes())


def decode_samples(blob: bytes, count: int, encoding: str) -> tuple[int, ...]:
    if encoding != SAMPLE_ENCODING:
        raise StoreError(f"samples in unknown encoding {encoding!r}")
    a = array.array("Q")
    a.frombytes(zlib.decompress(blob))
    if sys.byteorder == "big":
        a.byteswap()
    if len(a) != count:
        raise StoreError(f"samples: {len(a)} values stored, {count} expected")
    return tuple(a)


class Store:
    """An open store.  Use Store.open(path, create=...)."""

    def __init__(self, path: Path, conn: sqlite3.Connection):
        self.path = path
        self._conn = conn

    # ---- opening ----

    @classmethod
    def open(cls, path: Path, create: bool) -> "Store":
        """Open the store at path; create it (and its folder) when create is set.

        Every way this can fail ends in StoreError with one readable line.
        """
        path = Path(path)
        writable = create
        if create:
            conn = _connect_rw(path)
        else:
            conn = _connect_ro(path)
            if _older_store(conn):
                # A store written by an older isobench is upgraded even by a
                # command that only reads it (one transaction per step, so a
                # failure leaves it as it was); otherwise `show` and `report`
                # would refuse every store made before the upgrade.
                conn.close()
                conn = _connect_rw(path)
                writable = True
        store = cls(path, conn)
        try:
            store._migrate(writable=writable)
        except sqlite3.DatabaseError as e:
            conn.close()
            raise StoreError(f"{path} is not an isobench store: {e}") from None
        except StoreError:
            conn.close()
            raise
        return store

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _migrate(self, writable: bool) -> None:
        c = self._conn
        version = c.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.path} has store schema {version}; this isobench reads up to "
                             f"{SCHEMA_VERSION}: upgrade isobench")
        if version == SCHEMA_VERSION:
            return
        tables = c.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if version == 0 and tables:
            raise StoreError(f"{self.path} is an SQLite file but not an isobench store")
        if not writable:
            if version == 0:
                raise StoreError(f"{self.path} is empty: no runs stored yet")
            raise StoreError(f"{self.path} has store schema {version}: run `isobench run` once "
                             "to upgrade it")
        for step in range(version + 1, SCHEMA_VERSION + 1):
            # One transaction per step: a failure leaves the store at the
            # previous version, never half-migrated.
            c.executescript("BEGIN;" + MIGRATIONS[step] + f"PRAGMA user_version = {step};COMMIT;")

    # ---- writing ----

    def begin_run(self, argv: list[str], environment: dict) -> int:
        with self._conn as c:
            cur = c.execute(
                "INSERT INTO runs (started, argv, status, environment) VALUES (?, ?, 'running', ?)",
                (now(), json.dumps(argv), json.dumps(environment, sort_keys=True)))
        return cur.lastrowid

    def set_environment(self, run_id: int, environment: dict) -> None:
        with self._conn as c:
            c.execute("UPDATE runs SET environment = ? WHERE id = ?",
                      (json.dumps(environment, sort_keys=True), run_id))

    def set_options(self, run_id: int, options: dict) -> None:
        with self._conn as c:
            c.execute("UPDATE runs SET options = ? WHERE id = ?",
                      (json.dumps(options, sort_keys=True), run_id))

    def set_aggregates(self, run_id: int, aggregates: list[dict]) -> None:
        with self._conn as c:
            c.execute("UPDATE runs SET aggregates = ? WHERE id = ?",
                      (json.dumps(aggregates, sort_keys=True), run_id))

    def finish_run(self, run_id: int, status: str) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"run status {status!r}")
        with self._conn as c:
            c.execute("UPDATE runs SET finished = ?, status = ? WHERE id = ?",
                      (now(), status, run_id))

    def add_result(self, run_id: int, r: Result, repetition: int = 1) -> int:
        """Store one result with its samples, committed before returning."""
        s = r.summary
        header = json.dumps(thaw(r.header), sort_keys=True) if r.header is not None else None
        row = {"run_id": run_id, "benchmark": r.benchmark, "mechanism": r.mechanism,
               "params": r.params_json(), "unit": r.unit, "counter": r.counter,
               "status": r.status, "reason": r.reason, **s.as_dict(), "batched": r.batched,
               "batched_reps": json.dumps(list(r.batched_reps)), "empty_region": r.empty_region, "dropped": r.dropped, "warmup": r.warmup,
               "header": header, "repetition": repetition}
        events = [(PRIMARY_EVENT, r.samples)] if r.samples else []
        return self._insert_result(row, events + list(r.events.items()))

    def _insert_result(self, row: dict, events: list[tuple[str, Iterable[int]]]) -> int:
        names = list(row)
        with self._conn as c:
            cur = c.execute(f"INSERT INTO results ({', '.join(names)}) VALUES "
                            f"({', '.join('?' * len(names))})", [row[k] for k in names])
            result_id = cur.lastrowid
            c.executemany(
                "INSERT INTO samples (result_id, event, count, encoding, data) VALUES (?,?,?,?,?)",
                [(result_id, name, len(v), SAMPLE_ENCODING, encode_samples(v))
                 for name, v in ((n, list(v)) for n, v in events)])
        return result_id

    def import_run(self, doc: dict) -> int:
        """Store a run given as a document in the shape `export --format json` writes.

        Summary columns are taken as given, and computed from the samples only
        where missing: a run measured elsewhere keeps the numbers it came with.
        Used to load reviewed fixtures (tests/python/fixtures/*_run.json) and
        runs exported on another machine.
        """
        with self._conn as c:
            cur = c.execute(
                "INSERT INTO runs (started, finished, argv, status, environment, options, "
                "aggregates) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (doc.get("started") or now(), doc.get("finished"), json.dumps(doc.get("argv", [])),
                 doc.get("status", "ok"), json.dumps(doc.get("environment") or {}, sort_keys=True),
                 _json_or_null(doc.get("options")), _json_or_null(doc.get("aggregates"))))
        run_id = cur.lastrowid
        for r in doc.get("results", []):
            self._insert_result(*_imported_row(run_id, r))
        return run_id

    # ---- reading ----

    def latest_run_id(self) -> int | None:
        row = self._conn.execute("SELECT max(id) FROM runs").fetchone()
        return row[0]

    def resolve_run(self, spec: str | int | None) -> int:
        """A run id from the user's RUN argument: a number, 'latest' or None (latest)."""
        if spec is None or spec == "latest":
            run_id = self.latest_run_id()
            if run_id is None:
                raise UsageError(f"{self.path} holds no runs yet: start one with `isobench run`")
            return run_id
        try:
            run_id = int(spec)
        except ValueError:
            raise UsageError(f"run id {spec!r} is not a number (or 'latest')") from None
        if self._conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            latest = self.latest_run_id()
            hint = f"the latest is {latest}" if latest is not None else "the store holds no runs"
            raise UsageError(f"no run {run_id} in {self.path} ({hint})")
        return run_id

    def run(self, run_id: int) -> dict:
        """The run as a dict (no results): run_id, started, finished, status, argv,
        environment, options and aggregates (both None when never recorded)."""
        row = self._conn.execute(
            "SELECT id, started, finished, argv, status, environment, options, aggregates "
            "FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise UsageError(f"no run {run_id} in {self.path}")
        return {"run_id": row[0], "started": row[1], "finished": row[2],
                "argv": json.loads(row[3]), "status": row[4], "environment": json.loads(row[5]),
                "options": _loads(row[6]), "aggregates": _loads(row[7])}

    def results(self, run_id: int) -> list[dict]:
        """The run's results in the order they were stored, as summary dicts."""
        rows = self._conn.execute(
            f"SELECT {', '.join(RESULT_COLUMNS)}, header FROM results WHERE run_id = ? ORDER BY id",
            (run_id,)).fetchall()
        return [_result_dict(row) for row in rows]

    def samples(self, result_id: int) -> dict[str, tuple[int, ...]]:
        rows = self._conn.execute(
            "SELECT event, count, encoding, data FROM samples WHERE result_id = ? ORDER BY rowid",
            (result_id,)).fetchall()
        return {event: decode_samples(data, count, enc) for event, count, enc, data in rows}

    def load_result(self, result_id: int) -> Result:
        """A stored result as a Result record again, raw samples included."""
        row = self._conn.execute(
            f"SELECT {', '.join(RESULT_COLUMNS)}, header FROM results WHERE id = ?",
            (result_id,)).fetchone()
        if row is None:
            raise UsageError(f"no result {result_id} in {self.path}")
        d = _result_dict(row)
        events = self.samples(result_id)
        primary = events.pop(PRIMARY_EVENT, ())
        return Result(benchmark=d["benchmark"], mechanism=d["mechanism"], params=d["params"],
                      status=d["status"], reason=d["reason"], unit=d["unit"],
                      counter=d["counter"], samples=primary, events=events,
                      batched=d["batched"], batched_reps=d["batched_reps"] or (),
                      empty_region=d["empty_region"],
                      dropped=d["dropped"], warmup=d["warmup"], header=d["header"])


def _loads(text: str | None) -> Any:
    return json.loads(text) if text is not None else None


def _json_or_null(value: Any) -> str | None:
    return json.dumps(value, sort_keys=True) if value is not None else None


def _imported_row(run_id: int, r: dict) -> tuple[dict, list[tuple[str, list[int]]]]:
    """The results row and the sample events of one imported result."""
    samples = dict(r.get("samples") or {})
    primary = samples.get(PRIMARY_EVENT, [])
    summary = stats.summarize(primary).as_dict()
    row = {"run_id": run_id, "benchmark": r["benchmark"], "mechanism": r["mechanism"],
           "params": json.dumps(r.get("params") or {}, sort_keys=True), "unit": r.get("unit"),
           "counter": r.get("counter"), "status": r.get("status", "ok"), "reason": r.get("reason"),
           **{k: r.get(k, summary[k]) for k in SUMMARY_COLUMNS},
           "batched": r.get("batched"), "batched_reps": _json_or_null(r.get("batched_reps")),
           "empty_region": r.get("empty_region"), "dropped": r.get("dropped", 0), "warmup": r.get("warmup"),
           "header": _json_or_null(r.get("header")), "repetition": r.get("repetition", 1)}
    if row["n"] is None:
        row["n"] = 0
    events = [(PRIMARY_EVENT, primary)] if primary else []
    events += [(k, v) for k, v in samples.items() if k != PRIMARY_EVENT]
    return row, events


def _result_dict(row: tuple) -> dict:
    d = dict(zip(RESULT_COLUMNS + ("header",), row))
    d["result_id"] = d.pop("id")
    d["params"] = json.loads(d["params"])
    d["batched_reps"] = json.loads(d["batched_reps"]) if d["batched_reps"] is not None else None
    d["header"] = json.loads(d["header"]) if d["header"] is not None else None
    return d


def _connect_rw(path: Path) -> sqlite3.Connection:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError(f"cannot create the folder of the store {path}: "
                         f"{e.strerror or e}") from None
    if path.is_dir():
        raise StoreError(f"the store {path} is a directory, not a file")
    conn = None
    try:
        conn = sqlite3.connect(path, isolation_level=None)
        # An empty transaction forces SQLite to open (and create) the file now,
        # so that an unwritable path fails before any benchmark runs.
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("COMMIT")
    except sqlite3.Error as e:
        if conn is not None:
            conn.close()
        if isinstance(e, sqlite3.OperationalError):
            raise StoreError(f"cannot open the store {path} for writing: {e}") from None
        raise StoreError(f"{path} is not an isobench store: {e}") from None
    conn.isolation_level = ""  # back to implicit transactions for `with conn:`
    return conn


def _older_store(conn: sqlite3.Connection) -> bool:
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError:
        return False  # reported as "not an isobench store" by _migrate
    return 0 < version < SCHEMA_VERSION


def _connect_ro(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise StoreError(f"no store at {path}: run `isobench run` first, or pass --db")
    if path.is_dir():
        raise StoreError(f"the store {path} is a directory, not a file")
    try:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise StoreError(f"cannot open the store {path}: {e}") from None
