"""The pure search on integers: bounds, skips, parallel rounds, switching, verification."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regress.bisect.observations import pick
from regress.bisect.search import EndpointError, Observations, SearchConfig, search
from regress.bisect.strategies import deterministic as det_mod
from regress.bisect.verdicts import Status, Verdict
from regress.errors import UsageError

G, B, S = Verdict.GOOD, Verdict.BAD, Verdict.SKIP


def oracle(culprit, *, skip=frozenset(), flake=None, seed=0, calls=None):
    """Evaluator for a history whose first bad position is ``culprit``."""
    rng = random.Random(seed)

    def evaluate(positions):
        out = []
        for p in positions:
            if calls is not None:
                calls.append(p)
            if p in skip:
                out.append(S)
            elif p >= culprit:
                out.append(G if flake and rng.random() < flake[1] else B)
            else:
                out.append(B if flake and rng.random() < flake[0] else G)
        return out

    return evaluate


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 5000).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))))
def test_deterministic_finds_culprit_within_log_bound(case):
    n, culprit = case
    result = search(n, oracle(culprit), SearchConfig(mode="deterministic"))
    assert result.status == "found"
    assert result.culprit == culprit
    assert result.confidence == 1.0
    # endpoint checks aside, at most ceil(log2 n) + 1 probes (the +1 confirms the culprit)
    assert result.probes - result.endpoint_probes <= math.ceil(math.log2(n)) + 1
    assert result.endpoint_probes <= 3  # 0 and n once each (n may be re-run as culprit)


def test_auto_mode_matches_deterministic_without_noise():
    result = search(1024, oracle(700), SearchConfig())
    assert (result.culprit, result.strategy, result.switched) == (700, "deterministic", None)
    assert result.probes == 2 + 10 + 1


@pytest.mark.parametrize("cluster", [(40, 160), (100, 612), (300, 330)])
def test_skip_cluster_is_jumped_not_walked(cluster):
    """A cluster of K untestable commits costs O(log K) extra probes, not K."""
    lo, hi = cluster
    skip = frozenset(range(lo, hi))
    calls: list[int] = []
    culprit = 700
    result = search(
        1024, oracle(culprit, skip=skip, calls=calls), SearchConfig(mode="deterministic")
    )
    assert result.culprit == culprit
    skipped_probes = sum(p in skip for p in calls)
    k = hi - lo
    assert skipped_probes <= 4 * math.ceil(math.log2(k + 1))
    assert result.probes <= 10 + 2 + 1 + skipped_probes + 2


def test_walking_past_a_cluster_would_break_the_skip_bound(monkeypatch):
    """The guard above fails for a git-bisect-like walk (nearest untested commit first)."""

    def walk(ideal, lo, hi, obs, taken=()):
        free = [p for p in range(lo + 1, hi) if not obs.untestable(p) and p not in taken]
        return min(free, key=lambda p: (abs(p - ideal), p)) if free else None

    monkeypatch.setattr(det_mod, "pick", walk)
    skip = frozenset(range(100, 612))
    calls: list[int] = []
    search(1024, oracle(700, skip=skip, calls=calls), SearchConfig(mode="deterministic"))
    assert sum(p in skip for p in calls) > 4 * math.ceil(math.log2(513))


def test_culprit_inside_untestable_run_is_reported_as_ambiguous_interval():
    skip = frozenset(range(50, 60))
    result = search(100, oracle(55, skip=skip), SearchConfig(mode="deterministic"))
    assert result.status == "ambiguous"
    assert result.culprit is None
    assert result.interval == (50, 60)  # 55 is somewhere in 50..60; 49 good, 60 bad


def test_pick_jumps_beyond_a_run_of_skips():
    obs = Observations(100)
    assert pick(50, 0, 100, obs) == 50
    for p in (48, 50, 51):
        obs.add(p, S)
    assert obs.spans() == [(48, 51)]
    assert obs.blocked(49)  # between two skips with nothing tested between: assumed broken
    # as far beyond the run as it is wide: 55 or 44, the nearer to the ideal split wins
    assert pick(50, 0, 100, obs) == 55
    assert pick(50, 30, 100, obs, taken=[55]) == 44
    # near the interval's end we go halfway there instead
    assert pick(50, 47, 53, obs) == 52
    assert pick(50, 47, 52, obs) is None
    obs.add(49, G)  # a pass splits the run in two
    assert obs.spans() == [(48, 48), (50, 51)]


@pytest.mark.parametrize("jobs", [2, 3, 7])
def test_k_section_with_parallel_jobs(jobs):
    rounds: list[list[int]] = []
    result = search(
        4096,
        oracle(1234),
        SearchConfig(mode="deterministic", jobs=jobs),
        progress=lambda e: rounds.append(e.positions),
    )
    assert result.culprit == 1234
    search_rounds = [r for r in rounds[1:] if len(r) > 1]
    assert all(len(r) <= jobs for r in rounds)
    assert len(search_rounds) <= math.ceil(math.log(4096) / math.log(jobs + 1)) + 1


def test_endpoint_errors_are_usage_errors():
    with pytest.raises(EndpointError, match="good endpoint does not pass"):
        search(10, lambda ps: [B for _ in ps])
    with pytest.raises(EndpointError, match="bad endpoint does not fail"):
        search(10, lambda ps: [G for _ in ps])
    with pytest.raises(EndpointError, match="could not test"):
        search(10, lambda ps: [S for _ in ps])
    assert EndpointError("x").exit_code == 2


def test_flaky_good_endpoint_switches_to_flaky_mode():
    answers = iter([B, B])  # first endpoint run of 0 fails, 10 fails

    def evaluate(positions):
        out = []
        for p in positions:
            first = next(answers, None)
            out.append(first if first is not None else (B if p >= 7 else G))
        return out

    result = search(10, evaluate, SearchConfig())
    assert result.switched and "good (old) endpoint" in result.switched
    assert result.strategy == "flaky"
    assert result.culprit == 7


def test_contradicting_confirmation_switches_then_finds():
    """A false fail fools binary search; the confirmation rerun catches it and auto mode recovers."""
    fooled = {"done": False}
    calls: list[int] = []

    def evaluate(positions):
        out = []
        for p in positions:
            calls.append(p)
            if p == 32 and not fooled["done"]:  # the first midpoint of 0..64
                fooled["done"] = True
                out.append(B)  # a good commit fails once
            else:
                out.append(B if p >= 40 else G)
        return out

    result = search(64, evaluate, SearchConfig())
    assert calls[2] == 32
    assert result.switched == "position 32 both passed and failed"
    assert result.strategy == "flaky"
    assert result.culprit == 40


def test_without_confirmation_the_false_fail_would_be_blamed():
    """The guard above fails without the confirmation run: 32 is blamed."""
    fooled = {"done": False}

    def evaluate(positions):
        out = []
        for p in positions:
            if p == 32 and not fooled["done"]:
                fooled["done"] = True
                out.append(B)
            else:
                out.append(B if p >= 40 else G)
        return out

    assert search(64, evaluate, SearchConfig(confirm=False)).culprit == 32


def test_strict_deterministic_mode_is_inconclusive_on_contradiction():
    obs = Observations(20)
    obs.add(5, B)
    obs.add(15, G)  # good after bad
    result = search(20, oracle(10), SearchConfig(mode="deterministic"), observations=obs)
    assert result.status == "inconclusive"
    assert "contradiction" in result.notes[0]


def _good_endpoint_flips_once(culprit):
    """The old endpoint fails its first run and passes every rerun; the rest is clean."""
    seen = []
    clean = oracle(culprit)

    def evaluate(positions):
        out = []
        for p in positions:
            out.append(B if p == 0 and 0 not in seen else clean([p])[0])
            seen.append(p)
        return out

    return evaluate


def test_strict_mode_ends_inconclusive_when_an_endpoint_flips_and_never_turns_flaky():
    # Mutation guarded: `self.config.mode != "auto"` dropped from Search._switch, so strict
    # (deterministic) mode switched to flaky on the flip and answered "found" instead.
    result = search(20, _good_endpoint_flips_once(10), SearchConfig(mode="deterministic"))
    assert result.status == "inconclusive"
    assert (result.strategy, result.switched) == ("deterministic", None)
    assert any(
        n.startswith("contradiction: position 0 both passed and failed") for n in result.notes
    )
    auto = search(20, _good_endpoint_flips_once(10), SearchConfig(mode="auto"))
    assert auto.switched and auto.strategy == "flaky"  # the same flip in auto mode does switch


@pytest.mark.parametrize(("n", "eps"), [(64, 0.1), (512, 0.2), (200, 0.3)])
def test_flaky_mode_finds_culprit_despite_false_fails(n, eps):
    hits = 0
    for seed in range(20):
        culprit = random.Random(seed).randint(1, n)
        result = search(n, oracle(culprit, flake=(eps, 0.0), seed=seed), SearchConfig(mode="flaky"))
        hits += result.culprit == culprit
        assert result.status is Status.FOUND
        assert result.confidence >= 0.99
    assert hits >= 19


def test_verify_runs_are_an_extra_demand_on_top_of_the_posterior():
    result = search(
        64, oracle(20, flake=(0.1, 0.0), seed=2), SearchConfig(mode="flaky", verify_runs=3)
    )
    obs = result.observations
    assert result.culprit == 20
    assert obs.runs(20) >= 3 and obs.runs(19) >= 3


def test_flaky_mode_two_sided_noise():
    hits = sum(
        search(
            300, oracle(123, flake=(0.1, 0.1), seed=s), SearchConfig(mode="flaky", false_pass=True)
        ).culprit
        == 123
        for s in range(15)
    )
    assert hits >= 14


def test_flaky_k_quantiles_with_jobs():
    rounds: list[list[int]] = []
    result = search(
        1000,
        oracle(321, flake=(0.1, 0.0), seed=4),
        SearchConfig(mode="flaky", jobs=4),
        progress=lambda e: rounds.append(e.positions),
    )
    assert result.culprit == 321
    assert max(len(r) for r in rounds[1:]) <= 4
    assert any(len(r) == 4 for r in rounds)


def test_flaky_ambiguous_when_only_untestable_commits_split_the_culprit():
    skip = frozenset({41, 42})
    result = search(100, oracle(42, skip=skip, flake=(0.05, 0), seed=1), SearchConfig(mode="flaky"))
    assert result.status == "ambiguous"
    a, b = result.interval
    assert a <= 42 <= b and b - a <= 3


def test_max_probes_gives_up_inconclusive():
    result = search(
        1000, oracle(500, flake=(0.4, 0.0), seed=3), SearchConfig(mode="flaky", max_probes=12)
    )
    assert result.status == "inconclusive"
    assert result.culprit is None
    assert result.probes >= 12


def test_evaluator_must_answer_every_position():
    with pytest.raises(ValueError, match="one verdict per position"):
        search(10, lambda ps: [G])


def test_config_validation():
    for bad in (
        dict(mode="x"),
        dict(jobs=0),
        dict(confidence=1.0),
        dict(confidence=math.nan),
        dict(endpoint_runs=0),
        dict(verify_runs=-1),
        dict(max_probes=0),
    ):
        with pytest.raises(UsageError, match=r"--|mode"):
            SearchConfig(**bad)


def test_observations_contradiction_reasons():
    obs = Observations(5)
    assert obs.contradiction() is None
    obs.add(2, G)
    obs.add(2, B)
    assert "both passed and failed" in obs.contradiction()
    obs2 = Observations(5)
    obs2.add(1, B)
    obs2.add(3, G)
    assert "passed after" in obs2.contradiction()
    with pytest.raises(ValueError):
        obs2.add(9, G)


def test_verdict_swap_is_an_involution():
    for v in Verdict:
        assert v.swapped().swapped() is v
    assert G.swapped() is B and S.swapped() is S
