#!/usr/bin/env python3
"""Run a command with every CPU kept busy: `make test-stress`'s load.

usage: cpu-hogs.py [--per-cpu N] [--nice N] -- COMMAND [ARG...]

Starts N busy loops per CPU this process may run on (1 by default) at the
niceness given (19, the lowest priority, by default), runs COMMAND, then
kills the loops and exits with COMMAND's status.  Each loop dies with this
script (PR_SET_PDEATHSIG), so none outlives it, whatever ends it.  A load
like a shared machine's: --per-cpu 4 --nice 0.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def hog(parent: int, nice: int) -> None:
    """A child's whole life: die with the parent, lower its priority, spin."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # The parent may have died before prctl took effect.
    if os.getppid() != parent:
        os._exit(0)
    try:
        os.nice(nice - os.nice(0))
    except PermissionError:
        pass   # below the inherited niceness needs root: keep that one
    while True:
        pass


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-cpu", type=int, default=1, help="busy loops per CPU (default 1)")
    ap.add_argument("--nice", type=int, default=19, help="their niceness (default 19)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no command to run")
    if args.per_cpu < 1 or not -20 <= args.nice <= 19:
        ap.error("--per-cpu must be >= 1 and --nice from -20 to 19")
    cpus = len(os.sched_getaffinity(0))
    me = os.getpid()
    hogs = []
    for _ in range(cpus * args.per_cpu):
        pid = os.fork()
        if pid == 0:
            try:
                hog(me, args.nice)
            finally:
                os._exit(0)
        hogs.append(pid)
    print(f"cpu-hogs: {len(hogs)} busy loops ({args.per_cpu} per CPU, {cpus} CPUs) "
          f"at nice {args.nice} while: {' '.join(command)}", flush=True)
    child: subprocess.Popen | None = None

    def stop(signum, _frame):
        if child is not None and child.poll() is None:
            child.send_signal(signum)
            child.wait()
        sys.exit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        try:
            child = subprocess.Popen(command)
        except OSError as e:
            print(f"cpu-hogs: error: {command[0]}: {e.strerror}", file=sys.stderr)
            return 127
        rc = child.wait()
    finally:
        for pid in hogs:
            os.kill(pid, signal.SIGKILL)
        for pid in hogs:
            os.waitpid(pid, 0)
    print(f"cpu-hogs: stopped; {' '.join(command)} exited with status {rc}", flush=True)
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
