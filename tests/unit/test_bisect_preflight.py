"""The repository checks a bisect makes before its first probe, and the git calls they cost."""

from __future__ import annotations

import os
import subprocess

import pytest

import regress.bisect.preflight as preflight_module
from regress.bisect.preflight import check_recipe_repo, check_repo_path, preflight
from regress.errors import UsageError

_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def _git(cwd, *args):
    subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **_ENV}
    )


def _repo(path, commits=1, bare=False):
    path.mkdir(parents=True)
    _git(path, "init", "-q", *(["--bare"] if bare else []))
    for i in range(commits):
        (path / "f.txt").write_text(str(i))
        _git(path, "add", "f.txt")
        _git(path, "commit", "-q", "-m", f"c{i}")
    return path


class _Recipe:
    def __init__(self):
        self.asked = []

    def check_repo(self, path, revisions):
        self.asked.append((path, revisions))


@pytest.mark.parametrize("bare", [False, True])
def test_a_repository_without_commits_is_refused(tmp_path, bare):
    repo = _repo(tmp_path / "r", commits=0, bare=bare)
    with pytest.raises(UsageError, match="no commits yet"):
        check_repo_path(repo)


def test_a_folder_that_is_no_repository_is_left_to_open_repo(tmp_path):
    check_repo_path(tmp_path)  # open_repo names the problem later
    check_repo_path(tmp_path / "missing")


def test_the_recipe_is_asked_about_the_work_trees_top(tmp_path):
    repo = _repo(tmp_path / "r")
    (repo / "sub").mkdir()
    recipe = _Recipe()
    check_recipe_repo(recipe, repo / "sub", ("HEAD",))
    assert recipe.asked == [(repo.resolve(), ["HEAD"])]
    bare = _repo(tmp_path / "b.git", commits=0, bare=True)
    check_recipe_repo(recipe, bare, ("HEAD",))  # no work tree: nothing to ask
    assert len(recipe.asked) == 1


def test_preflight_asks_git_where_the_repository_is_once(tmp_path, monkeypatch):
    repo = _repo(tmp_path / "r")
    calls = []
    real = preflight_module.git

    def counted(args, **kwargs):
        calls.append(args)
        return real(args, **kwargs)

    monkeypatch.setattr(preflight_module, "git", counted)
    recipe = _Recipe()
    preflight(repo=repo, command=["true"], launcher=[], metric=None, recipe=recipe)
    assert recipe.asked == [(repo.resolve(), [])]
    assert [a[0] for a in calls].count("rev-parse") == 2, calls  # where it is; its HEAD
