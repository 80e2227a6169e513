"""lwc-serve's options for lwC's servers as the source ran them
(`isobench run lwc-serve --monitor LIST --doc-bytes LIST`; docs/serve.md
"Reference monitors" and "Document size").

lwC (Litton et al., OSDI 2016) ran Apache prefork with a reference monitor
of three kinds (inline: an LD_PRELOAD wrapper; procsep: a monitor process;
lwc-mon: the server in a light-weight context whose system calls trap to
its creator), and nginx with 45-byte and 900-byte documents.  Here:

- ``--monitor M,...``: ``isob serve -m direct --http --session shared
  --monitor M`` for each M in none, inline, procsep, lwc, per session
  length L, each GET reading the document from a file with openat and
  pread64, the calls the monitor checks.  ``none`` reads the same file
  unchecked: the baseline of the others.  The server prints the calls its
  monitor checked; the result keeps them (``monitored_calls``) so that a
  monitor that checked nothing is seen.
- ``--doc-bytes N,...``: the document's size (45 and 900, lwC's two).
  With --monitor, every monitor at every size; without, lwc-serve's HTTP
  case (every session mode, the document from the store) at every size.

Either option makes lwc-serve measure only these points: its memcached and
start-up variants run when neither is given.  Every result is an lwc-serve
result (lwcserve.py's params, plus ``monitor`` and ``doc_bytes``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from typing import Callable, Iterator, Mapping, Sequence

from . import lwcserve
from .kvserver import StartError
from .lwcserve import (CONNECTIONS, FD_SLACK, MODES, QUICK_LENGTHS, LENGTHS, SERVE,
                       SERVE_MECHANISM, run_loadgen, result_from, start_isob)
from .records import NO_MECHANISM, Result
from ..store import now_ms

MONITORS = ("none", "inline", "procsep", "lwc")
DOC_BYTES = (45, 900)
DEFAULT_DOC = 45
OPTIONS = ("--monitor", "--doc-bytes")
STOP_WAIT = 10.0

_CHECKED = re.compile(r"isob serve: monitor ([\w-]+): (\d+) system calls checked, (\d+) refused")


def wanted(options: Mapping[str, Sequence[str]]) -> bool:
    """Whether lwc-serve's options ask for these points."""
    return any(options.get(o) for o in OPTIONS)


def parse(args: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """lwc-serve's isob-style arguments (runner.pass_through:
    ("--monitor", "none,lwc", ...)) as {"--monitor": ("none", "lwc")}."""
    out: dict[str, tuple[str, ...]] = {}
    it = iter(args)
    for flag in it:
        out[flag] = tuple(v for v in next(it, "").split(",") if v)
    return out


def points(quick: bool, monitors: Sequence[str], docs: Sequence[int]
           ) -> Iterator[tuple[str, str | None, int, int]]:
    """(server mode, monitor or None, document bytes, L) in measuring order."""
    for doc in docs:
        for server, mon in ([("shared", m) for m in monitors] if monitors
                            else [(m, None) for m in MODES]):
            for length in (QUICK_LENGTHS if quick else LENGTHS):
                yield server, mon, doc, length


def monitor_counts(output: str) -> tuple[int, int] | None:
    """(checked, refused) from the server's last monitor line, or None."""
    found = _CHECKED.findall(output)
    return (int(found[-1][1]), int(found[-1][2])) if found else None


def _measure(params: dict, extra: list[str], isob: str, doc: int, length: int,
             seconds: float, pinned) -> Result:
    server_cpu, client_cpu = pinned if pinned else (None, None)
    try:
        server, port = start_isob(isob, extra, server_cpu)
    except StartError as e:
        return Result.failure(SERVE, NO_MECHANISM, str(e), params=params,
                              status="skipped" if e.skipped else "failed")
    except OSError as e:
        return Result.failure(SERVE, NO_MECHANISM, f"cannot start the server: {e.strerror or e}",
                              params=params)
    output = ""
    try:
        line, error = run_loadgen(isob, port, server.proc.pid, proto="http", conns=CONNECTIONS,
                                  session=length, seconds=seconds, cpu=client_cpu,
                                  extra=("--doc-bytes", str(doc)))
        if not error and server.proc.poll() is not None:
            error = f"the server exited during the run: {server.tail()}"
        # Stopped here, so that its last words (the monitor's count) are read.
        try:
            os.killpg(server.proc.pid, signal.SIGTERM)
            server.proc.wait(timeout=STOP_WAIT)
        except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
            pass
        output = server.output()
    finally:
        server.stop()
    if error:
        return Result.failure(SERVE, NO_MECHANISM, error, params=params)
    if params.get("monitor"):
        counts = monitor_counts(output)
        if counts is None:
            return Result.failure(SERVE, NO_MECHANISM, "the server did not say what its monitor "
                                  f"checked: {server.tail()}", params=params)
        params = {**params, "monitored_calls": counts[0], "denied": counts[1]}
    return result_from(SERVE, params, line)


def measure(isob: str, quick: bool, seconds: float, options: Mapping[str, Sequence[str]],
            emit: Callable[[Result], None]) -> None:
    monitors = list(options.get("--monitor") or ())
    docs = [int(d) for d in options.get("--doc-bytes") or ()] or [DEFAULT_DOC]
    pinned = lwcserve._pinning()
    for server, mon, doc, length in points(quick, monitors, docs):
        params = {**lwcserve._base(pinned, seconds), "server": server, "proto": "http",
                  "startup_mb": 0, "session": length, "conns": CONNECTIONS,
                  "serve_mechanism": SERVE_MECHANISM, "doc_bytes": doc}
        extra = ["--session", server, "--http", "--doc-bytes", str(doc),
                 "--max-conns", str(CONNECTIONS + FD_SLACK)]
        if mon:
            params["monitor"] = mon
            extra += ["--monitor", mon]
        emit(_measure(params, extra, isob, doc, length, seconds, pinned))


def run(isob: str, quick: bool, asked_seconds: float | None, options: Mapping[str, Sequence[str]],
        on_result: Callable[[Result, str, str], None]) -> list[Result]:
    """One repetition of lwc-serve with these options, as lwcserve.run."""
    seconds = lwcserve.seconds_for(quick, asked_seconds)
    out: list[Result] = []
    mark = [now_ms()]

    def emit(r: Result) -> None:
        started, mark[0] = mark[0], now_ms()
        out.append(r)
        on_result(r, started, mark[0])

    measure(isob, quick, seconds, options, emit)
    return out
