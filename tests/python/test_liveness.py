"""Liveness across the compartment boundary, through the real driver: a
compartment whose server process is killed is a failed result with the
cause (`isob switch`), a heap that cannot be mapped is ENOMEM at create
(`isob kv` under RLIMIT_AS), and `isob serve` answers the request in flight
with the error, keeps answering, restarts the compartment, and stops on
SIGTERM even while a call is stuck.

The processes killed here are only the servers of compartments these tests
started (children of an isob they started).  Every wait has a time-out so
that a wedged process fails a test instead of hanging the suite; the tests
assert errors, replies and exit statuses, never how long anything took.
"""

from __future__ import annotations

import json
import os
import re
import resource
import selectors
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import limit

REPO = Path(__file__).resolve().parents[2]
ISOB = REPO / "build" / "isob"

# Bounds on waiting (seconds), only so that a broken process cannot hang the
# suite; generous, and never asserted.
RUN_TIMEOUT = limit(600)
START_TIMEOUT = limit(120)
SOCKET_TIMEOUT = limit(60)
FIND_TIMEOUT = limit(120)

# Every mechanism whose compartment is a server process.
SERVER_MECHANISMS = ["process-futex", "process-spin", "process-pipe", "process-socket", "seccomp"]

READY = re.compile(rb"isob serve: listening on 127\.0\.0\.1:(\d+) \(mechanism ([\w-]+)\)")

pytestmark = pytest.mark.skipif(not (ISOB.is_file() and os.access(ISOB, os.X_OK)),
                                reason=f"native driver not built at {ISOB} (run `make`)")


def children_of(pid: int) -> list[int]:
    """The processes whose parent is pid, from /proc."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            kids.append(int(entry))
    return kids


def one_child(proc: subprocess.Popen) -> int:
    """Wait (bounded) for proc to have exactly one live child (its
    compartment's server); return its pid."""
    deadline = time.monotonic() + FIND_TIMEOUT
    while time.monotonic() < deadline and proc.poll() is None:
        kids = children_of(proc.pid)
        if len(kids) == 1:
            return kids[0]
        time.sleep(0.01)
    pytest.fail(f"{proc.args} (exit status {proc.poll()}) did not get its one compartment "
                f"server; children: {children_of(proc.pid)}")


def gone(pid: int) -> bool:
    """True once pid no longer runs (absent, or a zombie left to init)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2:].split()[0] in ("Z", "X")


# System calls a single-threaded serve waits in when it is not in a call
# into its compartment (x86-64 numbers): epoll_wait, epoll_pwait, epoll_pwait2.
EPOLL_SYSCALLS = {232, 281, 441}


def wait_in_call(pid: int) -> None:
    """Wait (bounded) until serve is blocked somewhere other than its epoll
    wait: in the call into its stopped compartment."""
    deadline = time.monotonic() + FIND_TIMEOUT
    while time.monotonic() < deadline:
        try:
            first = Path(f"/proc/{pid}/syscall").read_text().split()[0]
        except (OSError, IndexError):
            pytest.skip(f"/proc/{pid}/syscall is not readable here")
        if first == "running" or int(first) not in EPOLL_SYSCALLS:
            return
        time.sleep(0.01)
    pytest.fail("serve never entered the call into its compartment")


def results(stdout: str) -> list[dict]:
    return [r for r in (json.loads(line) for line in stdout.splitlines() if line.strip())
            if r.get("type") == "result"]


# ---- benchmarks ----------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", SERVER_MECHANISMS)
def test_switch_reports_a_killed_server(mechanism):
    # The first result (payload 0) shows the compartment served; the server
    # is killed while the next one is measured.
    proc = subprocess.Popen([str(ISOB), "switch", "-m", mechanism, "--placement", "same-cpu",
                             "--n", "200000", "--empty-n", "100"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        server = one_child(proc)
        first = None
        for line in proc.stdout:
            if json.loads(line).get("type") == "result":
                first = json.loads(line)
                break
        assert first is not None and first["status"] == "ok", first
        os.kill(server, signal.SIGKILL)
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    res = results(out)
    failed = [r for r in res if r["status"] == "failed"]
    assert failed, f"no failed result; stdout: {out}; stderr: {err}"
    assert failed[0]["reason"].startswith("died: signal 9"), failed[0]["reason"]
    # The cause, not its symptoms.
    for r in res:
        assert "wrong result" not in (r["reason"] or "")
        assert "timed out" not in (r["reason"] or "")
    assert proc.returncode == 1


def _limit_address_space(limit: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


@pytest.mark.parametrize("mechanism", ["direct", "process-futex", "seccomp"])
def test_kv_heap_failure_is_enomem(mechanism):
    # As `ulimit -v 786432`: a 1 GiB store cannot be mapped, by the caller
    # (direct) or by a server, which inherits the limit.
    proc = subprocess.run([str(ISOB), "kv", "-m", mechanism, "--sizes", "1G", "--quick"],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT,
                          preexec_fn=_limit_address_space(768 << 20))
    res = results(proc.stdout)
    assert res, proc.stderr
    assert res[0]["status"] == "failed"
    assert "create" in res[0]["reason"] and os.strerror(12) in res[0]["reason"], res[0]["reason"]
    assert proc.returncode == 1


def test_switch_refuses_two_mechanisms():
    proc = subprocess.run([str(ISOB), "switch", "-m", "direct", "-m", "thread"],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "-m given twice" in lines[0]


# ---- isob serve ----------------------------------------------------------------------


class Serve:
    """One `isob serve` on a free port, its stderr collected."""

    def __init__(self, mechanism: str):
        self.proc = subprocess.Popen([str(ISOB), "serve", "-m", mechanism, "--port", "0",
                                      "--heap-mb", "16"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        self.stderr = b""
        self.port = self._wait_ready()

    def _wait_ready(self) -> int:
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stderr, selectors.EVENT_READ)
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while time.monotonic() < deadline:
                m = READY.search(self.stderr)
                if m:
                    return int(m.group(1))
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    break
                chunk = os.read(self.proc.stderr.fileno(), 4096)
                if not chunk:
                    break
                self.stderr += chunk
        finally:
            sel.close()
        self.kill()
        pytest.fail(f"isob serve did not become ready: {self.stderr.decode(errors='replace')}")

    def connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=SOCKET_TIMEOUT)
        s.settimeout(SOCKET_TIMEOUT)
        return s

    def finish(self, sig: int = signal.SIGTERM) -> int:
        """Send sig; the exit status (the suite's time-out is only a bound)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        _, err = self.proc.communicate(timeout=RUN_TIMEOUT)
        self.stderr += err or b""
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture
def serve_factory():
    started: list[Serve] = []

    def make(mechanism: str) -> Serve:
        srv = Serve(mechanism)
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.kill()


def ask(sock: socket.socket, request: bytes, until: bytes) -> bytes:
    sock.sendall(request)
    return read_until(sock, until)


def read_until(sock: socket.socket, until: bytes) -> bytes:
    got = b""
    while not got.endswith(until):
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


@pytest.mark.parametrize("mechanism", SERVER_MECHANISMS)
def test_serve_survives_a_dead_compartment(serve_factory, mechanism):
    srv = serve_factory(mechanism)
    a, b = srv.connect(), srv.connect()
    with a, b:
        assert ask(a, b"set k 0 0 5\r\nhello\r\n", b"\r\n") == b"STORED\r\n"
        comp = one_child(srv.proc)
        # Stopped, the compartment holds the next request in flight; then
        # it dies under it.
        os.kill(comp, signal.SIGSTOP)
        a.sendall(b"get k\r\n")
        wait_in_call(srv.proc.pid)
        b.sendall(b"version\r\n")
        os.kill(comp, signal.SIGKILL)
        reply = read_until(a, b"\r\n")
        assert reply.startswith(b"SERVER_ERROR compartment died: signal 9"), reply
        assert read_until(b, b"\r\n").startswith(b"VERSION ")
        # A fresh compartment serves; what the dead one stored is gone.
        assert ask(a, b"get k\r\n", b"END\r\n") == b"END\r\n"
        assert ask(a, b"set k 0 0 3\r\nnew\r\n", b"\r\n") == b"STORED\r\n"
        assert ask(a, b"get k\r\n", b"END\r\n") == b"VALUE k 0 3\r\nnew\r\nEND\r\n"
        assert ask(b, b"version\r\n", b"\r\n").startswith(b"VERSION ")
        fresh = one_child(srv.proc)
        assert fresh != comp
    assert srv.finish() == 0
    log = srv.stderr.decode(errors="replace")
    assert f"the {mechanism} compartment died: signal 9" in log, log
    assert "restarted it, and the data it stored is lost" in log, log


@pytest.mark.parametrize("mechanism", ["process-futex", "process-pipe"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_stops_while_a_call_is_stuck(serve_factory, mechanism, sig):
    srv = serve_factory(mechanism)
    comp = one_child(srv.proc)
    with srv.connect() as a:
        os.kill(comp, signal.SIGSTOP)
        a.sendall(b"get k\r\n")
        wait_in_call(srv.proc.pid)
        rc = srv.finish(sig)
    assert rc == 1
    assert "still not stopped after the signal" in srv.stderr.decode(errors="replace")
    # The stuck compartment went with it (it dies with its parent).
    deadline = time.monotonic() + FIND_TIMEOUT
    while not gone(comp) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gone(comp)


def test_serve_refuses_a_compartment_it_cannot_create():
    proc = subprocess.run([str(ISOB), "serve", "-m", "process-futex", "--port", "0",
                           "--heap-mb", "1048576"],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert proc.returncode == 1
    assert "listening" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "creating the process-futex compartment" in lines[0]
    assert os.strerror(12) in lines[0]
