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

- ``--tls``: lwC's isolated OpenSSL key (10,000 handshakes, 99.7 s with the
  key in nginx, 100.4 s with it in an lwC): ``isob serve -m direct --http
  --tls K`` for K in process (the key in the server) and lwc (the key only
  in a light-weight context that signs), each loaded by ``isob tlsload``:
  10,000 full handshakes one after another (--quick: 1,000), each a new
  connection with one GET checked byte for byte.  The result's samples are
  the handshakes' times (connect to handshake done, ns); params hold the
  total seconds (``handshake_seconds``), the handshakes per second, and the
  server's CPU seconds (its process and every process below it, the key's
  context included) per handshake.  Then, per key and session length L (as
  lwc-serve's), HTTPS throughput: ``isob tlsload`` with 16 threads, each
  running sessions of L keep-alive requests over one TLS connection (a
  full handshake per session) for the point's seconds.

- ``--session MODE,...``: the session modes --monitor and --tls run under
  (default shared): ``prefork`` and ``rollback`` are lwC's Apache (a
  worker per connection, each with its own broker or monitored context,
  or its own key's context), ``fork`` a process per session,
  ``per-connection`` lwC's nginx with a context per connection (monitors
  none, inline and procsep only; not with --tls).  Without --monitor and
  --tls, the HTTP case at every --doc-bytes in these modes only.
- ``--tls-key TYPE,...``: the key --tls makes at start-up, rsa2048 (the
  default: lwC's figures most likely used RSA, whose signing cost sets
  what a handshake costs) and/or ecdsa-p256.

Any of these options makes lwc-serve measure only these points: its
memcached and start-up variants run when none is given.  Every result is an
lwc-serve result (lwcserve.py's params, plus ``monitor``, ``doc_bytes``,
``tls_key``, ``tls_key_type``; ``server`` is the session mode)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from typing import Callable, Iterator, Mapping, Sequence

from . import cputime, lwcserve, proc
from .kvserver import StartError
from .lwcserve import (CONNECTIONS, FD_SLACK, MODES, QUICK_LENGTHS, LENGTHS, SERVE,
                       SERVE_MECHANISM, run_loadgen, result_from, start_isob)
from ..core.records import NO_MECHANISM, Result
from ..store import now_ms

MONITORS = ("none", "inline", "procsep", "lwc")
DOC_BYTES = (45, 900)
DEFAULT_DOC = 45
OPTIONS = ("--monitor", "--doc-bytes", "--tls", "--session", "--tls-key")
TLS_KEYS = ("process", "lwc")
SESSIONS = ("shared", "prefork", "rollback", "fork", "per-connection")
DEFAULT_SESSIONS = ("shared",)
KEY_TYPES = ("rsa2048", "ecdsa-p256")
DEFAULT_KEY_TYPES = ("rsa2048",)
HANDSHAKES = 10_000
# Workers of prefork and rollback for the handshakes one after another.
HANDSHAKE_WORKERS = 2
QUICK_HANDSHAKES = 1_000
# Per handshake at most, only so that nothing can hang a run.
HANDSHAKE_SLACK_S = 0.1
STOP_WAIT = 10.0

_CHECKED = re.compile(r"isob serve: monitor ([\w-]+): (\d+) system calls checked, (\d+) refused")


def wanted(options: Mapping[str, Sequence[str]]) -> bool:
    """Whether lwc-serve's options ask for these points."""
    return any(options.get(o) for o in OPTIONS)


def check(options: Mapping[str, Sequence[str]]) -> str | None:
    """Why these options cannot run together, or None."""
    sessions = tuple(options.get("--session") or ())
    if options.get("--tls-key") and not options.get("--tls"):
        return "lwc-serve: --tls-key is the key --tls makes: it needs --tls"
    if options.get("--tls") and "per-connection" in sessions:
        return ("lwc-serve: --tls does not run with --session per-connection (isob serve "
                "refuses it: the connection's TLS state would be made before its context)")
    if "lwc" in (options.get("--monitor") or ()) and "per-connection" in sessions:
        return ("lwc-serve: --monitor lwc does not run with --session per-connection (the "
                "emulation cannot supervise contexts made inside a monitored context)")
    return None


def session_args(mode: str, workers: int = CONNECTIONS) -> list[str]:
    """isob serve's arguments for a session mode: under prefork and
    rollback a worker per connection, as lwc-serve's own points."""
    if mode == "per-connection":
        return ["--per-connection"]
    workers = ["--workers", str(workers)] if mode in ("prefork", "rollback") else []
    return ["--session", mode, *workers]


def parse(args: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """lwc-serve's isob-style arguments (runner.pass_through:
    ("--monitor", "none,lwc", ...)) as {"--monitor": ("none", "lwc")}."""
    out: dict[str, tuple[str, ...]] = {}
    it = iter(args)
    for flag in it:
        out[flag] = tuple(v for v in next(it, "").split(",") if v)
    return out


def points(quick: bool, monitors: Sequence[str], docs: Sequence[int],
           sessions: Sequence[str] = ()) -> Iterator[tuple[str, str | None, int, int]]:
    """(server mode, monitor or None, document bytes, L) in measuring order:
    with monitors, each in each of sessions (default shared); without, the
    HTTP case in each of sessions (default every mode)."""
    for doc in docs:
        for server, mon in ([(sm, m) for sm in (sessions or DEFAULT_SESSIONS) for m in monitors]
                            if monitors else [(m, None) for m in (sessions or MODES)]):
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
            # The output read before the stop: the log is closed now.
            last = [l.strip() for l in output.splitlines() if l.strip()]
            return Result.failure(SERVE, NO_MECHANISM, "the server did not say what its monitor "
                                  f"checked: {last[-1] if last else 'no message'}",
                                  params=params)
        params = {**params, "monitored_calls": counts[0], "denied": counts[1]}
    if params.get("server") == "rollback":
        params = {**params, **lwcserve.rollback_totals(output)}
    return result_from(SERVE, params, line)


def tree_cpu(pid: int) -> float | None:
    """CPU seconds of pid and every live process below it, reaped children
    included, by the scheduler's count (measure/cputime.py); None where pid
    is gone."""
    t = cputime.tree_cpu(pid)
    return None if t is None else t.seconds


def _tlsload(isob: str, port: int, handshakes: int, doc: int,
             sweep: tuple[int, float] | None = None) -> tuple[dict | None, str]:
    """isob tlsload: handshakes one after another, or with sweep = (L,
    seconds) CONNECTIONS threads running sessions of L requests."""
    argv = [isob, "tlsload", "--port", str(port), "--doc-bytes", str(doc)]
    argv += (["--handshakes", str(handshakes)] if sweep is None else
             ["--conns", str(CONNECTIONS), "--session", str(sweep[0]),
              "--duration", f"{sweep[1]:g}"])
    found, on_line = proc.json_objects(lambda obj: obj.get("type") == "tlsload")

    limit = lwcserve.CLIENT_SLACK + (handshakes * HANDSHAKE_SLACK_S if sweep is None
                                     else sweep[1])
    try:
        ex = proc.run_lines(argv, timeout=limit, on_line=on_line)
    except OSError as e:
        return None, f"cannot run {isob} tlsload: {e.strerror or e}"
    line = found[0] if found else None
    if ex.timed_out:
        return line, f"isob tlsload timed out after {limit:g} s"
    if ex.returncode == 4:
        return None, f"SKIP: {ex.stderr_tail()}"
    if line is None:
        return None, (f"isob tlsload exited with status {ex.returncode} and printed no result: "
                      f"{ex.stderr_tail() or 'no message'}")
    if sweep is not None and (ex.returncode != 0 or line.get("errors")
                              or not line.get("requests")):
        return line, (f"isob tlsload saw {line.get('errors')} error(s), the first: "
                      f"{line.get('error_first') or ex.stderr_tail() or 'none given'}")
    if sweep is None and (ex.returncode != 0 or line.get("errors")
                          or line.get("verified") != handshakes):
        return line, (f"isob tlsload saw {line.get('errors')} error(s), the first: "
                      f"{line.get('error_first') or ex.stderr_tail() or 'none given'}")
    return line, ""


def _measure_tls(params: dict, isob: str, doc: int, handshakes: int, pinned,
                 sweep: tuple[int, float] | None = None) -> Result:
    """One --tls point: handshakes one after another, or (sweep) sessions
    of L requests from CONNECTIONS threads for some seconds."""
    server_cpu = pinned[0] if pinned else None
    extra = [*session_args(params["server"], params.get("workers") or CONNECTIONS),
             "--http", "--doc-bytes", str(doc), "--tls",
             params["tls_key"], "--tls-key", params["tls_key_type"],
             "--max-conns", str(CONNECTIONS + FD_SLACK)]
    try:
        server, port = start_isob(isob, extra, server_cpu)
    except StartError as e:
        return Result.failure(SERVE, NO_MECHANISM, str(e), params=params,
                              status="skipped" if e.skipped else "failed")
    except OSError as e:
        return Result.failure(SERVE, NO_MECHANISM, f"cannot start the server: {e.strerror or e}",
                              params=params)
    try:
        before = tree_cpu(server.proc.pid)
        line, error = _tlsload(isob, port, handshakes, doc, sweep)
        after = tree_cpu(server.proc.pid)
        if not error and server.proc.poll() is not None:
            error = f"the server exited during the run: {server.tail()}"
    finally:
        server.stop()
    if error.startswith("SKIP: "):
        return Result.failure(SERVE, NO_MECHANISM, error[6:], params=params, status="skipped")
    if error:
        return Result.failure(SERVE, NO_MECHANISM, error, params=params)
    if sweep is not None:
        return _sweep_result(params, line, before, after)
    lat = line.get("handshake_us") or {}
    cpu = line.get("cpu") or {}
    secs = float(line["seconds"])
    srv = None if before is None or after is None else after - before
    p = {**params, "handshakes_done": line.get("verified"),
         "handshake_seconds": round(secs, 6),
         "handshakes_per_s": round(handshakes / secs, 3) if secs > 0 else None,
         "server_cpu_s": None if srv is None else round(srv, 4),
         "server_cpu_per_handshake_us": None if srv is None else round(srv / handshakes * 1e6, 3),
         "client_cpu_s": round((cpu.get("user_s") or 0) + (cpu.get("sys_s") or 0), 4),
         "samples_every": line.get("samples_every"),
         "samples": "per-handshake time, connect to handshake done, every samples_every-th, ns"}
    for q in ("p50", "p90", "p99", "mean", "max"):
        p[f"handshake_{q}_us"] = lat.get(q)
    return Result(benchmark=SERVE, mechanism=NO_MECHANISM, params=p, status="ok", unit="ns",
                  counter="tlsload", samples=[int(v) for v in line["samples_ns"]])


def _sweep_result(params: dict, line: dict, before, after) -> Result:
    """An HTTPS session-length point: throughput and the latency quantiles
    tlsload gives (it keeps no per-request samples: the one sample is the
    run's mean time per request, in ns)."""
    lat = line.get("latency_us") or {}
    cpu = line.get("cpu") or {}
    requests = line.get("requests") or 0
    srv = None if before is None or after is None else after - before
    secs = float(line["seconds"])
    p = {**params, "throughput_rps": round(float(line["throughput_rps"]), 3),
         "requests": requests, "sessions_done": line.get("sessions"),
         "duration_s": round(secs, 6),
         "server_cpu_s": None if srv is None else round(srv, 4),
         "client_cpu_s": round((cpu.get("user_s") or 0) + (cpu.get("sys_s") or 0), 4),
         "samples": "the run's wall-clock time per request (duration / requests), ns"}
    for q in ("p50", "p90", "p99", "mean", "max"):
        p[f"latency_{q}_us"] = lat.get(q)
    return Result(benchmark=SERVE, mechanism=NO_MECHANISM, params=p, status="ok", unit="ns",
                  counter="tlsload", samples=[int(secs / requests * 1e9)])


def measure(isob: str, quick: bool, seconds: float, options: Mapping[str, Sequence[str]],
            emit: Callable[[Result], None]) -> None:
    docs = [int(d) for d in options.get("--doc-bytes") or ()] or [DEFAULT_DOC]
    sessions = tuple(options.get("--session") or ())
    if options.get("--tls"):
        pinned = lwcserve._pinning()
        handshakes = QUICK_HANDSHAKES if quick else HANDSHAKES
        for mode in sessions or DEFAULT_SESSIONS:
            for ktype in options.get("--tls-key") or DEFAULT_KEY_TYPES:
                for doc in docs:
                    base = {"client": "isob tlsload", "server": mode, "proto": "https",
                            "tls_key_type": ktype, "doc_bytes": doc,
                            "serve_mechanism": SERVE_MECHANISM,
                            "server_cpu": pinned[0] if pinned else None}
                    for key in TLS_KEYS:
                        params = {**base, "tls_key": key, "handshakes": handshakes}
                        if mode in ("prefork", "rollback"):
                            # One client at a time: two workers, so that one
                            # rolls back while the other serves, and two keys'
                            # contexts to start (an RSA key each) rather than 16.
                            params["workers"] = HANDSHAKE_WORKERS
                        emit(_measure_tls(params, isob, doc, handshakes, pinned))
                    # HTTPS throughput per session length (lwC's Apache and
                    # nginx over HTTPS): a full handshake per session.
                    for key in TLS_KEYS:
                        for length in (QUICK_LENGTHS if quick else LENGTHS):
                            params = {**base, "tls_key": key, "session": length,
                                      "conns": CONNECTIONS, "seconds": seconds}
                            emit(_measure_tls(params, isob, doc, 0, pinned, (length, seconds)))
        # With --tls, --doc-bytes is the handshakes' document; the HTTP
        # points run only with --monitor.
        if not options.get("--monitor"):
            return
    monitors = list(options.get("--monitor") or ())
    pinned = lwcserve._pinning()
    for server, mon, doc, length in points(quick, monitors, docs, sessions):
        params = {**lwcserve._base(pinned, seconds), "server": server, "proto": "http",
                  "startup_mb": 0, "session": length, "conns": CONNECTIONS,
                  "serve_mechanism": SERVE_MECHANISM, "doc_bytes": doc}
        extra = [*session_args(server), "--http", "--doc-bytes", str(doc),
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
