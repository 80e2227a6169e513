#!/usr/bin/env python3
"""Print the coverage table of docs/methodology.md ("Checked by simulation"):
synthetic repetitions of each kind (tests/python/coverage_sim.py) through
isobench's own headline rule, with a fixed seed, so the table is the same
on every machine.

Usage: scripts/coverage-table.py [TRIALS]   (default 2000 per row)
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "tests" / "python")]

import coverage_sim as sim  # noqa: E402

SEED = 20240501


def main(argv: list[str]) -> int:
    try:
        trials = int(argv[1]) if len(argv) > 1 else 2000
        if trials < 1:
            raise ValueError
    except ValueError:
        print(f"coverage-table: TRIALS must be a positive whole number, not {argv[1]!r}",
              file=sys.stderr)
        return 2
    rows = [sim.simulate(kind, n, trials, SEED) for kind in sim.KINDS for n in (3, 5, 10)]
    print(f"{trials} sets per row, seed {SEED}\n")
    print(sim.table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
