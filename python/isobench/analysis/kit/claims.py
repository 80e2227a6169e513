"""A source's claim beside what this machine measures, with a verdict that
never goes without its interval.

A claim is a sentence of a paper about a ratio ("lwc-mon is about twice as
fast as a monitor in a separate process"), its citation, and the range of
ratios that reading of the sentence admits (CLAIMS: "about 2x" is read as
1.5 to 2.5, and the reading is printed with the verdict, so a reader can
disagree with it).  What this machine measured is a ratio record as
ratios.ratio_of makes it ({value, interval}: the Welch t interval of the
ratio of geometric means over repetitions, stats.ratio_interval).

    reproduces                          the 95% interval lies inside the range
    does not reproduce                  the interval lies wholly outside it
    inconclusive (interval overlaps)    the interval straddles an end of it
    inconclusive (no interval)          fewer than stats.MIN_REPS_FOR_INTERVAL
                                        repetitions, or repetitions in modes
    not judged (another configuration)  the row's configuration is not the one
                                        the claim is about (Claim.config): the
                                        ratio is shown, the difference named
    not testable here                   the claim rests on a property of the
                                        source's system (Claim.assumes) that
                                        what stands for it here lacks
                                        (Standin.lacks): the ratio is shown,
                                        not judged

The last is for claims an emulation cannot have: lwC's speed claims rest
on a switch between contexts that is not a process switch, and the
emulated lwC context (docs/lwc.md) is a process.  "a switch costs under
half a process switch" cannot hold for a context that is a process, so
measuring it here says nothing about lwC; "does not reproduce" would
refute the paper with a property of the emulation.

The rule asks for the whole interval on one side, so "does not reproduce"
is said wrongly of a ratio whose truth lies in the range only when the
interval misses the truth on the far side: at most (1 - level) / 2 = 2.5%
at an end of the range, less inside it.  tests/python/claims_sim.py
measures that rate through stats.ratio_interval on repetitions drawn with
their truth in the range (tests/python/test_claims.py asserts it).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Mapping

REPRODUCES = "reproduces"
DOES_NOT = "does not reproduce"
OVERLAPS = "inconclusive (interval overlaps)"
NO_INTERVAL = "inconclusive (no interval)"
NOT_TESTABLE = "not testable here"
OTHER_CONFIG = "not judged (another configuration)"
VERDICTS = (REPRODUCES, DOES_NOT, OVERLAPS, NO_INTERVAL, NOT_TESTABLE, OTHER_CONFIG)

# A property of lwC that its speed claims rest on (Claim.assumes).
KERNEL_SWITCH = ("lwC's in-kernel context switch, which stays within one process and so is "
                 "not a process switch")


@dataclass(frozen=True)
class Claim:
    """What a source says, as a range of a ratio this machine measures.

    ratio: which ratio, in words ("procsep time over lwc-mon time");
    low, high: the range the claim admits (math.inf for "at least");
    reading: how the sentence was turned into that range;
    assumes: the property of the source's system the claim rests on, where
    a stand-in may lack it ("" for none);
    config: the configuration the source measured, as the params a local
    row must have ((key, value), ...; empty: any), and config_text: it in
    words."""

    id: str
    text: str
    citation: str
    ratio: str
    low: float
    high: float
    reading: str
    assumes: str = ""
    config: tuple[tuple[str, str], ...] = ()
    config_text: str = ""

    def range_text(self) -> str:
        if math.isinf(self.high):
            return f">= {self.low:.3g}"
        return f"{self.low:.3g}..{self.high:.3g}"

    def as_dict(self) -> dict:
        d = asdict(self)
        d["high"] = None if math.isinf(self.high) else self.high
        d["range"] = self.range_text()
        d["config"] = dict(self.config)
        return d


# The claims the sections set beside their measurements.
CLAIMS: dict[str, Claim] = {c.id: c for c in (
    Claim("lwc-refmon-2x",
          "a reference monitor in an lwC (lwc-mon) outperforms one in a separate process "
          "by a factor of two",
          "Litton et al., Light-Weight Contexts (OSDI 2016), slides: Experimental Results, "
          "Reference Monitor, Fig. 1",
          "separate-process monitor (broker) time over lwc-mon time, per call kind",
          1.5, 2.5, '"a factor of two" read as 2 +- 25%', KERNEL_SWITCH),
    Claim("lwc-rollback-comparable",
          "with snapshot and rollback, lwC achieves performance comparable to the best "
          "configuration without isolation for session lengths of 256 and larger",
          "Litton et al., Light-Weight Contexts (OSDI 2016), slides: Experimental Results, "
          "Apache, Fig. 2",
          "rollback's speed over prefork's, session length >= 256 (Fig. 2's lines are "
          "prefork, fork and lwc: Apache prefork, a process forked per session, and lwC's "
          "snapshot and rollback; its configuration without isolation is prefork, the same "
          "workers without the rollback): prefork's server CPU per "
          "request over rollback's (what each would serve with its CPU saturated), or "
          "throughput where no CPU time was read",
          0.9, 1.0 / 0.9, '"comparable" read as within 10% either way'),
    Claim("lwc-event-comparable",
          "introducing lwCs in nginx's event loop (a context per session, switched to on "
          "each of its events) has no significant impact on its throughput; lwC-augmented "
          "nginx performs comparably to native nginx",
          "Litton et al., Light-Weight Contexts (OSDI 2016), slides: Experimental Results, "
          "Nginx, session isolation figure (HTTP)",
          "per-connection's speed over shared's (one event loop with a context per "
          "connection over the plain event loop), at the session lengths the figure shows, "
          "64 to 256: shared's server CPU per request over per-connection's, or "
          "throughput where no CPU time was read",
          0.9, 1.0 / 0.9, '"comparably", "no significant impact" read as within 10% '
                          'either way', KERNEL_SWITCH),
    Claim("lwc-switch-half",
          "an lwC switch takes less than half the time of a process or kernel thread switch",
          "Litton et al., Light-Weight Contexts (OSDI 2016), slides: Experimental Results, "
          "lwC Switch",
          "process (or kernel thread) one-way switch time over lwC's",
          2.0, math.inf, '"less than half the time" read as a ratio of at least 2',
          KERNEL_SWITCH),
    Claim("lwc-refmon-2x-serve",
          "a reference monitor in an lwC (lwc-mon) outperforms one in a separate process "
          "by a factor of two",
          "Litton et al., Light-Weight Contexts (OSDI 2016), slides: Experimental Results, "
          "Reference Monitor, Fig. 1",
          "lwc-mon's throughput over procsep's (a monitor in a separate process), a server "
          "checking every request's system calls, per document size and session length",
          1.5, 2.5, '"a factor of two" read as 2 +- 25%', KERNEL_SWITCH,
          (("server", "prefork"),),
          "lwC's Apache prefork: --session prefork, each worker with its own monitor"),
    Claim("lwc-tls-free",
          "with OpenSSL's private-key code in an lwC, nginx's TLS handshakes cost essentially "
          "what they cost with the key in the server (10,000 handshakes; lwC's seconds are "
          "reference rows lwc-tls-native and lwc-tls-key-in-lwc)",
          "Litton et al., Light-Weight Contexts (OSDI 2016), slides: Experimental Results, "
          "OpenSSL key isolation",
          "seconds for the same handshakes with the key in an lwC over with the key in the "
          "server process, per document size",
          1.0 / 1.05, 1.05, '"essentially free" read as within 5% either way', "",
          (("server", "shared"), ("tls_key_type", "rsa2048")),
          "lwC's nginx: one event loop (--session shared) and an RSA 2048 key (the slides "
          "name no key type; RSA, then the common one, is read as theirs, and its signing "
          "cost sets what a handshake costs)"),
)}


def verdict(claim: Claim, measured: Mapping | None) -> dict:
    """The claim, this machine's ratio with its interval, and the verdict
    (module doc).  measured: a ratio record ({value, interval: {low, high}}
    or interval None, note), or None where nothing was measured."""
    out = {"claim": claim.as_dict(), "value": None, "interval": None, "verdict": NO_INTERVAL,
           "why": "not measured in this run"}
    if not measured or measured.get("value") is None:
        return out
    iv = _interval(measured.get("interval"))
    out.update(value=measured["value"], interval=iv)
    if not iv:
        out.update(verdict=NO_INTERVAL, why=measured.get("note") or "no interval")
        return out
    lo, hi = iv["low"], iv["high"]
    if claim.low <= lo and hi <= claim.high:
        out.update(verdict=REPRODUCES, why=f"95% interval inside {claim.range_text()}")
    elif hi < claim.low or lo > claim.high:
        out.update(verdict=DOES_NOT, why=f"95% interval outside {claim.range_text()}")
    else:
        out.update(verdict=OVERLAPS, why=f"95% interval straddles an end of "
                                         f"{claim.range_text()}")
    return out


def _interval(iv) -> dict | None:
    """An interval as the summary's ratio records hold it ({low, high}) or as
    the sections' quantities do ([low, high]), as {low, high}."""
    if not iv:
        return None
    if isinstance(iv, Mapping):
        return {"low": iv["low"], "high": iv["high"]}
    return {"low": iv[0], "high": iv[1]}


@dataclass(frozen=True)
class Standin:
    """What stands for a source's system on this machine: the sentence said
    beside every verdict on it, and the properties of the original it lacks
    (Claim.assumes), each with how it lacks it."""

    text: str
    lacks: Mapping[str, str]


def differs(claim: Claim, config: Mapping | None) -> list[str]:
    """How a local row's params differ from the claim's configuration
    ("server=shared, the claim's prefork", ...): empty where they match or
    the claim names none."""
    config = config or {}
    return [f"{k}={config.get(k)}, the claim's {v}" for k, v in claim.config
            if str(config.get(k)) != v]


def judge(claim_id: str, measured: Mapping | None, what: str = "",
          here: Standin | None = None, config: Mapping | None = None) -> dict:
    """verdict() of CLAIMS[claim_id], with `what` naming the local row and
    `here` what stands for the source's system on this machine (an
    emulation is not the original: the verdict is about what ran here).
    config: the local row's params; a row whose configuration is not the
    claim's (Claim.config) is not judged, and says how it differs.  A
    claim that rests on a property `here` lacks is not testable here: its
    ratio is shown, and the verdict names the property."""
    claim = CLAIMS[claim_id]
    out = {**verdict(claim, measured), "what": what, "here": here.text if here else ""}
    other = differs(claim, config)
    if other and out["value"] is not None:
        out.update(verdict=OTHER_CONFIG,
                   why=f"the claim is about {claim.config_text}; this row has "
                       + "; ".join(other))
        return out
    lacking = here.lacks.get(claim.assumes) if here and claim.assumes else None
    if lacking and out["value"] is not None:
        out.update(verdict=NOT_TESTABLE,
                   why=f"the claim rests on {claim.assumes}; {lacking}, so the claim cannot "
                       "hold here whatever lwC does: the ratio is shown, not judged")
    return out


# What stands for lwC here, said beside every verdict on an lwC claim.
LWC_HERE = Standin(
    "Here, lwC is isobench's emulation on stock Linux (a context is a forked process, a switch "
    "a futex handoff, docs/lwc.md), not lwC's in-kernel context: the verdict is about the "
    "emulation",
    {KERNEL_SWITCH: "the emulated context is a process of its own, so its switch is a process "
                    "switch"})

# What stands for lwC's snapshot and rollback here, said beside its verdict.
ROLLBACK_HERE = Standin(
    "Here, a rollback is isobench's on stock Linux (a clone holds the worker's memory "
    "copy-on-write; userfaultfd write-protect or soft-dirty bits find the pages written, which "
    "are copied back: docs/serve.md), not lwC's in-kernel context: the verdict is about it",
    {})
