"""`isobench scrape`: the expected table, the words of the matrix, and the
command against the real native driver (build/isob) and a broken one.

Counts, words and exit statuses only; nothing here depends on how long a
read took."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from conftest import REPO, Isobench, assert_one_error_line

from isobench.measure import scrape
from isobench.errors import UsageError

ISOB = REPO / "build" / "isob"
DOC = REPO / "docs" / "scrape.md"


@pytest.fixture
def real(tmp_path) -> Isobench:
    if not ISOB.exists():
        pytest.fail(f"{ISOB} is missing: run `make` (make test builds it first)")
    ib = Isobench(tmp_path)
    ib.env["ISOBENCH_ISOB"] = str(ISOB)
    return ib


# ---- the expected table ----

def test_shipped_table_loads_and_every_rule_says_why():
    rules = scrape.load_expected(scrape.EXPECTED)
    assert len(rules) >= 10
    assert all(r.why and r.expect in scrape.EXPECTABLE for r in rules)


def _doc_rules() -> list[tuple[str, ...]]:
    """The rules table of docs/scrape.md, between its markers."""
    text = DOC.read_text()
    m = re.search(r"<!-- expected-table -->\n(.*?)<!-- /expected-table -->", text, re.S)
    assert m, "docs/scrape.md has no expected-table markers"
    rows = []
    for line in m[1].splitlines():
        cells = [c.strip().strip("`") for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) < 5 or cells[0] in ("target", "") or set(cells[0]) <= set("-"):
            continue
        rows.append(tuple(c.replace("\\|", "|") for c in cells[:5]))
    return rows


def test_docs_show_the_table_the_code_uses():
    """docs/scrape.md explains the rules one by one: they must be the
    shipped table's rules, in its order."""
    shipped = [(r.target, r.identity, r.method, r.expect, r.when)
               for r in scrape.load_expected(scrape.EXPECTED)]
    assert _doc_rules() == shipped


def _table(tmp_path: Path, *rows: str, header: str = "target,identity,method,expect,when,why") -> Path:
    p = tmp_path / "expected.csv"
    p.write_text("# a test table\n" + header + "\n" + "\n".join(rows) + "\n")
    return p


@pytest.mark.parametrize("rows, message", [
    (("plain,same-uid,mem,found,,x,extra",), "7 fields"),
    (("plain,nobody,mem,found,,x",), "identity 'nobody'"),
    (("plain,same-uid,read,found,,x",), "method 'read'"),
    (("plain,same-uid,mem,leaks,,x",), "expect 'leaks'"),
    (("plain,same-uid,mem,found,yama>4,x",), "unknown condition 'yama>4'"),
    (("plain,same-uid,mem,found,,",), "every rule says why"),
    ((",same-uid,mem,found,,x",), "must not be empty"),
])
def test_bad_rows_are_refused_with_their_line(tmp_path, rows, message):
    path = _table(tmp_path, *rows)
    with pytest.raises(UsageError) as e:
        scrape.load_expected(path)
    assert message in str(e.value)
    assert f"{path}:3" in str(e.value)


def test_bad_header_and_missing_file(tmp_path):
    with pytest.raises(UsageError, match="header must be"):
        scrape.load_expected(_table(tmp_path, "plain,same-uid,mem,found,,x", header="a,b,c,d,e,f"))
    with pytest.raises(UsageError, match="cannot read"):
        scrape.load_expected(tmp_path / "none.csv")


# ---- words and rules, on synthetic scrape lines ----

def _method(name, outcome, errno=None, found=0, at=False, nbytes=0, pages_failed=0):
    return {"method": name, "how": scrape.METHOD_HOW[name], "outcome": outcome, "errno": errno,
            "bytes": nbytes, "planned": 4096 * 10, "ranges": 3, "pages_failed": pages_failed,
            "fail_errno": "EFAULT" if pages_failed else None, "found": found, "at_canary": at,
            "first_found": "0x1000" if found else None, "note": None}


def _line(target="plain", euid=0, yama=None, status="ok", cell=None, unavailable=()):
    """A scrape line whose every method of every identity is `cell`
    (default: found at the canary); identities in `unavailable` are not."""
    cells = []
    for ident in scrape.IDENTITIES:
        if ident in unavailable:
            cells.append({"identity": ident, "available": False, "why": "needs root",
                          "methods": [], "intact_after": None})
            continue
        ms = [cell(m) if cell else _method(m, "granted", found=1, at=True, nbytes=40960)
              for m in scrape.METHODS]
        cells.append({"identity": ident, "available": True, "why": None, "methods": ms,
                      "intact_after": True})
    return {"type": "scrape", "target": target, "status": status, "reason": None, "euid": euid,
            "yama_ptrace_scope": yama, "cells": cells if status == "ok" else []}


def test_words_of_the_cells():
    assert scrape.observe(_line(), "root", "mem")[0] == "found"
    missed = _line(cell=lambda m: _method(m, "granted", nbytes=4096, pages_failed=2))
    word, short, detail = scrape.observe(missed, "root", "vm_readv")
    assert word == "missed" and "2 pages unreadable (EFAULT)" in detail
    denied = _line(cell=lambda m: _method(m, "denied", errno="EPERM"))
    assert scrape.observe(denied, "root", "ptrace")[:2] == ("denied", "EPERM")
    assert scrape.observe(_line(unavailable=("root",)), "root", "mem")[0] == "untested"
    assert scrape.observe(_line(status="skipped"), "root", "mem")[0] == "skipped"
    assert scrape.observe(_line(status="failed"), "root", "mem")[0] == "failed"
    copy = _line(cell=lambda m: _method(m, "granted", found=2, at=False, nbytes=40960))
    word, _, detail = scrape.observe(copy, "same-uid", "mem")
    assert word == "found" and "2 copies" in detail


def _expect(line, identity, method="mem"):
    rules = scrape.load_expected(scrape.EXPECTED)
    cells = scrape.judge([line], rules, line["euid"], line["yama_ptrace_scope"])
    return next(c for c in cells if c.identity == identity and c.method == method)


def test_machine_dependent_rules():
    # Yama absent or 0: the same uid finds; 1 and up: it is refused.
    assert _expect(_line(yama=None), "same-uid").expected == "found"
    assert _expect(_line(yama=0), "same-uid").expected == "found"
    assert _expect(_line(yama=1), "same-uid").expected == "denied"
    assert _expect(_line(yama=2), "root").expected == "found"
    assert _expect(_line(yama=3), "root").expected == "denied"
    # Not root: the identities that need it are untested, the others still expected.
    user = _line(euid=1000, unavailable=("root", "root-no-ptrace", "other-uid"))
    for ident in ("root", "root-no-ptrace", "other-uid"):
        c = _expect(user, ident)
        assert (c.expected, c.observed, c.matches) == ("untested", "untested", True)
    assert _expect(user, "same-uid").expected == "found"
    # A target that cannot run here: skipped, whatever the identity.
    assert _expect(_line(target="mpk", status="skipped"), "root").expected == "skipped"
    # The process mechanisms' servers are non-dumpable; mprotect's heap is
    # PROT_NONE to process_vm_readv.
    assert _expect(_line(target="seccomp"), "same-uid").expected == "denied"
    assert _expect(_line(target="process-pipe"), "root").expected == "found"
    assert _expect(_line(target="mprotect"), "same-uid", "vm_readv").expected == "missed"
    assert _expect(_line(target="mprotect"), "same-uid", "mem").expected == "found"


def test_a_cell_no_rule_covers_differs(tmp_path):
    rules = scrape.load_expected(_table(tmp_path, "plain,root,mem,found,,only this one"))
    cells = scrape.judge([_line()], rules, 0, None)
    assert sum(c.matches for c in cells) == 1
    uncovered = next(c for c in cells if c.identity == "userns")
    assert uncovered.expected is None and not uncovered.matches
    text = scrape.render([_line()], cells, tmp_path / "expected.csv", [])
    assert "no rule of the table covers it" in text


def test_a_changed_region_is_a_broken_promise():
    line = _line()
    line["cells"][2]["intact_after"] = False
    assert scrape.broken_promises([line]) == [
        "plain/same-uid: the canary's region changed while it was read"]
    assert scrape.broken_promises([_line()]) == []


# ---- the command, against the real driver ----

def test_plain_matches_the_table(real):
    doc, p = real.json("scrape", "--target", "plain", "--json", "-q")
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr)
    assert doc["schema_version"] == scrape.SCHEMA_VERSION
    assert [t["target"] for t in doc["targets"]] == ["plain"]
    assert len(doc["cells"]) == len(scrape.IDENTITIES) * len(scrape.METHODS)
    assert doc["differences"] == [] and doc["broken_promises"] == []
    target = doc["targets"][0]
    assert target["status"] == "ok" and target["maps"]["canary_in_plan"]
    assert target["maps"]["bytes"] <= target["budget"]
    words = {(c["identity"], c["method"]): c["observed"] for c in doc["cells"]}
    # Whatever the machine: a non-dumpable target refuses the same uid,
    # and nothing a reader did changed the canary's region.
    assert {words[("same-uid-nondumpable", m)] for m in scrape.METHODS} == {"denied"}
    for c in target["cells"]:
        assert c["intact_after"] in (True, None)
        if c["available"]:
            assert c["intact_after"] is True
    if os.geteuid() == 0:
        assert {words[("other-uid", m)] for m in scrape.METHODS} == {"denied"}
    if target["yama_ptrace_scope"] in (None, 0):
        assert {words[("same-uid", m)] for m in scrape.METHODS} == {"found"}
        for c in target["cells"]:
            if c["identity"] == "same-uid":
                assert all(m["at_canary"] and m["found"] == 1 for m in c["methods"])


def test_every_target_here_matches_the_table(real):
    # The whole matrix on this machine: every mechanism isob lists, so that
    # a new mechanism without its rule (or with a wrong one) fails here.
    doc, p = real.json("scrape", "--json", "-q")
    listed = {t["target"] for t in doc["targets"]}
    assert {"plain", "pipe-writer", "pipe-reader", "direct", "lwc", "seccomp"} <= listed
    assert doc["differences"] == [] and doc["broken_promises"] == [], doc["differences"][:3]
    assert p.returncode == 0, p.stderr


def test_a_table_that_disagrees_names_the_cell(real, tmp_path):
    # A non-dumpable process "found" by the same uid: the opposite of the
    # kernel's rule, on any machine (root or not, any Yama).
    table = tmp_path / "wrong.csv"
    rows = scrape.EXPECTED.read_text().splitlines()
    header = next(i for i, l in enumerate(rows) if l.startswith("target,"))
    rows.insert(header + 1, "plain,same-uid-nondumpable,mem,found,,a wrong expectation for the test")
    table.write_text("\n".join(rows) + "\n")
    p = real("scrape", "--target", "plain", "--expected", str(table), "-q")
    assert p.returncode == 3, (p.stdout[-2000:], p.stderr)
    assert "1 cell differ" in p.stdout
    assert re.search(r"plain / same-uid-nondumpable / mem: observed denied .*expected found",
                     p.stdout)
    assert "found !" not in p.stdout and "denied EACCES !found" in p.stdout
    doc, p = real.json("scrape", "--target", "plain", "--expected", str(table), "--json", "-q")
    assert p.returncode == 3 and doc["exit_status"] == 3
    assert [(d["target"], d["identity"], d["method"]) for d in doc["differences"]] == [
        ("plain", "same-uid-nondumpable", "mem")]


def test_bad_input_is_one_line(real, tmp_path):
    assert "unknown target 'nosuch'" in assert_one_error_line(real("scrape", "--target", "nosuch"))
    assert_one_error_line(real("scrape", "--expected", str(tmp_path / "missing.csv")))
    bad = _table(tmp_path, "plain,same-uid,mem,maybe,,x")
    assert "expect 'maybe'" in assert_one_error_line(real("scrape", "--expected", str(bad)))
    assert_one_error_line(real("scrape", "--max-bytes", "12"))
    assert_one_error_line(real("scrape", "--timeout", "-1"))


def test_a_driver_that_cannot_scrape_fails_the_target(isobench):
    """The fake driver knows no scrape: the target fails with isob's own
    words, exit 1, and the JSON still has every cell (as failed)."""
    doc, p = isobench.json("scrape", "--target", "plain", "--json", "-q")
    assert p.returncode == 1
    assert doc["failed_targets"] == ["plain"]
    assert "exit status 2" in doc["targets"][0]["reason"]
    assert {c["observed"] for c in doc["cells"]} == {"failed"}


def test_root_without_cap_sys_ptrace_expects_denied():
    """isob as root in a container that drops CAP_SYS_PTRACE: its root
    reader is refused, and the table expects it."""
    line = _line(cell=lambda m: _method(m, "denied", errno="EPERM"))
    for c in line["cells"]:
        c["cap_sys_ptrace"] = False
    cell = _expect(line, "root")
    assert (cell.expected, cell.observed, cell.matches) == ("denied", "denied", True)
    line["cells"][0]["cap_sys_ptrace"] = True
    assert _expect(line, "root").expected == "found"
