"""Published reference figures: one reviewed file, a citation per row."""

import pytest

from isobench.analysis import reference


def test_every_row_is_complete():
    refs = reference.load()
    assert len(refs) >= 60
    assert len({r.id for r in refs}) == len(refs)
    for r in refs:
        for field in ("source", "citation", "hardware", "unit", "subject"):
            assert getattr(r, field).strip(), (r.id, field)
        assert r.value > 0, r.id
        assert r.unit in ("cycles", "us", "cpi"), r.id


@pytest.mark.parametrize("rid, value, unit, hardware", [
    ("lwc-switch-lwc", 2.01, "us", "X5650"),
    ("lwc-switch-process", 4.25, "us", "X5650"),
    ("lwc-switch-kthread", 4.12, "us", "X5650"),
    ("lwc-switch-uthread", 1.71, "us", "X5650"),
    ("lwc-create", 87.7, "us", "X5650"),
    ("lwc-create-per-dirty-page", 3.4, "us", "X5650"),
    ("konrad-cmp-securecells", 8, "cycles", "SecureCells"),
    ("konrad-cmp-erim", 42, "cycles", "i7-1260P"),
    ("konrad-cmp-lwc", 6068, "cycles", "i5-4210U"),
    ("flexos-gate-function-call", 2, "cycles", "Silver 4114"),
    ("flexos-gate-mpk-shared-stack", 62, "cycles", "Silver 4114"),
    ("flexos-gate-mpk-protected-stack", 108, "cycles", "Silver 4114"),
    ("flexos-gate-ept", 462, "cycles", "Silver 4114"),
    ("erim-gate-indirect", 99, "cycles", "MPK"),
    ("seimi-ipc-pipe-native", 5.582, "us", "SEIMI"),
    ("seimi-ipc-pipe-seimi", 7.428, "us", "SEIMI"),
    ("seimi-ctx-16p16k-seimi", 11.52, "us", "SEIMI"),
    ("seimi-vm-mmap-seimi", 12500, "us", "SEIMI"),
    ("cheri-ukernel-ipc-caplookup-nocap", 23, "cycles", "Morello"),
    ("cheri-ukernel-ipc-caplookup-cap", 280, "cycles", "Morello"),
    ("cheri-ukernel-ipc-cpi-nocap", 0.73, "cpi", "Morello"),
    ("cheri-ukernel-ipc-cpi-cap", 1.04, "cpi", "Morello"),
])
def test_known_values(rid, value, unit, hardware):
    r = {x.id: x for x in reference.load()}[rid]
    assert (r.value, r.unit) == (value, unit)
    assert hardware in r.hardware or hardware in r.source


def test_seimi_tables_are_complete_and_paired():
    seimi = [r for r in reference.load() if r.id.startswith("seimi-")]
    # Table IV 7 columns, V 8, VI 7; native and SEIMI each.
    assert len(seimi) == 2 * (7 + 8 + 7)
    native = {r.id[:-len("-native")]: r.value for r in seimi if r.id.endswith("-native")}
    protected = {r.id[:-len("-seimi")]: r.value for r in seimi if r.id.endswith("-seimi")}
    assert native.keys() == protected.keys()
    # SEIMI is slower on every line (the paper's slowdowns are all positive).
    assert all(protected[k] > native[k] for k in native)


def test_local_match_params_parse():
    r = {x.id: x for x in reference.load()}["lwc-switch-process"]
    assert (r.local_benchmark, r.local_mechanism) == ("switch", "process-futex")
    assert r.local_params == {"placement": "same-cpu", "variant": "entry", "payload": 0}


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


def test_every_source_has_a_doi_or_url_or_says_it_has_none():
    refs = reference.load()
    for r in refs:
        assert r.link == "" or r.link.startswith("https://"), r.id
    linked = {r.source for r in refs if r.link}
    assert {"ERIM (USENIX Security 2019)", "FlexOS (ASPLOS 2022)",
            "Light-Weight Contexts (OSDI 2016)", "SEIMI (IEEE S&P 2020)"} <= linked
    # One source, one link.
    assert all(len({r.link for r in refs if r.source == s}) == 1 for s in {r.source for r in refs})
    text = reference.render(refs)
    assert "https://doi.org/10.1145/3503222.3507759" in text
    assert text.count(reference.NO_LINK) == len({r.source for r in refs if not r.link})


def test_the_metric_has_a_column_and_the_listing_fits_100_columns(isobench):
    p = isobench("reference")
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    assert max(map(len, lines)) <= 100
    headers = [l.split() for l in lines if l.startswith("id ")]
    assert headers and all(h[:5] == ["id", "value", "unit", "what", "metric"] for h in headers)
    # A metric's words are in the metric column, not merged into "what".
    assert "LMbench" in p.stdout and "ERIM microbenchmark" in p.stdout
    doc, p = isobench.json("reference", "--json")
    assert all("link" in r and "metric" in r for r in doc["references"])
