"""make test's time report (scripts/test-stages.py): the slowest tests beside
their limits, and a test that comes close to its limit shown wherever it
ranks."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

from conftest import REPO, limit

spec = importlib.util.spec_from_file_location("test_stages", REPO / "scripts" / "test-stages.py")
stages = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stages)


def test_slowest_first_with_their_limits_and_a_close_one_flagged():
    rows = [(float(i), 600.0, f"c test{i}") for i in range(1, 31)]
    rows.append((3.0, 10.0, "python test_x.py::test_y: its slowest child process"))
    lines = stages.time_report(rows)
    body = lines[2:]
    assert body[0].split() == ["30.00", "600", "5.0%", "c", "test30"]
    assert len([l for l in body if " c test" in l]) == stages.REPORT_ROWS
    # 3 s of 10 s: not among the slowest, shown below them, flagged.
    assert body[-2] == "closest to their limits besides:"
    assert body[-1].split()[:4] == ["3.00", "10", "30.0%", "<<"]
    assert all("<<" not in l for l in body[:-1])
    assert all(len(l) <= stages.SUMMARY_WIDTH for l in lines)


def test_cases_of_a_c_test_are_read_from_its_log(tmp_path, monkeypatch):
    build = tmp_path / "build-san"
    (build / "meson-logs").mkdir(parents=True)
    out = ("ok 1 - wasm: t_every_page_past_the_end_traps\n"
           "# time: wasm: t_every_page_past_the_end_traps: 2.500 s of its 1200 s limit\n1..1\n")
    (build / "meson-logs" / "testlog.json").write_text(
        json.dumps({"name": "wasm", "duration": 3.0, "stdout": out}) + "\n")
    monkeypatch.setattr(stages, "REPO", tmp_path)
    monkeypatch.setattr(stages, "meson_limits", lambda _b: {"wasm": 600.0})
    monkeypatch.setenv("ISOB_TIME_SCALE", "1")
    monkeypatch.setenv("SAN_TIME_SCALE", "4")
    rows = stages.meson_times("test-san", since=0)
    assert rows == [(3.0, 2400.0, "san wasm"),
                    (2.5, 1200.0, "san wasm: wasm: t_every_page_past_the_end_traps")]


def test_python_tests_and_their_closest_child_are_read(tmp_path, monkeypatch):
    times = tmp_path / "pytest-times.json"
    times.write_text(json.dumps([{"test": "tests/python/test_a.py::test_b", "time": 4.0,
                                  "limit": 1800, "closest": {"time": 3.5, "limit": 300}}]))
    monkeypatch.setattr(stages, "PYTEST_TIMES", times)
    assert stages.pytest_times(since=0) == [
        (4.0, 1800.0, "python test_a.py::test_b"),
        (3.5, 300.0, "python test_a.py::test_b: its slowest child process")]


def test_conftest_records_each_test_and_its_closest_guard(tmp_path):
    (tmp_path / "test_inner.py").write_text(
        "import subprocess, sys\n"
        "def test_waits():\n"
        "    subprocess.run([sys.executable, '-c', 'pass'], timeout=50)\n"
        "def test_none():\n"
        "    pass\n")
    (tmp_path / "conftest.py").write_text(
        (REPO / "tests" / "python" / "conftest.py").read_text())
    out = tmp_path / "times.json"
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(tmp_path / "test_inner.py")], cwd=tmp_path, capture_output=True,
                       text=True, timeout=limit(300),
                       env={**os.environ, "ISOB_TEST_TIMES": str(out),
                            "ISOB_TIME_SCALE": "2"})
    assert p.returncode == 0, p.stdout + p.stderr
    got = {t["test"].split("::")[1]: t for t in json.loads(out.read_text())}
    assert got["test_waits"]["limit"] == 7200   # TEST_LIMIT at ISOB_TIME_SCALE=2
    assert got["test_waits"]["closest"]["limit"] == 50
    assert 0 < got["test_waits"]["closest"]["time"] < 50
    assert got["test_none"]["closest"] is None
