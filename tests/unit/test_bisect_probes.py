"""Probe classification: exit codes, assert signatures, metric extraction, pytest JUnit files."""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import pytest

from regress.bisect.causes import CAUSE, DID_NOT_RUN, Cause
from regress.bisect.config import BisectConfig
from regress.bisect.probes import (
    ExitCodeProbe,
    Finished,
    MetricProbe,
    PytestProbe,
    find_json,
    json_path,
    junit_counts,
)
from regress.bisect.registry import make_probe
from regress.bisect.store import replayable
from regress.bisect.verdicts import Outcome, Verdict
from regress.errors import UsageError
from regress.trtllm.probes import DEEPGEMM_SIGNATURE, AssertProbe, deepgemm_assert_probe

DATA = Path(__file__).parent.parent / "data" / "bisect"
G, B, S = Verdict.GOOD, Verdict.BAD, Verdict.SKIP


@pytest.mark.parametrize(
    ("code", "crash_is_bad", "verdict"),
    [
        (0, False, G),
        (1, False, B),
        (126, False, S),  # the shell could not run it: says nothing about the commit
        (127, False, S),
        (124, False, B),
        (125, False, S),
        (128, False, S),
        (139, False, S),
        (-11, False, S),
        (139, True, B),
        (-6, True, B),
        (125, True, S),
    ],
)
def test_exit_code_contract(code, crash_is_bad, verdict):
    assert ExitCodeProbe(crash_is_bad=crash_is_bad).classify(Finished(code)).verdict is verdict


@pytest.mark.parametrize(
    ("run", "cause"),
    [
        (Finished(None, error="[Errno 2] No such file", errno=errno.ENOENT), Cause.NOT_FOUND),
        (
            Finished(None, error="[Errno 13] Permission denied", errno=errno.EACCES),
            Cause.NOT_EXECUTABLE,
        ),
        (
            Finished(None, error="[Errno 8] Exec format error", errno=errno.ENOEXEC),
            Cause.NOT_EXECUTABLE,
        ),
        (Finished(None, error="interrupted"), Cause.NOT_STARTED),
        (Finished(127, stderr="sh: 1: probe: not found"), Cause.NOT_FOUND),
        (Finished(126, stderr="sh: 1: ./probe.sh: Permission denied"), Cause.NOT_EXECUTABLE),
    ],
)
def test_a_probe_that_did_not_run_is_marked_so_for_every_probe(tmp_path, run, cause):
    run.scratch = tmp_path
    kinds = [
        ExitCodeProbe(),
        ExitCodeProbe(crash_is_bad=True),
        deepgemm_assert_probe(),
        PytestProbe(),
    ]
    for probe in [*kinds, MetricProbe(path="v")]:
        out = probe.classify(run)
        assert out.verdict is S, probe
        assert out.details[DID_NOT_RUN] and out.details[CAUSE] == cause, probe
        assert not replayable(out)


def test_runs_that_judged_the_commit_are_replayable(tmp_path):
    assert replayable(ExitCodeProbe().classify(Finished(1)))
    assert replayable(ExitCodeProbe().classify(Finished(125)))
    assert replayable(ExitCodeProbe().classify(Finished(-9, timed_out=True)))  # keyed by --timeout
    # stored before the marker existed
    assert not replayable(Outcome(S, "could not start: [Errno 2] No such file"))


def test_exit_code_timeout_and_not_started_are_skips():
    probe = ExitCodeProbe(crash_is_bad=True)
    assert probe.classify(Finished(-15, timed_out=True)).details["timeout"] is True
    assert probe.classify(Finished(-15, timed_out=True)).verdict is S
    out = probe.classify(Finished(None, error="No such file: ./probe.sh"))
    assert out.verdict is S and "could not start" in out.reason


DG = "RuntimeError: DG_HOST_ASSERT(batch_size == __batch_size and next_n == _next_n)"


@pytest.mark.parametrize(
    ("run", "verdict"),
    [
        (Finished(1, stderr=f"Traceback...\n{DG}\n"), B),
        (Finished(-6, stdout="AssertionError: stale map"), B),
        (Finished(0, stdout="all fine"), G),
        (Finished(1, stderr="ImportError: no module named foo"), S),  # unrelated: never blamed
        (Finished(-9, timed_out=True), S),
        (Finished(0, stdout=DG), B),  # the signature wins even on exit 0
    ],
)
def test_assert_probe(run, verdict):
    assert deepgemm_assert_probe().classify(run).verdict is verdict


def test_default_signature_and_bad_regex():
    assert deepgemm_assert_probe().signature == DEEPGEMM_SIGNATURE
    assert "DG_HOST_ASSERT" in deepgemm_assert_probe().classify(Finished(1, stderr=DG)).reason
    with pytest.raises(UsageError, match="not a valid regex"):
        AssertProbe(signature="(")


REPORT = {
    "schema": 1,
    "runs": [
        {"batch_size": 1, "acceptance_length": 3.768},
        {"batch_size": 8, "acceptance_length": 3.283},
    ],
}


def test_json_path():
    assert json_path(REPORT, "runs[1].acceptance_length") == 3.283
    assert json_path(REPORT, "runs.0.batch_size") == 1
    assert json_path(REPORT, "runs[-1].batch_size") == 8
    with pytest.raises(KeyError, match="no"):
        json_path(REPORT, "runs[5].acceptance_length")
    with pytest.raises(KeyError):
        json_path(REPORT, "runs[1]..x")


def test_find_json_in_noisy_output():
    assert find_json(json.dumps(REPORT)) == REPORT
    assert find_json("loading...\nprogress 50%\n" + json.dumps(REPORT) + "\n") == REPORT
    pretty = "header\n" + json.dumps(REPORT, indent=2) + "\ntrailer"
    assert find_json(pretty) == REPORT
    with pytest.raises(ValueError):
        find_json("no json here")


def test_metric_probe_value_and_threshold():
    out = MetricProbe(path="runs[1].acceptance_length").classify(
        Finished(1, stdout=json.dumps(REPORT))
    )
    assert out.verdict is None and out.value == 3.283  # exit 1 (a regression) still measures
    thr = MetricProbe(path="runs[1].acceptance_length", threshold=3.5, direction=+1)
    assert thr.classify(Finished(0, stdout=json.dumps(REPORT))).verdict is B
    low = MetricProbe(regex=r"latency=([\d.]+)ms", threshold=10.0, direction=-1)
    assert (
        low.classify(Finished(0, stderr="latency=7.5ms\nlatency=12.0ms")).verdict is B
    )  # last wins
    assert low.classify(Finished(0, stderr="latency=7.5ms")).verdict is G


def test_metric_probe_failures_are_skips():
    probe = MetricProbe(path="runs[1].acceptance_length")
    assert probe.classify(Finished(1, stdout="Traceback")).verdict is S
    assert probe.classify(Finished(0, stdout='{"runs": []}')).verdict is S
    assert (
        probe.classify(Finished(0, stdout='{"runs": [0, {"acceptance_length": "nan"}]}')).verdict
        is S
    )
    assert probe.classify(Finished(None, error="gone")).verdict is S


def test_metric_probe_options_are_validated():
    with pytest.raises(UsageError, match="exactly one"):
        MetricProbe()
    with pytest.raises(UsageError, match="exactly one"):
        MetricProbe(path="a", regex="b")
    with pytest.raises(UsageError, match="--higher-is-better"):
        MetricProbe(path="a", threshold=1.0)
    with pytest.raises(UsageError, match="not a valid regex"):
        MetricProbe(regex="(")


@pytest.mark.parametrize(
    ("sample", "verdict", "counts"),
    [
        ("pass", G, {"passed": 2, "failed": 0, "error": 0, "skipped": 0}),
        ("fail", B, {"passed": 1, "failed": 1, "error": 0, "skipped": 0}),
        ("error", S, {"passed": 0, "failed": 0, "error": 1, "skipped": 0}),
        ("skip", S, {"passed": 0, "failed": 0, "error": 0, "skipped": 1}),
        ("empty", S, {"passed": 0, "failed": 0, "error": 0, "skipped": 0}),
    ],
)
def test_pytest_probe_classifies_real_junit_files(tmp_path, sample, verdict, counts):
    shutil.copy(DATA / f"junit_{sample}.xml", tmp_path / "junit.xml")
    assert junit_counts(tmp_path / "junit.xml") == counts
    out = PytestProbe().classify(Finished(1, scratch=tmp_path))
    assert out.verdict is verdict
    assert out.details["junit"] == counts


def test_pytest_probe_injects_junit_and_skips_without_report(tmp_path):
    probe = PytestProbe()
    assert probe.argv(["pytest", "-x", "t.py"], tmp_path) == [
        "pytest",
        "-x",
        "t.py",
        f"--junitxml={tmp_path / 'junit.xml'}",
    ]
    assert probe.classify(Finished(4, scratch=tmp_path)).verdict is S
    (tmp_path / "junit.xml").write_text("<testsuites><testsu")  # torn
    assert probe.classify(Finished(2, scratch=tmp_path)).verdict is S


def test_make_probe_and_configs():
    config = BisectConfig(good="a", bad="b", command=["x"])
    assert make_probe("exit-code", config).config() == {"kind": "exit-code", "crash_is_bad": False}
    assert make_probe("pytest", config).kind == "pytest"
    with pytest.raises(UsageError, match="unknown probe"):
        make_probe("nope", config)


def test_outcome_round_trips_through_json():
    for o in (
        Outcome(B, "exit 1", exit_code=1, seconds=1.5, details={"x": 1}),
        Outcome(None, "measured 3.2", value=3.2),
    ):
        assert Outcome.from_json(json.loads(json.dumps(o.to_json()))) == o
