"""Mann-Whitney U, Kolmogorov-Smirnov and the Pinpoint-style three-way comparison."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regress.bisect.stats import (
    compare,
    effect_size,
    high_threshold,
    kolmogorov_smirnov,
    mann_whitney_u,
    normal_cdf,
    p_value,
)
from regress.bisect.verdicts import Comparison

samples = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=30)


def test_mann_whitney_known_value():
    # U = 0 for fully separated 5 vs 5: z = (12.5 - 0.5) / sqrt(25 * 11 / 12) = 2.5067
    assert mann_whitney_u([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(0.012185, rel=1e-3)


def test_kolmogorov_smirnov_known_value():
    # D = 1, lambda = (sqrt(2.5) + 0.12 + 0.11 / sqrt(2.5)) = 1.7707, Q_KS = 0.003785
    assert kolmogorov_smirnov([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(
        0.003785, rel=1e-2
    )


def test_no_evidence_cases_give_p_one():
    assert mann_whitney_u([], [1.0]) == 1.0
    assert kolmogorov_smirnov([1.0], []) == 1.0
    assert mann_whitney_u([2.0, 2.0], [2.0, 2.0, 2.0]) == 1.0
    assert kolmogorov_smirnov([2.0, 2.0], [2.0]) == 1.0


@settings(max_examples=200, deadline=None)
@given(samples, samples)
def test_p_values_are_probabilities_and_symmetric(a, b):
    for test in (mann_whitney_u, kolmogorov_smirnov):
        p = test(a, b)
        assert 0.0 <= p <= 1.0
        assert p == pytest.approx(test(b, a), abs=1e-12)


integers = st.lists(st.integers(-1000, 1000), min_size=1, max_size=30)


@settings(max_examples=100, deadline=None)
@given(integers, integers)
def test_rank_tests_ignore_monotone_transforms(a, b):
    def f(x):
        return x**3 + 5

    for test in (mann_whitney_u, kolmogorov_smirnov):
        assert test(a, b) == pytest.approx(test([f(x) for x in a], [f(x) for x in b]))


def test_high_threshold_shrinks_with_samples_and_magnitude():
    small, large = high_threshold(3, 5, 2.0), high_threshold(20, 20, 2.0)
    assert small > 0.8  # three runs can hardly show "same" for a 2-sigma change
    assert large < 0.5
    assert high_threshold(10, 10, 4.0) < high_threshold(10, 10, 1.5)
    assert high_threshold(10, 10, math.inf) < 0.2
    assert high_threshold(0, 10, 3.0) == 1.0


def test_compare_three_ways():
    rng = random.Random(7)
    good = [rng.gauss(3.77, 0.02) for _ in range(10)]
    bad = [rng.gauss(3.28, 0.02) for _ in range(10)]
    same = [rng.gauss(3.77, 0.02) for _ in range(10)]
    magnitude = effect_size(good, bad)
    assert magnitude > 10
    assert compare(bad, good, magnitude=magnitude) is Comparison.DIFFERENT
    assert compare(same, good, magnitude=magnitude) is Comparison.SAME
    # two runs against a 29-sigma change are enough to say "same"; against 2 sigma they are not
    assert compare(same[:2], good, magnitude=magnitude) is Comparison.SAME
    assert compare(same[:2], good, magnitude=2.0) is Comparison.UNKNOWN


def test_effect_size_edges():
    assert effect_size([], [1.0]) == 0.0
    assert effect_size([1.0, 1.0], [1.0, 1.0]) == 0.0
    assert effect_size([1.0, 1.0], [2.0, 2.0]) == math.inf
    assert effect_size([0.0, 2.0], [4.0, 6.0]) == pytest.approx(4 / math.sqrt(2))


def test_p_value_takes_the_smaller_test():
    a, b = [1, 2, 3, 4, 5], [6, 7, 8, 9, 10]
    assert p_value(a, b) == min(mann_whitney_u(a, b), kolmogorov_smirnov(a, b))


def test_normal_cdf():
    assert normal_cdf(0) == 0.5
    assert normal_cdf(1.959964) == pytest.approx(0.975, abs=1e-6)
