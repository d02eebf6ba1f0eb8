"""The one seam to git: every git process regress bisect starts goes through :func:`git`.

Read-only questions (``rev-parse``, ``rev-list``, ``show``, ``merge-base``) go to the user's
repository and write nothing there. Everything that checks commits out happens in private
``git clone --shared`` copies under the cache directory (:class:`Workspace`): the user's checkout,
index, branches, refs, worktree list and dirty files are never touched, and since nothing is ever
registered in their repository there is nothing to clean up there after Ctrl-C or kill -9.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from regress.errors import RegressError, UsageError
from regress.processes import end_recorded


class GitError(RegressError):
    """git failed where it should not have (exit 1): the message carries git's own words."""


def git(
    args: Sequence[str],
    *,
    cwd: Path | str,
    check: bool = True,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``git ARGS`` in ``cwd`` and capture its output as text.

    The environment disables prompts and pagers and fixes the locale, so output parses the same
    everywhere; ``env`` adds variables (author dates for reproducible test histories). ``check``
    raises :class:`GitError` on a nonzero exit.
    """
    env = dict(os.environ, **(env or {}), GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", LC_ALL="C")
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):  # never aim at another repository
        env.pop(var, None)
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH; install git and retry") from exc
    if check and proc.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc


@dataclass(frozen=True)
class CommitInfo:
    """What the result shows about a commit."""

    sha: str
    subject: str
    author: str
    date: str
    diffstat: str = ""

    @property
    def short(self) -> str:
        return self.sha[:12]


@dataclass(frozen=True)
class Repo:
    """The user's repository, for read-only queries."""

    path: Path
    git_dir: Path  # the common git dir (shared by all of its worktrees)

    def out(self, *args: str) -> str:
        return git(args, cwd=self.path).stdout.strip()

    def resolve(self, rev: str, option: str) -> str:
        """The full sha of ``rev`` as a commit, or a usage error naming the option."""
        proc = git(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
            cwd=self.path,
            check=False,
        )
        if proc.returncode != 0 or not proc.stdout.strip():
            raise UsageError(
                f"unknown revision {rev!r} for {option} in {self.path}: give a commit, branch or "
                "tag that `git log --oneline` shows (fetch it first if it is only on a remote)"
            )
        return proc.stdout.strip()

    def is_shallow(self) -> bool:
        return self.out("rev-parse", "--is-shallow-repository") == "true"

    def is_ancestor(self, older: str, newer: str) -> bool:
        proc = git(["merge-base", "--is-ancestor", older, newer], cwd=self.path, check=False)
        if proc.returncode not in (0, 1):
            raise GitError(f"git merge-base --is-ancestor failed: {proc.stderr.strip()}")
        return proc.returncode == 0

    def rev_list(self, old: str, new: str, *, first_parent: bool = False) -> list[str]:
        """Commits after ``old`` up to and including ``new``, oldest first."""
        args = ["rev-list", "--reverse", "--ancestry-path"]
        if first_parent:
            args.append("--first-parent")
        return self.out(*args, f"{old}..{new}").split()

    def graph(self, old: str, new: str) -> list[tuple[str, list[str]]]:
        """git bisect's candidates, reachable from ``new`` and not from ``old``, with their parents.

        Parents first and otherwise oldest first by commit date (``--date-order --reverse``): each
        commit comes after all of its parents that are candidates too, and where commit dates
        agree with the graph this is the order git bisect scans the candidates in (the reverse of
        its date-ordered walk), which decides its ties (``regress.bisect.strategies.deterministic
        .git_midpoint``). ``--topo-order`` would group each branch's commits together instead.
        """
        lines = self.out("rev-list", "--date-order", "--reverse", "--parents", new, f"^{old}")
        return [(row[0], row[1:]) for row in (line.split() for line in lines.splitlines())]

    def info(self, sha: str) -> CommitInfo:
        fields = self.out("show", "-s", "--format=%H%x1f%s%x1f%an <%ae>%x1f%aI", sha).split("\x1f")
        stat = self.out("show", "--stat", "--format=", "--no-color", "-m", "--first-parent", sha)
        return CommitInfo(
            sha=fields[0], subject=fields[1], author=fields[2], date=fields[3], diffstat=stat
        )


def open_repo(path: Path | str) -> Repo:
    """Validate ``path`` as a git repository (usage error otherwise) and return it."""
    path = Path(path).expanduser()
    if not path.is_dir():
        raise UsageError(
            f"{path} does not exist or is not a directory: pass --repo PATH of a git checkout"
        )
    proc = git(["rev-parse", "--git-common-dir"], cwd=path, check=False)
    if proc.returncode != 0:
        raise UsageError(
            f"{path} is not a git repository ({proc.stderr.strip()}): run from a checkout or pass "
            "--repo PATH"
        )
    git_dir = (path / proc.stdout.strip()).resolve()
    top = git(["rev-parse", "--show-toplevel"], cwd=path, check=False)
    root = Path(top.stdout.strip()).resolve() if top.returncode == 0 else git_dir
    return Repo(path=root, git_dir=git_dir)


class Workspace:
    """Private clones under ``root``, one per job slot, where commits are checked out.

    ``git clone --shared`` borrows the user's object store read-only (through the clone's own
    alternates file), so a slot costs one checkout and no copy of history. The slots live only in
    the cache directory; :meth:`prepare` removes whatever a killed run left there, after ending
    any probe it left running in a slot (each slot records its probe's pid while it runs, in
    :meth:`probe_record`): a resumed bisect never runs a probe beside an orphan in one worktree.
    """

    def __init__(self, repo: Repo | None, root: Path, slots: int) -> None:
        self.repo = repo
        self.root = root
        self.slots = slots

    def slot_path(self, slot: int) -> Path:
        return self.root / f"slot-{slot}"

    def probe_record(self, slot: int) -> Path:
        """Where slot ``slot`` records the pid of the build or probe running in it."""
        return self.root / f"slot-{slot}{_RECORD}"

    def prepare(self) -> None:
        """Fresh clones for every slot (what was there is :meth:`cleanup`'s first)."""
        assert self.repo is not None, "a workspace without a repository only cleans up"
        self.cleanup()
        self.root.mkdir(parents=True, exist_ok=True)
        for slot in range(self.slots):
            git(
                [
                    "clone",
                    "--quiet",
                    "--shared",
                    "--no-checkout",
                    str(self.repo.git_dir),
                    str(self.slot_path(slot)),
                ],
                cwd=self.root,
            )

    def checkout(self, slot: int, sha: str) -> Path:
        """Check ``sha`` out (detached, forced, cleaned) in the slot and return its path."""
        path = self.slot_path(slot)
        git(["checkout", "--quiet", "--force", "--detach", sha], cwd=path)
        git(["clean", "-qffdx"], cwd=path)
        return path

    def cleanup(self) -> list[str]:
        """Remove every slot, first ending a probe an earlier run left running in one.

        Returns:
            A note per probe ended, naming the slot, its pid and its commit.
        """
        notes = []
        records = sorted(self.root.glob(f"slot-*{_RECORD}")) if self.root.is_dir() else []
        for record in records:
            ended = end_recorded(record)
            if ended is not None:
                slot = record.name.removesuffix(_RECORD)
                notes.append(
                    f"{slot}: ended the probe (pid {ended['pid']}, commit "
                    f"{str(ended.get('commit', '?'))[:12]}) that an earlier run, killed before "
                    "it could end it, left running there"
                )
        if self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)
        return notes


_RECORD = ".probe.json"
