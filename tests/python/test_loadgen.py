"""`isob loadgen` against `isob serve -m direct` and small servers of this
file, all on loopback on ports chosen at run time.

The tests assert what the generator counted and how its results relate
(every reply verified, sessions of exactly L requests, percentiles in
order), that a wrong reply fails the run with the reason, and bad usage.
Nothing asserts how fast anything was; durations are kept short and every
wait has a bound, only so that a broken server cannot hang the suite.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import socket
import socketserver
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import limit
from serve_helpers import NEEDS_SCHEDSTAT

REPO = Path(__file__).resolve().parents[2]
ISOB = REPO / "build" / "isob"

START_TIMEOUT = limit(120)
RUN_TIMEOUT = limit(300)
READY = re.compile(rb"isob serve: listening on 127\.0\.0\.1:(\d+)")
DOC = b"<html><body>isobench: 45 bytes</body></html>\n"

pytestmark = pytest.mark.skipif(not (ISOB.is_file() and os.access(ISOB, os.X_OK)),
                                reason=f"native driver not built at {ISOB} (run `make`)")


def loadgen(*args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    p = subprocess.run([str(ISOB), "loadgen", *args], capture_output=True, text=True,
                       timeout=RUN_TIMEOUT)
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    doc = json.loads(lines[-1]) if lines else None
    assert "Traceback" not in p.stderr
    return p, doc


@pytest.fixture
def serve_direct():
    proc = subprocess.Popen([str(ISOB), "serve", "-m", "direct", "--port", "0", "--heap-mb", "16"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + START_TIMEOUT
    buf = b""
    port = None
    while port is None and time.monotonic() < deadline:
        if sel.select(timeout=0.5):
            chunk = os.read(proc.stderr.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            m = READY.search(buf)
            if m:
                port = int(m.group(1))
    sel.close()
    if port is None:
        proc.kill()
        proc.wait()
        pytest.fail(f"isob serve did not start: {buf!r}")
    yield proc, port
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def check_counts(doc: dict, session: int, conns: int) -> None:
    assert doc["type"] == "loadgen" and doc["schema_version"] == 1
    assert doc["errors"] == 0 and doc["error_first"] is None
    assert doc["requests"] > 0 and doc["verified"] == doc["requests"]
    # Each connect either completed its session of L or was still open at
    # the end of the run.
    assert doc["sessions"] <= doc["connects"] <= doc["sessions"] + conns
    assert doc["sessions"] * session <= doc["requests"] <= (doc["sessions"] + conns) * session
    lat = doc["latency_us"]
    assert lat["n"] == doc["requests"] and lat["not_kept"] == 0
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    assert doc["cpu"]["user_s"] >= 0 and doc["cpu"]["sys_s"] >= 0


def test_memcache_against_serve_direct(serve_direct):
    proc, port = serve_direct
    p, doc = loadgen("--port", str(port), "--conns", "4", "--session", "8", "--duration", "0.5",
                     "--keys", "50", "--set-percent", "10", "--server-pid", str(proc.pid))
    assert p.returncode == 0, p.stderr
    check_counts(doc, 8, 4)
    assert doc["proto"] == "memcache" and doc["keys"] == 50 and doc["value_bytes"] == 45
    assert doc["server_cpu"]["pid"] == proc.pid and doc["server_cpu"]["processes"] == 1
    assert doc["server_cpu"]["user_s"] >= 0


def test_memcache_session_of_one(serve_direct):
    _, port = serve_direct
    p, doc = loadgen("--port", str(port), "--conns", "2", "--session", "1", "--duration", "0.3",
                     "--keys", "10")
    assert p.returncode == 0, p.stderr
    check_counts(doc, 1, 2)
    assert doc["server_cpu"] is None


class _Http(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, body: bytes):
        self.body = body
        self.lock = threading.Lock()
        self.closed_by_request: list[int] = []  # requests on connections the client asked to close
        super().__init__(("127.0.0.1", 0), _HttpHandler)


class _HttpHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        srv: _Http = self.server
        self.request.settimeout(10)
        buf, served = b"", 0
        while True:
            while b"\r\n\r\n" not in buf:
                try:
                    chunk = self.request.recv(4096)
                except OSError:
                    return
                if not chunk:
                    return
                buf += chunk
            req, buf = buf.split(b"\r\n\r\n", 1)
            served += 1
            close = b"connection: close" in req.lower()
            head = (f"HTTP/1.0 200 OK\r\nContent-Length: {len(srv.body)}\r\n"
                    f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n").encode()
            # Counted before the reply goes out, so that the count is
            # complete by the time the client has read it.
            if close:
                with srv.lock:
                    srv.closed_by_request.append(served)
            try:
                self.request.sendall(head + srv.body)
            except OSError:
                return
            if close:
                return


@pytest.fixture
def http_server(request):
    srv = _Http(getattr(request, "param", DOC))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_http_sessions_of_exactly_l(http_server):
    port = http_server.server_address[1]
    p, doc = loadgen("--proto", "http", "--port", str(port), "--conns", "3", "--session", "4",
                     "--duration", "0.5")
    assert p.returncode == 0, p.stderr
    check_counts(doc, 4, 3)
    assert doc["body_bytes"] == 45
    with http_server.lock:
        closed = list(http_server.closed_by_request)
    # Every session the client ended had exactly L requests, and loadgen
    # counted each of them (but for at most one per connection whose last
    # reply was still on its way when the run ended).
    assert closed and set(closed) == {4}
    assert doc["sessions"] <= len(closed) <= doc["sessions"] + 3


@pytest.mark.parametrize("http_server", [DOC.replace(b"45", b"46")], indirect=True)
def test_http_wrong_body_fails(http_server):
    port = http_server.server_address[1]
    p, doc = loadgen("--proto", "http", "--port", str(port), "--conns", "2", "--session", "2",
                     "--duration", "0.3")
    assert p.returncode == 1
    assert doc["errors"] > 0 and "body" in doc["error_first"]
    assert doc["verified"] == 0
    assert p.stderr.count("\n") == 1 and "the first:" in p.stderr


def _fake_memcache(wrong: bytes):
    """A server that stores nothing and answers every get with `wrong`."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    stop = threading.Event()

    def conn(s: socket.socket) -> None:
        s.settimeout(10)
        buf = b""
        try:
            while not stop.is_set():
                chunk = s.recv(65536)
                if not chunk:
                    return
                buf += chunk
                while b"\r\n" in buf:
                    line, rest = buf.split(b"\r\n", 1)
                    if line.startswith(b"set "):
                        n = int(line.split()[4])
                        if len(rest) < n + 2:
                            break
                        buf = rest[n + 2:]
                        s.sendall(b"STORED\r\n")
                    else:
                        buf = rest
                        s.sendall(wrong)
        except OSError:
            return
        finally:
            s.close()

    def accept() -> None:
        ls.settimeout(0.2)
        while not stop.is_set():
            try:
                s, _ = ls.accept()
            except OSError:
                continue
            threading.Thread(target=conn, args=(s,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return ls, stop


def test_memcache_wrong_value_fails():
    ls, stop = _fake_memcache(b"END\r\n")
    try:
        p, doc = loadgen("--port", str(ls.getsockname()[1]), "--conns", "2", "--session", "4",
                         "--duration", "0.3", "--keys", "5")
    finally:
        stop.set()
        ls.close()
    assert p.returncode == 1
    assert doc["errors"] > 0 and "differs from the expected one at byte 0" in doc["error_first"]


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_refused_connection_is_an_error():
    port = _free_port()
    p, doc = loadgen("--proto", "http", "--port", str(port), "--conns", "2", "--duration", "0.3")
    assert p.returncode == 1
    assert doc["errors"] >= 1 and "connect" in doc["error_first"]
    p, doc = loadgen("--port", str(port), "--duration", "0.3")
    assert p.returncode == 1 and doc is None
    assert p.stderr.startswith("isob loadgen: error: loading") and p.stderr.count("\n") == 1


@pytest.mark.parametrize("args,words", [
    ([], "--port is required"),
    (["--port", "0"], "--port"),
    (["--port", "80", "--conns", "0"], "--conns"),
    (["--port", "80", "--proto", "gopher"], "--proto"),
    (["--port", "80", "--duration", "-1"], "--duration"),
    (["--port", "80", "--host", "example.org"], "--host"),
    (["--port", "80", "--set-percent", "101"], "--set-percent"),
    (["--port", "80", "--bogus"], "unknown option"),
])
def test_bad_usage(args, words):
    p, doc = loadgen(*args)
    assert p.returncode == 2 and doc is None
    assert p.stderr.startswith("isob loadgen: error:") and words in p.stderr
    assert p.stderr.count("\n") == 1


# ---- threads and the open loop ----

def test_threads_spread_connections_and_verify(serve_direct):
    proc, port = serve_direct
    p, doc = loadgen("--port", str(port), "--threads", "2", "--conns", "4", "--session", "8",
                     "--duration", "0.5", "--keys", "50", "--set-percent", "10",
                     "--server-pid", str(proc.pid))
    assert p.returncode == 0, p.stderr
    check_counts(doc, 8, 4)
    assert doc["threads"] == 2 and doc["arrival"] == "closed" and doc["rate_rps"] is None
    # Both CPU figures per request are the CPU seconds over the requests.
    cpu, srv = doc["cpu"], doc["server_cpu"]
    assert cpu["us_per_request"] == pytest.approx(
        (cpu["user_s"] + cpu["sys_s"]) * 1e6 / doc["requests"], rel=1e-3)
    assert srv["us_per_request"] == pytest.approx(
        srv["cpu_s"] * 1e6 / doc["requests"], rel=1e-3, abs=1e-6)
    # The note names the side that costs more, exactly when it does.
    higher = cpu["user_s"] + cpu["sys_s"] > srv["cpu_s"]
    assert ("loadgen's CPU per request" in p.stderr) == higher


def _value(k: int, n: int) -> bytes:
    """isob_lg_value: the value loadgen expects for key k."""
    return bytes(ord("a") + (k * 31 + j * 7) % 26 for j in range(n))


def _slow_memcache(delay: float):
    """A memcached that answers sets at once and each get correctly, after
    `delay` seconds, one request at a time per connection."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    stop = threading.Event()

    def conn(s: socket.socket) -> None:
        s.settimeout(10)
        buf = b""
        try:
            while not stop.is_set():
                chunk = s.recv(65536)
                if not chunk:
                    return
                buf += chunk
                while b"\r\n" in buf:
                    line, rest = buf.split(b"\r\n", 1)
                    if line.startswith(b"set "):
                        n = int(line.split()[4])
                        if len(rest) < n + 2:
                            break
                        buf = rest[n + 2:]
                        s.sendall(b"STORED\r\n")
                    else:
                        buf = rest
                        key = line.split()[1]
                        val = _value(int(key[4:]), 45)
                        time.sleep(delay)
                        s.sendall(b"VALUE " + key + b" 0 45\r\n" + val + b"\r\nEND\r\n")
        except OSError:
            return
        finally:
            s.close()

    def accept() -> None:
        ls.settimeout(0.2)
        while not stop.is_set():
            try:
                s, _ = ls.accept()
            except OSError:
                continue
            threading.Thread(target=conn, args=(s,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return ls, stop


SERVICE_S = 0.1   # the slow server's time per get
GAP_S = 0.01      # the schedule's: ten times the rate the server can answer


def _queueing_shown(doc: dict, seconds: float) -> bool:
    """Whether the latencies show the queue a slow server builds: offered ten
    times what it answers, the k-th request waits for the k before it, so
    the median must be several service times (a loop that timestamps at the
    actual send sees one service time per request).  The service time is
    this run's own, its seconds over the requests answered (one connection,
    one request at a time), so a slow machine moves both sides alike: no
    latency is compared with a fixed duration."""
    service_us = seconds * 1e6 / doc["requests"]
    return doc["latency_us"]["p50"] > 3 * service_us and doc["queued"] > 0


@pytest.mark.parametrize("latency_from,shown", [("scheduled", True), ("sent", False)])
def test_open_loop_does_not_hide_coordinated_omission(latency_from, shown):
    ls, stop = _slow_memcache(SERVICE_S)
    try:
        p, doc = loadgen("--port", str(ls.getsockname()[1]), "--conns", "1", "--keys", "5",
                         "--session", "1000", "--duration", "1.5", "--timeout", "10",
                         "--rate", str(1 / GAP_S), "--arrival", "fixed",
                         "--latency-from", latency_from)
    finally:
        stop.set()
        ls.close()
    assert p.returncode == 0, p.stderr
    assert doc["errors"] == 0 and doc["requests"] > 3
    assert doc["latency_from"] == latency_from and doc["arrival"] == "fixed"
    # The check passes on the honest loop and fails on the one that counts
    # from the actual send: the latter hides the wait the schedule built.
    assert _queueing_shown(doc, 1.5) is shown
    # Every request due before the end was answered, in flight or unsent.
    due = 1.5 / GAP_S
    total = doc["requests"] + doc["unfinished"] + doc["unsent"]
    assert due - 2 <= total <= due + 2


def test_open_loop_schedule_arithmetic(serve_direct):
    """Fixed arrivals at R/s for D s over C connections: R x D requests are
    due, each answered, in flight at the end, or never sent."""
    _, port = serve_direct
    rate, dur, conns = 200, 1.0, 4
    p, doc = loadgen("--port", str(port), "--conns", str(conns), "--keys", "20",
                     "--duration", str(dur), "--rate", str(rate), "--arrival", "fixed",
                     "--threads", "2")
    assert p.returncode == 0, p.stderr
    assert doc["rate_rps"] == rate and doc["latency_from"] == "scheduled"
    total = doc["requests"] + doc["unfinished"] + doc["unsent"]
    assert rate * dur - conns <= total <= rate * dur + conns
    assert doc["verified"] == doc["requests"]


@pytest.mark.parametrize("args,words", [
    (["--port", "80", "--threads", "0"], "--threads"),
    (["--port", "80", "--threads", "5", "--conns", "4"], "more threads than connections"),
    (["--port", "80", "--rate", "0"], "--rate"),
    (["--port", "80", "--rate", "100", "--arrival", "bursty"], "--arrival"),
    (["--port", "80", "--arrival", "fixed"], "need --rate"),
    (["--port", "80", "--rate", "10", "--latency-from", "reply"], "--latency-from"),
    (["--port", "80", "--cpu", "0,x"], "--cpu"),
])
def test_bad_usage_threads_and_rate(args, words):
    p, doc = loadgen(*args)
    assert p.returncode == 2 and doc is None
    assert p.stderr.startswith("isob loadgen: error:") and words in p.stderr
    assert p.stderr.count("\n") == 1


def test_threads_keep_off_the_servers_cpus(serve_direct):
    proc, port = serve_direct
    allowed = sorted(os.sched_getaffinity(0))
    # An unpinned server leaves no CPU to itself: loadgen stays unpinned.
    p, doc = loadgen("--port", str(port), "--duration", "0.2", "--keys", "10",
                     "--server-pid", str(proc.pid))
    assert p.returncode == 0, p.stderr
    assert doc["cpu"]["pinned_cpus"] == [] and doc["cpu"]["pinned_by"] is None
    if len(allowed) < 2:
        pytest.skip(f"SKIP: one CPU allowed here ({allowed}): nothing to keep off")
    os.sched_setaffinity(proc.pid, {allowed[0]})
    p, doc = loadgen("--port", str(port), "--duration", "0.2", "--keys", "10",
                     "--threads", "2", "--server-pid", str(proc.pid))
    assert p.returncode == 0, p.stderr
    check_counts(doc, 64, 16)
    assert doc["cpu"]["pinned_cpus"] == allowed[1:][:64]
    assert doc["cpu"]["pinned_by"] == "away from the server"
    # --cpu wins over the default.
    p, doc = loadgen("--port", str(port), "--duration", "0.2", "--keys", "10",
                     "--cpu", str(allowed[0]), "--server-pid", str(proc.pid))
    assert doc["cpu"]["pinned_cpus"] == [allowed[0]] and doc["cpu"]["pinned_by"] == "--cpu"


# ---- how often the server blocked ----

# A server in a process of its own (so that --server-pid names a tree this
# test made): a thread per connection that sleeps 1 ms before each reply,
# so that each request blocks its thread at least once.  "end": it starts a
# child at start-up and ends it (and reaps it) when its first connection
# comes, which is after loadgen's first reading: a process of the tree that
# ends during the run.  "burn:N:MS": at its first connection it starts N
# children that each spend MS ms of CPU time, then wait; it serves once
# every child has said it is done.
_SLEEPING_SERVER = r'''
import os, signal, socket, sys, threading, time
body = sys.argv[1].encode()
mode = sys.argv[2] if len(sys.argv) > 2 else ""
child = None
if mode == "end":
    child = os.fork()
    if child == 0:
        time.sleep(60)
        os._exit(0)
def burn(n, ms):
    done = []
    for _ in range(n):
        r, w = os.pipe()
        if os.fork() == 0:
            t = time.process_time()
            while time.process_time() - t < ms / 1000:
                pass
            os.write(w, b"x")
            time.sleep(60)
            os._exit(0)
        os.close(w)
        done.append(r)
    for r in done:
        os.read(r, 1)
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(16)
print(ls.getsockname()[1], flush=True)
def serve(c):
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            chunk = c.recv(4096)
            if not chunk:
                return
            buf += chunk
        _, buf = buf.split(b"\r\n\r\n", 1)
        time.sleep(0.001)
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\nConnection: keep-alive\r\n\r\n"
                  % len(body) + body)
first = True
while True:
    c, _ = ls.accept()
    if first and mode.startswith("burn:"):
        burn(*map(int, mode[5:].split(":")))
    if first and child:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    first = False
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''


@pytest.fixture
def sleeping_server(request):
    extra = [] if getattr(request, "param", None) is None else [str(request.param)]
    proc = subprocess.Popen(["python3", "-c", _SLEEPING_SERVER, DOC.decode(), *extra],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout=START_TIMEOUT), "the test server did not start"
        yield proc, int(proc.stdout.readline())
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=RUN_TIMEOUT)


@pytest.mark.parametrize("sleeping_server", [None, "end"], indirect=True)
def test_server_blocks_counted_with_the_processes_that_ended(sleeping_server, request):
    proc, port = sleeping_server
    ends = request.node.callspec.params["sleeping_server"] is not None
    p, doc = loadgen("--proto", "http", "--port", str(port), "--conns", "2",
                     "--session", "1000000", "--duration", "0.6", "--server-pid", str(proc.pid))
    assert p.returncode == 0, p.stderr
    srv = doc["server_cpu"]
    # Every request's sleep blocked its thread: at least one switch each.
    assert doc["requests"] > 0 and srv["blocked"] >= doc["requests"]
    # The child alive at the first reading and gone at the second.
    assert srv["processes_ended"] == (1 if ends else 0)


@NEEDS_SCHEDSTAT
@pytest.mark.parametrize("sleeping_server", ["burn:20:6"], indirect=True)
def test_server_cpu_of_many_short_processes_is_not_lost_to_clock_ticks(sleeping_server):
    # 20 processes born during the run, each 6 ms of CPU: /proc/PID/stat
    # gives each 0 ticks of 10 ms, so a sum of ticks loses all of them.
    proc, port = sleeping_server
    p, doc = loadgen("--proto", "http", "--port", str(port), "--conns", "2",
                     "--session", "1000000", "--duration", "1.5", "--server-pid", str(proc.pid))
    assert p.returncode == 0, p.stderr
    srv = doc["server_cpu"]
    assert srv["clock"] == "schedstat" and srv["processes"] == 21
    # What the children spent is there, and not in the tick counts: those
    # give each child 0 (the parent's own ticks are in both).
    assert srv["cpu_s"] >= 20 * 0.006
    assert srv["cpu_s"] - (srv["user_s"] + srv["sys_s"]) >= 20 * 0.006 / 2
    assert srv["us_per_request"] == pytest.approx(srv["cpu_s"] * 1e6 / doc["requests"],
                                                  rel=1e-3)
