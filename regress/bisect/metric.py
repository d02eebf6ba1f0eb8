"""Metric bisects: turn repeated measurements into good/bad verdicts the search can use.

The judge is an evaluator for :func:`regress.bisect.search.search`. It first measures both endpoints
repeatedly to learn what "good" and "bad" look like (and refuses to bisect a metric that does not
separate them), then gives each commit as many runs as it takes to call it the same as one endpoint
and different from the other (:func:`regress.bisect.stats.compare`): more runs only while unknown.
Like Pinpoint, each commit is compared against references rather than against a fixed number, so
noise, drift of the absolute level, and the size of the change all inform the decision.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from regress.bisect.search import EndpointError
from regress.bisect.stats import compare, effect_size, p_value
from regress.bisect.verdicts import Comparison, Verdict

Measure = Callable[[Sequence[int]], Sequence[float | None]]


@dataclass
class Judgement:
    """Why a commit got its verdict: kept for the report's steps."""

    verdict: Verdict
    vs_good: Comparison
    vs_bad: Comparison
    forced: bool = False  # decided by closeness after max_runs, not by the tests


@dataclass
class MetricJudge:
    """Evaluator that measures a metric until each commit is like the good or the bad endpoint.

    Args:
        n: the new endpoint's position (0 is the old one).
        measure: runs the metric probe once per given position (possibly in parallel); ``None``
            for a run that could not measure.
        endpoint_runs: measurements of each endpoint before anything else.
        min_runs: first measurements of a commit.
        max_runs: a commit still unknown after this many is decided by closeness (and marked).
        direction: +1 higher is better, -1 lower is better, ``None`` learns it from the endpoints;
            with a direction, a move to the better side is never called bad.
    """

    n: int
    measure: Measure
    endpoint_runs: int = 5
    min_runs: int = 3
    max_runs: int = 10
    direction: int | None = None
    samples: dict[int, list[float]] = field(default_factory=dict)
    judgements: dict[int, Judgement] = field(default_factory=dict)
    executions: int = 0
    attempts: dict[int, int] = field(default_factory=dict)  # runs per position, failed ones too

    def _measure(self, positions: list[int]) -> None:
        if not positions:
            return
        values = self.measure(positions)
        self.executions += len(positions)
        for p, v in zip(positions, values, strict=True):
            self.attempts[p] = self.attempts.get(p, 0) + 1
            bucket = self.samples.setdefault(p, [])
            if v is not None:
                bucket.append(float(v))

    def _ensure_endpoints(self) -> None:
        want = self.endpoint_runs
        for _ in range(3):
            todo = [
                p for p in (0, self.n) for _ in range(max(want - len(self.samples.get(p, [])), 0))
            ]
            self._measure(todo)
            good, bad = self.samples.get(0, []), self.samples.get(self.n, [])
            if len(good) >= 2 and len(bad) >= 2 and p_value(good, bad) < 0.01:
                break
            want *= 2
        good, bad = self.samples.get(0, []), self.samples.get(self.n, [])
        if len(good) < 2 or len(bad) < 2:
            end = "good" if len(good) < 2 else "bad"
            error = EndpointError(
                f"the metric probe produced no number at the {end} endpoint often enough: check "
                "--metric (the JSON path or regex) against the command's output there"
            )
            error.position = 0 if end == "good" else self.n
            raise error
        if p_value(good, bad) >= 0.01:
            raise EndpointError(
                f"the metric does not separate the endpoints (good median "
                f"{statistics.median(good):.6g}, bad median {statistics.median(bad):.6g}, "
                f"{len(good)}+{len(bad)} runs): pick endpoints further apart, a less noisy metric, "
                "or a fixed --threshold"
            )
        worse = statistics.median(bad) - statistics.median(good)
        if self.direction is not None and worse * self.direction > 0:
            raise EndpointError(
                "the bad endpoint's metric is better than the good one's under the given "
                "direction: did you mean --find-fix, or the other of --higher-is-better / "
                "--lower-is-better?"
            )

    @property
    def magnitude(self) -> float:
        return effect_size(self.samples[0], self.samples[self.n])

    def __call__(self, positions: Sequence[int]) -> list[Verdict]:
        """The evaluator: one verdict per position (each re-ask adds runs and re-judges)."""
        self._ensure_endpoints()
        inner = sorted({p for p in positions if 0 < p < self.n})
        # first (or re-)measurement of every asked commit, in one parallel batch
        self._measure([p for p in inner for _ in range(self.min_runs)])
        asked = {p: self.attempts[p] for p in inner}
        open_ = list(inner)
        while open_:
            for p in list(open_):
                # a re-ask may add up to max_runs on top of what the position had before
                final = self.attempts[p] - asked[p] + self.min_runs >= self.max_runs
                judgement = self._judge(p, final=final)
                if judgement is not None:
                    self.judgements[p] = judgement
                    open_.remove(p)
            self._measure(open_)
        out = []
        for p in positions:
            if p == 0:
                out.append(Verdict.GOOD)
            elif p == self.n:
                out.append(Verdict.BAD)
            else:
                out.append(self.judgements[p].verdict)
        return out

    def _judge(self, p: int, *, final: bool) -> Judgement | None:
        x = self.samples.get(p, [])
        if len(x) < 2:
            return (
                Judgement(Verdict.SKIP, Comparison.UNKNOWN, Comparison.UNKNOWN) if final else None
            )
        good, bad = self.samples[0], self.samples[self.n]
        g = compare(x, good, magnitude=self.magnitude)
        b = compare(x, bad, magnitude=self.magnitude)
        closer_bad = self._closer_to_bad(x)
        if g is Comparison.DIFFERENT and b is not Comparison.DIFFERENT:
            verdict = Verdict.BAD
        elif b is Comparison.DIFFERENT and g is not Comparison.DIFFERENT:
            verdict = Verdict.GOOD
        elif g is Comparison.DIFFERENT and b is Comparison.DIFFERENT:
            verdict = (
                Verdict.BAD if closer_bad else Verdict.GOOD
            )  # in between: more runs won't help
        elif g is Comparison.SAME and b is not Comparison.SAME:
            verdict = Verdict.GOOD
        elif b is Comparison.SAME and g is not Comparison.SAME:
            verdict = Verdict.BAD
        elif final:
            return Judgement(Verdict.BAD if closer_bad else Verdict.GOOD, g, b, forced=True)
        else:
            return None
        if verdict is Verdict.BAD and self.direction is not None:
            moved = statistics.median(x) - statistics.median(good)
            if moved * self.direction > 0:  # different, but better: not the regression
                verdict = Verdict.GOOD
        return Judgement(verdict, g, b)

    def _closer_to_bad(self, x: list[float]) -> bool:
        mx = statistics.median(x)
        return abs(mx - statistics.median(self.samples[self.n])) < abs(
            mx - statistics.median(self.samples[0])
        )
