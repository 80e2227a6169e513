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
the check at another copy of the package (e.g. an older checkout).

Inside analysis and render, floors, lowest first:

    kit       analysis/kit/, render/kit/: what every family and page shares
    families  analysis/families/, render/families/: one module per family
    pages     the rest (summary, sections, checks, compare, ...; console,
              figures, report, paper, ...): what a command shows

A module imports its own floor and the floors below in its own layer,
never one above (render may import any floor of analysis: it is a layer
below).  Beside the layers: no import of isobench inside a function in
analysis or render (an import moved into a function hides a circle), no
`_private` name imported from another isobench module, no circle of
imports anywhere in the package, and no module of core, analysis or render
over MAX_LINES lines."""

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

FLOORS = ("kit", "families", "pages")
# The layers that are built in floors.
FLOORED = ("analysis", "render")


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


def floor_of(target: list[str]) -> str | None:
    """The floor of a module (as parts) of analysis or render, else None."""
    if len(target) < 3 or target[1] not in FLOORED:
        return None
    return target[2] if target[2] in FLOORS[:2] else "pages"


def _resolve(root: Path, target: list[str]) -> list[str]:
    """target, cut to the module that holds it (`from .kit.runs import X`
    names runs; `from .kit import runs` names runs too)."""
    while len(target) > 1:
        p = root.parent.joinpath(*target)
        if p.with_suffix(".py").is_file() or (p / "__init__.py").is_file():
            return target
        target = target[:-1]
    return target


def _imports(root: Path):
    """(path, parts, node, target parts, inside a function) of every import of
    the package in the package."""
    for path in sorted(root.rglob("*.py")):
        parts, is_pkg = _module_parts(root, path)
        tree = ast.parse(path.read_text(), str(path))
        inside = set()
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside |= {id(n) for n in ast.walk(fn)}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _targets(node, parts, is_pkg, root.name):
                if isinstance(node, ast.ImportFrom) and target[-1] not in {
                        a.name for a in node.names}:
                    # `from .kit import runs, units`: each name that is a
                    # module is imported itself.
                    subs = [_resolve(root, [*target, a.name]) for a in node.names]
                    targets = [t for t in subs if len(t) > len(target)] or [target]
                    if len(targets) < len(subs):
                        targets.append(_resolve(root, target))
                else:
                    targets = [_resolve(root, target)]
                for t in targets:
                    yield path, parts, node, t, id(node) in inside


def floor_violations(root: Path) -> list[str]:
    """Imports inside analysis and render that point to a higher floor of the
    same layer, imports of isobench inside a function there, and `_private`
    names imported from another module, as "path:line: ..." lines."""
    out = []
    for path, parts, node, target, in_function in _imports(root):
        where = f"{path.relative_to(root.parent)}:{node.lineno}"
        name = ".".join(target)
        own, theirs = floor_of(parts), floor_of(target)
        if own and theirs and parts[1] == target[1] and FLOORS.index(theirs) > FLOORS.index(own):
            out.append(f"{where}: {parts[1]} {own} imports {name} ({theirs}, above)")
        if in_function and len(parts) > 1 and parts[1] in FLOORED:
            out.append(f"{where}: imports {name} inside a function")
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    out.append(f"{where}: imports {a.name}, private to {name}")
    # One line per statement and finding (a statement reaching several
    # modules is seen once per module).
    return list(dict.fromkeys(out))


def circles(root: Path) -> list[list[str]]:
    """Every circle of imports in the package (each strongly connected set of
    two or more modules, or a module that imports itself), sorted."""
    edges: dict[str, set[str]] = {}
    for path, parts, node, target, _ in _imports(root):
        me, them = ".".join(parts), ".".join(target)
        edges.setdefault(me, set())
        if them != root.name:
            edges[me].add(them)
    # Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on, stack, found = set(), [], []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                scc = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    scc.append(w)
                    if w == v:
                        break
                if len(scc) > 1 or v in edges.get(v, ()):
                    found.append(sorted(scc))
    return sorted(found)


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


def _root() -> Path:
    root = Path(os.environ.get("ISOBENCH_LAYERS_ROOT") or PACKAGE)
    assert root.is_dir(), root
    return root


def test_floors_inside_analysis_and_render():
    found = floor_violations(_root())
    assert not found, "imports against the floors:\n" + "\n".join(found)


def test_no_circle_of_imports():
    found = circles(_root())
    assert not found, "circles of imports:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_check_finds_every_kind_of_floor_violation_and_circle(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "__version__ = '0'\n",
        "analysis/__init__.py": "",
        "analysis/kit/__init__.py": "",
        "analysis/kit/runs.py": "from ..families import kv\n",                   # kit -> families
        "analysis/kit/units.py": "from .. import summary\n",                      # kit -> pages
        "analysis/families/__init__.py": "",
        "analysis/families/kv.py": "from ..kit import runs\nfrom ..summary import x\n",
        "analysis/summary.py": "from .families import kv\nfrom .kit.units import _step\n",
        "render/__init__.py": "",
        "render/kit/__init__.py": "",
        "render/kit/table.py": "def f():\n    from ...analysis import summary\n",
        "render/families/__init__.py": "",
        "render/families/kv.py": "from ..kit import table\nfrom ...analysis.families import kv\n",
        "render/report.py": "from .families import kv\nfrom .kit import table\n",
    })
    found = floor_violations(root)
    lines = "\n".join(found)
    for line in (
            "isobench/analysis/kit/runs.py:1: analysis kit imports isobench.analysis.families.kv "
            "(families, above)",
            "isobench/analysis/kit/units.py:1: analysis kit imports isobench.analysis.summary "
            "(pages, above)",
            "isobench/analysis/families/kv.py:2: analysis families imports "
            "isobench.analysis.summary (pages, above)",
            "isobench/analysis/summary.py:2: imports _step, private to isobench.analysis.kit.units",
            "isobench/render/kit/table.py:2: imports isobench.analysis.summary inside a function"):
        assert line in found, lines
    # What points down is left alone: families -> kit, pages -> families
    # and kit, render's floors -> any floor of analysis.
    assert len(found) == 5, lines
    assert circles(root) == [["isobench.analysis.families.kv", "isobench.analysis.kit.runs",
                              "isobench.analysis.kit.units", "isobench.analysis.summary"]]


# A module longer than this holds more than one idea: split it along its
# seams (core/student.py and core/ranktest.py came out of stats.py).
MAX_LINES = 800
SIZED = ("core", "analysis", "render")


def long_modules(root: Path) -> list[str]:
    """The modules of core, analysis and render over MAX_LINES lines."""
    out = []
    for path in sorted(root.rglob("*.py")):
        parts, _ = _module_parts(root, path)
        n = len(path.read_text().splitlines())
        if len(parts) > 1 and parts[1] in SIZED and n > MAX_LINES:
            out.append(f"{path.relative_to(root.parent)}: {n} lines (at most {MAX_LINES})")
    return out


def test_no_module_too_long():
    found = long_modules(_root())
    assert not found, "\n".join(found)


def test_the_length_check_counts_lines(tmp_path):
    root = _package(tmp_path, {"core/stats.py": "x = 1\n" * (MAX_LINES + 1),
                               "render/kit/table.py": "x = 1\n" * MAX_LINES,
                               "measure/campaign.py": "x = 1\n" * (MAX_LINES + 1)})
    assert long_modules(root) == [f"isobench/core/stats.py: {MAX_LINES + 1} lines (at most 800)"]
