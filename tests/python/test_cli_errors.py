"""Bad input: one line on stderr, exit code 2, never a traceback."""

import shutil

import pytest

from conftest import FIXTURES, assert_one_error_line


@pytest.mark.parametrize("args, needle", [
    (["run", "nosuchbench"], "unknown benchmark 'nosuchbench'"),
    (["run", "-m", "nosuchmech"], "unknown mechanism 'nosuchmech'"),
    (["run", "-m", "direct,nosuchmech"], "unknown mechanism 'nosuchmech'"),
    (["run", "--n", "many"], "not a whole number"),
    (["run", "--n", "0"], "at least 1"),
    (["run", "--timeout", "-3"], "positive number of seconds"),
    (["run", "--placement", "same-cpu,moon"], "placements are"),
    (["run", "--counter", "rdtsc"], "'rdtsc' is not a counter: one of perf, "),
    (["run", "--scope", "system"], "'system' is not a scope: one of thread, cpu"),
    (["run", "kv", "--sizes", "100"], "'100' is not a multiple of 64 bytes"),
    (["run", "kv", "--sizes", "4X"], "'4X' is not a size in bytes"),
    (["run", "kv", "--sizes", "32G"], "'32G' is not a multiple of 64 bytes"),
    (["run", "kv", "--sizes", ","], "at least one size"),
    (["run", "--frobnicate"], "unrecognized arguments"),
    (["export", "1", "--format", "xml"], "invalid choice"),
    (["export", "1"], "--format"),
    (["nosuchcommand"], "invalid choice"),
    ([], "required"),
])
def test_bad_usage(isobench, args, needle):
    line = assert_one_error_line(isobench(*args))
    assert needle in line


def test_unknown_names_do_not_create_a_store(isobench):
    isobench("run", "nosuchbench")
    assert not isobench.db.exists()


def test_unwritable_db_folder(isobench, tmp_path):
    # A regular file where the folder should be: unwritable even for root.
    (tmp_path / "plain-file").write_text("x")
    p = isobench("run", "-m", "direct", "--db", str(tmp_path / "plain-file" / "db.sqlite"))
    assert "cannot create the folder" in assert_one_error_line(p)
    # Nothing ran: the store is checked before any benchmark.
    assert not [c for c in isobench.isob_calls() if c[0] == "switch"]


def test_db_is_a_directory(isobench, tmp_path):
    assert "is a directory" in assert_one_error_line(isobench("run", "--db", str(tmp_path)))


@pytest.mark.parametrize("command", [["run", "-m", "direct"], ["show"],
                                     ["export", "latest", "--format", "csv"]])
def test_corrupt_db_file(isobench, tmp_path, command):
    db = tmp_path / "corrupt.sqlite"
    shutil.copy(FIXTURES / "not_a_db.sqlite", db)
    line = assert_one_error_line(isobench(*command, "--db", str(db)))
    assert "not an isobench store" in line


def test_unknown_run_id(isobench):
    isobench("run", "-m", "direct")
    line = assert_one_error_line(isobench("show", "42"))
    assert "no run 42" in line
    assert_one_error_line(isobench("export", "42", "--format", "json"))
    assert "not a number" in assert_one_error_line(isobench("show", "yesterday"))


def test_show_without_store(isobench):
    line = assert_one_error_line(isobench("show"))
    assert "no store" in line
    assert not isobench.db.exists()


def test_export_to_unwritable_file(isobench, tmp_path):
    isobench("run", "-m", "direct")
    p = isobench("export", "latest", "--format", "csv", "-o", str(tmp_path / "no" / "dir" / "x"))
    assert "cannot write" in assert_one_error_line(p)
