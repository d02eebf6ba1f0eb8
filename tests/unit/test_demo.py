"""regress demo: the planted history, and a small end-to-end run through the CLI."""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner

from regress.cli import cli
from regress.demo.history import (
    ANNOUNCE_CALL,
    METADATA_FILE,
    REFRESH_CALL,
    RUNNER_FILE,
    build_demo_repo,
)
from regress.errors import RegressError


def _show(repo, rev, path):
    return subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def test_history_plants_each_bug_in_exactly_one_commit(tmp_path):
    repo = build_demo_repo(tmp_path / "r", commits=20, seed=3)
    count = subprocess.run(
        ["git", "rev-list", "--count", "HEAD"],
        cwd=repo.path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert int(count) == 20
    assert REFRESH_CALL in _show(repo.path, f"{repo.stale_map_commit}~1", METADATA_FILE)
    assert REFRESH_CALL not in _show(repo.path, repo.stale_map_commit, METADATA_FILE)
    assert ANNOUNCE_CALL in _show(repo.path, f"{repo.layerwise_commit}~1", RUNNER_FILE)
    assert ANNOUNCE_CALL not in _show(repo.path, repo.layerwise_commit, RUNNER_FILE)
    assert "from dsa_metadata import" in _show(repo.path, repo.first, RUNNER_FILE)


def test_history_is_reproducible(tmp_path):
    a = build_demo_repo(tmp_path / "a", commits=12, seed=5)
    b = build_demo_repo(tmp_path / "b", commits=12, seed=5)
    assert (a.stale_map_commit, a.layerwise_commit, a.head) == (
        b.stale_map_commit,
        b.layerwise_commit,
        b.head,
    )


def test_bad_plant_positions_are_refused(tmp_path):
    with pytest.raises(RegressError, match="distinct"):
        build_demo_repo(tmp_path / "r", commits=10, stale_at=5, layerwise_at=5)


def test_demo_end_to_end_finds_both_planted_commits(tmp_path, monkeypatch):
    monkeypatch.setenv("REGRESS_DEMO_PROMPTS", "4")
    monkeypatch.setenv("REGRESS_DEMO_TOKENS", "16")
    monkeypatch.delenv("REGRESS_DEFECTS", raising=False)
    out = CliRunner().invoke(
        cli,
        ["demo", "--commits", "10", "--json", "-", "--keep", "--workdir", str(tmp_path / "demo")],
    )
    assert out.exit_code == 0, out.output[-3000:]
    doc = json.loads(out.stdout)
    assert doc["ok"] is True and doc["kept"] is True
    assert [b["matched"] for b in doc["bisects"]] == [True, True]
    assert {b["probe"] for b in doc["bisects"]} == {"metric", "assert"}
    # The user's side is untouched: the bisect cache lives under the workdir, not the repo.
    status = subprocess.run(
        ["git", "status", "--porcelain"],
        cwd=doc["repo"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status == ""
    worktrees = subprocess.run(
        ["git", "worktree", "list"], cwd=doc["repo"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(worktrees) == 1


def test_workdir_must_be_empty(tmp_path):
    (tmp_path / "x").write_text("keep me")
    out = CliRunner().invoke(cli, ["demo", "--workdir", str(tmp_path)])
    assert out.exit_code == 2
    assert (tmp_path / "x").read_text() == "keep me"
