"""The sections of the summary document: a family registered in
analysis/sections.py reaches the console table, summary.md, index.html and
the plots through render/sections.py, in its place."""

from isobench.analysis import sections
from isobench.render.kit import plots
from isobench.render import report, sections as render_sections
from isobench.render import console
from isobench.render import figures

from fixture_runs import fixture, load_doc


def _doc(tmp_path, monkeypatch):
    from isobench.analysis import summary
    seen = {}

    def build(data, doc):
        seen["configs"] = len(doc["configs"])
        return {"rows": [["a", 1]], "configs": seen["configs"]}

    monkeypatch.setattr(sections, "SECTIONS", (("probe", build), ("none", lambda d, doc: None)))
    return summary.build(load_doc(tmp_path, fixture("clean_run"))), seen


def test_a_section_is_built_after_the_configs(tmp_path, monkeypatch):
    doc, seen = _doc(tmp_path, monkeypatch)
    assert doc["sections"] == {"probe": {"rows": [["a", 1]], "configs": seen["configs"]}}
    assert seen["configs"] == len(doc["configs"]) > 0


def test_a_section_reaches_every_rendering(tmp_path, monkeypatch):
    doc, _ = _doc(tmp_path, monkeypatch)
    drawn = plots.Plot("probe-plot", "Probe", None, "nothing to draw")
    monkeypatch.setitem(render_sections.RENDERERS, "probe", render_sections.Renderer(
        text=lambda s, d: f"PROBE TEXT {s['configs']}",
        markdown=lambda s, d: "## PROBE MD",
        plots=lambda s, d, width: [drawn], first=True))
    assert "PROBE TEXT" in console.run_report(doc)
    assert "## PROBE MD" in report.render_md(doc, [])
    assert "<pre>PROBE TEXT" in report.render_html(doc, [], tmp_path)
    assert figures.draw(doc)[0] is drawn
