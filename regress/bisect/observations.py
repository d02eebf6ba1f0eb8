"""What a bisect has seen so far, and where it can still probe around untestable commits."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence

from regress.bisect.graph import Graph
from regress.bisect.verdicts import Verdict


class Observations:
    """Every verdict seen so far, per position, in the order they arrived.

    Args:
        n: the new endpoint's position.
        graph: the commit graph on a merge history (``None``: positions are a chain); it decides
            what counts as a contradiction.
    """

    def __init__(self, n: int, graph: Graph | None = None) -> None:
        if n < 1:
            raise ValueError("a search needs at least one candidate (n >= 1)")
        self.n = n
        self.graph = graph
        self.counts: dict[int, list[int]] = {}  # position -> [passes, fails, skips]
        self.history: list[tuple[int, Verdict]] = []
        self._spans: list[tuple[int, int]] | None = None

    def add(self, position: int, verdict: Verdict) -> None:
        if not 0 <= position <= self.n:
            raise ValueError(f"position {position} outside 0..{self.n}")
        row = self.counts.setdefault(position, [0, 0, 0])
        row[(Verdict.GOOD, Verdict.BAD, Verdict.SKIP).index(verdict)] += 1
        self.history.append((position, verdict))
        self._spans = None

    def passes(self, position: int) -> int:
        return self.counts.get(position, (0, 0, 0))[0]

    def fails(self, position: int) -> int:
        return self.counts.get(position, (0, 0, 0))[1]

    def runs(self, position: int) -> int:
        """Runs that gave a pass or a fail (skips carry no information)."""
        row = self.counts.get(position, (0, 0, 0))
        return row[0] + row[1]

    def total(self, position: int) -> int:
        """Every execution at this position, skips included."""
        return sum(self.counts.get(position, (0, 0, 0)))

    def untestable(self, position: int) -> bool:
        """Skipped and never decided: the search avoids it rather than retrying it."""
        row = self.counts.get(position, (0, 0, 0))
        return row[2] > 0 and row[0] + row[1] == 0

    def spans(self) -> list[tuple[int, int]]:
        """Runs of untestable commits: from one skipped position to the last skipped one after it
        with nothing tested in between.

        Broken commits come in runs (a build break lasts until its fix), so the commits between two
        skipped ones are assumed untestable too. That assumption is what lets the search jump over
        a cluster and call a culprit inside one ambiguous without probing every member.
        """
        if self._spans is None:
            spans: list[tuple[int, int]] = []
            start = last = None
            for p in sorted(self.counts):
                if self.untestable(p):
                    start = p if start is None else start
                    last = p
                elif self.runs(p):
                    if start is not None:
                        spans.append((start, last))
                    start = last = None
            if start is not None:
                spans.append((start, last))
            self._spans = spans
        return self._spans

    def span_of(self, position: int) -> tuple[int, int] | None:
        spans = self.spans()
        i = bisect.bisect_right(spans, (position, math.inf)) - 1
        if i >= 0 and spans[i][0] <= position <= spans[i][1]:
            return spans[i]
        return None

    def blocked(self, position: int) -> bool:
        """Known or assumed untestable (inside a run of skips, see :meth:`spans`)."""
        return self.span_of(position) is not None

    def tested(self) -> list[int]:
        return sorted(p for p, row in self.counts.items() if row[0] + row[1] > 0)

    def contradiction(self) -> str | None:
        """Why these observations cannot come from a deterministic probe, or ``None``."""
        for p, (good, bad, _) in sorted(self.counts.items()):
            if good and bad:
                return f"position {p} both passed and failed"
        good = [p for p, row in self.counts.items() if row[0]]
        bad = [p for p, row in self.counts.items() if row[1]]
        if self.graph is not None:
            for g in sorted(good):
                for b in sorted(bad):
                    if self.graph.is_ancestor(b, g):
                        return f"position {g} passed although its ancestor {b} failed"
            return None
        if good and bad and max(good) > min(bad):
            return f"position {max(good)} passed after position {min(bad)} failed"
        return None


def pick(ideal: int, lo: int, hi: int, obs: Observations, taken: Sequence[int] = ()) -> int | None:
    """The position to probe in ``(lo, hi)`` for an ideal split at ``ideal``, skipping untestables.

    When ``ideal`` lies in a run of untestable commits (:meth:`Observations.spans`) we jump as far
    beyond the run as it is wide (or halfway to the interval's end, if nearer), on the side that
    keeps the split most balanced. Every skip there widens the run, so the jumps double: a cluster
    of K broken commits costs O(log K) probes instead of the K of a commit-by-commit walk.
    """

    def free(p: int) -> bool:
        return lo < p < hi and not obs.blocked(p) and p not in taken

    if free(ideal):
        return ideal
    s, e = obs.span_of(ideal) or (ideal, ideal)
    width = e - s + 1
    options = []
    right = e + width if e + width < hi else (e + hi + 1) // 2
    left = s - width if s - width > lo else (lo + s) // 2
    for target, side in ((right, range(e + 1, hi)), (left, range(lo + 1, s))):
        if not side:
            continue
        target = min(max(target, side.start), side.stop - 1)
        best = _nearest(target, side, free)
        if best is not None:
            options.append(best)
    return min(options, key=lambda p: (abs(p - ideal), p)) if options else None


def _nearest(target: int, side: range, free: Callable[[int], bool]) -> int | None:
    for d in range(len(side)):
        for p in (target + d, target - d):
            if p in side and free(p):
                return p
    return None
