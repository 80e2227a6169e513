"""The store: ONE SQLite file holding runs, their results and raw samples.

Layout (schema version 4, kept in PRAGMA user_version):

    runs      one row per `isobench run`: when, how it was invoked, how it
              ended (and why, when it was stopped from outside), and the
              machine it ran on (environment, JSON); options (JSON: repeat,
              seed) and aggregates (JSON list: figures averaged over
              results, each saying how it was averaged, which `isobench
              check` inspects); uid (the run's identity across stores, so
              that importing the same run twice is noticed); owner (JSON:
              the process that runs it, so that a run whose process is gone
              is closed as interrupted); origin (JSON: where an imported run
              came from)
    jobs      one row per (benchmark, mechanism, repetition) as it ran: its
              place in the run's order, start and end, and the load of the
              machine around it (JSON, see load.py)
    results   one row per measured configuration (benchmark, mechanism,
              params) and repetition with the summary statistics of its
              samples, so that tables need not decompress anything; header is
              the isob header line the result came under (JSON); the job it
              came from and when it was measured
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
    4  runs.uid (random for older runs), runs.owner, runs.end_reason,
       runs.origin; the jobs table; results.job_id, results.started and
       results.finished (NULL for results stored before: their jobs and
       times were not recorded).  runs.options no longer lists the job
       order: the jobs table holds it.
    (next) add a MIGRATIONS entry with the SQL that turns version N-1 into N;
           open() applies the missing steps in order inside one transaction.
           Never edit a released step: stores in the wild are at every version.
"""

from __future__ import annotations

import array
import json
import os
import secrets
import sqlite3
import stat
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ..core import owner as owner_mod, stats
from ..errors import StoreError, UsageError
from ..core.records import PRIMARY_EVENT, STATUSES, Result, thaw

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
    4: """
    ALTER TABLE runs ADD COLUMN uid TEXT;
    UPDATE runs SET uid = lower(hex(randomblob(16)));
    CREATE UNIQUE INDEX runs_by_uid ON runs(uid);
    ALTER TABLE runs ADD COLUMN owner TEXT;       -- JSON: host, boot_id, pid, start_ticks
    ALTER TABLE runs ADD COLUMN end_reason TEXT;  -- e.g. "SIGTERM", or why it was closed
    ALTER TABLE runs ADD COLUMN origin TEXT;      -- JSON: source of an imported run
    CREATE TABLE jobs (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id      INTEGER NOT NULL REFERENCES runs(id),
        seq         INTEGER NOT NULL,  -- 1, 2, ... in the order the jobs ran
        benchmark   TEXT NOT NULL,
        mechanism   TEXT NOT NULL,
        repetition  INTEGER NOT NULL,
        started     TEXT NOT NULL,     -- ISO 8601, UTC, milliseconds
        finished    TEXT,
        status      TEXT NOT NULL,     -- running | done | interrupted
        load        TEXT               -- JSON object, see load.py
    );
    CREATE INDEX jobs_by_run ON jobs(run_id);
    ALTER TABLE results ADD COLUMN job_id INTEGER REFERENCES jobs(id);
    ALTER TABLE results ADD COLUMN started TEXT;
    ALTER TABLE results ADD COLUMN finished TEXT;
    """,
}
SCHEMA_VERSION = max(MIGRATIONS)

RUN_STATUSES = ("running", "ok", "failed", "interrupted")
# A run that has ended, whichever way: what `latest` picks from.
ENDED = ("ok", "failed", "interrupted")
JOB_STATUSES = ("running", "done", "interrupted")

# The summary columns, in table order; shared by the store and the exports.
SUMMARY_COLUMNS = ("n", "min", "max", "median", "p5", "p95", "mad", "mean")
RESULT_COLUMNS = ("id", "benchmark", "mechanism", "params", "unit", "counter", "status",
                  "reason", *SUMMARY_COLUMNS, "batched", "batched_reps", "empty_region",
                  "dropped", "warmup", "repetition", "job_id", "started", "finished")
JOB_COLUMNS = ("id", "seq", "benchmark", "mechanism", "repetition", "started", "finished",
               "status", "load")

# Run ids are SQLite integers; anything larger names no run.
MAX_ID = 2**63 - 1


def now(timespec: str = "seconds") -> str:
    return datetime.now(timezone.utc).isoformat(timespec=timespec)


def now_ms() -> str:
    """A timestamp precise enough to order the results of one job."""
    return now("milliseconds")


# Threads that decompress a run's samples at once (Store.run_samples).
DECODE_THREADS = 8


# zlib's level for the samples of an imported run: an import compresses
# every sample of a run at once (millions), where level 1 is about five
# times faster than the default and its blobs about an eighth larger.
IMPORT_LEVEL = 1


def encode_samples(values: Iterable[int], level: int = -1) -> bytes:
    a = array.array("Q", values) if not isinstance(values, array.array) else values
    if sys.byteorder == "big":
        a.byteswap()
    return zlib.compress(a.tobytes(), level)


def decode_samples(blob: bytes, count: int, encoding: str) -> tuple[int, ...]:
    """The values of one stored sample blob; StoreError when it is damaged."""
    return tuple(decode_sample_array(blob, count, encoding))


def decode_sample_array(blob: bytes, count: int,
                        encoding: str) -> memoryview | array.array:
    """decode_samples as unsigned 64-bit integers in native byte order
    (format "Q"), without a Python integer per value and, on a
    little-endian machine, without a copy of the decompressed bytes: numpy
    reads them as they are."""
    if encoding != SAMPLE_ENCODING:
        raise StoreError(f"samples in unknown encoding {encoding!r}")
    try:
        # Room for the count stored (no regrowing the output as it fills),
        # never more than deflate can expand the blob to (1032:1).
        size = max(8, min(8 * count, 1032 * len(blob) + 64)) if isinstance(count, int) else 8
        raw = zlib.decompress(blob, bufsize=size)
        if len(raw) % 8:
            raise ValueError("bytes do not fill whole 64-bit values")
    except (zlib.error, TypeError, ValueError) as e:
        raise StoreError(f"samples are damaged ({e})") from None
    if sys.byteorder == "big":
        a = array.array("Q")
        a.frombytes(raw)
        a.byteswap()
    else:
        a = memoryview(raw).cast("Q")
    if len(a) != count:
        raise StoreError(f"samples: {len(a)} values stored, {count} expected")
    return a


def _column(text: Any, what: str, kind: type | tuple[type, ...], null: bool = True) -> Any:
    """A JSON column read back; StoreError naming it when it is damaged or of the
    wrong kind, so that no caller meets a half-valid value."""
    if text is None:
        if null:
            return None
        raise StoreError(f"{what} is missing")
    if not isinstance(text, str):
        _text(text, what)
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as e:
        raise StoreError(f"{what} is not valid JSON ({e})") from None
    if not isinstance(value, kind) or (value is None and not null):
        raise StoreError(f"{what} is a JSON {type(value).__name__}, not what isobench wrote")
    return value


# What a store's INTEGER column holds (SQLite: signed 64 bits); an imported
# integer beyond it is refused rather than failing the insert.
INT_MIN, INT_MAX = -2**63, 2**63 - 1

# The members of the environment, the options and a result's header that
# the outputs read as a given kind, each checked where it is present (null
# is always allowed: a machine may not know it).  A member of another kind
# would stop `show`, `report` or `compare` of the run; members not named
# here are stored as they come and read defensively.  `import` refuses a
# document with one of another kind (interchange.py); a store written by
# another program holding one has that run or result read as damaged.
_STR, _NUM, _DICT, _LIST = (str,), (int, float), (dict,), (list,)
ENVIRONMENT_KINDS = {
    **{k: _STR for k in ("hostname", "cpu_model", "kernel", "hypervisor", "microcode",
                         "clocksource", "counter", "counter_why", "unit", "tsc_hz_source",
                         "pmu_source", "smt_control", "python", "isobench_version")},
    **{k: _DICT for k in ("git", "compiler", "mitigations", "reasons", "mechanism_props",
                          "isolation")},
    **{k: _LIST for k in ("cpu_flags", "cpu_flags_relevant")},
    **{k: _NUM for k in ("tsc_hz", "memory_bytes", "nproc", "nproc_usable")},
}
GIT_KINDS = {"commit": _STR, "dirty": (bool,)}
OPTION_KINDS = {"repeat": (int,), "repeat_by_benchmark": _DICT}
HEADER_KINDS = {
    **{k: _STR for k in ("counter", "counter_why", "benchmark", "mechanism", "type", "unit",
                         "tsc_hz_source")},
    **{k: _NUM for k in ("tsc_hz", "counter_step", "n")},
    "empty_region": _DICT, "events": _LIST,
}
_KIND_NAMES = {_STR: "a string", _NUM: "a number", _DICT: "an object", _LIST: "a list",
               (bool,): "true or false", (int,): "a whole number"}


def _of_kind(v: Any, kind: tuple) -> bool:
    if v is None:
        return True
    if isinstance(v, bool):
        return bool in kind
    if isinstance(v, int):
        return int in kind and INT_MIN <= v <= INT_MAX
    if isinstance(v, float):
        return float in kind and v == v and v not in (_INF, -_INF)
    return isinstance(v, kind)


def member_kind_problem(obj: Mapping, kinds: Mapping[str, tuple]) -> str | None:
    """Which member of obj is not of its kind in kinds (or null), said in
    words; None when all are."""
    for k, kind in kinds.items():
        if not _of_kind(obj.get(k), kind):
            return f"{k} is not {_KIND_NAMES[kind]}"
    if "git" in kinds and isinstance(obj.get("git"), dict):
        why = member_kind_problem(obj["git"], GIT_KINDS)
        if why:
            return f"git: {why}"
    if "repeat_by_benchmark" in kinds and isinstance(obj.get("repeat_by_benchmark"), dict):
        if not all(_of_kind(v, (int,)) and v is not None
                   for v in obj["repeat_by_benchmark"].values()):
            return "repeat_by_benchmark holds a value that is not a whole number"
    return None


def _members(value: dict | None, kinds: Mapping[str, tuple], what: str) -> dict | None:
    """A JSON object column whose members the outputs read, checked for their
    kinds; StoreError naming the member otherwise."""
    why = member_kind_problem(value, kinds) if value is not None else None
    if why:
        raise StoreError(f"{what}: {why}, not what isobench wrote")
    return value


class Undecodable(bytes):
    """A TEXT value that is not UTF-8 (a bad sector, a stray write): read back
    as its bytes so that the row, not the whole query, is reported."""


def _tolerant_text(data: bytes) -> Any:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return Undecodable(data)


def _text(value: Any, what: str, null: bool = True) -> str | None:
    """A TEXT column read back; StoreError naming it when it is not text."""
    if value is None and null:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        raise StoreError(f"{what} is not UTF-8 text ({bytes(value)[:24]!r})")
    raise StoreError(f"{what} is {value!r}, not text")


_WARNED: set[str] = set()


def warn(message: str) -> None:
    """How a damaged part the store skips is reported: one line on stderr,
    once per process (`compare` opens a store twice)."""
    if message in _WARNED:
        return
    _WARNED.add(message)
    # Control characters visible, as render/kit/table.py's terminal() writes them
    # (the store sits below render): a damaged value is named with repr().
    line = "".join(ch if ch.isprintable() else repr(ch)[1:-1]
                   for ch in " ".join(message.split()))
    try:
        print(f"isobench: warning: {line}", file=sys.stderr)
    except (OSError, ValueError):
        pass


class Store:
    """An open store.  Use Store.open(path, create=...).

    Damage degrades per row: a run, result, sample or job that cannot be
    decoded is left out of what the reading methods return, reported once
    through warn() and kept in `skipped` (skip(): what `isobench check`
    names); scan() looks for damage in every row.  A run asked for by its id that is
    itself damaged raises StoreError naming the damaged column.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection):
        self.path = path
        self._conn = conn
        self.skipped: list[str] = []

    def skip(self, message: str) -> None:
        """Report a damaged part left out of what is read (once per part)."""
        if message not in self.skipped:
            self.skipped.append(message)
            warn(f"{message}: left out")

    def _fetch(self, sql: str, params: Iterable = ()) -> list[tuple]:
        """The rows of a query; a TEXT value that is not UTF-8 comes back as
        Undecodable instead of failing the whole query (the fast path stays
        SQLite's own decoding: the slow one runs only on a damaged store)."""
        params = tuple(params)
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as e:
            if "decode" not in str(e):
                raise
        self._conn.text_factory = _tolerant_text
        try:
            return self._conn.execute(sql, params).fetchall()
        finally:
            self._conn.text_factory = str

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
            abandoned = store._abandoned()
            if abandoned and not writable:
                # Closing them needs a writable connection; a store this user
                # cannot write keeps them as they are (`latest` skips them).
                try:
                    store._conn = _connect_rw(path)
                    conn.close()
                except StoreError:
                    abandoned = []
            for run_id, why in abandoned:
                store._close_abandoned(run_id, why)
        except sqlite3.DatabaseError as e:
            store._conn.close()
            raise StoreError(f"{path} is not an isobench store: {e}") from None
        except StoreError:
            store._conn.close()
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

    def _abandoned(self) -> list[tuple[int, str]]:
        """(run id, why) of the runs marked running whose process is gone."""
        rows = self._fetch(
            "SELECT id, owner FROM runs WHERE status = 'running' AND owner IS NOT NULL")
        out = []
        for run_id, text in rows:
            try:
                why = owner_mod.gone(json.loads(text))
            except (ValueError, TypeError, AttributeError):
                why = None  # a damaged owner record: leave the run alone
            if why:
                out.append((run_id, why))
        return out

    def _close_abandoned(self, run_id: int, why: str) -> None:
        """Mark an abandoned run interrupted, ended when its last result was stored."""
        last = self._conn.execute(
            "SELECT max(coalesce(finished, '')) FROM results WHERE run_id = ?",
            (run_id,)).fetchone()[0]
        with self._conn as c:
            c.execute("UPDATE runs SET status = 'interrupted', end_reason = ?, "
                      "finished = coalesce(nullif(?, ''), started) "
                      "WHERE id = ? AND status = 'running'",
                      (f"closed when found: {why}", last, run_id))
            c.execute("UPDATE jobs SET status = 'interrupted' WHERE run_id = ? "
                      "AND status = 'running'", (run_id,))

    # ---- writing ----

    def begin_run(self, argv: list[str], environment: dict, owner: dict | None = None) -> int:
        """A new run, `running` until finish_run; owner is the process running it
        (default: this one), so that a run whose process dies is noticed."""
        owner = owner if owner is not None else owner_mod.this_process()
        with self._conn as c:
            cur = c.execute(
                "INSERT INTO runs (started, argv, status, environment, uid, owner) "
                "VALUES (?, ?, 'running', ?, ?, ?)",
                (now(), json.dumps(argv), json.dumps(environment, sort_keys=True),
                 secrets.token_hex(16), json.dumps(owner, sort_keys=True)))
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

    def finish_run(self, run_id: int, status: str, end_reason: str | None = None) -> None:
        """End a run; an interrupted one also closes the job it was in."""
        if status not in ENDED:
            raise ValueError(f"run status {status!r}")
        with self._conn as c:
            c.execute("UPDATE runs SET finished = ?, status = ?, end_reason = ? WHERE id = ?",
                      (now(), status, end_reason, run_id))
            c.execute("UPDATE jobs SET status = 'interrupted', finished = coalesce(finished, ?) "
                      "WHERE run_id = ? AND status = 'running'", (now_ms(), run_id))

    def begin_job(self, run_id: int, seq: int, benchmark: str, mechanism: str,
                  repetition: int, load: dict | None = None) -> int:
        with self._conn as c:
            cur = c.execute(
                "INSERT INTO jobs (run_id, seq, benchmark, mechanism, repetition, started, "
                "status, load) VALUES (?, ?, ?, ?, ?, ?, 'running', ?)",
                (run_id, seq, benchmark, mechanism, repetition, now_ms(), _json_or_null(load)))
        return cur.lastrowid

    def finish_job(self, job_id: int, status: str = "done", load: dict | None = None) -> None:
        if status not in JOB_STATUSES:
            raise ValueError(f"job status {status!r}")
        with self._conn as c:
            c.execute("UPDATE jobs SET finished = ?, status = ?, load = coalesce(?, load) "
                      "WHERE id = ?", (now_ms(), status, _json_or_null(load), job_id))

    def add_result(self, run_id: int, r: Result, repetition: int = 1, job_id: int | None = None,
                   started: str | None = None, finished: str | None = None) -> int:
        """Store one result with its samples, committed before returning.  started
        and finished bound when it was measured (finished: now by default)."""
        s = r.summary
        header = json.dumps(thaw(r.header), sort_keys=True) if r.header is not None else None
        row = {"run_id": run_id, "benchmark": r.benchmark, "mechanism": r.mechanism,
               "params": r.params_json(), "unit": r.unit, "counter": r.counter,
               "status": r.status, "reason": r.reason, **s.as_dict(), "batched": r.batched,
               "batched_reps": json.dumps(list(r.batched_reps)),
               "empty_region": r.empty_region, "dropped": r.dropped, "warmup": r.warmup,
               "header": header, "repetition": repetition, "job_id": job_id,
               "started": started, "finished": finished or now_ms()}
        events = [(PRIMARY_EVENT, r.samples)] if r.samples else []
        return self._insert_result(row, events + list(r.events.items()))

    def _insert_result(self, row: dict, events: list[tuple[str, Iterable[int]]]) -> int:
        with self._conn as c:
            return _insert_rows(c, row, [(n, len(v), encode_samples(v))
                                         for n, v in ((n, list(v)) for n, v in events)])

    def import_run(self, doc: dict, origin: dict | None = None,
                   progress: Callable[[int, int], None] | None = None) -> int:
        """Store a run given as a document in the shape `export --format json` writes.

        Summary columns are taken as given, and computed from the samples only
        where missing: a run measured elsewhere keeps the numbers it came with.
        A run exported while it was still running is stored as interrupted (its
        process is not on this machine to finish it).  The document's uid is
        kept (a new one is drawn when it has none); the caller checks first
        that it is not in this store yet (run_by_uid).  Used by `isobench
        import` (interchange.py validates the document first) and to load
        reviewed fixtures (tests/python/fixtures/*_run.json).  progress, when
        given, hears (results stored, results) as they are.
        """
        status = doc.get("status", "ok")
        end_reason = doc.get("end_reason")
        if status == "running":
            status, end_reason = "interrupted", "exported while it was still running"
        with self._conn as c:
            cur = c.execute(
                "INSERT INTO runs (started, finished, argv, status, environment, options, "
                "aggregates, uid, end_reason, origin) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (doc.get("started") or now(), doc.get("finished"), json.dumps(doc.get("argv", [])),
                 status, json.dumps(doc.get("environment") or {}, sort_keys=True),
                 _json_or_null(doc.get("options")), _json_or_null(doc.get("aggregates")),
                 doc.get("uid") or secrets.token_hex(16), end_reason, _json_or_null(origin)))
            run_id = cur.lastrowid
            jobs = {}
            for j in doc.get("jobs") or []:
                jstatus = "interrupted" if j.get("status") == "running" else j.get("status", "done")
                cur = c.execute(
                    "INSERT INTO jobs (run_id, seq, benchmark, mechanism, repetition, started, "
                    "finished, status, load) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (run_id, j["seq"], j["benchmark"], j["mechanism"], j.get("repetition", 1),
                     j["started"], j.get("finished"), jstatus, _json_or_null(j.get("load"))))
                if j.get("job_id") is not None:
                    jobs[j["job_id"]] = cur.lastrowid
            # Every result in the same transaction: an import is stored whole
            # or not at all, and costs one commit.  zlib lets go of the
            # interpreter while it compresses, so the samples of several
            # results are compressed at once.
            rows = []
            for r in doc.get("results", []):
                row, events = _imported_row(run_id, r)
                row["job_id"] = jobs.get(r.get("job_id"))
                rows.append((row, events))
            workers = min(DECODE_THREADS, os.cpu_count() or 1)

            def encode(row_events):
                return [(n, len(v), encode_samples(v if isinstance(v, array.array) else
                                                   array.array("Q", v), IMPORT_LEVEL))
                        for n, v in row_events[1]]

            with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
                for i, ((row, _), blobs) in enumerate(zip(rows, pool.map(encode, rows)), 1):
                    _insert_rows(c, row, blobs)
                    if progress is not None:
                        progress(i, len(rows))
        return run_id

    # ---- reading ----

    def latest_run_id(self, ended: bool = True) -> int | None:
        """The newest run that has ended (ok, failed or interrupted); with
        ended=False the newest of all, one still running included."""
        where = f"WHERE status IN ({', '.join(repr(s) for s in ENDED)})" if ended else ""
        row = self._conn.execute(f"SELECT max(id) FROM runs {where}").fetchone()
        return row[0]

    def _latest_readable(self, ended: bool) -> int | None:
        """latest_run_id, passing over (and reporting) runs that are damaged."""
        where = f"WHERE status IN ({', '.join(repr(s) for s in ENDED)})" if ended else ""
        ids = [r[0] for r in self._conn.execute(f"SELECT id FROM runs {where} ORDER BY id DESC")]
        damaged = []
        for run_id in ids:
            try:
                self.run(run_id)
            except StoreError as e:
                damaged.append(str(e))
                continue
            for message in damaged:
                self.skip(message)
            return run_id
        if damaged:
            others = f" and {len(damaged) - 1} more" if len(damaged) > 1 else ""
            raise StoreError(f"{damaged[0]}{others}: no {'ended ' if ended else ''}run in the "
                             "store can be read")
        return None

    def run_by_uid(self, uid: str) -> int | None:
        row = self._conn.execute("SELECT id FROM runs WHERE uid = ?", (uid,)).fetchone()
        return row[0] if row else None

    def run_ids(self) -> list[int]:
        return [r[0] for r in self._conn.execute("SELECT id FROM runs ORDER BY id")]

    def resolve_run(self, spec: str | int | None) -> int:
        """A run id from the user's RUN argument: a number, 'latest' or None (the
        newest run that has ended), or 'newest' (the newest, even if running).
        'latest' and 'newest' pass over damaged runs, each reported."""
        if spec is None or spec in ("latest", "newest"):
            run_id = self._latest_readable(ended=spec != "newest")
            if run_id is None:
                newest = self.latest_run_id(ended=False)
                if newest is not None:
                    raise UsageError(f"{self.path} holds no run that has ended yet: run {newest} "
                                     f"is still running (`isobench show {newest}`)")
                raise UsageError(f"{self.path} holds no runs yet: start one with `isobench run`")
            return run_id
        text = str(spec)
        # ASCII digits only: int() would also take '٣', ' 3' and '3_0'.
        if not text.isascii() or not text.isdigit():
            raise UsageError(f"run id {text!r} is not a number (or 'latest', 'newest')")
        run_id = int(text)
        if run_id > MAX_ID or self._conn.execute(
                "SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            latest = self.latest_run_id(ended=False)
            hint = f"the newest is {latest}" if latest is not None else "the store holds no runs"
            raise UsageError(f"no run {run_id} in {self.path} ({hint})")
        return run_id

    _RUN_SELECT = ("SELECT id, uid, started, finished, argv, status, end_reason, environment, "
                   "options, aggregates, origin FROM runs")

    def run(self, run_id: int) -> dict:
        """The run as a dict (no results): run_id, uid, started, finished, status,
        end_reason, argv, environment, options and aggregates (both None when
        never recorded), origin (None unless imported).  StoreError naming the
        column when the run's own row is damaged."""
        rows = self._fetch(f"{self._RUN_SELECT} WHERE id = ?", (run_id,))
        if not rows:
            raise UsageError(f"no run {run_id} in {self.path}")
        return _run_dict(rows[0], self.path)

    def results(self, run_id: int) -> list[dict]:
        """The run's results in the order they were stored, as summary dicts;
        a damaged one is left out and reported (skip)."""
        rows = self._fetch(
            f"SELECT {', '.join(RESULT_COLUMNS)}, header FROM results WHERE run_id = ? ORDER BY id",
            (run_id,))
        out = []
        for row in rows:
            try:
                out.append(_result_dict(row, self.path))
            except StoreError as e:
                self.skip(str(e))
        return out

    def jobs(self, run_id: int) -> list[dict]:
        """The run's jobs in the order they ran (none for runs stored before
        schema 3); a damaged one is left out and reported (skip)."""
        rows = self._fetch(
            f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs WHERE run_id = ? ORDER BY seq, id",
            (run_id,))
        out = []
        for row in rows:
            try:
                out.append(_job_dict(row, self.path))
            except StoreError as e:
                self.skip(str(e))
        return out

    def run_list(self) -> list[dict]:
        """Every stored run in one line's worth: run_id, started, finished,
        status, end_reason, argv, host, origin (None unless imported), the
        number of results by status, and damaged (None, or what in the run's
        own row cannot be read).  Lenient where `run` is strict: a damaged run
        is listed (and reported) with what can be read of it, so that one
        damaged run does not hide the others from the listing."""
        counts: dict[int, dict[str, int]] = {}
        for run_id, status, n in self._fetch(
                "SELECT run_id, status, count(*) FROM results GROUP BY run_id, status"):
            key = status if isinstance(status, str) else "damaged"
            counts.setdefault(run_id, {})[key] = counts.get(run_id, {}).get(key, 0) + n
        out = []
        for row in self._fetch(f"{self._RUN_SELECT} ORDER BY id"):
            damaged = None
            try:
                _run_dict(row, self.path)
            except StoreError as e:
                damaged = str(e)
                self.skip(damaged)
            argv, env, origin = (_lenient(row[4], list), _lenient(row[7], dict),
                                 _lenient(row[10], dict))
            if argv is not None and not all(isinstance(a, str) for a in argv):
                argv = None
            host = (env or {}).get("hostname")
            out.append({"run_id": row[0], "started": _str_or_none(row[2]),
                        "finished": _str_or_none(row[3]), "status": _str_or_none(row[5]),
                        "end_reason": _str_or_none(row[6]), "argv": argv,
                        "host": host if isinstance(host, str) else None, "origin": origin,
                        "results": counts.get(row[0], {}), "damaged": damaged})
        return out

    def job_seconds(self, quick: bool, per_key: int = 5,
                    limit: int = 20000) -> dict[tuple[str, str], list[float]]:
        """How long each (benchmark, mechanism) job took in the latest runs
        with the same --quick setting: up to per_key durations each, newest
        first, from jobs that ran to the end.  For the progress estimate only
        (measure/progress.py)."""
        rows = self._fetch(
            "SELECT j.benchmark, j.mechanism, j.started, j.finished, r.argv FROM jobs j "
            "JOIN runs r ON r.id = j.run_id WHERE j.status = 'done' AND j.finished IS NOT NULL "
            "ORDER BY j.id DESC LIMIT ?", (limit,))
        out: dict[tuple[str, str], list[float]] = {}
        for bench, mech, started, finished, argv in rows:
            if not (isinstance(bench, str) and isinstance(mech, str)):
                continue  # a damaged row says nothing about durations
            try:
                args = json.loads(argv) if argv else []
                took = (datetime.fromisoformat(finished)
                        - datetime.fromisoformat(started)).total_seconds()
            except (TypeError, ValueError):
                continue  # a damaged row says nothing about durations
            if not isinstance(args, list) or ("--quick" in args) != quick or took < 0:
                continue
            seen = out.setdefault((bench, mech), [])
            if len(seen) < per_key:
                seen.append(took)
        return out

    def samples(self, result_id: int,
                as_array: bool = False) -> dict[str, tuple[int, ...] | memoryview | array.array]:
        """The raw samples of a result by event, each a tuple of ints, or with
        as_array a buffer of unsigned 64-bit integers (decode_sample_array:
        for analysis of millions of samples, no Python integer per value).
        StoreError when any is damaged (the caller decides whether to leave
        the result out: runs.load_run and the exports do, and report it
        through skip)."""
        rows = self._fetch(
            "SELECT event, count, encoding, data FROM samples WHERE result_id = ? ORDER BY rowid",
            (result_id,))
        return _samples_dict(rows, result_id, self.path,
                             decode_sample_array if as_array else decode_samples)

    def run_samples_intact(self, run_id: int, status: str | None = None
                           ) -> tuple[dict[int, dict[str, memoryview | array.array]], set[int]]:
        """run_samples, or where that meets damage, result by result: the
        samples by result id, and the ids of the results whose samples are
        damaged (each reported through skip), for the caller to leave out."""
        try:
            return self.run_samples(run_id, status), set()
        except StoreError:
            pass
        ids = self._fetch("SELECT id FROM results WHERE run_id = ? AND (? IS NULL OR status = ?) "
                          "ORDER BY id", (run_id, status, status))
        out, damaged = {}, set()
        for (rid,) in ids:
            try:
                events = self.samples(rid, as_array=True)
            except StoreError as e:
                self.skip(str(e))
                damaged.add(rid)
                continue
            if events:
                out[rid] = events
        return out, damaged

    def run_samples(self, run_id: int,
                    status: str | None = None) -> dict[int, dict[str, memoryview | array.array]]:
        """The sample events of every result of a run (with status, of those
        with that status only), by result id, as Store.samples(as_array=True)
        gives them: read in one query and decompressed on several threads
        (zlib lets go of the interpreter while it works, and a full run holds
        millions of samples)."""
        rows = self._fetch(
            "SELECT s.rowid, s.result_id, s.event, s.count, s.encoding, s.data FROM samples s "
            "JOIN results r ON r.id = s.result_id WHERE r.run_id = ? AND (? IS NULL OR r.status = ?)",
            (run_id, status, status))
        rows = [r[1:] for r in sorted(rows, key=lambda r: r[0])]

        def decode(row: tuple) -> memoryview | array.array:
            # Any damage raises StoreError: runs.load_run then reads result
            # by result (Store.samples) and leaves out only the damaged ones.
            rid, event, count, enc, data = row
            try:
                if not isinstance(event, str) or not isinstance(enc, str) \
                        or not isinstance(count, int):
                    raise StoreError("not readable (a damaged event, encoding or count)")
                return decode_sample_array(data, count, enc)
            except StoreError as e:
                raise StoreError(f"{self.path}: result {rid}, event {event}: {e}") from None

        workers = min(DECODE_THREADS, os.cpu_count() or 1, max(1, len(rows)))
        if workers > 1:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                values = list(pool.map(decode, rows))
        else:
            values = [decode(r) for r in rows]
        out: dict[int, dict[str, memoryview | array.array]] = {}
        for (rid, event, *_), v in zip(rows, values):
            out.setdefault(rid, {})[event] = v
        return out

    def load_result(self, result_id: int) -> Result:
        """A stored result as a Result record again, raw samples included."""
        rows = self._fetch(
            f"SELECT {', '.join(RESULT_COLUMNS)}, header FROM results WHERE id = ?",
            (result_id,))
        if not rows:
            raise UsageError(f"no result {result_id} in {self.path}")
        d = _result_dict(rows[0], self.path)
        events = self.samples(result_id)
        primary = events.pop(PRIMARY_EVENT, ())
        try:
            return Result(benchmark=d["benchmark"], mechanism=d["mechanism"], params=d["params"],
                          status=d["status"], reason=d["reason"], unit=d["unit"],
                          counter=d["counter"], samples=primary, events=events,
                          batched=d["batched"], batched_reps=d["batched_reps"] or (),
                          empty_region=d["empty_region"],
                          dropped=d["dropped"], warmup=d["warmup"], header=d["header"])
        except ValueError as e:
            raise StoreError(f"{self.path}: result {result_id} is damaged: {e}") from None

    def scan(self) -> list[str]:
        """Every damaged part of the store, each named: SQLite's own integrity
        check (pages, indexes), then the decode of every row of every table
        as the reading methods decode it (a value overwritten with garbage
        passes the integrity check: only decoding finds it)."""
        out: list[str] = []
        try:
            rows = self._conn.execute("PRAGMA integrity_check").fetchall()
        except sqlite3.DatabaseError as e:
            return [f"{self.path}: SQLite's integrity check cannot run: {e}"]
        bad = [str(r[0]) for r in rows if r[0] != "ok"]
        if bad:
            more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
            out.append(f"{self.path}: SQLite's integrity check: {'; '.join(bad[:3])}{more}")
        self._conn.text_factory = _tolerant_text
        try:
            for row in self._conn.execute(f"{self._RUN_SELECT} ORDER BY id"):
                _decodes(out, _run_dict, row, self.path)
            for run_id, owner in self._conn.execute("SELECT id, owner FROM runs ORDER BY id"):
                _decodes(out, _column, owner, f"{self.path}: run {run_id}: owner", dict)
            for row in self._conn.execute(f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs ORDER BY id"):
                _decodes(out, _job_dict, row, self.path)
            for row in self._conn.execute(
                    f"SELECT {', '.join(RESULT_COLUMNS)}, header FROM results ORDER BY id"):
                _decodes(out, _result_dict, row, self.path)
            for result_id, *row in self._conn.execute(
                    "SELECT result_id, event, count, encoding, data FROM samples ORDER BY rowid"):
                _decodes(out, _samples_dict, [row], result_id, self.path)
        except sqlite3.DatabaseError as e:
            out.append(f"{self.path}: reading every row failed: {e}")
        finally:
            self._conn.text_factory = str
        return out


def _decodes(out: list[str], decode, *args: Any) -> None:
    try:
        decode(*args)
    except StoreError as e:
        out.append(str(e))


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _run_dict(row: tuple, path: Path | str) -> dict:
    what = f"{path}: run {row[0]}:"
    status = _text(row[5], f"{what} status", null=False)
    if status not in RUN_STATUSES:
        raise StoreError(f"{what} status {status!r} is not one isobench writes")
    return {"run_id": row[0], "uid": _text(row[1], f"{what} uid"),
            "started": _text(row[2], f"{what} started", null=False),
            "finished": _text(row[3], f"{what} finished"),
            "argv": _column(row[4], f"{what} argv", list, null=False), "status": status,
            "end_reason": _text(row[6], f"{what} end_reason"),
            "environment": _members(_column(row[7], f"{what} environment", dict, null=False),
                                    ENVIRONMENT_KINDS, f"{what} environment"),
            "options": _members(_column(row[8], f"{what} options", dict), OPTION_KINDS,
                                f"{what} options"),
            "aggregates": _column(row[9], f"{what} aggregates", list),
            "origin": _column(row[10], f"{what} origin", dict)}


def _job_dict(row: tuple, path: Path | str) -> dict:
    d = dict(zip(JOB_COLUMNS, row))
    d["job_id"] = d.pop("id")
    what = f"{path}: job {d['job_id']}:"
    for k in ("benchmark", "mechanism", "started", "status"):
        _text(d[k], f"{what} {k}", null=False)
    _text(d["finished"], f"{what} finished")
    for k in ("seq", "repetition"):
        if not isinstance(d[k], int):
            raise StoreError(f"{what} {k} is {d[k]!r}, not a count")
    d["load"] = _column(d["load"], f"{what} load", dict)
    return d


def _samples_dict(rows: Iterable[tuple], result_id: int, path: Path | str,
                  decode: Callable | None = None) -> dict[str, tuple[int, ...]]:
    decode = decode or decode_samples
    out = {}
    for event, count, enc, data in rows:
        where = f"{path}: result {result_id}, event {event}:"
        event = _text(event, f"{path}: result {result_id}: a sample event name", null=False)
        try:
            enc = _text(enc, "the encoding", null=False)
            if not isinstance(count, int):
                raise StoreError(f"count {count!r} is not a count")
            out[event] = decode(data, count, enc)
        except StoreError as e:
            raise StoreError(f"{where} {e}") from None
    return out


def _lenient(text: Any, kind: type) -> Any:
    """A JSON column of the kind expected, or None where it is not one."""
    try:
        value = json.loads(text) if isinstance(text, (str, bytes)) else None
    except ValueError:
        return None
    return value if isinstance(value, kind) else None


def _loads(text: str | None) -> Any:
    return json.loads(text) if text is not None else None


def _json_or_null(value: Any) -> str | None:
    return json.dumps(value, sort_keys=True) if value is not None else None


def _insert_rows(c: sqlite3.Connection, row: dict, blobs: list[tuple[str, int, bytes]]) -> int:
    """Insert a results row and its sample blobs (event, count, encoded) in
    the transaction of c; the new result's id."""
    names = list(row)
    cur = c.execute(f"INSERT INTO results ({', '.join(names)}) VALUES "
                    f"({', '.join('?' * len(names))})", [row[k] for k in names])
    result_id = cur.lastrowid
    c.executemany(
        "INSERT INTO samples (result_id, event, count, encoding, data) VALUES (?,?,?,?,?)",
        [(result_id, name, count, SAMPLE_ENCODING, data) for name, count, data in blobs])
    return result_id


def _imported_row(run_id: int, r: dict) -> tuple[dict, list[tuple[str, list[int]]]]:
    """The results row and the sample events of one imported result."""
    samples = dict(r.get("samples") or {})
    primary = samples.get(PRIMARY_EVENT, [])
    # The summary of the samples only where the document lacks some of it.
    summary = (stats.summarize(primary).as_dict()
               if any(k not in r for k in SUMMARY_COLUMNS) else {})
    row = {"run_id": run_id, "benchmark": r["benchmark"], "mechanism": r["mechanism"],
           "params": json.dumps(r.get("params") or {}, sort_keys=True), "unit": r.get("unit"),
           "counter": r.get("counter"), "status": r.get("status", "ok"), "reason": r.get("reason"),
           **{k: r[k] if k in r else summary[k] for k in SUMMARY_COLUMNS},
           "batched": r.get("batched"), "batched_reps": _json_or_null(r.get("batched_reps")),
           "empty_region": r.get("empty_region"),
           "dropped": r.get("dropped", 0), "warmup": r.get("warmup"),
           "header": _json_or_null(r.get("header")), "repetition": r.get("repetition", 1),
           "started": r.get("started"), "finished": r.get("finished")}
    if row["n"] is None:
        row["n"] = 0
    events = [(PRIMARY_EVENT, primary)] if primary else []
    events += [(k, v) for k, v in samples.items() if k != PRIMARY_EVENT]
    return row, events


def _result_dict(row: tuple, path: Path | str = "store") -> dict:
    d = dict(zip(RESULT_COLUMNS + ("header",), row))
    d["result_id"] = d.pop("id")
    what = f"{path}: result {d['result_id']}:"
    for k in ("benchmark", "mechanism", "status"):
        _text(d[k], f"{what} {k}", null=False)
    for k in ("unit", "counter", "reason", "started", "finished"):
        _text(d[k], f"{what} {k}")
    if d["status"] not in STATUSES:
        raise StoreError(f"{what} status {d['status']!r} is not one isobench writes")
    d["params"] = _column(d["params"], f"{what} params", dict, null=False)
    d["header"] = _members(_column(d["header"], f"{what} header", dict), HEADER_KINDS,
                           f"{what} header")
    d["batched_reps"] = _column(d["batched_reps"], f"{what} batched_reps", list)
    if d["batched_reps"] is not None and not all(
            isinstance(x, (int, float)) and x == x and x not in (_INF, -_INF)
            for x in d["batched_reps"]):
        raise StoreError(f"{what} batched_reps holds something that is not a number")
    for k in ("n", "dropped", "repetition"):
        if not isinstance(d[k], int):
            raise StoreError(f"{what} {k} is {d[k]!r}, not a count")
    for k in (*SUMMARY_COLUMNS[1:], "batched", "empty_region"):
        v = d[k]
        if v is not None and (not isinstance(v, (int, float)) or v != v or v in (_INF, -_INF)):
            raise StoreError(f"{what} {k} is {v!r}, not a number")
    return d


_INF = float("inf")


def _check_regular(path: Path) -> None:
    """Only a regular file can be a store: SQLite would block for ever on a FIFO
    and fail obscurely on a device or a socket."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise StoreError(f"cannot open the store {path}: {e.strerror or e}") from None
    if stat.S_ISDIR(mode):
        raise StoreError(f"the store {path} is a directory, not a file")
    if not stat.S_ISREG(mode):
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or
                stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
        raise StoreError(f"the store {path} is {kind}, not a regular file")


def _connect_rw(path: Path) -> sqlite3.Connection:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError(f"cannot create the folder of the store {path}: "
                         f"{e.strerror or e}") from None
    _check_regular(path)
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
    _check_regular(path)
    try:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise StoreError(f"cannot open the store {path}: {e}") from None
