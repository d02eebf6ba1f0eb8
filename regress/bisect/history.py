"""The validated range of a bisect: repository checks, endpoints, candidate commits, cache root."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from regress.bisect import git as gitlib
from regress.errors import UsageError


def cache_root(repo: gitlib.Repo, cache_dir: str | None) -> Path:
    """The per-repository cache directory (never inside the user's repository)."""
    if cache_dir:
        base = Path(cache_dir).expanduser()
    elif os.environ.get("REGRESS_CACHE_DIR"):
        base = Path(os.environ["REGRESS_CACHE_DIR"]).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = Path(xdg) / "regress"
    key = hashlib.sha256(str(repo.git_dir).encode()).hexdigest()[:16]
    return base.resolve() / "bisect" / key


@dataclass
class Range:
    """The validated range: positions 0..n map to ``commits`` (0 = old endpoint)."""

    repo: gitlib.Repo
    good: str
    bad: str
    commits: list[str]  # old endpoint first, new endpoint last

    @property
    def n(self) -> int:
        return len(self.commits) - 1


def resolve_range(config) -> Range:
    """Check the repository and the revisions; every problem is a usage error (exit 2)."""
    repo = gitlib.open_repo(config.repo)
    if repo.is_shallow():
        raise UsageError(
            f"{repo.path} is a shallow clone, so its history is incomplete: run "
            "`git fetch --unshallow` there first"
        )
    good = repo.resolve(config.good, "--good")
    bad = repo.resolve(config.bad, "--bad")
    if good == bad:
        raise UsageError(
            f"--good and --bad are the same commit ({good[:12]}): there is nothing to bisect"
        )
    old, new = (bad, good) if config.find_fix else (good, bad)
    if not repo.is_ancestor(old, new):
        if repo.is_ancestor(new, old):
            hint = (
                "drop --find-fix: it expects the bad revision to be the older one"
                if config.find_fix
                else "if the good revision is the newer one you are looking for a fix: add --find-fix"
            )
            raise UsageError(
                f"the {'bad' if config.find_fix else 'good'} revision is not an ancestor "
                f"of the {'good' if config.find_fix else 'bad'} one: {hint}"
            )
        raise UsageError(
            f"{config.good} and {config.bad} are on unrelated lines of history: choose an older "
            "revision that is an ancestor of the newer one (git merge-base shows the common one)"
        )
    commits = repo.rev_list(old, new, first_parent=config.first_parent)
    if not commits:
        raise UsageError(
            f"the range {old[:12]}..{new[:12]} is empty with --first-parent: the older revision "
            "is not on the first-parent chain of the newer one; drop --first-parent"
        )
    if not config.first_parent:
        merges = repo.merges(old, new)
        if merges:
            raise UsageError(
                f"the range contains {len(merges)} merge commit(s) (e.g. {merges[0][:12]}); "
                "regress bisects a linear history: add --first-parent to bisect the mainline (the "
                "answer may then be a merge), or narrow the range to a linear stretch"
            )
    return Range(repo=repo, good=good, bad=bad, commits=[old, *commits])
