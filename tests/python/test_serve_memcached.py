"""`isob serve` against real memcached: the same requests to both, the same
replies.  Covers what the store keeps for the protocol (expiry, cas
uniques), touch and gat, the reply to commands a server does not know or
that have the wrong number of arguments, and a full store, evicting (both
servers' default) and refusing (memcached -M, isob --no-evict).

Expiry is compared where it needs no waiting: negative exptimes, absolute
times in the past and the future, the 30-day bound between relative and
absolute.  Expiry as time passes is tested on a fake clock in
tests/c/test_proto.c (t_exptime), never with sleeps.  Each test starts a
fresh pair of servers, so that the cas uniques, counted from 1 by both,
line up.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter

import pytest

from serve_helpers import ISOB, MEMCACHED, recv_until, start_isob, start_memcached

pytestmark = pytest.mark.skipif(
    not (ISOB.is_file() and os.access(ISOB, os.X_OK) and MEMCACHED),
    reason="needs build/isob (run `make`) and memcached (scripts/setup-system.sh)")

STORE_MB = 8
VERSION_LINE = re.compile(rb"VERSION [^\r\n]*\r\n$")


class Pair:
    """memcached and isob serve, started alike."""

    def __init__(self, memcached_args=(), isob_args=()):
        self.servers = []
        try:
            self.servers.append(start_memcached("-m", str(STORE_MB), *memcached_args))
            self.servers.append(start_isob("direct", "--heap-mb", str(STORE_MB), *isob_args))
        except BaseException:
            self.stop()
            raise

    def stop(self):
        for srv in self.servers:
            srv.stop()

    def replies(self, request: bytes) -> dict[str, bytes]:
        """Each server's replies to request, on a new connection.  A
        `version` after it marks the end; its own reply (which differs) is
        cut off."""
        out = {}
        for srv in self.servers:
            with srv.connect() as s:
                s.sendall(request + b"version\r\n")
                got = b""
                while not VERSION_LINE.search(got):
                    more = recv_until(s, b"\r\n")
                    if not more:
                        break
                    got += more
            m = VERSION_LINE.search(got)
            assert m, f"{srv.name}: no reply to version after {got[-300:]!r}"
            out[srv.name] = got[:m.start()]
        return out

    def same(self, request: bytes) -> bytes:
        r = self.replies(request)
        assert r["isob"] == r["memcached"], f"request {request!r}"
        return r["isob"]


@pytest.fixture
def pair():
    p = Pair()
    try:
        yield p
    finally:
        p.stop()


def test_exptime_as_memcached(pair):
    now = int(time.time())
    # Negative: stored (it takes a cas unique) and never seen; add works.
    assert pair.same(b"set neg 0 -1 1\r\na\r\nget neg\r\nadd neg 0 0 1\r\nb\r\ngets neg\r\n") == \
        b"STORED\r\nEND\r\nSTORED\r\nVALUE neg 0 1 2\r\nb\r\nEND\r\n"
    # Beyond 30 days an absolute Unix time (past or future; 2592001 is in
    # 1970); 30 days exactly is still relative.
    reply = pair.same(b"set past 0 %d 1\r\np\r\nset future 0 %d 1\r\nf\r\n"
                      b"set days30 0 2592000 1\r\nd\r\nset s1970 0 2592001 1\r\no\r\n"
                      b"set rel 0 100 1\r\nr\r\ngets past future days30 s1970 rel\r\n"
                      % (now - 10, now + 1000))
    assert reply.endswith(b"VALUE future 0 1 4\r\nf\r\nVALUE days30 0 1 5\r\nd\r\n"
                          b"VALUE rel 0 1 7\r\nr\r\nEND\r\n")
    # A negative exptime on cas, replace and touch ends the item too.
    pair.same(b"cas rel 0 -1 1 7\r\nx\r\nget rel\r\nreplace days30 0 -5 1\r\ny\r\nget days30\r\n"
              b"touch future -1\r\nget future\r\n")


def test_touch_and_gat_as_memcached(pair):
    pair.same(b"set t 0 0 1\r\nt\r\nset u 3 0 2\r\nuu\r\n")
    assert pair.same(b"touch t 100\r\ntouch nope 100\r\ntouch t 100 noreply\r\n") == \
        b"TOUCHED\r\nNOT_FOUND\r\n"
    assert pair.same(b"gat 100 t nope u\r\ngats 0 u\r\ngat 10\r\n") == \
        b"VALUE t 0 1\r\nt\r\nVALUE u 3 2\r\nuu\r\nEND\r\nVALUE u 3 2 2\r\nuu\r\nEND\r\nEND\r\n"
    # Bad exptimes and argument counts.
    assert pair.same(b"touch t x\r\ngat x t\r\ntouch t\r\ngat\r\n") == \
        b"CLIENT_ERROR invalid exptime argument\r\nCLIENT_ERROR invalid exptime argument\r\n" \
        b"ERROR\r\nERROR\r\n"
    # gat with a past time returns the value, and then it is gone.
    assert pair.same(b"gat -1 t\r\nget t\r\n") == b"VALUE t 0 1\r\nt\r\nEND\r\nEND\r\n"


def test_cas_as_memcached(pair):
    assert pair.same(b"set c 0 0 1\r\na\r\nset d 0 0 1\r\nd\r\ngets c d\r\n") == \
        b"STORED\r\nSTORED\r\nVALUE c 0 1 1\r\na\r\nVALUE d 0 1 2\r\nd\r\nEND\r\n"
    assert pair.same(b"cas c 0 0 1 2\r\nb\r\ncas nope 0 0 1 1\r\nb\r\ncas c 7 0 2 1\r\nbb\r\n"
                     b"gets c\r\ncas c 0 0 1 3 noreply\r\nz\r\ngets c\r\n") == \
        b"EXISTS\r\nNOT_FOUND\r\nSTORED\r\nVALUE c 7 2 3\r\nbb\r\nEND\r\n" \
        b"VALUE c 0 1 4\r\nz\r\nEND\r\n"
    # Refused stores take no unique: the next one is 5 on both.
    assert pair.same(b"add c 0 0 1\r\nx\r\nreplace nope 0 0 1\r\nx\r\ncas c 0 0 1 1\r\nx\r\n"
                     b"set e 0 0 1\r\ne\r\ngets e\r\n") == \
        b"NOT_STORED\r\nNOT_STORED\r\nEXISTS\r\nSTORED\r\nVALUE e 0 1 5\r\ne\r\nEND\r\n"
    # A malformed cas skips nothing: its data line is a command of its own.
    assert pair.same(b"cas c 0 0 1\r\nx\r\ncas c 0 0 1 abc\r\nx\r\n") == \
        b"ERROR\r\nERROR\r\nCLIENT_ERROR bad command line format\r\nERROR\r\n"
    stats = {srv.name: srv.stats() for srv in pair.servers}
    for key in ("cas_hits", "cas_misses", "cas_badval", "cmd_touch"):
        assert stats["isob"][key] == stats["memcached"][key], key


def test_unknown_commands_and_argument_counts_as_memcached(pair):
    assert pair.same(b"bogus\r\nfoo bar baz\r\n\r\nGET k\r\nset k 0 0\r\nset k 0 0 1 2 3\r\n"
                     b"get\r\ngets\r\ndelete\r\ndelete a b c d\r\nflush_all 1 2 3\r\n"
                     b"verbosity\r\ntouch k\r\n") == b"ERROR\r\n" * 13
    # A token after the last number other than noreply is ignored by both.
    assert pair.same(b"set k 0 0 1 maybe\r\nx\r\nget k\r\n") == \
        b"STORED\r\nVALUE k 0 1\r\nx\r\nEND\r\n"


def test_commands_isob_lacks_are_unknown():
    # memcached has these; isob serve does not, and says so the one way it
    # says it for every command it does not know: ERROR.  The data of
    # append and prepend is skipped, never run as a command.
    srv = start_isob("direct", "--heap-mb", str(STORE_MB))
    try:
        with srv.connect() as s:
            s.sendall(b"set k 0 0 1\r\n1\r\nincr k 1\r\ndecr k 1\r\nappend k 0 0 11\r\nflush_all\r\n\r\n"
                      b"prepend k 0 0 11 noreply\r\nflush_all\r\n\r\nmg k v\r\nms k 1\r\n"
                      b"md k\r\nmn\r\nma k\r\nme k\r\nlru_crawler metadump all\r\n"
                      b"slabs reassign 1 2\r\nwatch\r\nshutdown\r\ncache_memlimit 100\r\n"
                      b"get k\r\n")
            assert recv_until(s, b"END\r\n") == \
                b"STORED\r\n" + b"ERROR\r\n" * 15 + b"VALUE k 0 1\r\n1\r\nEND\r\n"
    finally:
        assert srv.stop() == 0


FILL = 16000       # sets of 1000 bytes: about twice what 8 MiB holds
FILL_VALUE = 1000


def fill(pair: Pair) -> dict[str, tuple[Counter, bytes, dict]]:
    """FILL pipelined sets on each server; then the last key and stats."""
    req = b"".join(b"set f%d 0 0 %d\r\n%s\r\n" % (i, FILL_VALUE, b"v" * FILL_VALUE)
                   for i in range(FILL))
    out = {}
    for srv in pair.servers:
        with srv.connect() as s:
            s.sendall(req + b"get f%d\r\n" % (FILL - 1))
            got = recv_until(s, b"END\r\n")
        replies = got.split(b"\r\n")
        out[srv.name] = (Counter(r for r in replies[:FILL] if r), got[-(FILL_VALUE + 40):],
                         srv.stats())
    return out


def test_full_store_evicts_as_memcached(pair):
    got = fill(pair)
    for name, (replies, tail, stats) in got.items():
        assert replies == Counter({b"STORED": FILL}), name
        assert tail.endswith(b"VALUE f%d 0 %d\r\n%s\r\nEND\r\n" % (FILL - 1, FILL_VALUE,
                                                                   b"v" * FILL_VALUE)), name
        assert int(stats["evictions"]) > 0, name
        assert int(stats["curr_items"]) + int(stats["evictions"]) == FILL, name
    print("\nevictions: " + ", ".join(f"{n} {got[n][2]['evictions']}" for n in got))


def test_full_store_refuses_as_memcached_M():
    pair = Pair(memcached_args=("-M",), isob_args=("--no-evict",))
    try:
        got = fill(pair)
    finally:
        pair.stop()
    refusal = b"SERVER_ERROR out of memory storing object"
    for name, (replies, tail, stats) in got.items():
        assert set(replies) == {b"STORED", refusal}, name
        assert int(stats["evictions"]) == 0, name
        assert int(stats["store_no_memory"]) == replies[refusal], name
        assert int(stats["curr_items"]) == replies[b"STORED"], name
        # A refused set removes the key's old value: the last one is gone.
        assert tail.endswith(b"END\r\n") and b"VALUE" not in tail, name
    print("\nrefused: " + ", ".join(f"{n} {got[n][0][refusal]}" for n in got))
