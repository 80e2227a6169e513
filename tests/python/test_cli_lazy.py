"""The cli imports a command group's module only when one of its commands
runs: `isobench --help` and a usage error need neither the analysis nor
the renderers (cli/__init__.py builds the parser in two steps)."""

from __future__ import annotations

import subprocess
import sys

from conftest import PYTHON_DIR

PROBE = """
import contextlib, io, sys
from isobench.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as e:
        code = e.code
print(code)
print(" ".join(sorted(m for m in sys.modules if m.startswith("isobench."))))
"""


def _imported(*args: str) -> tuple[int, set[str]]:
    p = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                       timeout=120, env={"PYTHONPATH": str(PYTHON_DIR)})
    assert p.returncode == 0, p.stderr
    code, modules = p.stdout.splitlines()
    return int(code), set(modules.split())


def _of(modules: set[str], *packages: str) -> set[str]:
    return {m for m in modules if m.startswith(tuple(f"isobench.{p}" for p in packages))}


def test_help_and_usage_errors_import_no_command_group():
    for args, code in ((("--help",), 0), (("bogus",), 2), ((), 2)):
        got, modules = _imported(*args)
        assert got == code, args
        assert not _of(modules, "analysis", "render"), (args, _of(modules, "analysis", "render"))
        assert not _of(modules, "cli.run", "cli.stored", "cli.campaign", "cli.compare"), args


def test_a_command_imports_its_group_only():
    code, modules = _imported("reference", "--help")
    assert code == 0
    assert "isobench.cli.machine" in modules
    assert not _of(modules, "cli.run", "cli.stored", "cli.campaign", "cli.compare",
                   "cli.listing")
