"""`isob serve` against real memcached: the same requests to both, the same
replies.  Covers what the store keeps for the protocol (expiry, cas
uniques), touch and gat, incr and decr, append and prepend, verbosity, the
meta commands (mg, ms, md, mn), the reply to commands a server does not know or
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
    # says it for every command it does not know: ERROR.
    srv = start_isob("direct", "--heap-mb", str(STORE_MB))
    try:
        with srv.connect() as s:
            s.sendall(b"set k 0 0 1\r\n1\r\nma k\r\nme k\r\nlru_crawler metadump all\r\n"
                      b"slabs reassign 1 2\r\nwatch\r\nshutdown\r\ncache_memlimit 100\r\n"
                      b"get k\r\n")
            assert recv_until(s, b"END\r\n") == \
                b"STORED\r\n" + b"ERROR\r\n" * 7 + b"VALUE k 0 1\r\n1\r\nEND\r\n"
    finally:
        assert srv.stop() == 0


def test_version_reads_as_1_6():
    # Clients (memccapable among them) choose the rules they apply from the
    # version; the server's own name follows it.
    srv = start_isob("direct", "--heap-mb", str(STORE_MB))
    try:
        with srv.connect() as s:
            s.sendall(b"version\r\n")
            assert re.fullmatch(rb"VERSION 1\.6\.0 isob-serve/\S+\r\n", recv_until(s, b"\r\n"))
    finally:
        assert srv.stop() == 0


def test_incr_decr_as_memcached(pair):
    # A shorter result keeps the value's length, padded with spaces; a
    # longer one lengthens it; decr stops at 0; incr wraps at 2^64.
    assert pair.same(b"set a 5 0 2\r\n10\r\ndecr a 1\r\nget a\r\nincr a 100\r\nget a\r\n") == \
        b"STORED\r\n9\r\nVALUE a 5 2\r\n9 \r\nEND\r\n109\r\nVALUE a 5 3\r\n109\r\nEND\r\n"
    assert pair.same(b"set c 0 0 20\r\n18446744073709551615\r\nincr c 2\r\nget c\r\ndecr c 5\r\n"
                     b"set w 0 0 1\r\n9\r\nincr w 99999999999\r\nget w\r\n"
                     b"decr w 99999999999\r\nget w\r\nincr w 18446744073709551615\r\n") == \
        b"STORED\r\n1\r\nVALUE c 0 20\r\n1                   \r\nEND\r\n0\r\n" \
        b"STORED\r\n100000000008\r\nVALUE w 0 12\r\n100000000008\r\nEND\r\n" \
        b"9\r\nVALUE w 0 12\r\n9           \r\nEND\r\n8\r\n"
    # What counts as a number in the value, and in the delta.
    pair.same(b"set d 0 0 1\r\n \r\nincr d 3\r\nset e 0 0 2\r\n-5\r\nincr e 1\r\n"
              b"set f 0 0 0\r\n\r\nincr f 1\r\nset g 0 0 3\r\n12a\r\nincr g 1\r\n"
              b"set h 0 0 4\r\n12 a\r\nincr h 1\r\nget h\r\nset i 0 0 3\r\n+12\r\nincr i 1\r\n"
              b"incr i +5\r\nincr i -0\r\nincr i -1\r\nincr i x\r\n"
              b"incr i 18446744073709551616\r\n")
    # Misses, noreply (errors too), argument counts, a bad key; the cas
    # unique an incr takes, and the flags and expiry it keeps.
    pair.same(b"incr nope 1\r\ndecr nope 1\r\nincr i 1 noreply\r\nincr g 1 noreply\r\n"
              b"incr i x noreply\r\nincr\r\nincr i\r\nincr i 1 2 3\r\nincr i 1 2\r\n"
              b"incr %s 1\r\nset k 9 100 1\r\n7\r\nincr k 3\r\ngets k\r\n" % (b"k" * 251))
    stats = {srv.name: srv.stats() for srv in pair.servers}
    for key in ("incr_hits", "incr_misses", "decr_hits", "decr_misses"):
        assert stats["isob"][key] == stats["memcached"][key], key


def test_append_prepend_as_memcached(pair):
    # The item keeps its flags and expiry (the command's are ignored);
    # a missing item is not stored.
    assert pair.same(b"append zz 0 0 1\r\nx\r\nprepend zz 0 0 1\r\nx\r\nset k 7 100 2\r\nab\r\n"
                     b"append k 9 0 2\r\ncd\r\nprepend k 3 0 2\r\nxy\r\ngets k\r\n"
                     b"append k 0 0 1 noreply\r\nZ\r\nprepend k 0 -1 1 noreply\r\nA\r\n"
                     b"get k\r\n") == \
        b"NOT_STORED\r\nNOT_STORED\r\nSTORED\r\nSTORED\r\nSTORED\r\n" \
        b"VALUE k 7 6 3\r\nxyabcd\r\nEND\r\nVALUE k 7 8\r\nAxyabcdZ\r\nEND\r\n"
    # Growing past the record's size, many times; then as a number.
    big = b"".join(b"append b 0 0 100\r\n%s\r\nprepend b 0 0 100\r\n%s\r\n" % (b"a" * 100, b"b" * 100)
                   for _ in range(20))
    pair.same(b"set b 1 0 10\r\n0123456789\r\n" + big + b"get b\r\n")
    pair.same(b"set n 0 0 1\r\n5\r\nappend n 0 0 2\r\n00\r\nincr n 1\r\nprepend n 0 0 1\r\n9\r\n"
              b"incr n 1\r\nget n\r\n")
    # A malformed line skips nothing; a bad key is refused.
    pair.same(b"append k 0 0\r\nprepend k x 0 1\r\nx\r\n")


def test_verbosity_as_memcached(pair):
    assert pair.same(b"verbosity 1\r\nverbosity 1 noreply\r\nverbosity\r\nverbosity x\r\n"
                     b"verbosity 1 2 3\r\nverbosity noreply\r\nverbosity 1 2\r\n") == \
        b"OK\r\nERROR\r\nCLIENT_ERROR bad command line format\r\nERROR\r\nOK\r\n"


def test_meta_get_as_memcached(pair):
    assert pair.same(b"mn\r\nset m 7 0 3\r\nabc\r\nmg m\r\nmg m v\r\nmg m v f t c k s O123\r\n"
                     b"mg m k O1 s v\r\nmg miss v\r\nmg miss v q\r\nmg miss k O5\r\nmg m q\r\n"
                     b"mg m v q k\r\nmn\r\n") == \
        b"MN\r\nSTORED\r\nHD\r\nVA 3\r\nabc\r\nVA 3 f7 t-1 c1 km s3 O123\r\nabc\r\n" \
        b"VA 3 km O1 s3\r\nabc\r\nEN\r\nEN kmiss O5\r\nHD\r\nVA 3 km\r\nabc\r\nMN\r\n"
    # Touch (T), and the time left (t).
    pair.same(b"ms t 1 T0\r\nx\r\nmg t t v\r\nms t 1 T-1\r\nx\r\nmg t v\r\n"
              b"ms tt 1 T100000\r\nx\r\nmg tt T-1 v\r\nmg tt v\r\n")
    # Errors: no key, an unknown or repeated flag, a bad number, a long opaque.
    pair.same(b"mg\r\nmg m zz\r\nmg m v Z\r\nmg m v v\r\nmg m Tabc\r\nmg %s v\r\n"
              b"mg m O12345678901234567890123456789012\r\nmg m O1234567890123456789012345678901\r\n"
              % (b"k" * 251))


def test_meta_set_and_delete_as_memcached(pair):
    # Every mode, flags and expiry, cas (C) and its outcomes, quiet mode,
    # and the return flags on every reply.
    assert pair.same(b"ms n 2\r\nhi\r\nmg n v f t\r\nms n 2 F5 T100 c k O9\r\nyo\r\n"
                     b"mg n v f s\r\nms n 2 q\r\nzz\r\nms n 2 C1\r\nxx\r\nms nn 2 C1 O3 k\r\nxx\r\n"
                     b"ms n 2 ME O1 k c\r\nxx\r\nms n2 2 MA\r\nxx\r\nms n 2 MA\r\nab\r\n"
                     b"ms n 2 MP\r\ncd\r\nms n3 2 MR\r\nxx\r\nmg n v c\r\nms n 2 C7 c\r\nqq\r\n"
                     b"ms n 2 MS q\r\nqq\r\nmn\r\n") == \
        b"HD\r\nVA 2 f0 t-1\r\nhi\r\nHD c2 kn O9\r\nVA 2 f5 s2\r\nyo\r\nEX\r\nNF O3 knn\r\n" \
        b"NS O1 kn c0\r\nNS\r\nHD\r\nHD\r\nNS\r\nVA 6 c5\r\ncdzzab\r\nEX c0\r\nMN\r\n"
    assert pair.same(b"md nothere\r\nmd nothere q\r\nms o 1\r\nx\r\nmd o C1\r\nmd o q\r\n"
                     b"mg o v\r\nms o 1\r\nx\r\nmd o k O7\r\nmd o2 q O8\r\nmn\r\n") == \
        b"NF\r\nNF\r\nHD\r\nEX\r\nEN\r\nHD\r\nHD ko O7\r\nNF O8\r\nMN\r\n"
    # Errors; a refused ms skips its data, a malformed one cannot.
    pair.same(b"ms\r\nms x\r\nms x abc\r\nms x 2 Q\r\nab\r\nms x 2 Fabc\r\nxx\r\n"
              b"ms x 2 Tabc\r\nxx\r\nms x 2 Cabc\r\nxx\r\nms x 2 MZ\r\nxx\r\nms x 2 Ma\r\nxx\r\n"
              b"ms x 2 q q\r\nxx\r\nms %s 1\r\nx\r\nmd\r\nmd n Cabc\r\nmd n q q\r\nmd n zz\r\n"
              b"mn extra\r\n" % (b"k" * 251))


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
