"""CPU time of a server's process tree, and CPU per request (docs/serve.md,
"CPU per request").

A server's CPU time is the user + system time of its process and of every
live process below it (a compartment or a session runs in a process of its
own), each with the time of the children it has reaped (``cutime``,
``cstime`` in /proc/PID/stat: a session process that ended during the run
still counts).  /proc/PID/stat counts in clock ticks of 10 ms and
truncates each process on its own, so a tree of many processes that each
ran a few ms reads far too little: a process's own time is taken instead
from the scheduler's count of its live threads (the first field of
/proc/PID/task/TID/schedstat, in ns), or its ticks where those are more
(threads that ended), and its reaped children's in ticks; the part counted
in ticks is kept apart (``tick_seconds``: the only part a 10 ms step can
move, analysis/cpu.py).  Read before and
after a run, the difference over the
requests answered is the server's CPU per request: a figure that does not
depend on which of client and server saturated its CPU, so that servers
compare on a 2-CPU machine as on a large one.  ``isob loadgen --server-pid``
reads the same figures in C (src/loadgen/loadgen.c, proc_cpu); this module
is for clients that do not (memcaslap in kv-server).
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class TreeCpu:
    seconds: float    # user + system, reaped children included
    processes: int    # the process and those below it, alive when read
    tick_seconds: float = 0.0  # the part of seconds counted in clock ticks


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(parent pid, own CPU clock ticks, reaped children's) of pid, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", errors="replace")
    except OSError:
        return None
    rest = text.rsplit(")", 1)[-1].split()
    try:
        # state ppid pgrp session tty tpgid flags minflt cminflt majflt
        # cmajflt utime stime cutime cstime
        own, reaped = (sum(max(0, int(rest[i])) for i in idx) for idx in ((11, 12), (13, 14)))
        return int(rest[1]), own, reaped
    except (IndexError, ValueError):
        return None


def _seconds(pid: int, own: int, reaped: int) -> tuple[float, float]:
    """pid's CPU seconds: its live threads' scheduler count, or its own
    ticks where those are more (threads that ended), and its reaped
    children's ticks; and the part of them counted in ticks."""
    tick = 1.0 / os.sysconf("SC_CLK_TCK")
    scheduled = _threads_ns(pid) / 1e9
    # In ticks: the reaped children's, and what the ticks saw beyond the
    # live threads' count (threads that ended).
    ticked = max(0.0, own * tick - scheduled) + reaped * tick
    return max(own * tick, scheduled) + reaped * tick, ticked


def _threads_ns(pid: int) -> int:
    """The scheduler's CPU time of pid's live threads, in ns (0 where the
    kernel does not keep it)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


def tree_cpu(pid: int) -> TreeCpu | None:
    """The CPU seconds of pid and every live process below it; None when pid
    is gone."""
    own = _stat(pid)
    if own is None:
        return None
    # Every process's stat, read once; the threads only of the tree's.
    parents: dict[int, list[tuple[int, int, int]]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == pid:
            continue
        st = _stat(int(name))
        if st is not None:
            parents.setdefault(st[0], []).append((int(name), st[1], st[2]))
    (seconds, ticked), count, todo = _seconds(pid, own[1], own[2]), 1, [pid]
    while todo:
        for child, ticks, reaped in parents.get(todo.pop(), ()):
            s, t = _seconds(child, ticks, reaped)
            seconds, ticked = seconds + s, ticked + t
            count += 1
            todo.append(child)
    return TreeCpu(seconds, count, ticked)


def us_per_request(cpu_s: float | None, requests: int | float | None) -> float | None:
    """CPU microseconds per request: cpu_s over the requests answered; None
    where either is missing or there were no requests (a figure over zero
    requests is no figure)."""
    if cpu_s is None or not requests or requests <= 0 or cpu_s < 0:
        return None
    return cpu_s * 1e6 / float(requests)


def busy(cpu_s: float | None, wall_s: float | None) -> float | None:
    """CPU seconds over wall-clock seconds: 1.0 is one CPU's whole time."""
    if cpu_s is None or not wall_s or wall_s <= 0:
        return None
    return cpu_s / wall_s
