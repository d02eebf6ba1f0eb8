"""The validated range of a bisect: repository checks, endpoints, candidate commits, cache root."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from regress.bisect import git as gitlib
from regress.bisect.graph import Graph
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


def _cache_source(cache_dir: str | None) -> str:
    """Where the cache folder came from, for messages: the option, the variable or the default."""
    if cache_dir:
        return f"--cache-dir {cache_dir}"
    if os.environ.get("REGRESS_CACHE_DIR"):
        return f"REGRESS_CACHE_DIR={os.environ['REGRESS_CACHE_DIR']}"
    return "the default cache folder (set --cache-dir or REGRESS_CACHE_DIR to move it)"


@contextlib.contextmanager
def cache_writes(root: Path, cache_dir: str | None) -> Iterator[None]:
    """Turn a failed write under the cache ``root`` into bad input naming where it came from.

    A cache folder that is a file, on a read-only or a full filesystem, is the user's to fix
    (exit 2), not an internal error. Folders this bisect created are removed again on such a
    failure, so a failed first run leaves no lone ``lock`` file behind.
    """
    made = root
    while not made.parent.exists() and made.parent != made.parent.parent:
        made = made.parent
    made = None if made.exists() else made
    try:
        yield
    except OSError as exc:
        where = Path(str(exc.filename)) if exc.filename else None
        if where is None:  # a write() names no file; these errnos are the disk's
            if exc.errno not in _DISK_ERRNOS:
                raise
        elif not (where == root or root in where.parents or where in root.parents):
            raise
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        raise UsageError(
            f"{_cache_source(cache_dir)}: cannot write the bisect cache ({exc.strerror}: "
            f"{exc.filename or root}); give a writable folder with free space"
        ) from exc


#: Write errors a full or read-only disk raises without naming a file.
_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO})


@dataclass
class Range:
    """The validated range: positions 0..n map to ``commits`` (0 = old endpoint).

    ``graph`` is the commit graph over those positions on a merge history, ``None`` when the
    positions are a chain (a linear range, or ``--first-parent``).
    """

    repo: gitlib.Repo
    good: str
    bad: str
    commits: list[str]  # old endpoint first, new endpoint last
    graph: Graph | None = None

    @property
    def n(self) -> int:
        return len(self.commits) - 1

    def path(self) -> str:
        """Which path the bisect takes, for the report."""
        if self.graph is None:
            return f"linear history of {self.n} commits"
        merges = len(self.graph.merges)
        return (
            f"commit graph of {self.n} commits with {merges} merge(s), as git bisect walks it "
            "(the answer is a merge only if the merge itself is the culprit)"
        )


def graph_range(repo: gitlib.Repo, old: str, new: str) -> tuple[list[str], Graph | None]:
    """Candidates after ``old`` up to ``new`` in parents-first order, and their graph.

    Parents outside the range (``old`` itself, or older commits a merged branch started from)
    become node 0: git bisect likewise treats everything reachable from the good commit as good.
    """
    rows = repo.graph(old, new)
    shas = [sha for sha, _ in rows]
    if shas and shas[-1] != new:  # new has no children among the candidates: it may go last
        shas.remove(new)
        shas.append(new)
        rows = sorted(rows, key=lambda r: r[0] == new)
    index = {old: 0, **{sha: i + 1 for i, sha in enumerate(shas)}}
    parents = [[], *([index.get(p, 0) for p in ps] for _, ps in rows)]
    graph = Graph(parents)
    return [old, *shas], (None if graph.linear else graph)


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
    if not config.first_parent:
        commits, graph = graph_range(repo, old, new)
        return Range(repo=repo, good=good, bad=bad, commits=commits, graph=graph)
    commits = repo.rev_list(old, new, first_parent=True)
    if not commits:
        raise UsageError(
            f"the range {old[:12]}..{new[:12]} is empty with --first-parent: the older revision "
            "is not on the first-parent chain of the newer one; drop --first-parent"
        )
    return Range(repo=repo, good=good, bad=bad, commits=[old, *commits])
