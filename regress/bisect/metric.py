"""Metric bisects: turn measurements into good/bad verdicts, spending runs only where noise needs them.

The judge is an evaluator for :func:`regress.bisect.search.search`. Model: every run of a commit
measures its level (the good endpoint's or the bad endpoint's) plus normal run-to-run noise of one
spread shared by all commits. The spread is learned from repeated runs (:func:`pooled_noise`: the
endpoints first, then every commit that needed more than one run) and the uncertainty of that
estimate is kept: commits are judged with Student-t likelihoods, so two runs of a noisy metric
cannot fake certainty.

Each commit gets one run first; a sequential likelihood-ratio test then calls it good or bad as
soon as either is ``confidence`` sure, so a deterministic metric costs one run per commit (plus
three at the endpoints), and a noisy one gets more runs only while its mean sits between the two
levels. ``max_runs`` caps that; a commit still undecided there is called by closeness (and marked
``forced``). Pinpoint (``dashboard/pinpoint/models/compare/compare.py``) likewise adds repeats
only while a comparison is inconclusive; it compares against fixed repeat counts, we against the
learned noise.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from regress.bisect.search import EndpointError
from regress.bisect.stats import pooled_noise, t_logpdf, t_sf
from regress.bisect.verdicts import Verdict

Measure = Callable[[Sequence[int]], Sequence[float | None]]

#: The smallest noise spread we assume, relative to the endpoint difference: a metric that repeats
#: to the last bit (the reference engine) would otherwise have a spread of exactly zero.
RESOLUTION = 1e-9


@dataclass
class Judgement:
    """Why a commit got its verdict: kept for the report's steps."""

    verdict: Verdict
    p_good: float  # posterior probability the commit is at the good level
    runs: int
    forced: bool = False  # decided by closeness after max_runs, not by the test


@dataclass
class MetricJudge:
    """Evaluator that measures a metric until each commit is surely like one endpoint.

    Args:
        n: the new endpoint's position (0 is the old one).
        measure: runs the metric probe once per given position (possibly in parallel); ``None``
            for a run that could not measure.
        endpoint_runs: most runs of each endpoint (they start with two at the good one and one
            at the bad one, and add runs only until the two levels separate).
        min_runs: first runs of each commit.
        max_runs: most runs of a commit; one still undecided is called by closeness.
        direction: +1 higher is better, -1 lower is better, ``None`` learns it from the endpoints.
            Given, the bad endpoint must be worse than the good one in that direction.
        confidence: how sure the whole bisect must be; each of its about log2 n decisions gets
            an equal share of the allowed error.
    """

    n: int
    measure: Measure
    endpoint_runs: int = 10
    min_runs: int = 1
    max_runs: int = 10
    direction: int | None = None
    confidence: float = 0.99
    samples: dict[int, list[float]] = field(default_factory=dict)
    judgements: dict[int, Judgement] = field(default_factory=dict)
    executions: int = 0
    attempts: dict[int, int] = field(default_factory=dict)  # runs per position, failed ones too

    def __post_init__(self) -> None:
        if self.endpoint_runs < 2 or not 1 <= self.min_runs <= self.max_runs:
            raise ValueError("need endpoint_runs >= 2 and 1 <= min_runs <= max_runs")
        decisions = max(math.ceil(math.log2(max(self.n, 2))), 1)
        self.decide_at = 1 - (1 - self.confidence) / decisions
        self._ready = False

    def _measure(self, positions: list[int]) -> None:
        if not positions:
            return
        values = self.measure(positions)
        self.executions += len(positions)
        for p, v in zip(positions, values, strict=True):
            self.attempts[p] = self.attempts.get(p, 0) + 1
            bucket = self.samples.setdefault(p, [])
            if v is not None and math.isfinite(v):
                bucket.append(float(v))

    # -- the noise model -----------------------------------------------------------------------
    def level_runs(self) -> tuple[list[float], list[float]]:
        """Every run at the good level and at the bad one: the endpoints' and decided commits'.

        A commit decided (not forced) at the configured confidence is at that level, so its runs
        sharpen the level as much as endpoint runs would, at no extra cost.
        """
        good, bad = list(self.samples.get(0, [])), list(self.samples.get(self.n, []))
        for p, j in self.judgements.items():
            if not j.forced and j.verdict is not Verdict.SKIP:
                (good if j.verdict is Verdict.GOOD else bad).extend(self.samples[p])
        return good, bad

    def levels(self) -> tuple[float, float]:
        """Mean of the runs at the good and at the bad level."""
        good, bad = self.level_runs()
        return statistics.fmean(good), statistics.fmean(bad)

    def noise(self) -> tuple[float, int]:
        """The run-to-run spread (standard deviation) and its degrees of freedom."""
        ss, dof = pooled_noise(list(self.samples.values()))
        good, bad = self.levels()
        floor = RESOLUTION * max(abs(good - bad), abs(good), abs(bad), 1e-300)
        return max(math.sqrt(ss / dof) if dof else 0.0, floor), dof

    def separated(self) -> bool:
        """The endpoints' levels differ at the confidence (a pooled two-sample t-test)."""
        good, bad = self.samples.get(0, []), self.samples.get(self.n, [])
        if not good or not bad:
            return False
        spread, dof = self.noise()
        if dof == 0:
            return False
        a, b = self.levels()
        t = abs(a - b) / (spread * math.sqrt(1 / len(good) + 1 / len(bad)))
        return 2 * t_sf(t, dof) < 1 - self.confidence

    def _ensure_endpoints(self) -> None:
        if self._ready:
            return
        self._measure([0, self.n, 0])
        while not self.separated():
            short = [p for p in (0, self.n) if self.attempts.get(p, 0) < self.endpoint_runs]
            if not short:
                break
            self._measure(short)
        good, bad = self.samples.get(0, []), self.samples.get(self.n, [])
        if not good or not bad:
            end = "good" if not good else "bad"
            error = EndpointError(f"the metric probe produced no number at the {end} endpoint")
            error.position = 0 if end == "good" else self.n
            raise error
        if not self.separated():
            raise EndpointError(
                f"the metric does not separate the endpoints (good median "
                f"{statistics.median(good):.6g}, bad median {statistics.median(bad):.6g}, "
                f"{len(good)}+{len(bad)} runs): pick endpoints further apart, a less noisy metric, "
                "more endpoint runs (--metric-runs), or a fixed --threshold"
            )
        if not self.bad_is_worse(*self.levels()):
            raise EndpointError(
                "the bad endpoint's metric is better than the good one's under the given "
                "direction: did you mean --find-fix, or the other of --higher-is-better / "
                "--lower-is-better?"
            )
        self._ready = True

    def bad_is_worse(self, good: float, bad: float) -> bool:
        """The direction rule: with a direction given, the bad level must be on its worse side.

        Per commit the rule needs no check of its own: a commit beyond the good level on the
        better side is always nearer the good level, so the likelihood ratio calls it good.
        """
        return self.direction is None or (bad - good) * self.direction < 0

    def p_good(self, p: int) -> float:
        """Posterior probability that commit ``p`` is at the good level (even prior odds)."""
        x = self.samples[p]
        spread, dof = self.noise()
        good_runs, bad_runs = self.level_runs()
        good, bad = statistics.fmean(good_runs), statistics.fmean(bad_runs)
        mean = statistics.fmean(x)
        ng, nb = len(good_runs), len(bad_runs)
        log_good = t_logpdf(mean - good, dof, spread * math.sqrt(1 / len(x) + 1 / ng))
        log_bad = t_logpdf(mean - bad, dof, spread * math.sqrt(1 / len(x) + 1 / nb))
        diff = log_bad - log_good
        return 1.0 / (1.0 + math.exp(min(diff, 700.0)))

    # -- the evaluator -------------------------------------------------------------------------
    def __call__(self, positions: Sequence[int]) -> list[Verdict]:
        """One verdict per position; asking again adds runs (up to ``max_runs`` more)."""
        self._ensure_endpoints()
        inner = sorted({p for p in positions if 0 < p < self.n})
        asked = {p: self.attempts.get(p, 0) for p in inner}
        self._measure([p for p in inner for _ in range(self.min_runs)])
        open_ = list(inner)
        while open_:
            for p in list(open_):
                final = self.attempts[p] - asked[p] >= self.max_runs
                judgement = self._judge(p, final=final)
                if judgement is not None:
                    self.judgements[p] = judgement
                    open_.remove(p)
            self._measure([*open_, *self._level_runs_needed(open_)])
        out = []
        for p in positions:
            if p == 0:
                out.append(Verdict.GOOD)
            elif p == self.n:
                out.append(Verdict.BAD)
            else:
                out.append(self.judgements[p].verdict)
        return out

    def _level_runs_needed(self, open_: list[int]) -> list[int]:
        """An endpoint run when a level is known less well than an undecided commit's mean.

        Then the level, not the commit, is what keeps the test from deciding, and one more run of
        the less known endpoint helps every later decision too.
        """
        if not open_:
            return []
        good, bad = self.level_runs()
        most = max(len(self.samples.get(p, [])) for p in open_)
        end, known = (0, len(good)) if len(good) <= len(bad) else (self.n, len(bad))
        cap = self.endpoint_runs + self.max_runs
        return [end] if known <= most and self.attempts.get(end, 0) < cap else []

    def _judge(self, p: int, *, final: bool) -> Judgement | None:
        x = self.samples.get(p, [])
        if not x:
            return Judgement(Verdict.SKIP, 0.5, 0) if final else None
        pg = self.p_good(p)
        if pg >= self.decide_at:
            return Judgement(Verdict.GOOD, pg, len(x))
        if pg <= 1 - self.decide_at:
            return Judgement(Verdict.BAD, pg, len(x))
        if final:
            return Judgement(Verdict.GOOD if pg >= 0.5 else Verdict.BAD, pg, len(x), forced=True)
        return None
