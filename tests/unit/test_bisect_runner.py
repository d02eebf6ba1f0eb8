"""The runner and the store: timeouts kill process groups, overlays, atomic persistence, replay."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _processes import alive, wait_for

from regress.bisect.causes import DID_NOT_RUN
from regress.bisect.git import Workspace, open_repo
from regress.bisect.probes import ExitCodeProbe, MetricProbe
from regress.bisect.runner import Overlay, ProbeRunner, ProbeRunnerConfig, cap_log, parse_launcher
from regress.bisect.store import (
    Replay,
    ResultStore,
    config_hash,
    file_digests,
    probe_files,
)
from regress.bisect.synthetic import regression_history
from regress.bisect.verdicts import Outcome, Verdict
from regress.errors import RegressError, UsageError
from regress.files import write_json_atomic


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    path = tmp_path_factory.mktemp("runner") / "repo"
    return path, regression_history(path, 4, 2)


def make_runner(tmp_path, history, command, **kw):
    path, _ = history
    ws = Workspace(open_repo(path), tmp_path / "slots", kw.get("jobs", 1))
    ws.prepare()
    return ProbeRunner(
        ws, ExitCodeProbe(), ProbeRunnerConfig(command=command, **kw), tmp_path / "logs"
    )


def test_timeout_kills_the_whole_process_group(tmp_path, history):
    _, shas = history
    pidfile = tmp_path / "child.pid"
    # The grandchild's pid must be on disk before the timeout fires: a 0.5 s timeout lost that
    # race on a loaded 2-core machine (sh had not started yet); 5 s leaves room, and the rename
    # means the test never reads a half-written pid.
    script = f"sleep 300 & echo $! > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}; wait"
    runner = make_runner(tmp_path, history, ["sh", "-c", script], timeout=5)
    out = runner.run(0, shas[1])
    assert out.verdict is Verdict.SKIP and out.reason == "timeout after 5s"
    child = int(pidfile.read_text())
    wait_for(lambda: not alive(child))  # the grandchild went down with its group


def test_probe_sees_commit_worktree_and_overlay(tmp_path, history):
    _, shas = history
    extra = tmp_path / "tools"
    extra.mkdir()
    (extra / "check.sh").write_text(
        'test "$(git rev-parse HEAD)" = "$REGRESS_COMMIT" || exit 3\n'
        'test "$PWD" = "$REGRESS_WORKTREE" || exit 4\n'
        'test "$EXTRA" = yes || exit 5\nexit 0\n'
    )
    overlay = Overlay.parse(f"{extra}:ci/tools", tmp_path)
    runner = make_runner(
        tmp_path, history, ["sh", "ci/tools/check.sh"], overlays=[overlay], env={"EXTRA": "yes"}
    )
    out = runner.run(0, shas[3])
    assert out.verdict is Verdict.GOOD, Path(out.log).read_text()
    assert Path(out.log).exists() and out.seconds > 0


def test_missing_command_is_a_skip_with_a_reason(tmp_path, history):
    _, shas = history
    out = make_runner(tmp_path, history, ["./no-such-probe"]).run(0, shas[1])
    assert out.verdict is Verdict.SKIP and out.reason.startswith("could not start")


def test_overlay_parsing(tmp_path):
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    inside = repo / "tests" / "test_new.py"
    inside.write_text("x")
    outside = tmp_path / "probe.sh"
    outside.write_text("y")
    assert Overlay.parse(str(inside), repo).dest == "tests/test_new.py"
    assert Overlay.parse(str(outside), repo).dest == "probe.sh"
    assert Overlay.parse(f"{outside}:bin/p.sh", repo).dest == "bin/p.sh"
    with pytest.raises(UsageError, match="does not exist"):
        Overlay.parse(str(tmp_path / "nope"), repo)
    with pytest.raises(UsageError, match="relative path"):
        Overlay.parse(f"{outside}:../escape", repo)
    a = Overlay.parse(str(outside), repo).digest()
    outside.write_text("changed")
    assert Overlay.parse(str(outside), repo).digest() != a


def test_runner_config_validation():
    with pytest.raises(UsageError, match="after `--`"):
        ProbeRunnerConfig(command=[])
    with pytest.raises(UsageError, match="one per job"):
        ProbeRunnerConfig(command=["x"], jobs=3, gpus=["0", "1"])
    with pytest.raises(UsageError, match="positive"):
        ProbeRunnerConfig(command=["x"], timeout=0)


def test_stop_refuses_new_probes(tmp_path, history):
    _, shas = history
    runner = make_runner(tmp_path, history, ["true"])
    runner.stop()
    out = runner.run(0, shas[1])
    assert out.verdict is Verdict.SKIP and "interrupted" in out.reason


def test_store_persists_atomically_and_replays_in_order(tmp_path):
    key = config_hash({"command": ["x"]})
    assert key == config_hash({"command": ["x"]}) and key != config_hash({"command": ["y"]})
    store = ResultStore(tmp_path, key, {"command": ["x"]})
    store.add("a" * 40, Outcome(Verdict.GOOD, "exit 0"))
    store.add("b" * 40, Outcome(Verdict.BAD, "exit 1"))
    store.add("a" * 40, Outcome(Verdict.BAD, "exit 1"))
    again = Replay(ResultStore(tmp_path, key, {}))
    assert [again.cached("a" * 40).verdict, again.cached("a" * 40).verdict] == [
        Verdict.GOOD,
        Verdict.BAD,
    ]
    assert again.cached("a" * 40) is None and again.replayed == 2
    again.record("a" * 40, Outcome(Verdict.GOOD))
    assert len(ResultStore(tmp_path, key, {}).outcomes("a" * 40)) == 3
    assert not list(tmp_path.rglob("*.tmp"))


def test_store_from_another_schema_is_refused(tmp_path):
    write_json_atomic(tmp_path / "results" / "k.json", {"schema": 99, "runs": []})
    with pytest.raises(RegressError, match="regress bisect reset"):
        ResultStore(tmp_path, "k", {})


def test_store_without_persistence_reads_and_writes_nothing(tmp_path):
    ResultStore(tmp_path, "k", {}).add("a", Outcome(Verdict.GOOD))
    memory = ResultStore(tmp_path, "k", {}, persist=False)
    assert memory.outcomes("a") == []
    memory.add("b", Outcome(Verdict.BAD))
    assert ResultStore(tmp_path, "k", {}).outcomes("b") == []


def test_run_many_reports_each_run_as_it_ends(tmp_path, history):
    _, shas = history
    script = 'grep -q "BUG = True" app.py && exit 1; exit 0'
    runner = make_runner(tmp_path, history, ["sh", "-c", script], jobs=2)
    seen: list[tuple[int, Verdict]] = []
    out = runner.run_many(
        [shas[1], shas[3], shas[0]], on_done=lambda i, o: seen.append((i, o.verdict))
    )
    assert [o.verdict for o in out] == [Verdict.GOOD, Verdict.BAD, Verdict.GOOD]
    assert sorted(seen) == [(0, Verdict.GOOD), (1, Verdict.BAD), (2, Verdict.GOOD)]


CHATTY = (
    "import sys\n"
    "print('first line')\n"
    "for i in range(20000):\n"
    "    print(f'line {i} ' + 'x' * 40)\n"
    "print('{\"v\": 2.5}')\n"
    "sys.stderr.write('e' * 300000)\n"
)


def test_a_chatty_probe_keeps_head_and_tail_of_each_log(tmp_path, history):
    path, shas = history
    (tmp_path / "chatty.py").write_text(CHATTY)
    ws = Workspace(open_repo(path), tmp_path / "slots", 1)
    ws.prepare()
    config = ProbeRunnerConfig(
        command=[sys.executable, str(tmp_path / "chatty.py")], log_bytes=8192
    )
    runner = ProbeRunner(ws, MetricProbe(path="v"), config, tmp_path / "logs")
    out = runner.run(0, shas[1])
    assert out.value == 2.5  # the probe judged the whole output, not the cut log
    log = Path(out.log)
    err = log.with_suffix(".err")
    for f in (log, err):
        text = f.read_text()
        assert f.stat().st_size < 8192 + 200
        kept = 2048 + 6144
        total = int(text.split(" of ")[1].split(" bytes]")[0])
        assert f"bytes cut here; kept the first 2048 and the last 6144 of {total} bytes" in text
        assert f"[regress: {total - kept} bytes cut" in text
    assert log.read_text().startswith("first line\n") and log.read_text().endswith('{"v": 2.5}\n')
    assert int(err.read_text().split(" of ")[1].split(" bytes]")[0]) == 300000


def test_a_quiet_probe_log_is_left_whole(tmp_path):
    log = tmp_path / "run.log"
    log.write_bytes(b"x" * 100)
    cap_log(log, 100)
    assert log.read_bytes() == b"x" * 100


def test_runs_in_which_the_probe_did_not_run_are_stored_but_never_replayed(tmp_path):
    store = ResultStore(tmp_path, "k", {})
    store.add("a", Outcome(Verdict.SKIP, "could not start: x", details={DID_NOT_RUN: "x"}))
    store.add("a", Outcome(Verdict.GOOD, "exit 0"))
    store.add("b", Outcome(Verdict.SKIP, "exit 127", details={DID_NOT_RUN: "command not found"}))
    again = Replay(ResultStore(tmp_path, "k", {}))
    assert len(again.store.runs) == 3  # `bisect log` still shows them
    assert again.cached("a").verdict is Verdict.GOOD and again.cached("a") is None
    assert again.cached("b") is None


def test_probe_files_are_keyed_by_content(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "probe.sh").write_text("exit 1\n")
    outside = tmp_path / "bench.py"
    outside.write_text("print(1)\n")
    argv = ["sh", "probe.sh", str(outside), "--flag", "missing.sh", str(tmp_path)]
    first = file_digests(argv, repo)
    assert [w for w, _ in first] == ["probe.sh", str(outside)]
    (repo / "probe.sh").write_text("exit 0\n")
    second = file_digests(argv, repo)
    assert second[0] != first[0] and second[1] == first[1]
    outside.write_text("print(2)\n")
    assert file_digests(argv, repo)[1] != second[1]


@pytest.mark.parametrize("text", ['"unclosed', "srun \\"])
def test_a_launcher_that_does_not_split_is_bad_input(text):
    with pytest.raises(UsageError, match="--launcher"):
        parse_launcher(text)
    assert parse_launcher("srun --gpus=1 'a b'") == ["srun", "--gpus=1", "a b"]


def test_files_named_by_the_build_line_are_keyed_too(tmp_path):
    (tmp_path / "build.sh").write_text("make\n")
    first = probe_files(["true"], "sh build.sh --fast", tmp_path)
    assert [w for w, _ in first] == ["build.sh"]
    (tmp_path / "build.sh").write_text("make -j8\n")
    assert probe_files(["true"], "sh build.sh --fast", tmp_path) != first
    assert probe_files(["true"], "sh 'build.sh", tmp_path) == []  # not a word list: text only
