"""The load of the machine around each job of a run.

A number measured while another process ran on the same CPU is not the
number of the mechanism alone.  Pinning keeps the measured threads on their
CPUs, but nothing keeps other processes off them (unless the CPUs are
isolated), so every job records what else happened:

- the load average and the number of runnable tasks (``procs_running`` of
  /proc/stat, which counts the reader itself) at its start and its end;
- per CPU, the time spent running tasks (user + nice + system of
  /proc/stat) and the time the hypervisor took (steal), over the job;
- the CPU time of the job's own processes (isob, its compartments, the
  servers and client of kv-server: RUSAGE_CHILDREN, which counts every child
  once it is reaped, and this process's own, RUSAGE_SELF).

`isobench check` compares the busy time of the CPUs the job was pinned to
with its own CPU time (checks.check_load): what is left was used by others.
The comparison leans towards silence: own CPU time spent on other CPUs
(this Python process, an unpinned compartment) is subtracted all the same,
and interrupt time is not counted as busy (loopback traffic of kv-server
is handled there and is not in any process's CPU time).

The job's load record (jobs.load in the store), all times in seconds:

    {"start": {"time", "loadavg": [1, 5, 15 min], "runnable"},
     "end":   {... the same at the end},
     "wall_s", "own_cpu_s", "clock_ticks_per_s",
     "cpu_busy_s": {"0": ..., "1": ...}, "cpu_steal_s": {...},
     "pinned_cpus": [...] }   (the CPUs the job's results were pinned to)

Any part that cannot be read (no /proc/stat) is null and the check says
nothing about that job.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ..store import now_ms

# /proc/stat per-CPU columns: user nice system idle iowait irq softirq steal.
_BUSY = (0, 1, 2)
_STEAL = 7


def _ticks_per_s() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError):
        return 100


@dataclass
class Snapshot:
    """One reading of the machine's counters (see module docs)."""

    time: str
    monotonic: float
    loadavg: list[float] | None
    runnable: int | None
    cpus: dict[str, list[int]] = field(default_factory=dict)  # cpu -> /proc/stat columns
    own_cpu_s: float = 0.0

    def brief(self) -> dict:
        return {"time": self.time, "loadavg": self.loadavg, "runnable": self.runnable}


def _read(root: Path, path: str) -> str | None:
    try:
        return (root / path.lstrip("/")).read_text()
    except OSError:
        return None


def parse_loadavg(text: str | None) -> list[float] | None:
    try:
        return [float(x) for x in (text or "").split()[:3]] or None
    except ValueError:
        return None


def parse_stat(text: str | None) -> tuple[dict[str, list[int]], int | None]:
    """(per-CPU columns, procs_running) of /proc/stat."""
    cpus: dict[str, list[int]] = {}
    runnable = None
    for line in (text or "").splitlines():
        parts = line.split()
        if not parts:
            continue
        name = parts[0]
        try:
            if name.startswith("cpu") and name[3:].isdigit():
                cols = [int(x) for x in parts[1:9]]
                cols += [0] * (8 - len(cols))  # old kernels lack steal
                cpus[name[3:]] = cols
            elif name == "procs_running" and len(parts) > 1:
                runnable = int(parts[1])
        except ValueError:
            continue
    return cpus, runnable


def own_cpu_seconds() -> float:
    """CPU time of this process and of every child it has reaped."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


def snapshot(root: Path = Path("/")) -> Snapshot:
    cpus, runnable = parse_stat(_read(root, "/proc/stat"))
    return Snapshot(time=now_ms(), monotonic=time.monotonic(),
                    loadavg=parse_loadavg(_read(root, "/proc/loadavg")), runnable=runnable,
                    cpus=cpus, own_cpu_s=own_cpu_seconds())


def job_load(start: Snapshot, end: Snapshot, pinned: list[int] | None,
             ticks_per_s: int | None = None) -> dict:
    """The load record of one job (see module docs)."""
    hz = ticks_per_s or _ticks_per_s()
    busy, steal = {}, {}
    for cpu, after in end.cpus.items():
        before = start.cpus.get(cpu)
        if before is None:
            continue
        busy[cpu] = round(sum(after[i] - before[i] for i in _BUSY) / hz, 3)
        steal[cpu] = round((after[_STEAL] - before[_STEAL]) / hz, 3)
    return {"start": start.brief(), "end": end.brief(),
            "wall_s": round(end.monotonic - start.monotonic, 3),
            "own_cpu_s": round(end.own_cpu_s - start.own_cpu_s, 3),
            "clock_ticks_per_s": hz, "cpu_busy_s": busy or None, "cpu_steal_s": steal or None,
            "pinned_cpus": sorted(set(pinned)) if pinned else None}


def pinned_cpus(results, header: Mapping | None) -> list[int]:
    """The CPUs a job's results ran on by pinning: isob's client CPU (header
    "cpu") and, for cross-cpu results, the next CPU (isob_server_cpu); for
    kv-server, the server and client CPUs in params."""
    cpus: set[int] = set()
    h = header or {}
    cpu, ncpus = h.get("cpu"), h.get("ncpus")
    for r in results:
        p = r.params
        for key in ("server_cpu", "client_cpu"):
            if isinstance(p.get(key), int):
                cpus.add(p[key])
        if isinstance(cpu, int) and cpu >= 0 and r.status == "ok":
            if p.get("placement") != "unpinned":
                cpus.add(cpu)
            if p.get("placement") == "cross-cpu" and isinstance(ncpus, int) and ncpus > 1:
                cpus.add((cpu + 1) % ncpus)
    return sorted(cpus)
