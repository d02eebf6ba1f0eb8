"""Checks a bisect makes before its first probe: input the first runs would only find late.

Each mistake here used to surface after the endpoint checks had run the probe four times (and,
with a 10-minute probe, 40 minutes later) as an indirect message: a probe or launcher not on
``PATH``, a ``--metric`` path that cannot be parsed, a repository with no commits ("unknown
revision 'HEAD'"), a repository path holding a newline (``git clone --shared`` writes the path into
the line-based ``objects/info/alternates`` file, so the clone fails). Each is a usage error
(exit 2) naming the option and what to do, raised before anything runs or is written.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regress.bisect.git import git
from regress.bisect.probes import json_path
from regress.errors import UsageError


class _AnyNode:
    """A JSON value with every key and index: walking it checks a path's syntax alone."""

    def __getitem__(self, _key: Any) -> _AnyNode:
        return self


def check_metric_path(path: str | None) -> None:
    """Refuse a ``--metric`` path :func:`~regress.bisect.probes.json_path` could never follow."""
    if path is None:
        return
    try:
        json_path(_AnyNode(), path)
    except KeyError as exc:
        raise UsageError(
            f"--metric {path!r}: {exc.args[0]}; give a dotted path with list indices, e.g. "
            "runs[1].score"
        ) from None


def check_executable(word: str, option: str, env_path: str | None = None) -> None:
    """Refuse an argv[0] that cannot be started: a bare name not on ``PATH``, a missing file.

    A relative path with a folder (``./probe.sh``) is looked up in each commit's private clone,
    where a build may make it, so it is left to the run.
    """
    if "/" not in word:
        if shutil.which(word, path=env_path or os.environ.get("PATH")) is None:
            raise UsageError(
                f"{option}: {word!r} is not found on PATH; check its spelling, install it, or "
                "give its absolute path"
            )
        return
    path = Path(word)
    if not path.is_absolute():
        return
    if not path.is_file():
        raise UsageError(f"{option}: {word} does not exist; give the path of the program to run")
    if not os.access(path, os.X_OK):
        raise UsageError(
            f"{option}: {word} is not executable; `chmod +x {word}` or run it through its "
            f"interpreter (e.g. -- sh {word})"
        )


@dataclass(frozen=True)
class RepoPlace:
    """What one ``git rev-parse`` says about a ``--repo`` folder (both checks below need it).

    Attributes:
        path: the folder, absolute.
        is_repo: inside a repository (a work tree or a bare one).
        top: the work tree's top folder, or None (not a work tree).
    """

    path: Path
    is_repo: bool
    top: Path | None


def locate(repo: str | os.PathLike[str]) -> RepoPlace | None:
    """Where ``repo`` is, from one ``git rev-parse``; None when it is not a folder."""
    path = Path(os.path.abspath(os.fspath(repo)))
    if not path.is_dir():
        return None
    found = git(["rev-parse", "--is-inside-work-tree", "--show-toplevel"], cwd=path, check=False)
    # a work tree: "true" and its top, exit 0; a bare repository: "false", then an error
    lines = found.stdout.splitlines()
    top = Path(lines[1]) if found.returncode == 0 and len(lines) > 1 else None
    return RepoPlace(path, bool(lines), top)


def check_repo_path(repo: str | os.PathLike[str], place: RepoPlace | None = None) -> None:
    """Refuse a repository the bisect cannot clone or has nothing to bisect in (``place``:
    :func:`locate`'s answer, asked here when not given)."""
    resolved = os.path.abspath(os.fspath(repo))
    if "\n" in resolved or "\r" in resolved:
        raise UsageError(
            f"--repo {resolved!r}: the path holds a line break, which git cannot record for the "
            "private clones (objects/info/alternates is one path per line); rename the folder"
        )
    place = place or locate(resolved)
    if place is None or not place.is_repo:
        return  # not a folder, not a repository: open_repo says what is wrong with it
    head = git(["rev-parse", "--verify", "--quiet", "HEAD"], cwd=place.path, check=False)
    if head.returncode != 0 and not git(["rev-list", "-n1", "--all"], cwd=place.path).stdout:
        raise UsageError(
            f"--repo {resolved}: the repository has no commits yet, so there is nothing to "
            "bisect; commit the history first or point --repo at another checkout"
        )


def check_recipe_repo(
    recipe: object | None,
    repo: str | os.PathLike[str],
    revisions,
    place: RepoPlace | None = None,
) -> None:
    """Let a recipe that knows its trees (an optional ``check_repo(path, revisions)``) refuse a
    repository it cannot build, before the endpoint runs would all be skips (``place``:
    :func:`locate`'s answer, asked here when not given)."""
    check = getattr(recipe, "check_repo", None)
    if check is None:
        return
    place = place or locate(repo)
    if place is not None and place.top is not None:
        check(place.top, list(revisions))


def preflight(
    *,
    repo: str | os.PathLike[str],
    command: list[str],
    launcher: list[str],
    metric: str | None,
    env: dict[str, str] | None = None,
    recipe: object | None = None,
    revisions: tuple[str, ...] = (),
) -> None:
    """Every check above, for one bisect; raises :class:`UsageError` at the first problem.

    Behind a ``--launcher`` the probe runs elsewhere (another node's ``PATH``), so only the
    launcher itself is looked up here.
    """
    place = locate(repo)  # one git call for both checks
    check_repo_path(repo, place)
    check_recipe_repo(recipe, repo, revisions, place)
    check_metric_path(metric)
    path = (env or {}).get("PATH")
    if launcher:
        check_executable(launcher[0], "--launcher", path)
    elif command:
        check_executable(command[0], "the probe command", path)
