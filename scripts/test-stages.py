#!/usr/bin/env python3
"""`make test`'s stages, one after the other, then one summary of them.

usage: test-stages.py STAGE... [VAR=VALUE...]

Each STAGE is a make target (test-c, test-san, test-arm64, test-python), run
as `$MAKE STAGE VAR=VALUE...` whatever the stages before it gave: its output
goes through as it comes (pytest's closing line included), and is read for
what the summary says of it:

  meson test (test-c, test-san,  its "Ok: / Fail: / Skipped:" counts, and each
  test-arm64)                    skipped test with the reason it printed
                                 (meson-logs/testlog.json)
  pytest (test-python)           its closing line, and each skip reason (-rs)
  "STAGE: SKIP: why"             skipped, with why (test-arm64 without a cross
                                 compiler or qemu-user)

Before the summary comes a time report: the slowest tests of the stages
that ran (each meson test, each case of a C test, each pytest test) with
their time beside their limit, and any other test past a tenth of its
limit, so that a limit creeping close is seen before it trips.  The limits
are the tests' hang guards: meson's time-outs (scaled as the Makefile's
ISOB_TIME_SCALE, SAN_TIME_SCALE and ARM64_TIME_SCALE say), the per-case
alarms the C tests print (tests/c/tap.h), the Python tests' own alarm and
the closest a child process came to its time-out (tests/python/conftest.py,
which writes them to ISOB_TEST_TIMES).

The summary is the last thing printed: one line per stage, ok, FAILED or
skipped, with the counts and reasons.  The exit status is 1 when any stage
failed, else 0.  SIGINT, SIGTERM and SIGHUP stop the stage running (its
process group) and end the script with 128+N.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Where each meson stage leaves its test log.
MESON_LOGS = {"test-c": "build", "test-san": "build-san", "test-arm64": "build-arm64"}
# The factor beyond ISOB_TIME_SCALE each meson stage multiplies its
# time-outs by (meson test -t; the Makefile exports them).
MESON_SCALE_VAR = {"test-san": "SAN_TIME_SCALE", "test-arm64": "ARM64_TIME_SCALE"}
# Where the Python stage leaves its tests' times (the Makefile exports it).
PYTEST_TIMES = Path(os.environ.get("ISOB_TEST_TIMES") or REPO / "build" / "pytest-times.json")
# The slowest tests the time report shows, and the share of its limit past
# which a test is flagged (and shown wherever it ranks): the limits are set
# ten times above what a busy machine needs.
REPORT_ROWS = 20
CLOSE_SHARE = 0.1
_TAP_TIME = re.compile(r"^# time: (.+): ([0-9.]+) s of its ([0-9]+) s limit$")

_PYTEST_END = re.compile(r"^=*\s*(?:\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|"
                         r"deselected|warnings?)[, ]*)+.* in [0-9.]+s.*$")
_PYTEST_SKIP = re.compile(r"^SKIPPED \[(\d+)\] [^:]+(?::\d+)?: (.*)$")
_MESON_COUNTS = re.compile(r"^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout):\s+(\d+)")
_SKIP_LINE = re.compile(r"\bSKIP:?\s+(.+)$")
SUMMARY_WIDTH = 100
# A stage's own "STAGE: SKIP: why" (scripts/test-arm64.sh).
_STAGE_SKIP = re.compile(r"^[\w-]+: SKIP: (.+)$")


def meson_skips(stage: str) -> list[str]:
    """'names: reason' per reason the stage's meson run skipped tests for."""
    log = REPO / MESON_LOGS[stage] / "meson-logs" / "testlog.json"
    by_reason: dict[str, list[str]] = {}
    try:
        lines = log.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            t = json.loads(line)
        except ValueError:
            continue
        if t.get("result") != "SKIP":
            continue
        said = [l.strip().lstrip("#").strip() for l in (t.get("stdout") or "").splitlines()
                if l.strip().lstrip("#").strip()]
        # "SKIP: why" (tests/skip.sh, TAP's "# SKIP why"), else its last line.
        why = next((m[1].strip() for m in map(_SKIP_LINE.search, said) if m),
                   said[-1] if said else "no reason printed")
        by_reason.setdefault(why, []).append(str(t.get("name")))
    return [f"{', '.join(names)}: {why}" for why, names in by_reason.items()]


def env_scale(var: str) -> float:
    try:
        return float(os.environ.get(var) or 1)
    except ValueError:
        return 1.0


def meson_limits(build: Path) -> dict[str, float]:
    """Each meson test's time-out in seconds, unscaled (0 for none)."""
    try:
        out = subprocess.run(["meson", "introspect", "--tests", str(build)], capture_output=True,
                             text=True, timeout=300, check=True).stdout
        return {t["name"]: float(t.get("timeout") or 0) for t in json.loads(out)}
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError):
        return {}


def meson_times(stage: str, since: float) -> list[tuple[float, float, str]]:
    """(time, limit, what) for each test and each C test case of the stage's
    meson run, if it wrote its log after since; limit 0 where none is known."""
    build = REPO / MESON_LOGS[stage]
    log = build / "meson-logs" / "testlog.json"
    try:
        if log.stat().st_mtime < since:
            return []
        lines = log.read_text().splitlines()
    except OSError:
        return []
    scale = env_scale("ISOB_TIME_SCALE") * env_scale(MESON_SCALE_VAR.get(stage, ""))
    limits = meson_limits(build)
    tag = stage.removeprefix("test-")
    rows = []
    for line in lines:
        try:
            t = json.loads(line)
        except ValueError:
            continue
        name = str(t.get("name"))
        rows.append((float(t.get("duration") or 0), limits.get(name, 0) * scale,
                     f"{tag} {name}"))
        for m in map(_TAP_TIME.match, (t.get("stdout") or "").splitlines()):
            if m:
                rows.append((float(m[2]), float(m[3]), f"{tag} {name}: {m[1]}"))
    return rows


def pytest_times(since: float) -> list[tuple[float, float, str]]:
    """(time, limit, what) of each Python test, and of the child-process wait
    of each that came closest to its time-out (tests/python/conftest.py)."""
    try:
        if PYTEST_TIMES.stat().st_mtime < since:
            return []
        tests = json.loads(PYTEST_TIMES.read_text())
    except (OSError, ValueError):
        return []
    rows = []
    for t in tests:
        name = str(t.get("test", "?")).removeprefix("tests/python/")
        rows.append((float(t.get("time") or 0), float(t.get("limit") or 0), f"python {name}"))
        closest = t.get("closest")
        if closest:
            rows.append((float(closest["time"]), float(closest["limit"]),
                         f"python {name}: its slowest child process"))
    return rows


def time_report(rows: list[tuple[float, float, str]]) -> list[str]:
    """The report's lines: the REPORT_ROWS slowest, then any other past
    CLOSE_SHARE of its limit; each with its time, limit and share."""
    if not rows:
        return []
    def share(r):
        return r[0] / r[1] if r[1] else 0.0
    slowest = sorted(rows, key=lambda r: -r[0])[:REPORT_ROWS]
    close = sorted((r for r in rows if share(r) >= CLOSE_SHARE and r not in slowest),
                   key=lambda r: -share(r))
    out = [f"the {len(slowest)} slowest of {len(rows)} tests and cases, with their limits "
           f"(hang guards; '<<' past 1/{round(1 / CLOSE_SHARE)} of it):",
           f"{'time s':>9} {'limit s':>9} {'share':>6}   test"]
    for title, part in (("", slowest), ("closest to their limits besides:", close)):
        if not part:
            continue
        if title:
            out.append(title)
        for r in part:
            flag = "<<" if share(r) >= CLOSE_SHARE else "  "
            limit = f"{r[1]:9.0f}" if r[1] else f"{'-':>9}"
            pct = f"{share(r):6.1%}" if r[1] else f"{'':>6}"
            what = r[2] if len(r[2]) <= SUMMARY_WIDTH - 32 else r[2][:SUMMARY_WIDTH - 35] + "..."
            out.append(f"{r[0]:9.2f} {limit} {pct} {flag} {what}")
    return out


def judge(stage: str, rc: int, lines: list[str]) -> tuple[str, str, list[str]]:
    """(state, counts, skips) of a stage that ended with rc and printed lines:
    skips says what was skipped and why, one reason each."""
    detail: list[str] = []
    skips: list[str] = []
    counts = {m[1]: int(m[2]) for m in map(_MESON_COUNTS.match, lines) if m}
    end = next((l.strip("= ").strip() for l in reversed(lines) if _PYTEST_END.match(l)), None)
    skipped_self = next((m[1].strip() for m in map(_STAGE_SKIP.match, lines) if m), None)
    if counts:
        detail.append(", ".join(f"{n} {k.lower()}" for k, n in counts.items() if n))
        if counts.get("Skipped") and stage in MESON_LOGS:
            skips += meson_skips(stage)
    if end:
        detail.append(end)
        skips += [f"{m[1]} x {m[2]}" if m[1] != "1" else m[2]
                  for m in map(_PYTEST_SKIP.match, lines) if m]
    if rc != 0:
        return "FAILED", "; ".join(detail) or f"exit status {rc}", skips
    if skipped_self and not counts and not end:
        return "skipped", skipped_self, []
    return "ok", "; ".join(detail), skips


def main(argv: list[str]) -> int:
    stages = [a for a in argv if "=" not in a]
    assigns = [a for a in argv if "=" in a]
    if not stages:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    make = os.environ.get("MAKE") or "make"
    child: subprocess.Popen | None = None

    def stop(signum, _frame):
        if child is not None and child.poll() is None:
            os.killpg(child.pid, signal.SIGTERM)
            child.wait()
        sys.exit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    results = []
    times: list[tuple[float, float, str]] = []
    for stage in stages:
        print(f"==== make test: {stage} ====", flush=True)
        started = time.time()
        lines: list[str] = []
        # A process group of its own, so that stopping it stops all it started.
        child = subprocess.Popen([make, "--no-print-directory", stage, *assigns], cwd=REPO,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 start_new_session=True, text=True, errors="replace")
        assert child.stdout is not None
        for line in child.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line.rstrip("\n"))
        rc = child.wait()
        child = None
        results.append((stage, *judge(stage, rc, lines)))
        times += (meson_times(stage, started) if stage in MESON_LOGS
                  else pytest_times(started) if stage == "test-python" else [])
    report = time_report(times)
    if report:
        print("\n==== make test: time report ====")
        print("\n".join(report))
    width = max(len(s) for s, *_ in results)
    indent = " " * (width + 2)
    print("\n==== make test: summary ====")
    for stage, state, detail, skips in results:
        print(f"{stage:<{width}}  {state:<7}  {detail}".rstrip())
        for skip in skips:
            print(textwrap.fill(skip, SUMMARY_WIDTH, initial_indent=indent + "skipped: ",
                                subsequent_indent=indent + "  ", break_on_hyphens=False))
    failed = [s for s, state, *_ in results if state == "FAILED"]
    print(f"make test: {len(failed)} of {len(results)} stages failed ({', '.join(failed)})"
          if failed else f"make test: every stage ok or skipped ({len(results)} stages)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
