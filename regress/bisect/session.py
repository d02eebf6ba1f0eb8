"""One bisect of a real repository: validate the range, wire store, runner and search together.

:func:`run_bisect` is the library entry point (the CLI and ``regress demo`` call it); ``status`` is
the same function in replay-only mode, which is why the whole configuration is saved with the
session.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from regress.bisect import git as gitlib
from regress.bisect.history import Range, cache_root, resolve_range
from regress.bisect.metric import MetricJudge
from regress.bisect.probes import DEFAULT_SIGNATURE, make_probe
from regress.bisect.report import BisectResult, Step
from regress.bisect.runner import Overlay, Runner, RunnerConfig
from regress.bisect.search import EndpointError, SearchConfig, SearchEvent, search
from regress.bisect.store import (
    Replay,
    ResultStore,
    config_hash,
    locked,
    probe_files,
    read_json,
    session_path,
)
from regress.bisect.verdicts import Outcome, Verdict
from regress.errors import UsageError
from regress.files import write_json_atomic


@dataclass
class BisectConfig:
    """Everything ``regress bisect run`` takes; see its ``--help`` for each option."""

    good: str
    bad: str
    command: list[str]
    repo: str = "."
    probe: str = "exit-code"  # exit-code | assert | metric | pytest
    signature: str = DEFAULT_SIGNATURE
    crash_is_bad: bool = False
    metric: str | None = None
    metric_regex: str | None = None
    threshold: float | None = None
    direction: int | None = None  # +1 higher is better, -1 lower is better
    metric_runs: tuple[int, int, int] = (5, 3, 10)  # endpoints, first runs, most runs per commit
    flaky: bool = False
    confidence: float = 0.99
    false_pass: bool | None = None
    endpoint_runs: int = 3
    verify_runs: int = 2
    max_probes: int | None = None
    find_fix: bool = False
    first_parent: bool = False
    jobs: int = 1
    gpus: list[str] | None = None
    launcher: list[str] = field(default_factory=list)
    build: str | None = None
    timeout: float | None = None
    overlays: list[str] = field(default_factory=list)
    recipe: str | None = None  # trtllm | trtllm-precompiled
    wheel: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    cache_dir: str | None = None
    use_cache: bool = True
    keep_worktrees: bool = False


@dataclass
class Progress:
    """A live update for the progress callback (the CLI prints it on stderr)."""

    kind: str  # "step", "note" or "warning"
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


ProgressFn = Callable[[Progress], None]


class _ReplayExhausted(Exception):
    """Raised in replay-only mode (status) when the search needs a run the store lacks."""


def run_bisect(
    config: BisectConfig,
    progress: ProgressFn | None = None,
    *,
    replay_only: bool = False,
    key: str | None = None,
) -> BisectResult:
    """Find the first bad (or, with ``find_fix``, the first fixed) commit of ``config``'s range.

    Args:
        config: the range, the probe and the options.
        progress: receives a :class:`Progress` per round, note and warning.
        replay_only: answer only from stored results and stop where they end (``status``).
        key: the stored results to replay (``status`` passes the session's own, so a probe
            edited since then does not hide them); default: the hash of the configuration.

    Raises:
        UsageError: bad input or endpoints that do not behave as stated (exit 2).
        RegressError: git or the cache failed (exit 1).
    """
    started = time.monotonic()
    emit = progress or (lambda _p: None)
    rng = resolve_range(config)
    root = cache_root(rng.repo, config.cache_dir)
    probe, judge_direction = _make_probe(config)
    overlays = [Overlay.parse(o, rng.repo.path) for o in config.overlays]
    recipe = _recipe(config)
    runner_config = RunnerConfig(
        command=list(config.command),
        build=config.build or (recipe.build_command() if recipe else None),
        overlays=overlays,
        timeout=config.timeout,
        launcher=list(config.launcher),
        jobs=config.jobs,
        gpus=config.gpus,
        env=dict(config.env),
    )
    key_config = {
        "command": runner_config.command,
        "probe": probe.config(),
        "build": runner_config.build,
        "overlays": [(o.dest, o.digest()) for o in overlays],
        "timeout": config.timeout,
        "recipe": recipe.config() if recipe else None,
        "env": config.env,
        "files": probe_files(runner_config.command, runner_config.build, rng.repo.path),
    }
    search_config(config)  # validate every option before anything is written
    key = key or config_hash(key_config)
    warnings = _warnings(rng, recipe)
    for w in warnings:
        emit(Progress("warning", w))
    lock = contextlib.nullcontext() if replay_only else locked(root)
    with lock:
        store = ResultStore(root, key, key_config, persist=config.use_cache)
        if not replay_only:
            write_json_atomic(session_path(root), _session_record(config, rng, key, "running"))
        workspace = gitlib.Workspace(rng.repo, root / "slots", config.jobs)
        runner = Runner(
            workspace, probe, runner_config, root / "logs", env_hook=recipe.env if recipe else None
        )
        ev = _Evaluator(rng, Replay(store), runner, workspace, config, replay_only)
        try:
            result = ev.search(probe.kind, judge_direction, emit, started)
        except _ReplayExhausted:
            result = ev.partial
        except BaseException as exc:
            runner.stop()
            if not replay_only:
                status = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"error: {exc}"
                write_json_atomic(session_path(root), _session_record(config, rng, key, status))
            raise
        finally:
            # also removes clones a killed run left behind, even if everything came from the store
            if not replay_only and not config.keep_worktrees:
                workspace.cleanup()
        result.warnings = warnings
        result.elapsed_s = time.monotonic() - started
        if not replay_only:
            write_json_atomic(
                session_path(root),
                _session_record(config, rng, key, result.status, result.to_json()),
            )
    return result


class _Evaluator:
    """Maps positions to commits and verdicts to runs, answering from the store first."""

    def __init__(self, rng: Range, replay: Replay, runner: Runner, workspace, config, replay_only):
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

    def outcomes(self, positions: Sequence[int]) -> list[Outcome]:
        shas = [self.rng.commits[p] for p in positions]
        out: list[Outcome | None] = [self.replay.cached(s) for s in shas]
        missing = [i for i, o in enumerate(out) if o is None]
        from_store = [o is not None for o in out]
        if missing and self.replay_only:
            raise _ReplayExhausted
        if missing:
            if not self.prepared:
                self.workspace.prepare()
                self.prepared = True

            def record(j: int, outcome: Outcome) -> None:
                self.replay.record(shas[missing[j]], outcome)  # persisted as each run ends
                out[missing[j]] = outcome

            self.runner.run_many([shas[i] for i in missing], on_done=record)
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
        self, kind: str, direction: int | None, emit: ProgressFn, started: float
    ) -> BisectResult:
        c = self.config
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
            )

            def evaluate(positions: Sequence[int]) -> Sequence[Verdict]:
                verdicts = judge(positions)
                for p, v in zip(positions, verdicts, strict=True):
                    self._judged(p, v)
                return verdicts

        scfg = search_config(c)
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
                Progress(
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
            self.partial = self._result(e.strategy, "interrupted", None, est.mass, [])

        self.partial = self._result("deterministic", "interrupted", None, 0.0, [])
        try:
            res = search(self.rng.n, evaluate, scfg, progress=on_event)
        except EndpointError as exc:
            raise self._diagnosed(exc) from exc
        for note in res.notes:
            emit(Progress("note", note))
        culprit = self.rng.repo.info(self.rng.commits[res.culprit]) if res.culprit else None
        candidates = []
        if res.status == "ambiguous":
            a, b = res.interval
            candidates = [self.rng.repo.info(self.rng.commits[p]) for p in range(a, b + 1)]
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


def search_config(c: BisectConfig) -> SearchConfig:
    """The pure search's options (validated: a bad value is a usage error)."""
    return SearchConfig(
        mode="flaky" if c.flaky else "auto",
        jobs=c.jobs,
        confidence=c.confidence,
        false_pass=c.false_pass,
        endpoint_runs=c.endpoint_runs,
        verify_runs=c.verify_runs,
        max_probes=c.max_probes,
    )


def _rounds_left(candidates: int, strategy: str, jobs: int) -> float:
    bits = math.log2(max(candidates, 1)) / math.log2(jobs + 1)
    return math.ceil(bits) * (2.5 if strategy == "flaky" else 1.0) + 1


def _make_probe(config: BisectConfig):
    direction = config.direction
    if config.probe == "exit-code":
        probe = make_probe("exit-code", crash_is_bad=config.crash_is_bad)
    elif config.probe == "assert":
        probe = make_probe("assert", signature=config.signature)
    elif config.probe == "metric":
        probe = make_probe(
            "metric",
            path=config.metric,
            regex=config.metric_regex,
            threshold=config.threshold,
            direction=direction,
        )
    else:
        probe = make_probe(config.probe)
    # the judge speaks in search terms, where the new endpoint is "bad": a fix is the better side
    judge_direction = None if direction is None else (-direction if config.find_fix else direction)
    return probe, judge_direction


def _recipe(config: BisectConfig):
    if config.recipe is None:
        return None
    from regress.bisect.trtllm import TrtllmRecipe

    modes = {"trtllm": "overlay", "trtllm-precompiled": "precompiled"}
    if config.recipe not in modes:
        raise UsageError(f"unknown --recipe {config.recipe!r}: use {' or '.join(modes)}")
    return TrtllmRecipe(mode=modes[config.recipe], wheel=config.wheel)


def _warnings(rng: Range, recipe) -> list[str]:
    if recipe is None:
        return []
    from regress.bisect.trtllm import NATIVE_PATHS, native_warning

    touching = rng.repo.out(
        "log", "--format=%h %s", f"{rng.commits[0]}..{rng.commits[-1]}", "--", *NATIVE_PATHS
    ).splitlines()
    warning = native_warning(touching)
    return [warning] if warning else []


def _session_record(config, rng: Range, key: str, status: str, result: dict | None = None) -> dict:
    return {
        "schema": 1,
        "status": status,
        "key": key,
        "repo": str(rng.repo.path),
        "good": rng.good,  # resolved: status must not follow a branch that moved since
        "bad": rng.bad,
        "config": asdict(config),
        "result": result,
    }


def load_session(config_repo: str = ".", cache_dir: str | None = None) -> tuple[Path, dict | None]:
    """The cache root of a repository and its latest session record, if any."""
    repo = gitlib.open_repo(config_repo)
    root = cache_root(repo, cache_dir)
    path = session_path(root)
    return root, (read_json(path) if path.exists() else None)


def config_from_session(record: dict) -> BisectConfig:
    data = dict(record["config"])
    data["metric_runs"] = tuple(data["metric_runs"])
    return BisectConfig(**data)
