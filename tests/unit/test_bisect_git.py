"""The git seam on real temporary repositories: queries, range checks, private workspaces."""

from __future__ import annotations

import subprocess

import pytest

from regress.bisect.git import GitError, Workspace, git, open_repo
from regress.bisect.history import resolve_range
from regress.bisect.session import BisectConfig
from regress.bisect.synthetic import regression_history, write_history
from regress.errors import UsageError


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    path = tmp_path_factory.mktemp("repo") / "repo"
    return path, regression_history(path, 12, 7)


def cfg(path, good, bad, **kw):
    return BisectConfig(good=good, bad=bad, command=["true"], repo=str(path), **kw)


def test_open_repo_and_queries(history):
    path, shas = history
    repo = open_repo(path / ".")
    assert repo.path == path.resolve()
    assert repo.git_dir == (path / ".git").resolve()
    assert repo.resolve("HEAD", "--bad") == shas[-1]
    assert repo.resolve(shas[3][:10], "--good") == shas[3]
    assert repo.rev_list(shas[2], shas[5]) == shas[3:6]
    assert repo.is_ancestor(shas[1], shas[4]) and not repo.is_ancestor(shas[4], shas[1])
    assert not repo.is_shallow()
    assert [sha for sha, _ in repo.graph(shas[0], shas[-1])] == shas[1:]
    info = repo.info(shas[7])
    assert info.subject == "refactor the map refresh (7)"
    assert info.author == "Regress Bot <bot@regress.invalid>"
    assert "app.py" in info.diffstat and "2 files changed" in info.diffstat
    assert info.short == shas[7][:12]


def test_not_a_repository_and_missing_path(tmp_path):
    with pytest.raises(UsageError, match="not a git repository") as err:
        open_repo(tmp_path)
    assert err.value.exit_code == 2
    with pytest.raises(UsageError, match="does not exist"):
        open_repo(tmp_path / "missing")


def test_unknown_revision_names_the_option(history):
    path, _ = history
    with pytest.raises(UsageError, match=r"unknown revision 'v9.9' for --good"):
        open_repo(path).resolve("v9.9", "--good")
    with pytest.raises(UsageError, match="unknown revision '--all'"):
        open_repo(path).resolve("--all", "--bad")  # never read as an option


@pytest.mark.parametrize(
    ("good", "bad", "extra", "match"),
    [
        (3, 3, {}, "same commit"),
        (9, 2, {}, "add --find-fix"),
        (2, 9, {"find_fix": True}, "drop --find-fix"),
    ],
)
def test_range_errors(history, good, bad, extra, match):
    path, shas = history
    with pytest.raises(UsageError, match=match):
        resolve_range(cfg(path, shas[good], shas[bad], **extra))


def test_range_positions(history):
    path, shas = history
    rng = resolve_range(cfg(path, shas[2], shas[9]))
    assert rng.commits == shas[2:10] and rng.n == 7
    fix = resolve_range(cfg(path, shas[9], shas[2], find_fix=True))  # --bad is the older end
    assert fix.commits == shas[2:10]


def test_unrelated_histories(tmp_path):
    a = write_history(tmp_path / "r", [{"a": "1"}, {"a": "2"}])
    other = tmp_path / "other"
    write_history(other, [{"b": "1"}])
    git(["fetch", "-q", str(other), "main:other"], cwd=tmp_path / "r")
    orphan = git(["rev-parse", "other"], cwd=tmp_path / "r").stdout.strip()
    with pytest.raises(UsageError, match="unrelated lines"):
        resolve_range(cfg(tmp_path / "r", orphan, a[1]))


def test_merge_history_is_a_graph_and_first_parent_a_chain(tmp_path):
    path = tmp_path / "r"
    shas = write_history(path, [{"a": "0"}, {"a": "1"}])
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    git(["checkout", "-q", "-b", "side", shas[0]], cwd=path)
    (path / "b").write_text("side")
    git(["add", "b"], cwd=path)
    git(["commit", "-q", "-m", "side"], cwd=path, env=env)
    side = git(["rev-parse", "HEAD"], cwd=path).stdout.strip()
    git(["checkout", "-q", "main"], cwd=path)
    git(["merge", "-q", "--no-ff", "-m", "merge side", "side"], cwd=path, env=env)
    graph_rng = resolve_range(cfg(path, shas[0], "main"))
    assert graph_rng.graph is not None and graph_rng.graph.merges == [3]
    assert graph_rng.commits[0] == shas[0] and set(graph_rng.commits[1:3]) == {shas[1], side}
    assert sorted(graph_rng.graph.parents[3]) == [1, 2]  # the merge joins both lines
    assert "commit graph" in graph_rng.path()
    rng = resolve_range(cfg(path, shas[0], "main", first_parent=True))
    assert len(rng.commits) == 3  # root, shas[1], the merge
    # from a side-branch commit, the first-parent range is just the merge that brought it in
    merge = git(["rev-parse", "main"], cwd=path).stdout.strip()
    assert resolve_range(cfg(path, side, "main", first_parent=True)).commits == [side, merge]


def test_shallow_clone_is_refused(history, tmp_path):
    path, _ = history
    shallow = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "3", f"file://{path}", str(shallow)], check=True
    )
    with pytest.raises(UsageError, match="unshallow"):
        resolve_range(cfg(shallow, "HEAD~2", "HEAD"))


def test_workspace_checks_out_in_private_clones(history, tmp_path):
    path, shas = history
    before = sorted(p.relative_to(path) for p in (path / ".git").rglob("*"))
    ws = Workspace(open_repo(path), tmp_path / "slots", 2)
    ws.prepare()
    one = ws.checkout(0, shas[7])
    (one / "junk.txt").write_text("left over")
    two = ws.checkout(1, shas[3])
    assert (one / "app.py").read_text() == "BUG = True\n"
    assert (two / "app.py").read_text() == "BUG = False\n"
    assert ws.checkout(0, shas[2]) == one
    assert not (one / "junk.txt").exists()  # every checkout starts clean
    ws.cleanup()
    assert not (tmp_path / "slots").exists()
    assert sorted(p.relative_to(path) for p in (path / ".git").rglob("*")) == before
    assert git(["worktree", "list"], cwd=path).stdout.count("\n") == 1


def test_git_errors_carry_gits_words(tmp_path):
    with pytest.raises(GitError, match="not a git repository"):
        git(["log"], cwd=tmp_path)
    assert git(["log"], cwd=tmp_path, check=False).returncode != 0


def test_synthetic_history_is_reproducible(tmp_path):
    assert regression_history(tmp_path / "a", 5, 3) == regression_history(tmp_path / "b", 5, 3)
    with pytest.raises(ValueError):
        regression_history(tmp_path / "c", 5, 6)
