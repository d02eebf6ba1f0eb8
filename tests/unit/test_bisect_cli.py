"""`regress bisect` through click's CliRunner, and the result renderings it writes."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading

import pytest
from click.testing import CliRunner
from junitparser import Failure, JUnitXml

from regress.bisect.git import CommitInfo
from regress.bisect.report import BisectResult, Step, to_junit, to_markdown
from regress.bisect.synthetic import regression_history
from regress.cli import cli

PROBE = 'grep -q "BUG = True" app.py && exit 1\nexit 0\n'


@pytest.fixture
def setup(tmp_path):
    shas = regression_history(tmp_path / "repo", 10, 6)
    (tmp_path / "probe.sh").write_text(PROBE)
    return tmp_path, shas


def invoke(tmp, *args):
    base = ["--repo", str(tmp / "repo"), "--cache-dir", str(tmp / "cache")]
    command = list(args)
    if command and command[0] == "run":
        command = ["run", *base, *command[1:]]
    elif command:
        command = [command[0], *base, *command[1:]]
    return CliRunner().invoke(cli, ["bisect", *command])


def test_help_documents_the_shape_and_exit_codes():
    out = CliRunner().invoke(cli, ["bisect", "--help"]).output
    for sub in ("run", "log", "status", "reset"):
        assert sub in out
    output = CliRunner().invoke(cli, ["bisect", "run", "--help"]).output
    # short (details in the README) and wrapped for a terminal (issue 31: 102 lines, 177 wide)
    assert len(output.splitlines()) < 100 and max(map(len, output.splitlines())) < 100
    run_help = " ".join(output.split())
    for text in (
        "-- ./probe.sh",
        "DG_HOST_ASSERT",
        "0 culprit found; 3 inconclusive",
        "--find-fix",
        "--launcher",
        "REGRESS_COMMIT",
        "--jobs",
        "--gpus",
        "--overlay",
        "--recipe",
    ):
        assert text in run_help


def test_run_writes_json_junit_markdown(setup):
    tmp, shas = setup
    result = invoke(
        tmp,
        "run",
        "--good",
        shas[0],
        "--bad",
        shas[10],
        "--json",
        "-",
        "--junit",
        str(tmp / "r.xml"),
        "--markdown",
        str(tmp / "r.md"),
        "--",
        "sh",
        str(tmp / "probe.sh"),
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == 1 and doc["status"] == "found" and doc["kind"] == "culprit"
    assert doc["culprit"]["sha"] == shas[6] and doc["confidence"] == 1.0
    assert doc["probes"] == sum(len(s["verdicts"]) for s in doc["steps"])
    assert {"commit", "verdicts", "values", "reasons", "judged"} <= set(doc["steps"][0])
    assert f"first bad commit: {shas[6]}" in result.stderr
    assert "candidates" in result.stderr  # live progress
    suite = next(iter(JUnitXml.fromfile(str(tmp / "r.xml"))))
    cases = {c.name.split()[0]: c for c in suite}
    assert len(cases) == len(doc["steps"]) + 1  # and the outcome
    assert cases[shas[6][:12]].name.startswith(f"{shas[6][:12]} [bad]")
    # a bisect that found its culprit (exit 0) is green: no failure anywhere (issue 31)
    assert suite.failures == 0 and suite.errors == 0
    assert not any(isinstance(r, Failure) for c in suite for r in c.result)
    assert "`" + shas[6][:12] + "`" in (tmp / "r.md").read_text()


def test_log_status_reset(setup):
    tmp, shas = setup
    invoke(
        tmp, "run", "--good", shas[0], "--bad", shas[10], "-q", "--", "sh", str(tmp / "probe.sh")
    )
    log = invoke(tmp, "log")
    assert log.exit_code == 0 and shas[0][:12] in log.output and "exit 0" in log.output
    as_json = json.loads(invoke(tmp, "log", "--json", "-").output)
    assert as_json[0]["commit"] == shas[0]
    status = invoke(tmp, "status")
    assert "found" in status.output and shas[6] in status.output
    assert json.loads(invoke(tmp, "status", "--json", "-").output)["session"] == "found"
    assert "removed" in invoke(tmp, "reset").output
    again = invoke(tmp, "status")
    assert again.exit_code == 2 and "no bisect has run" in again.output


def test_inconclusive_exits_3(setup):
    tmp, shas = setup
    result = invoke(
        tmp,
        "run",
        "--good",
        shas[0],
        "--bad",
        shas[10],
        "--max-probes",
        "3",
        "-q",
        "--",
        "sh",
        str(tmp / "probe.sh"),
    )
    assert result.exit_code == 3
    assert "no culprit found: inconclusive" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--good", "nope"], "unknown revision 'nope' for --good"),
        (["--good", "HEAD", "--bad", "HEAD~3"], "add --find-fix"),
        (["--good", "HEAD~3", "--metric-runs", "1,2"], "three integers"),
        (["--good", "HEAD~3", "--probe", "metric"], "exactly one of --metric"),
        (["--good", "HEAD~3", "--gpus", "0", "--jobs", "2"], "one per job"),
        (["--good", "HEAD~3", "--confidence", "1.5"], "--confidence must be between"),
        (["--good", "HEAD~3", "--launcher", '"unclosed'], "--launcher '\"unclosed': No closing"),
        (["--good", "HEAD~3", "--json", "{tmp}"], "--json {tmp}: is a folder"),
        (["--good", "HEAD~3", "--junit", "{tmp}/probe.sh/r.xml"], "is not a folder"),
        (["--good", "HEAD~3", "--markdown", ""], "--markdown: empty path"),
    ],
)
def test_bad_input_exits_2(setup, args, message):
    tmp, _ = setup
    args = [a.format(tmp=tmp) for a in args]
    result = invoke(tmp, "run", *args, "--", "sh", str(tmp / "probe.sh"))
    assert result.exit_code == 2, result.output
    assert message.format(tmp=tmp) in result.output
    assert len(result.stderr.strip().splitlines()) == 1  # one line, no traceback
    assert not (tmp / "cache").exists()
    assert sorted(p.name for p in tmp.iterdir()) == ["probe.sh", "repo"]


@pytest.mark.parametrize("command", ["log", "status"])
def test_log_and_status_check_their_output_path_first(setup, command):
    tmp, shas = setup
    invoke(
        tmp, "run", "--good", shas[0], "--bad", shas[10], "-q", "--", "sh", str(tmp / "probe.sh")
    )
    result = invoke(tmp, command, "--json", str(tmp / "probe.sh" / "out.json"))
    assert result.exit_code == 2 and "is not a folder" in result.stderr
    written = invoke(tmp, command, "--json", str(tmp / "out" / f"{command}.json"))
    assert written.exit_code == 0, written.output
    assert json.loads((tmp / "out" / f"{command}.json").read_text())


def test_ctrl_c_exits_130_and_says_how_to_resume(setup, monkeypatch):
    tmp, shas = setup

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("regress.bisect.session.run_bisect", interrupted)
    result = invoke(tmp, "run", "--good", shas[0], "-q", "--", "sh", str(tmp / "probe.sh"))
    assert result.exit_code == 130
    assert "rerun the same command to resume" in result.stderr


def test_missing_command_is_a_click_usage_error(setup):
    tmp, shas = setup
    assert invoke(tmp, "run", "--good", shas[0]).exit_code == 2


def test_gpus_set_jobs_and_find_fix(tmp_path):
    shas = regression_history(tmp_path / "repo", 12, 2, fix=8)
    (tmp_path / "probe.sh").write_text(PROBE)
    result = invoke(
        tmp_path,
        "run",
        "--good",
        shas[12],
        "--bad",
        shas[3],
        "--find-fix",
        "--gpus",
        "0,1",
        "--json",
        str(tmp_path / "out.json"),
        "-q",
        "--",
        "sh",
        str(tmp_path / "probe.sh"),
    )
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["culprit"]["sha"] == shas[8] and doc["kind"] == "fix"
    assert "first fixed commit" in result.output


def sample_result(**kw) -> BisectResult:
    info = CommitInfo("c" * 40, "refactor | the map", "A <a@b>", "2026-01-01", " a.py | 2 +-")
    steps = [
        Step("a" * 40, 0, "good one", ["good"], [], ["exit 0"], ["good"]),
        Step("b" * 40, 3, "skipped", ["skip"], [], ["exit 125"], ["skip"]),
        Step("c" * 40, 5, "refactor | the map", ["bad", "bad"], [], ["exit 1"] * 2, ["bad", "bad"]),
    ]
    fields = dict(
        status="found",
        good="a" * 40,
        bad="d" * 40,
        commits=9,
        culprit=info,
        confidence=0.995,
        probes=4,
        cached=1,
        steps=steps,
        strategy="flaky",
    )
    fields.update(kw)
    return BisectResult(**fields)


def test_renderings_of_a_result():
    result = sample_result(warnings=["touches cpp/"], rates={"false_fail": 0.1})
    md = to_markdown(result)
    assert "**Culprit:** `cccccccccccc` refactor | the map" in md
    assert "refactor \\| the map" in md and "> warning: touches cpp/" in md
    xml = to_junit(result)
    suite = next(iter(JUnitXml.fromstring(xml)))
    kinds = [type(c.result[0]).__name__ if c.result else "passed" for c in suite]
    assert kinds == ["passed", "Skipped", "passed", "passed"]  # good, untestable, bad, outcome
    assert "[bad]" in list(suite)[2].name and list(suite)[3].name == "outcome"
    unanswered = sample_result(status="ambiguous", culprit=None, candidates=[result.culprit])
    outcome = list(next(iter(JUnitXml.fromstring(to_junit(unanswered)))))[-1]
    assert outcome.name == "outcome" and isinstance(outcome.result[0], Failure)
    text = result.summary()
    assert (
        "confidence 0.995" in text
        and "false-fail rate 0.100" in text
        and "warning: touches" in text
    )
    assert result.exit_code == 0
    assert (
        sample_result(status="ambiguous", culprit=None, candidates=[result.culprit]).exit_code == 3
    )
    amb = sample_result(status="ambiguous", culprit=None, candidates=[result.culprit]).summary()
    assert "could be any of 1 commits" in amb
    assert "untestable commits" in to_markdown(
        sample_result(status="ambiguous", culprit=None, candidates=[result.culprit])
    )


def test_an_endpoint_failure_is_one_line_and_the_log_says_what_will_rerun(setup):
    tmp, shas = setup
    result = invoke(tmp, "run", "--good", shas[0], "--bad", shas[10], "-q", "--", "./probe.sh")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "not committed" not in line  # ./probe.sh is not in the checkout either
    assert "could not start" in line and "(output: " in line
    log = invoke(tmp, "log")
    assert log.output.count("(the probe did not run: a rerun tries again)") == 4


@contextlib.contextmanager
def gated_bisect(tmp, shas):
    """A `regress bisect run` subprocess whose probe waits until ``gate`` exists: yields the
    process (stderr a text pipe) and the gate.

    Against a bisect that says nothing until a probe ends, readline would wait forever: the gate
    opens by itself after a while, so that such a bisect fails the assertion instead of hanging.
    On the way out the gate is opened and the bisect waited for (killed if it does not end).
    """
    gate = tmp / "gate"
    probe = tmp / "gated.sh"
    probe.write_text(f'while [ ! -e "{gate}" ]; do sleep 0.05; done\n' + PROBE)
    args = ["bisect", "run", "--repo", str(tmp / "repo"), "--cache-dir", str(tmp / "cache")]
    args += ["--good", shas[0], "--bad", shas[-1], "--", "sh", str(probe)]
    proc = subprocess.Popen(
        [sys.executable, "-c", "from regress.cli import main; main()", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    breaker = threading.Timer(60, gate.touch)  # never hang, whatever regress does
    breaker.start()
    try:
        yield proc, gate
    finally:
        breaker.cancel()
        gate.touch()
        try:
            proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_run_says_which_probe_started_on_which_commit_before_it_ends(setup):
    """Issue 31: the first line came when both endpoint probes had finished (20 minutes of
    nothing with a 10-minute probe). The probe here waits for a file that the test creates only
    after reading the "started" line, so the order is proven without timing anything."""
    tmp, shas = setup
    with gated_bisect(tmp, shas) as (proc, gate):
        first = proc.stderr.readline()
        assert first == f"regress bisect: probe started on {shas[0][:12]} (endpoint --good)\n"
        assert proc.poll() is None  # the probe is still waiting: the line came first
        gate.touch()
        rest = proc.stderr.read()
        assert proc.wait(timeout=120) == 0, rest
    assert f"probe started on {shas[-1][:12]} (endpoint --bad)" in rest
    assert "(commit " in rest


def test_status_tells_a_running_bisect_from_an_interrupted_one(setup):
    """Issue 31: during a running bisect, status said "rerun the same command to continue"."""
    tmp, shas = setup
    with gated_bisect(tmp, shas) as (proc, _gate):
        assert "probe started on" in proc.stderr.readline()
        status = invoke(tmp, "status")
        assert status.exit_code == 0, status.output
        assert "running now" in status.output and "rerun" not in status.output
