"""The flaky strategy's posterior: normalisation, quantiles, rates, identifiability."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regress.bisect import posterior as post_mod
from regress.bisect.posterior import FAIL_PRIOR, PASS_PRIOR, _log_beta, _mean
from regress.bisect.search import Observations, SearchConfig, search
from regress.bisect.strategies.flaky import Flaky
from regress.bisect.verdicts import Verdict

G, B, S = Verdict.GOOD, Verdict.BAD, Verdict.SKIP

observations = st.integers(2, 300).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(st.tuples(st.integers(0, n), st.sampled_from([G, B, S])), max_size=40),
    )
)


def build(n, history):
    obs = Observations(n)
    for p, v in history:
        obs.add(p, v)
    return obs


def brute_force(obs, fail_prior=FAIL_PRIOR, pass_prior=PASS_PRIOR, one_sided_weight=0.75):
    """Posterior per culprit by direct enumeration (the segment code must agree)."""
    a, b = fail_prior
    c, d = pass_prior
    like = []
    for culprit in range(1, obs.n + 1):
        gf = sum(obs.fails(q) for q in obs.counts if q < culprit)
        gp = sum(obs.passes(q) for q in obs.counts if q < culprit)
        bf = sum(obs.fails(q) for q in obs.counts if q >= culprit)
        bp = sum(obs.passes(q) for q in obs.counts if q >= culprit)
        good = math.exp(_log_beta(a + gf, b + gp) - _log_beta(a, b))
        two = math.exp(_log_beta(c + bp, d + bf) - _log_beta(c, d))
        like.append(good * (one_sided_weight * (bp == 0) + (1 - one_sided_weight) * two))
    z = sum(like)
    return [x / z for x in like]


@settings(max_examples=150, deadline=None)
@given(observations)
def test_segment_posterior_matches_brute_force(case):
    n, history = case
    obs = build(n, history)
    post = Flaky().posterior(obs)
    expected = brute_force(obs)
    got = [post.cdf(m) - post.cdf(m - 1) for m in range(1, n + 1)]
    assert sum(got) == pytest.approx(1.0)
    for e, g in zip(expected, got, strict=True):
        assert g == pytest.approx(e, rel=1e-6, abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(observations, st.floats(0.01, 0.99))
def test_quantile_is_the_smallest_position_reaching_q(case, q):
    n, history = case
    post = Flaky().posterior(build(n, history))
    m = post.quantile(q)
    assert 1 <= m <= n
    assert post.cdf(m) >= q - 1e-9
    assert post.cdf(m - 1) < q + 1e-9


@settings(max_examples=100, deadline=None)
@given(observations, st.sampled_from([0.5, 0.9, 0.99]))
def test_interval_holds_the_requested_mass(case, confidence):
    n, history = case
    post = Flaky().posterior(build(n, history))
    a, b = post.interval(confidence)
    assert 1 <= a <= b <= n
    assert post.cdf(b) - post.cdf(a - 1) >= confidence - 1e-9


@pytest.mark.parametrize(("x", "y"), [(1, 4), (3, 2), (2, 6), (128, 22), (11, 99), (5, 5)])
def test_truncated_log_beta_matches_numeric_integration(x, y):
    steps = 20000
    h = 0.5 / steps
    integral = (
        sum(((i + 0.5) * h) ** (x - 1) * (1 - (i + 0.5) * h) ** (y - 1) for i in range(steps)) * h
    )
    assert _log_beta(x, y) == pytest.approx(math.log(integral), rel=1e-5)
    assert 0 < _mean(x, y) < 0.5


def test_one_sided_pass_is_decisive():
    obs = build(10, [(0, G), (10, B), (4, G), (5, B)])
    post = Flaky(false_pass=False).posterior(obs)
    assert post.cdf(4) == 0.0  # a pass at 4 rules out culprits <= 4 without false passes
    assert post.false_pass == 0.0


def test_rates_are_learned_from_endpoint_runs():
    history = [(0, G)] * 6 + [(0, B)] * 4 + [(50, B)] * 10
    rates = Flaky().rates(build(50, history))
    assert 0.25 < rates["false_fail"] < 0.45
    assert rates["false_pass"] < 0.1


def test_evidence_switches_on_the_two_sided_model():
    """Bad commits that pass often make the averaged model expect false passes."""
    history = [(0, G)] * 5 + [(20, B), (20, G)] * 5
    rates = Flaky(false_pass=None).rates(build(20, history))
    assert rates["false_pass"] > 0.2


#: the flatter priors the stall was seen with (the defaults lean further towards small rates)
WEAK = {"fail_prior": (1.0, 4.0), "pass_prior": (1.0, 4.0)}


def test_flake_rates_above_one_half_are_not_an_explanation():
    """Without truncation the search stalled: 'good commits fail 90%' explained a clean history."""
    counts = {0: [2, 1], 1: [10, 95], 2: [6, 31], 3: [0, 9], 16: [0, 3]}
    history = [(p, G) for p, (g, _) in counts.items() for _ in range(g)]
    history += [(p, B) for p, (_, b) in counts.items() for _ in range(b)]
    for flaky in (Flaky(), Flaky(**WEAK)):
        top, mass = flaky.posterior(build(16, history)).top()
        assert top == 1 and mass > 0.99


def test_untruncated_rates_would_stall(monkeypatch):
    """The guard above fails with the plain (untruncated) Beta integral."""

    def plain(x, y):
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)

    monkeypatch.setattr(post_mod, "_log_beta", plain)
    counts = {0: [2, 1], 1: [10, 95], 2: [6, 31], 3: [0, 9], 16: [0, 3]}
    history = [(p, G) for p, (g, _) in counts.items() for _ in range(g)]
    history += [(p, B) for p, (_, b) in counts.items() for _ in range(b)]
    _, mass = Flaky(**WEAK).posterior(build(16, history)).top()
    assert mass < 0.99


def test_info_gain_prefers_the_informative_side():
    obs = build(100, [(0, G)] * 3 + [(100, B)] * 3)
    post = Flaky().posterior(obs)
    assert post.info_gain(50) > post.info_gain(5) > 0
    assert post.info_gain(0) == pytest.approx(0.0, abs=1e-12)


def test_flaky_search_avoids_untestable_positions():
    skip = set(range(200, 300))

    def evaluate(positions):
        return [S if p in skip else (B if p >= 250 else G) for p in positions]

    result = search(1000, evaluate, SearchConfig(mode="flaky"))
    assert result.status == "ambiguous"
    probed_skips = sum(p in skip for p, _ in result.observations.history)
    assert probed_skips <= 16
    a, b = result.interval
    assert a <= 250 <= b and a >= 200 and b <= 300
