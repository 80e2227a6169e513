"""Soundness checks: what makes a stored number wrong, missing or qualified.

Each check looks at one run -- its stored results and environment
(runs.RunData) and its summary document (summary.build, for the
headline flags) -- and returns at most one Finding: an id, a severity,
what is wrong (naming the results concerned), what to do next, the anchor
in docs/reducing-variance.md that explains it, and the flaw of van der
Kouwe et al., "SoK: Benchmarking Flaws in Systems Security" (IEEE EuroS&P
2019, Table I) it guards against, where one applies.

Severities:

    error    the numbers are wrong or missing: a result failed, the run
             measured nothing, was interrupted, or a mechanism lacks the
             baseline its overhead needs
    warning  the numbers hold, with a caveat the reader must see (a VM, no
             PMU, high variation, a quantized median, ...)
    info     context for the reader

`isobench check` exits 0 without errors and 3 with errors (`--strict`:
warnings count too); 1 stays "could not run", 2 "bad usage".

Adding a check: a function below, one Check line in CHECKS, a section with
the same id in docs/reducing-variance.md, and a test in
tests/python/test_checks.py with a fixture that makes it fire and one that
does not.
"""

from __future__ import annotations

import os
import socket
from typing import Callable, Iterable, Mapping, Sequence

from ..core import owner, stats
from .kit.findings import (DOC, ERROR, INFO, SEVERITIES, SOK, WARNING, Check, Finding, Fired,
                           some, subjects_of, where)
from .kit.runs import CLIENT_COUNTERS, MACRO, Config, RunData, needs_baseline
from ..core.records import NO_MECHANISM

# Exit status of `isobench check` when an error (or, with --strict, a
# warning) was found: distinct from 1 (could not run) and 2 (bad usage).
EXIT_FINDINGS = 3

# Above this, a result's spread is too large to trust small differences.
# The robust CV (1.4826 MAD / median) is used within a result: the classic
# stdev / mean of per-iteration samples is dominated by the rare interrupt
# (one 10 ms sample among 5000 makes it several hundred percent).  Between
# repetitions, the classic CV of the repetitions' headline values is used.
MAX_CV = 0.05

# Per-thread cycles of a call into another process below this fraction of
# the TSC ticks of the same calls mean the counters missed the other side.
# Core and TSC frequencies differ, but not by 2x on a machine set up for
# measuring (governor performance, turbo off).
MIN_CYCLES_PER_TICK = 0.5

# What a reader needs to know of the machine (SoK F1) and of the software
# (SoK F2); None or missing is a finding.
PLATFORM_FIELDS = ("cpu_model", "memory_bytes", "nproc", "mitigations", "counter")
SOFTWARE_FIELDS = ("kernel", "compiler", "git", "python", "isobench_version")

# ---- the run as a whole: numbers missing ----

def _owner_state(run: Mapping) -> tuple[bool | None, str]:
    """Whether the process that started a `running` run still exists (None:
    the store does not say which process that was, or it ran on another
    machine), and why not when it does not (core/owner.py)."""
    rec = run.get("owner")
    if not isinstance(rec, Mapping) or not isinstance(rec.get("pid"), int):
        return None, "no owner process is recorded, and it never finished"
    why = owner.gone(rec)
    if why:
        return False, why
    if rec.get("host") != socket.gethostname():
        return None, f"it was started on {rec.get('host')!r}, not here, and never finished"
    return True, ""


def check_interrupted(data: RunData, doc: Mapping) -> Fired | None:
    run = data.run
    status = run.get("status")
    if status == "interrupted":
        why = f" ({run['end_reason']})" if run.get("end_reason") else ""
        return Fired(f"run {data.run_id} is marked interrupted{why}: it stopped before every "
                     "job ran, so results are missing",
                     "run it again; `isobench show` lists what was kept")
    if status == "running":
        alive, why = _owner_state(run)
        if alive is not True:
            return Fired(f"run {data.run_id} is still marked running but {why}: it was "
                         "interrupted, and results are missing",
                         "run it again; the results it kept are in `isobench show`")
    return None


def check_in_progress(data: RunData, doc: Mapping) -> Fired | None:
    if data.run.get("status") != "running" or _owner_state(data.run)[0] is not True:
        return None
    return Fired(f"run {data.run_id} is still running: its numbers are partial",
                 "check again when it has finished")


def check_no_results(data: RunData, doc: Mapping) -> Fired | None:
    if data.results:
        return None
    return Fired(f"run {data.run_id} holds no result at all: it was stopped before its first "
                 "result, or nothing was selected",
                 "run it again and let it finish")


def check_failed(data: RunData, doc: Mapping) -> Fired | None:
    bad = [r for r in data.results if r["status"] == "failed"]
    if not bad:
        return None
    labels = [f"{where(r)}: {r.get('reason') or 'no reason given'}" for r in bad]
    return Fired(f"{len(bad)} result(s) failed (a crash, a hang, a kill or a wrong answer), "
                 f"so their numbers are missing: {some(labels)}",
                 "read each reason; fix the mechanism or leave it out (`-m`), and run again",
                 tuple(labels))


def check_all_skipped(data: RunData, doc: Mapping) -> Fired | None:
    if not data.results or any(r["status"] != "skipped" for r in data.results):
        return None
    reasons = sorted({r.get("reason") or "?" for r in data.results})
    return Fired(f"every one of the run's {len(data.results)} result(s) was skipped, so "
                 f"nothing was measured: {some(reasons)}",
                 "run mechanisms this machine has (`isobench list` says which and why not)",
                 tuple(reasons))


def check_no_baseline(data: RunData, doc: Mapping) -> Fired | None:
    orphans = [c for c in data.configs if needs_baseline(c) and data.baseline_of(c) is None]
    if not orphans:
        return None
    return Fired(f"{len(orphans)} result(s) have no `direct` result to be compared with, so "
                 f"their overhead is unknown: {some(subjects_of(orphans))}",
                 "run the same benchmarks with `-m direct` in the same run "
                 "(e.g. `isobench run switch -m direct -m MECH`)", subjects_of(orphans))


def _separate_process(data: RunData, mechanism: str) -> bool:
    props = (data.env.get("mechanism_props") or {}).get(mechanism) or ()
    return "separate_as" in props and "two_contexts" in props


def _wall_ticks(cfg: Config) -> float | None:
    """Median wall time of the same iterations in TSC ticks, if recorded."""
    if cfg.events.get("tsc"):
        return stats.median(cfg.events["tsc"])
    ns = cfg.events.get("wall_ns")
    if ns and cfg.tsc_hz:
        return stats.median(ns) * cfg.tsc_hz / 1e9
    return None


def check_counters_miss(data: RunData, doc: Mapping) -> Fired | None:
    hit = []
    for c in data.configs:
        scope = c.header.get("scope", "thread")  # isob's default scope is thread
        if (c.counter != "perf" or c.unit != "cycles" or scope != "thread"
                or not _separate_process(data, c.mechanism)):
            continue
        wall = _wall_ticks(c)
        med = c.description.median
        if wall is None:
            hit.append(f"{c.label} (cannot compare: no wall-clock event recorded)")
        elif med is not None and med < MIN_CYCLES_PER_TICK * wall:
            hit.append(f"{c.label} (cycles {med:.0f} vs {wall:.0f} TSC ticks)")
    if not hit:
        return None
    return Fired(f"per-thread cycle counters of {len(hit)} result(s) whose compartment is "
                 f"another process miss that process's cycles, so the numbers are too low: "
                 f"{some(hit)}",
                 "measure these with `--scope cpu` (counts everything on the CPU) or with "
                 "the TSC counter (`--counter tsc`)", tuple(hit))


# ---- the numbers: caveats ----

def _entries(doc: Mapping) -> list[dict]:
    """The configurations whose numbers stand for their benchmark: kv's set
    and warm-up phases are stored beside its gets, but nobody reads them as
    the benchmark's result, so their caveats would only drown the others."""
    return [c for c in doc.get("configs") or [] if c.get("headline_phase", True)]


def check_batched_unreliable(data: RunData, doc: Mapping) -> Fired | None:
    changed = [c for c in _entries(doc) if c["headline"]["batched_unreliable"]]
    # Disagreements that did not change a headline: a long region (the
    # batched estimate was never a candidate) or a minority of repetitions.
    aside = [c for c in _entries(doc) if not c["headline"]["batched_unreliable"]
             and any(r["batched_agrees"] is False for r in c["repetitions"])]
    if not changed and not aside:
        return None

    def label(c: Mapping) -> str:
        rep = next(r for r in c["repetitions"] if r["batched_agrees"] is False)
        k = sum(1 for r in c["repetitions"] if r["batched_agrees"] is False)
        return (f"{c['label']} (batched {rep['batched']:,.1f} vs median - empty region "
                f"{rep['region']:,.1f} {c['unit']}, {k} of {len(c['repetitions'])} "
                "repetitions)")
    if changed:
        return Fired(f"{len(changed)} result(s) have a batched estimate that disagrees with the "
                     "median less the empty region beyond their spreads in most repetitions "
                     "(a bimodal body, or one that runs differently back to back); their "
                     f"headline is the median: {some([label(c) for c in changed])}"
                     + (f"; {len(aside)} more disagree without changing their headline"
                        if aside else ""),
                     "read the median of these; the batched estimate is stored but not used",
                     tuple(label(c) for c in changed + aside))
    return Fired(f"{len(aside)} result(s) have a batched estimate that disagrees with the "
                 "median less the empty region, but it did not change their headline (a long "
                 "region, whose headline is the median anyway, or a minority of repetitions): "
                 f"{some([label(c) for c in aside])}",
                 "nothing to do for the headline; a two-regime body shows here first",
                 tuple(label(c) for c in aside), severity=INFO)


def check_quantized(data: RunData, doc: Mapping) -> Fired | None:
    hit = [c for c in _entries(doc) if c["headline"]["quantized"]]
    if not hit:
        return None
    return Fired(f"{len(hit)} headline(s) are known only to a few counter steps (a median "
                 "less than 20 steps, or a batched estimate less than 20 x step / K; their "
                 "interval carries the step and never has zero width): "
                 f"{some([c['label'] for c in hit])}",
                 "read the mean and the batched estimate beside them; on bare metal or with "
                 "perf counters the step is 1", tuple(c["label"] for c in hit))


def check_no_significance(data: RunData, doc: Mapping) -> Fired | None:
    hit = [c for c in _entries(doc)
           if c["headline"]["value"] is not None
           and c["headline"]["reps"] < stats.MIN_REPS_FOR_INTERVAL]
    if not hit:
        return None
    opts = (doc.get("run") or {}).get("options") or {}
    # A benchmark may have asked for its own number (runner.BENCHMARK_REPEAT).
    own = opts.get("repeat_by_benchmark") or {}
    asked = max(own.get(c["benchmark"], opts.get("repeat") or 1) for c in hit)
    fix = ("repeat in fresh processes: `isobench run --repeat 5`" if asked < 2 else
           f"the run asked for {asked} repetitions: the others of these were skipped or failed "
           "(the notes under `isobench show` say why); run them again, or read these as one "
           "process's numbers")
    return Fired(f"{len(hit)} result(s) come from one process only, so no interval between "
                 f"processes (and no test) can be given: {some([c['label'] for c in hit])}",
                 fix, tuple(c["label"] for c in hit))


def check_micro_only(data: RunData, doc: Mapping) -> Fired | None:
    if not data.configs or any(c.kind == MACRO for c in data.configs):
        return None
    benches = sorted({c.benchmark for c in data.configs})
    return Fired(f"only microbenchmarks ({', '.join(benches)}): a switch cost alone does not "
                 "say what an application pays",
                 "add a macrobenchmark to the run: `isobench run switch kv ...`")


def _missing(data: RunData, fields: Sequence[str]) -> list[str]:
    env = data.env
    missing = [f for f in fields if env.get(f) in (None, {}, [], "")]
    reasons = env.get("reasons") or {}
    return [f"{f} ({reasons[f]})" if f in reasons else f for f in missing]


def check_missing_platform(data: RunData, doc: Mapping) -> Fired | None:
    fields = PLATFORM_FIELDS
    if data.configs and all(c.counter in CLIENT_COUNTERS for c in data.configs):
        # Only outside clients measured (kv-server alone): the harness's
        # counter was never used, so it is not missing.
        fields = tuple(f for f in fields if f != "counter")
    missing = _missing(data, fields)
    if not missing:
        return None
    return Fired(f"details of the machine are missing: {', '.join(missing)}",
                 "run on a system where /proc and /sys are readable, with the native driver "
                 "built by `make`", tuple(missing))


def check_missing_software(data: RunData, doc: Mapping) -> Fired | None:
    missing = _missing(data, SOFTWARE_FIELDS)
    if not missing:
        return None
    return Fired(f"versions of the software are missing: {', '.join(missing)}",
                 "run from a git checkout with the native driver built by `make` (so `isob "
                 "--version --json` answers)", tuple(missing))


def _two_contexts(data: RunData, mechanism: str) -> bool:
    """Whether a mechanism runs its compartment in another thread or process.
    pingpong ("-") is two processes by definition; a mechanism whose props were
    not recorded is assumed to be one, since unpinned is then the safe warning."""
    if mechanism == NO_MECHANISM:
        return True
    props = (data.env.get("mechanism_props") or {}).get(mechanism)
    return props is None or "two_contexts" in props


def check_unpinned(data: RunData, doc: Mapping) -> Fired | None:
    loose = [c for c in data.configs if c.placement == "unpinned"
             and _two_contexts(data, c.mechanism)]
    if not loose:
        return None
    return Fired(f"{len(loose)} result(s) of two-context mechanisms ran unpinned, so the "
                 f"scheduler chose same-cpu or cross-cpu at random: {some(subjects_of(loose))}",
                 "use `--placement same-cpu,cross-cpu` and report the two apart",
                 subjects_of(loose))


def frequency_problems(env: Mapping) -> Fired | None:
    gov, turbo = env.get("governor"), env.get("turbo")
    problems = []
    if gov is not None and gov != "performance":
        problems.append(f"CPU frequency governor is {gov!r}, not 'performance'")
    if turbo is True:
        problems.append("turbo boost is on")
    if not problems:
        return None
    return Fired("; ".join(problems), "run `sudo isobench system tune` before measuring and "
                                      "`sudo isobench system reset` after")


def smt_problem(env: Mapping) -> Fired | None:
    if env.get("smt") is not True:
        return None
    return Fired("SMT (hyper-threading) is active: a sibling thread shares the core's "
                 "pipeline and caches with the measured code",
                 "disable SMT (`echo off > /sys/devices/system/cpu/smt/control` as root) "
                 "or keep the siblings of the measured CPUs idle")


def vm_problem(env: Mapping) -> Fired | None:
    if env.get("hypervisor") is None:
        return None
    return Fired(f"measured in a virtual machine ({env['hypervisor']}): vCPUs are host "
                 "threads, wake-ups cross the hypervisor, and timers may be virtual",
                 "repeat on bare metal before publishing absolute numbers; compare "
                 "mechanisms only within this machine")


def pmu_missing(env: Mapping) -> Fired | None:
    if env.get("pmu"):
        return None
    return Fired("this machine exposes no hardware PMU (no /sys/bus/event_source/devices/cpu)",
                 "measure on bare metal or in a VM with a virtual PMU")


def check_no_pmu(data: RunData, doc: Mapping) -> Fired | None:
    own = [c for c in data.configs if c.counter and c.counter != "perf"
           and c.counter not in CLIENT_COUNTERS]
    if not own:
        return None
    counters = sorted({c.counter for c in own})
    units = sorted({c.unit or "?" for c in own})
    return Fired(f"results are in {', '.join(units)} (counter {', '.join(counters)}), not "
                 "core cycles: no hardware counters were used",
                 "run on a machine with a PMU (bare metal, or a VM with a virtual PMU) "
                 "and perf_event_paranoid <= 2")


def check_dropped(data: RunData, doc: Mapping) -> Fired | None:
    hit = [c for c in data.configs if c.dropped > 0]
    if not hit:
        return None
    labels = [f"{c.label} ({c.dropped} dropped)" for c in hit]
    why = ("perf readings whose counters were multiplexed (time_running < time_enabled), "
           "or that moved CPU or counter index" if any(c.counter == "perf" for c in hit)
           else "readings the harness found invalid")
    return Fired(f"{len(hit)} result(s) dropped samples ({why}) and measured them again: "
                 f"{some(labels)}",
                 "pin the run, keep the machine idle, count fewer perf events at once and "
                 "turn the NMI watchdog off (`isobench system tune`)", tuple(labels))


def check_high_cv(data: RunData, doc: Mapping) -> Fired | None:
    hit = []
    entries = {tuple(e["key"]): e for e in _entries(doc)}
    for c in data.configs:
        if doc.get("configs") and tuple(c.key) not in entries:
            continue  # a phase that does not stand for its benchmark
        # A spread no wider than one counter step (26 TSC ticks on some VMs)
        # is the counter's resolution, not variation: quantized short regions
        # would otherwise always fire.  The step is reported with every run.
        step = c.header.get("counter_step") or 0
        within = c.description.robust_cv
        h = entries[tuple(c.key)]["headline"] if tuple(c.key) in entries else None
        values = h["values"] if h else c.rep_medians
        between = stats.between_cv(values)
        span = (max(values) - min(values)) if values else 0
        if within is not None and within > MAX_CV and (c.description.mad or 0) > step:
            hit.append(f"{c.label} (robust CV {within:.1%})")
        elif between is not None and between > MAX_CV and span > (h["resolution"] if h else step):
            hit.append(f"{c.label} (CV between repetitions {between:.1%})")
    if not hit:
        return None
    return Fired(f"{len(hit)} result(s) vary by more than {MAX_CV:.0%}: {some(hit)}",
                 "pin (`--placement same-cpu,cross-cpu`), tune the machine "
                 "(`isobench system tune`), repeat (`--repeat 5`), and read the interval, "
                 "not the value alone", tuple(hit))


# Fewer repetitions than this give an interval, but one too wide or too
# fragile to call a difference (the README's --quick is 3): a full run is 5.
FEW_REPETITIONS = 5


def check_few_repetitions(data: RunData, doc: Mapping) -> Fired | None:
    hit = [c for c in _entries(doc) if c["headline"]["value"] is not None
           and stats.MIN_REPS_FOR_INTERVAL <= c["headline"]["reps"] < FEW_REPETITIONS]
    if not hit:
        return None
    counts = sorted({c["headline"]["reps"] for c in hit})
    return Fired(f"{len(hit)} result(s) rest on {'/'.join(map(str, counts))} repetitions, "
                 f"fewer than {FEW_REPETITIONS}: their intervals are wide and a second mode "
                 f"can hide in them: {some([c['label'] for c in hit])}",
                 f"repeat in fresh processes (`isobench run --repeat {FEW_REPETITIONS}`) before "
                 "citing or comparing these", tuple(c["label"] for c in hit))


def _number(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def _modes_text(c: Mapping) -> str:
    h = c["headline"]
    u = c["unit"] or ""
    groups = "; ".join(
        f"{m['count']} at {_number(m['value'])} {u}".rstrip()
        + (f" (rep {', '.join(map(str, m['repetitions']))})" if m.get("repetitions") else "")
        for m in h["modes"])
    return f"{c['label']}: {groups}"


def check_modes(data: RunData, doc: Mapping) -> Fired | None:
    split = [c for c in _entries(doc) if c["headline"].get("modes")]
    outside = [c for c in _entries(doc) if c["headline"].get("outside_spread")
               and not c["headline"].get("modes")]
    if not split and not outside:
        return None
    texts = [_modes_text(c) for c in split]
    for c in outside:
        o = c["headline"]["outside_spread"]
        texts.append(f"{c['label']}: headline {_number(o['value'])} outside its samples' "
                     f"p5..p95 {_number(o['p5'])}..{_number(o['p95'])}")
    return Fired(f"{len(texts)} result(s) measured separate groups (modes): their processes "
                 "disagree by more than their own spread, so no single value with an "
                 f"interval stands for them: {some(texts)}",
                 "find what differs between the groups (a server that stays awake, a skipped "
                 "wake-up, placement); repeat (`--repeat 10`) and pin; cite the groups apart",
                 tuple(texts))


def _intervals(doc: Mapping) -> Iterable[tuple[str, Mapping]]:
    for c in _entries(doc):
        if c["headline"].get("interval"):
            yield c["label"], c["headline"]["interval"]
        if c.get("ratio") and c["ratio"].get("interval"):
            yield f"{c['label']} (ratio to {c['ratio']['to']})", c["ratio"]["interval"]


def check_zero_width(data: RunData, doc: Mapping) -> Fired | None:
    hit = [label for label, iv in _intervals(doc) if iv["high"] <= iv["low"]]
    if not hit:
        return None
    return Fired(f"{len(hit)} interval(s) have zero width: every repetition read the same "
                 f"value and no counter step was recorded to widen it: {some(hit)}",
                 "read these as known to the counter's resolution at best; measure with a "
                 "counter that records its step", tuple(hit))


def _records(node, path: str = "") -> Iterable[tuple[str, Mapping]]:
    """Every dict in a summary document subtree, with a label for it."""
    if isinstance(node, Mapping):
        yield path, node
        for k, v in node.items():
            if isinstance(v, (Mapping, list)):
                yield from _records(v, f"{path}.{k}" if path else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _records(v, f"{path}[{i}]")


def _tree(doc: Mapping) -> list:
    return [doc.get("sections") or {}, list(_entries(doc))]


def check_thin_tail(data: RunData, doc: Mapping) -> Fired | None:
    """Any record carrying `"quantile": {"q": 0.999, "n": 114, "label": ...}`
    (a section that prints a quantile of n samples) is checked."""
    hit = []
    seen: set[int] = set()
    for path, rec in _records(_tree(doc)):
        # Either form: a record's "quantile", or a tail of its own (tails.py:
        # q, n and whether the samples carry it).
        q = rec.get("quantile") if isinstance(rec.get("quantile"), Mapping) else rec
        if not isinstance(q.get("q"), (int, float)) or isinstance(q.get("q"), bool) \
                or not isinstance(q.get("n"), int) or not 0 < q["q"] < 1 or id(q) in seen:
            continue
        seen.add(id(q))
        if stats.thin_quantile(q["q"], q["n"]):
            name = q.get("label") or rec.get("label") or path
            hit.append(f"{name} (q{q['q'] * 100:g} of {q['n']} samples)")
    if not hit:
        return None
    return Fired(f"{len(hit)} quantile(s) rest on fewer than 10 samples beyond them "
                 f"(n (1 - q) < 10), so they are little more than the largest sample: "
                 f"{some(hit)}",
                 "measure more samples (longer runs), or read them as the maximum",
                 tuple(hit))


def check_bad_fit(data: RunData, doc: Mapping) -> Fired | None:
    """Any record carrying `"fit": {"bad_fit": true, "why": ...}` (or a
    `linearity_p` below the level) in a configuration or a section."""
    hit = []
    seen: set[int] = set()
    for path, rec in _records(_tree(doc)):
        # Either form: a record's "fit", or a fit of its own (lwc-create's:
        # bad_fit decided at the fit's own level, with linearity_p and why).
        f = rec.get("fit") if isinstance(rec.get("fit"), Mapping) else rec
        if ("bad_fit" not in f and "linearity_p" not in f) or id(f) in seen:
            continue
        seen.add(id(f))
        p = f.get("linearity_p")
        bad = f.get("bad_fit") is True or ("bad_fit" not in f and isinstance(p, (int, float))
                                           and p < stats.ALPHA)
        if bad:
            name = f.get("label") or rec.get("label") or path
            why = f.get("why") or (f"linearity test p = {p:.3g}" if p is not None else "")
            hit.append(f"{name}: {why}" if why else name)
    if not hit:
        return None
    return Fired(f"{len(hit)} fitted line(s) do not describe their points (the linearity test "
                 f"fails): a slope of them is an average over regimes: {some(hit)}",
                 "read the per-segment slopes and the measured points, not the line",
                 tuple(hit))


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


def check_load(data: RunData, doc: Mapping) -> Fired | None:
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
    return Fired(f"{len(hit)} job(s) shared their pinned CPUs with other processes while "
                   f"measuring: {some(hit)}",
                   "measure on an idle machine (stop other jobs, `isobench system tune`), or "
                   "isolate the measured CPUs (isolcpus=), then run again; compare the "
                   "affected results with care", tuple(hit))


# ---- averages of other kinds set beside ours ----

def check_percentage_geomean(data: RunData, doc: Mapping) -> Fired | None:
    """The oslat section sets SEIMI's averages, geometric means of percentage
    overheads, beside our geometric means of ratios (analysis/families/oslat.py)."""
    section = (doc.get("sections") or {}).get("oslat") or {}
    hit, undefined = [], []
    for t in section.get("tables") or ():
        pub = t.get("published_average") or {}
        printed = pub.get("printed")
        if printed:
            ratio = pub.get("geomean_ratio") or {}
            hit.append(f"Table {t['table']}: SEIMI's printed {printed['value_pct']:g}% (as a "
                       f"geometric mean of ratios the same figures give "
                       f"{ratio.get('overhead_pct', float('nan')):.2f}%)")
        for col, a in (t.get("averages") or {}).items():
            m = (a or {}).get("seimi_method")
            if m is None:
                continue
            if m["value_pct"] is None:
                undefined.append(f"Table {t['table']} {col}")
            elif not printed:
                hit.append(f"Table {t['table']} {col}: {m['value_pct']:.1f}% this way")
    if not hit and not undefined:
        return None
    what = ("averages computed as geometric means of percentage overheads (SEIMI's method) "
            "are shown beside isobench's geometric means of ratios: they are not the same "
            "statistic, come out lower for the same numbers, and are undefined where an "
            "overhead is zero or negative")
    if hit:
        what += f": {some(hit)}"
    if undefined:
        what += f"; undefined for {some(undefined)}"
    return Fired(what, "compare ratios with ratios (the 'geomean of ratios' rows); quote "
                       "SEIMI's averages only under their own name", tuple(hit + undefined))


# ---- the store itself ----

def store_damaged(data: RunData) -> Fired | None:
    """Parts of the store that cannot be read (RunData.damage: what loading
    the run left out, or with `isobench check` every damaged row and
    SQLite's integrity check): they are missing from every output."""
    damage = [d.removeprefix(f"{data.db}: ") for d in getattr(data, "damage", None) or ()]
    if not damage:
        return None
    return Fired(f"{len(damage)} part(s) of the store cannot be read and are left out of every "
                 f"output: {some(damage)}",
                 "copy what can be read into a new store (`isobench import DAMAGED --db NEW` "
                 "imports every intact run and leaves out, naming each, what is damaged), then "
                 "measure the missing results again", tuple(damage))


# ---- the table: the order findings are printed in ----

CHECKS: tuple[Check, ...] = (
    Check("run-interrupted", ERROR, check_interrupted),
    Check("no-results", ERROR, check_no_results),
    Check("all-skipped", ERROR, check_all_skipped),
    Check("failed-results", ERROR, check_failed),
    Check("no-baseline", ERROR, check_no_baseline, SOK["D1"]),
    Check("counters-miss-other-side", ERROR, check_counters_miss),
    Check("run-in-progress", WARNING, check_in_progress),
    Check("no-significance", WARNING, check_no_significance, SOK["B4"]),
    Check("few-repetitions", WARNING, check_few_repetitions, SOK["B4"]),
    Check("modes", WARNING, check_modes),
    Check("batched-unreliable", WARNING, check_batched_unreliable),
    Check("quantized", WARNING, check_quantized),
    Check("zero-width", WARNING, check_zero_width),
    Check("thin-tail", WARNING, check_thin_tail),
    Check("bad-fit", WARNING, check_bad_fit),
    Check("high-cv", WARNING, check_high_cv),
    Check("dropped-samples", WARNING, check_dropped),
    Check("load-during-run", WARNING, check_load),
    Check("unpinned", WARNING, check_unpinned),
    Check("virtual-machine", WARNING, lambda d, doc: vm_problem(d.env)),
    Check("no-pmu", WARNING, check_no_pmu),
    Check("frequency-scaling", WARNING, lambda d, doc: frequency_problems(d.env)),
    Check("smt-active", WARNING, lambda d, doc: smt_problem(d.env)),
    Check("missing-platform", WARNING, check_missing_platform, SOK["F1"]),
    Check("missing-software", WARNING, check_missing_software, SOK["F2"]),
    Check("micro-only", INFO, check_micro_only, SOK["B1"]),
    Check("percentage-geomean", INFO, check_percentage_geomean, SOK["B5"]),
    Check("store-damaged", ERROR, lambda d, doc: store_damaged(d)),
)
CHECK_IDS = tuple(c.id for c in CHECKS)

# The checks that look at the machine alone (`isobench system check`).
MACHINE_CHECKS: tuple[tuple[str, str, Callable[[Mapping], Fired | None]], ...] = (
    ("frequency-scaling", WARNING, frequency_problems),
    ("smt-active", WARNING, smt_problem),
    ("virtual-machine", WARNING, vm_problem),
    ("pmu-missing", WARNING, pmu_missing),
)


def _finding(check_id: str, severity: str, sok: str | None, fired: Fired) -> Finding:
    return Finding(check_id, fired.severity or severity, fired.what, fired.next, sok,
                   fired.subjects)


def run_checks(data: RunData, doc: Mapping) -> list[Finding]:
    """Every finding for a run, in CHECKS order.  doc is the run's summary
    document (summary.build) as far as it is built: its configurations."""
    out = []
    for c in CHECKS:
        fired = c.run(data, doc)
        if fired is not None:
            out.append(_finding(c.id, c.severity, c.sok, fired))
    return out


def machine_findings(env: Mapping) -> list[Finding]:
    out = []
    for check_id, severity, check in MACHINE_CHECKS:
        fired = check(env)
        if fired is not None:
            out.append(_finding(check_id, severity, None, fired))
    return out


def counts(findings: Iterable[Mapping | Finding]) -> dict[str, int]:
    """How many findings of each severity (findings as records or as dicts)."""
    out = {s: 0 for s in SEVERITIES}
    for f in findings:
        out[f["severity"] if isinstance(f, Mapping) else f.severity] += 1
    return out


def exit_status(findings: Iterable[Mapping | Finding], strict: bool = False) -> int:
    """0 without errors, EXIT_FINDINGS with any (with strict, warnings count too)."""
    n = counts(findings)
    return EXIT_FINDINGS if n[ERROR] or (strict and n[WARNING]) else 0


def render(findings: Sequence[Mapping]) -> str:
    """Plain text: one block per finding (findings as dicts, as in the summary)."""
    if not findings:
        return "no findings: none of the soundness checks fired"
    n = counts(findings)
    head = ", ".join(f"{n[s]} {s}{'s' if n[s] != 1 else ''}" for s in SEVERITIES if n[s])
    out = [f"{len(findings)} finding{'s' if len(findings) != 1 else ''} ({head}):"]
    for f in findings:
        sok = f"  [SoK {f['sok']}]" if f.get("sok") else ""
        out.append(f"  {f['severity'].upper()} {f['id']}{sok}")
        out.append(f"    what: {f['what']}")
        out.append(f"    next: {f['next']}  (see {f['doc']})")
    return "\n".join(out)


def one_line(findings: Sequence[Mapping], run_id: int) -> str:
    """The soundness line `run` and `show` print under the table."""
    if not findings:
        return "soundness: no findings"
    n = counts(findings)
    parts = [f"{n[s]} {s}{'s' if n[s] != 1 else ''}" for s in SEVERITIES if n[s]]
    ids = ", ".join(f["id"] for f in findings)
    return (f"soundness: {', '.join(parts)} ({ids}): `isobench check {run_id}` says what "
            "to do")
