"""The benchmark records (core/benchmarks.py): one per benchmark, read by
every name-keyed table above them, and held to what isob says of the
options of the benchmarks it runs."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from pathlib import Path

import pytest

from isobench.analysis.kit import runs
from isobench.analysis import sections as analysis_sections
from isobench.cli import build_parser
from isobench.core import benchmarks
from isobench.measure import kvserver, lwcserve, runner
from isobench.render import sections as render_sections

ISOB = Path(__file__).resolve().parents[2] / "build" / "isob"


def test_one_frozen_record_per_benchmark():
    names = [b.name for b in benchmarks.RECORDS]
    assert len(names) == len(set(names))
    assert set(names) == set(benchmarks.BY_NAME)
    with pytest.raises(dataclasses.FrozenInstanceError):
        benchmarks.RECORDS[0].kind = benchmarks.MACRO  # type: ignore[misc]
    for b in benchmarks.RECORDS:
        assert b.kind in (benchmarks.MICRO, benchmarks.MACRO), b.name
        assert b.full_section is None or b.full_section in b.sections, b.name


def test_the_tables_read_the_records():
    assert runs.BENCHMARK_KINDS == {b.name: b.kind for b in benchmarks.RECORDS}
    assert runs.OUTPUT_PARAMS >= benchmarks.COMMON_OUTPUT_PARAMS
    for b in benchmarks.RECORDS:
        assert b.output_params <= runs.OUTPUT_PARAMS, b.name
        assert (b.name in runner.PLACED) == b.placed
        assert (b.name in runner.SIZED) == b.sized
        assert runner.LONG_TIMEOUTS.get(b.name) == b.timeout
        assert runner.BENCHMARK_REPEAT.get(b.name) == b.repeat
        assert runs.HEADLINE_PHASE.get(b.name) == b.headline_phase
    # The benchmarks Python drives have records too.
    for name in (kvserver.BENCHMARK, *lwcserve.BENCHMARKS):
        assert benchmarks.get(name) is not None, name


def test_the_section_registries_name_the_records_sections():
    built = [name for name, _ in analysis_sections.SECTIONS]
    assert len(built) == len(set(built))
    assert set(built) == set(benchmarks.sections())
    # Every section shown has a renderer; kv's is drawn by the tables and
    # plots that read it (render/kit/table.py, paper.py, plots.py).
    assert set(render_sections.RENDERERS) <= set(built)
    # Every section a record shows its results in full in has a text block.
    for b in benchmarks.RECORDS:
        if b.full_section:
            assert render_sections.RENDERERS[b.full_section].text is not None, b.name


def _help_text(text: str) -> str:
    return " ".join(text.split())


def test_run_help_says_each_option_as_the_records_do():
    text = _help_text(build_parser("run")._subparsers._group_actions[0]
                      .choices["run"].format_help())
    for flag in benchmarks.option_flags():
        for b in benchmarks.RECORDS:
            o = b.option(flag)
            if o is not None:
                # argparse may break a line at a hyphen: compare without spaces.
                assert o.text.replace(" ", "") in text.replace(" ", ""), (b.name, flag)


def test_options_agree_with_what_isob_lists():
    """Each option isob lists for a benchmark is in its record with isob's
    default, and each option a record gives a benchmark isob runs is one isob
    lists (oslat's --primitive and --confine isob lists as its primitives and
    confinements; --sizes is the harness's, see Benchmark.sized)."""
    if not ISOB.exists():
        pytest.skip(f"{ISOB} is not built (`make build`): isob's own listing cannot be read")
    listing = json.loads(subprocess.run([str(ISOB), "list", "--json"], capture_output=True,
                                        text=True, timeout=120, check=True).stdout)
    listed = {b["name"]: b for b in listing["benchmarks"]}
    for name, entry in listed.items():
        record = benchmarks.get(name)
        assert record is not None, f"isob lists {name}, which has no record"
        theirs = {o["name"]: o for o in entry.get("options") or ()}
        for flag, o in theirs.items():
            if flag == "--sizes":
                assert record.sized, name
                continue
            ours = record.option(flag)
            assert ours is not None, f"{name} {flag}: isob lists it, its record does not"
            assert ours.default == o["default"], (name, flag, ours.default, o["default"])
        for o in record.options:
            if o.flag == "--primitive" and entry.get("primitives"):
                continue
            if o.flag == "--confine" and entry.get("takes_confine"):
                continue
            assert o.flag in theirs, f"{name} {o.flag}: its record has it, isob does not list it"
