"""The interval of a difference of two independent repetition sets
(stats.difference_interval): what a gate adds to a call, mpk's call kind
minus direct's.  It is Welch's t on the linear scale, widened by each
side's resolution; these tests check it against scipy, and show its
coverage by simulation through the project's own functions: repetition
values drawn normal, lognormal and quantized (read on a counter that steps
by 26 ticks, as a KVM guest's TSC does), and whole repetitions of known
truth fed through the headline rule (coverage_sim.trial), whose values and
resolution the switch section takes.  The seeds are fixed; the bands allow
for the binomial scatter of the trials (sd about 1% at 500)."""

import math
import random

import pytest
from scipy import stats as scipy_stats

from isobench.core import stats

import coverage_sim as sim

TRIALS = 500


def test_difference_interval_is_welchs_t():
    rng = random.Random(11)
    a = [rng.gauss(130, 4) for _ in range(5)]
    b = [rng.gauss(50, 2) for _ in range(7)]
    iv = stats.difference_interval(a, b)
    ref = scipy_stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert iv.low == pytest.approx(ref.low, rel=1e-9)
    assert iv.high == pytest.approx(ref.high, rel=1e-9)
    assert iv.contains(stats.difference(a, b))
    assert stats.difference(a, b) == pytest.approx(sum(a) / 5 - sum(b) / 7)


def test_resolution_widens_and_never_leaves_zero_width():
    # Every repetition read the same quantized values: no sample variance,
    # but the step still bounds what is known.
    iv = stats.difference_interval([104.0] * 5, [26.0] * 5, 26.0, 26.0)
    assert iv.low < 78.0 < iv.high
    assert iv.high - iv.low > 26.0
    plain = stats.difference_interval([104.0, 105.0, 103.0], [26.0, 27.0, 25.0])
    wide = stats.difference_interval([104.0, 105.0, 103.0], [26.0, 27.0, 25.0], 26.0, 1.0)
    assert wide.high - wide.low > plain.high - plain.low


def test_one_repetition_has_no_interval():
    assert stats.difference_interval([5.0], [1.0, 2.0]) is None
    assert stats.difference_interval([5.0, 6.0], [1.0]) is None
    with pytest.raises(ValueError):
        stats.difference([], [1.0])


def _values(kind: str, truth: float, n: int, rng: random.Random) -> tuple[list[float], float]:
    """n repetition values whose mean is truth, and their resolution."""
    if kind == "normal":
        return [rng.gauss(truth, 0.05 * truth) for _ in range(n)], 0.0
    if kind == "lognormal":
        sigma = 0.10
        mu = math.log(truth) - sigma ** 2 / 2  # mean of the lognormal = truth
        return [rng.lognormvariate(mu, sigma) for _ in range(n)], 0.0
    # quantized: each repetition is one reading of a counter with step 26,
    # at a random phase, of a region that scatters a little between processes
    return [sim._read(truth * (1 + rng.gauss(0, 0.005)), sim.STEP, rng) for _ in range(n)], sim.STEP


@pytest.mark.parametrize("kind", ["normal", "lognormal", "quantized"])
@pytest.mark.parametrize("n", [3, 5, 10])
def test_the_difference_interval_covers_about_95_in_100(kind, n):
    rng = random.Random(f"difference:{kind}:{n}")
    hits = zero = 0
    for _ in range(TRIALS):
        gate, plain = rng.uniform(60, 140), rng.uniform(3, 30)
        a, ra = _values(kind, gate, n, rng)
        b, rb = _values(kind, plain, n, rng)
        iv = stats.difference_interval(a, b, ra, rb)
        hits += iv.contains(gate - plain)
        zero += iv.high <= iv.low
    assert zero == 0
    cover = hits / TRIALS
    if kind == "quantized":
        # An all-equal set over-covers (see test_coverage.py): open upwards.
        assert cover >= 0.93, cover
    else:
        assert 0.925 <= cover <= 0.975, cover


@pytest.mark.parametrize("kind", ["normal", "lognormal", "q-median", "q-batched"])
def test_headlines_of_two_configurations_cover_their_difference(kind):
    """Two configurations' repetitions through summary.repetition and
    summary.headline (coverage_sim.trial), as the switch section takes them:
    their values and resolutions give the interval of the difference."""
    rng = random.Random(f"difference-headline:{kind}")
    hits = 0
    trials = 300
    for _ in range(trials):
        a, b = sim.trial(kind, 5, rng), sim.trial(kind, 5, rng)
        ha, hb = a.headline, b.headline
        iv = stats.difference_interval(ha["values"], hb["values"], ha["resolution"] or 0.0,
                                       hb["resolution"] or 0.0)
        hits += iv.contains(a.truth - b.truth)
    assert hits / trials >= 0.92, hits / trials
