"""Damaged store content: the store degrades per row.  A damaged result,
job or sample is left out of every reading command with one warning line
naming it, the rest is shown; a run whose own row is damaged is listed as
DAMAGED, passed over by `latest`, and named in one error line when asked
for by its id; `check` names every damaged part (store-damaged, an error).
Damage to the file itself (truncation, a bad page, a newer schema) still
gives one line and exit 1 or 2, never a traceback.  Each case starts from
a good store (a real run of the fake driver) and damages one thing in it,
as a bad disk, an interrupted copy or another program could."""

import json
import random
import shutil
import sqlite3
import stat
import zlib

import pytest

from isobench import store as store_mod

from conftest import assert_one_error_line

READERS = [
    ["show"], ["show", "--json"], ["check"], ["export", "latest", "--format", "json", "--samples"],
    ["export", "latest", "--format", "csv"], ["compare", "1", "1"], ["report", "-o", "OUT"],
]
# `report` reads a run as `check` does, then draws plots (slow): it is run
# for the damage that reaches each part of the store once.
REPORTED = ("corrupt sample blob", "corrupt params JSON", "mechanism not UTF-8",
            "corrupt job load JSON")


@pytest.fixture
def good(isobench, tmp_path):
    """A store holding one run: direct and thread, with a skipped mpk."""
    p = isobench("run", "switch", "-q", "-m", "direct", "-m", "thread", "-m", "mpk")
    assert p.returncode == 0, p.stderr
    return isobench.db


@pytest.fixture
def two(isobench, tmp_path, good):
    """The good store with a second run: the first imported again (new uid)."""
    doc, p = isobench.json("export", "1", "--format", "json", "--samples")
    del doc["uid"]
    export = tmp_path / "copy.json"
    export.write_text(json.dumps(doc))
    p = isobench("import", str(export))
    assert p.returncode == 0, p.stderr
    return good


def _sql(db, *statements):
    conn = sqlite3.connect(db)
    for s in statements:
        conn.execute(s[0], s[1:]) if isinstance(s, tuple) else conn.execute(s)
    conn.commit()
    conn.close()


def _warnings(p):
    assert "Traceback" not in p.stderr, p.stderr
    assert "internal error" not in p.stderr, p.stderr
    return [line for line in p.stderr.splitlines() if line.startswith("isobench: warning: ")]


def _store_damaged(isobench, *args):
    """`isobench check`'s store-damaged finding: its subjects."""
    doc, p = isobench.json("check", *args, "--json")
    assert p.returncode == 3, (p.returncode, p.stderr)
    found = [f for f in doc["findings"] if f["id"] == "store-damaged"]
    assert len(found) == 1 and found[0]["severity"] == "error", doc["findings"]
    return found[0]["subjects"]


# Damage to one result, job or sample: (SQL, what the warning names).
ROW_DAMAGE = {
    "corrupt sample blob": (("UPDATE samples SET data = x'deadbeef' WHERE rowid = 1",),
                            "result 1, event"),
    "sample blob of the wrong length": (
        (("UPDATE samples SET data = ? WHERE rowid = 1", zlib.compress(b"12345")),),
        "result 1, event"),
    "sample count that disagrees": (("UPDATE samples SET count = count + 1 WHERE rowid = 1",),
                                    "result 1, event"),
    "sample encoding unknown": (("UPDATE samples SET encoding = 'lz4' WHERE rowid = 1",),
                                "result 1, event"),
    "sample event not UTF-8": (("UPDATE samples SET event = CAST(x'ff00fe' AS TEXT) "
                                "WHERE rowid = 1",), "result 1: a sample event name"),
    "corrupt params JSON": (("UPDATE results SET params = '{\"placement\": ' WHERE id = 1",),
                            "result 1: params is not valid JSON"),
    "params not an object": (("UPDATE results SET params = '[1, 2]' WHERE id = 1",),
                             "result 1: params"),
    "corrupt header JSON": (("UPDATE results SET header = 'not json' WHERE id = 2",),
                            "result 2: header is not valid JSON"),
    "mechanism not UTF-8": (("UPDATE results SET mechanism = CAST(x'74687265ff6164' AS TEXT) "
                             "WHERE id = 1",), "result 1: mechanism is not UTF-8 text"),
    "reason not UTF-8": (("UPDATE results SET reason = CAST(x'c3' AS TEXT) WHERE id = 2",),
                         "result 2: reason is not UTF-8 text"),
    "median not a number": (("UPDATE results SET median = 'fast' WHERE id = 1",),
                            "result 1: median"),
    "count not a count": (("UPDATE results SET n = 'many' WHERE id = 1",), "result 1: n"),
    "corrupt job load JSON": (("UPDATE jobs SET load = 'x' WHERE id = 1",),
                              "job 1: load is not valid JSON"),
    "job started not UTF-8": (("UPDATE jobs SET started = CAST(x'80' AS TEXT) WHERE id = 1",),
                              "job 1: started is not UTF-8 text"),
}


@pytest.mark.parametrize("name", list(ROW_DAMAGE))
def test_damaged_row_is_left_out(isobench, tmp_path, good, name):
    statements, named = ROW_DAMAGE[name]
    _sql(good, *statements)
    for args in READERS if name in REPORTED else READERS[:-1]:
        args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
        p = isobench(*args)
        warned = _warnings(p)
        # The rest of the run is read: `check` exits 3 for store-damaged.
        assert p.returncode == (3 if args[0] == "check" else 0), (args, p.returncode, p.stderr)
        if ("job" in name or "sample" in name) and args[-1] == "csv":
            # The CSV export holds the results' summaries only: it reads
            # neither jobs nor samples, and the summaries are intact.
            assert warned == [], p.stderr
            continue
        assert len(warned) == 1 and named in warned[0] and str(good) in warned[0], \
            (args, p.stderr)
        assert warned[0].endswith(": left out"), warned[0]
    # The intact results are still out: everything but the damaged one.
    doc, _ = isobench.json("export", "latest", "--format", "json", "--samples")
    conn = sqlite3.connect(good)
    stored = conn.execute("SELECT count(*) FROM results").fetchone()[0]
    conn.close()
    lost = 0 if "job" in name else 1
    assert len(doc["results"]) == stored - lost
    assert any(named in s for s in _store_damaged(isobench))


# Damage to a run's own row: (SQL on run 2, what is named).
RUN_DAMAGE = {
    "corrupt environment JSON": ("UPDATE runs SET environment = '{' WHERE id = 2",
                                 "run 2: environment is not valid JSON"),
    "environment not an object": ("UPDATE runs SET environment = '\"text\"' WHERE id = 2",
                                  "run 2: environment is a JSON str"),
    "corrupt argv JSON": ("UPDATE runs SET argv = '[' WHERE id = 2", "run 2: argv"),
    "argv not UTF-8": ("UPDATE runs SET argv = CAST(x'5b22ff225d' AS TEXT) WHERE id = 2",
                       "run 2: argv is not UTF-8 text"),
    "corrupt options JSON": ("UPDATE runs SET options = '{{' WHERE id = 2", "run 2: options"),
    "aggregates not a list": ("UPDATE runs SET aggregates = '{}' WHERE id = 2",
                              "run 2: aggregates"),
    "unknown run status": ("UPDATE runs SET status = 'exploded' WHERE id = 2",
                           "run 2: status 'exploded'"),
    "started not UTF-8": ("UPDATE runs SET started = CAST(x'32303236fe' AS TEXT) WHERE id = 2",
                          "run 2: started is not UTF-8 text"),
}


@pytest.mark.parametrize("name", list(RUN_DAMAGE))
def test_damaged_run_is_passed_over(isobench, tmp_path, two, name):
    statement, named = RUN_DAMAGE[name]
    _sql(two, statement)
    # Listed, marked, and named in a warning.
    p = isobench("runs")
    assert p.returncode == 0, p.stderr
    assert [named in w for w in _warnings(p)] == [True], p.stderr
    rows = {line.split()[0]: line for line in p.stdout.splitlines() if line[:3].strip().isdigit()}
    assert "DAMAGED" in rows["2"] and "DAMAGED" not in rows["1"], p.stdout
    doc, p = isobench.json("runs", "--json")
    assert [named in (r["damaged"] or "") for r in doc["runs"]] == [False, True]
    # `latest` is the newest run that can be read (a status that is not
    # one isobench writes was never "ended", so it is not a candidate).
    for args in (["show"], ["export", "latest", "--format", "csv"],
                 ["report", "-o", str(tmp_path / "out")]):
        p = isobench(*args)
        assert p.returncode == 0, (args, p.stderr)
        warned = _warnings(p)
        assert [named in w for w in warned] == ([] if "status" in name else [True]), \
            (args, p.stderr)
    assert "run 1" in isobench("show").stdout
    # Asked for by its id: one line that names the damaged column.
    for args in (["show", "2"], ["export", "2", "--format", "json"], ["compare", "1", "2"],
                 ["check", "2"]):
        line = assert_one_error_line(isobench(*args))
        assert named in line, (args, line)
    assert any(named in s for s in _store_damaged(isobench, "1"))


def test_every_run_damaged(isobench, tmp_path, good):
    _sql(good, "UPDATE runs SET environment = '{' WHERE id = 1")
    for args in (["show"], ["check"], ["export", "latest", "--format", "csv"],
                 ["report", "-o", str(tmp_path)]):
        line = assert_one_error_line(isobench(*args))
        assert "run 1: environment is not valid JSON" in line
        assert "no ended run in the store can be read" in line
    assert isobench("runs").returncode == 0


def test_import_copies_the_intact_runs(isobench, tmp_path, two):
    """`isobench import DAMAGED --db NEW`: every intact run and result is
    copied, each damaged part named and recorded in the run's origin."""
    _sql(two, "UPDATE runs SET argv = CAST(x'5b22ff225d' AS TEXT) WHERE id = 2",
         "UPDATE results SET mechanism = CAST(x'ff' AS TEXT) WHERE id = 1")
    new = tmp_path / "new.sqlite"
    p = isobench("import", str(two), "--db", str(new))
    assert p.returncode == 0, p.stderr
    warned = _warnings(p)
    assert len(warned) == 2, p.stderr
    assert any("run 2: argv is not UTF-8 text" in w for w in warned), warned
    assert any("result 1: mechanism is not UTF-8 text" in w for w in warned), warned
    doc, p = isobench.json("runs", "--json", "--db", str(new))
    assert [r["origin"]["run_id"] for r in doc["runs"]] == [1]
    assert any("result 1: mechanism" in s for s in doc["runs"][0]["origin"]["left_out"])
    p = isobench("check", "--db", str(new))
    assert "store-damaged" not in p.stdout and not p.stderr
    # Asked for by its id, the damaged run is refused with its reason.
    line = assert_one_error_line(isobench("import", str(two), "--run", "2",
                                          "--db", str(tmp_path / "other.sqlite")))
    assert "run 2: argv is not UTF-8 text" in line


# Every TEXT column of the store, for random overwrites.
TEXT_COLUMNS = {
    "runs": ("started", "finished", "argv", "status", "environment", "uid", "owner",
             "end_reason", "options", "aggregates", "origin"),
    "results": ("benchmark", "mechanism", "params", "unit", "counter", "status", "reason",
                "header", "batched_reps", "started", "finished"),
    "jobs": ("benchmark", "mechanism", "started", "finished", "status", "load"),
    "samples": ("event", "encoding"),
}
NAMES = {"runs": "run", "results": "result", "jobs": "job", "samples": "result"}


@pytest.mark.parametrize("seed", range(4))
def test_random_overwrites(isobench, tmp_path, two, seed):
    """Random values overwritten with bytes that are not UTF-8 (SQLite's
    integrity check calls such a store ok): no command fails for the whole
    store, and `check` names each overwritten row with a damaged column.
    Run 1's own row is kept intact, so that `check 1` can run."""
    rng = random.Random(seed)
    conn = sqlite3.connect(two)
    hit: dict[tuple[str, int], list[str]] = {}
    for table, column in rng.sample([(t, c) for t, cs in TEXT_COLUMNS.items() for c in cs], 3):
        key = "result_id" if table == "samples" else "id"
        where = "WHERE id = 2" if table == "runs" else ""
        rowid, ident = rng.choice(
            conn.execute(f"SELECT rowid, {key} FROM {table} {where}").fetchall())
        garbage = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 12))) + b"\xff"
        conn.execute(f"UPDATE {table} SET {column} = CAST(? AS TEXT) WHERE rowid = ?",
                     (garbage, rowid))
        hit.setdefault((NAMES[table], ident), []).append(column)
    conn.commit()
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    p = isobench("runs")
    assert p.returncode == 0, p.stderr
    _warnings(p)
    for args in (["show"], ["show", "1"], ["export", "latest", "--format", "json"],
                 ["compare", "1", "1"], ["report", "-o", str(tmp_path / "out")],
                 ["import", str(two), "--db", str(tmp_path / "copy.sqlite")]):
        p = isobench(*args)
        _warnings(p)
        assert p.returncode == 0, (args, p.returncode, p.stderr)
    subjects = " ".join(_store_damaged(isobench, "1"))
    for (kind, ident), columns in hit.items():
        # A row is named by its first damaged column.
        assert any(f"{kind} {ident}" in subjects and c.split("_")[0] in subjects
                   for c in columns), (kind, ident, columns, subjects)


def _reads(isobench, tmp_path, codes=(1, 2), report=True):
    """Every reading command on the damaged store: one line, exit 1 or 2."""
    lines = []
    for args in READERS if report else READERS[:-1]:
        args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
        p = isobench(*args)
        assert "Traceback" not in p.stderr, (args, p.stderr)
        if p.returncode == 0 or (args[0] == "check" and not p.stderr):
            # This command did not read the damaged part (`check` exits
            # non-zero for its findings, which are on stdout).
            lines.append(None)
            continue
        assert p.returncode in codes, (args, p.returncode, p.stderr)
        line = assert_one_error_line(p, p.returncode)
        # Said by the code that found it, not by the last-resort guard.
        assert "internal error" not in line, line
        lines.append(line)
    return lines


def test_zero_median(isobench, tmp_path, good):
    # A zero where every ratio divides: direct's median (and its samples).
    _sql(good, "UPDATE results SET median = 0, min = 0, max = 0, p5 = 0, p95 = 0, mean = 0, "
               "batched = 0 WHERE mechanism = 'direct'",
         ("UPDATE samples SET data = ?, count = 10 WHERE result_id IN "
          "(SELECT id FROM results WHERE mechanism = 'direct')",
          store_mod.encode_samples([0] * 10)))
    for args in READERS:
        args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
        p = isobench(*args)
        assert "Traceback" not in p.stderr, (args, p.stderr)
        # `check` exits 3 for findings of severity error, which go to stdout.
        assert p.returncode in ((0, 1, 2, 3) if args[0] == "check" else (0, 1, 2)), \
            (args, p.returncode)
        if p.stderr:
            assert "internal error" not in assert_one_error_line(p, p.returncode)


def test_truncated_file(isobench, tmp_path, good):
    data = good.read_bytes()
    for keep in (len(data) // 2, 200, 0):
        good.write_bytes(data[:keep])
        for line in _reads(isobench, tmp_path):
            assert line is not None


def test_garbage_inside_the_file(isobench, tmp_path, good):
    # A page of the table b-tree overwritten (a bad sector).
    data = bytearray(good.read_bytes())
    page = 4096
    data[page * 2:page * 3] = b"\xa5" * page
    good.write_bytes(bytes(data))
    for line in _reads(isobench, tmp_path):
        assert line is None or "store" in line


def test_newer_schema(isobench, tmp_path, good):
    _sql(good, f"PRAGMA user_version = {store_mod.SCHEMA_VERSION + 1}")
    for line in _reads(isobench, tmp_path):
        assert f"has store schema {store_mod.SCHEMA_VERSION + 1}" in line
        assert "upgrade isobench" in line
    # A run into it is refused too, before anything is measured.
    assert "upgrade isobench" in assert_one_error_line(isobench("run", "-m", "direct"))


def test_plot_that_cannot_be_saved(isobench, tmp_path, good, monkeypatch):
    out = tmp_path / "report"
    out.mkdir()
    # A folder is writable to create but a plot's file name is taken by a
    # directory: saving it fails like a full disk would, midway.
    p = isobench("report", "-o", str(out))
    assert p.returncode == 0, p.stderr
    written = [f for f in out.iterdir() if f.suffix in (".png", ".svg")]
    assert written
    victim = written[0]
    victim.unlink()
    victim.mkdir()
    # --force: the folder now holds an entry no report wrote (the
    # directory), which a report replaces only when told to.
    p = isobench("report", "-o", str(out), "--force")
    line = assert_one_error_line(p, 1)
    assert "cannot write the report" in line and victim.name in line


def test_report_into_a_read_only_folder(isobench, tmp_path, good):
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        probe = out / "probe"
        try:
            probe.write_text("x")
            probe.unlink()
            pytest.skip("this user can write a read-only folder (root)")
        except OSError:
            pass
        p = isobench("report", "-o", str(out))
        assert p.returncode in (1, 2)
        assert_one_error_line(p, p.returncode)
    finally:
        out.chmod(stat.S_IRWXU)
        shutil.rmtree(out)
