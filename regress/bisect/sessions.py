"""The stored sessions of a repository's bisects, as `log`, `status` and `reset` read them."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any

from regress.bisect.session import config_from_session, load_session, run_bisect
from regress.bisect.store import ResultStore, lock_held, locked, replayable
from regress.errors import UsageError


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
    session = record["status"]
    if session == "running" and not lock_held(root):
        session = "killed"
    result = run_bisect(config, replay_only=True, key=record["key"])
    head = f"{'fix' if config.find_fix else 'bisect'} {config.good[:12]}..{config.bad[:12]}"
    lines = [
        f"{head}: {session} ({result.probes} runs stored, {result.commits} commits)",
        f"repository: {config.repo}",
        f"command: {shlex.join(config.command)}",
    ]
    if session == "killed":
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
    return {
        "session": session,
        "config": record["config"],
        "result": result.to_json(),
        "text": "\n".join(lines),
    }


def bisect_reset(repo: str = ".", cache_dir: str | None = None) -> str:
    """Delete the repository's bisect cache (results, session, clones, logs)."""
    root, _ = load_session(repo, cache_dir)
    if not root.exists():
        return f"nothing to reset ({root} does not exist)"
    with locked(root):
        for child in root.iterdir():
            if child.name != "lock":
                if child.is_dir():
                    shutil.rmtree(child)
                else:
                    child.unlink()
    return f"removed the stored bisect state in {root}"
