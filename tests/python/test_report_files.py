"""The files of `isobench report`: fonts a paper submission accepts, text
in SVG that is text, every file naming its run, and a report folder that
holds only the files of the run it shows (render/kit/reportdir.py)."""

import json
import os
import shutil
import subprocess

import pytest

from conftest import assert_one_error_line
from fixture_runs import fixture, import_doc, with_repetitions

from test_report import with_kv_server, with_second_kv_size

MANIFEST = ".isobench-report.json"


def every_plot_run():
    return with_repetitions(with_kv_server(with_second_kv_size(fixture("clean_run"))), 5)


def switch_only_run():
    doc = fixture("clean_run")
    doc["results"] = [r for r in doc["results"] if r["benchmark"] == "switch"]
    return doc


@pytest.fixture
def reported(isobench, tmp_path):
    """A report of a run with every plot."""
    import_doc(isobench.db, every_plot_run())
    out = tmp_path / "rep"
    doc, p = isobench.json("report", "-o", str(out), "--json")
    assert p.returncode == 0, p.stderr
    return out, doc


@pytest.mark.skipif(shutil.which("pdffonts") is None,
                    reason="no pdffonts (poppler-utils; scripts/setup-system.sh installs it)")
def test_every_pdf_embeds_truetype_fonts_never_type3(reported):
    out, doc = reported
    pdfs = [f for f in doc["files"] if f.endswith(".pdf")]
    assert len(pdfs) >= 8   # switch, switch-payload, kv, kv-overhead, kv-server: 2 widths each
    for name in pdfs:
        p = subprocess.run(["pdffonts", str(out / name)], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        fonts = p.stdout.splitlines()[2:]   # after the header and its rule
        assert fonts, f"{name}: no font at all (its text would be drawn as paths)"
        for line in fonts:
            assert "Type 3" not in line, f"{name}: {line}"
            assert "TrueType" in line or "Type 1" in line, f"{name}: {line}"
            assert line.split()[-5] == "yes", f"{name}: font not embedded: {line}"


def test_svg_text_is_text_not_glyph_outlines(reported):
    out, doc = reported
    svgs = [f for f in doc["files"] if f.endswith(".svg")]
    assert len(svgs) >= 4
    for name in svgs:
        svg = (out / name).read_text()
        assert svg.count("<text") >= 5, name
        # Glyphs drawn as outlines are <path id="DejaVuSans-..."> definitions.
        assert 'id="DejaVu' not in svg and "<use xlink:href=\"#DejaVu" not in svg, name
    svg = (out / "switch.svg").read_text()
    assert ">mpk</text>" in svg.replace("\n", "") or ">mpk\n" in svg


def test_every_file_names_its_run(reported):
    out, doc = reported
    run = "isobench run 1 (started 2024-05-01T10:00:00+00:00)"
    for name in doc["files"]:
        path = out / name
        if name.endswith(".tex"):
            assert path.read_text().startswith(f"% {run}: the "), name
        elif name.endswith(".svg"):
            assert run.encode() in path.read_bytes(), name
        elif name.endswith(".pdf"):   # a PDF string escapes its parentheses
            assert run.replace("(", "\\(").replace(")", "\\)").encode() in path.read_bytes()
        elif name.endswith(".png"):
            from PIL import Image
            with Image.open(path) as im:
                assert im.text["Description"] == run, name
        elif name.endswith(".caption.txt"):
            assert "isobench run 1 of 2024-05-01" in path.read_text(), name
        elif name == "results.csv":
            rows = path.read_text().splitlines()
            assert rows[0].startswith("run_id,") and all(r.startswith("1,") for r in rows[1:])
        elif name == "stats.json":
            assert json.loads(path.read_text())["run"]["run_id"] == 1
        elif name == "index.html":
            assert "<title>isobench run 1</title>" in path.read_text()
        elif name == "summary.md":
            assert path.read_text().startswith("# isobench run 1\n")
        else:
            pytest.fail(f"{name}: a file this test does not know")
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["run"] == {"run_id": 1, "started": "2024-05-01T10:00:00+00:00",
                               "store": "isobench.sqlite"}
    assert manifest["files"] == sorted(doc["files"])


def _listing(folder):
    return sorted(os.listdir(folder))


def test_a_second_report_leaves_only_its_own_files(isobench, tmp_path):
    import_doc(isobench.db, every_plot_run())       # run 1: switch, kv, kv-server
    import_doc(isobench.db, switch_only_run())      # run 2: switch only
    out = tmp_path / "rep"
    first, p = isobench.json("report", "1", "-o", str(out), "--json")
    assert p.returncode == 0, p.stderr
    (out / "notes.txt").write_text("the user's own\n")
    (out / "drafts").mkdir()
    second, p = isobench.json("report", "2", "-o", str(out), "--json")
    assert p.returncode == 0, p.stderr
    gone = set(first["files"]) - set(second["files"])
    assert {"kv.tex", "kv.png", "kv-1col.pdf", "kv-server.svg"} <= gone
    assert second["removed"] == sorted(gone) and second["overwritten"] == []
    assert _listing(out) == sorted([*second["files"], MANIFEST, "notes.txt", "drafts"])
    assert (out / "notes.txt").read_text() == "the user's own\n"
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["run"]["run_id"] == 2 and manifest["files"] == sorted(second["files"])
    for name in second["files"]:
        if name.endswith((".tex", ".md", ".html", ".pdf", ".svg")):
            assert b"isobench run 2" in (out / name).read_bytes(), name
    # The text output says what went.
    p = isobench("report", "1", "-o", str(out))
    assert p.returncode == 0 and "removed the previous report's" not in p.stdout
    p = isobench("report", "2", "-o", str(out))
    assert p.returncode == 0 and "removed the previous report's kv-1col.pdf" in p.stdout


def test_a_file_the_report_did_not_write_is_not_overwritten(isobench, tmp_path):
    import_doc(isobench.db, fixture("clean_run"))
    out = tmp_path / "rep"
    out.mkdir()
    (out / "kv.tex").write_text("my own table\n")
    line = assert_one_error_line(isobench("report", "-o", str(out)), 2)
    assert "kv.tex" in line and "--force" in line
    # Nothing written, nothing left behind.
    assert _listing(out) == ["kv.tex"] and (out / "kv.tex").read_text() == "my own table\n"
    doc, p = isobench.json("report", "-o", str(out), "--force", "--json")
    assert p.returncode == 0, p.stderr
    assert doc["overwritten"] == ["kv.tex"] and "isobench run 1" in (out / "kv.tex").read_text()
    assert "kv.tex" in json.loads((out / MANIFEST).read_text())["files"]


def test_a_damaged_manifest_is_refused_unless_forced(isobench, tmp_path):
    import_doc(isobench.db, fixture("clean_run"))
    out = tmp_path / "rep"
    out.mkdir()
    for bad in ("{not json", json.dumps({"isobench_report": 1, "files": ["../../etc/passwd"]})):
        (out / MANIFEST).write_text(bad)
        line = assert_one_error_line(isobench("report", "-o", str(out)), 2)
        assert MANIFEST in line and "--force" in line
        assert _listing(out) == [MANIFEST]
    p = isobench("report", "-o", str(out), "--force")
    assert p.returncode == 0, p.stderr
    assert json.loads((out / MANIFEST).read_text())["run"]["run_id"] == 1


def test_a_report_that_fails_midway_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    from isobench.analysis import summary
    from isobench.render import paper, report
    from fixture_runs import load_doc
    doc = summary.build(load_doc(tmp_path, fixture("clean_run")))
    out = tmp_path / "rep"
    report.write(doc, out)
    before = {f: (out / f).read_bytes() for f in _listing(out)}

    def full_disk(_doc):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(paper, "results_csv", full_disk)
    with pytest.raises(OSError):
        report.write(doc, out, ("html", "csv"))
    assert {f: (out / f).read_bytes() for f in _listing(out)} == before


def test_a_link_planted_at_the_manifests_temporary_name_is_not_followed(isobench, tmp_path):
    """Whoever can write into the report folder plants a symbolic link
    where a manifest would be written first; the report must not write
    through it to a file outside the folder."""
    import_doc(isobench.db, fixture("clean_run"))
    out = tmp_path / "rep"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("not the report's\n")
    (out / (MANIFEST + ".new")).symlink_to(victim)
    p = isobench("report", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert victim.read_text() == "not the report's\n"
    assert json.loads((out / MANIFEST).read_text())["run"]["run_id"] == 1
    # A link at the manifest's own name is not read through either: one
    # line, and nothing written outside.
    (out / MANIFEST).unlink()
    (out / MANIFEST).symlink_to(victim)
    line = assert_one_error_line(isobench("report", "-o", str(out)), 2)
    assert MANIFEST in line
    assert victim.read_text() == "not the report's\n"


@pytest.mark.parametrize("manifest", [
    {"isobench_report": 1, "files": ["paper.tex"]},
    {"isobench_report": 2, "files": ["paper.tex"],
     "sums": {"paper.tex": {"size": 12, "sha256": "0" * 64}}},
], ids=["names-only", "wrong-sum"])
def test_a_foreign_manifest_removes_nothing_the_report_did_not_write(isobench, tmp_path, manifest):
    """A folder copied from elsewhere (or prepared by someone else) comes
    with a manifest that lists the user's paper.tex: the report must not
    remove it, since it is not what a report wrote."""
    import_doc(isobench.db, fixture("clean_run"))
    out = tmp_path / "rep"
    out.mkdir()
    (out / "paper.tex").write_text("\\documentclass{article}\n")
    (out / MANIFEST).write_text(json.dumps({**manifest, "run": {"run_id": 9}, "isobench": "0"}))
    doc, p = isobench.json("report", "-o", str(out), "--json")
    assert p.returncode == 0, p.stderr
    assert (out / "paper.tex").read_text() == "\\documentclass{article}\n"
    assert doc["removed"] == []
    assert "paper.tex" not in json.loads((out / MANIFEST).read_text())["files"]


def test_the_manifest_records_each_files_size_and_sha256(reported):
    import hashlib
    out, doc = reported
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["isobench_report"] == 2 and sorted(manifest["sums"]) == sorted(doc["files"])
    for name in doc["files"]:
        data = (out / name).read_bytes()
        assert manifest["sums"][name] == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def test_an_edited_file_of_the_previous_report_is_kept(isobench, tmp_path):
    import_doc(isobench.db, every_plot_run())
    import_doc(isobench.db, switch_only_run())
    out = tmp_path / "rep"
    _, p = isobench.json("report", "1", "-o", str(out), "--json")
    assert p.returncode == 0, p.stderr
    (out / "kv.tex").write_text("edited by hand\n")
    second, p = isobench.json("report", "2", "-o", str(out), "--json")
    assert p.returncode == 0, p.stderr
    assert "kv.tex" not in second["removed"] and "kv-1col.pdf" in second["removed"]
    assert (out / "kv.tex").read_text() == "edited by hand\n"
