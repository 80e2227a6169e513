"""The README a newcomer follows stays true: every benchmark and mechanism
isob knows has its line, and the options it says `isobench run` passes on
are options of `isobench run`."""

import json
import re
import subprocess

import pytest

from isobench.measure import driver

from conftest import REPO

ISOB = REPO / "build" / "isob"
README = (REPO / "README.md").read_text()


def _catalog():
    if not ISOB.exists():
        pytest.skip("build/isob is not built (make build)")
    p = subprocess.run([str(ISOB), "list", "--json"], capture_output=True, text=True,
                       timeout=60, check=True)
    return json.loads(p.stdout)


def _table_names(heading):
    """The backticked names in the first column of the table under heading."""
    part = README.split(heading, 1)[1].split("\n#", 1)[0]
    names = set()
    for line in part.splitlines():
        if line.startswith("| `"):
            names |= set(re.findall(r"`([a-z0-9-]+)`", line.split("|")[1]))
    return names


def test_every_benchmark_has_its_line():
    # kv-server, lwc-serve and lwc-conns are driven from Python (isob serve
    # under a load generator), not listed by isob.
    names = {b["name"] for b in _catalog()["benchmarks"]} | {
        b.name for b in driver.PYTHON_BENCHMARKS}
    assert names == _table_names("### Benchmarks")


def test_every_mechanism_says_what_it_needs():
    names = {m["name"] for m in _catalog()["mechanisms"]}
    assert names == _table_names("### Mechanisms and what each needs")


def test_the_run_options_the_readme_names_exist(isobench):
    p = isobench("run", "--help")
    assert p.returncode == 0
    part = README.split("### `isobench` or `build/isob`?", 1)[1].split("Everything else", 1)[0]
    named = set(re.findall(r"`(--[a-z-]+)", part))
    assert {"--counter", "--scope", "--n", "--quick"} <= named
    for option in named:
        assert option in p.stdout, option


def test_license_and_citation_are_there():
    assert (REPO / "LICENSE").read_text().startswith("MIT License")
    cff = (REPO / "CITATION.cff").read_text()
    assert "cff-version: 1.2.0" in cff and "license: MIT" in cff


SEEDS_ALL = (REPO / "docs" / "seeds.md").read_text()
SEEDS = SEEDS_ALL.split("## Claims judged here")[0]  # the experiments' tables
STATUSES = ("runs", "partly", "not", "reference only", "in progress")


def test_the_sources_table_gives_every_experiment_a_status_and_is_linked():
    rows = [line for line in SEEDS.splitlines()
            if line.startswith("| ") and not line.startswith(("| experiment", "|---"))]
    assert len(rows) == 40  # Konrad 10, Morello 6, SEIMI 9, lwC 10, CHERI microkernel 5
    for line in rows:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 3, line  # a | inside a cell would split it
        assert cells[1].startswith(STATUSES), line
    assert "docs/seeds.md" in README
    # The claims judged are listed too, each with its section.
    claims_part = SEEDS_ALL.split("## Claims judged here")[1]
    for section in ("refmon", "lwc-serve", "lwc-switch", "lwc-monitor", "lwc-tls"):
        assert f"| {section} |" in claims_part


# Notes outside the repository a user does not have; cite the papers (section,
# table).  Assembled here so that this file does not match itself.
OUTSIDE = ("seed-" + "experiments", "../" + "shared")


def test_nothing_cites_notes_outside_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    hits = []
    for name in files:
        path = REPO / name
        if not path.is_file() or path.suffix in (".sqlite", ".png", ".gz", ".zst"):
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        hits += [f"{name}: {o}" for o in OUTSIDE if o in text]
    assert not hits, hits


def test_what_the_sources_table_says_runs_exists():
    # Every backticked single word in the "how" of a row that runs (or partly),
    # before any "in progress", is a benchmark or mechanism isob lists, or a
    # Python-side benchmark or command of isobench.
    cat = _catalog()
    known = ({b["name"] for b in cat["benchmarks"]} | {m["name"] for m in cat["mechanisms"]}
             | {"lwc-serve", "lwc-conns", "kv-server", "scrape"})
    seen = set()
    for line in SEEDS.splitlines():
        cells = line.split("|")
        if len(cells) < 4 or not cells[2].strip().startswith(("runs", "partly")):
            continue
        for name in re.findall(r"`([a-z][a-z0-9-]*)`", cells[3].split("in progress")[0]):
            seen.add(name)
            assert name in known, (name, line)
    assert {"switch", "oslat", "lwc-serve", "refmon", "scrape"} <= seen
