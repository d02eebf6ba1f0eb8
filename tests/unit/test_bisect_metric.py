"""The metric judge: learned noise, sequential runs, direction, and whole metric bisects."""

from __future__ import annotations

import math
import random

import pytest

from regress.bisect.metric import MetricJudge
from regress.bisect.search import EndpointError, SearchConfig, search
from regress.bisect.verdicts import Verdict

GOOD_AL, BAD_AL = 3.766, 3.283  # batch-8 acceptance length after / before the stale-map fix


def history(culprit: int, *, noise: float = 0.02, seed: int = 0, good=GOOD_AL, bad=BAD_AL):
    rng = random.Random(seed)
    calls: list[int] = []

    def measure(positions):
        calls.extend(positions)
        return [rng.gauss(bad if p >= culprit else good, noise) for p in positions]

    return measure, calls


@pytest.mark.parametrize(("n", "culprit"), [(100, 37), (100, 99), (1024, 1), (128, 64)])
def test_deterministic_metric_costs_log2_n_plus_3_runs(n, culprit):
    measure, calls = history(culprit, noise=0.0)
    judge = MetricJudge(n, measure)
    result = search(n, judge, SearchConfig(confirm=False))
    assert result.culprit == culprit
    assert len(calls) <= math.ceil(math.log2(n)) + 3
    assert all(j.runs == 1 for j in judge.judgements.values())


def test_noisy_metric_bisect_is_right_and_spends_runs_where_needed():
    measure, calls = history(37, noise=0.3 * (GOOD_AL - BAD_AL), seed=3)
    judge = MetricJudge(100, measure)
    result = search(100, judge, SearchConfig(confirm=False))
    assert result.culprit == 37
    runs = [j.runs for j in judge.judgements.values()]
    assert max(runs) > 1  # noise forces repeats somewhere...
    assert len(calls) < 5 * (len(runs) + 2)  # ...but fewer than 5 per commit and endpoint


def test_more_runs_only_while_unknown():
    measure, calls = history(10, noise=0.2)  # noisy: differences of ~2.4 sigma
    judge = MetricJudge(20, measure, max_runs=12)
    verdicts = judge([5, 15])
    assert verdicts == [Verdict.GOOD, Verdict.BAD]
    runs = {p: calls.count(p) for p in (5, 15)}
    assert all(2 <= r <= 12 for r in runs.values())
    assert all(
        judge.judgements[p].p_good >= judge.decide_at
        or judge.judgements[p].p_good <= 1 - judge.decide_at
        for p in (5, 15)
    )


def test_noise_estimate_uses_every_repeated_run():
    measure, _ = history(10, noise=0.1, seed=5)
    judge = MetricJudge(20, measure)
    judge([5])
    before = judge.noise()[1]
    judge([5])  # a re-ask adds runs at 5, and their spread joins the estimate
    assert judge.noise()[1] > before


def test_commit_between_endpoints_is_decided_by_closeness():
    def measure(positions):
        return [{0: 10.0, 20: 0.0}.get(p, 7.0) + 0.001 * (i % 3) for i, p in enumerate(positions)]

    judge = MetricJudge(20, measure)
    assert judge([5]) == [Verdict.GOOD]  # 7 is far from both, nearer to good's 10


def test_endpoints_that_do_not_separate_are_an_input_error():
    rng = random.Random(1)
    calls: list[int] = []

    def measure(ps):
        calls.extend(ps)
        return [rng.gauss(1.0, 0.1) for _ in ps]

    judge = MetricJudge(10, measure, endpoint_runs=4)
    with pytest.raises(EndpointError, match="does not separate"):
        judge([5])
    assert calls.count(0) == 4 and calls.count(10) == 4  # the cap, then give up


def test_endpoint_without_numbers_is_an_input_error():
    judge = MetricJudge(10, lambda ps: [None if p == 10 else 1.0 for p in ps])
    with pytest.raises(EndpointError, match="no number at the bad endpoint"):
        judge([5])


@pytest.mark.parametrize("direction", [+1, -1])
def test_direction_rule_refuses_a_bad_endpoint_on_the_better_side(direction):
    """The bad endpoint must be worse in the given direction: the rule, not luck, decides this.

    The same history passes with one direction and fails with the other, so the test fails if the
    rule in ``MetricJudge._ensure_endpoints`` is removed (no error either way) or flipped.
    """
    measure, _ = history(5, noise=0.0)  # AL drops from good to bad: higher is better
    judge = MetricJudge(10, measure, direction=direction)
    if direction == +1:
        assert judge([5]) == [Verdict.BAD]
    else:
        with pytest.raises(EndpointError, match="--find-fix"):
            judge([5])


@pytest.mark.parametrize("broken", [lambda self, good, bad: True, lambda self, good, bad: False])
def test_without_the_direction_rule_the_guard_above_fails(monkeypatch, broken):
    """Removing the rule (always True) or inverting the outcome (always False) breaks one case."""
    monkeypatch.setattr(MetricJudge, "bad_is_worse", broken)
    with pytest.raises((AssertionError, pytest.fail.Exception, EndpointError)):
        for direction in (+1, -1):
            test_direction_rule_refuses_a_bad_endpoint_on_the_better_side(direction)


def test_unmeasurable_commit_becomes_skip():
    def measure(positions):
        return [None if p == 4 else (3.0 if p >= 6 else 4.0) for p in positions]

    judge = MetricJudge(10, measure, max_runs=3)
    assert judge([4]) == [Verdict.SKIP]


def test_bad_caps_are_refused():
    with pytest.raises(ValueError):
        MetricJudge(10, lambda ps: [], endpoint_runs=1)
    with pytest.raises(ValueError):
        MetricJudge(10, lambda ps: [], min_runs=3, max_runs=2)
