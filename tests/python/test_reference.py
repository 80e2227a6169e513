"""Published reference figures: one reviewed file, a citation per row."""

import pytest

from isobench.analysis.kit import reference
from isobench.render import reference as render_reference


def test_every_row_is_complete():
    refs = reference.load()
    assert len(refs) >= 60
    assert len({r.id for r in refs}) == len(refs)
    for r in refs:
        for field in ("source", "citation", "hardware", "unit", "subject"):
            assert getattr(r, field).strip(), (r.id, field)
        assert r.value > 0, r.id
        assert r.unit in ("cycles", "tsc_ticks", "us", "ms", "s", "cpi", "%", "x"), r.id


@pytest.mark.parametrize("rid, value, unit, hardware", [
    ("lwc-switch-lwc", 2.01, "us", "X5650"),
    ("lwc-switch-process", 4.25, "us", "X5650"),
    ("lwc-switch-kthread", 4.12, "us", "X5650"),
    ("lwc-switch-uthread", 1.71, "us", "X5650"),
    ("lwc-create", 87.7, "us", "X5650"),
    ("lwc-create-per-dirty-page", 3.4, "us", "X5650"),
    ("konrad-cmp-securecells", 8, "cycles", "SecureCells"),
    ("konrad-cmp-erim", 42, "tsc_ticks", "i7-1260P"),
    ("konrad-cmp-lwc", 6068, "cycles", "i5-4210U"),
    ("erim-gate-indirect", 99, "tsc_ticks", "MPK"),
    ("konrad-erim-tsc-gate-inlined", 42.79, "tsc_ticks", "i7-1260P"),
    ("konrad-erim-tsc-unpinned-gate-inlined", 85.57, "tsc_ticks", "i7-1260P"),
    ("konrad-erim-tsc-partial-gate-indirect", 47.20, "tsc_ticks", "i7-1260P"),
    ("konrad-erim-hpc-partial-gate-direct", 89.00, "cycles", "i7-1260P"),
    ("konrad-xpc-round-trip", 82, "cycles", "XPC"),
    ("konrad-lwc-round-trip", 12000, "cycles", "lwC"),
    ("erim-gate-overhead-low", 55, "tsc_ticks", "MPK"),
    ("konrad-bg-erim", 99, "tsc_ticks", "MPK"),
    ("konrad-erim-switch-high", 260, "tsc_ticks", "MPK"),
    ("konrad-gate-overhead-high", 84, "cycles", "i7-1260P"),
    ("konrad-mpk-vs-mprotect", 50, "x", "Konrad"),
    ("seimi-spec-ocfi-seimi", 18.29, "%", "SEIMI"),
    ("seimi-spec-ag-ih", 0.98, "%", "SEIMI"),
    ("seimi-ipc-pipe-native", 5.582, "us", "SEIMI"),
    ("seimi-ipc-pipe-seimi", 7.428, "us", "SEIMI"),
    ("seimi-ctx-16p16k-seimi", 11.52, "us", "SEIMI"),
    ("seimi-vm-mmap-seimi", 12500, "us", "SEIMI"),
    ("cheri-ukernel-ipc-caplookup-nocap", 23, "cycles", "Morello"),
    ("cheri-ukernel-ipc-caplookup-cap", 280, "cycles", "Morello"),
    ("cheri-ukernel-ipc-cpi-nocap", 0.73, "cpi", "Morello"),
    ("cheri-ukernel-ipc-cpi-cap", 1.04, "cpi", "Morello"),
    ("konrad-lwc-switch-us", 3.80, "us", "i5-4210U"),
    ("konrad-process-switch-us", 7.55, "us", "i5-4210U"),
    ("konrad-uthread-switch-us", 3.32, "us", "i5-4210U"),
    ("konrad-kthread-switch-us", 7.64, "us", "i5-4210U"),
    ("lwc-tls-native", 99.7, "s", "X5650"),
    ("lwc-tls-key-in-lwc", 100.4, "s", "X5650"),
    ("morello-cpu-maths-normal", 46759, "ms", "Morello"),
    ("morello-cpu-maths-secure", 70780, "ms", "Morello"),
    ("morello-cpu-maths-benchmark", 52901, "ms", "Morello"),
    ("morello-cpu-int-secure", 993, "ms", "Morello"),
    ("morello-cpu-float-benchmark", 621, "ms", "Morello"),
    ("morello-cpu-array-benchmark", 101, "ms", "Morello"),
    ("morello-pipe-write-in", 0.003, "ms", "Morello"),
    ("morello-pipe-read-in", 0.079, "ms", "Morello"),
    ("morello-pipe-read-cold-out", 0.059, "ms", "Morello"),
])
def test_known_values(rid, value, unit, hardware):
    r = {x.id: x for x in reference.load()}[rid]
    assert (r.value, r.unit) == (value, unit)
    assert hardware in r.hardware or hardware in r.source


def test_seimi_tables_are_complete_and_paired():
    seimi = [r for r in reference.load() if r.id.startswith("seimi-")
             and not r.id.endswith("-average") and not r.id.startswith("seimi-spec-")]
    # Table IV 7 columns, V 8, VI 7; native and SEIMI each.
    assert len(seimi) == 2 * (7 + 8 + 7)
    native = {r.id[:-len("-native")]: r.value for r in seimi if r.id.endswith("-native")}
    protected = {r.id[:-len("-seimi")]: r.value for r in seimi if r.id.endswith("-seimi")}
    assert native.keys() == protected.keys()
    # SEIMI is slower on every line (the paper's slowdowns are all positive).
    assert all(protected[k] > native[k] for k in native)


def test_local_match_params_parse():
    r = {x.id: x for x in reference.load()}["lwc-switch-process"]
    # lwC's figures are one switch: they stand beside lwc-switch's one-way
    # results, never beside switch's round trips.
    assert (r.local_benchmark, r.local_mechanism) == ("lwc-switch", "-")
    assert r.local_params == {"variant": "process", "per": "one-way", "placement": "same-cpu"}


def test_no_one_way_figure_stands_beside_a_round_trip():
    for r in reference.load():
        if "one way" in r.metric:
            assert r.local_benchmark in (None, "lwc-switch"), r.id
            if r.local_benchmark:
                assert r.local_params.get("per") == "one-way", r.id
    lwc = [r for r in reference.load() if r.id.startswith(("lwc-switch-", "konrad-"))
           and r.id.endswith(("-switch-us", "-switch-cycles", "switch-lwc", "switch-process",
                              "switch-kthread", "switch-uthread"))]
    assert len(lwc) == 12 and all(r.local_benchmark == "lwc-switch" for r in lwc)
    assert all(r.per == "one-way" for r in lwc)


def test_morello_tables_are_complete():
    refs = {r.id: r for r in reference.load()}
    # Table 5 (purecap) and 6 (purecap-benchmark) against the plain build, and
    # the pipe's Tables 6 (in) and 7 (out): warm and first call.
    for k in ("maths", "int", "float", "array"):
        for build in ("normal", "secure", "benchmark"):
            assert refs[f"morello-cpu-{k}-{build}"].unit == "ms"
    for op in ("write", "read"):
        for cold in ("", "-cold"):
            for where in ("out", "in"):
                assert f"morello-pipe-{op}{cold}-{where}" in refs
    # The maths overhead the text states for Table 5 (51.33%, from its unrounded means).
    assert refs["morello-cpu-maths-secure"].value / refs["morello-cpu-maths-normal"].value == \
        pytest.approx(1.5133, abs=1e-3)
    assert "another ABI" in refs["morello-cpu-int-secure"].note


def test_reference_command(isobench):
    doc, p = isobench.json("reference", "--json")
    assert p.returncode == 0
    assert all(r["published"] is True for r in doc["references"])
    p = isobench("reference")
    assert p.returncode == 0
    assert "Published figures" in p.stdout and "Xeon X5650" in p.stdout
    assert "Light-Weight Contexts" in p.stdout


def test_cheri_microkernel_derived_totals_are_flagged_and_follow_from_the_slide():
    refs = {x.id: x for x in reference.load()}
    for side, lookups, share in (("nocap", 23, 0.024), ("cap", 280, 0.178)):
        total = refs[f"cheri-ukernel-ipc-total-{side}"]
        # Flagged in both places a reader looks: how it was obtained, and the caveat.
        assert total.metric.startswith("derived:") and total.note.startswith("derived")
        assert total.value == round(lookups / share)
        assert refs[f"cheri-ukernel-ipc-caplookup-{side}"].value == lookups
    # Printed figures are not marked derived.
    assert not any("derived" in refs[i].metric + refs[i].note
                   for i in refs if i.startswith("cheri-") and "-total-" not in i)


def test_seimi_rows_map_onto_oslat_cells():
    refs = {r.id: r for r in reference.load()}
    native = refs["seimi-file-create0k-native"]
    assert (native.local_benchmark, native.local_mechanism) == ("oslat", "-")
    # A quoted value keeps its space; the native column is the unconfined cell.
    assert native.local_params == {"primitive": "file", "cell": "0K create",
                                   "placement": "same-cpu", "confine": "none"}
    # SEIMI's column is no local confinement: no local row (the oslat section
    # sets it beside its native twin's row).
    assert refs["seimi-file-create0k-seimi"].local_benchmark is None
    paired = [r for r in refs.values() if r.id.startswith(("seimi-ctx-", "seimi-file-",
                                                          "seimi-vm-", "seimi-ipc-"))
              and not r.id.endswith("-average")]
    assert all((r.local_benchmark == "oslat") == r.id.endswith("-native") for r in paired)


@pytest.mark.parametrize("rid, value", [("seimi-ctx-average", 22.51),
                                        ("seimi-fsvm-average", 33.56),
                                        ("seimi-ipc-average", 24.23)])
def test_seimi_printed_averages_say_how_they_were_made(rid, value):
    r = {x.id: x for x in reference.load()}[rid]
    assert (r.value, r.unit) == (value, "%")
    assert "percentage overheads" in r.metric and "SEIMI" in r.source


def test_every_source_has_a_doi_or_url_or_says_it_has_none():
    refs = reference.load()
    for r in refs:
        assert r.link == "" or r.link.startswith("https://"), r.id
    linked = {r.source for r in refs if r.link}
    assert {"ERIM (USENIX Security 2019)",
            "Light-Weight Contexts (OSDI 2016)", "SEIMI (IEEE S&P 2020)"} <= linked
    # One source, one link.
    assert all(len({r.link for r in refs if r.source == s}) == 1 for s in {r.source for r in refs})
    text = render_reference.render(refs)
    assert "https://doi.org/10.1109/SP40000.2020.00087" in text
    assert text.count(render_reference.NO_LINK) == len({r.source for r in refs if not r.link})


def test_the_metric_has_a_column_and_the_listing_fits_100_columns(isobench):
    p = isobench("reference")
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    assert max(map(len, lines)) <= 100
    headers = [l.split() for l in lines if l.startswith("id ")]
    assert headers and all(h[:4] == ["id", "value", "unit", "per"] for h in headers)
    # What was measured and how, under each figure.
    assert "LMbench" in p.stdout and "ERIM microbenchmark" in p.stdout
    doc, p = isobench.json("reference", "--json")
    assert all("link" in r and "metric" in r for r in doc["references"])
