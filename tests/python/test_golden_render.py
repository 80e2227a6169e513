"""A fixed store rendered by `isobench show --wide` and `isobench report`,
compared with the text committed under golden/: what a run's console output
and report say stays the same across a change that should not touch them
(a module moved, a helper shared).

The store holds four runs: the reviewed clean run (five repetitions, a kv
server, two data sizes), the flawed run (every finding), a synthetic run
mixing the call kinds, lwC, workload and lwC-serve families, and a synthetic
run of the OS families (oslat, ping-pong, delegation, scheduling).  Compared:
the console text, the report's file list, and the text of every page
(HTML with its embedded images cut out, Markdown, LaTeX, CSV, the plot
captions) and the digest of stats.json, the summary document.  Images themselves are left out: their bytes follow the
plotting library, not isobench.  The report folder's path is replaced by
<OUT> and the store's by <DB>.

ISOBENCH_GOLDEN_UPDATE=1 rewrites the golden files instead (then look at
`git diff tests/python/golden` and say why each change is right)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
from pathlib import Path

import pytest

from fixture_runs import fixture, import_doc, with_repetitions
from os_fixtures import _doc as os_doc, delegate_run, oslat_run, pingpong_run, sched_run
from synthetic_runs import run_doc
from test_callkinds import kind_results
from test_lwc_sections import create_results, refmon_results, switch_results
from test_lwcserve import _points
from test_oslat_section import FACTORS
from test_report import with_kv_server, with_second_kv_size
from test_workload_sections import (cpu_results, mem_results, pipe_results, scale_results,
                                    worksweep_results)

GOLDEN = Path(__file__).resolve().parent / "golden" / "render"
UPDATE = os.environ.get("ISOBENCH_GOLDEN_UPDATE") == "1"

# Pages compared as text; the plots' images are not (see above).
TEXT_SUFFIXES = (".html", ".md", ".tex", ".csv", ".json", ".txt")


def _runs() -> list[tuple[str, dict]]:
    mixed = (kind_results() + create_results() + switch_results() + refmon_results()
             + worksweep_results() + cpu_results() + mem_results() + pipe_results()
             + scale_results()
             + _points({("shared", 256): (67000.0, None, {}),
                        ("prefork", 256): (16500.0, 30.0, {}),
                        ("rollback", 256): (16000.0, 48.0, {}),
                        ("shared", 1): (60000.0, None, {}),
                        ("prefork", 1): (15000.0, None, {}),
                        ("rollback", 1): (2000.0, None, {})}))
    os_results = [r for run in (oslat_run(FACTORS), pingpong_run(), delegate_run(), sched_run())
                  for r in run["results"]]
    return [
        ("clean", with_repetitions(with_kv_server(with_second_kv_size(fixture("clean_run"))), 5)),
        ("flawed", fixture("flawed_run")),
        ("families", run_doc(mixed)),
        ("os", os_doc(os_results, ["isobench", "run", "oslat", "pingpong", "delegate", "sched"])),
    ]


def _scrub(text: str, out: Path, db: Path) -> str:
    text = text.replace(str(out), "<OUT>").replace(str(db), "<DB>")
    # Embedded plots: their bytes follow the plotting library.
    return re.sub(r"data:image/(png|svg\+xml);base64,[A-Za-z0-9+/=]+", "data:image/\\1;base64,…",
                  text)


def _check(name: str, got: str, mismatched: list[str]) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got)
        return
    assert path.exists(), f"no golden file {path}: run with ISOBENCH_GOLDEN_UPDATE=1"
    if path.read_text() != got:
        mismatched.append(name)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """{run name: (console text, {report file: text or None for an image})}.

    The commands run in this process (`isobench.cli.main`), and a figure's
    save writes a stand-in instead of drawing: the figures are built, their
    captions and file names are the report's, and the test takes seconds
    instead of minutes of rasterizing on a busy machine."""
    from matplotlib.figure import Figure

    from isobench.cli import main

    def stand_in(self, fname, *args, **kwargs):
        Path(fname).write_bytes(b"stand-in plot\n")

    tmp = tmp_path_factory.mktemp("golden")
    db = tmp / "isobench.sqlite"
    out: dict[str, tuple[str, dict[str, str | None]]] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Figure, "savefig", stand_in)
        mp.setenv("ISOBENCH_DB", str(db))
        for name, doc in _runs():
            run_id = import_doc(db, doc)
            console = io.StringIO()
            with contextlib.redirect_stdout(console):
                assert main(["show", str(run_id), "--wide"]) == 0
            folder = tmp / f"report-{name}"
            written = io.StringIO()
            with contextlib.redirect_stdout(written):
                assert main(["report", str(run_id), "-o", str(folder), "--json"]) == 0
            files: dict[str, str | None] = {}
            for f in json.loads(written.getvalue())["files"]:
                text = (folder / f).read_text() if f.endswith(TEXT_SUFFIXES) else None
                files[f] = None if text is None else _scrub(text, folder, db)
            out[name] = (_scrub(console.getvalue(), folder, db), files)
    return out


@pytest.mark.parametrize("name", ["clean", "flawed", "families", "os"])
def test_console_and_report_are_the_golden_ones(rendered, name):
    console, files = rendered[name]
    mismatched: list[str] = []
    _check(f"{name}/console.txt", console, mismatched)
    _check(f"{name}/files.json", json.dumps(sorted(files), indent=1) + "\n", mismatched)
    for f, text in sorted(files.items()):
        if f == "stats.json":
            # The summary document itself (a megabyte for the larger runs):
            # its digest; the pages beside it show what it holds.
            _check(f"{name}/report/stats.json.sha256",
                   hashlib.sha256(text.encode()).hexdigest() + "\n", mismatched)
        elif text is not None:
            _check(f"{name}/report/{f}", text, mismatched)
    if not UPDATE:
        have = {p.relative_to(GOLDEN / name / "report").as_posix()
                for p in (GOLDEN / name / "report").rglob("*") if p.is_file()}
        extra = have - {f"{f}.sha256" if f == "stats.json" else f
                        for f, t in files.items() if t is not None}
        assert not extra, f"golden files the report no longer writes: {sorted(extra)}"
    assert not mismatched, (f"differs from tests/python/golden/render/{name}: {mismatched} "
                            "(ISOBENCH_GOLDEN_UPDATE=1 rewrites them; then read the diff)")
