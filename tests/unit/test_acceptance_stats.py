"""Acceptance statistics on hand-computed traces and on the seeds' measured per-depth numbers."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regress.acceptance.stats import (
    CONVENTIONS,
    RunStats,
    decay_slope,
    percentile,
    slope,
    summarize,
    upstream_acceptance_length,
)
from regress.acceptance.trace import RequestTrace, reach_counts, validate_traces
from regress.errors import EngineError, UsageError

SEED_FILE = Path(__file__).parents[1] / "data" / "acceptance" / "seed_000_glm52_k4.json"


def traces_with_conditional(conditional, *, steps=10_000, requests=80, seed=0):
    """Traces whose pooled conditional acceptance is ``conditional`` (to count rounding)."""
    reach, prev = [], steps
    for c in conditional:
        prev = round(prev * c)
        reach.append(prev)
    bounds = [steps, *reach, 0]
    values = [a for a in range(len(conditional) + 1) for _ in range(bounds[a] - bounds[a + 1])]
    random.Random(seed).shuffle(values)
    per = steps // requests
    return [RequestTrace(values[i * per : (i + 1) * per], prompt_index=i) for i in range(requests)]


@pytest.fixture(scope="module")
def seed_numbers():
    return json.loads(SEED_FILE.read_text())


def test_hand_computed_trace():
    # Request 0: steps accepting 4, 0, 2 drafts; request 1: 1, 1. K = 4.
    stats = summarize([RequestTrace([4, 0, 2]), RequestTrace([1, 1])], 4, n_boot=200)
    assert (stats.requests, stats.steps, stats.accepted, stats.drafted) == (2, 5, 8, 20)
    assert stats.acceptance_length == pytest.approx(1 + 8 / 5)  # 2.6: bonus token counted
    assert stats.acceptance_rate == pytest.approx(8 / 20)
    # steps with >= 1, 2, 3, 4 accepted: {4,2,1,1}, {4,2}, {4}, {4}
    assert stats.per_position == pytest.approx([4 / 5, 2 / 5, 1 / 5, 1 / 5])
    assert stats.conditional == pytest.approx([0.8, 0.5, 0.5, 1.0])
    assert stats.counts == [1, 2, 1, 0, 1]
    assert stats.per_request_al == pytest.approx([1 + 6 / 3, 1 + 2 / 2])
    assert stats.per_request_al_percentiles["p50"] == pytest.approx(2.5)
    assert [r.reach for r in stats.per_request] == [[2, 2, 1, 1], [2, 0, 0, 0]]


def test_conditional_is_undefined_past_a_depth_never_reached():
    stats = summarize([RequestTrace([0, 1, 0])], 3, n_boot=50)
    assert stats.per_position == pytest.approx([1 / 3, 0.0, 0.0])
    assert stats.conditional[0] == pytest.approx(1 / 3)
    assert stats.conditional[1] == 0.0
    assert stats.conditional[2] is None  # 0 / 0
    assert stats.conditional_ci[2] is None


def test_seeds_worked_example_reproduces_published_numbers(seed_numbers):
    """The seed's per-depth conditionals give back its ALs through AL = 1 + sum(per_position)."""
    for key in ("batch_8_stale_map", "batch_8_fixed"):
        published = seed_numbers[key]
        stats = summarize(traces_with_conditional(published["conditional"]), 4, n_boot=200)
        assert stats.conditional == pytest.approx(published["conditional"], abs=1e-3)
        # The published conditionals are rounded to 3 digits, so AL agrees to ~0.01.
        assert stats.acceptance_length == pytest.approx(published["acceptance_length"], abs=0.02)
    stale = summarize(traces_with_conditional(seed_numbers["batch_8_stale_map"]["conditional"]), 4)
    fixed = summarize(traces_with_conditional(seed_numbers["batch_8_fixed"]["conditional"]), 4)
    # The bug's fingerprint: depth 1 untouched, deeper depths collapse, conditional decays.
    assert stale.per_position[0] >= fixed.per_position[0]
    assert stale.per_position[3] < 0.6 * fixed.per_position[3]
    assert stale.conditional_slope < -0.08 < -0.02 < fixed.conditional_slope


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=12), min_size=1, max_size=8),
)
def test_al_is_one_plus_sum_of_per_position(accepted_lists):
    stats = summarize([RequestTrace(a) for a in accepted_lists], 5, n_boot=20)
    assert stats.acceptance_length == pytest.approx(1 + sum(stats.per_position))
    assert sum(stats.counts) == stats.steps
    assert 1.0 <= stats.acceptance_length <= 6.0
    # per-position acceptance can only fall with depth
    assert all(a >= b for a, b in zip(stats.per_position, stats.per_position[1:], strict=False))
    lo, hi = stats.acceptance_length_ci
    assert lo <= hi


def test_bootstrap_is_seeded_and_brackets_the_estimate():
    traces = traces_with_conditional([0.868, 0.864, 0.825, 0.834], steps=4000, requests=40)
    a = summarize(traces, 4, seed=7)
    b = summarize(traces, 4, seed=7)
    c = summarize(traces, 4, seed=8)
    assert a.acceptance_length_ci == b.acceptance_length_ci
    assert a.acceptance_length_ci != c.acceptance_length_ci
    lo, hi = a.acceptance_length_ci
    assert lo < a.acceptance_length < hi
    for (plo, phi), p in zip(a.per_position_ci, a.per_position, strict=True):
        assert plo <= p <= phi
    assert a.conditional_slope_ci[0] <= a.conditional_slope <= a.conditional_slope_ci[1]


def test_bootstrap_resamples_prompts_not_steps():
    # Two kinds of prompts: always 4 accepted, or always 0. Steps look like a coin flip, but with
    # only 4 prompts the AL is uncertain far beyond what 400 independent steps would suggest.
    traces = [RequestTrace([4] * 100 if i % 2 else [0] * 100, prompt_index=i) for i in range(4)]
    lo, hi = summarize(traces, 4, n_boot=500).acceptance_length_ci
    assert hi - lo > 2.0


def _prompts_of_three_kinds(rng, n, *, steps=4):
    """``n`` prompts, each drafting with its own acceptance rate, drawn from a known mixture.

    With K = 1 a step accepts its draft with the prompt's rate ``p``, so the true mean AL (what
    the interval is about) is 1 + mean(p) = 1.7, and steps of one prompt are correlated the way
    real prompts' are: an interval built from steps instead of prompts would be too narrow.
    """
    return [
        RequestTrace([int(rng.random() < p) for _ in range(steps)], prompt_index=j)
        for j, p in enumerate(rng.choice((0.5, 0.7, 0.9)) for _ in range(n))
    ]


def test_95_percent_intervals_cover_the_true_mean_al_93_to_97_percent_of_the_time():
    # 800 seeded samples of 50 prompts: coverage of a correct interval is 95 % +- 0.8 %
    # (binomial), so 93..97 % fails intervals that are too narrow (steps resampled, 90 %
    # percentiles) or too wide (99 %), not the sampling noise.
    rng = random.Random(2026)
    trials = 800
    hits = 0
    for t in range(trials):
        lo, hi = summarize(
            _prompts_of_three_kinds(rng, 50), 1, seed=t, n_boot=400
        ).acceptance_length_ci
        hits += lo <= 1.7 <= hi
    assert 0.93 <= hits / trials <= 0.97, hits / trials


def test_the_interval_is_the_percentile_bootstrap_of_n_prompts_drawn_with_replacement():
    # Mutation guarded: resampling n - 1 prompts (acceptance/stats.py, rng.choices(..., k=n))
    # widens every interval by sqrt(n / (n - 1)), which no coverage test can see at 50 prompts.
    # The interval is pinned to its definition, computed here independently (numpy's
    # percentiles), and to the numbers that gives.
    import numpy as np

    accepted = [[4, 4, 1], [0, 2], [3, 3, 3, 1], [1], [4, 0, 0, 2, 2], [2, 2]]
    traces = [RequestTrace(a, prompt_index=j) for j, a in enumerate(accepted)]
    stats = summarize(traces, 4, seed=11, n_boot=300)
    draws = random.Random(11)
    als = []
    for _ in range(300):
        picks = draws.choices(range(len(accepted)), k=len(accepted))
        steps = sum(len(accepted[j]) for j in picks)
        als.append(1 + sum(sum(accepted[j]) for j in picks) / steps)
    expected = np.percentile(als, [2.5, 97.5]).tolist()
    assert stats.acceptance_length_ci == pytest.approx(expected, abs=1e-12)
    assert stats.acceptance_length_ci == pytest.approx(PINNED_AL_CI, abs=1e-9)


PINNED_AL_CI = [22 / 9, 3.5]  # from the draws of seed 11 above


def test_no_bootstrap_gives_zero_width_intervals():
    stats = summarize([RequestTrace([1, 2])], 2, n_boot=0)
    assert stats.acceptance_length_ci == [2.5, 2.5]
    assert stats.per_position_ci == [[1.0, 1.0], [0.5, 0.5]]


def test_upstream_formula_beside_ours():
    traces = [RequestTrace([4, 0, 2]), RequestTrace([1, 1])]
    counters = {
        "num_draft_tokens": 20,
        "num_accepted_tokens": 8,
        "num_requests_with_draft_tokens": 5,
    }
    stats = summarize(traces, 4, counters=counters, n_boot=10)
    # Every verify step is one request-with-drafts in some iteration, so the formulas agree.
    assert stats.upstream_acceptance_length == pytest.approx(stats.acceptance_length)
    assert stats.counters == counters
    assert (
        upstream_acceptance_length(
            {"num_accepted_tokens": 30, "num_requests_with_draft_tokens": 10}
        )
        == 4.0
    )
    assert upstream_acceptance_length(None) is None
    assert (
        upstream_acceptance_length({"num_accepted_tokens": 3, "num_requests_with_draft_tokens": 0})
        is None
    )
    assert summarize(traces, 4, n_boot=10).upstream_acceptance_length is None


def test_no_verify_step_is_a_usage_error():
    with pytest.raises(UsageError, match="max-new-tokens"):
        summarize([RequestTrace([]), RequestTrace([])], 4)


def test_counts_outside_zero_to_k_are_an_engine_error():
    with pytest.raises(EngineError, match=r"outside 0\.\.2"):
        summarize([RequestTrace([0, 3])], 2)
    with pytest.raises(EngineError, match="returned 1 request traces for 2"):
        validate_traces([RequestTrace([1])], 2, expected=2)


def test_censored_steps_are_counted_not_used():
    stats = summarize([RequestTrace([2, 2], censored_steps=1), RequestTrace([0])], 2, n_boot=10)
    assert stats.steps == 3
    assert stats.censored_steps == 1


def test_decay_slope_weights_depths_by_their_samples():
    # Conditional 0.5, 0.5, 1.0 from 100, 50 and 25 steps: the lucky deep depth counts a quarter.
    assert decay_slope(100, [50, 25, 25]) == pytest.approx(5 / 26)
    assert slope([0.5, 0.5, 1.0]) == pytest.approx(0.25)
    assert decay_slope(10, [0, 0]) is None  # depth 2 never reached: one point, no slope


def test_reach_counts_and_helpers():
    assert reach_counts([3, 0, 1, 2], 3) == [3, 2, 1]
    assert slope([0.9, 0.8, 0.7]) == pytest.approx(-0.1)
    assert slope([0.5, None, 0.7]) == pytest.approx(0.1)
    assert slope([0.5, None]) is None
    assert set(CONVENTIONS) >= {"acceptance_length", "per_position", "conditional"}
    assert "bonus" in CONVENTIONS["acceptance_length"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=30), st.floats(0, 100))
def test_percentile_matches_numpy_linear(values, q):
    np = pytest.importorskip("numpy")
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), abs=1e-6)


def test_run_stats_dict_round_trip():
    stats = summarize(traces_with_conditional([0.9, 0.8], steps=400, requests=20), 2, n_boot=50)
    data = json.loads(json.dumps(stats.to_dict()))
    assert data["per_request_al"] == pytest.approx(stats.per_request_al)
    assert RunStats.from_dict(data) == stats
