"""Reviewed run fixtures (fixtures/*_run.json) loaded into a fresh store.

flawed_run.json triggers every soundness check, clean_run.json none; both
are in the shape `isobench export --format json` writes, so they load with
Store.import_run like a run exported on another machine.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from isobench.analysis.kit import runs
from isobench.store import Store

from conftest import FIXTURES


def fixture(name: str) -> dict:
    """A fresh copy of fixtures/<name>.json, safe to change."""
    return copy.deepcopy(json.loads((FIXTURES / f"{name}.json").read_text()))


def import_doc(db: Path, doc: dict) -> int:
    with Store.open(db, create=True) as s:
        return s.import_run(doc)


def load_doc(tmp_path: Path, doc: dict, name: str = "runs.sqlite") -> runs.RunData:
    db = tmp_path / name
    run_id = import_doc(db, doc)
    with Store.open(db, create=False) as s:
        return runs.load_run(s, run_id)


def with_repetitions(doc: dict, n: int) -> dict:
    """doc with every configuration's repetitions repeated up to n (copies of
    the ones it has, in turn): clean_run.json holds two, a full run five."""
    groups: dict[tuple, list[dict]] = {}
    for r in doc["results"]:
        key = (r["benchmark"], r["mechanism"],
               json.dumps({k: v for k, v in (r.get("params") or {}).items()
                           if k not in runs.OUTPUT_PARAMS}, sort_keys=True))
        groups.setdefault(key, []).append(r)
    for reps in groups.values():
        have = sorted(reps, key=lambda r: r.get("repetition") or 1)
        for rep in range(len(have) + 1, n + 1):
            doc["results"].append({**copy.deepcopy(have[(rep - 1) % len(have)]),
                                   "repetition": rep})
    doc.setdefault("options", {})["repeat"] = max(n, doc.get("options", {}).get("repeat", 1))
    return doc
