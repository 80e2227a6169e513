"""The two-sided Mann-Whitney U test of two sets of repetitions: exact
for small samples (the distribution of U by counting), the normal
approximation with tie and continuity corrections above EXACT_U_MAX, and
what a test of n1 and n2 values can reach at all (smallest_p)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .stats import ALPHA

# The exact Mann-Whitney distribution is used while both sides are at most
# this large and nothing is tied; beyond, the normal approximation is
# within a few thousandths of it.
EXACT_U_MAX = 25


# ---- comparing two sets of repetitions ----

@dataclass(frozen=True)
class MannWhitney:
    """Two-sided Mann-Whitney U test.  u is U of the first sample; effect is
    U / (n1 n2), the probability that a value of the first sample exceeds
    one of the second (ties count half); method says whether p is exact or
    the normal approximation (tie and continuity corrected)."""

    u: float
    z: float | None
    p: float
    n1: int
    n2: int
    effect: float
    method: str


def _ranks(values: Sequence[float]) -> tuple[list[float], float]:
    """Average ranks (1-based) in the order given, and the tie term sum(t^3 - t)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties = 0.0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        avg = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            ranks[order[k]] = avg
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    return ranks, ties


def _u_counts(n1: int, n2: int) -> list[int]:
    """How many of the C(n1 + n2, n1) orderings give U = 0, 1, ..., n1 n2
    (no ties): counts[u] over all arrangements, built one value at a time."""
    # f[i][j] is the distribution for i and j values; only two rows are kept.
    prev = [[1] for _ in range(n2 + 1)]  # i = 0: U = 0 once, whatever j
    for i in range(1, n1 + 1):
        cur = [[1]]  # j = 0: U = 0 once
        for j in range(1, n2 + 1):
            # The largest value belongs to the first sample (it then beats
            # all j of the second: U grows by j) or to the second.
            a, b = prev[j], cur[j - 1]
            size = i * j + 1
            row = [0] * size
            for u, c in enumerate(a):
                row[u + j] += c
            for u, c in enumerate(b):
                row[u] += c
            cur.append(row)
        prev = cur
    return prev[n2]


def smallest_p(n1: int, n2: int) -> float:
    """The smallest two-sided p the U test can give with n1 and n2 values."""
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


def test_possible(n1: int, n2: int, alpha: float = ALPHA) -> bool:
    """Whether n1 against n2 values can show a difference at all: the most
    extreme ordering must give p below alpha (4 against 4 at 0.05; 3 against
    3 never can)."""
    return n1 > 0 and n2 > 0 and smallest_p(n1, n2) < alpha


def min_reps_for_test(alpha: float = ALPHA) -> int:
    """The fewest repetitions per side (equal sides) for which the U test can
    reach p < alpha."""
    n = 1
    while not test_possible(n, n, alpha):
        n += 1
    return n


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> MannWhitney:
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError("Mann-Whitney U of an empty sample")
    ranks, ties = _ranks(list(a) + list(b))
    u1 = math.fsum(ranks[:n1]) - n1 * (n1 + 1) / 2.0
    effect = u1 / (n1 * n2)
    if ties == 0 and max(n1, n2) <= EXACT_U_MAX:
        counts = _u_counts(n1, n2)
        total = math.comb(n1 + n2, n1)
        k = int(round(min(u1, n1 * n2 - u1)))
        p = min(1.0, 2.0 * sum(counts[:k + 1]) / total)
        return MannWhitney(u1, None, p, n1, n2, effect, "exact")
    mu = n1 * n2 / 2.0
    n = n1 + n2
    var = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        # Every value equal: no evidence of any difference.
        return MannWhitney(u1, 0.0, 1.0, n1, n2, effect, "normal approximation")
    d = u1 - mu
    z = (d - math.copysign(0.5, d)) / math.sqrt(var) if d else 0.0
    p = min(1.0, math.erfc(abs(z) / math.sqrt(2.0)))
    return MannWhitney(u1, z, p, n1, n2, effect, "normal approximation")
