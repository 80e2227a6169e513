"""Versioned interchange: schema_version in every --json output and export,
`isobench import` of exports and of other stores, and the round trip
export -> import -> the same `show`."""

import json
import os
import re
import shutil
import sqlite3

import pytest

from isobench import store as store_mod
from isobench.store import interchange

from conftest import FIXTURES, assert_one_error_line
from fixture_runs import fixture, import_doc

VERSION = interchange.SCHEMA_VERSION


def _run_mixed(isobench):
    """A run with repetitions, a failure, a skip and a crash."""
    p = isobench("run", "switch", "kv", "-q", "-m", "direct", "-m", "thread", "-m", "mpk",
                 "-m", "test-crash", "--repeat", "2", "--seed", "4", ISOBENCH_TEST_MECHANISMS="1")
    assert p.returncode == 1, p.stderr  # test-crash fails, which is recorded
    return p


@pytest.mark.parametrize("args", [
    ["list", "--json", "--skip-isolation"], ["show", "--json"], ["check", "--json"],
    ["compare", "1", "1", "--json"], ["system", "show", "--json"], ["reference", "--json"],
    ["export", "1", "--format", "json"], ["report", "-o", "REPORT", "--json"],
])
def test_every_json_output_has_schema_version(isobench, tmp_path, args):
    isobench("run", "switch", "-q", "-m", "direct", "-m", "thread")
    args = [str(tmp_path / "report") if a == "REPORT" else a for a in args]
    p = isobench(*args)
    # `check` exits 3 where a finding is an error (no baseline here: no `direct`).
    assert p.returncode in ((0, 1, 3) if args[0] == "check" else (0, 1)), p.stderr
    doc = json.loads(p.stdout)
    assert list(doc)[0] == "schema_version" and doc["schema_version"] == VERSION


def test_run_json_has_timestamps(isobench):
    doc, p = isobench.json("run", "switch", "--json", "-q", "-m", "direct")
    assert doc["schema_version"] == VERSION
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00")
    for r in doc["results"]:
        assert stamp.fullmatch(r["started"]) and stamp.fullmatch(r["finished"])
        assert r["started"] <= r["finished"]
    assert doc["started"] <= doc["finished"]


def _normalized_show(text, run_id, db):
    text = text.replace(str(db), "DB")
    text = re.sub(rf"\brun {run_id}\b", "run N", text)
    # The hint may be wrapped between its words.
    return re.sub(rf"`isobench(\s+)(show|check)(\s+){run_id}`", r"`isobench\1\2\3N`", text)


def test_round_trip_gives_the_same_show(isobench, tmp_path):
    _run_mixed(isobench)
    export = tmp_path / "run1.json"
    assert isobench("export", "1", "--format", "json", "--samples", "-o",
                    str(export)).returncode == 0
    other = tmp_path / "other.sqlite"
    # The other store already has a run, so that the imported one gets another id.
    import_doc(other, fixture("clean_run"))
    p = isobench("import", str(export), "--db", str(other))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"imported run 1 of {export} as run 2 into {other}"

    a = isobench("show", "1")
    b = isobench("show", "2", "--db", str(other))
    assert a.returncode == b.returncode == 0
    assert _normalized_show(a.stdout, 1, isobench.db) == _normalized_show(b.stdout, 2, other)

    ja, _ = isobench.json("show", "1", "--json")
    jb, _ = isobench.json("show", "2", "--json", "--db", str(other))
    assert jb["origin"]["source"] == str(export) and jb["origin"]["run_id"] == 1
    for doc in (ja, jb):
        for k in ("run_id", "db", "origin"):
            doc.pop(k)
        for r in doc["results"]:
            r.pop("result_id"), r.pop("job_id")
        for j in doc["jobs"]:
            j.pop("job_id")
        # The summary document names its run and store, as the run does.
        for k in ("run_id", "db"):
            doc["summary"]["run"].pop(k)
        for c in doc["summary"]["configs"]:
            for r in c.get("repetitions", []):
                r.pop("result_id", None)
        for r in doc["summary"]["results"]:
            r.pop("result_id", None)
    assert ja == jb  # uid, times, status, results, jobs with their load, findings
    # The samples came along: the second export equals the first but for ids and path.
    again, _ = isobench.json("export", "2", "--format", "json", "--samples", "--db", str(other))
    first = json.loads(export.read_text())
    assert [r["samples"] for r in again["results"]] == [r["samples"] for r in first["results"]]


def test_import_twice_changes_nothing(isobench, tmp_path):
    isobench("run", "switch", "-q", "-m", "direct")
    export = tmp_path / "e.json"
    isobench("export", "latest", "--format", "json", "-o", str(export))
    other = tmp_path / "o.sqlite"
    doc, p = isobench.json("import", str(export), "--json", "--db", str(other))
    assert doc["imported"][0]["skipped"] is False
    doc, p = isobench.json("import", str(export), "--json", "--db", str(other))
    assert p.returncode == 0 and doc["imported"][0]["skipped"] is True
    assert "already in" in isobench("import", str(export), "--db", str(other)).stdout
    with sqlite3.connect(other) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 1


def test_import_another_store(isobench, tmp_path):
    isobench("run", "switch", "-q", "-m", "direct")
    isobench("run", "switch", "-q", "-m", "thread", "--no-baseline")
    isobench("run", "switch", "-q", "-m", "mpk", "--no-baseline")
    other = tmp_path / "o.sqlite"
    doc, p = isobench.json("import", str(isobench.db), "--run", "2", "--json", "--db", str(other))
    assert [(d["source_run_id"], d["run_id"]) for d in doc["imported"]] == [(2, 1)]
    doc, p = isobench.json("import", str(isobench.db), "--json", "--db", str(other))
    assert [(d["source_run_id"], d["skipped"]) for d in doc["imported"]] == [
        (1, False), (2, True), (3, False)]
    shown, _ = isobench.json("show", "--json", "--db", str(other))
    assert {r["mechanism"] for r in shown["results"]} == {"mpk"}
    assert shown["origin"]["format"] == "store"
    line = assert_one_error_line(isobench("import", str(isobench.db), "--run", "9",
                                          "--db", str(other)))
    assert "no run 9" in line


def test_import_an_older_store_leaves_it_alone(isobench, tmp_path):
    old = tmp_path / "v2.sqlite"
    conn = sqlite3.connect(old)
    conn.executescript(store_mod.MIGRATIONS[1] + store_mod.MIGRATIONS[2] +
                       "PRAGMA user_version = 2;")
    conn.execute("INSERT INTO runs (started, finished, argv, status, environment) "
                 "VALUES ('2024-01-01T00:00:00+00:00', '2024-01-01T00:01:00+00:00', '[]', "
                 "'ok', '{}')")
    conn.commit()
    conn.close()
    before = old.read_bytes()
    p = isobench("import", str(old))
    assert p.returncode == 0, p.stderr
    assert old.read_bytes() == before  # upgraded in a temporary copy only
    shown, _ = isobench.json("show", "--json")
    assert shown["started"] == "2024-01-01T00:00:00+00:00"


def test_legacy_exports_import(isobench):
    # The reviewed fixtures are export_version 2 documents.
    doc, p = isobench.json("import", str(FIXTURES / "flawed_run.json"), "--json")
    assert p.returncode == 0, p.stderr
    shown, _ = isobench.json("show", "--json")
    assert shown["started"] == fixture("flawed_run")["started"]
    assert len(shown["results"]) == len(fixture("flawed_run")["results"])
    assert len(shown["uid"]) == 32


@pytest.fixture(scope="module")
def good_export(tmp_path_factory):
    """One export of a real (fake-driver) run, shared by the tests that damage copies."""
    from conftest import Isobench

    ib = Isobench(tmp_path_factory.mktemp("export"))
    assert ib("run", "switch", "-q", "-m", "direct").returncode == 0
    p = ib("export", "latest", "--format", "json", "--samples")
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("change, needle", [
    (lambda d: d.update(schema_version=99), "schema_version 99 is not one this isobench reads "
                                            "(1 to 3); upgrade isobench"),
    (lambda d: d.update(schema_version="3"), "schema_version '3' is not a number"),
    (lambda d: d.pop("schema_version"), "not an isobench export"),
    (lambda d: d.update(format="something-else"), "not a run export"),
    (lambda d: d.update(status="exploded"), "status 'exploded'"),
    (lambda d: d["results"][1].update(benchmark=7), "result 2: no 'benchmark'"),
    (lambda d: d["results"][0]["samples"].update(primary=[1, -2]), "result 1: samples"),
    (lambda d: d["results"][0]["samples"].update(primary=[1, True]), "result 1: samples"),
    (lambda d: d["results"][0]["samples"].update(primary=[1, 2.5]), "result 1: samples"),
    (lambda d: d["results"][0]["samples"].update(primary=[1, 2**64]), "result 1: samples"),
    (lambda d: d["results"][0]["samples"].update(primary="12"), "result 1: samples"),
    (lambda d: d["results"][0].update(median="fast"), "result 1: 'median' is not a number"),
    (lambda d: d["results"][0].update(job_id=999), "job_id 999 names no job"),
    (lambda d: d["jobs"][0].update(seq=0), "job 1: 'seq' is not a count"),
    (lambda d: d.update(uid="../../etc"), "is not 32 hex digits"),
    (lambda d: d.update(results={}), "'results' is not a list"),
])
def test_import_refuses_bad_documents(isobench, tmp_path, good_export, change, needle):
    doc = json.loads(good_export)
    change(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    other = tmp_path / "o.sqlite"
    line = assert_one_error_line(isobench("import", str(bad), "--db", str(other)))
    assert needle in line
    with sqlite3.connect(other) as conn:  # nothing of it was stored
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


@pytest.mark.parametrize("content, needle", [
    (b"", "not valid JSON"), (b"[1, 2]", "not a JSON object"),
    (b"{\"schema_version\": 3", "not valid JSON"), (b"\xff\xfe\x00garbage", "neither"),
])
def test_import_refuses_what_is_not_an_export(isobench, tmp_path, content, needle):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    assert needle in assert_one_error_line(isobench("import", str(bad)))


def test_import_refuses_odd_files(isobench, tmp_path):
    assert "no file" in assert_one_error_line(isobench("import", str(tmp_path / "none.json")))
    assert "not a regular file" in assert_one_error_line(isobench("import", str(tmp_path)))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert "not a regular file" in assert_one_error_line(isobench("import", str(fifo)))
    isobench("run", "switch", "-q", "-m", "direct")
    assert "the store itself" in assert_one_error_line(isobench("import", str(isobench.db)))
    shutil.copy(FIXTURES / "not_a_db.sqlite", tmp_path / "x.sqlite")
    line = assert_one_error_line(isobench("import", str(tmp_path / "x.sqlite")))
    assert "not" in line


def test_exported_while_running_imports_as_interrupted(tmp_path):
    doc = fixture("clean_run")
    doc["status"], doc["finished"] = "running", None
    db = tmp_path / "x.sqlite"
    with store_mod.Store.open(db, create=True) as s:
        run_id = s.import_run(interchange.validate_run(doc, "doc"))
        run = s.run(run_id)
    assert (run["status"], run["end_reason"]) == ("interrupted",
                                                  "exported while it was still running")


def test_import_tags_the_origin(isobench, tmp_path):
    isobench("run", "switch", "-q", "-m", "direct")
    other = tmp_path / "o.sqlite"
    with store_mod.Store.open(other, create=True) as s:
        (done,) = interchange.import_into(s, isobench.db, tags={"host": "lab-3", "campaign": "c1"})
        origin = s.run(done["run_id"])["origin"]
    assert (origin["host"], origin["campaign"], origin["format"]) == ("lab-3", "c1", "store")


# ---- compressed exports, progress ----

def _shown(isobench, run, db=None):
    doc, _ = isobench.json("show", str(run), "--json", *(("--db", str(db)) if db else ()))
    return [(r["benchmark"], r["mechanism"], r["params"], r["median"]) for r in doc["results"]]


@pytest.mark.parametrize("name", ["run.json", "run.json.gz"])
def test_export_and_import_of_every_kind(isobench, tmp_path, name):
    isobench("run", "switch", "-q", "-m", "direct", "-m", "thread")
    out = tmp_path / name
    p = isobench("export", "1", "--format", "json", "--samples", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert out.read_bytes()[:2] == (b"\x1f\x8b" if name.endswith(".gz") else b"{\n")
    assert not list(tmp_path.glob("*.part"))
    other = tmp_path / "other.sqlite"
    p = isobench("import", str(out), "--db", str(other))
    assert p.returncode == 0, p.stderr
    assert _shown(isobench, 1) == _shown(isobench, 1, other)
    # The samples came along, compressed or not.
    a, _ = isobench.json("export", "1", "--format", "json", "--samples")
    b, _ = isobench.json("export", "1", "--format", "json", "--samples", "--db", str(other))
    assert [r["samples"] for r in a["results"]] == [r["samples"] for r in b["results"]]
    assert any(r["samples"] for r in a["results"])


def test_zst_is_written_where_python_can_else_refused(isobench, tmp_path):
    isobench("run", "switch", "-q", "-m", "direct")
    out = tmp_path / "run.json.zst"
    p = isobench("export", "1", "--format", "json", "-o", str(out))
    if interchange.zstd_module() is None:
        line = assert_one_error_line(p)
        assert line == (f"isobench: error: {out.name}: cannot write zstd, {interchange.NO_ZSTD}; "
                        "name the file .gz or .json")
        assert not out.exists() and not list(tmp_path.glob("*.part"))
        # A zstd file met on import is named for what it is.
        out.write_bytes(interchange.ZSTD_MAGIC + b"\0" * 16)
        line = assert_one_error_line(isobench("import", str(out), "--db",
                                              str(tmp_path / "o.sqlite")))
        assert "is zstd-compressed, and this Python has no zstd module" in line
    else:
        assert p.returncode == 0, p.stderr
        assert out.read_bytes()[:4] == interchange.ZSTD_MAGIC
        p = isobench("import", str(out), "--db", str(tmp_path / "o.sqlite"))
        assert p.returncode == 0, p.stderr


def test_a_damaged_gzip_export_is_one_line(isobench, tmp_path):
    isobench("run", "switch", "-q", "-m", "direct")
    out = tmp_path / "run.json.gz"
    assert isobench("export", "1", "--format", "json", "-o", str(out)).returncode == 0
    out.write_bytes(out.read_bytes()[:40])  # cut short
    line = assert_one_error_line(isobench("import", str(out), "--db", str(tmp_path / "o.sqlite")))
    assert f"cannot read {out}" in line


def test_progress_is_reported_by_stage(isobench, tmp_path):
    from isobench.store import Store, export

    isobench("run", "switch", "-q", "-m", "direct", "-m", "thread")
    out = tmp_path / "run.json.gz"
    written = []
    with Store.open(isobench.db, create=False) as store:
        with interchange.open_for_writing(out) as f:
            export.write(store, 1, "json", f, samples=True,
                         progress=lambda done, total: written.append((done, total)))
        n = len(store.results(1))
    assert written == [(i, n) for i in range(1, n + 1)]
    heard = []
    with Store.open(tmp_path / "o.sqlite", create=True) as store:
        interchange.import_into(store, out, progress=lambda *a: heard.append(a))
    stages = list(dict.fromkeys(s for s, _, _ in heard))
    assert stages == ["reading", "parsing", "checking", "storing"]
    reading = [(d, t) for s, d, t in heard if s == "reading"]
    assert reading[-1] == (out.stat().st_size, out.stat().st_size)
    assert [(d, t) for s, d, t in heard if s == "storing"] == [(i, n) for i in range(1, n + 1)]


def test_progress_bar_on_a_terminal_only(isobench, tmp_path):
    import pty
    import subprocess
    import sys

    isobench("run", "switch", "-q", "-m", "direct")
    out = tmp_path / "run.json"
    assert isobench("export", "1", "--format", "json", "--samples", "-o",
                    str(out)).returncode == 0
    # In a pipe: nothing on stderr but what went wrong (here: nothing).
    p = isobench("import", str(out), "--db", str(tmp_path / "a.sqlite"))
    assert p.returncode == 0 and p.stderr == ""
    # On a terminal: a bar of rich, gone at the end.
    master, slave = pty.openpty()
    env = {**isobench.env, "COLUMNS": "100", "TERM": "xterm"}
    proc = subprocess.run([sys.executable, "-m", "isobench", "import", str(out), "--db",
                           str(tmp_path / "b.sqlite")], stdout=subprocess.PIPE, stderr=slave,
                          env=env, timeout=120)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    assert proc.returncode == 0
    assert b"import: " in shown and b"\x1b[" in shown, shown[:400]
