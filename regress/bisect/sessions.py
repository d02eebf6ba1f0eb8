"""The stored sessions of a repository's bisects, as `log`, `status` and `reset` read them."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any

from regress.bisect.session import config_from_session, load_session, run_bisect
from regress.bisect.store import ResultStore, locked
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
    """Every stored run of the latest session's probe configuration, in execution order."""
    root, record = _latest(repo, cache_dir)
    store = ResultStore(root, record["key"], {})
    return [{"commit": sha, **o.to_json()} for sha, o in store.runs]


def bisect_status(repo: str = ".", cache_dir: str | None = None) -> dict[str, Any]:
    """The latest session, with the search replayed from stored results to where it stands."""
    _, record = _latest(repo, cache_dir)
    config = config_from_session(record)
    result = run_bisect(config, replay_only=True)
    head = f"{'fix' if config.find_fix else 'bisect'} {config.good}..{config.bad}"
    lines = [
        f"{head}: {record['status']} ({result.probes} runs stored, {result.commits} commits)",
        f"command: {shlex.join(config.command)}",
    ]
    if result.status == "interrupted":
        lines.append(
            f"{result.strategy} search, top candidate mass {result.confidence:.3f}; "
            "rerun the same `regress bisect run` command to continue"
        )
    else:
        lines.append(result.summary())
    return {
        "session": record["status"],
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
