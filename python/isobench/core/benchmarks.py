"""One record per benchmark: what the Python side knows of it, written once.

isob owns what a benchmark measures and which options it takes (`isob list
--json`, its option tables in C); this module owns what the harness, the
analysis and the renderers need to know of each benchmark by name: whether
it is a micro- or a macrobenchmark, which of its result params report what
happened rather than select what was measured, which of `isobench run`'s
options it reads (--placement, --sizes), its own repetitions and time-out,
the phase that stands for it, how it finds its baseline, the sections of the
summary document its results feed, and the help of the options only some
benchmarks take.  Every name-keyed table of the layers above (analysis/kit/runs.py,
measure/runner.py, the cli's options, the section registries) is read from
here, so that a new benchmark is one more record.

The options' values and defaults are the ones isob prints in `isob list
--json` for the benchmarks it runs (tests/python/test_benchmarks.py holds the
two to each other); the options of the benchmarks Python drives (lwc-serve)
are Python's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

MICRO, MACRO = "micro", "macro"

# The kinds of value an option of some benchmarks only takes, as the cli
# parses them (core/validate.py): a list of names, a list of numbers, a
# process id, or no value (a flag: the benchmark gets it as "on").
NAMES, NUMBERS, PID, FLAG = "names", "numbers", "pid", "flag"


@dataclass(frozen=True)
class Option:
    """An option of `isobench run` that this benchmark takes, passed on to it.

    help says what the option does for this benchmark, values what it takes
    and default what it is when not given (None: the help says it)."""

    flag: str
    kind: str
    help: str
    default: str | None = None

    @property
    def text(self) -> str:
        return self.help + (f" (default {self.default})" if self.default is not None else "")


@dataclass(frozen=True)
class Benchmark:
    name: str
    # Microbenchmarks isolate one cost (a switch, an OS primitive);
    # macrobenchmarks run a workload with its data inside the compartment.
    kind: str
    # Result params that report what happened rather than select what was
    # measured: they are left out when results are grouped and matched.
    output_params: frozenset[str] = frozenset()
    # Whether it reads `isobench run --placement` (it places a second
    # context or a server) and --sizes where isob does not list --sizes for
    # it (kv's data sizes, memops' block sizes).
    placed: bool = False
    sized: bool = False
    # Fresh processes when --repeat and --quick are not given (None: the
    # harness's default), and the time-out of a full run in seconds (None:
    # the harness's default) where its experiment lasts longer by design.
    repeat: int | None = None
    timeout: float | None = None
    # The phase that stands for the benchmark where it has several.
    headline_phase: str | None = None
    # Its baseline among `direct`'s results: params fixed to a value (the
    # switch's baseline is direct's "entry" variant), and the variants that
    # are their own baseline's variant instead (ERIM's call kinds).
    baseline_fixed: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    baseline_own_variant: frozenset[str] = frozenset()
    # The sections of the summary document its results feed
    # (analysis/sections.py builds them, render/sections.py shows them), and
    # the one of them whose text block shows its results in full, so that
    # the console's per-result table leaves them to it.
    sections: tuple[str, ...] = ()
    full_section: str | None = None
    # An outside program measured beside it as its point of comparison:
    # the mechanism column of that program's results (kv-server: memcached).
    # Its results have no `direct` baseline and a table of their own.
    reference: str | None = None
    options: tuple[Option, ...] = ()

    def option(self, flag: str) -> Option | None:
        return next((o for o in self.options if o.flag == flag), None)


# Result params every benchmark may report (kv prints its own mean, request
# counts, store sizes, ...): outputs wherever they appear.
COMMON_OUTPUT_PARAMS = frozenset({
    "mean", "requests", "verified", "pmu_reason", "sample_stride", "iterations",
    "iterations_asked", "entries", "store_bytes", "heap_bytes", "store_ratio", "heap_ratio",
    "throughput", "ops_per_s", "ops_per_sec", "requests_per_s", "elapsed_s", "errors",
})

# The workloads (docs/workloads.md): what each result measured or where it
# happened, beside the params that select it.
_WORKLOAD_OUTPUTS = frozenset({
    "calls_checked", "ns_per_iteration", "batch_k", "values", "warmup_iterations",
    "crossings_per_trial", "minor_faults", "fault_site", "gbps", "operations", "cold",
    "write_calls", "short_reads", "io_by", "pss_kb", "pss_kb_before", "pss_kb_per_compartment",
    "processes", "calls_verified", "limit_cap", "created", "cause", "errno", "errno_name", "dead",
    "shared_bytes", "mem_available_mib", "destroyed", "processes_left",
})
# pingpong, delegate, sched (docs/microkernel.md): the protection's evidence,
# percentiles and the delta against none computed in the same run.
_MICROKERNEL_OUTPUTS = frozenset({"protect_evidence", "protect_threat", "spread",
                                  "delta_vs_none"})
# lwC's experiments (docs/lwc.md): faults counted where the pages were
# written, switches checked on the other side, calls the monitor saw.
_LWC_OUTPUTS = frozenset({
    "reps", "minflt_min", "minflt_median", "minflt_max", "minflt", "pages", "pages_saved",
    "scanned_pages", "round_trips", "b_ran", "median_a_to_b", "median_b_to_a",
    "monitored_calls", "monitored_expected", "denied", "probe", "bypass",
})
# Server CPU per request (analysis/kit/cpu.py), kv-server and lwc-*: outputs.
# server_cpu_tick_s: the part of it in clock ticks (kv-server);
# server_cpu_clock: loadgen's clock (lwc-*).
_SERVER_CPU_OUTPUTS = frozenset({"server_cpu_us_per_req", "client_cpu_us_per_req",
                                 "cpu_source", "server_cpu_tick_s", "server_cpu_clock"})
# lwc-serve, lwc-conns, lwc-curve (measure/lwcserve.py): what isob loadgen
# reported; lwc-serve --tls (measure/lwcmonitor.py): what isob tlsload
# reported; lwc-curve: what the open loop achieved at the offered rate;
# lwc-serve's rollback: the server's totals (isob serve --session rollback).
_SERVE_OUTPUTS = _SERVER_CPU_OUTPUTS | frozenset({
    "throughput_rps", "sessions_done", "connects", "duration_s", "samples_every",
    "client_busy", "client_cpu_s", "server_busy", "server_cpu_s", "server_processes",
    "latency_p50_us", "latency_p90_us", "latency_p99_us", "latency_p999_us",
    "latency_mean_us", "latency_max_us",
    "handshakes_done", "handshake_seconds", "handshakes_per_s", "server_cpu_per_handshake_us",
    "handshake_p50_us", "handshake_p90_us", "handshake_p99_us", "handshake_mean_us",
    "handshake_max_us",
    # How often the server's threads blocked per request.
    "server_blocked_per_req", "server_processes_ended",
    "achieved_rps", "achieved_ratio", "queued", "unsent", "knee", "late",
    "send_lag_max_us",
    "rollback_method", "rollback_workers", "rollback_sessions", "rollback_pages", "rollback_ns",
    "rollback_failed", "rollback_us_per_session", "rollback_pages_per_session",
})

_PAYLOAD = Option("--payload", NUMBERS, "payloads in bytes, 0 to 65536", "0,64,4096")

RECORDS: tuple[Benchmark, ...] = (
    Benchmark("switch", MICRO, placed=True,
              baseline_fixed=MappingProxyType({"variant": "entry"}),
              baseline_own_variant=frozenset({"inline", "direct-call", "indirect-call"}),
              # ERIM's call kinds: what the gate adds to each (docs/mechanisms.md).
              sections=("switch-call-kinds",),
              options=(_PAYLOAD,
                       Option("--variant", NAMES,
                              "entry, inline, direct-call, indirect-call (ERIM's call kinds, an "
                              "empty function inlined, called directly or through a pointer: "
                              "outside any compartment on direct, behind the gate on mpk)",
                              "all the mechanism has"))),
    Benchmark("pingpong", MICRO, output_params=_MICROKERNEL_OUTPUTS, placed=True,
              sections=("microkernel-ipc",), full_section="microkernel-ipc",
              options=(Option("--primitive", NAMES,
                              "futex, pipe, socket, socket-fd, eventfd, spin", "all"),
                       Option("--protect", NAMES,
                              "none, seccomp, userns, landlock or seccomp-allow:VARIANT, "
                              "confining both endpoints (isob measures none first, for the "
                              "delta)", "none"),
                       _PAYLOAD)),
    Benchmark("kv", MACRO, placed=True, sized=True, headline_phase="get",
              # kv's table as a paper holds it (render/paper.py's kv.tex).
              sections=("kv",),
              options=(Option("--reading", NAMES,
                              "per-request (two counter readings around every get) and/or "
                              "per-pass (two around a whole pass of gets, divided by its gets: "
                              "Konrad 2023 section 3.3, so the reading's own cost is shared out "
                              "as in his figures); both: a get phase each", "per-request"),)),
    Benchmark("kv-server", MACRO, reference="memcached",
              # kv-server (measure/kvserver.py): what memcaslap reported, and labels of it.
              output_params=_SERVER_CPU_OUTPUTS | frozenset({
                  "ops", "get_misses", "latency_source", "samples", "latency_events",
                  "latency_min_ns", "latency_avg_ns", "latency_max_ns", "latency_std_ns",
                  "latency_p50_lo_ns", "latency_p50_hi_ns", "latency_p95_lo_ns",
                  "latency_p95_hi_ns", "latency_p99_lo_ns", "latency_p99_hi_ns"})),
    Benchmark("oslat", MICRO, placed=True, sections=("oslat",), full_section="oslat",
              # The confinement's evidence and what each primitive did and checked.
              output_params=frozenset({"work", "confine_evidence", "confine_events",
                                       "confine_threat", "budget_ms"}),
              options=(Option("--primitive", NAMES,
                              "primitives or families (ctx, fs, ipc, proc, bw)", "all"),
                       Option("--confine", NAMES,
                              "confinements C or C:VARIANT, one job each per repetition in a "
                              "shuffled order, `none` always among them; `all`: every one isob "
                              "lists (default: every one available here, named on stderr)"))),
    # docs/workloads.md: work per crossing and compartment count are micro;
    # the kernels, memory and I/O run with their data inside.
    Benchmark("worksweep", MICRO, output_params=_WORKLOAD_OUTPUTS, placed=True,
              sections=("worksweep",)),
    # Morello's 1e8 iterations per trial: an hour at most.
    Benchmark("cpuwork", MACRO, placed=True, timeout=3600.0, sections=("cpuwork",),
              full_section="cpuwork"),
    # Blocks of up to 1000 MiB: an hour at most.
    Benchmark("memops", MACRO, placed=True, sized=True, timeout=3600.0, sections=("memops",),
              full_section="memops"),
    Benchmark("pipeio", MACRO, placed=True, sections=("pipeio",), full_section="pipeio"),
    Benchmark("scale", MICRO, placed=True, sections=("scale",), full_section="scale"),
    # docs/microkernel.md
    Benchmark("delegate", MICRO, placed=True, sized=True, sections=("microkernel-delegate",),
              full_section="microkernel-delegate",
              options=(Option("--depth", NUMBERS, "chain depths", "1,2,4,8,16,32"),
                       Option("--variant", NAMES, "threads, processes, copies", "all"))),
    # sched refuses --placement: where its workers run is its --cpus.
    Benchmark("sched", MICRO, sections=("microkernel-sched",), full_section="microkernel-sched",
              options=(Option("--variant", NAMES, "threads, processes, seccomp, userns", "all"),
                       Option("--workers", NUMBERS, "worker counts", "1,2,4,16,64,256"),
                       Option("--slice", NUMBERS, "slice lengths in us", "10,100"),
                       Option("--mode", NAMES, "yield, preempt", "yield,preempt"),
                       Option("--cpus", NAMES, "one, all", "one,all"))),
    # docs/lwc.md: creation, switch and monitored calls are micro; signing
    # with the key in a context is the use case itself.
    Benchmark("lwc-create", MICRO, output_params=_LWC_OUTPUTS, sections=("lwc-create",),
              full_section="lwc-create"),
    Benchmark("lwc-switch", MICRO, placed=True, sections=("lwc-switch",),
              full_section="lwc-switch"),
    # lwC's reference-monitor figure: seconds per 10,000 calls over 10 repetitions.
    Benchmark("refmon", MICRO, repeat=10, sections=("refmon",), full_section="refmon"),
    Benchmark("lwc-sign", MACRO, sections=("lwc-sign",), full_section="lwc-sign"),
    # docs/serve.md: servers under isob loadgen.
    Benchmark("lwc-serve", MACRO, output_params=_SERVE_OUTPUTS,
              # --monitor: lwC's reference monitors in the server; --tls: its
              # isolated OpenSSL key.
              sections=("lwc-serve", "lwc-monitor", "lwc-tls"),
              options=(Option("--monitor", NAMES,
                              "reference monitors none, inline, procsep, lwc (lwC's Apache): "
                              "HTTP, one shared server, each GET's openat and pread64 checked "
                              "by the monitor; only these points run (docs/serve.md)"),
                       Option("--doc-bytes", NUMBERS,
                              "HTTP document sizes, 45 and 900 (lwC's nginx); only the HTTP "
                              "case runs, with --monitor each monitor at each size", "45"),
                       Option("--tls", FLAG,
                              "lwC's isolated OpenSSL key: 10,000 full TLS handshakes "
                              "(--quick: 1,000) against isob serve --tls with the key in the "
                              "server and only in an lwc context that signs, beside lwC's "
                              "99.7 s and 100.4 s (docs/serve.md)"),
                       Option("--session", NAMES,
                              "session modes of --monitor and --tls: shared (default), "
                              "prefork, rollback (lwC's Apache: a worker per connection, each "
                              "with its own monitor or key's context), fork, per-connection "
                              "(lwC's nginx; not with --tls or --monitor lwc); without them, "
                              "the HTTP case in these modes", "shared"),
                       Option("--tls-key", NAMES,
                              "--tls: the key made at start-up, rsa2048 (as lwC's figures) "
                              "and/or ecdsa-p256", "rsa2048"))),
    Benchmark("lwc-conns", MACRO, sections=("lwc-serve",)),
    Benchmark("lwc-curve", MACRO, sections=("lwc-serve",)),
    # docs/inspect.md: the cost of ERIM's scan per page.  What the scan
    # found and covered are outputs; what it scanned (target, patterns)
    # stays the identity.
    Benchmark("inspect", MICRO, sections=("inspect",), full_section="inspect",
              output_params=frozenset({
                  "target_exe", "patterns", "passes", "bytes_scanned", "mappings",
                  "mappings_unscanned", "bytes_unscanned", "gate_sites_recorded",
                  "gate_sites_found", "stray_sites", "sites", "unscanned"}),
              options=(Option("--pid", PID, "the process whose executable mappings are "
                                            "scanned", "this isob process"),)),
    # docs/kvm.md: exits out of a KVM guest, SEIMI's Table I.  What the
    # guest checked and how it was built are outputs.
    Benchmark("vmcall", MICRO, sections=("vmcall",), full_section="vmcall",
              output_params=frozenset({"exits_per_run", "guest_bad", "guest_last",
                                       "hypervisor", "kvm_nested_param"})),
)

BY_NAME: Mapping[str, Benchmark] = MappingProxyType({b.name: b for b in RECORDS})


def get(name: str) -> Benchmark | None:
    return BY_NAME.get(name)


def output_params() -> frozenset[str]:
    """Every benchmark's output params and the common ones: a param is an
    output wherever it appears, so that grouping never depends on which
    benchmark printed it."""
    return COMMON_OUTPUT_PARAMS.union(*(b.output_params for b in RECORDS))


def option_flags() -> tuple[str, ...]:
    """The options of some benchmarks only, each once, in the order the
    records first name them."""
    return tuple(dict.fromkeys(o.flag for b in RECORDS for o in b.options))


def option_kind(flag: str) -> str:
    return next(o.kind for b in RECORDS for o in b.options if o.flag == flag)


def option_help(flag: str) -> str:
    """An option's help: what it is for each benchmark that takes it, the
    benchmarks that take it alike named together."""
    alike: dict[Option, list[str]] = {}
    for b in RECORDS:
        o = b.option(flag)
        if o is not None:
            alike.setdefault(o, []).append(b.name)
    return "; ".join(f"{', '.join(names)}: {o.text}" for o, names in alike.items())


def sections() -> tuple[str, ...]:
    """Every section name a benchmark's results feed, each once."""
    return tuple(dict.fromkeys(s for b in RECORDS for s in b.sections))


def shown_in_full(section: str) -> tuple[str, ...]:
    """The benchmarks whose results the section's text block shows in full."""
    return tuple(b.name for b in RECORDS if b.full_section == section)
