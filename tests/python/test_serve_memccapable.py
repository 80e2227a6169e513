"""memcached's own conformance tester, `memccapable -a` (libmemcached-tools),
against `isob serve` over each family of mechanism (direct, a process, a
seccomp-confined process, WebAssembly) and against memcached itself: all 27
of its text-protocol tests must pass on each.  And a binary-protocol request
(which `memccapable` without -a sends first) is answered with one binary
"not supported" response and the connection closed, instead of being left
to the client's time-out.

The time-outs here only keep a broken server from hanging the suite; no
test asserts how long anything takes.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess

import pytest

from conftest import limit
from serve_helpers import ISOB, MEMCACHED, _die_with_parent, recv_until, start_isob, start_memcached

MEMCCAPABLE = shutil.which("memccapable")
ASCII_TESTS = 27      # the text-protocol tests of libmemcached 1.0's memccapable
RUN_TIMEOUT = limit(900)   # a hang guard for one memccapable run
MECHANISMS = ("direct", "process-futex", "seccomp", "wasm")

pytestmark = pytest.mark.skipif(
    not (ISOB.is_file() and MEMCACHED and MEMCCAPABLE),
    reason="needs build/isob (run `make`), memcached and memccapable (libmemcached-tools; "
           "scripts/setup-system.sh)")

RESULT = re.compile(r"^(ascii [\w ]+?)\s+\[(pass|FAIL|skip)\]\s*$", re.M)


def memccapable(port: int) -> tuple[dict[str, str], str]:
    """Each test's verdict, and the whole output."""
    proc = subprocess.run([MEMCCAPABLE, "-a", "-h", "127.0.0.1", "-p", str(port)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, preexec_fn=_die_with_parent)
    out = proc.stdout + proc.stderr
    verdicts = {name.strip(): verdict for name, verdict in RESULT.findall(out)}
    return verdicts, out


def check_all_pass(verdicts: dict[str, str], out: str) -> None:
    failed = sorted(n for n, v in verdicts.items() if v != "pass")
    assert not failed, f"failed: {failed}\n{out}"
    assert len(verdicts) == ASCII_TESTS, out
    assert "All tests passed" in out, out


def test_memccapable_against_memcached():
    srv = start_memcached()
    try:
        verdicts, out = memccapable(srv.port)
    finally:
        srv.stop()
    print("\nmemcached:\n" + out)
    check_all_pass(verdicts, out)


def _start_or_skip(mechanism: str):
    try:
        return start_isob(mechanism, "--heap-mb", "16")
    except AssertionError as e:
        # A mechanism this machine cannot run says so and why on stderr
        # ("mechanism M cannot run here: ..."); anything else is a failure.
        if "cannot run here" in str(e):
            pytest.skip(f"{mechanism}: {e}")
        raise


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_memccapable_against_isob_serve(mechanism):
    srv = _start_or_skip(mechanism)
    try:
        verdicts, out = memccapable(srv.port)
    finally:
        rc = srv.stop()
    print(f"\nisob serve -m {mechanism}:\n" + out)
    check_all_pass(verdicts, out)
    assert rc == 0, srv.stderr.decode(errors="replace")


def test_the_check_fails_on_a_failing_run():
    # The parsing above must be able to fail: a run with one FAIL and one
    # test missing is refused.
    out = "ascii version                           [pass]\nascii incr                              [FAIL]\n"
    verdicts = {name.strip(): v for name, v in RESULT.findall(out)}
    assert verdicts == {"ascii version": "pass", "ascii incr": "FAIL"}
    with pytest.raises(AssertionError):
        check_all_pass(verdicts, out)


def binary_get(key: bytes) -> bytes:
    """A binary-protocol GET request: magic 0x80, opcode 0x00."""
    return struct.pack(">BBHBBHIIQ", 0x80, 0x00, len(key), 0, 0, 0, len(key), 0xdeadbeef, 0) + key


@pytest.mark.parametrize("whole", [True, False], ids=["whole-request", "magic-byte-only"])
def test_binary_request_refused_and_closed(whole):
    srv = start_isob("direct", "--heap-mb", "8")
    try:
        with srv.connect() as s:
            # Only the first byte: the refusal may not wait for the rest
            # of the header.
            s.sendall(binary_get(b"k") if whole else b"\x80")
            got = recv_until(s, b"only")  # the body's last word
            rest = s.recv(4096)  # the close: b"" (a hang here ends in the socket's time-out)
    finally:
        assert srv.stop() == 0
    magic, _opcode, keylen, extlen, _dtype, status, body_len = struct.unpack(">BBHBBHI", got[:12])
    assert (magic, keylen, extlen, status) == (0x81, 0, 0, 0x83), got
    assert body_len == len(got) - 24, got
    assert b"text protocol" in got[24:], got
    assert rest == b"", rest


def test_text_after_binary_is_not_read():
    # The connection is closed after the refusal: a text command pipelined
    # behind the binary request gets no reply.
    srv = start_isob("direct", "--heap-mb", "8")
    try:
        with srv.connect() as s:
            s.sendall(binary_get(b"k") + b"version\r\n")
            got = b""
            while True:
                try:
                    chunk = s.recv(4096)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                got += chunk
    finally:
        assert srv.stop() == 0
    assert got.startswith(b"\x81") and b"VERSION" not in got, got
