"""A throwaway git history carrying copies of the reference DSA code, with planted bugs.

The copies are taken from the installed ``regress.reference.metadata``,
``regress.reference.layerwise`` and ``regress.reference.draft_cache`` at run time, so the demo always
bisects the code this checkout ships. Most commits are harmless edits (comments, notes); by
default one drops the ``req_idx_per_token`` refresh from ``on_update_kv_lens()`` (the pre-#16925
state) and one drops the MTP shape announcement from the layer-wise run pack (the pre-#17247
state); ``plants=`` plants any registered defect instead (``regress.demo.plants``).
"""

from __future__ import annotations

import inspect
import random
from dataclasses import dataclass
from pathlib import Path

from regress.bisect.git import git
from regress.demo.plants import (
    DRAFT_CACHE_FILE,
    METADATA_FILE,
    PLANTS,
    RUNNER_FILE,
    SEEDS,
    Plant,
)
from regress.errors import RegressError

REFRESH_CALL = PLANTS["stale_req_idx"].needle
ANNOUNCE_CALL = PLANTS["unannounced_mtp_shapes"].needle
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
    """The generated repository and where its regressions were planted (defect -> commit)."""

    path: Path
    first: str
    head: str
    planted: dict[str, str]
    commits: int

    @property
    def stale_map_commit(self) -> str | None:
        return self.planted.get("stale_req_idx")

    @property
    def layerwise_commit(self) -> str | None:
        return self.planted.get("unannounced_mtp_shapes")


def _git(repo: Path, *args: str, env_extra: dict[str, str] | None = None) -> str:
    """git through the bisect's one seam (:func:`regress.bisect.git.git`), as the demo's author."""
    config = ["-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"]
    return git([*config, *args], cwd=repo, env={**_ENV, **(env_extra or {})}).stdout.strip()


def _sources(plants: list[Plant]) -> dict[str, str]:
    from regress.reference import draft_cache, layerwise, metadata

    files = {
        METADATA_FILE: (inspect.getsource(metadata), "regress/reference/metadata.py"),
        RUNNER_FILE: (inspect.getsource(layerwise), "regress/reference/layerwise.py"),
        DRAFT_CACHE_FILE: (inspect.getsource(draft_cache), "regress/reference/draft_cache.py"),
    }
    needles = [(p.file, p.needle) for p in plants] + [(RUNNER_FILE, RUNNER_IMPORT)]
    for name, needle in needles:
        text, where = files[name]
        if text.count(needle) != 1:
            raise RegressError(
                f"the demo plants its bugs by editing {needle.strip()!r} in {where}, which now "
                f"occurs {text.count(needle)} times; update regress/demo/plants.py to match"
            )
    out = {name: text for name, (text, _) in files.items()}
    out[RUNNER_FILE] = out[RUNNER_FILE].replace(RUNNER_IMPORT, "from dsa_metadata import ")
    return out


def plant_positions(
    commits: int, seed: int, count: int, at: dict[int, int] | None = None
) -> list[int]:
    """1-based commit numbers for ``count`` plants: seeded, distinct, inside the history.

    With the default two plants they fall in the second and the last thirds, as before; ``at``
    pins plant ``i`` to a commit number.
    """
    rnd = random.Random(seed)
    spans = [(commits // 3, commits // 2), (2 * commits // 3, commits - 1)]
    if count > 2:
        step = max((commits - 2) // count, 1)
        spans = [(2 + i * step, 2 + (i + 1) * step) for i in range(count)]
    out = [rnd.randrange(lo, max(hi, lo + 1)) for lo, hi in spans[:count]]
    for i, n in (at or {}).items():
        out[i] = n
    if len(set(out)) != len(out) or not all(1 < n < commits for n in out):
        raise RegressError("planted commits must be distinct and strictly inside the history")
    return out


def build_demo_repo(
    path: Path,
    *,
    commits: int = 100,
    seed: int = 0,
    stale_at: int | None = None,
    layerwise_at: int | None = None,
    plants: list[str] | None = None,
) -> DemoRepo:
    """Write a ``commits``-long linear history into the empty directory ``path``.

    Args:
        stale_at / layerwise_at: 1-based commit numbers of the two seed bugs (default: seeded
            positions in the second and last thirds of the history).
        plants: defect names to plant instead of the two seeds (``regress.demo.plants``), at
            seeded positions in that order.
    """
    if commits < 8:
        raise RegressError("the demo history needs at least 8 commits")
    chosen = [PLANTS[name] for name in (plants or SEEDS)]
    pinned = {}
    if plants is None:
        pinned = {i: n for i, n in enumerate((stale_at, layerwise_at)) if n}
    positions = plant_positions(commits, seed, len(chosen), pinned)
    files = _sources(chosen)
    files["NOTES.md"] = "# Notes\n\nA throwaway history written by `regress demo`.\n"
    at = dict(zip(positions, chosen, strict=True))
    rnd = random.Random(seed)
    rnd.random()  # the positions' draws: keep the edits independent of how many plants there are
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q")
    shas: dict[int, str] = {}
    for n in range(1, commits + 1):
        if n == 1:
            subject = "import DSA metadata, the layer-wise runner and the draft-cache choices"
        elif n in at:
            plant = at[n]
            files[plant.file] = files[plant.file].replace(plant.needle, plant.replacement)
            subject = plant.subject
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
    planted = {p.defect: shas[n] for n, p in at.items()}
    return DemoRepo(path, shas[1], shas[commits], planted, commits)
