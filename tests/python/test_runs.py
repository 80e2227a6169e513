"""`isobench runs`: every stored run on one line, --json, an empty store,
a missing one, and a damaged run that does not hide the others."""

import sqlite3

from conftest import assert_one_error_line


def test_runs_lists_every_run(isobench):
    isobench("run", "switch", "-q", "-m", "direct")
    isobench("run", "switch", "-q", "-m", "direct", "-m", "mpk", "--repeat", "2")
    p = isobench("runs")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert max(map(len, lines[1:])) <= 100
    header = lines[1].split()
    assert header[:3] == ["run", "started", "(UTC)"] and header[-1] == "command"
    rows = [l.split() for l in lines[3:5]]
    assert [r[0] for r in rows] == ["1", "2"]
    assert rows[0][3] == "ok" and rows[1][3] == "ok"
    # Run 2: direct's 4 results twice, and mpk skipped twice.
    assert "10 (2 skipped)" in lines[4] and "isobench run switch" in lines[4]
    doc, _ = isobench.json("runs", "--json")
    assert doc["schema_version"] >= 1 and [r["run_id"] for r in doc["runs"]] == [1, 2]
    assert doc["runs"][1]["results"] == {"ok": 8, "skipped": 2}
    assert doc["runs"][0]["argv"][:3] == ["isobench", "run", "switch"]
    assert doc["runs"][0]["host"]


def test_a_long_command_is_cut_to_fit(isobench):
    isobench("run", "switch", "-q", "-m", "direct", "--seed", "1" * 18, "--timeout", "100",
             "--placement", "same-cpu,cross-cpu")
    line = isobench("runs").stdout.splitlines()[3]
    assert len(line) == 100 and line.endswith("...")


def test_an_empty_store_says_so(isobench):
    from isobench.store import Store
    isobench.db.parent.mkdir()
    Store.open(isobench.db, create=True).close()
    p = isobench("runs")
    assert p.returncode == 0 and "holds no runs yet" in p.stdout


def test_no_store_is_usage(isobench):
    assert_one_error_line(isobench("runs"), 2)


def test_a_damaged_environment_does_not_hide_the_run(isobench):
    isobench("run", "switch", "-q", "-m", "direct")
    with sqlite3.connect(isobench.db) as c:
        c.execute("UPDATE runs SET environment = '{not json', argv = '[1' WHERE id = 1")
    p = isobench("runs")
    assert p.returncode == 0, p.stderr
    row = p.stdout.splitlines()[3].split()
    assert row[0] == "1" and row[4] == "?" and row[-1] == "?"
