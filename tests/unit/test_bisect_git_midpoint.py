"""The deterministic graph search picks git bisect's own midpoint, step by step.

The oracle is git itself: each graph is written as a real repository (one empty commit per node,
commit dates in node order) and ``git rev-list --bisect BAD ^GOOD...`` names the commit that
``git bisect`` would check out next. regress must name the same one in every state, so a
deterministic bisect probes the same commits as ``git bisect run`` and needs the same steps.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from regress.bisect.git import git
from regress.bisect.graph import Graph
from regress.bisect.history import resolve_range
from regress.bisect.observations import Observations
from regress.bisect.search import SearchConfig, search
from regress.bisect.session import BisectConfig
from regress.bisect.strategies.deterministic import GraphBisection, git_midpoint
from regress.bisect.synthetic import interleaved_history
from regress.bisect.verdicts import Verdict

G, B = Verdict.GOOD, Verdict.BAD

IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}

# two branches of two commits each (1-2 and 3-4), merged by 5, then 6: weights 1 2 1 2 5 6 of 6,
# so 2 and 4 both split 2 | 4; git scans oldest first and takes 2 (newest-first took 4)
TIE = Graph([[], [0], [1], [0], [3], [2, 4], [5]])
# a chain 1-2-3 and a merge 5 of 4 and 1: 3 and 5 both have weight 3 of 7; git weighs merges
# first and returns the merge 5 at once, a plain oldest-first scan would take 3
MERGE_FIRST = Graph([[], [0], [1], [2], [0], [4, 1], [3, 5], [6]])


def write_graph(path: Path, graph: Graph) -> list[str]:
    """A repository with one empty commit per node, dated in node order; the shas by node."""
    path.mkdir(parents=True)
    git(["init", "-q"], cwd=path)
    tree = git(["hash-object", "-t", "tree", "-w", "--stdin"], cwd=path).stdout.strip()
    shas: list[str] = []
    for i, ps in enumerate(graph.parents):
        args = ["commit-tree", tree, "-m", f"node {i}"]
        for p in ps:
            args += ["-p", shas[p]]
        date = f"@{1_700_000_000 + 60 * i} +0000"
        env = dict(IDENTITY, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
        shas.append(git(args, cwd=path, env=env).stdout.strip())
    return shas


def git_pick(path: Path, shas: list[str], bad: int, goods: list[int]) -> int:
    """The node ``git rev-list --bisect`` names for this state."""
    out = git(["rev-list", "--bisect", shas[bad], *(f"^{shas[g]}" for g in goods)], cwd=path)
    return shas.index(out.stdout.strip())


def bisect_like_git(path: Path, graph: Graph, shas: list[str], culprit: int) -> int:
    """Walk a whole bisect, checking every pick against git's; return the number of steps."""
    obs = Observations(graph.n, graph=graph)
    obs.add(0, G)
    obs.add(graph.n, B)
    strategy = GraphBisection(graph)
    bad, goods, steps = graph.n, [0], 0
    while strategy.candidates(obs).bit_count() > 1:
        [mine] = strategy.propose(obs, 1)
        assert mine == git_pick(path, shas, bad, goods), f"step {steps}: {goods=} {bad=}"
        steps += 1
        if graph.is_ancestor(culprit, mine):
            obs.add(mine, B)
            bad = mine
        else:
            obs.add(mine, G)
            goods.append(mine)
    assert strategy.estimate(obs).top == culprit
    return steps


def random_dag(n: int, seed: int) -> Graph:
    """Several branches open at once: a node continues one of the recent tips, or merges two."""
    rnd = random.Random(seed)
    parents: list[list[int]] = [[]]
    tips = [0]
    for i in range(1, n + 1):
        first = rnd.choice(tips[-4:])
        ps = [first]
        if len(tips) > 1 and rnd.random() < 0.3:
            ps.append(rnd.choice([t for t in tips if t != first]))
        tips = [t for t in tips if t not in ps] + [i]
        if rnd.random() < 0.3:
            tips.append(rnd.randrange(i))  # a new branch from an older commit
        parents.append(ps)
    heads = [i for i in range(1, n) if not any(i in ps for ps in parents[i + 1 :])]
    parents[n] = sorted({*parents[n], *heads})  # the bad end merges every open tip
    return Graph(parents)


@pytest.mark.parametrize(
    ("graph", "want"), [(TIE, 2), (MERGE_FIRST, 5)], ids=["tie", "merge-first"]
)
def test_first_probe_is_gits_on_hand_built_graphs(tmp_path: Path, graph: Graph, want: int):
    shas = write_graph(tmp_path / "r", graph)
    assert git_pick(tmp_path / "r", shas, graph.n, [0]) == want  # the oracle agrees
    assert git_midpoint(graph, graph.everything) == want
    obs = Observations(graph.n, graph=graph)
    assert GraphBisection(graph).propose(obs, 1) == [want]


@pytest.mark.parametrize("seed", range(6))
def test_every_step_matches_git_rev_list_bisect(tmp_path: Path, seed: int):
    graph = random_dag(50, seed)
    assert graph.merges and not graph.linear
    shas = write_graph(tmp_path / "r", graph)
    for culprit in random.Random(seed).sample(range(1, graph.n + 1), 4):
        bisect_like_git(tmp_path / "r", graph, shas, culprit)


def test_search_costs_exactly_gits_steps_plus_the_endpoints(tmp_path: Path):
    graph = random_dag(80, 11)
    shas = write_graph(tmp_path / "r", graph)
    for culprit in range(1, graph.n + 1, 9):
        steps = bisect_like_git(tmp_path / "r", graph, shas, culprit)
        calls: list[int] = []

        def evaluate(positions, culprit=culprit, calls=calls):
            calls.extend(positions)
            return [B if graph.is_ancestor(culprit, p) else G for p in positions]

        result = search(graph.n, evaluate, SearchConfig(confirm=False), graph=graph)
        assert result.culprit == culprit and len(calls) == steps + 2


def test_real_interleaved_history_is_bisected_in_gits_order(tmp_path: Path):
    # branches developed side by side: `--topo-order` would number each branch's commits together
    # and the search would then break ties unlike git; the range is read in date order
    path = tmp_path / "r"
    shas, culprit = interleaved_history(path, 40, seed=3)
    topo = git(["rev-list", "--topo-order", "main"], cwd=path).stdout.split()
    assert topo != git(["rev-list", "--date-order", "main"], cwd=path).stdout.split()
    rng = resolve_range(BisectConfig(good=shas[0], bad=shas[-1], command=["true"], repo=str(path)))
    graph = rng.graph
    assert graph is not None
    position = {sha: i for i, sha in enumerate(rng.commits)}
    bisect_like_git(path, graph, rng.commits, position[culprit])
