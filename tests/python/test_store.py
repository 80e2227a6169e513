"""The SQLite store: round trip of results and raw samples, and bad files."""

import sqlite3

import pytest

from isobench import store as store_mod
from isobench.errors import StoreError, UsageError
from isobench.core.records import Header, Result
from isobench.store import Store

from test_records import HEADER, RESULT


def make_result(**change):
    return Result.from_line({**RESULT, **change}, Header.from_line(HEADER))


def test_round_trip_with_raw_samples(tmp_path):
    db = tmp_path / "sub" / "s.sqlite"
    samples = [2**40 + i * 3 for i in range(1000)]
    events = {"instructions": [i for i in range(1000)]}
    original = make_result(samples=samples, events=events, batched=12.5,
                           batched_reps=[13.0, -0.5, 12.5])
    with Store.open(db, create=True) as s:
        run_id = s.begin_run(["isobench", "run"], {"kernel": "x"})
        rid = s.add_result(run_id, original)
        s.add_result(run_id, Result.failure("switch", "test-crash", "boom"))
        s.finish_run(run_id, "failed")
    with Store.open(db, create=False) as s:
        assert s.resolve_run(None) == run_id
        back = s.load_result(rid)
        rows = s.results(run_id)
        run = s.run(run_id)
    assert back == original
    assert back.samples == tuple(samples)
    # Every batched pair is kept, in measuring order, negative ones too.
    assert back.batched_reps == (13.0, -0.5, 12.5)
    assert rows[0]["batched_reps"] == [13.0, -0.5, 12.5]
    assert back.events["instructions"] == tuple(events["instructions"])
    assert [r["status"] for r in rows] == ["ok", "failed"]
    assert rows[0]["median"] == original.summary.median
    assert rows[0]["min"] == 2**40 and isinstance(rows[0]["min"], int)
    assert rows[1]["n"] == 0 and rows[1]["median"] is None
    assert (run["status"], run["environment"], run["argv"]) == ("failed", {"kernel": "x"},
                                                                ["isobench", "run"])
    assert run["finished"] is not None


def test_samples_are_compressed_u64(tmp_path):
    blob = store_mod.encode_samples([1, 2, 3])
    assert store_mod.decode_samples(blob, 3, store_mod.SAMPLE_ENCODING) == (1, 2, 3)
    with pytest.raises(StoreError):
        store_mod.decode_samples(blob, 4, store_mod.SAMPLE_ENCODING)


def test_schema_version_is_recorded(tmp_path):
    db = tmp_path / "s.sqlite"
    Store.open(db, create=True).close()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION
    conn.execute(f"PRAGMA user_version = {store_mod.SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="upgrade isobench"):
        Store.open(db, create=True)


def test_not_a_database(tmp_path):
    db = tmp_path / "junk.sqlite"
    db.write_text("not sqlite at all, " * 100)
    for create in (True, False):
        with pytest.raises(StoreError, match="not an isobench store"):
            Store.open(db, create=create)


def test_foreign_sqlite_file(tmp_path):
    db = tmp_path / "other.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    with pytest.raises(StoreError, match="not an isobench store"):
        Store.open(db, create=True)


def test_missing_store_is_not_created_for_reading(tmp_path):
    db = tmp_path / "none.sqlite"
    with pytest.raises(StoreError, match="no store"):
        Store.open(db, create=False)
    assert not db.exists()


def test_unknown_run(tmp_path):
    with Store.open(tmp_path / "s.sqlite", create=True) as s:
        with pytest.raises(UsageError, match="holds no runs"):
            s.resolve_run(None)
        s.begin_run([], {})
        with pytest.raises(UsageError, match="no run 7"):
            s.resolve_run("7")
        with pytest.raises(UsageError, match="not a number"):
            s.resolve_run("seven")
