"""Search strategies and the vocabulary they share: where to probe next, and where we stand.

Each strategy is one module (``deterministic``: git bisect's trust-every-verdict halving;
``flaky``: the Bayesian posterior over the culprit), each in a linear flavour (positions ``0..n``
along a chain) and a graph flavour (nodes of a :class:`regress.bisect.graph.Graph`, as git bisect
walks merge histories). The driver in :mod:`regress.bisect.search` only speaks :class:`Strategy`;
no strategy imports the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from regress.bisect.observations import Observations


@dataclass
class Estimate:
    """Where a strategy stands: its best culprit, how sure it is, and what is left.

    Attributes:
        top: the most likely culprit, or ``None`` while a deterministic search has several.
        mass: how sure (posterior probability, or 1/candidates for deterministic search).
        candidates: how many commits can still be the culprit.
        interval: the first and last of them (positions; on a graph, the lowest and highest node).
        found: ``top`` is the answer.
        stuck: every commit that could split the candidates is untestable.
        suspects: on a graph, the candidates themselves (an interval means nothing there).
    """

    top: int | None
    mass: float
    candidates: int
    interval: tuple[int, int]
    found: bool
    stuck: bool = False
    suspects: tuple[int, ...] = ()

    def members(self) -> list[int]:
        """Every commit the answer may be, in position order."""
        return list(self.suspects) or list(range(self.interval[0], self.interval[1] + 1))


class Strategy(Protocol):
    """A search strategy: proposes where to probe next, and says where it stands."""

    name: str

    def propose(self, obs: Observations, k: int) -> list[int]:
        """Up to ``k`` positions to probe in parallel; empty when done or stuck."""
        ...

    def estimate(self, obs: Observations) -> Estimate:
        """The current best answer and whether it is final."""
        ...

    def rates(self, obs: Observations) -> dict[str, float]:
        """Estimated flake rates reported with the result (empty when the strategy has none)."""
        ...

    def parents(self, c: int) -> list[int]:
        """The commits whose verdicts, with ``c``'s own, prove ``c`` is the culprit."""
        ...
