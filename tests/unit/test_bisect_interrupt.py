"""kill -9, Ctrl-C and SIGTERM of a running `regress bisect run`: resume, hygiene, no orphans."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from _processes import alive, guardian_of, wait_for

from regress.bisect.git import git
from regress.bisect.session import bisect_log, bisect_status
from regress.bisect.synthetic import regression_history

# The pid goes first and by rename: a test reading it right after a kill -9 must never see the
# file truncated but not yet written (int("") fails; the window widens on a loaded machine), and
# a logged probe has always published its pid.
SLOW_PROBE = """\
echo $$ > "$PROBE_PID.$$" && mv "$PROBE_PID.$$" "$PROBE_PID"
echo "$REGRESS_COMMIT" >> "$PROBE_LOG"
sleep "$PROBE_SLEEP"
grep -q "BUG = True" app.py && exit 1
exit 0
"""


def snapshot(repo: Path) -> dict[str, str]:
    return {
        str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(repo.rglob("*"))
        if p.is_file()
    }


def start(tmp: Path, repo: Path, shas: list[str], sleep: str) -> subprocess.Popen:
    argv = [
        sys.executable,
        "-c",
        "from regress.cli import main; main()",
        "bisect",
        "run",
        "--good",
        shas[0],
        "--bad",
        shas[-1],
        "--repo",
        str(repo),
        "--cache-dir",
        str(tmp / "cache"),
        "--",
        "sh",
        str(tmp / "probe.sh"),
    ]
    env = dict(
        os.environ,
        PROBE_LOG=str(tmp / "probe.log"),
        PROBE_PID=str(tmp / "probe.pid"),
        PROBE_SLEEP=sleep,
    )
    # A shell running CI in the background starts its children with SIGINT ignored, and Python
    # then installs no KeyboardInterrupt handler; give the child Ctrl-C as a terminal would.
    return subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def probe_pid(tmp: Path) -> int:
    """The pid of the first probe that started (it publishes it by rename)."""
    wait_for(lambda: (tmp / "probe.pid").exists() and (tmp / "probe.pid").read_text())
    return int((tmp / "probe.pid").read_text())


def setup(tmp_path):
    repo = tmp_path / "repo"
    shas = regression_history(repo, 32, 21)
    (repo / "notes.txt").write_text("uncommitted work\n")
    (tmp_path / "probe.sh").write_text(SLOW_PROBE)
    return repo, shas


def test_kill_9_then_resume_repeats_no_recorded_probe(tmp_path):
    repo, shas = setup(tmp_path)
    before = snapshot(repo)
    proc = start(tmp_path, repo, shas, "0.15")
    wait_for(lambda: len(lines(tmp_path / "probe.log")) >= 4)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    in_flight = int((tmp_path / "probe.pid").read_text())
    wait_for(lambda: not alive(in_flight))  # the guardian ends the orphaned probe
    assert snapshot(repo) == before
    assert git(["worktree", "list"], cwd=repo).stdout.count("\n") == 1
    recorded = bisect_log(str(repo), str(tmp_path / "cache"))
    ran_first = len(lines(tmp_path / "probe.log"))
    state = bisect_status(str(repo), str(tmp_path / "cache"))
    assert state["session"] == "killed" and "rerun the same" in state["text"]
    assert ran_first - 1 <= len(recorded) <= ran_first  # at most the in-flight one is lost

    resumed = start(tmp_path, repo, shas, "0")
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err.decode()
    assert f"first bad commit: {shas[21]}" in out.decode()
    runs = bisect_log(str(repo), str(tmp_path / "cache"))
    ran = lines(tmp_path / "probe.log")
    assert [r["commit"] for r in runs[: len(recorded)]] == [r["commit"] for r in recorded]
    assert len(ran) <= len(runs) + 1  # nothing recorded was probed again
    assert snapshot(repo) == before
    assert not any((tmp_path / "cache").rglob("slot-*"))  # private clones gone after the run


def test_ctrl_c_kills_the_probe_group_and_cleans_up(tmp_path):
    repo, shas = setup(tmp_path)
    before = snapshot(repo)
    proc = start(tmp_path, repo, shas, "30")
    first = probe_pid(tmp_path)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130
    assert "rerun the same command to resume" in err.decode()
    wait_for(lambda: not alive(first))
    state = bisect_status(str(repo), str(tmp_path / "cache"))
    assert state["session"] == "interrupted" and "rerun the same" in state["text"]
    assert snapshot(repo) == before
    assert not any((tmp_path / "cache").rglob("slot-*"))


def test_sigterm_unwinds_like_ctrl_c_and_exits_143(tmp_path):
    repo, shas = setup(tmp_path)
    proc = start(tmp_path, repo, shas, "30")
    first = probe_pid(tmp_path)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 143, err.decode()
    assert "terminated (SIGTERM); rerun the same command to resume" in err.decode()
    assert "Traceback" not in err.decode()
    wait_for(lambda: not alive(first))
    state = bisect_status(str(repo), str(tmp_path / "cache"))
    assert state["session"] == "interrupted"
    assert not any((tmp_path / "cache").rglob("slot-*"))


def test_kill_9_leaves_no_probe_running(tmp_path):
    # The probe sleeps 120 s and the wait below gives up after 30: a probe that finishes on its
    # own (no guardian) fails this test.
    repo, shas = setup(tmp_path)
    proc = start(tmp_path, repo, shas, "120")
    first = probe_pid(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    wait_for(lambda: not alive(first), timeout=30)


def test_a_resumed_bisect_ends_the_probe_a_killed_run_left_in_its_slot(tmp_path):
    # Both the bisect and its guardian killed (an OOM kill takes both): the orphan keeps running
    # in slot-0, where the resumed bisect would check out and probe beside it.
    repo, shas = setup(tmp_path)
    proc = start(tmp_path, repo, shas, "120")
    orphan = probe_pid(tmp_path)
    os.kill(guardian_of(proc.pid), signal.SIGKILL)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert alive(orphan)
    (tmp_path / "probe.pid").unlink()

    resumed = start(tmp_path, repo, shas, "0")
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err.decode()
    assert f"first bad commit: {shas[21]}" in out.decode()
    assert f"slot-0: ended the probe (pid {orphan}, commit" in err.decode()
    assert not alive(orphan)
