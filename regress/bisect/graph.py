"""The commit graph of a bisect, as plain integers: who is an ancestor of whom.

Nodes are ``0..n`` in topological order: node ``0`` stands for the good endpoint and for every
commit reachable from it (git bisect's rule: those are not candidates), node ``n`` is the bad
endpoint, and every candidate's parents come before it. A linear history is the chain where each
node's only parent is the one before; :attr:`Graph.linear` tells the search which strategies apply.
On a real repository the nodes are also oldest first by commit date (:meth:`regress.bisect.git.Repo
.graph`), the order git bisect scans its candidates in, so the deterministic search breaks ties
between equally good midpoints by node number the way git does.

Ancestor sets are Python integers used as bit sets (bit ``i`` set: node ``i`` is an ancestor, the
node itself included), so "how many candidates lie below m" is one ``&`` and one popcount.
"""

from __future__ import annotations

from collections.abc import Sequence


class Graph:
    """Parents per node and the ancestor bit sets derived from them.

    Args:
        parents: ``parents[i]`` for nodes ``0..n``; every parent index is below ``i``; node 0 has
            none. A candidate whose parent lies outside the range points at node 0 instead.
    """

    def __init__(self, parents: Sequence[Sequence[int]]) -> None:
        if not parents or list(parents[0]):
            raise ValueError("node 0 (the good endpoint) comes first and has no parents")
        self.parents: list[tuple[int, ...]] = []
        self.ancestors: list[int] = []
        for i, ps in enumerate(parents):
            ps = tuple(dict.fromkeys(ps))
            if i and not ps:
                raise ValueError(f"node {i} has no parent: point range-external parents at 0")
            if any(not 0 <= p < i for p in ps):
                raise ValueError(f"node {i}'s parents {ps} must come before it")
            mask = 1 << i
            for p in ps:
                mask |= self.ancestors[p]
            self.parents.append(ps)
            self.ancestors.append(mask)
        self.n = len(parents) - 1
        if self.ancestors[self.n] != (1 << (self.n + 1)) - 1:
            raise ValueError("every node must be an ancestor of the last one (the bad endpoint)")

    @classmethod
    def chain(cls, n: int) -> Graph:
        """The linear history ``0 <- 1 <- ... <- n``."""
        return cls([[], *([i] for i in range(n))])

    @property
    def linear(self) -> bool:
        return all(ps == (i - 1,) for i, ps in enumerate(self.parents) if i)

    @property
    def merges(self) -> list[int]:
        return [i for i, ps in enumerate(self.parents) if len(ps) > 1]

    def is_ancestor(self, a: int, b: int) -> bool:
        """``a`` is ``b`` or one of its ancestors (so a bad ``a`` makes ``b`` bad)."""
        return bool(self.ancestors[b] >> a & 1)

    @property
    def everything(self) -> int:
        """The bit set of the candidates ``1..n`` (node 0 is known good)."""
        return (1 << (self.n + 1)) - 2


def members(mask: int) -> list[int]:
    """The nodes in a bit set, ascending."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out
