"""Shared helpers: run the `isobench` command in a child process against the
fake native driver (fixtures/fake_isob.py), with a time-out so that a hang in
the code under test fails one test instead of stalling the suite.

Time-outs only turn a hang into a failure; none bounds a speed.  Each is set
far above what a busy machine needs, and limit() multiplies it by
ISOB_TIME_SCALE (a number >= 1; the Makefile exports it) for a machine
slower still.  Every test also runs under an alarm of TEST_LIMIT seconds,
and with ISOB_TEST_TIMES set, each test's time is written there beside that
limit and beside the closest any of its child processes came to its own
time-out (`make test`'s time report, scripts/test-stages.py)."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
FAKE_ISOB = FIXTURES / "fake_isob.py"
REAPER = FIXTURES / "reaper.py"
REPO = HERE.parents[1]
PYTHON_DIR = REPO / "python"



def _time_scale() -> float:
    raw = os.environ.get("ISOB_TIME_SCALE", "").strip() or "1"
    try:
        scale = float(raw)
    except ValueError:
        scale = 0.0
    if not 1 <= scale <= 1000:
        raise pytest.UsageError(f"ISOB_TIME_SCALE={raw}: not a number from 1 to 1000")
    return scale


TIME_SCALE = _time_scale()


def limit(seconds: float) -> float:
    """A hang guard of seconds on an ordinary machine, scaled for this one."""
    return seconds * TIME_SCALE


# Only a guard against a hung test: no test asserts how long anything takes.
# Most `isobench` commands against the fake driver take a second or two
# idle; the slowest, a report in every format, took 273 s of a busy 2-CPU
# machine (load average 21).
CHILD_TIMEOUT = limit(1200)
# The alarm of a whole test: the slowest took 357 s of that machine.
TEST_LIMIT = limit(3600)
# A child-process wait with a time-out this long or longer is a hang guard,
# and the time report shows how close it came; shorter ones poll.
GUARD_MIN_S = 5.0

sys.path.insert(0, str(PYTHON_DIR))


def load_fake():
    """The fake driver as a module, for its known samples."""
    spec = importlib.util.spec_from_file_location("fake_isob", FAKE_ISOB)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Isobench:
    """Runs `python -m isobench ...` with a controlled environment."""

    def __init__(self, tmp_path: Path):
        self.db = tmp_path / "results" / "isobench.sqlite"
        self.argv_log = tmp_path / "isob-argv.log"
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("ISOBENCH_", "FAKE_ISOB_"))}
        self.env.update({
            "ISOBENCH_ISOB": str(FAKE_ISOB),
            "ISOBENCH_DB": str(self.db),
            "FAKE_ISOB_ARGV_LOG": str(self.argv_log),
            "PYTHONPATH": str(PYTHON_DIR) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        })
        self.cwd = tmp_path

    def __call__(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        # `run` repeats every job 5 times by default (3 with --quick); a
        # test about something else runs each job once unless it says
        # otherwise.  test_repeat.py tests the defaults with as_is().
        if args[:1] == ("run",) and "--repeat" not in args:
            args = (*args, "--repeat", "1")
        return self.as_is(*args, **env)

    def as_is(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "isobench", *args], cwd=self.cwd,
                              env={**self.env, **env}, capture_output=True, text=True,
                              timeout=CHILD_TIMEOUT)

    def json(self, *args: str, **env: str) -> tuple[dict, subprocess.CompletedProcess]:
        p = self(*args, **env)
        assert p.stdout.strip(), f"no stdout; stderr: {p.stderr}"
        return json.loads(p.stdout), p

    def start(self, *args: str, **env: str) -> "Watched":
        """`isobench ARGS` started in the background under the reaper, which
        reports the processes it leaves behind (see fixtures/reaper.py)."""
        return Watched(self, args, env)

    def isob_calls(self, checks: bool = False) -> list[list[str]]:
        """The fake driver's invocations; those that only check a benchmark's
        options (`... --check`, asked before a run) only with checks=True."""
        if not self.argv_log.exists():
            return []
        calls = [json.loads(l) for l in self.argv_log.read_text().splitlines()]
        return [c for c in calls if checks or c[-1:] != ["--check"]]


class Watched:
    """A background `isobench` under fixtures/reaper.py."""

    def __init__(self, isobench: Isobench, args, env):
        self.report = isobench.cwd / f"reaper-{time.monotonic_ns()}.json"
        self.proc = subprocess.Popen(
            [sys.executable, str(REAPER), str(self.report), "--", sys.executable, "-m",
             "isobench", *args], cwd=isobench.cwd, env={**isobench.env, **env},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)

    @property
    def pid(self) -> int:
        """The isobench process (not the reaper): wait until it has started."""
        pidfile = Path(str(self.report) + ".pid")
        for _ in range(int(CHILD_TIMEOUT * 20)):
            if pidfile.exists() and pidfile.read_text():
                return int(pidfile.read_text())
            time.sleep(0.05)
        raise AssertionError("isobench did not start")

    def finish(self) -> tuple[dict, subprocess.CompletedProcess]:
        """(the reaper's report, the completed isobench) once it has exited."""
        try:
            out, err = self.proc.communicate(timeout=CHILD_TIMEOUT)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        report = json.loads(self.report.read_text())
        return report, subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)


@pytest.fixture
def isobench(tmp_path: Path) -> Isobench:
    return Isobench(tmp_path)


@pytest.fixture
def fake():
    return load_fake()


def assert_one_error_line(p: subprocess.CompletedProcess, code: int = 2) -> str:
    """The contract for bad input: exit code, exactly one stderr line, no traceback."""
    assert p.returncode == code, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("isobench: error: "), lines[0]
    return lines[0]


# -- The time report's record, and the alarm of each test. -------------------

_closest: list[tuple[float, float]] = []   # (elapsed, time-out) of the current test's guards
_times: list[dict] = []


def _recording(method):
    """method (Popen.wait or Popen.communicate) that records, for a call
    with a hang guard that returned, how long it took of its time-out."""
    sig = inspect.signature(method)

    def wrapper(self, *args, **kwargs):
        timeout = sig.bind(self, *args, **kwargs).arguments.get("timeout")
        t0 = time.monotonic()
        out = method(self, *args, **kwargs)
        if timeout is not None and timeout >= GUARD_MIN_S:
            _closest.append((time.monotonic() - t0, float(timeout)))
        return out
    wrapper.__wrapped__ = method
    return wrapper


class HungTest(Exception):
    """A test ran past TEST_LIMIT."""


def _alarm(signum, frame):
    raise HungTest(f"the test ran past its limit of {TEST_LIMIT:.0f} s (a hang guard; "
                   "ISOB_TIME_SCALE scales it)")


def pytest_configure(config):
    if not hasattr(subprocess.Popen.wait, "__wrapped__"):
        subprocess.Popen.wait = _recording(subprocess.Popen.wait)
        subprocess.Popen.communicate = _recording(subprocess.Popen.communicate)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Times setup, call and teardown together, and the closest guard."""
    _closest.clear()
    t0 = time.monotonic()
    yield
    closest = max(_closest, key=lambda et: et[0] / et[1], default=None)
    _times.append({"test": item.nodeid, "time": round(time.monotonic() - t0, 3),
                   "limit": TEST_LIMIT,
                   "closest": None if closest is None else
                   {"time": round(closest[0], 3), "limit": closest[1]}})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, TEST_LIMIT)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def pytest_sessionfinish(session):
    out = os.environ.get("ISOB_TEST_TIMES")
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(_times, indent=0) + "\n")
