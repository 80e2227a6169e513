"""Servers for the tests that hold `isob serve` against real memcached: each
in its own process group, killed with the test process (PR_SET_PDEATHSIG),
on a loopback port chosen at run time, with every wait bounded.  The bounds
only keep a broken server from hanging the suite; no test asserts how long
anything takes."""

from __future__ import annotations

import ctypes
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import limit

REPO = Path(__file__).resolve().parents[2]
ISOB = REPO / "build" / "isob"
MEMCACHED = shutil.which("memcached")

START_TIMEOUT = limit(120)
SOCKET_TIMEOUT = limit(60)
STOP_TIMEOUT = limit(60)
# Tries at a free port for memcached, which cannot pick one and say which:
# another process may take the port between our probe and its bind.
MEMCACHED_PORT_TRIES = 5

READY = re.compile(rb"isob serve: listening on 127\.0\.0\.1:(\d+) \(mechanism ([\w-]+)\)")

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the test process dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """One server: its process, port, and name (`memcached` or `isob`)."""

    def __init__(self, name: str, argv: list[str]):
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, start_new_session=True,
                                     preexec_fn=_die_with_parent)
        self.stderr = b""
        self.port = 0

    def connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=SOCKET_TIMEOUT)
        s.settimeout(SOCKET_TIMEOUT)
        return s

    def memory_mib(self) -> dict[str, float]:
        """VmRSS and VmHWM (the peak of VmRSS) of the server process, MiB."""
        out = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0]) / 1024.0
        return out

    def stats(self) -> dict[str, str]:
        with self.connect() as s:
            s.sendall(b"stats\r\n")
            got = recv_until(s, b"END\r\n")
        assert got.endswith(b"END\r\n"), f"{self.name}: stats answered {got[-200:]!r}"
        return {parts[1].decode(): parts[2].decode()
                for parts in (line.split(b" ", 2) for line in got.split(b"\r\n"))
                if len(parts) == 3 and parts[0] == b"STAT"}

    def stop(self) -> int:
        """SIGTERM to the group, then SIGKILL; the server's exit status."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                _, err = self.proc.communicate(timeout=STOP_TIMEOUT)
                self.stderr += err or b""
                break
            except subprocess.TimeoutExpired:
                continue
        return self.proc.returncode


def start_isob(mechanism: str, *extra: str) -> ServerProcess:
    srv = ServerProcess("isob", [str(ISOB), "serve", "-m", mechanism, "--port", "0", *extra])
    sel = selectors.DefaultSelector()
    sel.register(srv.proc.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while time.monotonic() < deadline:
            m = READY.search(srv.stderr)
            if m:
                srv.port = int(m.group(1))
                return srv
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            chunk = os.read(srv.proc.stderr.fileno(), 4096)
            if not chunk:
                break
            srv.stderr += chunk
    finally:
        sel.close()
    srv.stop()
    raise AssertionError(f"isob serve did not become ready: {srv.stderr.decode(errors='replace')}")


def start_memcached(*extra: str) -> ServerProcess:
    """memcached with one worker thread, as the kv-server benchmark runs it."""
    assert MEMCACHED, "memcached is not on PATH"
    user = ["-u", "root"] if os.geteuid() == 0 else []
    for _ in range(MEMCACHED_PORT_TRIES):
        port = _free_port()
        srv = ServerProcess("memcached", [MEMCACHED, "-t", "1", "-p", str(port), "-l", "127.0.0.1",
                                          "-U", "0", *user, *extra])
        srv.port = port
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and srv.proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                    return srv
            except OSError:
                time.sleep(0.05)
        srv.stop()
    raise AssertionError(f"memcached did not start: {srv.stderr.decode(errors='replace')}")


def recv_until(sock: socket.socket, end: bytes, limit: int = 1 << 30) -> bytes:
    """Read until the bytes received end with `end`, the peer closes, or
    `limit` bytes came."""
    got = bytearray()
    while not got.endswith(end) and len(got) < limit:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        got += chunk
    return bytes(got)


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    got = bytearray()
    while len(got) < n:
        chunk = sock.recv(min(1 << 20, n - len(got)))
        if not chunk:
            break
        got += chunk
    return bytes(got)


def scheduler_counts() -> bool:
    """Whether this kernel keeps the scheduler's CPU count per thread
    (/proc/PID/task/TID/schedstat): the CPU readings fall back to clock
    ticks where it does not."""
    try:
        with open(f"/proc/self/task/{os.getpid()}/schedstat") as f:
            return int(f.read().split()[0]) > 0
    except (OSError, ValueError, IndexError):
        return False


NEEDS_SCHEDSTAT = pytest.mark.skipif(not scheduler_counts(),
                                     reason="no per-thread schedstat here: the CPU readings "
                                            "fall back to clock ticks")
