"""Damaged store content: every reading command gives one line and exit 1 or
2, never a traceback.  Each case starts from a good store (a real run of the
fake driver) and damages one thing in it, as a bad disk, an interrupted copy
or another program could."""

import shutil
import sqlite3
import stat
import zlib

import pytest

from isobench import store as store_mod

from conftest import assert_one_error_line

READERS = [
    ["show"], ["show", "--json"], ["check"], ["export", "latest", "--format", "json"],
    ["export", "latest", "--format", "csv"], ["compare", "1", "1"], ["report", "-o", "OUT"],
]
# `report` reads a run as `check` does, then draws plots (slow): it is run
# for the damage that reaches each part of the store once.
REPORTED = ("corrupt sample blob", "corrupt params JSON", "corrupt environment JSON",
            "corrupt job load JSON")


@pytest.fixture
def good(isobench, tmp_path):
    """A store holding one run: direct and thread, with a skipped mpk."""
    p = isobench("run", "switch", "-q", "-m", "direct", "-m", "thread", "-m", "mpk")
    assert p.returncode == 0, p.stderr
    return isobench.db


def _sql(db, *statements):
    conn = sqlite3.connect(db)
    for s in statements:
        conn.execute(s[0], s[1:]) if isinstance(s, tuple) else conn.execute(s)
    conn.commit()
    conn.close()


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


DAMAGE = {
    "corrupt sample blob": ("UPDATE samples SET data = x'deadbeef' WHERE rowid = 1",),
    "sample blob of the wrong length": (
        ("UPDATE samples SET data = ? WHERE rowid = 1", zlib.compress(b"12345")),),
    "sample count that disagrees": ("UPDATE samples SET count = count + 1 WHERE rowid = 1",),
    "sample encoding unknown": ("UPDATE samples SET encoding = 'lz4' WHERE rowid = 1",),
    "corrupt params JSON": ("UPDATE results SET params = '{\"placement\": ' WHERE id = 1",),
    "params not an object": ("UPDATE results SET params = '[1, 2]' WHERE id = 1",),
    "corrupt header JSON": ("UPDATE results SET header = 'not json' WHERE id = 2",),
    "corrupt environment JSON": ("UPDATE runs SET environment = '{' WHERE id = 1",),
    "environment not an object": ("UPDATE runs SET environment = '\"text\"' WHERE id = 1",),
    "corrupt argv JSON": ("UPDATE runs SET argv = '[' WHERE id = 1",),
    "corrupt options JSON": ("UPDATE runs SET options = '{{' WHERE id = 1",),
    "aggregates not a list": ("UPDATE runs SET aggregates = '{}' WHERE id = 1",),
    "corrupt job load JSON": ("UPDATE jobs SET load = 'x' WHERE id = 1",),
    "unknown run status": ("UPDATE runs SET status = 'exploded' WHERE id = 1",),
    "median not a number": ("UPDATE results SET median = 'fast' WHERE id = 1",),
    "count not a count": ("UPDATE results SET n = 'many' WHERE id = 1",),
}


@pytest.mark.parametrize("name", list(DAMAGE))
def test_damaged_content(isobench, tmp_path, good, name):
    _sql(good, *DAMAGE[name])
    lines = _reads(isobench, tmp_path, report=name in REPORTED)
    # Every command that reads the damaged part says where it is.
    assert any(lines), f"{name}: no command noticed"
    for line in filter(None, lines):
        assert str(good) in line or "damaged" in line or "not" in line, line


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
    p = isobench("report", "-o", str(out))
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
