"""Run one child process with a time-out, handing over its stdout line by line.

Why not subprocess.run(timeout=...): we need each line as soon as it is
printed (results are stored while the child still runs, so a crash or a hang
loses nothing already measured), and a hung child must be killed together
with everything it started (a compartment in another process would otherwise
keep running and keep the pipes open).  So the child gets its own process
group (start_new_session) and the whole group is killed on time-out, on an
exception in the caller (Ctrl-C), and after the child exits (strays).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

# How often the loop looks whether the child itself has exited while some
# descendant still holds its pipes open.
POLL_SECONDS = 0.2

# Only the end of stderr is kept: it is for the failure reason, not a log.
STDERR_LIMIT = 64 * 1024


@dataclass(frozen=True)
class ChildExit:
    returncode: int          # negative: killed by that signal (as in subprocess)
    timed_out: bool          # we killed it because the time-out expired
    elapsed: float           # seconds, wall clock
    stderr: str              # the last STDERR_LIMIT bytes, decoded

    @property
    def signal(self) -> int | None:
        """The signal that killed the child, unless we killed it on time-out."""
        if self.timed_out or self.returncode >= 0:
            return None
        return -self.returncode

    def stderr_tail(self) -> str:
        """The last non-empty line of stderr, or ''."""
        lines = [l.strip() for l in self.stderr.splitlines() if l.strip()]
        return lines[-1] if lines else ""


def signal_name(signo: int) -> str:
    try:
        return signal.Signals(signo).name
    except ValueError:
        return f"signal {signo}"


def run_lines(argv: Sequence[str], *, timeout: float, on_line: Callable[[str], None],
              env: Mapping[str, str] | None = None) -> ChildExit:
    """Run argv; call on_line(text) for each stdout line (without the newline).

    Raises OSError when argv[0] cannot be executed.  Any exception raised by
    on_line (or KeyboardInterrupt) kills the child's process group and
    propagates.
    """
    start = time.monotonic()
    deadline = start + timeout
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(env) if env is not None else None,
                            start_new_session=True)
    err = bytearray()
    try:
        timed_out = _pump(proc, deadline, on_line, err)
        if not timed_out:
            timed_out = not _wait_exited(proc.pid, deadline)
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        raise
    finally:
        proc.stdout.close()
        proc.stderr.close()
    # Kill the whole group even after a normal exit: a crashed driver can leave
    # a compartment process behind.  The child is not reaped yet (WNOWAIT), so
    # its pid, which names the group, cannot have been reused.
    _kill_group(proc.pid)
    returncode = proc.wait()
    return ChildExit(returncode=returncode, timed_out=timed_out,
                     elapsed=time.monotonic() - start,
                     stderr=err.decode("utf-8", errors="replace"))


def _pump(proc: subprocess.Popen, deadline: float, on_line: Callable[[str], None],
          err: bytearray) -> bool:
    """Read both pipes until EOF; True when the deadline passed first."""
    out = bytearray()
    leader_gone = False
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, "out")
        sel.register(proc.stderr, selectors.EVENT_READ, "err")
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            for key, _ in sel.select(timeout=min(left, POLL_SECONDS)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                elif key.data == "out":
                    out += chunk
                    # Only a chunk with a newline can complete a line; result
                    # lines with raw samples span many chunks.
                    if b"\n" in chunk:
                        _emit_lines(out, on_line)
                else:
                    err += chunk
                    del err[:-STDERR_LIMIT]
            if not leader_gone and _exited(proc.pid):
                # The child is gone but something it started still holds the
                # pipes: kill the stragglers so that EOF comes.
                leader_gone = True
                _kill_group(proc.pid)
    if out:
        # A last line without a newline is still a line (possibly a cut one,
        # which the caller will reject as not JSON).
        on_line(out.decode("utf-8", errors="replace"))
    return False


def _emit_lines(buf: bytearray, on_line: Callable[[str], None]) -> None:
    while True:
        nl = buf.find(b"\n")
        if nl < 0:
            return
        line = bytes(buf[:nl])
        del buf[:nl + 1]
        on_line(line.decode("utf-8", errors="replace"))


def _exited(pid: int) -> bool:
    """Whether pid has exited, without reaping it."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _wait_exited(pid: int, deadline: float) -> bool:
    """Wait (without reaping) until pid exits; False when the deadline passed."""
    while not _exited(pid):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(left, 0.02))
    return True


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
