"""git bisect semantics: trust every verdict, split the candidates in half (or k parts).

:class:`Bisection` works on positions of a linear history and jumps over runs of untestable
commits (:func:`regress.bisect.observations.pick`). :class:`GraphBisection` is git bisect's own
rule for merge histories (``bisect.c``'s ``find_bisection``): the candidates are the ancestors of
every bad commit that are not ancestors of a good one, and the next probe is the candidate whose
ancestor count among them is closest to half, so its verdict removes about half either way. Which
of several equally good candidates it takes is git's choice too (:func:`git_midpoint`), so a
deterministic bisect probes the same commits as ``git bisect run`` and needs the same steps.
"""

from __future__ import annotations

from regress.bisect.graph import Graph, members
from regress.bisect.observations import Observations, pick
from regress.bisect.strategies import Estimate


class Bisection:
    """Binary (or k-section) search along a chain of positions ``0..n``."""

    name = "deterministic"

    @staticmethod
    def bounds(obs: Observations) -> tuple[int, int]:
        """Last known good and first known bad position (the endpoints are assumed)."""
        good = [p for p, row in obs.counts.items() if row[0]]
        bad = [p for p, row in obs.counts.items() if row[1]]
        return max([0, *good]), min([obs.n, *bad])

    def propose(self, obs: Observations, k: int) -> list[int]:
        lo, hi = self.bounds(obs)
        chosen: list[int] = []
        for i in range(1, k + 1):
            ideal = lo + round((hi - lo) * i / (k + 1))
            p = pick(ideal, lo, hi, obs, chosen)
            if p is not None:
                chosen.append(p)
        return sorted(chosen)

    def estimate(self, obs: Observations) -> Estimate:
        lo, hi = self.bounds(obs)
        found = hi - lo == 1
        stuck = not found and all(obs.blocked(p) for p in range(lo + 1, hi))
        return Estimate(
            top=hi if found else None,
            mass=1.0 if found else 1.0 / max(hi - lo, 1),
            candidates=max(hi - lo, 0),
            interval=(lo + 1, hi),
            found=found,
            stuck=stuck,
        )

    def rates(self, obs: Observations) -> dict[str, float]:
        return {}

    def parents(self, c: int) -> list[int]:
        return [c - 1]


def git_midpoint(graph: Graph, cand: int) -> int | None:
    """The candidate git bisect tests next, among ``cand`` (a bit set of nodes), without skips.

    The rule of ``find_bisection`` in git's ``bisect.c`` (git/git, read for the rule only): every
    candidate's weight ``w`` is the number of candidates among its ancestors, itself included, and
    its distance ``min(w, nr - w)`` (``nr`` candidates, the bad end among them). git scans the
    candidates oldest first by commit date (the reverse of ``rev-list``'s date order; node numbers
    follow it, see :meth:`regress.bisect.git.Repo.graph`) and

    1. returns the first merge (two or more parents among the candidates) that sits halfway,
       ``|2w - nr| <= 1`` (or within ``nr / 1024`` of it on huge ranges): git weighs merges first;
    2. then, filling in the other weights in scan order, returns the first one-parent candidate
       that sits halfway (root candidates, with no parent among them, are never returned early);
    3. else returns the first candidate of the largest distance in scan order (later ties lose).

    Only the order differs from "closest to half", but it decides ties, and which of two tied
    commits is tested changes the shape of what is left: the earlier closest-to-half rule with
    ties to the newest picked another commit than git on a quarter to a third of the steps of
    ``benchmarks/bisect_merges.py``'s histories and needed up to one step more than ``git bisect
    run`` (0.1-0.2 on average); this rule picks git's commit on every step.

    Returns:
        The node, or ``None`` when there are no candidates.
    """
    nodes = members(cand)
    nr = len(nodes)
    if not nr:
        return None
    weight = {m: (graph.ancestors[m] & cand).bit_count() for m in nodes}
    inside = {m: sum(cand >> p & 1 for p in graph.parents[m]) for m in nodes}

    def halfway(m: int) -> bool:
        off = abs(2 * weight[m] - nr)
        return off <= 1 or off < nr // 1024

    for merges in (True, False):
        for m in nodes:
            if (inside[m] > 1 if merges else inside[m] == 1) and halfway(m):
                return m
    return max(nodes, key=lambda m: (min(weight[m], nr - weight[m]), -m))


class GraphBisection:
    """git bisect on a commit graph: keep the ancestors of bad, drop the ancestors of good."""

    name = "deterministic"

    def __init__(self, graph: Graph) -> None:
        self.graph = graph

    def candidates(self, obs: Observations) -> int:
        """The bit set of commits that can still be the culprit."""
        g = self.graph
        mask = g.everything
        for p, (good, bad, _) in obs.counts.items():
            if bad:
                mask &= g.ancestors[p]
            if good:
                mask &= ~g.ancestors[p]
        return mask

    def propose(self, obs: Observations, k: int) -> list[int]:
        """git's own choice for one probe (:func:`git_midpoint`) when it is testable; otherwise,
        and for ``k`` probes, the testable candidates whose ancestor counts come closest to
        ``i / (k + 1)`` of the candidates, ties to the older (git's scan order).

        With untestable commits git bisect sorts by distance and then by object id and may jump
        away pseudo-randomly (``skip_away``); regress takes the best testable candidate instead.
        """
        cand = self.candidates(obs)
        total = cand.bit_count()
        if total < 2:
            return []
        if k == 1:
            best = git_midpoint(self.graph, cand)
            if best is not None and not obs.untestable(best):
                return [best]
        scored = []
        for m in members(cand):
            below = (self.graph.ancestors[m] & cand).bit_count()
            if below < total and not obs.untestable(m):
                scored.append((below, m))
        chosen: list[int] = []
        for i in range(1, k + 1):
            target = total * i / (k + 1)
            # ties go to the older commit, first in git bisect's oldest-first scan
            options = [(abs(below - target), m) for below, m in scored if m not in chosen]
            if options:
                chosen.append(min(options)[1])
        return sorted(chosen)

    def estimate(self, obs: Observations) -> Estimate:
        cand = self.candidates(obs)
        nodes = members(cand)
        found = len(nodes) == 1
        stuck = not found and not self.propose(obs, 1)
        return Estimate(
            top=nodes[0] if found else None,
            mass=1.0 if found else 1.0 / max(len(nodes), 1),
            candidates=len(nodes),
            interval=(nodes[0], nodes[-1]) if nodes else (0, 0),
            found=found,
            stuck=stuck,
            suspects=tuple(nodes),
        )

    def rates(self, obs: Observations) -> dict[str, float]:
        return {}

    def parents(self, c: int) -> list[int]:
        return list(self.graph.parents[c])
