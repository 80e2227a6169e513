"""Reviewed run fixtures (fixtures/*_run.json) loaded into a fresh store.

flawed_run.json triggers every soundness check, clean_run.json none; both
are in the shape `isobench export --format json` writes, so they load with
Store.import_run like a run exported on another machine.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from isobench.analysis import runs
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
