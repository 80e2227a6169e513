"""Soundness checks: what makes a stored number untrustworthy or incomparable.

Each check looks at one run (its results, environment and stored
aggregates) and returns at most one Finding: an id, what is wrong (naming
the results concerned), what to do next, the anchor in
docs/reducing-variance.md that explains it, and the flaw of van der Kouwe
et al., "SoK: Benchmarking Flaws in Systems Security" (EuroS&P 2019) it
guards against, where one applies.  `isobench check` prints them, every
report shows them.

Adding a check: a function below, one entry in CHECKS, a section with the
same id in docs/reducing-variance.md, and a way for the flawed fixture
(tests/python/fixtures/flawed_run.json) to trigger it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Mapping, Sequence

from .analysis import (CLIENT_COUNTERS, MACRO, RELATIVE_UNITS, Config, RunData,
                       needs_baseline)
from .records import NO_MECHANISM

DOC = "docs/reducing-variance.md"

# Above this, a result's spread is too large to trust small differences.
# The robust CV (1.4826 MAD / median) is used within a result: the classic
# stdev / mean of per-iteration samples is dominated by the rare interrupt
# (one 10 ms sample among 5000 makes it several hundred percent).  Between
# repetitions, the classic CV of the repetition medians is used.
MAX_CV = 0.05

# Per-thread cycles of a call into another process below this fraction of
# the TSC ticks of the same calls mean the counters missed the other side.
# Core and TSC frequencies differ, but not by 2x on a machine set up for
# measuring (governor performance, turbo off).
MIN_CYCLES_PER_TICK = 0.5

# Environment fields a paper must report (SoK E1); None or missing is a finding.
PLATFORM_FIELDS = ("cpu_model", "kernel", "mitigations", "compiler", "git", "memory_bytes",
                   "nproc", "counter")

# SoK flaws, with their labels in the paper's Table I.
SOK = {
    "B1": "B1 microbenchmarks representing overall performance",
    "B4": "B4 no indication of significance of data",
    "B5": "B5 incorrect averaging across benchmark scores",
    "D1": "D1 no proper baseline",
    "E1": "E1 missing platform specification",
    "E3": "E3 relative numbers only",
}


@dataclass(frozen=True)
class Finding:
    id: str
    what: str
    next: str
    sok: str | None = None
    subjects: tuple[str, ...] = ()

    @property
    def doc(self) -> str:
        return f"{DOC}#{self.id}"

    def as_dict(self) -> dict:
        return {**asdict(self), "subjects": list(self.subjects), "doc": self.doc}


def _subjects(configs: Iterable[Config]) -> tuple[str, ...]:
    return tuple(c.label for c in configs)


def _some(labels: Sequence[str], limit: int = 3) -> str:
    more = f" and {len(labels) - limit} more" if len(labels) > limit else ""
    return "; ".join(labels[:limit]) + more


# ---- comparison and reporting ----

def check_no_baseline(data: RunData) -> Finding | None:
    orphans = [c for c in data.configs if needs_baseline(c) and data.baseline_of(c) is None]
    if not orphans:
        return None
    return Finding(
        "no-baseline",
        f"{len(orphans)} result(s) have no `direct` result to be compared with: "
        f"{_some(_subjects(orphans))}",
        "run the same benchmarks with `-m direct` in the same run "
        "(e.g. `isobench run switch -m direct -m MECH`)", SOK["D1"], _subjects(orphans))


def check_no_spread(data: RunData) -> Finding | None:
    bare = [c for c in data.configs
            if c.quick.n < 2 or c.quick.p5 is None or c.quick.p95 is None]
    if not bare:
        return None
    return Finding(
        "no-spread",
        f"{len(bare)} result(s) have fewer than 2 samples or no percentiles, so no spread "
        f"can be shown: {_some(_subjects(bare))}",
        "measure more iterations (`--n`) and keep the raw samples", SOK["B4"], _subjects(bare))


def check_arithmetic_mean(data: RunData, computed: Sequence[Mapping] = ()) -> Finding | None:
    bad = [a for a in [*data.stored_aggregates, *computed]
           if a.get("of") in ("ratio", "overhead", "normalized")
           and a.get("method") != "geometric-mean"]
    if not bad:
        return None
    names = [f"{a.get('name', '?')} ({a.get('method', 'no method recorded')})" for a in bad]
    return Finding(
        "arithmetic-mean-of-ratios",
        f"{len(bad)} average(s) of ratios were not taken as geometric means: {_some(names)}",
        "average ratios with the geometric mean (isobench's reports and `compare` do); "
        "recompute the stored averages", SOK["B5"], tuple(names))


def check_micro_only(data: RunData) -> Finding | None:
    if not data.configs or any(c.kind == MACRO for c in data.configs):
        return None
    benches = sorted({c.benchmark for c in data.configs})
    return Finding(
        "micro-only",
        f"only microbenchmarks ({', '.join(benches)}): a switch cost alone does not say "
        "what an application pays",
        "add a macrobenchmark to the run: `isobench run switch kv ...`", SOK["B1"])


def check_missing_platform(data: RunData) -> Finding | None:
    env = data.env
    fields = PLATFORM_FIELDS
    if data.configs and all(c.counter in CLIENT_COUNTERS for c in data.configs):
        # Only outside clients measured (kv-server alone): the harness's
        # counter was never used, so it is not missing.
        fields = tuple(f for f in fields if f != "counter")
    missing = [f for f in fields if env.get(f) in (None, {}, [], "")]
    if not missing:
        return None
    reasons = env.get("reasons") or {}
    detail = [f"{f} ({reasons[f]})" if f in reasons else f for f in missing]
    return Finding(
        "missing-platform",
        f"platform or software details are missing: {', '.join(detail)}",
        "run from a git checkout with the native driver built by `make`, on a system "
        "where /proc and /sys are readable", SOK["E1"], tuple(missing))


def check_relative_only(data: RunData) -> Finding | None:
    rel = [c for c in data.configs if (c.unit or "").lower() in RELATIVE_UNITS
           or c.quick.median is None]
    if not rel:
        return None
    return Finding(
        "relative-only",
        f"{len(rel)} result(s) carry only relative numbers (no absolute value): "
        f"{_some(_subjects(rel))}",
        "store the absolute measurements (time or cycles) and derive ratios from them",
        SOK["E3"], _subjects(rel))


# ---- the machine ----

def _two_contexts(data: RunData, mechanism: str) -> bool:
    """Whether a mechanism runs its compartment in another thread or process.
    pingpong ("-") is two processes by definition; a mechanism whose props were
    not recorded is assumed to be one, since unpinned is then the safe warning."""
    if mechanism == NO_MECHANISM:
        return True
    props = (data.env.get("mechanism_props") or {}).get(mechanism)
    return props is None or "two_contexts" in props


def check_unpinned(data: RunData) -> Finding | None:
    loose = [c for c in data.configs if c.placement == "unpinned"
             and _two_contexts(data, c.mechanism)]
    if not loose:
        return None
    return Finding(
        "unpinned",
        f"{len(loose)} result(s) of two-context mechanisms ran unpinned, so the scheduler "
        f"chose same-cpu or cross-cpu at random: {_some(_subjects(loose))}",
        "use `--placement same-cpu,cross-cpu` and report the two apart",
        None, _subjects(loose))


def check_frequency(env: Mapping) -> Finding | None:
    gov, turbo = env.get("governor"), env.get("turbo")
    problems = []
    if gov is not None and gov != "performance":
        problems.append(f"CPU frequency governor is {gov!r}, not 'performance'")
    if turbo is True:
        problems.append("turbo boost is on")
    if not problems:
        return None
    return Finding("frequency-scaling", "; ".join(problems),
                   "run `sudo isobench system tune` before measuring and "
                   "`sudo isobench system reset` after")


def check_smt(env: Mapping) -> Finding | None:
    if env.get("smt") is not True:
        return None
    return Finding("smt-active",
                   "SMT (hyper-threading) is active: a sibling thread shares the core's "
                   "pipeline and caches with the measured code",
                   "disable SMT (`echo off > /sys/devices/system/cpu/smt/control` as root) "
                   "or keep the siblings of the measured CPUs idle")


def check_vm(env: Mapping) -> Finding | None:
    if env.get("hypervisor") is None:
        return None
    return Finding("virtual-machine",
                   f"running in a virtual machine ({env['hypervisor']}): vCPUs are host "
                   "threads, wake-ups cross the hypervisor, and timers may be virtual",
                   "repeat on bare metal before publishing absolute numbers; compare "
                   "mechanisms only within this machine")


def check_no_pmu(data: RunData) -> Finding | None:
    own = [c for c in data.configs if c.counter and c.counter != "perf"
           and c.counter not in CLIENT_COUNTERS]
    if not own:
        return None
    counters = sorted({c.counter for c in own})
    units = sorted({c.unit or "?" for c in own})
    return Finding("no-pmu",
                   f"no hardware counters: results are in {', '.join(units)} "
                   f"(counter {', '.join(counters)}), not core cycles",
                   "run on a machine with a PMU (bare metal, or a VM with a virtual PMU) "
                   "and perf_event_paranoid <= 2")


# ---- the counters ----

def check_dropped(data: RunData) -> Finding | None:
    hit = [c for c in data.configs if c.dropped > 0]
    if not hit:
        return None
    labels = [f"{c.label} ({c.dropped} dropped)" for c in hit]
    return Finding("dropped-samples",
                   f"{len(hit)} result(s) dropped samples the harness found invalid: "
                   f"{_some(labels)}",
                   "pin the run, keep the machine idle, and see why samples were dropped",
                   None, tuple(labels))


def check_multiplexed(data: RunData) -> Finding | None:
    hit = [c for c in data.configs if c.counter == "perf" and c.dropped > 0]
    if not hit:
        return None
    return Finding("counters-multiplexed",
                   f"{len(hit)} perf result(s) had samples whose counters did not run all "
                   f"the time (time_running < time_enabled) or moved: {_some(_subjects(hit))}",
                   "count fewer events at once, disable the NMI watchdog "
                   "(`isobench system tune`), and keep other perf users off the machine",
                   None, _subjects(hit))


def _separate_process(data: RunData, mechanism: str) -> bool:
    props = (data.env.get("mechanism_props") or {}).get(mechanism) or ()
    return "separate_as" in props and "two_contexts" in props


def _wall_ticks(cfg: Config) -> float | None:
    """Median wall time of the same iterations in TSC ticks, if recorded."""
    if cfg.events.get("tsc"):
        return float(sorted(cfg.events["tsc"])[len(cfg.events["tsc"]) // 2])
    ns = cfg.events.get("wall_ns")
    if ns and cfg.tsc_hz:
        return sorted(ns)[len(ns) // 2] * cfg.tsc_hz / 1e9
    return None


def check_counters_miss(data: RunData) -> Finding | None:
    hit = []
    for c in data.configs:
        scope = c.header.get("scope", "thread")  # isob's default scope is thread
        if (c.counter != "perf" or c.unit != "cycles" or scope != "thread"
                or not _separate_process(data, c.mechanism)):
            continue
        wall = _wall_ticks(c)
        med = c.quick.median
        if wall is None:
            hit.append(f"{c.label} (cannot compare: no wall-clock event recorded)")
        elif med is not None and med < MIN_CYCLES_PER_TICK * wall:
            hit.append(f"{c.label} (cycles {med:.0f} vs {wall:.0f} TSC ticks)")
    if not hit:
        return None
    return Finding("counters-miss-other-side",
                   f"per-thread cycle counters of {len(hit)} result(s) whose compartment is "
                   f"another process miss that process's cycles: {_some(hit)}",
                   "measure these with `--scope cpu` (counts everything on the CPU) or with "
                   "the TSC counter (`--counter tsc`)", None, tuple(hit))


def check_high_cv(data: RunData) -> Finding | None:
    hit = []
    for c in data.configs:
        # A spread no wider than one counter step (26 TSC ticks on some VMs)
        # is the counter's resolution, not variation: quantized short regions
        # would otherwise always fire.  The step is reported with every run.
        step = c.header.get("counter_step") or 0
        within, between, meds = c.quick.robust_cv, c.between_cv, c.rep_medians
        if within is not None and within > MAX_CV and (c.quick.mad or 0) > step:
            hit.append(f"{c.label} (robust CV {within:.1%})")
        elif between is not None and between > MAX_CV and max(meds) - min(meds) > step:
            hit.append(f"{c.label} (CV between repetitions {between:.1%})")
    if not hit:
        return None
    return Finding("high-cv",
                   f"{len(hit)} result(s) vary by more than {MAX_CV:.0%}: {_some(hit)}",
                   "pin (`--placement same-cpu,cross-cpu`), tune the machine "
                   "(`isobench system tune`), repeat (`--repeat 5`), and read the interval, "
                   "not the median alone", None, tuple(hit))


# ---- the load of the machine ----

# Another process's CPU time on the CPUs a job was pinned to, as a share of
# the time those CPUs had during the job, above which the job is reported;
# and an absolute floor, since /proc/stat counts in clock ticks (10 ms) and
# process CPU time is exact, so a short job differs by a few ticks anyway.
MAX_OTHER_SHARE = 0.05
MIN_OTHER_SECONDS = 0.1


def _other_cpu(load: Mapping) -> tuple[float, float, list[int]] | None:
    """(seconds others ran on the pinned CPUs, seconds of steal there, the CPUs)
    of one job's load record, or None when the record cannot tell."""
    pinned, busy = load.get("pinned_cpus"), load.get("cpu_busy_s")
    wall, own = load.get("wall_s"), load.get("own_cpu_s")
    if not pinned or not isinstance(busy, Mapping) or wall is None or own is None:
        return None
    if any(str(c) not in busy for c in pinned):
        return None
    steal = load.get("cpu_steal_s") or {}
    other = sum(busy[str(c)] for c in pinned) - own
    return other, sum(steal.get(str(c), 0.0) for c in pinned), list(pinned)


def check_load(data: RunData) -> Finding | None:
    """Whether other processes ran on the CPUs a job was pinned to (load.py
    says what is recorded and why the comparison leans towards silence)."""
    hit = []
    for job in data.jobs:
        load = job.get("load") or {}
        found = _other_cpu(load)
        if found is None:
            continue
        other, steal, cpus = found
        wall = load["wall_s"]
        if other > max(MIN_OTHER_SECONDS, MAX_OTHER_SHARE * wall * len(cpus)):
            start, end = load.get("start") or {}, load.get("end") or {}
            label = (f"{job['benchmark']} -m {job['mechanism']} (repetition "
                     f"{job['repetition']})" if job["mechanism"] != NO_MECHANISM
                     else f"{job['benchmark']} (repetition {job['repetition']})")
            text = (f"{label}: others ran {other:.2f} s on CPU "
                    f"{','.join(map(str, cpus))} in {wall:.1f} s")
            if start.get("runnable") is not None and end.get("runnable") is not None:
                text += f", runnable tasks {start['runnable']} -> {end['runnable']}"
            if steal > MIN_OTHER_SECONDS:
                text += f", hypervisor steal {steal:.2f} s"
            hit.append(text)
    if not hit:
        return None
    return Finding("load-during-run",
                   f"{len(hit)} job(s) shared their pinned CPUs with other processes while "
                   f"measuring: {_some(hit)}",
                   "measure on an idle machine (stop other jobs, `isobench system tune`), or "
                   "isolate the measured CPUs (isolcpus=), then run again; compare the "
                   "affected results with care", None, tuple(hit))


# ---- running them ----

CHECKS: tuple[tuple[str, Callable[[RunData], Finding | None]], ...] = (
    ("no-baseline", check_no_baseline),
    ("no-spread", check_no_spread),
    ("arithmetic-mean-of-ratios", check_arithmetic_mean),
    ("micro-only", check_micro_only),
    ("missing-platform", check_missing_platform),
    ("relative-only", check_relative_only),
    ("unpinned", check_unpinned),
    ("frequency-scaling", lambda d: check_frequency(d.env)),
    ("smt-active", lambda d: check_smt(d.env)),
    ("virtual-machine", lambda d: check_vm(d.env)),
    ("no-pmu", check_no_pmu),
    ("dropped-samples", check_dropped),
    ("counters-multiplexed", check_multiplexed),
    ("counters-miss-other-side", check_counters_miss),
    ("high-cv", check_high_cv),
    ("load-during-run", check_load),
)
CHECK_IDS = tuple(i for i, _ in CHECKS)

# The checks that look at the machine alone (`isobench system check`).
MACHINE_CHECKS = (check_frequency, check_smt, check_vm)


def run_checks(data: RunData, computed_aggregates: Sequence[Mapping] = ()) -> list[Finding]:
    """Every finding for a run, in CHECKS order.  computed_aggregates are the
    averages a report or comparison computed, so that they are checked too."""
    out = []
    for check_id, check in CHECKS:
        f = (check_arithmetic_mean(data, computed_aggregates)
             if check_id == "arithmetic-mean-of-ratios" else check(data))
        if f is not None:
            out.append(f)
    return out


def machine_findings(env: Mapping) -> list[Finding]:
    findings = [check(env) for check in MACHINE_CHECKS]
    if not env.get("pmu"):
        findings.append(Finding("no-pmu", "this machine exposes no hardware PMU "
                                "(no /sys/bus/event_source/devices/cpu)",
                                "measure on bare metal or in a VM with a virtual PMU"))
    return [f for f in findings if f is not None]


def render(findings: Sequence[Finding]) -> str:
    """Plain text: one block per finding."""
    if not findings:
        return "no findings: none of the soundness checks fired"
    out = [f"{len(findings)} finding{'s' if len(findings) != 1 else ''}:"]
    for f in findings:
        sok = f"  [SoK {f.sok}]" if f.sok else ""
        out.append(f"  {f.id}{sok}")
        out.append(f"    what: {f.what}")
        out.append(f"    next: {f.next}  (see {f.doc})")
    return "\n".join(out)
