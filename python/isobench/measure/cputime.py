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
(threads that ended), and its reaped children's in ticks.  Read before and
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


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds with reaped children) of pid, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", errors="replace")
    except OSError:
        return None
    rest = text.rsplit(")", 1)[-1].split()
    try:
        # state ppid pgrp session tty tpgid flags minflt cminflt majflt
        # cmajflt utime stime cutime cstime
        ppid = int(rest[1])
        own, reaped = (sum(max(0, int(rest[i])) for i in idx) for idx in ((11, 12), (13, 14)))
    except (IndexError, ValueError):
        return None
    tick = 1.0 / os.sysconf("SC_CLK_TCK")
    return ppid, max(own * tick, _threads_ns(pid) / 1e9) + reaped * tick


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
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == pid:
            continue
        ppid = _ppid(int(name))
        if ppid is not None:
            parents.setdefault(ppid, []).append(int(name))
    seconds, count, todo = own[1], 1, [pid]
    while todo:
        for child in parents.get(todo.pop(), ()):
            st = _stat(child)
            if st is not None:
                seconds += st[1]
                count += 1
                todo.append(child)
    return TreeCpu(seconds, count)


def _ppid(pid: int) -> int | None:
    """The parent of pid, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[-1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


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
