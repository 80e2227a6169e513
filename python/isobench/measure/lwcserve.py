"""lwC's server use cases: `isobench run lwc-serve` and `isobench run lwc-conns`.

Like kv-server (kvserver.py), these are orchestrated from Python: real
servers, loaded by a real client, ``isob loadgen`` (src/loadgen/), which
checks every reply byte for byte and prints one JSON line with its
throughput, latency percentiles and the CPU time of itself and of the
server's process tree over the run.

lwc-serve (the rollback use case, docs/serve.md "Sessions"): ``isob serve -m
direct --session MODE`` for MODE in shared, fork, prefork (workers that serve
sessions one after another with no rollback: lwC's baseline without
isolation), rollback (the same workers rolling back after each session) and
per-connection (``--per-connection``: a light-weight context per
connection); prefork and rollback with a worker per connection; loaded with
sessions of L requests (a connection closed and opened again after L), for
L in 1, 2, 4, ..., 256 and 4096 (--quick: 1, 16, 256, 4096), over the
memcached protocol,
over HTTP/1.0 GET of the 45-byte document, and over the memcached protocol
with 64 MiB of start-up state (``--startup-mb 64``, the PHP case of the lwC
slides: fork pays start-up per session, rollback only the discard).

lwc-conns (the session-isolation use case): ``isob serve --per-connection``
(one light-weight context per connection) beside ``isob serve -m direct``
(one shared store) and memcached (one worker thread), at concurrency C in
16, 64, 256, 1024, 4096 (--quick: 16, 256, 1024) long-lived connections,
each run for at least C/128 seconds: opening every connection (and its
context) is part of the run and of its throughput.  A
concurrency the descriptor limit cannot hold (the client's C sockets and
the server's C) gives a skipped result that names the limit; nothing runs
beyond it.

lwc-serve also runs memcached (``memcached -t 1``) over the memcached
protocol at each L, under the same load: the reference every server's CPU
per request is read against.

lwc-curve (open loop, docs/serve.md "Open loop"): shared, rollback and
memcached at sessions of CURVE_SESSION requests, CURVE_CONNS connections,
loaded by ``isob loadgen --rate R`` (Poisson arrivals, latency from the
scheduled send time) for R = CURVE_START, x CURVE_FACTOR, ... (--quick:
x CURVE_QUICK_FACTOR) up to the knee: the sweep of a server stops after
the first rate where the achieved rate falls below CURVE_KNEE x the offered
one, or p99 exceeds CURVE_P99_BLOWUP x its p99 at the lowest rate (that
point is kept, marked ``knee``), or at CURVE_MAX.

All take no mechanism: their results carry mechanism "-" and say what
served in params (``server``: shared, fork, rollback, per-connection, direct
or memcached).  One result per point:

- samples (unit ns): per-request latencies, every k-th in measuring order
  (loadgen --samples), k in ``params.samples_every``;
- ``params.throughput_rps`` and ``latency_{p50,p90,p99,p999,mean,max}_us``:
  loadgen's figures over every request, not only the kept samples;
- ``params.server_cpu_us_per_req`` (the headline, analysis/kit/cpu.py) and
  ``params.client_cpu_us_per_req``: each side's CPU seconds over the
  requests verified, in microseconds;
- ``params.client_busy`` and ``params.server_busy``: CPU seconds over the
  run's wall-clock seconds of the generator and of the server with every
  process below it (fork and rollback sessions are processes).  Each is
  pinned to a CPU of its own when two are allowed, so a figure near 1 is a
  saturated CPU: the section says which of the two saturated first;
- ``params.server_blocked_per_req``: the times the server's threads
  blocked (voluntary context switches, /proc/PID/task/TID/status, read by
  loadgen before and after) over the requests verified, and
  ``params.server_processes_ended``: processes of the server that ended
  during the run, whose switches are missing (a lower bound then);
- rollback only: ``params.rollback_*`` from the server's last line (its
  rollbacks over the run, summed over the workers): the method that ran,
  the sessions rolled back, the pages copied back and the time spent, and
  per session ``rollback_us_per_session`` and ``rollback_pages_per_session``.

A point whose client saw a wrong reply or a failed connection is a failed
result with loadgen's first error: throughput of wrong answers is not
throughput.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
from typing import Callable, Iterator, Sequence

from . import cputime, kvserver, proc
from .kvserver import Server, StartError, pinned_cpus, start_serve
from ..core.records import NO_MECHANISM, Result
from ..store import now_ms

SERVE = "lwc-serve"
CONNS = "lwc-conns"
CURVE = "lwc-curve"
BENCHMARKS = (SERVE, CONNS, CURVE)

MODES = ("shared", "fork", "prefork", "rollback", "per-connection")
LENGTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 4096)
QUICK_LENGTHS = (1, 16, 256, 4096)
# (protocol, start-up MiB): the plain server over both protocols, then the
# start-up-heavy variant.
VARIANTS = (("memcache", 0), ("http", 0), ("memcache", 64))

CONCURRENCY = (16, 64, 256, 1024, 4096)
QUICK_CONCURRENCY = (16, 256, 1024)
CONNS_SERVERS = ("per-connection", "direct", "memcached")
# Requests per connection in lwc-conns: more than any run sends, so every
# connection (and its context) lives through the run.
LONG_SESSION = 1_000_000_000

SERVE_MECHANISM = "direct"  # the store's compartment under every isob server here
CONNECTIONS = 16            # lwc-serve's concurrent sessions
KEYS = 1000
VALUE_BYTES = 45
# isob serve's heap: the keys need some 100 KiB.  The heap is populated at
# start-up (once, in the listener: fork sessions share it copy-on-write and
# pay only for what they write); the start-up-heavy variant adds its 64 MiB,
# which fork writes per session on purpose.  memcached allocates as it fills
# and keeps its usual 64.
HEAP_MB = 8
MEMCACHED_MB = 64
SAMPLES = 2000
SECONDS = 2.0
QUICK_SECONDS = 1.0
STARTUP_SECONDS = 3.0  # at least, for the start-up-heavy variant

# lwc-conns loads each server for at least this many seconds per
# connection: opening C connections (and, per connection, a context) is part
# of the run, and at 4096 it takes seconds on a small machine.
SECONDS_PER_CONN = 1 / 128

# lwc-curve: the servers, their sessions and connections, and the offered
# rates.  Open loop needs connections to spare: one has a request in flight
# at a time, so C must stay above rate x latency (docs/serve.md).
CURVE_SERVERS = ("shared", "rollback", "memcached")
CURVE_SESSION = 256
CURVE_CONNS = 32
CURVE_START = 2000.0       # requests/s, the first rate offered
CURVE_FACTOR = 2 ** 0.5    # between rates
CURVE_QUICK_FACTOR = 2.0
CURVE_MAX = 2_000_000.0    # the sweep stops here whatever happened
CURVE_KNEE = 0.9           # achieved / offered below this: past the knee
CURVE_P99_BLOWUP = 10.0    # p99 over the lowest rate's p99 above this: past it

# Descriptors the client and the server use beside their connections
# (standard streams, the listener, epoll, pipes, the lwc links).
FD_SLACK = 64

# The rollback totals isob serve prints as it stops (prefork.c).
ROLLBACK_LINE = re.compile(r"isob serve: rollback (\{.*\})")

# Bounds on waiting (seconds), only so that nothing can hang a run.
CLIENT_SLACK = 60.0


def seconds_for(quick: bool, asked: float | None) -> float:
    return float(asked) if asked else (QUICK_SECONDS if quick else SECONDS)


def conns_seconds(seconds: float, conns: int) -> float:
    """lwc-conns' run time at concurrency conns: long enough to open them all."""
    return max(seconds, conns * SECONDS_PER_CONN)


def serve_points(quick: bool) -> Iterator[tuple[str, str, int, int]]:
    """(mode, protocol, start-up MiB, L) of lwc-serve, in measuring order;
    memcached (mode "memcached") last, over its own protocol only."""
    for proto, startup in VARIANTS:
        for mode in MODES:
            for length in (QUICK_LENGTHS if quick else LENGTHS):
                yield mode, proto, startup, length
    if ("memcache", 0) in VARIANTS:
        for length in (QUICK_LENGTHS if quick else LENGTHS):
            yield "memcached", "memcache", 0, length


def conns_points(quick: bool) -> Iterator[tuple[str, int]]:
    """(server, concurrency) of lwc-conns, in measuring order."""
    for c in (QUICK_CONCURRENCY if quick else CONCURRENCY):
        for server in CONNS_SERVERS:
            yield server, c


def fd_limit() -> int:
    """The soft descriptor limit every child inherits."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def fds_needed(concurrency: int) -> int:
    """Descriptors the most loaded of client and server holds at concurrency C."""
    return concurrency + FD_SLACK


# ---- processes ----

def start_isob(isob: str, extra: list[str], cpu: int | None) -> tuple[Server, int]:
    argv = [isob, "serve", "-m", SERVE_MECHANISM, "--port", "0", "--heap-mb", str(HEAP_MB),
            *extra]
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    return start_serve(argv)


def start_memcached(cpu: int | None, conns: int) -> tuple[Server, int]:
    return kvserver.start_memcached(cpu, MEMCACHED_MB, conns + FD_SLACK, missing_skips=True)


def client_cpus(server_cpu: int | None) -> list[int]:
    """The CPUs isob loadgen's threads run on: every allowed one but the
    server's (at most MAX_CLIENT_THREADS); none when nothing is pinned."""
    if server_cpu is None:
        return []
    others = [c for c in sorted(os.sched_getaffinity(0)) if c != server_cpu]
    return others[:MAX_CLIENT_THREADS]


# Threads of isob loadgen, one per CPU the server does not use, up to this.
MAX_CLIENT_THREADS = 4


def run_loadgen(isob: str, port: int, server_pid: int, *, proto: str, conns: int,
                session: int, seconds: float, cpu: int | list[int] | None,
                rate: float | None = None,
                extra: Sequence[str] = ()) -> tuple[dict | None, str]:
    """isob loadgen against 127.0.0.1:port: (its JSON line, error or '').
    cpu: a CPU, or a list (a thread on each); rate: open loop at that many
    requests/s (Poisson arrivals); extra: more of loadgen's arguments
    (lwcmonitor.py: --doc-bytes)."""
    cpus = [] if cpu is None else [cpu] if isinstance(cpu, int) else list(cpu)
    argv = [isob, "loadgen", "--port", str(port), "--proto", proto, "--conns", str(conns),
            "--session", str(session), "--duration", f"{seconds:g}",
            "--server-pid", str(server_pid), "--samples", str(SAMPLES), *extra]
    if proto == "memcache":
        argv += ["--keys", str(KEYS), "--value-size", str(VALUE_BYTES)]
    if cpus:
        argv += ["--cpu", ",".join(map(str, cpus)), "--threads", str(min(len(cpus), conns))]
    if rate:
        argv += ["--rate", f"{rate:.3f}", "--arrival", "poisson"]
    found, on_line = proc.json_objects(lambda obj: obj.get("type") == "loadgen")

    try:
        ex = proc.run_lines(argv, timeout=seconds + CLIENT_SLACK, on_line=on_line)
    except OSError as e:
        return None, f"cannot run {isob} loadgen: {e.strerror or e}"
    line = found[0] if found else None
    if ex.timed_out:
        return line, f"isob loadgen timed out after {seconds + CLIENT_SLACK:g} s"
    if line is None:
        return None, (f"isob loadgen exited with status {ex.returncode} and printed no result: "
                      f"{ex.stderr_tail() or 'no message'}")
    if ex.returncode != 0 or line.get("errors"):
        return line, (f"isob loadgen saw {line.get('errors')} error(s), the first: "
                      f"{line.get('error_first') or ex.stderr_tail() or 'none given'}")
    if not line.get("verified") or not line.get("samples_ns"):
        return line, (f"isob loadgen verified no reply in {seconds:g} s "
                      f"({line.get('connects')} connections opened, "
                      f"{line.get('unfinished')} waiting)")
    return line, ""


# ---- results ----

def _round(v, digits: int = 3):
    return None if v is None else round(float(v), digits)


def result_from(benchmark: str, params: dict, line: dict) -> Result:
    lat = line.get("latency_us") or {}
    cpu = line.get("cpu") or {}
    srv = line.get("server_cpu") or {}
    p = {**params,
         "throughput_rps": _round(line.get("throughput_rps")),
         "requests": line.get("requests"), "verified": line.get("verified"),
         "sessions_done": line.get("sessions"), "connects": line.get("connects"),
         "duration_s": _round(line.get("duration_s"), 6),
         "samples_every": line.get("samples_every"),
         "samples": "per-request latency, every samples_every-th request in measuring order, ns",
         "client_busy": _round(cpu.get("busy"), 4),
         "client_cpu_s": _round((cpu.get("user_s") or 0) + (cpu.get("sys_s") or 0), 4),
         "server_busy": _round(srv.get("busy"), 4),
         # loadgen's cpu_s: by the scheduler's count where the kernel keeps
         # it (its clock says which), else the clock ticks.
         "server_cpu_s": _round(srv["cpu_s"] if srv.get("cpu_s") is not None
                                else (srv.get("user_s") or 0) + (srv.get("sys_s") or 0), 6),
         "server_processes": srv.get("processes"),
         # "schedstat": every live thread by the scheduler's count; "ticks":
         # in 10 ms clock ticks (analysis/cpu.py widens only those).
         "server_cpu_clock": srv.get("clock")}
    verified = line.get("verified")
    p["server_cpu_us_per_req"] = _round(cputime.us_per_request(p["server_cpu_s"] if srv else None,
                                                               verified), 4)
    p["client_cpu_us_per_req"] = _round(cputime.us_per_request(p["client_cpu_s"], verified), 4)
    # The times the server's threads blocked (voluntary context switches)
    # per request: one each where a process serves one connection whose
    # client has one request in flight.  A lower bound where processes of
    # the server ended during the run (their switches went with them).
    if srv.get("blocked") is not None and verified:
        p["server_blocked_per_req"] = _round(srv["blocked"] / verified, 4)
        p["server_processes_ended"] = srv.get("processes_ended")
    if line.get("rate_rps"):
        offered = float(line["rate_rps"])
        achieved = float(line.get("throughput_rps") or 0)
        p.update({"achieved_rps": _round(achieved), "achieved_ratio": _round(achieved / offered, 4),
                  "queued": line.get("queued"), "unsent": line.get("unsent"),
                  "late": line.get("late"), "send_lag_max_us": line.get("send_lag_max_us")})
    for q in ("p50", "p90", "p99", "p999", "mean", "max"):
        p[f"latency_{q}_us"] = _round(lat.get(q))
    return Result(benchmark=benchmark, mechanism=NO_MECHANISM, params=p, status="ok",
                  unit="ns", counter="loadgen", samples=[int(v) for v in line["samples_ns"]])


def rollback_totals(output: str) -> dict:
    """params.rollback_* from a stopped rollback server's output; {} if it
    printed none."""
    found = ROLLBACK_LINE.findall(output)
    try:
        t = json.loads(found[-1]) if found else None
    except json.JSONDecodeError:
        t = None
    if not isinstance(t, dict) or not t.get("method"):
        return {}
    n = t.get("sessions") or 0
    return {"rollback_method": t["method"], "rollback_workers": t.get("workers"),
            "rollback_sessions": n, "rollback_pages": t.get("pages"),
            "rollback_ns": t.get("ns"), "rollback_failed": t.get("failed"),
            "rollback_us_per_session": _round(t.get("ns", 0) / 1e3 / n) if n else None,
            "rollback_pages_per_session": (_round(t.get("pages", 0) / n)
                                           if n and t["method"] != "fork" else None)}


def _stop_for_output(server: Server) -> str:
    """SIGTERM, a wait, and what the server said (its last lines are the
    totals it prints as it stops); Server.stop does the rest."""
    try:
        os.killpg(server.proc.pid, signal.SIGTERM)
        server.proc.wait(timeout=kvserver.STOP_TIMEOUT)
    except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
        pass  # Server.stop kills it
    return server.output()


def _measure(benchmark: str, params: dict, start: Callable[[int | None], tuple[Server, int]],
             isob: str, proto: str, conns: int, session: int, seconds: float,
             pinned: tuple[int, int] | None) -> Result:
    """One point: server started, loaded, stopped; always a Result."""
    server_cpu, client_cpu = pinned if pinned else (None, None)
    try:
        server, port = start(server_cpu)
    except StartError as e:
        return Result.failure(benchmark, NO_MECHANISM, str(e), params=params,
                              status="skipped" if e.skipped else "failed")
    except OSError as e:
        return Result.failure(benchmark, NO_MECHANISM,
                              f"cannot start the server: {e.strerror or e}", params=params)
    totals = {}
    try:
        line, error = run_loadgen(isob, port, server.proc.pid, proto=proto, conns=conns,
                                  session=session, seconds=seconds,
                                  cpu=client_cpus(server_cpu) or client_cpu)
        if not error and server.proc.poll() is not None:
            error = f"the server exited during the run: {server.tail()}"
        if params.get("server") == "rollback":
            totals = rollback_totals(_stop_for_output(server))
    finally:
        server.stop()
    if error:
        return Result.failure(benchmark, NO_MECHANISM, error, params=params)
    return result_from(benchmark, {**params, **totals}, line)


def _pinning() -> tuple[int, int] | None:
    return pinned_cpus() if shutil.which("taskset") else None


def _base(pinned, seconds: float) -> dict:
    return {"client": "isob loadgen", "seconds": seconds, "heap_mb": HEAP_MB,
            "server_cpu": pinned[0] if pinned else None,
            "client_cpu": pinned[1] if pinned else None,
            "client_threads": max(1, len(client_cpus(pinned[0] if pinned else None)))}


def measure_serve(isob: str, quick: bool, seconds: float,
                  emit: Callable[[Result], None]) -> None:
    """Every lwc-serve point, each handed to emit as soon as it is measured."""
    pinned = _pinning()
    for mode, proto, startup, length in serve_points(quick):
        # Fork builds the start-up state once per session: the run must be
        # long enough for the first sessions to start.
        run_s = max(seconds, STARTUP_SECONDS) if startup else seconds
        params = {**_base(pinned, run_s), "server": mode, "proto": proto,
                  "startup_mb": startup, "session": length, "conns": CONNECTIONS,
                  "serve_mechanism": SERVE_MECHANISM}
        if mode == "memcached":
            del params["serve_mechanism"]
            emit(_measure(SERVE, params, lambda cpu: start_memcached(cpu, CONNECTIONS), isob,
                          proto, CONNECTIONS, length, params["seconds"], pinned))
            continue
        # rollback: a worker per connection, as a prefork server with room
        # for every client.
        extra = (["--per-connection"] if mode == "per-connection" else
                 ["--session", mode] + (["--workers", str(CONNECTIONS)]
                                        if mode in ("prefork", "rollback") else []))
        if proto == "http":
            extra.append("--http")
        else:
            # Sessions that keep nothing must still find the keys loadgen asks for.
            extra += ["--preload-keys", str(KEYS), "--preload-value", str(VALUE_BYTES)]
        if startup:
            extra += ["--startup-mb", str(startup)]
        extra += ["--max-conns", str(CONNECTIONS + FD_SLACK)]
        emit(_measure(SERVE, params, lambda cpu, e=extra: start_isob(isob, e, cpu), isob,
                      proto, CONNECTIONS, length, params["seconds"], pinned))


def measure_conns(isob: str, quick: bool, seconds: float,
                  emit: Callable[[Result], None]) -> None:
    """Every lwc-conns point, each handed to emit as soon as it is measured."""
    pinned = _pinning()
    limit = fd_limit()
    for server, conns in conns_points(quick):
        params = {**_base(pinned, conns_seconds(seconds, conns)), "server": server,
                  "proto": "memcache",
                  "conns": conns, "session": LONG_SESSION}
        if server != "memcached":
            params["serve_mechanism"] = SERVE_MECHANISM
        if fds_needed(conns) > limit:
            emit(Result.failure(CONNS, NO_MECHANISM,
                                f"{conns} connections need {fds_needed(conns)} descriptors "
                                f"per process; the limit here is {limit} (ulimit -n)",
                                params=params, status="skipped"))
            continue
        if server == "memcached":
            start = lambda cpu, c=conns: start_memcached(cpu, c)
        else:
            extra = ["--max-conns", str(conns + FD_SLACK),
                     "--preload-keys", str(KEYS), "--preload-value", str(VALUE_BYTES)]
            if server == "per-connection":
                extra.append("--per-connection")
            start = lambda cpu, e=extra: start_isob(isob, e, cpu)
        emit(_measure(CONNS, params, start, isob, "memcache", conns, LONG_SESSION,
                      conns_seconds(seconds, conns), pinned))


def curve_rates(quick: bool) -> Iterator[float]:
    """The rates lwc-curve offers, lowest first, up to CURVE_MAX."""
    r, f = CURVE_START, CURVE_QUICK_FACTOR if quick else CURVE_FACTOR
    while r <= CURVE_MAX:
        yield round(r, 1)
        r *= f


def past_knee(offered: float, params: dict, first_p99: float | None) -> bool:
    """Whether a curve point is past the knee: the server answered less than
    CURVE_KNEE of the offered rate, or its p99 grew beyond CURVE_P99_BLOWUP
    times the lowest rate's."""
    achieved = params.get("achieved_rps") or 0.0
    if achieved < CURVE_KNEE * offered:
        return True
    p99 = params.get("latency_p99_us")
    return bool(first_p99 and p99 and p99 > CURVE_P99_BLOWUP * first_p99)


def measure_curve(isob: str, quick: bool, seconds: float,
                  emit: Callable[[Result], None]) -> None:
    """Every lwc-curve point: per server, one server started, loaded at each
    rate in turn until the knee, stopped."""
    pinned = _pinning()
    server_cpu = pinned[0] if pinned else None
    for mode in CURVE_SERVERS:
        base = {**_base(pinned, seconds), "server": mode, "proto": "memcache",
                "session": CURVE_SESSION, "conns": CURVE_CONNS, "arrival": "poisson"}
        if mode != "memcached":
            base["serve_mechanism"] = SERVE_MECHANISM
        try:
            if mode == "memcached":
                server, port = start_memcached(server_cpu, CURVE_CONNS)
            else:
                # rollback's workers: one per connection, as in lwc-serve,
                # or connections beyond them would wait in the backlog.
                workers = ["--workers", str(CURVE_CONNS)] if mode == "rollback" else []
                server, port = start_isob(isob, [
                    "--session", mode, *workers, "--preload-keys", str(KEYS),
                    "--preload-value", str(VALUE_BYTES),
                    "--max-conns", str(CURVE_CONNS + FD_SLACK)], server_cpu)
        except (StartError, OSError) as e:
            skipped = isinstance(e, StartError) and e.skipped
            emit(Result.failure(CURVE, NO_MECHANISM, f"cannot start the server: {e}",
                                params={**base, "rate": CURVE_START},
                                status="skipped" if skipped else "failed"))
            continue
        try:
            first_p99 = None
            for rate in curve_rates(quick):
                params = {**base, "rate": rate}
                line, error = run_loadgen(isob, port, server.proc.pid, proto="memcache",
                                          conns=CURVE_CONNS, session=CURVE_SESSION,
                                          seconds=seconds, rate=rate,
                                          cpu=client_cpus(server_cpu) or
                                          (pinned[1] if pinned else None))
                if not error and server.proc.poll() is not None:
                    error = f"the server exited during the run: {server.tail()}"
                if error:
                    emit(Result.failure(CURVE, NO_MECHANISM, error, params=params))
                    break
                knee = past_knee(rate, result_from(CURVE, params, line).params, first_p99)
                r = result_from(CURVE, {**params, "knee": knee}, line)
                first_p99 = first_p99 or r.params.get("latency_p99_us")
                emit(r)
                if knee:
                    break
        finally:
            server.stop()


def run(benchmark: str, isob: str, quick: bool, asked_seconds: float | None,
        on_result: Callable[[Result, str, str], None]) -> list[Result]:
    """One repetition of benchmark; every result goes to on_result with the
    times that bound its measurement, and is returned."""
    seconds = seconds_for(quick, asked_seconds)
    out: list[Result] = []
    mark = [now_ms()]

    def emit(r: Result) -> None:
        started, mark[0] = mark[0], now_ms()
        out.append(r)
        on_result(r, started, mark[0])

    {SERVE: measure_serve, CONNS: measure_conns, CURVE: measure_curve}[benchmark](
        isob, quick, seconds, emit)
    return out
