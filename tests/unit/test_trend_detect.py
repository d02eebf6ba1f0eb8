"""The change-point detector on generated nightly series (seeded)."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from _trend_data import LEVEL, STEP, step_series
from hypothesis import example, given, settings
from hypothesis import strategies as st

from regress.trend.detect import (
    MIN_CHANGE,
    DetectorConfig,
    _best_split,
    _distances,
    _energy,
    _p_value,
    detect,
    open_regressions,
    split_points,
)


@pytest.mark.parametrize("sigma", [0.05, 0.1, 0.3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_13_percent_step_is_found_where_it_was_planted(sigma, seed):
    at = 37 + 11 * seed
    found = detect(step_series(100, at=(at,), sizes=(-STEP,), sigma=sigma, seed=seed))
    assert len(found) == 1
    step = found[0]
    assert step.regression
    assert step.p_value <= DetectorConfig().alpha
    # exact at the noise the issue asks for; within a night at three times that
    assert abs(step.index - at) <= (0 if sigma <= 0.1 else 1)
    assert step.relative == pytest.approx(-STEP, abs=0.05)


@pytest.mark.parametrize("seed", range(10))
def test_a_hundred_quiet_nights_raise_no_alarm(seed):
    assert detect(step_series(100, sigma=0.1, seed=100 + seed)) == []


@pytest.mark.parametrize("seed", range(5))
def test_a_slow_drift_does_not_alarm(seed):
    series = step_series(100, sigma=0.1, seed=seed, drift=-0.08)
    assert detect(series) == []


def test_the_step_check_is_what_keeps_drift_quiet():
    # Without it, e-divisive alone splits a drifting series: the guard above can fail.
    series = step_series(100, sigma=0.1, seed=0, drift=-0.08)
    assert split_points(series, DetectorConfig())
    assert detect(series, config=DetectorConfig(min_change=0, min_z=0))


def test_an_improvement_is_reported_but_is_not_a_regression():
    found = detect(step_series(100, at=(50,), sizes=(STEP,), sigma=0.1, seed=3))
    assert [(c.index, c.kind) for c in found] == [(50, "improvement")]
    assert open_regressions(found, MIN_CHANGE) == []


def test_direction_decides_what_a_fall_is():
    series = step_series(80, at=(40,), sizes=(-STEP,), sigma=0.1, seed=4)
    assert [c.kind for c in detect(series, direction=1)] == ["regression"]
    assert [c.kind for c in detect(series, direction=-1)] == ["improvement"]


def test_two_regressions_in_one_series_are_both_found():
    series = step_series(120, at=(40, 85), sizes=(-STEP, -0.08), sigma=0.1, seed=5)
    found = detect(series)
    assert [(c.index, c.kind) for c in found] == [(40, "regression"), (85, "regression")]
    assert len(open_regressions(found, MIN_CHANGE)) == 2


def test_a_fixed_regression_is_no_longer_open():
    series = step_series(120, at=(40, 80), sizes=(-STEP, STEP), sigma=0.1, seed=6)
    found = detect(series)
    assert [c.kind for c in found] == ["regression", "improvement"]
    assert open_regressions(found, MIN_CHANGE) == []
    # without the fix it stays open: the assertion above can fail
    assert len(open_regressions(found[:1], MIN_CHANGE)) == 1


@pytest.mark.parametrize("seed", range(3))
def test_missing_nights_move_nothing(seed):
    rnd = random.Random(seed)
    series = step_series(100, at=(60,), sizes=(-STEP,), sigma=0.1, seed=seed)
    kept = [i for i in range(100) if i in (59, 60) or rnd.random() > 0.2]
    found = detect([series[i] for i in kept])
    assert [kept[c.index] for c in found] == [60]
    assert kept[found[0].index - 1] == 59


def test_a_regression_is_found_after_a_few_bad_nights():
    cfg = DetectorConfig()
    series = step_series(60 + cfg.min_size, at=(60,), sizes=(-STEP,), sigma=0.1, seed=7)
    assert [c.index for c in detect(series)] == [60]
    # one bad night fewer than min_size is not yet enough
    assert detect(series[:-1]) == []


def test_a_step_is_never_blamed_on_the_last_good_night():
    # e-divisive keeps min_size nights a side, so with two bad nights it splits one night early,
    # at the last good commit; the step fit must not report that split.
    series = step_series(62, at=(60,), sizes=(-STEP,), sigma=0.1, seed=7)
    assert [i for i, _ in split_points(series, DetectorConfig())] == [59]
    assert detect(series) == []


def test_single_bad_nights_are_not_steps():
    series = step_series(100, sigma=0.1, seed=8)
    for i in (20, 55, 90):
        series[i] -= 3 * STEP * LEVEL
    assert detect(series) == []


def test_a_noiseless_step_is_found_and_serialises():
    series = [3.757] * 20 + [3.159] * 5
    (step,) = detect(series)
    assert step.index == 20 and step.regression
    assert step.to_dict()["z"] is None  # infinite: JSON has no infinity


def test_the_same_seed_gives_the_same_answer():
    series = step_series(80, at=(30,), sizes=(-0.03,), sigma=0.3, seed=9)
    cfg = DetectorConfig(seed=11)
    assert detect(series, config=cfg) == detect(series, config=cfg)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="NaN"):
        detect([1.0] * 10 + [float("nan")])
    with pytest.raises(ValueError, match="direction"):
        detect([1.0] * 10, direction=0)
    with pytest.raises(ValueError, match="alpha"):
        DetectorConfig(alpha=0)


@settings(max_examples=8)
@given(
    scale=st.floats(0.01, 100),
    shift=st.floats(-10, 10),
    seed=st.integers(0, 1000),
)
def test_units_do_not_matter(scale, shift, seed):
    series = step_series(30, at=(18,), sizes=(-STEP,), sigma=0.2, seed=seed)
    moved = [v * scale + shift for v in series]
    a = [c.index for c in detect(series, config=DetectorConfig(min_change=0))]
    b = [c.index for c in detect(moved, config=DetectorConfig(min_change=0))]
    assert a == b


def _energy_by_definition(xs: list[float], min_size: int) -> list[Fraction]:
    """Matteson and James's Q(tau), alpha = 1, in exact arithmetic, pair by pair."""
    x = [Fraction(v) for v in xs]
    n, out = len(x), []
    for m in range(min_size, n - min_size + 1):
        k, a, b = n - m, x[:m], x[m:]
        cross = sum(abs(p - q) for p in a for q in b)
        within_a = sum(abs(p - q) for i, p in enumerate(a) for q in a[i + 1 :])
        within_b = sum(abs(p - q) for i, p in enumerate(b) for q in b[i + 1 :])
        e = 2 * cross / (m * k) - within_a / Fraction(m * (m - 1), 2)
        out.append(Fraction(m * k, n) * (e - within_b / Fraction(k * (k - 1), 2)))
    return out


@settings(max_examples=40, deadline=None)
@given(
    xs=st.lists(
        st.sampled_from([0.1, 0.1, -0.3]) | st.floats(-10, 10, allow_subnormal=False),
        min_size=4,
        max_size=24,
    ),
    min_size=st.integers(2, 3),
)
@example(xs=[0.1] * 12, min_size=3)  # twelve 0.1s do not sum to 12 * 0.1 in floating point
def test_the_energy_statistic_is_the_papers(xs, min_size):
    # The statistic is computed from sorted running sums (no torch, no numpy): it must be the
    # definition's, and exactly 0 where the points are all equal (ties add nothing, not noise).
    if len(xs) < 2 * min_size:
        return
    exact = _energy_by_definition(xs, min_size)
    got = _energy(xs, _distances(xs), min_size)
    # rounding is relative to the statistic's size, or to the values' where every Q is ~0
    tolerance = Fraction(max(abs(q) for q in exact) + max(abs(v) for v in xs)) / 10**9
    assert len(got) == len(exact)
    assert all(abs(Fraction(g) - q) <= tolerance for g, q in zip(got, exact, strict=True))
    if len(set(xs)) == 1:
        assert got == [0.0] * len(exact)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), size=st.floats(0, 0.3))
def test_stopping_the_permutations_early_never_changes_a_decision(seed, size):
    # _p_value stops once enough permuted maxima reach the statistic that p must exceed alpha;
    # counting all of them (alpha so large it never stops) must give the same decision and,
    # when significant, the same p-value. 19 permutations and alpha 0.2 put many series on the
    # edge (3 or 4 of 19 permutations as large).
    x = step_series(24, at=(12,), sizes=(-size,), sigma=1.0, seed=seed)
    _, q = _best_split(x, 0, len(x), 3)
    config = DetectorConfig(permutations=19, alpha=0.2)
    everything = DetectorConfig(permutations=19, alpha=0.9999)
    early = _p_value(x, [(0, len(x))], q, config, random.Random(seed))
    full = _p_value(x, [(0, len(x))], q, everything, random.Random(seed)) or 1.0
    assert early == (full if full <= config.alpha else None)
