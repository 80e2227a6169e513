"""``isobench serve``: the memcached text-protocol server of the native driver.

The server itself is C (``isob serve``, src/serve/): measuring stays native.
This module only builds its command line and replaces the Python process with
it, so that signals (Ctrl-C, SIGTERM from a benchmark script) reach the server
directly and it stops cleanly, and so that no Python sits between a load
generator and the process it measures.

Wiring into the cli: one line of cli.COMMANDS, its one-line help and this
module, whose add_parser(sub) adds the subcommand and sets func=serve.serve_main.
"""

from __future__ import annotations

import argparse
import os
from typing import Sequence

from .driver import find_isob
from ..core.validate import bounded_whole

# Defaults of `isob serve` (include/isobench/serve.h), repeated only for the
# help text: an option left out is not passed, so isob's own default applies.
DEFAULT_PORT = 11311
DEFAULT_BIND = "127.0.0.1"
DEFAULT_HEAP_MB = 64
DEFAULT_MAX_CONNS = 1024

# argparse dest -> isob serve option, in the order they are passed on.
_OPTIONS = (
    ("port", "--port"),
    ("bind", "--bind"),
    ("max_value", "--max-value"),
    ("heap_mb", "--heap-mb"),
    ("buffer_mb", "--buffer-mb"),
    ("cpu", "--cpu"),
    ("comp_cpu", "--comp-cpu"),
    ("max_conns", "--max-conns"),
    ("memory_limit_mb", "--memory-limit-mb"),
    ("session", "--session"),
    ("startup_mb", "--startup-mb"),
    ("preload_keys", "--preload-keys"),
    ("preload_value", "--preload-value"),
    ("workers", "--workers"),
    ("rollback_method", "--rollback-method"),
)
# argparse dest -> isob serve flag.
_FLAGS = (("no_evict", "--no-evict"), ("per_connection", "--per-connection"),
          ("http", "--http"), ("rollback_verify", "--rollback-verify"))
SESSIONS = ("shared", "fork", "rollback", "prefork")
ROLLBACK_METHODS = ("uffd", "softdirty", "fork")


def _whole(low: int, high: int):
    """An argparse type: a whole number in [low, high] in plain ASCII digits
    (int() alone would pass '４' on to isob as '4')."""
    return bounded_whole(low, high)


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``serve`` subcommand to the cli's subparsers."""
    p = sub.add_parser(
        "serve", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run `isob serve`: a memcached text-protocol server (get, gets, gat, gats,\n"
                    "set, add, replace, cas, touch, delete, flush_all, stats, version, quit;\n"
                    "exptime, cas uniques, noreply, eviction; see docs/serve.md) whose store\n"
                    "lives in ONE compartment of the chosen mechanism, so that any memcached\n"
                    "client or load generator measures what the mechanism costs a real\n"
                    "workload.  Compare against `-m direct` (the plain-call baseline) and\n"
                    "against memcached itself.\n\n"
                    "It prints \"isob serve: listening on ADDR:PORT (mechanism M)\" on stderr\n"
                    "when ready and stops cleanly on Ctrl-C or SIGTERM.",
        epilog="examples:\n"
               "  isobench serve -m direct\n"
               "  isobench serve -m process-futex --port 11411 --cpu 0 --heap-mb 512\n"
               "  taskset -c 1 memcaslap -s 127.0.0.1:11311 -t 10s -T 1 -c 16")
    p.add_argument("-m", "--mechanism", required=True, metavar="MECH",
                   help="mechanism of the store's compartment (see `isobench list`)")
    p.add_argument("--port", type=_whole(0, 65535), metavar="P",
                   help=f"TCP port; 0 picks a free one (default: {DEFAULT_PORT})")
    p.add_argument("--bind", metavar="ADDR",
                   help=f"IPv4 address to listen on (default: {DEFAULT_BIND}, loopback only)")
    p.add_argument("--max-value", type=_whole(1, 1 << 30), metavar="BYTES",
                   help="largest value a client may store; a larger one gets SERVER_ERROR object "
                        "too large for cache (default: 1 MiB, as memcached; at most just under "
                        "16 MiB, the store's limit)")
    p.add_argument("--heap-mb", type=_whole(1, 1 << 20), metavar="N",
                   help=f"the compartment's heap, the store's memory, in MiB "
                        f"(default: {DEFAULT_HEAP_MB})")
    p.add_argument("--buffer-mb", type=_whole(1, 1 << 20), metavar="N",
                   help="what all connections' buffers may hold together, in MiB; beyond, "
                        "requests get SERVER_ERROR out of memory (default: --heap-mb, at least "
                        "what a few of the largest requests need)")
    p.add_argument("-M", "--no-evict", action="store_true",
                   help="a full store refuses new items instead of evicting, as memcached -M")
    p.add_argument("--cpu", type=_whole(0, 4095), metavar="C",
                   help="pin the server to CPU C (default: unpinned)")
    p.add_argument("--comp-cpu", type=_whole(0, 4095), metavar="C",
                   help="CPU of the compartment's second context, for mechanisms that have "
                        "one (default: --cpu)")
    p.add_argument("--max-conns", type=_whole(1, 1000000), metavar="N",
                   help=f"open connections at most; more are refused "
                        f"(default: {DEFAULT_MAX_CONNS}); with --session fork, more than the "
                        f"memory could hold if every session filled its store is refused "
                        f"at start-up")
    p.add_argument("--memory-limit-mb", type=_whole(1, 1 << 40), metavar="N",
                   help="with --session fork: what the sessions and their listener may take "
                        "together at worst, in MiB (default: MemAvailable + SwapFree, or less "
                        "under the cgroup's memory.max)")
    p.add_argument("--session", choices=SESSIONS, metavar="S",
                   help="what sessions (connections) share: shared (one store), fork (a "
                        "process per connection that starts up by itself from a copy of the "
                        "empty store), rollback (prefork workers, each serving one session "
                        "at a time and rolling back to its snapshot after start-up when the "
                        "session ends), prefork (the same workers without the rollback: no "
                        "isolation); docs/serve.md (default: shared)")
    p.add_argument("--workers", type=_whole(1, 4096), metavar="N",
                   help="with --session rollback or prefork: worker processes (default: the "
                        "CPUs the server may use)")
    p.add_argument("--rollback-method", choices=ROLLBACK_METHODS, metavar="M",
                   help="with --session rollback: uffd (userfaultfd write-protect finds the "
                        "pages a session wrote), softdirty (soft-dirty bits find them) or "
                        "fork (a fresh fork of the master per session); one that cannot run "
                        "falls back to the next (default: uffd)")
    p.add_argument("--rollback-verify", action="store_true",
                   help="with --session rollback: compare each worker's memory with its "
                        "snapshot after every rollback (slow; stats says what differed)")
    p.add_argument("--per-connection", action="store_true",
                   help="a light-weight context per connection instead of workers "
                        "(implies --session rollback)")
    p.add_argument("--http", action="store_true",
                   help="serve HTTP/1.x GET of the 45-byte document isob loadgen checks "
                        "instead of the memcached protocol")
    p.add_argument("--startup-mb", type=_whole(0, 16384), metavar="N",
                   help="build N MiB of start-up state before serving (default: 0)")
    p.add_argument("--preload-keys", type=_whole(0, 10000000), metavar="K",
                   help="store isob loadgen's keys at start-up (default: 0)")
    p.add_argument("--preload-value", type=_whole(1, 1 << 20), metavar="B",
                   help="bytes of each preloaded value (default: 45)")
    p.set_defaults(func=serve_main)
    return p


def isob_argv(args: argparse.Namespace | Sequence[str]) -> list[str]:
    """The command line of ``isob serve`` for parsed options, or for raw
    arguments (passed through unchanged, for scripts that have their own)."""
    isob = str(find_isob())
    if not isinstance(args, argparse.Namespace):
        return [isob, "serve", *args]
    argv = [isob, "serve", "-m", args.mechanism]
    for dest, option in _OPTIONS:
        value = getattr(args, dest, None)
        if value is not None:
            argv += [option, str(value)]
    for dest, flag in _FLAGS:
        if getattr(args, dest, False):
            argv.append(flag)
    return argv


def serve_main(args: argparse.Namespace | Sequence[str]) -> int:
    """Replace this process with ``isob serve``; returns only if exec fails
    (then as an OSError, which the caller reports).  find_isob raises
    UsageError when the native driver has not been built."""
    argv = isob_argv(args)
    os.execv(argv[0], argv)
    return 1  # not reached: execv either replaces the process or raises
