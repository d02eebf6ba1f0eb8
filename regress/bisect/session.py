"""One bisect session of a real repository: validate the range, wire store, runner and search.

:func:`run_bisect` is the library entry point (the CLI and ``regress demo`` call it); ``status`` is
the same function in replay-only mode, which is why the whole configuration is saved with the
session.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict
from pathlib import Path

from regress.bisect import git as gitlib
from regress.bisect.config import BisectConfig
from regress.bisect.evaluator import BisectProgress, Evaluator, ProgressFn, ReplayExhausted
from regress.bisect.history import Range, cache_root, resolve_range
from regress.bisect.probes import make_probe
from regress.bisect.report import BisectResult
from regress.bisect.runner import Overlay, Runner, RunnerConfig
from regress.bisect.store import (
    Replay,
    ResultStore,
    config_hash,
    locked,
    probe_files,
    read_json,
    session_path,
)
from regress.errors import UsageError
from regress.files import write_json_atomic


def run_bisect(
    config: BisectConfig,
    progress: ProgressFn | None = None,
    *,
    replay_only: bool = False,
    key: str | None = None,
) -> BisectResult:
    """Find the first bad (or, with ``find_fix``, the first fixed) commit of ``config``'s range.

    On a merge history (without ``first_parent``) the commit graph is bisected as git bisect
    does; the result's first note says which path was taken.

    Args:
        config: the range, the probe and the options.
        progress: receives a :class:`BisectProgress` per round, note and warning.
        replay_only: answer only from stored results and stop where they end (``status``).
        key: the stored results to replay (``status`` passes the session's own, so a probe
            edited since then does not hide them); default: the hash of the configuration.

    Raises:
        UsageError: bad input or endpoints that do not behave as stated (exit 2).
        RegressError: git or the cache failed (exit 1).
    """
    started = time.monotonic()
    emit = progress or (lambda _p: None)
    config.validate()  # the CLI may have changed fields after construction
    rng = resolve_range(config)
    config, capped = config.capped(rng.n)
    root = cache_root(rng.repo, config.cache_dir)
    probe, judge_direction = _make_probe(config)
    overlays = [Overlay.parse(o, rng.repo.path) for o in config.overlays]
    recipe = _recipe(config)
    runner_config = RunnerConfig(
        command=list(config.command) or (recipe.command() if hasattr(recipe, "command") else []),
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
    key = key or config_hash(key_config)
    warnings = _warnings(rng, recipe) + ([capped] if capped else [])
    for w in warnings:
        emit(BisectProgress("warning", w))
    lock = contextlib.nullcontext() if replay_only else locked(root)
    with lock:
        store = ResultStore(root, key, key_config, persist=config.use_cache)
        if not replay_only:
            write_json_atomic(session_path(root), _session_record(config, rng, key, "running"))
        workspace = gitlib.Workspace(rng.repo, root / "slots", config.jobs)
        runner = Runner(
            workspace, probe, runner_config, root / "logs", env_hook=recipe.env if recipe else None
        )
        ev = Evaluator(rng, Replay(store), runner, workspace, config, replay_only)
        try:
            result = ev.search(probe.kind, judge_direction, emit, started)
        except ReplayExhausted:
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
    if config.recipe == "trtllm-source":
        from regress.upstream.recipe import SourceRecipe

        return SourceRecipe()
    from regress.bisect.trtllm import TrtllmRecipe

    modes = {"trtllm": "overlay", "trtllm-precompiled": "precompiled"}
    if config.recipe not in modes:
        raise UsageError(f"unknown --recipe {config.recipe!r}: use {' or '.join(modes)}")
    return TrtllmRecipe(mode=modes[config.recipe], wheel=config.wheel)


def _warnings(rng: Range, recipe) -> list[str]:
    if recipe is None or not getattr(recipe, "warns_on_native", True):
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
    return BisectConfig(**record["config"])
