"""Run one child process with a time-out, handing over its stdout line by line.

Why not subprocess.run(timeout=...): we need each line as soon as it is
printed (results are stored while the child still runs, so a crash or a hang
loses nothing already measured), and a hung child must be killed together
with everything it started (a compartment in another process would otherwise
keep running and keep the pipes open).  So the child gets its own process
group (start_new_session) and the whole group is killed on time-out, on an
exception in the caller (Ctrl-C), and after the child exits (strays).

Every child started here also dies with the process that started it
(PR_SET_PDEATHSIG): if isobench itself is killed with SIGKILL, its isob and
server children do not live on.  `isobench run` goes one step further and
becomes a child subreaper (adopt_orphans): whatever its children leave
behind is re-parented to it instead of to init, so kill_descendants() finds
and ends every process the run started, however it was started.
"""

from __future__ import annotations

import ctypes
import json
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


# prctl(2) options (linux/prctl.h).
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _prctl = _libc.prctl
except (OSError, AttributeError):  # not Linux: no death signal, no subreaper
    _prctl = None


def _die_with_parent(parent: int) -> Callable[[], None]:
    """The preexec_fn of every child: SIGKILL when the parent dies.  If the
    parent died before prctl took effect, the child is already an orphan and
    exits at once."""
    def setup() -> None:
        if _prctl is not None:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(127)
    return setup


def popen(argv: Sequence[str], **kwargs) -> subprocess.Popen:
    """subprocess.Popen in a process group of its own that dies with this process."""
    return subprocess.Popen(list(argv), start_new_session=True,
                            preexec_fn=_die_with_parent(os.getpid()), **kwargs)


def adopt_orphans() -> bool:
    """Make this process the reaper of its descendants' orphans; False where the
    kernel cannot (then descendants that left our process groups can escape)."""
    if _prctl is None:
        return False
    return _prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def _parents() -> dict[int, int]:
    """pid -> parent pid of every live (not zombie) process visible in /proc."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()
        if len(fields) > 1 and fields[0] not in ("Z", "X"):
            out[int(name)] = int(fields[1])
    return out


def descendants(root: int | None = None) -> list[int]:
    """The live descendants of root (default: this process), parents first."""
    root = os.getpid() if root is None else root
    parents = _parents()
    found, frontier = [], [root]
    while frontier:
        kids = [p for p, pp in parents.items() if pp in frontier and p not in found]
        found += kids
        frontier = kids
    return found


def reap_zombies() -> int:
    """Reap children that have exited and that nobody waits for (orphans adopted
    by a subreaper); their CPU time then counts in RUSAGE_CHILDREN.  Only call
    this when no subprocess.Popen of ours is still to be waited for."""
    n = 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return n
        if pid == 0:
            return n
        n += 1


def kill_descendants() -> int:
    """SIGKILL every live descendant of this process and reap what can be
    reaped; the number killed.  Orphans come back to us only after
    adopt_orphans(), so call it only in a process that did."""
    killed = set()
    for round_ in range(100):
        pids = descendants()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        _wait_children_gone(pids)
        if round_:
            # A killed grandchild is not ours to wait for: give it a moment to
            # die and be re-parented (bounded: 100 rounds).
            time.sleep(0.01)
    reap_zombies()
    return len(killed)


def _wait_children_gone(pids: Sequence[int]) -> None:
    """Reap our own children among pids; a grandchild is re-parented to us
    when its parent dies and is found in the next round."""
    for pid in pids:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass  # not our child (yet): the next round finds it


def signal_name(signo: int) -> str:
    try:
        return signal.Signals(signo).name
    except ValueError:
        return f"signal {signo}"


def json_objects(keep: Callable[[dict], bool]) -> tuple[list[dict], Callable[[str], None]]:
    """(found, on_line) for run_lines: on_line appends to found each line
    that is a JSON object keep() accepts, and passes over any other line."""
    found: list[dict] = []

    def on_line(text: str) -> None:
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            return
        if isinstance(obj, dict) and keep(obj):
            found.append(obj)

    return found, on_line


def run_lines(argv: Sequence[str], *, timeout: float, on_line: Callable[[str], None],
              env: Mapping[str, str] | None = None) -> ChildExit:
    """Run argv; call on_line(text) for each stdout line (without the newline).

    Raises OSError when argv[0] cannot be executed.  Any exception raised by
    on_line (or KeyboardInterrupt) kills the child's process group and
    propagates.
    """
    start = time.monotonic()
    deadline = start + timeout
    proc = popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, env=dict(env) if env is not None else None)
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
