"""Bisecting merge histories: the commit graph, git bisect's rule, flaky mode, skips, sessions."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regress.bisect.graph import Graph, members
from regress.bisect.observations import Observations
from regress.bisect.search import SearchConfig, search
from regress.bisect.session import BisectConfig, run_bisect
from regress.bisect.synthetic import merge_history
from regress.bisect.verdicts import Status, Verdict

G, B, S = Verdict.GOOD, Verdict.BAD, Verdict.SKIP


def dag(n: int, seed: int, merge_rate: float = 0.4) -> Graph:
    """Branches as side chains: node i's parent is a recent node, plus a second one at merges."""
    rnd = random.Random(seed)
    parents: list[list[int]] = [[]]
    for i in range(1, n + 1):
        first = max(i - 1 - rnd.randrange(3), 0)
        ps = [first]
        if i > 2 and rnd.random() < merge_rate:
            ps.append(rnd.randrange(0, i - 1))
        parents.append(ps)
    parents[n] = [*parents[n], n - 1]  # everything below the bad end
    for i in range(1, n):  # every node must reach n: hang dangling tips onto the next node
        if not any(i in parents[j] for j in range(i + 1, n + 1)):
            parents[i + 1].append(i)
    return Graph(parents)


def oracle(graph: Graph, culprit: int, *, skip=frozenset(), flake=0.0, seed=0, calls=None):
    rnd = random.Random(seed)

    def evaluate(positions):
        out = []
        for p in positions:
            if calls is not None:
                calls.append(p)
            if p in skip:
                out.append(S)
            elif graph.is_ancestor(culprit, p):
                out.append(B)
            else:
                out.append(B if rnd.random() < flake else G)
        return out

    return evaluate


def test_graph_ancestors_and_validation():
    g = Graph([[], [0], [0], [1, 2]])
    assert g.is_ancestor(1, 3) and g.is_ancestor(2, 3) and not g.is_ancestor(1, 2)
    assert g.merges == [3] and not g.linear and Graph.chain(5).linear
    assert members(g.ancestors[3] & g.everything) == [1, 2, 3]
    with pytest.raises(ValueError, match="must come before"):
        Graph([[], [0], [3], [1]])
    with pytest.raises(ValueError, match="ancestor of the last"):
        Graph([[], [0], [0]])  # node 1 does not reach node 2


@settings(max_examples=60, deadline=None)
@given(st.integers(3, 120), st.integers(0, 10**6), st.data())
def test_graph_bisection_finds_any_culprit_like_git_bisect(n, seed, data):
    graph = dag(n, seed)
    culprit = data.draw(st.integers(1, n))
    calls: list[int] = []
    result = search(
        n, oracle(graph, culprit, calls=calls), SearchConfig(confirm=False), graph=graph
    )
    assert result.status is Status.FOUND and result.culprit == culprit
    # git bisect gives no halving guarantee on arbitrary graphs either; a chain must halve
    assert len(calls) - 2 <= n
    if graph.linear:
        assert len(calls) - 2 <= math.ceil(math.log2(n))


def test_graph_bisection_on_a_wide_merge_history_is_logarithmic():
    # a mainline of 20 merges, each bringing a 10-commit branch: 220 commits
    parents: list[list[int]] = [[]]
    main = 0
    for _ in range(20):
        start = len(parents)
        for k in range(10):
            parents.append([main if k == 0 else start + k - 1])
        parents.append([main, len(parents) - 1])  # the merge: first parent mainline
        main = len(parents) - 1
    graph = Graph(parents)
    n = graph.n
    worst = 0
    for culprit in range(1, n + 1, 7):
        calls: list[int] = []
        result = search(
            n, oracle(graph, culprit, calls=calls), SearchConfig(confirm=False), graph=graph
        )
        assert result.culprit == culprit
        worst = max(worst, len(calls) - 2)
    assert worst <= math.ceil(math.log2(n)) + 2


def test_the_merge_is_named_only_when_the_merge_itself_is_the_culprit():
    # 1-2 on the branch, 3 on the mainline, 4 merges them, 5 after
    graph = Graph([[], [0], [1], [0], [3, 2], [4]])
    for culprit in (2, 4):
        result = search(5, oracle(graph, culprit), SearchConfig(), graph=graph)
        assert result.culprit == culprit


def test_skips_on_a_graph_leave_the_untestable_suspects():
    graph = Graph([[], [0], [1], [0], [3, 2], [4]])
    result = search(5, oracle(graph, 2, skip={2}), SearchConfig(), graph=graph)
    assert result.status is Status.AMBIGUOUS
    assert 2 in result.suspects and len(result.suspects) <= 2


def test_contradiction_on_a_graph_is_a_good_descendant_of_a_bad_commit():
    graph = Graph([[], [0], [1], [0], [3, 2], [4]])
    obs = Observations(5, graph=graph)
    obs.add(1, B)
    obs.add(3, G)
    assert obs.contradiction() is None  # 3 is not below 1: no contradiction on the graph
    obs.add(4, G)
    assert "ancestor 1 failed" in obs.contradiction()


@pytest.mark.parametrize("jobs", [2, 4])
def test_parallel_rounds_on_a_graph(jobs):
    graph = dag(200, 7)
    rounds: list[list[int]] = []
    result = search(
        200,
        oracle(graph, 123),
        SearchConfig(jobs=jobs),
        graph=graph,
        progress=lambda e: rounds.append(e.positions),
    )
    assert result.culprit == 123
    assert max(len(r) for r in rounds[1:]) <= jobs and any(len(r) > 1 for r in rounds[1:])


def test_flaky_mode_on_a_graph():
    hits = 0
    for seed in range(10):
        graph = dag(60, seed)
        culprit = random.Random(seed).randint(1, 60)
        result = search(
            60,
            oracle(graph, culprit, flake=0.1, seed=seed),
            SearchConfig(mode="flaky"),
            graph=graph,
        )
        hits += result.culprit == culprit
        assert result.rates["false_fail"] < 0.5
    assert hits >= 9


def test_auto_mode_switches_to_the_graph_posterior_on_contradiction():
    graph = dag(80, 3)
    result = search(80, oracle(graph, 41, flake=0.25, seed=5), SearchConfig(), graph=graph)
    if result.switched:
        assert result.strategy == "flaky"
    assert result.culprit == 41


PROBE = 'grep -q "BUG = True" app.py && exit 1 || exit 0\n'


def test_session_on_a_merge_history_names_the_commit_inside_the_branch(tmp_path: Path):
    shas, culprit = merge_history(tmp_path / "r", 15, seed=4)
    (tmp_path / "probe.sh").write_text(PROBE)
    config = BisectConfig(
        good=shas[0],
        bad=shas[-1],
        repo=str(tmp_path / "r"),
        command=["sh", str(tmp_path / "probe.sh")],
        cache_dir=str(tmp_path / "c"),
    )
    result = run_bisect(config)
    assert result.culprit.sha == culprit
    assert not result.culprit.subject.startswith("Merge")
    assert "commit graph" in result.notes[0]
    again = run_bisect(config)  # resume: every run comes from the store
    assert again.culprit.sha == culprit and again.cached == again.probes
    first_parent = run_bisect(BisectConfig(**{**config.__dict__, "first_parent": True}))
    assert first_parent.culprit.subject.startswith("Merge")  # the mainline only sees the merge
    assert "linear history" in first_parent.notes[0]


def test_flaky_session_on_a_merge_history(tmp_path: Path):
    shas, culprit = merge_history(tmp_path / "r", 10, seed=1)
    (tmp_path / "probe.sh").write_text(PROBE)
    result = run_bisect(
        BisectConfig(
            good=shas[0],
            bad=shas[-1],
            repo=str(tmp_path / "r"),
            command=["sh", str(tmp_path / "probe.sh")],
            cache_dir=str(tmp_path / "c"),
            flaky=True,
            jobs=2,
        )
    )
    assert result.culprit.sha == culprit and result.strategy == "flaky"
