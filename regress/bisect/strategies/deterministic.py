"""git bisect semantics: trust every verdict, split the candidates in half (or k parts).

:class:`Bisection` works on positions of a linear history and jumps over runs of untestable
commits (:func:`regress.bisect.observations.pick`). :class:`GraphBisection` is git bisect's own
rule for merge histories (``bisect.c``'s ``find_bisection``): the candidates are the ancestors of
every bad commit that are not ancestors of a good one, and the next probe is the candidate whose
ancestor count among them is closest to half, so its verdict removes about half either way.
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
        cand = self.candidates(obs)
        total = cand.bit_count()
        scored = []
        for m in members(cand):
            below = (self.graph.ancestors[m] & cand).bit_count()
            if below < total and not obs.untestable(m):
                scored.append((below, m))
        chosen: list[int] = []
        for i in range(1, k + 1):
            target = total * i / (k + 1)
            # ties go to the newest commit, as git bisect's date-ordered walk breaks them
            options = [(abs(below - target), -m) for below, m in scored if m not in chosen]
            if options:
                chosen.append(-min(options)[1])
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
