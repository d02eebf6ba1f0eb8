"""The pure bisect search: positions in, verdicts from an injected evaluator, a culprit out.

Positions are ``0..n`` along a linear history: ``0`` is the old endpoint (known good), ``n`` the new
endpoint (known bad), and the culprit ``c`` in ``1..n`` is the first position in the new state. The
search never touches git or processes; :mod:`regress.bisect.session` maps positions to commits and
the evaluator to probe runs, and ``benchmarks/bisect_simulation.py`` feeds it random verdicts.

Two strategies share the :class:`Strategy` protocol: :class:`Deterministic` (git-bisect compatible
binary or k-section search) and :class:`regress.bisect.posterior.Flaky` (Bayesian, flake aware). The
driver :func:`search` checks the endpoints first, switches from the first to the second when the
observations contradict each other (mode ``"auto"``), and confirms or verifies the culprit.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from regress.bisect.verdicts import Verdict
from regress.errors import UsageError

#: Reruns of an endpoint whose first verdict surprised us, before we call the input wrong.
ENDPOINT_RECHECKS = 2

Evaluator = Callable[[Sequence[int]], Sequence[Verdict]]
Mode = Literal["auto", "deterministic", "flaky"]


class EndpointError(UsageError):
    """An endpoint does not behave as the user said: the range or the probe is wrong (exit 2)."""

    probes: int = 0  # executions spent before giving up


class Observations:
    """Every verdict seen so far, per position, in the order they arrived."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError("a search needs at least one candidate (n >= 1)")
        self.n = n
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
        if good and bad and max(good) > min(bad):
            return f"position {max(good)} passed after position {min(bad)} failed"
        return None


@dataclass
class Estimate:
    """Where a strategy stands: its best culprit, how sure it is, and what is left."""

    top: int | None
    mass: float
    candidates: int
    interval: tuple[int, int]
    found: bool
    stuck: bool = False  # every position that could split the interval is untestable


class Strategy(Protocol):
    """A search strategy: proposes where to probe next, and says where it stands."""

    name: str

    def propose(self, obs: Observations, k: int) -> list[int]:
        """Up to ``k`` positions to probe in parallel; empty when done or stuck."""
        ...

    def estimate(self, obs: Observations) -> Estimate: ...


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


class Deterministic:
    """git bisect semantics: trust every verdict, halve (or k-section) the open interval."""

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


@dataclass
class SearchConfig:
    """How to search.

    Attributes:
        mode: ``"auto"`` (deterministic until a contradiction, then flaky), ``"deterministic"``
            (strict git bisect: a contradiction ends the search inconclusive) or ``"flaky"``.
        jobs: positions probed per round (k-section, or k posterior quantiles).
        confidence: posterior mass the flaky culprit needs.
        false_pass: model false passes too; ``None`` averages the one- and two-sided models.
        endpoint_runs: runs of each endpoint in flaky mode, to estimate the flake rates.
        verify_runs: in flaky mode, runs the culprit and its parent each need before we stop.
        confirm: in deterministic modes, rerun the culprit once (the +1 in ceil(log2 n) + 1);
            it is how ``auto`` notices a flaky probe that happened to bisect consistently.
        max_probes: give up (inconclusive) after this many executions; default scales with n.
    """

    mode: Mode = "auto"
    jobs: int = 1
    confidence: float = 0.99
    false_pass: bool | None = None
    endpoint_runs: int = 3
    verify_runs: int = 2
    confirm: bool = True
    max_probes: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "deterministic", "flaky"):
            raise UsageError(f"unknown search mode {self.mode!r}: use auto, deterministic or flaky")
        if self.jobs < 1:
            raise UsageError("--jobs must be at least 1")
        if not 0.5 < self.confidence < 1:
            raise UsageError("--confidence must be between 0.5 and 1 (exclusive), e.g. 0.99")


@dataclass
class SearchEvent:
    """One round of the search, for the progress callback."""

    step: int
    positions: list[int]
    verdicts: list[Verdict]
    strategy: str
    estimate: Estimate
    probes: int
    note: str = ""


@dataclass
class SearchResult:
    """The answer: a culprit position (or an ambiguous interval) and how it was reached."""

    status: Literal["found", "ambiguous", "inconclusive"]
    culprit: int | None
    confidence: float
    interval: tuple[int, int]
    strategy: str
    probes: int
    endpoint_probes: int
    observations: Observations
    switched: str | None = None
    notes: list[str] = field(default_factory=list)
    rates: dict[str, float] = field(default_factory=dict)


def search(
    n: int,
    evaluate: Evaluator,
    config: SearchConfig | None = None,
    *,
    progress: Callable[[SearchEvent], None] | None = None,
    observations: Observations | None = None,
) -> SearchResult:
    """Find the first position in the new state among ``1..n``.

    Args:
        n: number of candidate commits (``good..bad``, bad included).
        evaluate: runs the probe once at each given position (possibly in parallel) and returns
            one verdict per position, in the search's terms.
        config: strategy options; defaults to :class:`SearchConfig`.
        progress: called after every round.
        observations: verdicts already known (tests); normally empty.

    Raises:
        EndpointError: the old endpoint never passes or the new one never fails.
    """
    return _Driver(n, evaluate, config or SearchConfig(), progress, observations).run()


class _Driver:
    """The search loop: endpoints, rounds, switching, confirmation, verification."""

    def __init__(self, n, evaluate, config, progress, observations) -> None:
        self.obs = observations or Observations(n)
        self.n = n
        self.evaluate = evaluate
        self.config = config
        self.progress = progress
        self.probes = 0
        self.step = 0
        self.switched: str | None = None
        self.notes: list[str] = []
        self.strategy: Strategy = Deterministic() if config.mode != "flaky" else self._flaky()
        self.max_probes = config.max_probes or 20 * math.ceil(math.log2(n + 1)) + 60

    def _flaky(self) -> Strategy:
        from regress.bisect.posterior import Flaky

        return Flaky(confidence=self.config.confidence, false_pass=self.config.false_pass)

    def _run(self, positions: list[int], note: str = "") -> list[Verdict]:
        verdicts = list(self.evaluate(positions))
        if len(verdicts) != len(positions):
            raise ValueError("the evaluator must return one verdict per position")
        for p, v in zip(positions, verdicts, strict=True):
            self.obs.add(p, v)
        self.probes += len(positions)
        self.step += 1
        if self.progress:
            est = self.strategy.estimate(self.obs)
            self.progress(
                SearchEvent(
                    self.step, positions, verdicts, self.strategy.name, est, self.probes, note
                )
            )
        return verdicts

    # -- endpoints -----------------------------------------------------------------------------
    def _endpoint_checks(self) -> None:
        if self.strategy.name == "flaky":
            self._flaky_endpoints()
            return
        todo = [p for p in (0, self.n) if self.obs.runs(p) == 0]
        if todo:
            self._run(todo, "endpoint check")
        for p, want in ((0, Verdict.GOOD), (self.n, Verdict.BAD)):
            if self._agrees(p, want):
                continue
            for _ in range(ENDPOINT_RECHECKS):
                self._run([p], "endpoint recheck")
                if self._agrees(p, want):
                    break
            else:
                raise _endpoint_error(p == 0, self.obs, p)
            if self.obs.passes(p) and self.obs.fails(p):
                self._switch(f"the {_end(p == 0)} endpoint gave different verdicts on reruns")
                if self.strategy.name == "flaky":
                    return  # the switch ran the flaky endpoint checks

    def _agrees(self, p: int, want: Verdict) -> bool:
        return (self.obs.passes(p) if want is Verdict.GOOD else self.obs.fails(p)) > 0

    def _flaky_endpoints(self) -> None:
        runs = self.config.endpoint_runs
        most = max(3 * runs, 6)
        todo = [0] * max(runs - self.obs.runs(0), 0)
        todo += [self.n] * max(runs - self.obs.runs(self.n), 0)
        if todo:
            self._run(todo, "endpoint runs")
        for p, want in ((0, Verdict.GOOD), (self.n, Verdict.BAD)):
            while not self._agrees(p, want) and self.obs.total(p) < most:
                self._run([p], "endpoint rerun")
            if not self._agrees(p, want):
                raise _endpoint_error(p == 0, self.obs, p)

    def _switch(self, why: str) -> None:
        if self.config.mode != "auto" or self.strategy.name == "flaky":
            return
        self.switched = why
        self.notes.append(f"switched to flaky mode: {why}")
        self.strategy = self._flaky()
        self._flaky_endpoints()

    # -- main loop -----------------------------------------------------------------------------
    def run(self) -> SearchResult:
        self._endpoint_checks()
        while self.probes < self.max_probes:
            if self.strategy.name == "deterministic":
                why = self.obs.contradiction()
                if why:
                    if self.config.mode == "deterministic":
                        self.notes.append(f"contradiction: {why}")
                        return self._result("inconclusive")
                    self._switch(why)
                    continue
            est = self.strategy.estimate(self.obs)
            if est.stuck:
                return self._result("ambiguous")
            if est.found:
                if self._confirm_or_verify(est):
                    continue
                return self._result("found")
            positions = self.strategy.propose(self.obs, self.config.jobs)
            if not positions:
                return self._result("ambiguous")
            self._run(positions)
        self.notes.append(f"gave up after {self.probes} probes (--max-probes)")
        return self._result("inconclusive")

    def _confirm_or_verify(self, est: Estimate) -> bool:
        """Run the extra checks a found culprit needs; True when more rounds are required."""
        c = est.top
        assert c is not None
        if self.strategy.name == "deterministic":
            if not self.config.confirm or self.obs.total(c) > 1 or c == self.n:
                return False
            verdict = self._run([c], "confirm culprit")[0]
            return verdict is Verdict.GOOD  # a contradiction: the loop switches or gives up
        need = self.config.verify_runs
        todo = [p for p in (c - 1, c) for _ in range(max(need - self.obs.runs(p), 0))]
        if self.obs.untestable(c - 1) or self.obs.untestable(c):
            return False
        if not todo:
            return False
        self._run(todo, "verify culprit and parent")
        return True

    def _result(self, status) -> SearchResult:
        est = self.strategy.estimate(self.obs)
        rates = getattr(self.strategy, "rates", lambda obs: {})(self.obs)
        culprit = est.top if status == "found" else None
        return SearchResult(
            status=status,
            culprit=culprit,
            confidence=est.mass if culprit is not None else 0.0,
            interval=est.interval,
            strategy=self.strategy.name,
            probes=self.probes,
            endpoint_probes=sum(self.obs.total(p) for p in {0, self.n}),
            observations=self.obs,
            switched=self.switched,
            notes=self.notes,
            rates=rates,
        )


def _end(old: bool) -> str:
    return "good (old)" if old else "bad (new)"


def _endpoint_error(old: bool, obs: Observations, p: int) -> EndpointError:
    error = _endpoint_message(old, obs, p)
    error.probes = len(obs.history)
    return error


def _endpoint_message(old: bool, obs: Observations, p: int) -> EndpointError:
    passes, fails, skips = obs.counts.get(p, [0, 0, 0])
    seen = f"{passes} passed, {fails} failed, {skips} skipped"
    if passes + fails == 0:
        return EndpointError(
            f"the probe could not test the {_end(old)} endpoint ({seen}): fix the probe, the "
            "--build command or the --overlay files so it runs there, then retry"
        )
    if old:
        return EndpointError(
            f"the good endpoint does not pass the probe ({seen}): choose an older good revision, "
            "or pass --find-fix if you are looking for the commit that fixed it"
        )
    return EndpointError(
        f"the bad endpoint does not fail the probe ({seen}): check the probe reproduces the "
        "problem at the bad revision (run it there by hand), or choose a newer bad revision"
    )
