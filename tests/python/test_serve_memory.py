"""Two memory attacks on `isob serve`, each also run against real memcached
in the same test, with the servers' resident memory compared.

1. One 4 KB request, `get k k k ...`, names a value of about 1 MiB 2,000
   times: a server that builds the reply whole before sending needs 2 GB.
2. 800 connections each send all but 1 KiB of a value of about 1 MiB and
   stop; then they close.  A server that holds every unfinished value
   needs 800 MB, and one that keeps its buffers after a close keeps them.

Both servers get the same store memory (memcached -m 8, isob --heap-mb 8)
and the same requests.  isob runs `direct`, so its store's heap is resident
in the server process itself (populated at start): the measured process
holds everything.  Memory is compared as VmHWM (the peak of VmRSS) and VmRSS
from /proc: counts, not durations.  Each attack first proves it happened:
the values read back are checked byte for byte, and every byte sent was
read by the server (its own `stats` bytes_read) before memory is measured.
"""

from __future__ import annotations

import os
import socket
import time

import pytest

from conftest import limit
from serve_helpers import (ISOB, MEMCACHED, SOCKET_TIMEOUT, ServerProcess, recv_exactly,
                           start_isob, start_memcached)

pytestmark = pytest.mark.skipif(
    not (ISOB.is_file() and os.access(ISOB, os.X_OK) and MEMCACHED),
    reason="needs build/isob (run `make`) and memcached (scripts/setup-system.sh)")

STORE_MB = 8
# The largest round value both servers take by default: memcached's item
# limit of 1 MiB includes its own header.
VALUE = 1024 * 1024 - 1024
# Bound on waiting for a server to read what was sent; never asserted.
SETTLE_TIMEOUT = limit(120)
# The allowed ratio of isob's memory to memcached's.
MAX_RATIO = 2.0


def start(name: str) -> ServerProcess:
    if name == "memcached":
        return start_memcached("-m", str(STORE_MB))
    return start_isob("direct", "--heap-mb", str(STORE_MB))


def wait_read(srv: ServerProcess, at_least: int) -> dict[str, str]:
    """Its stats once the server has read at_least bytes in all."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        st = srv.stats()
        if int(st["bytes_read"]) >= at_least or time.monotonic() > deadline:
            return st
        time.sleep(0.05)


def wait_connections(srv: ServerProcess, at_most: int) -> dict[str, str]:
    """Its stats once at most at_most connections are open (the stats one
    included)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        st = srv.stats()
        if int(st["curr_connections"]) <= at_most or time.monotonic() > deadline:
            return st
        time.sleep(0.05)


def value_bytes() -> bytes:
    block = bytes((i * 7 + 3) & 0xFF for i in range(4096))
    return (block * (VALUE // len(block) + 1))[:VALUE]


# ---- 1: one multi-get naming a large value 2,000 times ----

MULTIGET_KEYS = 2000
MULTIGET_READ = 32  # values read back (and checked) before memory is measured


def multiget_attack(name: str) -> dict:
    srv = start(name)
    try:
        value = value_bytes()
        with srv.connect() as s:
            s.sendall(b"set k 5 0 %d\r\n%s\r\n" % (VALUE, value))
            assert recv_exactly(s, 8) == b"STORED\r\n"
        before = srv.memory_mib()
        line = b"get" + b" k" * MULTIGET_KEYS + b"\r\n"
        assert len(line) < 4100
        with srv.connect() as s:
            s.sendall(line)
            head = b"VALUE k 5 %d\r\n" % VALUE
            for _ in range(MULTIGET_READ):
                assert recv_exactly(s, len(head)) == head
                assert recv_exactly(s, VALUE + 2) == value + b"\r\n"
            during = srv.memory_mib()
        # The server is still serving, and can be asked.
        st = srv.stats()
        return {"before": before, "during": during, "stats": st}
    finally:
        assert srv.stop() in (0, -15), srv.stderr.decode(errors="replace")


def test_multiget_of_a_large_value_stays_bounded():
    got = {name: multiget_attack(name) for name in ("memcached", "isob")}
    mc, isob = got["memcached"]["during"]["VmHWM"], got["isob"]["during"]["VmHWM"]
    print(f"\nmulti-get attack, VmHWM: memcached {mc:.1f} MiB, isob {isob:.1f} MiB "
          f"(isob before: {got['isob']['before']['VmRSS']:.1f} MiB)")
    assert isob <= MAX_RATIO * mc, got
    # isob streamed: it fetched no more values than it could send, and its
    # connection buffers never held more than its cap.
    st = got["isob"]["stats"]
    assert MULTIGET_READ <= int(st["get_hits"]) < MULTIGET_KEYS
    assert int(st["conn_buffer_peak"]) <= int(st["conn_buffer_limit"])


# ---- 2: 800 connections with unfinished values, then closed ----

CONNECTIONS = 800
UNSENT = 1024  # bytes of each value never sent


def unfinished_values_attack(name: str) -> dict:
    srv = start(name)
    conns: list[socket.socket] = []
    try:
        base = int(srv.stats()["bytes_read"])
        body = value_bytes()[:VALUE - UNSENT]
        sent = 0
        for i in range(CONNECTIONS):
            s = srv.connect()
            conns.append(s)
            data = b"set u%d 0 0 %d\r\n%s" % (i, VALUE, body)
            s.sendall(data)
            sent += len(data)
        st = wait_read(srv, base + sent)
        assert int(st["bytes_read"]) >= base + sent, \
            f"{name} read {int(st['bytes_read']) - base} of {sent} bytes"
        during = srv.memory_mib()
        # What each connection was told (nothing, if it holds its value).
        replies: dict[bytes, int] = {}
        for s in conns:
            s.setblocking(False)
            try:
                r = s.recv(4096)
            except BlockingIOError:
                r = b""
            replies[r] = replies.get(r, 0) + 1
        for s in conns:
            s.close()
        conns.clear()
        after_stats = wait_connections(srv, 1)
        assert int(after_stats["curr_connections"]) <= 1
        after = srv.memory_mib()
        return {"during": during, "after": after, "stats": st, "after_stats": after_stats,
                "replies": replies}
    finally:
        for s in conns:
            s.close()
        assert srv.stop() in (0, -15), srv.stderr.decode(errors="replace")


def test_unfinished_values_stay_bounded_and_are_given_back():
    got = {name: unfinished_values_attack(name) for name in ("memcached", "isob")}
    mc, isob = got["memcached"], got["isob"]
    print(f"\n{CONNECTIONS} unfinished values: VmHWM memcached {mc['during']['VmHWM']:.1f} MiB, "
          f"isob {isob['during']['VmHWM']:.1f} MiB; VmRSS after close memcached "
          f"{mc['after']['VmRSS']:.1f} MiB, isob {isob['after']['VmRSS']:.1f} MiB")
    assert isob["during"]["VmHWM"] <= MAX_RATIO * mc["during"]["VmHWM"], got
    assert isob["after"]["VmRSS"] <= MAX_RATIO * mc["after"]["VmRSS"], got
    # isob held what its cap allows and refused the rest, each refusal
    # counted and told; after the close it holds nothing but the small
    # buffers it keeps for reuse.
    st, replies = isob["stats"], isob["replies"]
    refusal = b"SERVER_ERROR out of memory storing object\r\n"
    assert set(replies) <= {b"", refusal}, replies
    assert replies.get(b"", 0) >= 1 and replies.get(refusal, 0) >= 1
    assert int(st["conn_buffer_oom"]) == replies[refusal]
    assert int(st["conn_buffer_peak"]) <= int(st["conn_buffer_limit"])
    after = isob["after_stats"]
    assert int(after["conn_buffer_bytes"]) <= 32 * 16 * 1024
    # And it still serves.
    assert int(after["curr_connections"]) <= 1
