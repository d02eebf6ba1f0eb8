"""The metric judge: endpoint distributions, adaptive runs, direction, and a whole metric bisect."""

from __future__ import annotations

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


def test_metric_bisect_finds_the_al_drop_with_few_runs():
    measure, calls = history(37)
    judge = MetricJudge(100, measure)
    result = search(100, judge, SearchConfig())
    assert result.culprit == 37
    assert judge.executions == len(calls)
    commits = {p for p in calls if 0 < p < 100}
    assert len(calls) <= 2 * 5 + 6 * len(commits)  # endpoints + few runs per judged commit
    assert all(not j.forced for j in judge.judgements.values())


def test_more_runs_only_while_unknown():
    measure, calls = history(10, noise=0.2)  # noisy: differences of ~2.4 sigma
    judge = MetricJudge(20, measure, max_runs=12)
    verdicts = judge([5, 15])
    assert verdicts == [Verdict.GOOD, Verdict.BAD]
    runs = {p: calls.count(p) for p in (5, 15)}
    assert all(3 <= r <= 12 for r in runs.values())


def test_commit_between_endpoints_is_decided_by_closeness():
    def measure(positions):
        return [{0: 10.0, 20: 0.0}.get(p, 7.0) + 0.001 * (i % 3) for i, p in enumerate(positions)]

    judge = MetricJudge(20, measure)
    assert judge([5]) == [Verdict.GOOD]  # 7 is different from both, nearer to good's 10


def test_endpoints_that_do_not_separate_are_an_input_error():
    rng = random.Random(1)
    judge = MetricJudge(10, lambda ps: [rng.gauss(1.0, 0.1) for _ in ps])
    with pytest.raises(EndpointError, match="does not separate"):
        judge([5])


def test_endpoint_without_numbers_is_an_input_error():
    judge = MetricJudge(10, lambda ps: [None if p == 10 else 1.0 for p in ps])
    with pytest.raises(EndpointError, match="no number at the bad endpoint"):
        judge([5])


def test_direction_mismatch_suggests_find_fix():
    measure, _ = history(5)  # AL drops from good to bad
    judge = MetricJudge(10, measure, direction=-1)  # but we said lower is better
    with pytest.raises(EndpointError, match="--find-fix"):
        judge([5])


def test_with_direction_a_better_commit_is_not_blamed():
    def measure(positions):
        level = {0: 3.7, 10: 3.2}.get(positions[0], 4.5)
        return [level + 0.001 * i for i, _ in enumerate(positions)]

    judge = MetricJudge(
        10, lambda ps: [measure([p])[0] + 0.001 * i for i, p in enumerate(ps)], direction=+1
    )
    assert judge([5]) == [Verdict.GOOD]


def test_unmeasurable_commit_becomes_skip():
    def measure(positions):
        return [
            None if p == 4 else (3.0 if p >= 6 else 4.0) + 0.01 * random.random() for p in positions
        ]

    judge = MetricJudge(10, measure)
    assert judge([4]) == [Verdict.SKIP]
