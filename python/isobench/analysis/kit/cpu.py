"""Server CPU per request over repetitions (docs/serve.md, "CPU per
request"): the headline of the server experiments (kv-server, lwc-serve,
lwc-conns, lwc-curve).

One value per repetition (the server's CPU seconds over the run divided by
the requests it answered, measure/cputime.py and isob loadgen); over the
repetitions, their geometric mean with its 95% t interval on the logs
(stats.geomean_interval, as every throughput of the project), and the ratio
to the reference server's (memcached -t 1 under the same load) with its
interval (stats.ratio_interval, Welch on the logs).  Below two repetitions
a side there is no interval, and the record says so rather than inventing
one.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from ...core import stats

# The CPU clock's step as /proc and getrusage of children report it: Linux
# counts process CPU time in USER_HZ ticks of 10 ms.
TICK_S = 0.01


def _positive(values: Iterable) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and v > 0]


def resolution(requests: Iterable, tick_s: float = TICK_S,
               ticked: Iterable[bool] | None = None) -> float:
    """How far one step of the CPU clock moves a value (us per request) of
    the repetition with the fewest requests: /proc counts reaped children's
    CPU time in clock ticks.  ticked: per repetition, whether part of its
    time was counted in ticks (counted_in_ticks); a repetition whose time
    the scheduler counted to the ns moves by no step.  None: every one."""
    reqs = list(requests)
    marks = [True] * len(reqs) if ticked is None else list(ticked)
    ns = _positive(r for r, t in zip(reqs, marks) if t)
    return tick_s * 1e6 / min(ns) if ns else 0.0


def counted_in_ticks(outputs: Mapping, ends_processes: bool = False) -> bool:
    """Whether part of a repetition's server CPU time was counted in 10 ms
    clock ticks.  kv-server records that part (server_cpu_tick_s: reaped
    children's, and a process's own where its ticks exceeded the scheduler's
    count, measure/cputime.py); isob loadgen its clock ("ticks" where a
    process fell back to them), and there a server that ends processes
    during the run (ends_processes, or server_processes_ended) has its
    reaped children's time in ticks.  A record that says neither: True."""
    tick_s = outputs.get("server_cpu_tick_s")
    if isinstance(tick_s, (int, float)):
        return tick_s > 0
    clock = outputs.get("server_cpu_clock")
    if clock is None:
        return True
    return clock != "schedstat" or ends_processes or bool(outputs.get("server_processes_ended"))


def per_request(values: Iterable, step: float = 0.0) -> dict | None:
    """{value, low, high, reps, values} of per-repetition CPU per request
    (us), the interval widened by step (resolution()); low and high None
    below two repetitions; None without any."""
    xs = _positive(values)
    if not xs:
        return None
    iv = stats.geomean_interval(xs, step) if len(xs) >= 2 else None
    return {"value": stats.geomean(xs), "low": iv.low if iv else None,
            "high": iv.high if iv else None, "reps": len(xs), "values": xs, "step": step}


def ratio(values: Iterable, reference: Iterable, step: float = 0.0,
          reference_step: float = 0.0) -> dict | None:
    """{value, low, high} of values' geometric mean over reference's, with
    its 95% interval where both sides have two repetitions, each side
    widened by its clock step (resolution()); None where a side has none."""
    xs, rs = _positive(values), _positive(reference)
    if not xs or not rs:
        return None
    iv = (stats.ratio_interval(xs, rs, step, reference_step)
          if len(xs) >= 2 and len(rs) >= 2 else None)
    return {"value": stats.geomean(xs) / stats.geomean(rs),
            "low": iv.low if iv else None, "high": iv.high if iv else None}


def text(cell: dict | None, digits: int = 2) -> str:
    """`v [lo..hi]`, `v (1 rep, no interval)`, or '-'."""
    if not cell or cell.get("value") is None:
        return "-"
    v = f"{cell['value']:.{digits}f}"
    if cell.get("low") is None:
        return v + (" (no interval)" if cell.get("reps", 2) < 2 else "")
    return f"{v} [{cell['low']:.{digits}f}..{cell['high']:.{digits}f}]"


def higher_side(client: Sequence | None, server: Sequence | None) -> str | None:
    """'client' where the generator's CPU per request (geometric mean) is
    above the server's, 'server' where not; None without both."""
    c, s = _positive(client or ()), _positive(server or ())
    if not c or not s:
        return None
    return "client" if stats.geomean(c) > stats.geomean(s) else "server"
