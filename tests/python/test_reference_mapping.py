"""A published figure stands beside one local configuration or none, in the
source's digits, and two figures beside one configuration can be told
apart (data/reference.csv, analysis/kit/reference.py)."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import re
from dataclasses import dataclass, field

import pytest

from isobench.analysis.kit import reference
from isobench.analysis.families.oslat import SINGLE_VARIANT
from isobench.render import reference as render_reference

from fixture_runs import load_doc
from os_fixtures import oslat_run


@dataclass
class Cfg:
    benchmark: str
    mechanism: str
    params: dict = field(default_factory=dict)


# The parameters that tell one benchmark's configurations apart, each with
# values a run produces (the driver's lists: switch.c, lwc_switch.c,
# lwc_create.c, oslat, pingpong.c).  A row that leaves one of them out
# matches several configurations of a run.
AXES = {
    "switch": {"variant": ["entry", "inline", "direct-call", "indirect-call"],
               "payload": [0, 64, 4096], "placement": ["same-cpu", "unpinned"]},
    "lwc-switch": {"variant": ["lwc", "process", "thread", "ucontext", "uthread"],
                   "per": ["one-way", "round-trip"],
                   "placement": ["same-cpu", "cross-cpu"]},
    "lwc-create": {"variant": ["lwc", "fork", "soft-dirty", "uffd-wp"],
                   "dirty_pages": [0, 1, 64], "heap_mib": [1, 64, 1024]},
    "oslat": {"confine": ["none", "seccomp-allow", "seccomp-notify", "ptrace", "landlock",
                          "userns"],
              "confine_variant": ["-", "1", "300-args"],
              "placement": ["same-cpu", "cross-cpu"]},
    "pingpong": {"primitive": ["futex", "pipe", "socket"], "placement": ["same-cpu", "cross-cpu"],
                 "payload": [0, 64], "protect": ["none", "mprotect"]},
    # lwc-serve --tls (measure/lwcmonitor.py): per document and key, a point
    # of `handshakes` handshakes (1,000 with --quick) and HTTPS points of
    # session length L (no `handshakes`); None: the point has no such param.
    "lwc-serve": {"proto": ["https"], "server": ["shared"], "tls_key": ["process", "lwc"],
                  "doc_bytes": [45, 900], "handshakes": [None, 1000, 10000],
                  "session": [None, 1, 16, 256]},
}


def _grid(ref: reference.Reference) -> list[Cfg]:
    """Configurations of ref's benchmark: ref's own parameter values, and on
    every axis ref does not name, each of the axis's values."""
    axes = AXES[ref.local_benchmark]
    free = {k: v for k, v in axes.items() if k not in ref.local_params}
    out = []
    for combo in itertools.product(*free.values()):
        params = {**ref.local_params, **dict(zip(free, combo))}
        if ref.local_benchmark == "oslat" and params["confine"] in SINGLE_VARIANT \
                and params["confine_variant"] != "-":
            continue  # a confinement with one variant has no other
        if ref.local_benchmark == "lwc-serve":
            if (params["handshakes"] is None) == (params["session"] is None):
                continue  # a point is a handshake count or a session length
            params = {k: v for k, v in params.items() if v is not None}
        out.append(Cfg(ref.local_benchmark, ref.local_mechanism, params))
    return out


def test_every_mapped_benchmark_has_its_axes_here():
    mapped = {r.local_benchmark for r in reference.load() if r.local_benchmark}
    assert mapped <= AXES.keys(), mapped - AXES.keys()


@pytest.mark.parametrize("ref", [r for r in reference.load() if r.local_benchmark],
                         ids=lambda r: r.id)
def test_a_row_maps_onto_one_local_configuration(ref):
    hits = reference.matches(ref, _grid(ref))
    assert len(hits) == 1, (ref.id, [h.params for h in hits])


def test_the_rule_catches_a_row_that_names_too_little():
    # A SEIMI row without confine= (as the file once had) matches every
    # confinement of an oslat run: the guard above would fail on it.
    refs = {r.id: r for r in reference.load()}
    native = refs["seimi-ipc-pipe-native"]
    loose = dataclasses.replace(native, local_params={
        k: v for k, v in native.local_params.items() if k != "confine"})
    assert len(reference.matches(loose, _grid(loose))) > 1


def test_on_a_real_oslat_run_each_figure_stands_beside_one_row_at_most(tmp_path):
    data = load_doc(tmp_path, oslat_run({("none", "-"): 1.0, ("seccomp-allow", "1"): 1.1,
                                         ("seccomp-allow", "300-args"): 1.2,
                                         ("ptrace", "-"): 3.0, ("landlock", "-"): 1.05}))
    for ref in reference.load():
        assert len(reference.matches(ref, data.configs)) <= 1, ref.id
    hit = [r.id for r in reference.load() if reference.matches(r, data.configs)]
    assert "seimi-ipc-pipe-native" in hit and "seimi-ipc-pipe-seimi" not in hit


# What the published-figures table prints of a row, beside the local value.
def _label(r: reference.Reference) -> tuple:
    return (r.source, r.where, r.unit, r.per, r.local_quantity)


def test_figures_beside_one_configuration_can_be_told_apart():
    by_local: dict[tuple, list] = {}
    for r in reference.load():
        if r.local_benchmark:
            key = (r.local_benchmark, r.local_mechanism, tuple(sorted(r.local_params.items())))
            by_local.setdefault(key, []).append(r)
    for key, group in by_local.items():
        labels = [_label(r) for r in group]
        assert len(set(labels)) == len(labels), (key, [r.id for r in group])


def test_a_figure_that_repeats_another_has_no_local_row_of_its_own():
    # Table 5.3 repeats Table 5.1 (iii) and Table 5.2b, rounded: one local
    # gate must not stand beside both "42" and "42.79".
    refs = {r.id: r for r in reference.load()}
    assert refs["konrad-cmp-erim"].local_benchmark is None
    assert refs["konrad-cmp-lwc"].local_benchmark is None
    assert refs["konrad-erim-tsc-gate-inlined"].text() == "42.79"
    assert refs["konrad-erim-tsc-gate-inlined"].local_mechanism == "mpk"
    gate = {r.id: (r.local_mechanism, r.local_params.get("variant")) for r in refs.values()
            if r.id.startswith(("erim-gate-", "konrad-erim-gate-", "konrad-erim-tsc-gate-"))}
    assert gate["erim-gate-direct"] == ("mpk", "direct-call")
    assert gate["erim-gate-indirect"] == ("mpk", "indirect-call")
    # ERIM's WRPKRU INLINED: the gate with the inlined body (mpk's `inline`
    # kind), not the gate around the trusted entry (`entry`).
    assert gate["konrad-erim-gate-inlined"] == ("mpk", "inline")
    assert gate["erim-gate-inlined"] == ("mpk", "inline")


def test_erim_figures_are_tsc_ticks_and_say_so():
    for r in reference.load():
        if re.fullmatch(r"erim-(gate-)?(inlined|direct|indirect)", r.id):
            assert r.unit == "tsc_ticks" and "reported as cycles" in r.note, r.id
            assert r.per in ("per call", "round trip"), r.id


def test_every_switch_figure_says_what_one_value_is_of():
    for r in reference.load():
        if r.local_benchmark in ("switch", "lwc-switch", "lwc-create") or "-cmp-" in r.id:
            assert r.per, r.id


def test_every_cycle_or_tick_count_says_what_one_value_is_of():
    # A count of cycles or ticks is of one switch, a round trip, a call...:
    # without `per`, 99 ticks of a gated call reads as 99 of one switch.
    for r in reference.load():
        if r.unit in ("cycles", "tsc_ticks"):
            assert r.per, r.id


def _own_note(r: reference.Reference) -> str:
    """The note's clauses about the figure itself, not about this machine or
    the local row beside it ("this machine counts TSC ticks")."""
    return "; ".join(c for c in r.note.split(";")
                     if "this machine" not in c and "the local row" not in c)


def test_a_figure_whose_note_says_tsc_is_in_tsc_ticks():
    # ERIM's benchmark reads the TSC (Konrad 2023, section 3.1.2) and prints
    # the ticks as cycles: such a figure's unit is tsc_ticks, its note says
    # how the source labelled it.
    for r in reference.load():
        if "TSC" in _own_note(r):
            assert r.unit == "tsc_ticks", r.id
        if r.unit == "tsc_ticks" and "cycles" in (r.metric + r.note):
            assert re.search(r"reported as cycles|prints them as cycles|printed as", r.note), r.id


# The sources whose text the rows were checked against, and how a row
# reaches them: a figure of a source the project does not hold is cited
# through the held text that quotes it (`where`: "as quoted in ...").
HELD = {
    "Konrad 2023 (EPFL report)": None,
    "Light-Weight Contexts (OSDI 2016)": None,  # the paper's slides; or as Konrad quotes it
    "SEIMI (IEEE S&P 2020)": None,  # the evaluation's excerpt
    "Morello c18n evaluation (2024)": None,
    "Lauterbach 2023 (TU Dresden thesis defence)": None,
    "ERIM (USENIX Security 2019)": "as quoted in J. Konrad 2023",
}


def test_every_row_cites_a_source_the_project_holds():
    for r in reference.load():
        assert r.source in HELD, (r.id, r.source)
        if HELD[r.source]:
            assert r.where.startswith(HELD[r.source]), (r.id, r.where)


# The gate each local switch configuration runs (docs/mechanisms.md, "mpk,
# mpk-bridge"): direct's variants call with no gate; every mpk variant,
# `entry` and the call kinds alike, switches to the compartment's own
# key-tagged stack, a protected stack.
LOCAL_GATE = {("switch", "direct"): ("none", None), ("switch", "mpk"): ("mpk", "protected")}


def _gate_kind(r: reference.Reference) -> tuple:
    """The gate a row's subject names, and its stack where it says."""
    s = r.subject.lower()
    gate = "none" if ("no gate" in s or "function call" in s) else \
        "mpk" if "mpk" in s else "other"
    stack = "shared" if "shared stack" in s else "protected" if "protected stack" in s else None
    return gate, stack


def test_a_row_maps_onto_a_local_variant_of_its_gate_kind():
    mapped = [r for r in reference.load() if r.local_benchmark == "switch"]
    assert mapped
    for r in mapped:
        local_gate, local_stack = LOCAL_GATE[(r.local_benchmark, r.local_mechanism)]
        gate, stack = _gate_kind(r)
        assert gate == local_gate, (r.id, gate, r.local_mechanism)
        assert stack in (None, local_stack), (r.id, stack, r.local_params)


def test_a_round_trip_the_source_does_not_name_is_marked_assumed():
    # The CHERI microkernel slides name "ping-pong" messages between two
    # tasks and never say what one bar counts.
    rows = [r for r in reference.load() if r.source.startswith("Lauterbach 2023")]
    assert rows
    for r in rows:
        if "round trip" in (r.subject + r.metric + r.per):
            assert "assumed" in r.per or "is assumed" in r.note, r.id


def test_a_figure_out_of_a_compartment_is_not_explained_by_a_compartment():
    # The Morello rows without a compartment ran no c18n: a note that
    # blames c18n trampolines describes the other side's code, not this one.
    rows = [r for r in reference.load() if "out of a compartment" in r.subject]
    assert rows
    for r in rows:
        assert "trampoline" not in r.note and "c18n" not in r.note, r.id


def test_derived_figures_say_how():
    refs = {r.id: r for r in reference.load()}
    for rid in ("konrad-gate-overhead-low", "konrad-gate-overhead-high",
                "erim-gate-overhead-low", "erim-gate-overhead-high",
                "cheri-ukernel-ipc-total-nocap"):
        assert refs[rid].derived, rid
        assert "[derived:" in render_reference.metric_cell(refs[rid])
    # 73 to 84 follows from Table 5.1 (v)'s printed medians.
    v = {k: refs[f"konrad-erim-{k}"].value for k in ("inlined", "direct", "indirect",
                                                       "gate-inlined", "gate-direct",
                                                       "gate-indirect")}
    diffs = [v["gate-inlined"] - v["inlined"], v["gate-direct"] - v["direct"],
             v["gate-indirect"] - v["indirect"]]
    assert (min(diffs), max(diffs)) == (refs["konrad-gate-overhead-low"].value,
                                        refs["konrad-gate-overhead-high"].value)
    # ERIM's 55 to 80 follows from its own expected values (Table 5.1).
    e = {k: refs[f"erim-{k}"].value for k in ("inlined", "direct", "indirect",
                                                "gate-inlined", "gate-direct", "gate-indirect")}
    diffs = [e["gate-inlined"] - e["inlined"], e["gate-direct"] - e["direct"],
             e["gate-indirect"] - e["indirect"]]
    assert (min(diffs), max(diffs)) == (refs["erim-gate-overhead-low"].value,
                                        refs["erim-gate-overhead-high"].value)
    assert all(refs[f"erim-gate-overhead-{end}"].unit == refs["erim-inlined"].unit
               for end in ("low", "high"))


def test_text_prints_the_source_digits():
    with open(reference.DATA, newline="") as f:
        raw = {row["id"]: row for row in csv.DictReader(f)}
    refs = reference.load()
    for r in refs:
        assert r.text() == raw[r.id]["value"].strip(), r.id
        assert (r.spread_as_printed() or "") == raw[r.id]["spread"].strip(), r.id
    by = {r.id: r for r in refs}
    assert by["konrad-kthread-switch-cycles"].text() == "11041.67"
    assert by["konrad-lwc-switch-us"].text() == "3.80"
    assert render_reference.value_cell(by["konrad-lwc-switch-us"]) == "3.80 (sd 0.00)"
    assert by["morello-pipe-write-in"].text() == "0.003"


def test_reference_command_prints_the_source_digits(isobench):
    p = isobench("reference")
    assert p.returncode == 0
    assert "11041.67" in p.stdout and "11,041.7" not in p.stdout
    assert "3.80 (sd 0.00)" in p.stdout and "sd 0)" not in p.stdout
    doc, p = isobench.json("reference", "--json")
    by = {r["id"]: r for r in doc["references"]}
    assert by["konrad-lwc-switch-us"]["value_text"] == "3.80"
    assert by["konrad-lwc-switch-us"]["spread_text"] == "0.00"
    assert by["konrad-cmp-erim"]["per"] == "round trip"
    assert by["konrad-gate-overhead-low"]["derived"].startswith("Table 5.1 (v)")


def test_a_value_that_is_not_a_number_is_one_clear_error(tmp_path):
    with open(reference.DATA, newline="") as f:
        rows = list(csv.DictReader(f))
    rows[0]["value"] = "about 5"
    bad = tmp_path / "reference.csv"
    with open(bad, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(ValueError, match="is not a number"):
        reference.load(bad)


@pytest.mark.parametrize("text, value", [("46,759", 46759.0), ("12'000", 12000.0),
                                         ("11041.67", 11041.67), ("0.003", 0.003)])
def test_a_number_as_printed(text, value):
    assert reference._number("x", "value", text) == value


@pytest.mark.parametrize("text", ["4,5", "1,23,456", "12'00", "about 5"])
def test_a_number_that_only_looks_grouped_is_refused(text):
    with pytest.raises(ValueError, match="is not a number"):
        reference._number("x", "value", text)


def test_lwcs_handshake_seconds_stand_beside_a_full_tls_run():
    """lwC's 99.7 s and 100.4 s for 10,000 handshakes stand beside the
    points of 10,000 handshakes with the key in the process and in an lwc,
    as the run's seconds (handshake_seconds), not beside a --quick run's
    1,000 or the HTTPS session points."""
    refs = {r.id: r for r in reference.load()}
    for rid, key in (("lwc-tls-native", "process"), ("lwc-tls-key-in-lwc", "lwc")):
        r = refs[rid]
        assert (r.local_benchmark, r.local_mechanism, r.local_quantity) == (
            "lwc-serve", "-", "handshake_seconds")
        [hit] = reference.matches(r, _grid(r))
        assert hit.params["tls_key"] == key and hit.params["handshakes"] == 10000
        quick = Cfg("lwc-serve", "-", {**hit.params, "handshakes": 1000})
        assert reference.matches(r, [quick]) == []
