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
    # What tells two machines' CSVs apart, the same in every row.
    env = doc["environment"]
    for r in rows:
        assert (r["host"], r["cpu_model"], r["kernel"], r["run_started"]) == (
            env["hostname"], env["cpu_model"] or "", env["kernel"], doc["started"])
        assert r["commit"] == ((env.get("git") or {}).get("commit") or "")
        assert r["commit_dirty"] in (("true", "false") if env.get("git") else ("",))
        assert r["counter"] in ("tsc", "")


def test_csv_booleans_are_true_or_false():
    out = io.BytesIO()

    class OneRun:
        def run(self, run_id):
            return {"started": "2026-01-01T00:00:00+00:00",
                    "environment": {"hostname": "h", "git": {"commit": "abc", "dirty": True}}}

        def results(self, run_id):
            return [{"result_id": 1, "benchmark": "b", "mechanism": "m", "status": "ok",
                     "params": {"quantized": False}}]

    export.write_csv(OneRun(), 1, out)
    row = next(csv.DictReader(io.StringIO(out.getvalue().decode())))
    assert (row["host"], row["commit"], row["commit_dirty"]) == ("h", "abc", "true")
    assert json.loads(row["params"]) == {"quantized": False}


def test_counts_json_writes_what_json_reads():
    import numpy as np
    edge = [0, 9, 10, 99, 100, 12345, 2**32 - 1, 2**32, 10**18, 10**19 - 1, 10**19, 2**64 - 1]
    for values in ([], [7], edge, list(range(0, 100000, 37)), [5, 10**12, 3]):
        a = np.array(values, dtype=np.uint64)
        assert json.loads(export.counts_json(a)) == values
        assert json.loads(export.counts_json(memoryview(a.tobytes()).cast("Q"))) == values


def test_export_json_has_raw_samples(isobench, fake):
    doc, _ = isobench.json("run", "switch", "--json", "-m", "direct")
    out, p = isobench.json("export", "latest", "--format", "json", "--samples")
    assert p.returncode == 0
    assert out["schema_version"] == interchange.SCHEMA_VERSION
    assert list(out)[0] == "schema_version" and out["format"] == interchange.EXPORT_FORMAT
    assert out["uid"] == doc["uid"]
    assert out["run_id"] == doc["run_id"]
    assert out["environment"] == doc["environment"]
    first = out["results"][0]
    assert first["samples"]["primary"] == fake.fake_samples(100, "same-cpu", 0, fake.DEFAULT_N)
    assert first["header"]["counter"] == "tsc"
    # Without --samples (or with --no-samples, as before) the samples stay out.
    for lean_args in ((), ("--no-samples",)):
        lean, _ = isobench.json("export", "latest", "--format", "json", *lean_args)
        assert "samples" not in lean["results"][0]
        assert lean["results"] == [{k: v for k, v in r.items() if k != "samples"}
                                   for r in out["results"]]
    # The store by its file name only: an export leaves the machine.
    assert out["db"] == isobench.db.name
