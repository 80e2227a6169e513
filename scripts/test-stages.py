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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Where each meson stage leaves its test log.
MESON_LOGS = {"test-c": "build", "test-san": "build-san", "test-arm64": "build-arm64"}

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
    for stage in stages:
        print(f"==== make test: {stage} ====", flush=True)
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
