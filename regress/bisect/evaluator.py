"""Answering the search's questions: positions to commits, commits to stored or live runs.

:class:`Evaluator` is what :func:`regress.bisect.search.search` calls: it maps positions to commits,
answers from the store first (resume), runs the probe for the rest, and turns the run outcomes into
verdicts (through the metric judge for metric probes). It reports each round as a
:class:`BisectProgress`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from regress.bisect.config import search_config
from regress.bisect.history import Range
from regress.bisect.metric import MetricJudge
from regress.bisect.report import BisectResult, Step
from regress.bisect.runner import ProbeRunner
from regress.bisect.search import EndpointError, SearchEvent, search
from regress.bisect.store import Replay
from regress.bisect.verdicts import Outcome, Status, Verdict
from regress.progress import Progress


@dataclass
class BisectProgress:
    """A live update of a bisect for the progress callback (the CLI prints it on stderr)."""

    kind: str  # "step", "started" (a probe run began), "note" or "warning"
    message: str = ""
    step: int = 0
    commits: list[str] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    candidates: int = 0
    mass: float = 0.0
    probes: int = 0
    strategy: str = ""
    elapsed: float = 0.0
    eta: float | None = None


class ReplayExhausted(Exception):
    """Raised in replay-only mode (status) when the search needs a run the store lacks."""


class Evaluator:
    """Maps positions to commits and verdicts to runs, answering from the store first."""

    def __init__(
        self, rng: Range, replay: Replay, runner: ProbeRunner, workspace, config, replay_only
    ):
        self.rng = rng
        self.replay = replay
        self.runner = runner
        self.workspace = workspace
        self.config = config
        self.replay_only = replay_only
        self.prepared = False
        self.steps: dict[str, Step] = {}
        self.executions = 0
        self.seen: dict[str, list[Outcome]] = {}  # every outcome per commit, for diagnoses
        self.partial: BisectResult
        self.emit: Progress[BisectProgress] = lambda _p: None  # set by search()

    def outcomes(self, positions: Sequence[int]) -> list[Outcome]:
        shas = [self.rng.commits[p] for p in positions]
        out: list[Outcome | None] = [self.replay.cached(s) for s in shas]
        missing = [i for i, o in enumerate(out) if o is None]
        from_store = [o is not None for o in out]
        if missing and self.replay_only:
            raise ReplayExhausted
        if missing:
            if not self.prepared:
                self.workspace.prepare()
                self.prepared = True

            def record(j: int, outcome: Outcome) -> None:
                self.replay.record(shas[missing[j]], outcome)  # persisted as each run ends
                out[missing[j]] = outcome

            def started(j: int) -> None:
                p = positions[missing[j]]
                self.emit(BisectProgress("started", f"{shas[missing[j]][:12]} ({self._role(p)})"))

            self.runner.run_many([shas[i] for i in missing], on_done=record, on_start=started)
        self.executions += len(positions)
        for p, s, o, stored in zip(positions, shas, out, from_store, strict=True):
            assert o is not None
            step = self.steps.setdefault(s, Step(commit=s, position=p))
            step.verdicts.append(o.verdict.value if o.verdict else "measured")
            step.reasons.append(o.reason)
            if o.value is not None:
                step.values.append(o.value)
            step.cached += int(stored)
            self.seen.setdefault(s, []).append(o)
        return [o for o in out if o is not None]

    def _role(self, p: int) -> str:
        """What position ``p`` is to the user: an endpoint (by its option) or a commit between."""
        old, new = ("--bad", "--good") if self.config.find_fix else ("--good", "--bad")
        if p == 0:
            return f"endpoint {old}"
        if p == self.rng.n:
            return f"endpoint {new}"
        return f"commit {p} of {self.rng.n}"

    def verdicts(self, positions: Sequence[int]) -> list[Verdict]:
        verdicts = []
        for p, o in zip(positions, self.outcomes(positions), strict=True):
            v = o.verdict if o.verdict is not None else Verdict.SKIP
            v = v.swapped() if self.config.find_fix else v
            self._judged(p, v)
            verdicts.append(v)
        return verdicts

    def measure(self, positions: Sequence[int]) -> list[float | None]:
        return [o.value for o in self.outcomes(positions)]

    def _judged(self, p: int, v: Verdict) -> None:
        step = self.steps[self.rng.commits[p]]
        user = v.swapped() if self.config.find_fix else v
        step.judged.append(user.value)

    def search(
        self, kind: str, direction: int | None, emit: Progress[BisectProgress], started: float
    ) -> BisectResult:
        c = self.config
        self.emit = emit
        evaluate: Callable[[Sequence[int]], Sequence[Verdict]] = self.verdicts
        judge = None
        if kind == "metric" and c.threshold is None:
            ends, first, most = c.metric_runs
            judge = MetricJudge(
                self.rng.n,
                self.measure,
                endpoint_runs=ends,
                min_runs=first,
                max_runs=most,
                direction=direction,
                confidence=c.confidence,
            )

            def evaluate(positions: Sequence[int]) -> Sequence[Verdict]:
                verdicts = judge(positions)
                for p, v in zip(positions, verdicts, strict=True):
                    self._judged(p, v)
                return verdicts

        scfg = search_config(c, metric=judge is not None)
        rounds: list[float] = []
        last = [time.monotonic()]

        def on_event(e: SearchEvent) -> None:
            now = time.monotonic()
            rounds.append(now - last[0])
            last[0] = now
            est = e.estimate
            left = _rounds_left(est.candidates, e.strategy, c.jobs)
            mean = sum(rounds) / len(rounds)
            emit(
                BisectProgress(
                    "step",
                    e.note,
                    step=e.step,
                    commits=[self.rng.commits[p][:12] for p in e.positions],
                    verdicts=[v.value for v in e.verdicts],
                    candidates=est.candidates,
                    mass=est.mass,
                    probes=self.executions,
                    strategy=e.strategy,
                    elapsed=now - started,
                    eta=None if est.found else left * mean,
                )
            )
            self.partial = self._result(e.strategy, Status.INTERRUPTED, None, est.mass, [])

        self.partial = self._result("deterministic", Status.INTERRUPTED, None, 0.0, [])
        try:
            res = search(self.rng.n, evaluate, scfg, progress=on_event, graph=self.rng.graph)
        except EndpointError as exc:
            raise self._diagnosed(exc) from exc
        # the notes are the result's (its summary shows them once), not live progress
        res.notes.insert(0, f"searched the {self.rng.path()}")
        culprit = self.rng.repo.info(self.rng.commits[res.culprit]) if res.culprit else None
        candidates = [self.rng.repo.info(self.rng.commits[p]) for p in res.suspects]
        out = self._result(res.strategy, res.status, culprit, res.confidence, candidates)
        out.switched, out.notes, out.rates = res.switched, res.notes, res.rates
        return out

    def _diagnosed(self, exc: EndpointError) -> EndpointError:
        """``exc`` with the cause, log and fix from the endpoint's own runs."""
        from regress.bisect.diagnosis import explain

        if exc.position is None:  # about both endpoints (a metric that does not separate them)
            return exc
        sha = self.rng.commits[exc.position]
        message = explain(
            str(exc),
            sha=sha,
            outcomes=self.seen.get(sha, []),
            command=self.config.command,
            repo=self.rng.repo.path,
            fixes=getattr(self.runner.probe, "fixes", None),
        )
        error = EndpointError(message)
        error.probes, error.position = exc.probes, exc.position
        return error

    def _result(self, strategy, status, culprit, confidence, candidates) -> BisectResult:
        for step in self.steps.values():
            if not step.subject:
                step.subject = self.rng.repo.info(step.commit).subject
        return BisectResult(
            status=status,
            good=self.rng.good,
            bad=self.rng.bad,
            commits=self.rng.n,
            culprit=culprit,
            confidence=confidence,
            probes=self.executions,
            cached=self.replay.replayed,
            steps=list(self.steps.values()),
            strategy=strategy,
            find_fix=self.config.find_fix,
            candidates=candidates,
            command=list(self.config.command),
            probe={"kind": self.config.probe},
        )


def _rounds_left(candidates: int, strategy: str, jobs: int) -> float:
    bits = math.log2(max(candidates, 1)) / math.log2(jobs + 1)
    return math.ceil(bits) * (2.5 if strategy == "flaky" else 1.0) + 1
