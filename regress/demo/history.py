"""A throwaway git history carrying copies of the reference DSA code, with two planted bugs.

The copies are taken from the installed ``regress.reference.metadata`` and
``regress.reference.layerwise`` at run time, so the demo always bisects the code this checkout
ships. Most commits are harmless edits (comments, notes); one drops the ``req_idx_per_token``
refresh from ``on_update_kv_lens()`` (the pre-#16925 state) and one drops the MTP shape
announcement from the layer-wise run pack (the pre-#17247 state).
"""

from __future__ import annotations

import inspect
import random
from dataclasses import dataclass
from pathlib import Path

from regress.bisect.git import git
from regress.errors import RegressError

METADATA_FILE = "dsa_metadata.py"
RUNNER_FILE = "layerwise_runner.py"

REFRESH_CALL = "        self._refresh_req_idx_per_token()\n"
ANNOUNCE_CALL = "    _announce(metadata, run_type, batch_size, seq_len_q, chosen)\n"
RUNNER_IMPORT = "from regress.reference.metadata import "

_ENV = {
    "GIT_AUTHOR_NAME": "Demo Dev",
    "GIT_AUTHOR_EMAIL": "demo@example.invalid",
    "GIT_COMMITTER_NAME": "Demo Dev",
    "GIT_COMMITTER_EMAIL": "demo@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}

_SUBJECTS = (
    "docs: clarify {}",
    "refactor: tidy comments in {}",
    "chore: note on {}",
    "style: wording in {}",
    "docs: cross-reference upstream in {}",
)


@dataclass
class DemoRepo:
    """The generated repository and where its two regressions were planted."""

    path: Path
    first: str
    head: str
    stale_map_commit: str
    layerwise_commit: str
    commits: int


def _git(repo: Path, *args: str, env_extra: dict[str, str] | None = None) -> str:
    """git through the bisect's one seam (:func:`regress.bisect.git.git`), as the demo's author."""
    config = ["-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"]
    return git([*config, *args], cwd=repo, env={**_ENV, **(env_extra or {})}).stdout.strip()


def _sources() -> tuple[str, str]:
    from regress.reference import layerwise, metadata

    meta = inspect.getsource(metadata)
    runner = inspect.getsource(layerwise)
    for text, needle, where in (
        (meta, REFRESH_CALL, "regress/reference/metadata.py"),
        (runner, ANNOUNCE_CALL, "regress/reference/layerwise.py"),
        (runner, RUNNER_IMPORT, "regress/reference/layerwise.py"),
    ):
        if text.count(needle) != 1:
            raise RegressError(
                f"the demo plants its bugs by editing {needle.strip()!r} in {where}, which now "
                f"occurs {text.count(needle)} times; update regress/demo/history.py to match"
            )
    runner = runner.replace(RUNNER_IMPORT, "from dsa_metadata import ")
    return meta, runner


def build_demo_repo(
    path: Path,
    *,
    commits: int = 100,
    seed: int = 0,
    stale_at: int | None = None,
    layerwise_at: int | None = None,
) -> DemoRepo:
    """Write a ``commits``-long linear history into the empty directory ``path``.

    Args:
        stale_at / layerwise_at: 1-based commit numbers of the planted bugs (default: seeded
            positions in the second and last thirds of the history).
    """
    if commits < 8:
        raise RegressError("the demo history needs at least 8 commits")
    rnd = random.Random(seed)
    stale_at = stale_at or rnd.randrange(commits // 3, commits // 2)
    layerwise_at = layerwise_at or rnd.randrange(2 * commits // 3, commits - 1)
    if not 1 < stale_at < commits or not 1 < layerwise_at < commits or stale_at == layerwise_at:
        raise RegressError("planted commits must be distinct and strictly inside the history")
    meta, runner = _sources()
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q")
    files = {
        METADATA_FILE: meta,
        RUNNER_FILE: runner,
        "NOTES.md": "# Notes\n\nA throwaway history written by `regress demo`.\n",
    }
    shas: dict[int, str] = {}
    for n in range(1, commits + 1):
        if n == 1:
            subject = "import DSA metadata and the layer-wise runner"
        elif n == stale_at:
            files[METADATA_FILE] = files[METADATA_FILE].replace(REFRESH_CALL, "")
            subject = "perf: reuse req_idx_per_token from prepare() in on_update_kv_lens"
        elif n == layerwise_at:
            files[RUNNER_FILE] = files[RUNNER_FILE].replace(ANNOUNCE_CALL, "")
            subject = "layer-wise: build GEN packs without the spec-dec call"
        else:
            target = rnd.choice(sorted(files))
            comment = "#" if target.endswith(".py") else "-"
            files[target] += f"{comment} revision note {n}: no behaviour change\n"
            subject = rnd.choice(_SUBJECTS).format(target)
        for name, text in files.items():
            (path / name).write_text(text)
        _git(path, "add", "-A")
        stamp = f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}+00:00"
        _git(
            path,
            "commit",
            "-q",
            "-m",
            subject,
            env_extra={"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp},
        )
        shas[n] = _git(path, "rev-parse", "HEAD")
    return DemoRepo(path, shas[1], shas[commits], shas[stale_at], shas[layerwise_at], commits)
