"""`isobench show` and `isobench export` read back what `run` stored."""

import csv
import io
import json

from isobench.store import export, interchange


def test_show_latest_equals_run(isobench):
    isobench("run", "switch", "-m", "direct")
    doc_run, p = isobench.json("run", "switch", "--json", "-m", "thread", "-m", "mpk")
    doc_show, p = isobench.json("show", "--json")
    assert p.returncode == 0
    assert doc_show == doc_run
    assert doc_show["run_id"] == 2
    doc_first, _ = isobench.json("show", "1", "--json")
    assert {r["mechanism"] for r in doc_first["results"]} == {"direct"}


def test_show_table(isobench):
    run = isobench("run", "switch", "-m", "direct")
    show = isobench("show")
    assert show.returncode == 0
    assert show.stdout == run.stdout
    assert "results stored in" in show.stdout


def test_export_csv(isobench, tmp_path):
    doc, _ = isobench.json("run", "switch", "--json", "-m", "direct", "-m", "mpk")
    out = tmp_path / "run.csv"
    p = isobench("export", str(doc["run_id"]), "--format", "csv", "-o", str(out))
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert list(rows[0]) == list(export.CSV_COLUMNS)
    assert len(rows) == len(doc["results"]) == 5
    assert rows[0]["placement"] == "same-cpu" and rows[0]["median"] == "105.5"
    assert {r["schema_version"] for r in rows} == {str(interchange.SCHEMA_VERSION)}
    assert all(r["started"] and r["finished"] for r in rows)
    assert json.loads(rows[0]["params"]) == doc["results"][0]["params"]
    assert rows[-1]["status"] == "skipped" and rows[-1]["reason"] == "CPU has no PKU"


def test_export_json_has_raw_samples(isobench, fake):
    doc, _ = isobench.json("run", "switch", "--json", "-m", "direct")
    out, p = isobench.json("export", "latest", "--format", "json")
    assert p.returncode == 0
    assert out["schema_version"] == interchange.SCHEMA_VERSION
    assert list(out)[0] == "schema_version" and out["format"] == interchange.EXPORT_FORMAT
    assert out["uid"] == doc["uid"]
    assert out["run_id"] == doc["run_id"]
    assert out["environment"] == doc["environment"]
    first = out["results"][0]
    assert first["samples"]["primary"] == fake.fake_samples(100, "same-cpu", 0, fake.DEFAULT_N)
    assert first["header"]["counter"] == "tsc"
    lean, _ = isobench.json("export", "latest", "--format", "json", "--no-samples")
    assert "samples" not in lean["results"][0]
