"""Imports point down the data flow (docs/design.md, "One way through").

Every module under python/isobench belongs to one layer, lowest first:

    core      isobench/__init__.py, errors.py, core/: the data model and
              what every stage shares; it imports no stage (data/, files
              other programs run, counts as core)
    store     store/: the SQLite store, export and import
    measure   measure/: runs isob and writes what it prints into the store,
              so it sits above the store
    analysis  analysis/: reads the store, builds the summary document
    render    render/: text, Markdown, HTML, LaTeX and plots of it
    cli       cli/, __main__.py: the commands

A module may import its own layer and any layer below it, never one above.
One edge is forbidden although it points down: analysis reads what the
store holds and never imports measure.  Every import counts: module-level
and inside functions, relative and absolute.  ISOBENCH_LAYERS_ROOT points
the check at another copy of the package (e.g. an older checkout)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parents[1] / "python" / "isobench"

LAYERS = ("core", "store", "measure", "analysis", "render", "cli")
# The first name under isobench/ -> its layer.
LAYER_OF = {"__init__": "core", "errors": "core", "core": "core", "store": "store",
            "measure": "measure", "analysis": "analysis", "render": "render",
            "cli": "cli", "__main__": "cli",
            # data/: files other programs run (Ansible loads the campaign's
            # callback plugin); they import nothing of isobench above core.
            "data": "core"}
FORBIDDEN = {("analysis", "measure")}


def _module_parts(root: Path, path: Path) -> tuple[list[str], bool]:
    """(dotted name as parts, whether it is a package's __init__)."""
    rel = path.relative_to(root).with_suffix("").parts
    if rel[-1] == "__init__":
        return [root.name, *rel[:-1]], True
    return [root.name, *rel], False


def _targets(node: ast.AST, parts: list[str], is_pkg: bool, top: str) -> list[list[str]]:
    """The isobench modules (as parts) an import statement reaches."""
    if isinstance(node, ast.Import):
        return [a.name.split(".") for a in node.names if a.name.split(".")[0] == top]
    assert isinstance(node, ast.ImportFrom)
    if node.level == 0:
        base = (node.module or "").split(".")
        if base[0] != top:
            return []
    else:
        package = parts if is_pkg else parts[:-1]
        base = package[:len(package) - (node.level - 1)]
        base = base + (node.module.split(".") if node.module else [])
    if len(base) > 1:
        return [base]
    # `from .. import x`: x names the stage (or a name of isobench/__init__.py).
    return [[*base, a.name] for a in node.names]


def layer_of(target: list[str]) -> str | None:
    if len(target) < 2:
        return "core"
    return LAYER_OF.get(target[1], "core" if target[1] == "__version__" else None)


def violations(root: Path) -> list[str]:
    """Every import that points up (or across a forbidden edge), and every
    module that belongs to no layer, as "path:line: ..." lines."""
    out = []
    for path in sorted(root.rglob("*.py")):
        parts, is_pkg = _module_parts(root, path)
        own = layer_of(parts if len(parts) > 1 else [*parts, "__init__"])
        where = path.relative_to(root.parent)
        if own is None:
            out.append(f"{where}: belongs to no layer (add it to LAYER_OF)")
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _targets(node, parts, is_pkg, root.name):
                theirs = layer_of(target)
                name = ".".join(target)
                if theirs is None:
                    out.append(f"{where}:{node.lineno}: imports {name}, which belongs to no layer")
                elif LAYERS.index(theirs) > LAYERS.index(own):
                    out.append(f"{where}:{node.lineno}: {own} imports {name} ({theirs}, above)")
                elif (own, theirs) in FORBIDDEN:
                    out.append(f"{where}:{node.lineno}: {own} imports {name} ({theirs}: forbidden)")
    return out


def test_no_import_points_up():
    root = Path(os.environ.get("ISOBENCH_LAYERS_ROOT") or PACKAGE)
    assert root.is_dir(), root
    found = violations(root)
    assert not found, "imports against the layers:\n" + "\n".join(found)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "isobench"
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_the_check_finds_every_kind_of_upward_import(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "__version__ = '0'\n",
        "core/__init__.py": "",
        "core/records.py": "from ..store import Store\n",                    # relative, up
        "store/__init__.py": "def f():\n    from ..analysis import stats\n",  # function-level
        "measure/__init__.py": "import isobench.render.table\n",               # absolute
        "measure/driver.py": "from isobench.store import Store\nfrom .. import core\n",
        "analysis/__init__.py": "",
        "analysis/runs.py": "from ..measure import driver\nfrom . import stats\n",
        "render/table.py": "from .. import cli\nfrom ..analysis import runs\n",
        "plugins.py": "",
    })
    found = violations(root)
    lines = "\n".join(found)
    for line in (
            "isobench/core/records.py:1: core imports isobench.store (store, above)",
            "isobench/store/__init__.py:2: store imports isobench.analysis (analysis, above)",
            "isobench/measure/__init__.py:1: measure imports isobench.render.table (render, above)",
            "isobench/analysis/runs.py:1: analysis imports isobench.measure (measure: forbidden)",
            "isobench/render/table.py:1: render imports isobench.cli (cli, above)",
            "isobench/plugins.py: belongs to no layer (add it to LAYER_OF)"):
        assert line in found, lines
    # What points down is left alone: measure -> store, measure -> core,
    # analysis -> analysis, render -> analysis.
    assert len(found) == 6, lines
