"""How often the claim verdict (analysis/kit/claims.py) says "does not
reproduce" of data that does reproduce, measured through the project's own
functions: repetitions drawn with a known true ratio, their ratio and
interval from quantities.ratio_of_values (stats.ratio_interval, the Welch t
interval of the log ratio of geometric means), the verdict from
claims.verdict.

Each repetition is one process's value: lognormal around its side's truth
with sigma SIGMA between processes (a noisy KVM guest: 5% to 20%).  The
truth is put at the claim's low end (the hardest case for a true claim:
half the intervals reach below it), at its middle, and outside it (to show
the rule can say "does not reproduce" at all).

    python tests/python/claims_sim.py      prints the table
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from isobench.analysis.kit import claims  # noqa: E402
from isobench.analysis.kit.quantities import ratio_of_values  # noqa: E402

BASE = 1000.0


def verdicts(claim: claims.Claim, truth: float, reps: int, sigma: float, trials: int,
             seed: int = 1) -> dict[str, float]:
    """The share of each verdict over `trials` simulated runs of `reps`
    repetitions a side, the true ratio `truth`."""
    rng = random.Random(seed)
    counts = {v: 0 for v in claims.VERDICTS}
    for _ in range(trials):
        base = [BASE * math.exp(rng.gauss(0.0, sigma)) for _ in range(reps)]
        x = [truth * BASE * math.exp(rng.gauss(0.0, sigma)) for _ in range(reps)]
        counts[claims.verdict(claim, ratio_of_values(x, base))["verdict"]] += 1
    return {k: v / trials for k, v in counts.items()}


CASES = (("lwc-refmon-2x", "low end", 1.5), ("lwc-refmon-2x", "middle", 2.0),
         ("lwc-refmon-2x", "high end", 2.5), ("lwc-refmon-2x", "outside", 1.4),
         ("lwc-rollback-comparable", "low end", 0.9),
         ("lwc-rollback-comparable", "middle", 1.0),
         ("lwc-event-comparable", "high end", 1 / 0.9),
         ("lwc-switch-half", "low end", 2.0),
         ("lwc-refmon-2x-serve", "low end", 1.5),
         ("lwc-tls-free", "low end", 1 / 1.05), ("lwc-tls-free", "high end", 1.05))


def table(trials: int = 2000, reps_list=(3, 5, 10), sigmas=(0.05, 0.20)) -> list[tuple]:
    rows = []
    for cid, where, truth in CASES:
        for reps in reps_list:
            for sigma in sigmas:
                share = verdicts(claims.CLAIMS[cid], truth, reps, sigma, trials)
                rows.append((cid, where, truth, reps, sigma, share))
    return rows


if __name__ == "__main__":
    print(f"{'claim':26} {'truth':>14} {'reps':>4} {'sigma':>5}  "
          "reproduces  does-not  overlaps  no-interval")
    for cid, where, truth, reps, sigma, share in table():
        print(f"{cid:26} {where + ' ' + format(truth, 'g'):>14} {reps:>4} {sigma:>5.2f}  "
              f"{share[claims.REPRODUCES]:>10.3f}  {share[claims.DOES_NOT]:>8.3f}  "
              f"{share[claims.OVERLAPS]:>8.3f}  {share[claims.NO_INTERVAL]:>11.3f}")
