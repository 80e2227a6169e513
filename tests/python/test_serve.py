"""`isob serve` over real sockets: a memcached client's round trip, and bad
input from a raw socket, on `direct` and on `process-futex`.

Each test starts its own server on a free port (--port 0; the port is read
from the ready line) and stops it in teardown with SIGTERM, which must end
it cleanly.  Every socket operation has a time-out, so a server that stops
answering fails a test instead of hanging the suite; nothing asserts how
long anything takes.
"""

from __future__ import annotations

import argparse
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import limit

REPO = Path(__file__).resolve().parents[2]
ISOB = REPO / "build" / "isob"

# Bounds on waiting (seconds), only so that a broken server cannot hang the
# suite; they are generous and never asserted.
START_TIMEOUT = limit(120)
SOCKET_TIMEOUT = limit(60)
STOP_TIMEOUT = limit(60)

MECHANISMS = ["direct", "process-futex"]

MiB = 1 << 20  # the default value limit, as memcached's

READY = re.compile(rb"isob serve: listening on 127\.0\.0\.1:(\d+) \(mechanism ([\w-]+)\)")

pytestmark = pytest.mark.skipif(not (ISOB.is_file() and os.access(ISOB, os.X_OK)),
                                reason=f"native driver not built at {ISOB} (run `make`)")


class Server:
    """One `isob serve` process and the port it listens on."""

    def __init__(self, mechanism: str, *extra: str):
        self.proc = subprocess.Popen([str(ISOB), "serve", "-m", mechanism, "--port", "0",
                                      "--heap-mb", "16", *extra],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        self.stderr = b""
        self.port = self._wait_ready(mechanism)

    def _wait_ready(self, mechanism: str) -> int:
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stderr, selectors.EVENT_READ)
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while time.monotonic() < deadline:
                m = READY.search(self.stderr)
                if m:
                    assert m.group(2).decode() == mechanism
                    return int(m.group(1))
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    break
                chunk = os.read(self.proc.stderr.fileno(), 4096)
                if not chunk:
                    break
                self.stderr += chunk
        finally:
            sel.close()
        self.stop()
        pytest.fail(f"isob serve did not become ready; stderr: {self.stderr.decode(errors='replace')}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=SOCKET_TIMEOUT)
        s.settimeout(SOCKET_TIMEOUT)
        return s

    def stop(self) -> int:
        """SIGTERM, then the exit status; SIGKILL only if it does not stop."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=STOP_TIMEOUT)
        self.stderr += err or b""
        return self.proc.returncode


@pytest.fixture(params=MECHANISMS)
def server(request):
    srv = Server(request.param)
    try:
        yield srv
    finally:
        rc = srv.stop()
    assert rc == 0, f"isob serve exited with {rc}; stderr: {srv.stderr.decode(errors='replace')}"


def recv_exactly_or_eof(sock: socket.socket, want: bytes) -> bytes:
    """Read until the bytes received end with `want` (or the peer closes)."""
    got = b""
    while not got.endswith(want):
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def converse(srv: Server, request: bytes, until: bytes) -> bytes:
    with srv.connect() as s:
        s.sendall(request)
        return recv_exactly_or_eof(s, until)


def assert_intact(srv: Server) -> None:
    """The key stored before the bad input is still there, and the server
    still takes new connections."""
    assert srv.alive()
    assert converse(srv, b"get keep\r\n", b"END\r\n") == b"VALUE keep 7 4\r\nsafe\r\nEND\r\n"


def store_keep(srv: Server) -> None:
    assert converse(srv, b"set keep 7 0 4\r\nsafe\r\n", b"\r\n") == b"STORED\r\n"


# ---- a real memcached client ----

def test_pymemcache_round_trip(server):
    pymemcache = pytest.importorskip("pymemcache")
    from pymemcache.client.base import Client
    from pymemcache import serde

    c = Client(("127.0.0.1", server.port), connect_timeout=SOCKET_TIMEOUT, timeout=SOCKET_TIMEOUT,
               serde=serde.pickle_serde)
    try:
        assert c.version()
        # pymemcache's default is noreply for set: these also test noreply.
        assert c.set("s", "text")
        assert c.set("b", b"\x00\r\nbytes\r\n")
        assert c.set("n", 42)
        assert c.set("d", {"k": [1, 2]})
        assert c.set("e", b"")
        # The type comes back only if the flags did: pymemcache encodes it there.
        assert c.get("s") == "text"
        assert c.get("b") == b"\x00\r\nbytes\r\n"
        assert c.get("n") == 42
        assert c.get("d") == {"k": [1, 2]}
        assert c.get("e") == b""
        assert c.get("missing") is None
        assert c.get_many(["s", "n", "missing", "d"]) == {"s": "text", "n": 42, "d": {"k": [1, 2]}}
        value, cas = c.gets("n")
        assert value == 42 and cas is not None
        assert c.add("s", "other", noreply=False) is False
        assert c.add("new", "v", noreply=False) is True
        assert c.replace("absent", "v", noreply=False) is False
        assert c.replace("new", "w", noreply=False) is True
        assert c.get("new") == "w"
        assert c.delete("s", noreply=False) is True
        assert c.delete("s", noreply=False) is False
        assert c.get("s") is None
        assert c.set("raw", b"x", flags=0xDEADBEEF, noreply=False)
        assert converse(server, b"get raw\r\n", b"END\r\n") == \
            b"VALUE raw 3735928559 1\r\nx\r\nEND\r\n"
        stats = c.stats()
        assert stats[b"curr_items"] == 6  # b, n, d, e, new, raw (s was deleted)
        assert stats[b"mechanism"] == server.proc.args[3].encode()
        assert c.flush_all(noreply=False)
        assert c.get_many(["b", "n", "d"]) == {}
    finally:
        c.close()
    # Flags exactly as sent, seen by a client that does not interpret them.
    assert converse(server, b"set f 4294967295 0 1\r\nz\r\nget f\r\n", b"END\r\n") == \
        b"STORED\r\nVALUE f 4294967295 1\r\nz\r\nEND\r\n"


def test_pymemcache_largest_value(server):
    # The default limit is memcached's 1 MiB: exactly that much goes in and
    # comes back whole across the compartment; one byte more is refused and
    # the connection goes on.
    pytest.importorskip("pymemcache")
    from pymemcache.client.base import Client
    from pymemcache.exceptions import MemcacheServerError

    big = bytes((i * 7 + i // 4099) & 0xFF for i in range(MiB))
    c = Client(("127.0.0.1", server.port), connect_timeout=SOCKET_TIMEOUT, timeout=SOCKET_TIMEOUT)
    try:
        assert c.set("big", big, noreply=False)
        assert c.get("big") == big
        assert c.set("big", big[::-1], noreply=False)  # overwrite in place, same size class
        assert c.get_many(["big", "none"]) == {"big": big[::-1]}
        with pytest.raises(MemcacheServerError, match="object too large for cache"):
            c.set("huge", big + b"!", noreply=False)
        assert c.get("huge") is None
        assert c.set("small", b"s", noreply=False) and c.get("small") == b"s"
        assert c.delete("big", noreply=False) and c.get("big") is None
    finally:
        c.close()


def test_max_value_option():
    # A lower limit refuses what it should; a higher one (as memcached -I)
    # takes values beyond 1 MiB.
    for limit, ok, refused in ((1000, 1000, 1001), (3 * MiB, 3 * MiB, 3 * MiB + 1)):
        srv = Server("direct", "--max-value", str(limit))
        try:
            value = b"v" * ok
            reply = converse(srv, b"set k 0 0 %d\r\n%s\r\nget k\r\n" % (ok, value), b"END\r\n")
            assert reply == b"STORED\r\nVALUE k 0 %d\r\n%s\r\nEND\r\n" % (ok, value)
            reply = converse(srv, b"set k 0 0 %d\r\n%s\r\nget k\r\n" % (refused, value + b"w"),
                             b"END\r\n")
            assert reply == b"SERVER_ERROR object too large for cache\r\nEND\r\n"
        finally:
            assert srv.stop() == 0, srv.stderr.decode(errors="replace")


def test_pipelined_requests(server):
    request = b"".join(b"set k%d %d 0 2\r\nv%d\r\n" % (i, i, i % 10) for i in range(200))
    request += b"get " + b" ".join(b"k%d" % i for i in range(200)) + b"\r\n"
    reply = converse(server, request, b"END\r\n")
    expected = b"STORED\r\n" * 200 + b"".join(
        b"VALUE k%d %d 2\r\nv%d\r\n" % (i, i, i % 10) for i in range(200)) + b"END\r\n"
    assert reply == expected


# ---- bad input from a raw socket ----

BAD_INPUT = [
    # (request, the whole reply, whether the server then closes)
    (b"bogus command\r\n", b"ERROR\r\n", False),
    (b"\r\n", b"ERROR\r\n", False),
    (b"set k 0 0 notanumber\r\n", b"CLIENT_ERROR bad command line format\r\n", False),
    (b"set " + b"k" * 251 + b" 0 0 1\r\n", b"CLIENT_ERROR bad command line format\r\n", False),
    (b"get " + b"k" * 251 + b"\r\n", b"CLIENT_ERROR bad command line format\r\n", False),
    (b"delete keep 10\r\n",
     b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n", False),
    # A block one byte longer than announced: refused, and the byte left
    # over (with its \r\n) is then a line of its own.
    (b"set keep 0 0 3\r\nabcd\r\n", b"CLIENT_ERROR bad data chunk\r\nERROR\r\n", False),
    (b"set keep 0 0 %d\r\n" % (MiB + 1) + b"x" * (MiB + 1) + b"\r\n",
     b"SERVER_ERROR object too large for cache\r\n", False),
    # A command this server does not have: memcached's ERROR.
    (b"lru_crawler metadump all\r\n", b"ERROR\r\n", False),
    # append's data is data, never run as a command (here the item is
    # missing, so nothing is stored).
    (b"append nokey 0 0 11\r\nflush_all\r\n\r\n", b"NOT_STORED\r\n", False),
    (b"incr keep 1\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n", False),
    # memcached's binary protocol (magic 0x80): one binary "not supported"
    # response (status 0x83, its body the reason), then the close.
    (b"\x80\x00\x00\x04" + bytes(range(11, 200)) + b"\r\n",
     bytes.fromhex("810000000000008300000032") + bytes(12)
     + b"isob serve speaks the memcached text protocol only", True),
    # Other junk: lines of it are unknown commands.
    (b"\x81\x00\x00\x04" + bytes(range(11, 200)) + b"\r\n", b"ERROR\r\n", False),
    (b"z" * 5000, b"CLIENT_ERROR line too long\r\n", True),
    (b"quit\r\n", b"", True),
]


@pytest.mark.parametrize("request_bytes,reply,closes", BAD_INPUT,
                         ids=[f"bad{i}" for i in range(len(BAD_INPUT))])
def test_bad_input(server, request_bytes, reply, closes):
    store_keep(server)
    with server.connect() as s:
        s.sendall(request_bytes)
        got = recv_exactly_or_eof(s, reply) if reply else b""
        assert got == reply
        if closes:
            assert s.recv(65536) == b""  # a clean close, nothing more
        else:
            # The connection still works after the error.
            s.sendall(b"version\r\n")
            assert recv_exactly_or_eof(s, b"\r\n").startswith(b"VERSION ")
    # A refused set of `keep` removes it (as memcached does); every other
    # bad input leaves it alone.
    if b"too large" in reply:
        assert converse(server, b"get keep\r\n", b"END\r\n") == b"END\r\n"
        store_keep(server)
    assert_intact(server)


def test_disconnect_mid_value(server):
    store_keep(server)
    with server.connect() as s:
        s.sendall(b"set partial 0 0 100\r\n" + b"x" * 10)
    with server.connect() as s:
        s.sendall(b"set keep 0 0 100\r\n" + b"y" * 50)
    assert converse(server, b"get partial\r\n", b"END\r\n") == b"END\r\n"
    assert_intact(server)


def test_byte_by_byte(server):
    with server.connect() as s:
        for b in b"set slow 3 0 5\r\nhello\r\nget slow\r\n":
            s.sendall(bytes([b]))
        assert recv_exactly_or_eof(s, b"END\r\n") == b"STORED\r\nVALUE slow 3 5\r\nhello\r\nEND\r\n"


def test_many_idle_connections(server):
    socks = [server.connect() for _ in range(100)]
    try:
        for s in socks[::10]:
            s.sendall(b"version\r\n")
            assert recv_exactly_or_eof(s, b"\r\n").startswith(b"VERSION ")
    finally:
        for s in socks:
            s.close()
    assert server.alive()


def test_max_conns_refusal():
    srv = Server("direct", "--max-conns", "2")
    try:
        a, b = srv.connect(), srv.connect()
        for s in (a, b):
            s.sendall(b"version\r\n")
            assert recv_exactly_or_eof(s, b"\r\n").startswith(b"VERSION ")
        with srv.connect() as c:
            assert recv_exactly_or_eof(c, b"\r\n") == b"SERVER_ERROR too many open connections\r\n"
            assert c.recv(100) == b""
        a.close()
        # The server notices the close in its own time: retry until a
        # connection is accepted, within a bound that only guards a hang.
        deadline = time.monotonic() + SOCKET_TIMEOUT
        while True:
            with srv.connect() as c:
                c.sendall(b"version\r\n")
                reply = recv_exactly_or_eof(c, b"\r\n")
            if reply.startswith(b"VERSION ") or time.monotonic() > deadline:
                break
        assert reply.startswith(b"VERSION ")
        b.close()
    finally:
        assert srv.stop() == 0


def test_usage_errors():
    def run(*args):
        return subprocess.run([str(ISOB), "serve", *args], capture_output=True, text=True,
                              timeout=STOP_TIMEOUT, stdin=subprocess.DEVNULL)

    p = run()
    assert p.returncode == 2 and "needs -m MECH" in p.stderr
    p = run("-m", "no-such-mechanism")
    assert p.returncode == 2 and "unknown mechanism" in p.stderr
    p = run("-m", "direct", "--max-value", "99999999")
    assert p.returncode == 2 and "--max-value" in p.stderr
    assert p.stderr.count("\n") == 1
    for bad in ("1", "x", "0"):
        p = run("-m", "direct", "--buffer-mb", bad)
        assert p.returncode == 2 and "--buffer-mb" in p.stderr and p.stderr.count("\n") == 1
    p = run("--help")
    assert p.returncode == 0 and "isob serve -m MECH" in p.stdout


# ---- the Python wrapper ----

def _serve_module():
    sys.path.insert(0, str(REPO / "python"))
    from isobench.measure import serve
    return serve


def test_wrapper_builds_argv(monkeypatch):
    serve = _serve_module()
    monkeypatch.setenv("ISOBENCH_ISOB", str(ISOB))
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    serve.add_parser(sub)
    args = parser.parse_args(["serve", "-m", "direct", "--port", "0", "--cpu", "1"])
    assert args.func is serve.serve_main
    assert serve.isob_argv(args) == [str(ISOB), "serve", "-m", "direct", "--port", "0",
                                     "--cpu", "1"]
    assert serve.isob_argv(["-m", "x"]) == [str(ISOB), "serve", "-m", "x"]
    args = parser.parse_args(["serve", "-m", "direct", "--buffer-mb", "32", "-M"])
    assert serve.isob_argv(args) == [str(ISOB), "serve", "-m", "direct", "--buffer-mb", "32",
                                     "--no-evict"]
    args = parser.parse_args(["serve", "-m", "direct", "--session", "fork", "--http",
                              "--startup-mb", "64", "--preload-keys", "10"])
    assert serve.isob_argv(args) == [str(ISOB), "serve", "-m", "direct", "--session", "fork",
                                     "--startup-mb", "64", "--preload-keys", "10", "--http"]
    args = parser.parse_args(["serve", "-m", "direct", "--per-connection"])
    assert serve.isob_argv(args)[-1] == "--per-connection"
    args = parser.parse_args(["serve", "-m", "direct", "--session", "rollback", "--workers", "3",
                              "--rollback-method", "fork", "--rollback-verify"])
    assert serve.isob_argv(args) == [str(ISOB), "serve", "-m", "direct", "--session", "rollback",
                                     "--workers", "3", "--rollback-method", "fork",
                                     "--rollback-verify"]


def test_wrapper_execs_isob():
    env = {**os.environ, "ISOBENCH_ISOB": str(ISOB),
           "PYTHONPATH": str(REPO / "python") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, "-c",
                        "import sys; from isobench.measure.serve import serve_main; "
                        "sys.exit(serve_main(['--help']))"],
                       capture_output=True, text=True, timeout=STOP_TIMEOUT, env=env,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0
    assert "isob serve -m MECH" in p.stdout


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sigint_stops_cleanly_with_clients_connected(mechanism):
    srv = Server(mechanism)
    try:
        idle = srv.connect()
        partial = srv.connect()
        partial.sendall(b"set k 0 0 100\r\nxx")
        store_keep(srv)
        srv.proc.send_signal(signal.SIGINT)
        assert srv.proc.wait(timeout=STOP_TIMEOUT) == 0
        # The server is gone, so are its connections.
        assert idle.recv(100) == b""
        idle.close()
        partial.close()
    finally:
        srv.stop()
    assert b"stopping" in srv.stderr
