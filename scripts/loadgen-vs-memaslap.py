#!/usr/bin/env python3
"""Requests per client CPU-second of `isob loadgen` beside memaslap, against
the same memcached (`memcached -t 1`), measured the same way.

usage: scripts/loadgen-vs-memaslap.py [--isob build/isob] [--seconds 5]
                                      [--threads 2] [--conns 16] [--rounds 3]

For each round, each client in turn loads a memcached of its own (started
fresh, so neither finds the other's keys), with the same threads,
connections (kept open for the whole run, as memaslap keeps them), value size (1024 bytes, memaslap's default) and get/set mix
(9:1, memaslap's default; loadgen --set-percent 10).  A client's CPU time is
the user + system time of its process as wait4() reports it after it exited
(the same call for both, so both count their start-up and their loading of
keys alike); its requests are what it says it completed (memaslap's "Ops",
loadgen's "requests").  The server is pinned to the first allowed CPU and
the clients to the others where there are two or more.

It prints, per round and client: requests, CPU seconds, requests per
CPU-second, and the server's CPU per request (from /proc/PID/stat of
memcached, before and after), then the median over rounds of each client.

Differences that favour memaslap, so that the comparison is not flattering
to loadgen: loadgen checks every reply byte for byte (memaslap checks none
unless told -v), and loadgen's requests are only those whose reply it
verified.  Nothing here asserts a speed: it prints both figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

VALUE = 1024
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child before exec: SIGKILL when this script dies, however it
    dies, so that no server or client outlives it."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system, reaped children included) of pid."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ticks / os.sysconf("SC_CLK_TCK")


def pinned(argv: list[str], cpus: list[int] | None) -> list[str]:
    if not cpus or not shutil.which("taskset"):
        return argv
    return ["taskset", "-c", ",".join(map(str, cpus)), *argv]


def start_memcached(cpu: list[int] | None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    argv = ["memcached", "-t", "1", "-p", str(port), "-l", "127.0.0.1", "-m", "64", "-U", "0"]
    if os.geteuid() == 0:
        argv += ["-u", "root"]
    p = subprocess.Popen(pinned(argv, cpu), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, preexec_fn=die_with_parent)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return p, port
        except OSError:
            time.sleep(0.05)
    stop(p)
    sys.exit(f"loadgen-vs-memaslap: memcached did not start on port {port}")


def stop(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def run_measured(argv: list[str], timeout: float) -> tuple[str, str, float, int]:
    """argv run to its end; (stdout, stderr, user + system seconds from
    wait4, exit status)."""
    r, w = os.pipe()
    er, ew = os.pipe()
    pid = os.fork()
    if pid == 0:
        die_with_parent()
        os.dup2(w, 1)
        os.dup2(ew, 2)
        os.close(r)
        os.close(er)
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    os.close(w)
    os.close(ew)
    out, err = bytearray(), bytearray()
    deadline = time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    sel.register(r, selectors.EVENT_READ, out)
    sel.register(er, selectors.EVENT_READ, err)
    open_fds = 2
    while open_fds and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.5):
            chunk = os.read(key.fd, 65536)
            if chunk:
                key.data.extend(chunk)
            else:
                sel.unregister(key.fd)
                os.close(key.fd)
                open_fds -= 1
    if open_fds:
        os.kill(pid, signal.SIGKILL)
    _, status, ru = os.wait4(pid, 0)
    return (out.decode(errors="replace"), err.decode(errors="replace"),
            ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status))


def memaslap(exe: str, port: int, a, cpus) -> tuple[int, float]:
    argv = pinned([exe, "-s", f"127.0.0.1:{port}", "-t", f"{a.seconds}s", "-T", str(a.threads),
                   "-c", str(a.conns), "-X", str(VALUE), "-w", "1k"], cpus)
    out, err, cpu, rc = run_measured(argv, a.seconds + 60)
    m = re.search(r"Run time:\s*[\d.]+s\s+Ops:\s*(\d+)", out)
    if rc != 0 or not m:
        sys.exit(f"loadgen-vs-memaslap: memaslap failed (status {rc}): {(err or out)[-300:]}")
    return int(m[1]), cpu


def loadgen(isob: str, port: int, a, cpus, server_pid: int) -> tuple[int, float]:
    argv = [isob, "loadgen", "--port", str(port), "--threads", str(a.threads),
            "--conns", str(a.conns), "--duration", str(a.seconds), "--value-size", str(VALUE),
            "--set-percent", "10", "--server-pid", str(server_pid),
            # memaslap keeps its connections for the whole run: so does this.
            "--session", "1000000000"]
    if cpus:
        argv += ["--cpu", ",".join(map(str, cpus))]
    out, err, cpu, rc = run_measured(argv, a.seconds + 60)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if rc != 0 or not lines:
        sys.exit(f"loadgen-vs-memaslap: isob loadgen failed (status {rc}): {err[-300:]}")
    doc = json.loads(lines[-1])
    return int(doc["verified"]), cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--isob", default="build/isob")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    exe = shutil.which("memcaslap") or shutil.which("memaslap")
    if exe is None or shutil.which("memcached") is None:
        print("SKIP: memcached and memcaslap/memaslap are needed (apt install memcached "
              "libmemcached-tools)")
        return 0
    if not os.access(a.isob, os.X_OK):
        sys.exit(f"loadgen-vs-memaslap: {a.isob} is not built (meson setup build && ninja -C build)")
    allowed = sorted(os.sched_getaffinity(0))
    server_cpu = [allowed[0]] if len(allowed) >= 2 else None
    client_cpus = allowed[1:] if len(allowed) >= 2 else None
    print(f"server: memcached -t 1 on CPU {server_cpu or 'any'}; clients on CPUs "
          f"{client_cpus or 'any'}; {a.threads} threads, {a.conns} connections, "
          f"{VALUE}-byte values, 9:1 get:set, {a.seconds} s per run")
    per: dict[str, list[float]] = {"memaslap": [], "isob loadgen": []}
    for rnd in range(a.rounds):
        for name in ("memaslap", "isob loadgen"):
            srv, port = start_memcached(server_cpu)
            try:
                s0 = tree_cpu(srv.pid)
                if name == "memaslap":
                    reqs, cpu = memaslap(exe, port, a, client_cpus)
                else:
                    reqs, cpu = loadgen(a.isob, port, a, client_cpus, srv.pid)
                s1 = tree_cpu(srv.pid)
            finally:
                stop(srv)
            rate = reqs / cpu if cpu > 0 else float("nan")
            per[name].append(rate)
            print(f"round {rnd + 1} {name:13s} requests {reqs:>9,}  client CPU {cpu:6.2f} s  "
                  f"{rate:>10,.0f} requests per client CPU-second  "
                  f"(client {1e6 * cpu / reqs:5.2f} us/request, server "
                  f"{1e6 * (s1 - s0) / reqs:5.2f} us/request)")
    m = {k: statistics.median(v) for k, v in per.items()}
    print(f"median over {a.rounds} rounds: memaslap {m['memaslap']:,.0f}, isob loadgen "
          f"{m['isob loadgen']:,.0f} requests per client CPU-second "
          f"(loadgen / memaslap = {m['isob loadgen'] / m['memaslap']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
