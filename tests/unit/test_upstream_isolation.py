"""Only contract violations are verdicts: trees that cannot load, exit or hang are gaps (exit 3).

The checks here run through ``regress check`` itself, so the child process is exercised: an
``os._exit(0)`` at import would end an in-process check with 0 and no report.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _processes import alive, wait_for
from _upstream_trees import (
    IMPORT_BREAKAGES,
    LAYOUT,
    RUN_BREAKAGES,
    breakage_line,
    broken_files,
    build_tree,
    tree_files,
    write_files,
)
from click.testing import CliRunner

from regress.check.check import run_check
from regress.check.child import MODULE as CHILD_MODULE
from regress.check.report import CheckReport
from regress.cli import cli
from regress.errors import TERMINATED

DSA_B = f"tensorrt_llm/{LAYOUT['B'][1]}"
#: What each unloadable tree's cause must say, besides the upstream file and line.
CAUSES = {
    "syntax_error": "SyntaxError",
    "nul_bytes": "null bytes",
    "raise_at_import": "loading the tree raised RuntimeError: needs the compiled extension",
    "sys_exit": "upstream called sys.exit(0)",
    "os_exit": "upstream called os._exit(0)",
    "hang": "did not finish within 2 s",
    "segfault": "crashed (Fatal Python error: Segmentation fault)",
}


def _check(*args: str):
    return CliRunner().invoke(cli, ["check", *args])


def _regress(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``regress`` in its own process: a check that ran the tree in-process could end pytest."""
    argv = [sys.executable, "-m", "regress", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


#: Breakages that would end or hang the test process itself if ``regress check`` ever ran the
#: tree in its own process: their checks run ``regress`` as a process. The others (an exception,
#: ``sys.exit``) would only change the exit code, so their checks run in-process (CliRunner),
#: with the check's child process all the same.
ENDS_THE_PROCESS = frozenset({"os_exit", "hang", "segfault"})


@pytest.mark.parametrize("how", IMPORT_BREAKAGES)
def test_a_tree_that_cannot_load_is_a_gap_naming_its_file_and_line(tmp_path, how):
    """Pre-fix trees: an in-process check exited 1 (or 0 with no report, or never) on these."""
    tree = write_files(tmp_path / "tree", broken_files(how, "B", fix="pre"))
    out = tmp_path / "report.json"
    args = ("check", "--trtllm-src", str(tree), "--json", str(out), "--timeout", "2")
    if how in ENDS_THE_PROCESS:
        done = _regress(*args)
        exit_code, stderr = done.returncode, done.stderr
    else:
        result = CliRunner().invoke(cli, list(args))
        exit_code, stderr = result.exit_code, result.stderr
    assert exit_code == 3, stderr
    line = f":{breakage_line(how, 'B', 'pre')}" if how != "nul_bytes" else ""  # no line for NUL
    assert f"sparse/dsa/metadata.py{line}" in stderr
    assert CAUSES[how] in stderr
    doc = json.loads(out.read_text())  # a report even when the tree ended the process
    assert doc["status"] == "gap" and doc["exit_code"] == 3 and doc["era"] == "B"


#: What names the fake (or the sandbox piece) in each gap's cause.
FAKES = {
    "fake_raises": "regress/sandbox/fakes.py:",
    "fake_signature": "the fake FakeKVCacheManager.get_block_ids_per_seq() does not take",
    "fake_attribute": "the fake FakeKVCacheManager has no attribute 'pool_layout_v2'",
    "shell_name_call": "a call of `tensorrt_llm._torch.warmup_hook`",
    "shell_attribute": "the package shell tensorrt_llm._torch (its __init__ never ran)",
}


@pytest.mark.parametrize("how", FAKES)
def test_an_exception_inside_a_fake_is_a_gap_with_the_upstream_call_site(tmp_path, how):
    """Each was exit 1 ("upstream raised ..."): the innermost frame or the message is the fake's."""
    tree = write_files(tmp_path, broken_files(how, "B", fix="pre"))
    report = run_check(tree, scenarios=["req_idx_map"])
    assert report.exit_code == 3, report.lines()
    assert f"sparse/dsa/metadata.py:{breakage_line(how, 'B', 'pre')}" in report.error
    assert FAKES[how] in report.error
    assert all(r.status == "gap" for r in report.results)


def test_an_exception_from_upstream_code_on_real_inputs_is_a_verdict(tmp_path):
    tree = write_files(tmp_path, broken_files("upstream_raises", "B", fix="post"))
    result = _check("--trtllm-src", str(tree), "--scenario", "req_idx_map")
    assert result.exit_code == 1, result.output
    site = f"sparse/dsa/metadata.py:{breakage_line('upstream_raises', 'B')} in prepare()"
    assert "upstream raised IndexError: index 65 is out of bounds" in result.output
    assert site in result.output


def test_a_contract_violation_stays_a_verdict_when_another_scenario_is_a_gap(tmp_path):
    files = broken_files("fake_attribute", "B", fix="pre")
    files[DSA_B] = files[DSA_B].replace(
        RUN_BREAKAGES["fake_attribute"],
        "        if self.num_seqs == 32:\n    " + RUN_BREAKAGES["fake_attribute"],
    )  # only the 32-request announcement reaches the fake
    report = run_check(
        write_files(tmp_path, files), scenarios=["req_idx_map", "shape_announcement"]
    )
    statuses = {r.name: r.status for r in report.results}
    assert statuses["shape_announcement"] == "gap"
    assert statuses["req_idx_map/uniform_5x4"] == "fail"
    assert report.exit_code == 1


#: A tree that writes a passing report where the child will write its own, then ends the process:
#: it knows the work folder (the child's argv) but not the parent's token.
FORGE = """import json, os, sys
from pathlib import Path

work = Path(sys.argv[-1])
doc = {"source": "forged", "status": "pass", "exit_code": 0, "scenarios": []}
(work / "report.json").write_text(json.dumps(doc))
os._exit(0)
"""


def test_a_report_without_the_parents_token_is_not_taken_for_the_childs(tmp_path):
    files = tree_files("B", "pre")
    files[DSA_B] += "\n" + FORGE
    done = _regress("check", "--trtllm-src", str(write_files(tmp_path, files)), "--json", "-")
    assert done.returncode == 3, done.stdout
    doc = json.loads(done.stdout)
    assert doc["status"] == "gap" and doc["source"] != "forged"
    assert "upstream called os._exit(0)" in doc["error"]


def test_the_child_report_round_trips(tmp_path):
    report = run_check(build_tree(tmp_path, "C", "pre"), scenarios=["req_idx_map"])
    doc = report.to_json()
    assert CheckReport.from_json(json.loads(json.dumps(doc))).to_json() == doc


def _children(pid: int, running: str = "") -> list[int]:
    """The children of ``pid`` whose command line contains ``running``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) != pid:
                continue
            try:
                argv = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if running in argv:
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the child")
def test_sigterm_takes_the_hanging_child_down_with_regress_check(tmp_path):
    tree = write_files(tmp_path, broken_files("hang", "B"))
    argv = [sys.executable, "-m", "regress", "check", "--trtllm-src", str(tree), "--timeout", "120"]
    proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        # the check's child, not the guardian regress also starts
        wait_for(lambda: bool(_children(proc.pid, CHILD_MODULE)))
        (child,) = _children(proc.pid, CHILD_MODULE)
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == TERMINATED  # handled as Ctrl-C is: cleaned up, exit 143
        wait_for(lambda: not alive(child))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the child")
def test_kill_9_of_regress_check_ends_the_hanging_child_and_its_work_folder(tmp_path):
    """The child is registered with the guardian as probes are: nothing it runs outlives regress.
    The tree hangs for 120 s and the wait gives up after 30, so only the guardian can pass this."""
    started = tmp_path / "hanging"  # the tree's code is running: the child is past its start
    files = tree_files("B", "post")
    files[DSA_B] += f"\nopen({str(started)!r}, 'w').close()\n" + IMPORT_BREAKAGES["hang"]
    tree = write_files(tmp_path / "tree", files)
    argv = [sys.executable, "-m", "regress", "check", "--trtllm-src", str(tree), "--timeout", "120"]
    proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(started.exists)
        (child,) = _children(proc.pid, CHILD_MODULE)
        work = Path(Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[-2].decode())
        assert (work / "request.json").is_file()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        wait_for(lambda: not alive(child), timeout=30)
        wait_for(lambda: not work.exists(), timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_bisect_steps_around_an_unloadable_commit_and_names_the_real_culprit(tmp_path):
    """Commit 6 adds a syntax error (fixed in 7); 8 drops the map rebuild. In-process, 6 exited 1
    ("bad") and the bisect named it; as a gap it is a skip, and the search finds 8."""
    from regress.bisect.synthetic import write_history

    commits, subjects = [], []
    for i in range(12):
        fix = "pre" if i >= 8 else "post"
        files = broken_files("syntax_error", "B", fix) if i == 6 else tree_files("B", fix)
        files["notes.txt"] = f"{i}\n"
        commits.append(files)
        subjects.append("drop the map rebuild" if i == 8 else f"change {i}")
    shas = write_history(tmp_path / "trtllm", commits, subjects=subjects)
    done = CliRunner().invoke(cli, [
        "bisect", "run", "--repo", str(tmp_path / "trtllm"),
        "--good", shas[0], "--bad", shas[-1], "--recipe", "trtllm-source",
        "--cache-dir", str(tmp_path / "cache"), "--json", "-", "-q",
    ])  # fmt: skip
    assert done.exit_code == 0, done.stderr
    result = json.loads(done.stdout)
    steps = {s["position"]: s["judged"] for s in result["steps"]}
    assert steps.get(6) == ["skip"], steps  # the search did reach the unloadable commit
    assert result["culprit"]["sha"] == shas[8]


@pytest.mark.parametrize("how", ["os_exit", "hang"])
def test_the_bisect_probe_skips_a_commit_that_exits_or_hangs_at_import(tmp_path, how):
    """In-process, ``os._exit(0)`` made the probe say "good" (0); the hang never returned."""
    tree = write_files(tmp_path, broken_files(how, "B", fix="pre"))
    argv = [sys.executable, "-m", "regress.cli.child", "trtllm-source-probe", str(tree)]
    argv += ["--timeout", "2"]
    done = subprocess.run([*argv, "--scenario", "req_idx_map"], capture_output=True, timeout=300)
    assert done.returncode == 125, done.stderr
