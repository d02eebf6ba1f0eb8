"""The pure bisect search: positions in, verdicts from an injected evaluator, a culprit out.

Positions are ``0..n``: ``0`` is the old endpoint (known good), ``n`` the new endpoint (known bad),
and the culprit ``c`` in ``1..n`` is the first commit in the new state. Along a linear history they
are the commits in order; on a merge history they are the nodes of a
:class:`regress.bisect.graph.Graph` in topological order. The search never touches git or
processes; :mod:`regress.bisect.session` maps positions to commits and the evaluator to probe runs,
and ``benchmarks/bisect_simulation.py`` feeds it random verdicts.

The strategies live in :mod:`regress.bisect.strategies`. The driver :func:`search` checks the
endpoints first, switches from deterministic to flaky when the observations contradict each other
(mode ``"auto"``), and confirms the culprit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from regress.bisect.graph import Graph
from regress.bisect.observations import Observations
from regress.bisect.strategies import Estimate, Strategy
from regress.bisect.strategies.deterministic import Bisection, GraphBisection
from regress.bisect.strategies.flaky import Flaky, GraphFlaky
from regress.bisect.verdicts import Status, Verdict
from regress.errors import UsageError

__all__ = [
    "EndpointError",
    "Estimate",
    "Observations",
    "SearchConfig",
    "SearchEvent",
    "SearchResult",
    "Strategy",
    "search",
]

#: Reruns of an endpoint whose first verdict surprised us, before we call the input wrong.
ENDPOINT_RECHECKS = 2

Evaluate = Callable[[Sequence[int]], Sequence[Verdict]]
Mode = Literal["auto", "deterministic", "flaky"]


class EndpointError(UsageError):
    """An endpoint does not behave as the user said: the range or the probe is wrong (exit 2)."""

    probes: int = 0  # executions spent before giving up
    position: int | None = None  # the endpoint that misbehaved (0 old, n new), if one did


@dataclass
class SearchConfig:
    """How to search.

    Attributes:
        mode: ``"auto"`` (deterministic until a contradiction, then flaky), ``"deterministic"``
            (strict git bisect: a contradiction ends the search inconclusive) or ``"flaky"``.
        jobs: positions probed per round (k-section, or the k most informative positions).
        confidence: posterior mass the flaky culprit needs.
        false_pass: model false passes too; ``None`` averages the one- and two-sided models.
        endpoint_runs: in flaky mode, runs of each endpoint before the search starts. One is
            enough: the flake rates are learned from every run, and an endpoint that answers
            the wrong way is rerun until it agrees (or clearly never will).
        verify_runs: in flaky mode, runs the culprit and its parents each need on top of the
            posterior's confidence (0: the confidence alone decides).
        confirm: in deterministic modes, rerun the culprit once (the +1 in ceil(log2 n) + 1);
            it is how ``auto`` notices a flaky probe that happened to bisect consistently.
        max_probes: give up (inconclusive) after this many executions; default scales with n.
    """

    mode: Mode = "auto"
    jobs: int = 1
    confidence: float = 0.99
    false_pass: bool | None = None
    endpoint_runs: int = 1
    verify_runs: int = 0
    confirm: bool = True
    max_probes: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "deterministic", "flaky"):
            raise UsageError(f"unknown search mode {self.mode!r}: use auto, deterministic or flaky")
        if self.jobs < 1:
            raise UsageError(
                f"--jobs must be at least 1 (commits probed per round), not {self.jobs}"
            )
        if not 0.5 < self.confidence < 1:  # also refuses nan
            raise UsageError(
                "--confidence must be between 0.5 and 1 (exclusive), e.g. 0.99, not "
                f"{self.confidence}"
            )
        if self.endpoint_runs < 1:
            raise UsageError(
                f"--endpoint-runs {self.endpoint_runs}: give at least 1 (each endpoint is checked)"
            )
        if self.verify_runs < 0:
            raise UsageError(f"--verify-runs {self.verify_runs}: give 0 or more")
        if self.max_probes is not None and self.max_probes < 1:
            raise UsageError(
                f"--max-probes {self.max_probes}: give at least 1, or leave it out for the "
                "default (20 per halving plus 60)"
            )


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
    """The answer: a culprit position (or ambiguous candidates) and how it was reached."""

    status: Status
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
    suspects: list[int] = field(default_factory=list)  # the ambiguous candidates, in order


def search(
    n: int,
    evaluate: Evaluate,
    config: SearchConfig | None = None,
    *,
    progress: Callable[[SearchEvent], None] | None = None,
    observations: Observations | None = None,
    graph: Graph | None = None,
) -> SearchResult:
    """Find the first position in the new state among ``1..n``.

    Args:
        n: number of candidate commits (``good..bad``, bad included).
        evaluate: runs the probe once at each given position (possibly in parallel) and returns
            one verdict per position, in the search's terms.
        config: strategy options; defaults to :class:`SearchConfig`.
        progress: called after every round.
        observations: verdicts already known (tests); normally empty.
        graph: the commit graph over positions ``0..n`` for a merge history; ``None`` (or a
            chain) bisects a linear history.

    Raises:
        EndpointError: the old endpoint never passes or the new one never fails.
    """
    if graph is not None and graph.n != n:
        raise ValueError(f"the graph has {graph.n} candidates, the search {n}")
    if graph is not None and graph.linear:
        graph = None
    return _Driver(n, evaluate, config or SearchConfig(), progress, observations, graph).run()


class _Driver:
    """The search loop: endpoints, rounds, switching, confirmation, verification."""

    def __init__(self, n, evaluate, config, progress, observations, graph) -> None:
        self.obs = observations or Observations(n, graph=graph)
        self.graph = graph
        self.n = n
        self.evaluate = evaluate
        self.config = config
        self.progress = progress
        self.probes = 0
        self.step = 0
        self.switched: str | None = None
        self.notes: list[str] = []
        self.strategy: Strategy = self._flaky() if config.mode == "flaky" else self._deterministic()
        self.max_probes = config.max_probes or 20 * math.ceil(math.log2(n + 1)) + 60

    def _deterministic(self) -> Strategy:
        return Bisection() if self.graph is None else GraphBisection(self.graph)

    def _flaky(self) -> Strategy:
        c = self.config
        if self.graph is None:
            return Flaky(confidence=c.confidence, false_pass=c.false_pass)
        return GraphFlaky(self.graph, confidence=c.confidence, false_pass=c.false_pass)

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
                        return self._result(Status.INCONCLUSIVE)
                    self._switch(why)
                    continue
            est = self.strategy.estimate(self.obs)
            if est.stuck:
                return self._result(Status.AMBIGUOUS)
            if est.found:
                if self._confirm_or_verify(est):
                    continue
                return self._result(Status.FOUND)
            positions = self.strategy.propose(self.obs, self.config.jobs)
            if not positions:
                return self._result(Status.AMBIGUOUS)
            self._run(positions)
        self.notes.append(f"gave up after {self.probes} probes (--max-probes)")
        return self._result(Status.INCONCLUSIVE)

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
        around = [*self.strategy.parents(c), c]
        todo = [p for p in around for _ in range(max(need - self.obs.runs(p), 0))]
        if any(self.obs.untestable(p) for p in around):
            return False
        if not todo:
            return False
        self._run(todo, "verify culprit and parent")
        return True

    def _result(self, status: Status) -> SearchResult:
        est = self.strategy.estimate(self.obs)
        culprit = est.top if status is Status.FOUND else None
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
            rates=self.strategy.rates(self.obs),
            suspects=est.members() if status is Status.AMBIGUOUS else [],
        )


def _end(old: bool) -> str:
    return "good (old)" if old else "bad (new)"


def _endpoint_error(old: bool, obs: Observations, p: int) -> EndpointError:
    error = _endpoint_message(old, obs, p)
    error.probes = len(obs.history)
    error.position = p
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
