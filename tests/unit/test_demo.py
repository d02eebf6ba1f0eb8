"""regress demo: the planted history, and a small end-to-end run through the CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _outputs import blocked_path, fill_the_disk
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
    monkeypatch.chdir(tmp_path)  # a relative --workdir: the probes run in their clones
    out = CliRunner().invoke(
        cli, ["demo", "--commits", "10", "--json", "-", "--keep", "--workdir", "demo"]
    )
    assert out.exit_code == 0, out.output[-3000:]
    doc = json.loads(out.stdout)
    assert doc["ok"] is True and doc["kept"] is True
    assert [b["matched"] for b in doc["bisects"]] == [True, True]
    assert {b["probe"] for b in doc["bisects"]} == {"metric", "assert"}
    # Progress from the first second: the first line comes before the history is written, and
    # each bisect reports its probe runs while it checks the endpoints, before its first round.
    lines = out.stderr.splitlines()
    assert "writing a 10-commit history" in lines[0]
    for name in ("stale_req_idx (acceptance metric)", "unannounced_mtp_shapes (DeepGEMM assert)"):
        mine = [line for line in lines if f"[{name}]" in line]
        assert "checking both endpoints" in mine[0]
        assert "probe run" in mine[1] and "started on" in mine[1]
        assert any("step 1:" in line for line in mine)
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


@pytest.mark.parametrize("exists", [True, False])
def test_a_relative_workdir_is_resolved_and_only_a_folder_the_demo_made_is_removed(
    tmp_path, monkeypatch, exists
):
    import regress.bisect as bisect
    from regress.bisect.report import BisectResult
    from regress.demo.probes import EVENTS_ENV

    seen = []

    def fake(config, progress=None):
        seen.append(config)
        return BisectResult(
            status="inconclusive",
            good=config.good,
            bad=config.bad,
            commits=8,
            culprit=None,
            confidence=0.0,
            probes=0,
            cached=0,
            steps=[],
            strategy="deterministic",
        )

    monkeypatch.setattr(bisect, "run_bisect", fake)
    monkeypatch.chdir(tmp_path)
    if exists:
        (tmp_path / "wd1").mkdir()  # the user's own (empty) folder
    out = CliRunner().invoke(cli, ["demo", "--commits", "8", "--workdir", "wd1"])
    assert out.exit_code == 1, out.output  # the fake found nothing: a culprit missed
    for config in seen:  # everything a probe or the bisect opens is absolute
        assert all(Path(p).is_absolute() for p in (config.cache_dir, *config.overlays))
        assert Path(config.env[EVENTS_ENV]).is_absolute()
        assert Path(config.repo).is_absolute()
    assert len(seen) == 2
    assert (tmp_path / "wd1").exists() is exists
    assert not exists or list((tmp_path / "wd1").iterdir()) == []


def test_workdir_must_be_empty(tmp_path):
    (tmp_path / "x").write_text("keep me")
    out = CliRunner().invoke(cli, ["demo", "--workdir", str(tmp_path)])
    assert out.exit_code == 2
    assert (tmp_path / "x").read_text() == "keep me"


# --- failures: one line, the right exit code, nothing left behind --------------------------------


@pytest.fixture
def no_bisect(monkeypatch):
    """Make any bisect fail loudly: these tests must stop before the first one."""
    import regress.bisect as bisect

    def refuse(*args, **kwargs):
        raise AssertionError("the demo ran a bisect")

    monkeypatch.setattr(bisect, "run_bisect", refuse)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--json", "BLOCKED"], "--json "),
        (["--workdir", "BLOCKED"], "--workdir "),
        (["--commits", "0"], "8<=x<=2000"),
        (["--commits", "-5"], "8<=x<=2000"),
        (["--seed", "-1"], "x>=0"),
    ],
)
def test_bad_input_exits_2_before_any_work(tmp_path, no_bisect, args, message):
    blocked = str(blocked_path(tmp_path))
    args = [blocked if a == "BLOCKED" else a for a in args]
    out = CliRunner().invoke(cli, ["demo", *args])
    assert out.exit_code == 2, out.output
    assert message in out.stderr
    assert out.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_ctrl_c_exits_130_and_removes_the_throwaway_repository(tmp_path, monkeypatch):
    import regress.bisect as bisect

    def interrupted(config, progress=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(bisect, "run_bisect", interrupted)
    workdir = tmp_path / "demo"
    out = CliRunner().invoke(cli, ["demo", "--commits", "8", "--workdir", str(workdir)])
    assert out.exit_code == 130
    assert out.stderr.strip().splitlines()[-1] == "regress: interrupted"
    assert not workdir.exists()


def test_write_error_after_the_run_is_exit_2_not_a_missed_culprit(tmp_path, monkeypatch):
    import regress.demo as demo_pkg
    from regress.demo.run import DemoResult

    monkeypatch.setattr(
        demo_pkg, "run_demo", lambda **kw: DemoResult(repo="r", kept=False, commits=8)
    )
    fill_the_disk(monkeypatch)  # the disk fills up during the run
    out = CliRunner().invoke(cli, ["demo", "--json", str(tmp_path / "d.json")])
    assert out.exit_code == 2, out.output
    assert "No space left on device" in out.stderr and "internal error" not in out.stderr
    assert list(tmp_path.iterdir()) == []


def test_progress_starts_before_the_history_is_written(tmp_path, monkeypatch):
    """The first event is delivered before any slow work (the old demo was silent for 115 s)."""
    import regress.demo.run as run

    events = []

    def stop(*args, **kwargs):
        raise RuntimeError("stop here")

    monkeypatch.setattr(run, "build_demo_repo", stop)
    with pytest.raises(RuntimeError, match="stop here"):
        run.run_demo(workdir=tmp_path / "d", progress=events.append)
    assert [(e.where, e.message) for e in events] == [
        ("setup", "writing a 100-commit history with two planted regressions")
    ]
    assert not (tmp_path / "d").exists()


def test_probe_watcher_reports_each_run_once_and_only_whole_lines(tmp_path):
    from regress.demo.run import _ProbeWatcher, _Reporter

    events = []
    log = tmp_path / "runs.log"
    with _ProbeWatcher(log, _Reporter(events.append, 0.0), interval=3600) as watcher:
        watcher.follow("first")
        log.write_text("aaaaaaaaaaaa\nbbbb")  # the second line is still being written
        watcher.poll()
        assert [e.message for e in events] == ["probe run 1 started on aaaaaaaaaa"]
        with log.open("a") as fh:
            fh.write("bbbbbbbb\n")
        watcher.follow("second")  # what was written so far still belongs to the first bisect
        with log.open("a") as fh:
            fh.write("cccccccccccc\n")
    assert [(e.where, e.message) for e in events] == [
        ("first", "probe run 1 started on aaaaaaaaaa"),
        ("first", "probe run 2 started on bbbbbbbbbb"),
        ("second", "probe run 1 started on cccccccccc"),
    ]


def test_an_error_naming_files_of_the_removed_work_folder_says_how_to_keep_them(
    tmp_path, monkeypatch
):
    import regress.bisect as bisect

    def fails(config, progress=None):
        raise RegressError(f"probe failed (output: {config.cache_dir}/logs/x.log)", exit_code=2)

    monkeypatch.setattr(bisect, "run_bisect", fails)
    out = CliRunner().invoke(cli, ["demo", "--commits", "8", "--workdir", str(tmp_path / "w")])
    assert out.exit_code == 2
    assert out.stderr.strip().endswith(
        "the work folder was removed: rerun with --keep to keep the files it names"
    )
    assert not (tmp_path / "w").exists()
