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

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from regress.bisect.observations import Observations, pick
from regress.bisect.verdicts import Verdict
from regress.errors import UsageError

#: Reruns of an endpoint whose first verdict surprised us, before we call the input wrong.
ENDPOINT_RECHECKS = 2

Evaluator = Callable[[Sequence[int]], Sequence[Verdict]]
Mode = Literal["auto", "deterministic", "flaky"]


class EndpointError(UsageError):
    """An endpoint does not behave as the user said: the range or the probe is wrong (exit 2)."""

    probes: int = 0  # executions spent before giving up
    position: int | None = None  # the endpoint that misbehaved (0 old, n new), if one did


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
