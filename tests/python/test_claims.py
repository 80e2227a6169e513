"""The claim verdict (analysis/kit/claims.py): its rule on hand-made intervals,
and by simulation through the project's own ratio interval (claims_sim.py)
how often it says "does not reproduce" of data that reproduces."""

import math

import pytest

from isobench.analysis.kit import claims
from isobench.render.kit import claims as render_claims

from claims_sim import verdicts

TWO_X = claims.CLAIMS["lwc-refmon-2x"]


@pytest.mark.parametrize("low, high, verdict", [
    (1.8, 2.2, claims.REPRODUCES),
    (1.5, 2.5, claims.REPRODUCES),          # the ends belong to the range
    (0.70, 1.40, claims.DOES_NOT),          # refmon on a loaded KVM guest
    (1.2, 1.6, claims.OVERLAPS),
    (1.0, 3.0, claims.OVERLAPS),            # wider than the range: nothing is known
    (2.6, 3.0, claims.DOES_NOT),
])
def test_the_rule(low, high, verdict):
    v = claims.verdict(TWO_X, {"value": (low + high) / 2, "interval": {"low": low, "high": high}})
    assert v["verdict"] == verdict
    assert v["interval"] == {"low": low, "high": high}


def test_no_interval_is_no_verdict():
    v = claims.verdict(TWO_X, {"value": 2.0, "interval": None, "note": "2 repetitions"})
    assert v["verdict"] == claims.NO_INTERVAL and v["why"] == "2 repetitions"
    assert claims.verdict(TWO_X, None)["verdict"] == claims.NO_INTERVAL
    # A section's quantity holds its interval as [low, high].
    v = claims.verdict(TWO_X, {"value": 1.0, "interval": [0.7, 1.4]})
    assert v["verdict"] == claims.DOES_NOT


def test_an_open_ended_claim():
    half = claims.CLAIMS["lwc-switch-half"]
    assert math.isinf(half.high) and half.range_text() == ">= 2"
    assert claims.verdict(half, {"value": 3, "interval": [2.5, 3.5]})["verdict"] == \
        claims.REPRODUCES
    assert half.as_dict()["high"] is None  # JSON has no infinity


def test_every_claim_cites_and_says_how_it_was_read():
    for c in claims.CLAIMS.values():
        assert c.citation and c.reading and c.low < c.high and c.ratio, c.id


def test_the_verdict_is_never_printed_without_its_interval():
    vs = [claims.judge("lwc-refmon-2x", {"value": 1.0, "interval": [0.7, 1.4]}, "open"),
          claims.judge("lwc-refmon-2x", {"value": 1.0, "interval": None, "note": "2 reps"},
                       "read")]
    text = render_claims.text(vs)
    assert "1.00 [0.70..1.40]" in text and "does not reproduce" in text
    assert "1.00 (no interval)" in text and "inconclusive (no interval)" in text
    assert "a factor of two" in text and "Fig. 1" in text
    vs.append(claims.judge("lwc-refmon-2x", None, "write", claims.LWC_HERE))
    assert "isobench's emulation on stock Linux" in " ".join(render_claims.text(vs).split())
    md = render_claims.markdown(vs)
    assert "1.00 [0.70..1.40]" in md and "does not reproduce: 95% interval outside" in md


# The simulation: the truth at an end of the claimed range is the worst case
# for a claim that holds; "does not reproduce" needs the whole interval
# beyond that end, so it is said at most (1 - 0.95) / 2 = 2.5% of the time
# (the band allows the simulation's own noise: 1,000 runs, sd 0.5%).
@pytest.mark.parametrize("cid, truth", [("lwc-refmon-2x", 1.5), ("lwc-refmon-2x", 2.5),
                                        ("lwc-rollback-comparable", 0.9),
                                        ("lwc-event-comparable", 1 / 0.9),
                                        ("lwc-switch-half", 2.0),
                                        ("lwc-refmon-2x-serve", 1.5),
                                        ("lwc-tls-free", 1.05), ("lwc-tls-free", 1 / 1.05)])
@pytest.mark.parametrize("reps, sigma", [(3, 0.05), (5, 0.20), (10, 0.05)])
def test_false_does_not_reproduce_at_most_the_one_sided_level(cid, truth, reps, sigma):
    share = verdicts(claims.CLAIMS[cid], truth, reps, sigma, trials=1000)
    assert share[claims.DOES_NOT] <= 0.04


def test_inside_the_range_it_is_never_said_not_to_reproduce():
    share = verdicts(TWO_X, 2.0, 5, 0.05, trials=1000)
    assert share[claims.DOES_NOT] == 0.0 and share[claims.REPRODUCES] > 0.95


def test_a_claim_that_fails_here_is_said_to():
    # 1.4 against "about 2x", ten repetitions of 5% noise: mostly said.
    share = verdicts(TWO_X, 1.4, 10, 0.05, trials=1000)
    assert share[claims.DOES_NOT] > 0.6 and share[claims.REPRODUCES] < 0.01


def test_a_claim_resting_on_what_the_stand_in_lacks_is_not_testable_here():
    # lwC's switch claim rests on its in-kernel switch; the emulated context
    # is a process.  Whatever the ratio, the verdict names the property and
    # never reads "does not reproduce" (nor "reproduces").
    for iv in ([0.8, 1.1], [2.5, 3.5], [1.5, 2.5]):
        v = claims.judge("lwc-switch-half", {"value": sum(iv) / 2, "interval": iv},
                         "process / lwc", claims.LWC_HERE)
        assert v["verdict"] == claims.NOT_TESTABLE
        assert claims.KERNEL_SWITCH in v["why"] and "is a process switch" in v["why"]
        assert v["interval"] == {"low": iv[0], "high": iv[1]}  # still shown
    text = " ".join(render_claims.text([v]).split())
    assert "not testable here" in text and "does not reproduce" not in text
    # Nothing measured stays "no interval"; a stand-in that lacks nothing the
    # claim rests on is judged by the rule.
    assert claims.judge("lwc-switch-half", None, "", claims.LWC_HERE)["verdict"] == \
        claims.NO_INTERVAL
    assert claims.judge("lwc-tls-free", {"value": 1.0, "interval": [0.99, 1.01]}, "",
                        claims.LWC_HERE, {"server": "shared", "tls_key_type": "rsa2048"}
                        )["verdict"] == claims.REPRODUCES
    # A claim with a configuration judges no row that does not say it has it.
    assert claims.judge("lwc-tls-free", {"value": 1.0, "interval": [0.99, 1.01]}, "",
                        claims.LWC_HERE)["verdict"] == claims.OTHER_CONFIG
    assert claims.judge("lwc-rollback-comparable", {"value": 0.5, "interval": [0.4, 0.6]}, "",
                        claims.ROLLBACK_HERE)["verdict"] == claims.DOES_NOT
