"""The kv-server benchmark: `isob serve` over each mechanism beside memcached.

Unlike the other benchmarks this one is not an ``isob`` subcommand: it is
orchestrated from Python because it drives real servers with a real client.
For each server (memcached itself as the reference, then ``isob serve -m M``
per mechanism) it

1. starts the server on a free port of 127.0.0.1, pinned to one CPU
   (``taskset -c S``; memcached with one worker thread);
2. runs the same client, memcaslap (libmemcached-tools), pinned to another
   CPU, for the same time, with the same options (``-T 1 -c 16 -w 1k -S 1s``);
3. stops the server (SIGTERM to its process group, SIGKILL after a grace
   period), whatever happened before.

What is recorded and why it is honest (docs/kv.md, "kv-server"):

- ``params.ops_per_s``: memcaslap's final TPS line (gets and sets together).
- samples (unit ns): the per-second mean latency of all operations, i.e. the
  "Period" row of memcaslap's "Total Statistics" table, one per second.  They
  are means over about a second of requests each, NOT per-request latencies;
  ``params.samples`` says so.  memcaslap never prints raw per-request values.
- ``params.server_cpu_us_per_req``: the CPU time of the server's process
  tree (measure/cputime.py) over the client's run, per request memcaslap
  completed: the headline of the table, since the side that saturated
  does not bound it (the load still moves it: docs/serve.md); ``params.client_cpu_us_per_req`` the same of memcaslap
  (its rusage once reaped), and ``server_busy``/``client_busy`` each over
  the run's wall-clock time, so that the table says which side saturated.
- ``params.latency_*``: the run's min, mean, max and standard deviation, and
  p50/p95/p99 as the log2 histogram bucket each percentile falls in
  (``..._lo_ns`` exclusive, ``..._hi_ns`` inclusive): memcaslap's histogram
  has factor-2 buckets, so a percentile is known only to that resolution.

The side-by-side table (each server's throughput and latency as a ratio to
memcached's) is part of the run's summary document (summary.py) and is
printed by table.py; nothing here divides one number by another.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

from . import cputime, proc
from ..core.records import REFERENCES, Result

BENCHMARK = "kv-server"
REFERENCE = REFERENCES[BENCHMARK]  # the mechanism column of the reference server's result

# Mechanisms run when none are named: the baseline, one process mechanism,
# one with a syscall filter and one SFI mechanism.  Enough to show the spread
# within a few tens of seconds; every other mechanism can be asked for by -m.
DEFAULT_MECHANISMS = ("direct", "process-futex", "seccomp", "wasm")

SECONDS = 10.0
QUICK_SECONDS = 3.0
CONNECTIONS = 16
# memcaslap's default window (10k keys per connection, 1 KiB values) would
# want ~175 MB per server; 1k keys per connection (~18 MB) fits both stores
# below, so no server evicts or refuses sets while measured.
WINDOW = "1k"
HEAP_MB = 64

# Bounds on waiting (seconds): only so that nothing can hang a run.
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
CLIENT_SLACK = 30.0   # beyond the asked-for run time

READY = re.compile(r"isob serve: listening on 127\.0\.0\.1:(\d+)")


# ---- memcaslap output ----

@dataclass
class Latency:
    """One "... Statistics (N events)" block: microseconds, as memcaslap prints."""
    events: int = 0
    min_us: float | None = None
    max_us: float | None = None
    avg_us: float | None = None
    std_us: float | None = None
    geo_us: float | None = None
    dist: dict[int, int] = field(default_factory=dict)  # log2 bucket -> count

    def percentile_bucket(self, q: float) -> tuple[float, float] | None:
        """(lo, hi] in us of the bucket the q-quantile falls in.

        memcaslap counts a latency v in bucket b, the smallest b with
        2**b >= v (ms_stats.c, ms_local_log2), so bucket b holds
        2**(b-1) < v <= 2**b (bucket 0: v <= 1)."""
        total = sum(self.dist.values())
        if total == 0:
            return None
        rank = q * total
        seen = 0
        for b in sorted(self.dist):
            seen += self.dist[b]
            if seen >= rank:
                return (0.0 if b == 0 else float(2 ** (b - 1)), float(2 ** b))
        b = max(self.dist)
        return float(2 ** (b - 1)), float(2 ** b)


@dataclass
class Memcaslap:
    ops: int | None = None
    ops_per_s: float | None = None
    run_s: float | None = None
    period_avg_us: list[float] = field(default_factory=list)  # Total, Period rows
    total: Latency | None = None
    counters: dict[str, int] = field(default_factory=dict)    # cmd_get, get_misses, ...


_ESC = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_FINAL = re.compile(r"Run time:\s*([\d.]+)s\s+Ops:\s*(\d+)\s+TPS:\s*(\d+)")
_BLOCK = re.compile(r"^(Get|Set|Total) Statistics \((\d+) events\)")
_TABLE = re.compile(r"^(Get|Set|Total) Statistics\s*$")
_COUNTER = re.compile(r"^(cmd_get|cmd_set|get_misses|written_bytes|read_bytes|object_bytes|"
                      r"verify_misses|verify_failed|expired_get|unexpired_unget):\s*(\d+)\s*$")


def parse_memcaslap(text: str) -> Memcaslap:
    """What memcaslap printed (with -S): throughput, per-second and overall latency."""
    out = Memcaslap()
    table = None   # the "X Statistics" table the Period/Global rows belong to
    block: Latency | None = None
    block_kind = None
    in_dist = False
    for raw in _ESC.sub("", text).splitlines():
        line = raw.strip()
        m = _FINAL.search(line)
        if m:
            out.run_s, out.ops, out.ops_per_s = float(m[1]), int(m[2]), float(m[3])
            continue
        m = _TABLE.match(line)
        if m:
            table, block, in_dist = m[1], None, False
            continue
        m = _BLOCK.match(line)
        if m:
            table, block_kind, in_dist = None, m[1], False
            block = Latency(events=int(m[2]))
            if block_kind == "Total":
                out.total = block
            continue
        m = _COUNTER.match(line)
        if m:
            out.counters[m[1]] = int(m[2])
            block, in_dist = None, False
            continue
        if table == "Total" and line.startswith("Period"):
            # Type Time Ops TPS Net Get_miss Min Max Avg Std_dev Geo_dist
            cols = line.split()
            if len(cols) >= 9:
                out.period_avg_us.append(float(cols[8]))
            continue
        if block is None:
            continue
        if line.startswith("Log2 Dist:"):
            in_dist = True
            continue
        if in_dist:
            m = re.match(r"^(\d+):((?:\s+\d+)+)$", line)
            if m:
                base = int(m[1])
                for i, count in enumerate(m[2].split()):
                    block.dist[base + i] = int(count)
                continue
            in_dist = False
        m = re.match(r"^(Min|Max|Avg|Std|Geo):\s*([\d.]+)$", line)
        if m:
            setattr(block, {"Min": "min_us", "Max": "max_us", "Avg": "avg_us",
                            "Std": "std_us", "Geo": "geo_us"}[m[1]], float(m[2]))
    return out


# ---- processes ----

def pinned_cpus() -> tuple[int, int] | None:
    """(server CPU, client CPU): two CPUs this process may use, else None."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except OSError:
        return None
    return (allowed[0], allowed[1]) if len(allowed) >= 2 else None


def _pin(argv: list[str], cpu: int | None) -> list[str]:
    return ["taskset", "-c", str(cpu), *argv] if cpu is not None else argv


def free_port() -> int:
    """A port free on 127.0.0.1 now (memcached cannot pick its own and say which)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server process in its own process group; stderr kept in a file."""

    def __init__(self, argv: list[str]):
        self.argv = argv
        self.log = tempfile.TemporaryFile()
        self.proc = proc.popen(argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()[-4096:].decode("utf-8", errors="replace")

    def tail(self) -> str:
        lines = [l.strip() for l in self.output().splitlines() if l.strip()]
        return lines[-1] if lines else "no message"

    def stop(self) -> None:
        """SIGTERM to the group, SIGKILL after STOP_TIMEOUT; always reaps."""
        for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT), (signal.SIGKILL, STOP_TIMEOUT)):
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # Stragglers of the group (a compartment process) go too.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.log.close()


class StartError(Exception):
    def __init__(self, reason: str, skipped: bool = False):
        super().__init__(reason)
        self.skipped = skipped


def _wait_ready(server: Server, ready: Callable[[], int | None]) -> int:
    """The port once ready() gives one; StartError if the server exits or times out."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        port = ready()
        if port is not None:
            return port
        code = server.proc.poll()
        if code is not None:
            # isob exits 4 when the mechanism's probe fails here.
            name = server.argv[3] if server.argv[0] == "taskset" else server.argv[0]
            raise StartError(f"{name} exited with status {code} before it was ready: "
                             f"{server.tail()}",
                             skipped=code == 4)
        time.sleep(0.05)
    raise StartError(f"server not ready after {START_TIMEOUT:g} s: {server.tail()}")


def _connectable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def start_memcached(cpu: int | None, heap_mb: int = HEAP_MB, max_conns: int | None = None,
                    missing_skips: bool = False) -> tuple[Server, int]:
    """memcached on loopback (one thread, a free port, TCP only), waited for.
    Not installed: StartError, a skip where missing_skips says so."""
    exe = shutil.which("memcached")
    if exe is None:
        raise StartError("memcached is not on PATH (scripts/setup-system.sh installs it)",
                         skipped=missing_skips)
    port = free_port()
    argv = [exe, "-t", "1", "-p", str(port), "-l", "127.0.0.1", "-m", str(heap_mb), "-U", "0"]
    if max_conns is not None:
        argv += ["-c", str(max_conns)]
    if os.geteuid() == 0:
        argv += ["-u", "root"]  # memcached refuses to run as root without -u
    server = Server(_pin(argv, cpu))
    try:
        _wait_ready(server, lambda: port if _connectable(port) else None)
    except BaseException:
        server.stop()
        raise
    return server, port


def start_isob(isob: str, mechanism: str, cpu: int | None) -> tuple[Server, int]:
    # --port 0: isob picks a free port itself and names it in its ready line.
    argv = [isob, "serve", "-m", mechanism, "--port", "0", "--heap-mb", str(HEAP_MB)]
    return start_serve(_pin(argv, cpu))


def start_serve(argv: list[str]) -> tuple[Server, int]:
    """An `isob serve ... --port 0` started and waited for: (server, the port
    its ready line names).  A server that fails to get ready is stopped."""
    server = Server(argv)

    def ready() -> int | None:
        m = READY.search(server.output())
        return int(m[1]) if m else None

    try:
        _wait_ready(server, ready)
        port = ready()
    except BaseException:
        server.stop()
        raise
    return server, port


def cpu_params(server: cputime.TreeCpu | None, server_after: cputime.TreeCpu | None,
               client_s: float | None, wall_s: float, requests: int | None) -> dict:
    """The CPU figures of one run: both sides' CPU seconds, busy shares and
    microseconds per request."""
    srv = (server_after.seconds - server.seconds) if server and server_after else None
    r = lambda v, d=4: None if v is None else round(v, d)
    # The part of the server's seconds counted in 10 ms clock ticks (its
    # reaped children's): the only part the clock's step moves.
    ticked = (server_after.tick_seconds - server.tick_seconds) if server and server_after \
        else None
    return {"server_cpu_s": r(srv), "client_cpu_s": r(client_s),
            "server_cpu_tick_s": r(ticked),
            "server_processes": server_after.processes if server_after else None,
            "server_busy": r(cputime.busy(srv, wall_s)),
            "client_busy": r(cputime.busy(client_s, wall_s)),
            "server_cpu_us_per_req": r(cputime.us_per_request(srv, requests)),
            "client_cpu_us_per_req": r(cputime.us_per_request(client_s, requests)),
            "cpu_source": "server: its process tree's threads by /proc/PID/task/TID/"
                          "schedstat (or /proc/PID/stat ticks), reaped children included; "
                          "client: its rusage once reaped"}


def run_client(port: int, seconds: int, cpu: int | None) -> tuple[Memcaslap, str]:
    """memcaslap against 127.0.0.1:port; (parsed, error or '')."""
    exe = shutil.which("memcaslap") or shutil.which("memaslap")
    if exe is None:
        return Memcaslap(), "memcaslap is not on PATH (libmemcached-tools)"
    argv = _pin([exe, "-s", f"127.0.0.1:{port}", "-t", f"{seconds}s", "-T", "1",
                 "-c", str(CONNECTIONS), "-w", WINDOW, "-S", "1s"], cpu)
    lines: list[str] = []
    try:
        ex = proc.run_lines(argv, timeout=seconds + CLIENT_SLACK, on_line=lines.append)
    except OSError as e:
        return Memcaslap(), f"cannot run {exe}: {e.strerror or e}"
    text = "\n".join(lines)
    parsed = parse_memcaslap(text)
    if ex.timed_out:
        return parsed, f"memcaslap timed out after {seconds + CLIENT_SLACK:g} s"
    if ex.returncode != 0:
        return parsed, f"memcaslap exited with status {ex.returncode}: {ex.stderr_tail() or text[-200:]}"
    if not parsed.ops_per_s or parsed.total is None:
        return parsed, f"memcaslap printed no throughput or latency: {text[-200:]!r}"
    return parsed, ""


# ---- results ----

def base_params(server: str, seconds: int, pinned: tuple[int, int] | None) -> dict:
    return {"server": server, "client": "memcaslap", "connections": CONNECTIONS,
            "seconds": seconds, "client_threads": 1, "window": WINDOW, "heap_mb": HEAP_MB,
            "server_cpu": pinned[0] if pinned else None,
            "client_cpu": pinned[1] if pinned else None}


def result_from(mechanism: str, params: dict, m: Memcaslap, cpu: dict | None = None) -> Result:
    t = m.total
    us = lambda v: None if v is None else round(v * 1000.0, 3)
    p = {**params, "ops_per_s": m.ops_per_s, "ops": m.ops,
         "latency_source": "memcaslap -S 1s: Total Statistics; percentiles as log2 buckets",
         "samples": "per-second mean latency of all requests (memcaslap Period Avg), ns",
         "latency_min_ns": us(t.min_us), "latency_avg_ns": us(t.avg_us),
         "latency_max_ns": us(t.max_us), "latency_std_ns": us(t.std_us),
         "latency_events": t.events, "get_misses": m.counters.get("get_misses"),
         **(cpu or {})}
    for name, q in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99)):
        b = t.percentile_bucket(q)
        p[f"latency_{name}_lo_ns"] = us(b[0]) if b else None
        p[f"latency_{name}_hi_ns"] = us(b[1]) if b else None
    series = m.period_avg_us or ([t.avg_us] if t.avg_us is not None else [])
    return Result(benchmark=BENCHMARK, mechanism=mechanism, params=p, status="ok",
                  unit="ns", counter="memcaslap", samples=[int(round(v * 1000)) for v in series])


def measure(mechanism: str, isob: str, seconds: int) -> Result:
    """One server measured; always a Result (ok, failed or skipped), server stopped."""
    pinned = pinned_cpus()
    server_cpu, client_cpu = pinned if pinned else (None, None)
    is_ref = mechanism == REFERENCE
    params = base_params("memcached" if is_ref else "isob", seconds, pinned)
    if shutil.which("taskset") is None:
        server_cpu = client_cpu = None
        params["server_cpu"] = params["client_cpu"] = None
    try:
        server, port = (start_memcached(server_cpu) if is_ref
                        else start_isob(isob, mechanism, server_cpu))
    except StartError as e:
        return Result.failure(BENCHMARK, mechanism, str(e), params=params,
                              status="skipped" if e.skipped else "failed")
    except OSError as e:
        return Result.failure(BENCHMARK, mechanism, f"cannot start the server: {e.strerror or e}",
                              params=params)
    try:
        before, ru0, t0 = cputime.tree_cpu(server.proc.pid), resource.getrusage(
            resource.RUSAGE_CHILDREN), time.monotonic()
        parsed, error = run_client(port, seconds, client_cpu)
        wall = time.monotonic() - t0
        after, ru1 = cputime.tree_cpu(server.proc.pid), resource.getrusage(resource.RUSAGE_CHILDREN)
        if not error and server.proc.poll() is not None:
            error = f"the server exited during the run: {server.tail()}"
    finally:
        server.stop()
    if error:
        return Result.failure(BENCHMARK, mechanism, error, params=params)
    # The client is the only child reaped while it ran (the server is
    # reaped after): the growth of RUSAGE_CHILDREN is its CPU time.
    client = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    return result_from(mechanism, params, parsed,
                       cpu_params(before, after, client, wall, parsed.ops))


def seconds_for(quick: bool, asked: float | None) -> int:
    # memcaslap takes whole seconds.
    return max(1, int(round(asked))) if asked else int(QUICK_SECONDS if quick else SECONDS)
