"""`isob serve --session fork` is bounded by memory.

A fork session's process shares the listener's empty store copy-on-write
and holds a page of its own only once it writes there; `serve` computes
what max-conns sessions could come to hold at worst (each filling its
store) and refuses to start, with both numbers, when that exceeds what the
machine can give.  These tests start the real `isob serve`, open real
connections, and read each process's proportional set size (PSS) from
/proc/PID/smaps_rollup: the PSS of the listener and its sessions add up to
the memory they hold together, a page shared by k processes counting 1/k
in each.  Only the processes these tests started are read, and they die
with the test (serve_helpers).  Memory is counted, never time.
"""

from __future__ import annotations

import math
import os
import re
import selectors
import socket
import subprocess
import time

import pytest

from conftest import limit
from serve_helpers import ISOB, READY, SOCKET_TIMEOUT, START_TIMEOUT, ServerProcess, recv_until

pytestmark = pytest.mark.skipif(not (ISOB.is_file() and os.access(ISOB, os.X_OK)),
                                reason="needs build/isob (run `make`)")

SESSIONS = 50
HEAP_MB = 64            # isob serve's default --heap-mb
DEFAULT_MAX_CONNS = 1024
VALUE = 1024 * 1024 - 1024  # a large value the default --max-value takes
FILL_VALUES = 80        # x VALUE: more than the whole heap, so the store evicts
FULL = b"SERVER_ERROR out of memory storing object\r\n"
# Bound on waiting for the sessions' processes to appear; never asserted.
SETTLE_TIMEOUT = limit(120)

NUM = r"(\d+(?:\.\d+)?)"
REFUSAL = re.compile(
    r"^isob serve: error: --session fork with --max-conns (\d+) may need " + NUM +
    r" MiB: (\d+) sessions of at most " + NUM + r" MiB each \(a session can fill its store: "
    r"--heap-mb (\d+)[^)]*\) and " + NUM + r" MiB for the listener, more than the " + NUM +
    r" MiB it may take \(([^)]+)\); lower --max-conns \((\d+) fit\) or --heap-mb, or set the "
    r"limit with --memory-limit-mb \(see isob serve --help\)$")
BOUND = re.compile(
    r"isob serve: fork sessions may take " + NUM + r" MiB: (\d+) sessions of at most " + NUM +
    r" MiB each and " + NUM + r" MiB for the listener, within " + NUM + r" MiB \(([^)]+)\)")


class Refused:
    def __init__(self, status: int, stderr: str):
        self.status, self.stderr = status, stderr
        self.m = REFUSAL.match(stderr.strip())
        assert self.m, f"not the refusal: {stderr!r}"
        g = self.m.groups()
        self.max_conns, self.total, self.sessions, self.per_session = \
            int(g[0]), float(g[1]), int(g[2]), float(g[3])
        self.heap_mb, self.listener, self.limit, self.limit_what, self.fit = \
            int(g[4]), float(g[5]), float(g[6]), g[7], int(g[8])


def launch(*extra: str) -> ServerProcess | Refused:
    """`isob serve -m direct --session fork` with extra options: the server
    once it is listening (its bound line in .bound), or how it refused."""
    srv = ServerProcess("isob", [str(ISOB), "serve", "-m", "direct", "--port", "0",
                                 "--session", "fork", *extra])
    sel = selectors.DefaultSelector()
    sel.register(srv.proc.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while time.monotonic() < deadline:
            m = READY.search(srv.stderr)
            if m:
                srv.port = int(m.group(1))
                srv.bound = BOUND.search(srv.stderr.decode())
                assert srv.bound, f"no bound stated: {srv.stderr!r}"
                return srv
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            chunk = os.read(srv.proc.stderr.fileno(), 4096)
            if not chunk:
                break
            srv.stderr += chunk
    finally:
        sel.close()
    status = srv.stop()
    if status == 2:
        return Refused(status, srv.stderr.decode(errors="replace"))
    raise AssertionError(f"isob serve neither started nor refused (status {status}): "
                         f"{srv.stderr.decode(errors='replace')}")


def smaps(pid: int) -> dict[str, int]:
    """/proc/PID/smaps_rollup, in KiB."""
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                out[parts[0][:-1]] = int(parts[1])
    return out


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(x) for x in f.read().split()]


def mib(kib: int) -> float:
    return kib / 1024.0


def set_get(s: socket.socket, key: bytes, value: bytes) -> None:
    s.sendall(b"set %s 0 0 %d\r\n%s\r\nget %s\r\n" % (key, len(value), value, key))
    want = b"STORED\r\nVALUE %s 0 %d\r\n%s\r\nEND\r\n" % (key, len(value), value)
    got = recv_until(s, b"END\r\n", limit=len(want) + 256)
    assert got == want, f"{key!r}: {got[:200]!r}"


def wait_sessions(listener: int, n: int) -> list[int]:
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        kids = children(listener)
        if len(kids) >= n or time.monotonic() > deadline:
            return kids
        time.sleep(0.05)


def hold_sessions(srv: ServerProcess, fill: bool) -> dict:
    """Open SESSIONS connections, each answering a set and a get and kept
    open; with fill, one more writes more than its whole store first.  The
    memory of the listener and its sessions, as smaps_rollup counts it."""
    conns: list[socket.socket] = []
    try:
        for i in range(SESSIONS):
            s = srv.connect()
            conns.append(s)
            set_get(s, b"key%d" % i, b"value of session %d" % i)
        filler = None
        if fill:
            s = srv.connect()
            conns.append(s)
            body = bytes((i * 7 + 3) & 0xFF for i in range(4096)) * (VALUE // 4096 + 1)
            replies: dict[bytes, int] = {}
            for j in range(FILL_VALUES):
                v = body[j:j + VALUE]
                s.sendall(b"set fill%d 0 0 %d\r\n%s\r\n" % (j, VALUE, v))
                r = recv_exactly_line(s)
                replies[r] = replies.get(r, 0) + 1
            # A full store evicts, or refuses a value when no record of its
            # size can be freed; either way the arena (7/8 of the heap) is
            # full of values of about 1 MiB.
            assert set(replies) <= {b"STORED\r\n", FULL}, replies
            assert replies.get(b"STORED\r\n", 0) >= HEAP_MB * 7 // 8 - 2, replies
            s.sendall(b"delete fill0\r\n")
            assert recv_exactly_line(s) in (b"DELETED\r\n", b"NOT_FOUND\r\n")
            set_get(s, b"last", body[:VALUE])
        kids = wait_sessions(srv.proc.pid, len(conns))
        assert len(kids) == len(conns), f"{len(kids)} session processes for {len(conns)}"
        # Every session still answers, after the others opened.
        for i, s in enumerate(conns[:SESSIONS]):
            s.sendall(b"get key%d\r\n" % i)
            want = b"VALUE key%d 0 %d\r\nvalue of session %d\r\nEND\r\n" % (
                i, len(b"value of session %d" % i), i)
            assert recv_until(s, b"END\r\n") == want
        per = {k: smaps(k) for k in kids}
        if fill:
            # The filler is the newest session: the one with most private pages.
            filler = max(per, key=lambda k: per[k]["Private_Dirty"])
        listener = smaps(srv.proc.pid)
        return {"sessions": per, "listener": listener, "filler": filler}
    finally:
        for s in conns:
            s.close()


def recv_exactly_line(s: socket.socket) -> bytes:
    return recv_until(s, b"\r\n", limit=256)


def check_within_bound(srv: ServerProcess, got: dict) -> str:
    total_b, n, per_b, listener_b, limit = (float(x) for x in srv.bound.groups()[:5])
    sessions = got["sessions"]
    pss = {k: mib(v["Pss"]) for k, v in sessions.items()}
    uss = {k: mib(v["Private_Clean"] + v["Private_Dirty"]) for k, v in sessions.items()}
    total = sum(pss.values()) + mib(got["listener"]["Pss"])
    plain = [k for k in sessions if k != got["filler"]]
    line = (f"{len(sessions)} fork sessions: PSS {total:.1f} MiB with the listener "
            f"(bound stated {total_b:.1f} MiB for {int(n)} sessions); a session that served a "
            f"set and a get: PSS {max(pss[k] for k in plain):.2f} MiB at most, USS "
            f"{sum(uss[k] for k in plain) / len(plain):.2f} MiB on average (bound {per_b:.1f})")
    assert total <= total_b, line
    assert total_b <= limit
    for k in sessions:
        assert pss[k] <= per_b, (k, pss[k], line)
    # A session does not populate the store it does not touch: its own pages
    # are a small part of the heap (it was all of it before).
    assert max(uss[k] for k in plain) < HEAP_MB / 8, line
    if got["filler"]:
        f = got["filler"]
        line += f"; the session that filled its store: USS {uss[f]:.1f} MiB, PSS {pss[f]:.1f} MiB"
        # It did fill it (the arena is 7/8 of the heap), and stayed within
        # the worst case stated for a session.
        assert uss[f] >= HEAP_MB / 2, line
        assert pss[f] <= per_b, line
    return line


def test_fork_with_the_defaults_refuses_with_both_numbers_or_holds_50_sessions():
    got = launch()
    if isinstance(got, Refused):
        r = got
        print(f"\nrefused: {r.stderr.strip()}")
        assert r.stderr.count("\n") == 1, r.stderr
        assert r.max_conns == r.sessions == DEFAULT_MAX_CONNS and r.heap_mb == HEAP_MB
        assert r.total > r.limit
        assert abs(r.total - (r.sessions * r.per_session + r.listener)) <= 0.05 * r.sessions + 0.1
        # A session's worst case is at least its whole store.
        assert r.per_session >= HEAP_MB
        # (The numbers are rounded to 0.1 MiB: each term may be 0.05 off.)
        assert r.fit < DEFAULT_MAX_CONNS
        assert r.listener + r.fit * r.per_session <= r.limit + 0.05 * (r.fit + 2)
        if r.limit_what == "MemAvailable + SwapFree":
            with open("/proc/meminfo") as f:
                info = {ln.split(":")[0]: int(ln.split()[1]) for ln in f}
            assert r.limit <= mib(info["MemTotal"] + info["SwapTotal"])
        return
    srv = got
    try:
        print("\n" + check_within_bound(srv, hold_sessions(srv, fill=False)))
    finally:
        srv.stop()


def test_fork_with_the_defaults_holds_50_sessions_under_a_limit_that_takes_them():
    # The defaults' worst case, stated by a refusal under a tiny limit, is
    # then given as the limit: the server starts, as on a machine that has
    # that much, and holds 50 sessions within it.
    r = launch("--memory-limit-mb", "1")
    assert isinstance(r, Refused) and r.max_conns == DEFAULT_MAX_CONNS
    srv = launch("--memory-limit-mb", str(math.ceil(r.total)))
    assert isinstance(srv, ServerProcess), srv.stderr
    try:
        assert srv.bound.group(2) == str(DEFAULT_MAX_CONNS)
        # A limit beyond what the machine has is said on the same line.
        with open("/proc/meminfo") as f:
            info = {ln.split(":")[0]: int(ln.split()[1]) for ln in f}
        if r.total > mib(info["MemTotal"] + info["SwapTotal"]):
            assert b"more than the " in srv.stderr and b"this machine can give now" in srv.stderr
        print("\n" + check_within_bound(srv, hold_sessions(srv, fill=False)))
    finally:
        srv.stop()


def test_fork_holds_50_sessions_within_the_bound_it_states():
    got = launch("--max-conns", "64")
    if isinstance(got, Refused):
        pytest.skip(f"SKIP: this machine cannot hold 64 fork sessions at worst: {got.stderr}")
    srv = got
    try:
        assert srv.bound.group(2) == "64"
        line = check_within_bound(srv, hold_sessions(srv, fill=True))
        print("\n" + line)
    finally:
        assert srv.stop() in (0, -15), srv.stderr.decode(errors="replace")


def test_memory_limit_is_compared_and_can_be_set():
    r = launch("--max-conns", "64", "--memory-limit-mb", "1")
    assert isinstance(r, Refused)
    assert r.limit == 1.0 and r.limit_what == "--memory-limit-mb" and r.fit == 0
    # The stated worst case is what the limit must hold: just enough starts,
    # one MiB less is refused.
    enough = math.ceil(r.total)
    srv = launch("--max-conns", "64", "--memory-limit-mb", str(enough))
    assert isinstance(srv, ServerProcess), srv.stderr
    try:
        assert float(srv.bound.group(1)) == r.total and srv.bound.group(6) == "--memory-limit-mb"
        with srv.connect() as s:
            set_get(s, b"k", b"v")
    finally:
        srv.stop()
    less = launch("--max-conns", "64", "--memory-limit-mb", str(math.floor(r.total) - 1))
    assert isinstance(less, Refused) and less.total == r.total
    # Fewer connections fit under the same limit.
    srv = launch("--max-conns", str(less.fit), "--memory-limit-mb", str(math.floor(r.total) - 1))
    assert isinstance(srv, ServerProcess), srv.stderr
    srv.stop()


def test_memory_limit_without_fork_is_a_usage_error():
    p = subprocess.run([str(ISOB), "serve", "-m", "direct", "--memory-limit-mb", "100"],
                       capture_output=True, text=True, timeout=START_TIMEOUT)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--session fork" in p.stderr


def test_isobench_serve_passes_the_limit_on():
    from isobench.measure import serve
    parser = __import__("argparse").ArgumentParser()
    serve.add_parser(parser.add_subparsers())
    args = parser.parse_args(["serve", "-m", "direct", "--session", "fork",
                              "--memory-limit-mb", "4096"])
    argv = serve.isob_argv(args)
    assert argv[argv.index("--memory-limit-mb") + 1] == "4096"
