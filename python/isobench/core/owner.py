"""Which process owns a running run, and whether that process still exists.

A run is `running` while its `isobench run` process lives.  If that process
is killed with SIGKILL, or the machine loses power, nothing marks the run as
ended; the next isobench that opens the store does, from what is recorded
here: the host, the kernel's boot id, the pid and the pid's start time (in
clock ticks since boot, /proc/PID/stat field 22).  The start time tells a
live owner from a new process that happens to have the same pid; the boot id
tells a pid of this boot from one of an earlier boot.

This reads the real /proc of the machine, never ISOBENCH_SYSROOT: it is
about processes, not about the machine state that sysroot fakes for tests.
"""

from __future__ import annotations

import os
import socket
from typing import Mapping

BOOT_ID = "/proc/sys/kernel/random/boot_id"


def _boot_id() -> str | None:
    try:
        with open(BOOT_ID) as f:
            return f.read().strip() or None
    except OSError:
        return None


def start_ticks(pid: int) -> int | None:
    """The start time of pid in clock ticks since boot, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after
    # the last ')'.  Field 3 is the state, field 22 the start time.
    fields = text[text.rfind(")") + 2:].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None  # a zombie has finished running
    try:
        return int(fields[19])
    except ValueError:
        return None


def this_process() -> dict:
    """The owner record of the calling process."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "boot_id": _boot_id(), "pid": pid,
            "start_ticks": start_ticks(pid)}


def gone(owner: Mapping) -> str | None:
    """Why the owner no longer runs, or None when it may still (or when this
    machine cannot tell: another host, or nothing recorded to compare)."""
    if not isinstance(owner, Mapping) or owner.get("host") != socket.gethostname():
        return None
    pid, ticks, boot = owner.get("pid"), owner.get("start_ticks"), owner.get("boot_id")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    current_boot = _boot_id()
    if boot and current_boot and boot != current_boot:
        return f"its process (pid {pid}) ran before the machine restarted"
    now = start_ticks(pid)
    if now is None:
        return f"its process (pid {pid}) is gone"
    if ticks is not None and now != ticks:
        return f"its process (pid {pid}) is gone (the pid now names another process)"
    return None
