"""Bisect sessions of a real repository: run one (:func:`run_bisect`), and read the stored one.

:func:`run_bisect` is the library entry point (the CLI and ``regress demo`` call it): validate the
range, wire store, runner and search. ``bisect status`` is the same function in replay-only mode,
which is why the whole configuration is saved with the session; :func:`bisect_log`,
:func:`bisect_status` and :func:`bisect_reset` read (or delete) what a repository's last session
stored.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from regress.bisect import git as gitlib
from regress.bisect import registry
from regress.bisect.config import BisectConfig
from regress.bisect.evaluator import BisectProgress, Evaluator, ReplayExhausted
from regress.bisect.history import Range, cache_root, cache_writes, resolve_range
from regress.bisect.probes import Probe
from regress.bisect.report import BisectResult
from regress.bisect.runner import Overlay, ProbeRunner, ProbeRunnerConfig
from regress.bisect.store import (
    RESET_FIX,
    Replay,
    ResultStore,
    config_hash,
    lock_held,
    locked,
    probe_files,
    replayable,
    session_path,
)
from regress.errors import UsageError
from regress.files import read_record, write_json_atomic
from regress.progress import Progress


@dataclass
class _Plan:
    """What one session runs: the probe, the recipe, the runner's settings and the store key."""

    probe: Probe
    judge_direction: int | None
    recipe: registry.Recipe | None
    runner: ProbeRunnerConfig
    key_config: dict[str, Any]


def run_bisect(
    config: BisectConfig,
    progress: Progress[BisectProgress] | None = None,
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
    plan = _plan(config, rng)
    key = key or config_hash(plan.key_config)
    warnings = _warnings(rng, plan.recipe) + ([capped] if capped else [])
    for w in warnings:
        emit(BisectProgress("warning", w))
    with contextlib.ExitStack() as stack:
        if not replay_only:
            stack.enter_context(cache_writes(root, config.cache_dir))  # a full disk: exit 2
            stack.enter_context(locked(root))
        result = _execute(config, rng, root, plan, key, emit, started, replay_only)
        result.warnings = warnings + result.warnings
        result.elapsed_s = time.monotonic() - started
        if not replay_only:
            record = _session_record(config, rng, key, result.status, result.to_json())
            write_json_atomic(session_path(root), record)
    return result


def _plan(config: BisectConfig, rng: Range) -> _Plan:
    probe = registry.make_probe(config.probe, config)
    direction = config.direction
    # the judge speaks in search terms, where the new endpoint is "bad": a fix is the better side
    judge_direction = None if direction is None else (-direction if config.find_fix else direction)
    recipe = config.recipe_entry()
    overlays = [Overlay.parse(o, rng.repo.path) for o in config.overlays]
    runner = ProbeRunnerConfig(
        command=list(config.command) or (recipe.command() if recipe else []),
        build=config.build or (recipe.build_command() if recipe else None),
        overlays=overlays,
        timeout=config.timeout,
        launcher=list(config.launcher),
        jobs=config.jobs,
        gpus=config.gpus,
        env=dict(config.env),
    )
    key_config = {
        "command": runner.command,
        "probe": probe.config(),
        "build": runner.build,
        "overlays": [(o.dest, o.digest()) for o in overlays],
        "timeout": config.timeout,
        "recipe": recipe.config() if recipe else None,
        "env": config.env,
        "files": probe_files(runner.command, runner.build, rng.repo.path),
    }
    return _Plan(probe, judge_direction, recipe, runner, key_config)


def _execute(
    config: BisectConfig,
    rng: Range,
    root: Path,
    plan: _Plan,
    key: str,
    emit: Progress[BisectProgress],
    started: float,
    replay_only: bool,
) -> BisectResult:
    """Search with stored results first, running the probe for the rest; record the session."""
    store = ResultStore(root, key, plan.key_config, persist=config.use_cache)
    if not replay_only:
        write_json_atomic(session_path(root), _session_record(config, rng, key, "running"))
    workspace = gitlib.Workspace(rng.repo, root / "slots", config.jobs)
    # First of all, a probe that a killed run left running in a slot is ended (and said so):
    # nothing may run beside it in its worktree, nor delete that worktree under it.
    orphans = [] if replay_only else workspace.cleanup()
    for note in orphans:
        emit(BisectProgress("warning", note))
    env_hook = plan.recipe.env if plan.recipe else None
    runner = ProbeRunner(workspace, plan.probe, plan.runner, root / "logs", env_hook=env_hook)
    ev = Evaluator(rng, Replay(store), runner, workspace, config, replay_only)
    try:
        result = ev.search(plan.probe.kind, plan.judge_direction, emit, started)
        result.warnings = orphans
        return result
    except ReplayExhausted:
        return ev.partial
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


def _warnings(rng: Range, recipe: registry.Recipe | None) -> list[str]:
    paths = recipe.native_paths if recipe else ()
    if not paths:
        return []
    touching = rng.repo.out(
        "log", "--format=%h %s", f"{rng.commits[0]}..{rng.commits[-1]}", "--", *paths
    ).splitlines()
    warning = recipe.native_warning(touching)
    return [warning] if warning else []


#: The session record's version. 2: a plug-in's options moved from top-level ``config`` keys
#: into ``config["options"]``; a version-1 record is still read (:func:`config_from_session`).
SESSION_SCHEMA = 2


def _session_record(config, rng: Range, key: str, status: str, result: dict | None = None) -> dict:
    return {
        "schema": SESSION_SCHEMA,
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
    if not path.exists():
        return root, None
    record = read_record(path, what="bisect session", fix=RESET_FIX)
    config = record.get("config")
    if (
        not isinstance(record.get("key"), str)
        or not isinstance(config, dict)
        or not {"good", "bad", "command"} <= set(config)
    ):
        raise UsageError(f"the bisect session {path} is damaged (no key or config); {RESET_FIX}")
    return root, record


def config_from_session(record: dict) -> BisectConfig:
    """The stored configuration; a version-1 record's plug-in options move into ``options``."""
    stored = dict(record["config"])
    own = {f.name for f in fields(BisectConfig)}
    moved = {k: stored.pop(k) for k in set(stored) - own}
    stored["options"] = {
        **{k: v for k, v in moved.items() if v is not None},
        **stored.get("options", {}),
    }
    try:
        return BisectConfig(**stored)
    except TypeError as exc:  # a field renamed by hand or by another version
        raise UsageError(f"the stored bisect session does not load ({exc}); {RESET_FIX}") from None


def _latest(repo: str, cache_dir: str | None) -> tuple[Path, dict]:
    root, record = load_session(repo, cache_dir)
    if record is None:
        raise UsageError(
            f"no bisect has run on this repository yet (cache {root}): start one with "
            "`regress bisect run --good REV --bad REV -- CMD`"
        )
    return root, record


def bisect_log(repo: str = ".", cache_dir: str | None = None) -> list[dict[str, Any]]:
    """Every stored run of the latest session's probe configuration, in execution order.

    ``replayable`` is false for runs in which the probe never ran: a rerun probes there again.
    """
    root, record = _latest(repo, cache_dir)
    store = ResultStore(root, record["key"], {})
    return [{"commit": sha, **o.to_json(), "replayable": replayable(o)} for sha, o in store.runs]


def bisect_status(repo: str = ".", cache_dir: str | None = None) -> dict[str, Any]:
    """The latest session, with the search replayed from stored results to where it stands.

    Everything comes from the stored session, never from the caller's directory or today's
    refs: its repository path, its resolved endpoints and its results key. A session recorded as
    running whose lock no live process holds was killed (``kill -9``, a lost node).
    """
    root, record = _latest(repo, cache_dir)
    config = config_from_session(record)
    config.repo = record.get("repo", config.repo)
    config.good = record.get("good", config.good)
    config.bad = record.get("bad", config.bad)
    config.cache_dir = str(root.parent.parent)  # <base>/bisect/<repo key>
    config.overlays, config.recipe = [], None  # a replay runs nothing: no files, no builds
    # ... so the recipe's own options go with it (else they are refused as ignored)
    config.options = {k: v for k, v in config.options.items() if not registry.RECIPES.readers(k)}
    session = record["status"]
    if session == "running" and not lock_held(root):
        session = "killed"
    result = run_bisect(config, replay_only=True, key=record["key"])
    return {
        "session": session,
        "config": record["config"],
        "result": result.to_json(),
        "text": "\n".join(_status_lines(config, session, result)),
    }


def _status_lines(config: BisectConfig, session: str, result: BisectResult) -> list[str]:
    head = f"{'fix' if config.find_fix else 'bisect'} {config.good[:12]}..{config.bad[:12]}"
    lines = [
        f"{head}: {session} ({result.probes} runs stored, {result.commits} commits)",
        f"repository: {config.repo}",
        f"command: {shlex.join(config.command)}",
    ]
    if session == "running":  # a live process holds the lock: rerunning would only wait
        lines.append(
            f"a bisect is running now ({result.strategy} search, top candidate mass "
            f"{result.confidence:.3f} so far); wait for it, or follow it with `regress bisect log`"
        )
    elif session == "killed":
        lines.append(
            "the bisect stopped without finishing (killed?); rerun the same `regress bisect run` "
            "command to resume"
        )
    elif result.status == "interrupted":
        lines.append(
            f"{result.strategy} search, top candidate mass {result.confidence:.3f}; "
            "rerun the same `regress bisect run` command to continue"
        )
    else:
        lines.append(result.summary())
    return lines


def bisect_reset(repo: str = ".", cache_dir: str | None = None) -> str:
    """Delete the repository's bisect cache (results, session, clones, logs)."""
    root = cache_root(gitlib.open_repo(repo), cache_dir)  # a damaged session is removed too
    if not root.exists():
        return f"nothing to reset ({root} does not exist)"
    with locked(root):
        gitlib.Workspace(None, root / "slots", 0).cleanup()  # ends a probe a killed run left
        for child in root.iterdir():
            if child.name != "lock":
                if child.is_dir():
                    shutil.rmtree(child)
                else:
                    child.unlink()
    return f"removed the stored bisect state in {root}"
