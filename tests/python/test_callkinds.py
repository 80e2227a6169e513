"""ERIM's call kinds in the summary and its rendering (analysis/families/callkinds.py,
render/families/callkinds.py): for each kind, mpk's value minus direct's, with the
Welch interval of stats.difference_interval, beside ERIM's and Konrad's
published ranges; computed from synthetic stored runs whose every value is
known (synthetic_runs.py)."""

import pytest

from isobench.analysis.families import callkinds
from isobench.core import stats
from isobench.render import report, sections as render_sections
from isobench.render.kit import table

from synthetic_runs import rep_factor, result, summary_of

KINDS = ("inline", "direct-call", "indirect-call")
# ns per call of each kind: the plain call, and the call behind the gate.
PLAIN = {"inline": 300.0, "direct-call": 400.0, "indirect-call": 450.0}
GATE = {"inline": 1100.0, "direct-call": 1250.0, "indirect-call": 1320.0}


def kind_results(reps=(1, 2, 3), plain=True, gate_mech="mpk"):
    out = []
    for rep in reps:
        for k in KINDS:
            params = {"placement": "same-cpu", "payload": 0, "variant": k}
            if plain:
                out.append(result("switch", "direct", params, PLAIN[k] * rep_factor(rep), rep))
            out.append(result("switch", gate_mech, {**params, "gate": "inline"},
                              GATE[k] * rep_factor(rep) ** 2, rep))
        # The round trip is no call kind: it must not enter the section.
        out.append(result("switch", gate_mech, {"placement": "same-cpu", "payload": 0,
                                                "variant": "entry", "gate": "inline"}, 2000.0, rep))
    return out


def test_each_kind_is_the_gate_minus_the_plain_call(tmp_path):
    doc = summary_of(tmp_path, kind_results())
    s = doc["sections"]["switch-call-kinds"]
    assert [(r["mechanism"], r["kind"]) for r in s["rows"]] == [("mpk", k) for k in KINDS]
    by = {c["params"]["variant"] + c["mechanism"]: c["headline"]
          for c in doc["configs"] if c["params"].get("variant") in KINDS}
    for r in s["rows"]:
        k = r["kind"]
        hg, hp = by[k + "mpk"], by[k + "direct"]
        gate, plain = hg["values"], hp["values"]
        assert len(gate) == len(plain) == 3
        assert r["difference"] == pytest.approx(stats.difference(gate, plain))
        assert r["difference"] == pytest.approx(GATE[k] - PLAIN[k], rel=0.01)
        # The counter's step (1 ns here) widens it, as it does every headline.
        assert hg["resolution"] == hp["resolution"] == 1
        iv = stats.difference_interval(gate, plain, 1.0, 1.0)
        assert r["interval"] == pytest.approx([iv.low, iv.high])
        assert r["interval"][0] < GATE[k] - PLAIN[k] < r["interval"][1]
        # The unit is ns here: the ns columns are the same numbers.
        assert r["unit"] == "ns" and r["difference_ns"] == pytest.approx(r["difference"])
        assert (r["gate_reps"], r["plain_reps"], r["note"]) == (3, 3, None)
    assert {p["who"]: (p["low"], p["high"]) for p in s["published"]} == {
        "ERIM": (55, 80), "Konrad": (73, 84)}


def test_one_repetition_gives_the_difference_without_an_interval(tmp_path):
    s = summary_of(tmp_path, kind_results(reps=(2,)), repeat=1)["sections"]["switch-call-kinds"]
    for r in s["rows"]:
        assert r["difference"] == pytest.approx(GATE[r["kind"]] - PLAIN[r["kind"]], rel=0.01)
        assert r["interval"] is None and "one repetition" in r["note"]


def test_without_direct_each_row_says_what_to_run(tmp_path):
    s = summary_of(tmp_path, kind_results(plain=False))["sections"]["switch-call-kinds"]
    assert all(r["difference"] is None and "run switch -m direct" in r["note"]
               for r in s["rows"])


def test_direct_alone_has_no_section(tmp_path):
    only = [r for r in kind_results() if r["mechanism"] == "direct"]
    assert "switch-call-kinds" not in summary_of(tmp_path, only)["sections"]


def test_the_table_shows_differences_beside_the_published_ranges(tmp_path):
    doc = summary_of(tmp_path, kind_results())
    s = doc["sections"]["switch-call-kinds"]
    text = "\n".join(render_sections.text_blocks(doc))
    assert callkinds.KINDS and "gate minus plain [95%]" in text
    for r in s["rows"]:
        lo, hi = r["interval"]
        assert f"{table.fmt_num(r['difference'])} [{table.fmt_num(lo)}..{table.fmt_num(hi)}] ns" \
            in text
    assert "PUBLISHED ERIM" in text and "55 to 80" in text
    assert "PUBLISHED Konrad" in text and "73 to 84" in text
    assert "reference rows erim-gate-overhead-low, erim-gate-overhead-high" in " ".join(
        text.split())
    # Local values are ticks or ns, never cycles: only the published notes
    # name the unit the sources used.
    local = [line for line in text.splitlines() if line.lstrip().startswith("mpk")]
    assert len(local) >= 3 and not any("cycle" in line for line in local)
    md = report.render_md(doc, [])
    assert "## ERIM's call kinds: gate minus plain call (switch)" in md
    assert "| mpk | indirect-call |" in md


def test_a_gate_kinds_ratio_is_to_directs_same_kind(tmp_path):
    doc = summary_of(tmp_path, kind_results())
    for c in doc["configs"]:
        if c["mechanism"] != "mpk":
            continue
        r = c["ratio"]
        if c["params"]["variant"] == "entry":
            continue  # no direct entry in this run: no baseline
        k = c["params"]["variant"]
        assert r is not None and r["value"] == pytest.approx(GATE[k] / PLAIN[k], rel=0.01)


def test_the_difference_takes_the_same_estimator_on_both_sides(tmp_path):
    """A plain call too short for its median (batched headline) beside a gate
    long enough for its median: the difference takes the gate's batched
    estimate too, as its ratio does, so the reading cost that the median
    holds is not counted as gate."""
    out = []
    for rep in (1, 2, 3):
        f = rep_factor(rep)
        params = {"placement": "same-cpu", "payload": 0, "variant": "direct-call"}
        plain = result("switch", "direct", params, 5.0, rep)
        plain.update(batched=3.0 * f, batched_reps=[3.0 * f] * 5)
        gate = result("switch", "mpk", {**params, "gate": "inline"}, 100.0, rep)
        gate.update(batched=96.0 * f, batched_reps=[96.0 * f] * 5)
        out += [plain, gate]
    doc = summary_of(tmp_path, out)
    heads = {c["mechanism"]: c["headline"]["source"] for c in doc["configs"]}
    assert heads == {"direct": "batched", "mpk": "median"}
    (row,) = doc["sections"]["switch-call-kinds"]["rows"]
    assert row["source"] == "batched"
    assert row["difference"] == pytest.approx(93.0, rel=0.01)
    assert row["gate"] - row["plain"] == pytest.approx(row["difference"])
    assert row["interval"][0] < 93.0 < row["interval"][1]
    assert row["note"] is None


def test_the_published_ranges_are_the_reference_rows(tmp_path, monkeypatch):
    """One place holds each published figure: changing a reference row
    changes the section, digits as printed, citation with it."""
    import dataclasses

    from isobench.analysis.kit import reference
    rows = reference.load()
    by = {r.id: r for r in rows}
    assert [by[i].text() for i in ("erim-gate-overhead-low", "erim-gate-overhead-high",
                                   "konrad-gate-overhead-low", "konrad-gate-overhead-high")] == [
        "55", "80", "73", "84"]
    changed = [dataclasses.replace(r, value=61.0, value_text="61.0",
                                   citation="A. Nother. Gates. 2031")
               if r.id == "konrad-gate-overhead-low" else r
               for r in rows if r.id != "erim-gate-overhead-high"]
    monkeypatch.setattr(reference, "load", lambda *a, **k: changed)
    doc = summary_of(tmp_path, kind_results())
    pub = {p["who"]: p for p in doc["sections"]["switch-call-kinds"]["published"]}
    assert (pub["Konrad"]["low"], pub["Konrad"]["low_text"]) == (61.0, "61.0")
    assert pub["Konrad"]["citation"] == "A. Nother. Gates. 2031"
    assert pub["ERIM"]["missing"] == ["erim-gate-overhead-high"]
    text = " ".join("\n".join(render_sections.text_blocks(doc)).split())
    assert "61.0 to 84" in text and "A. Nother. Gates. 2031" in text and "73 to 84" not in text
    assert "erim-gate-overhead-high missing: no figure" in text
