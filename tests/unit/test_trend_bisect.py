"""The bisect a regression hands over: range, probe path, direction, the command it reruns."""

from __future__ import annotations

import subprocess
import sys

import pytest
from _trend_data import report_dict

from regress.cli.accept import accept
from regress.cli.bisect import bisect
from regress.errors import UsageError
from regress.trend import bisect as trend_bisect
from regress.trend.bisect import accept_command, plan_bisect, run_plan
from regress.trend.series import Metric


def _parses(argv):
    assert argv[:3] == ["regress", "bisect", "run"]
    bisect.commands["run"].make_context("run", argv[3:])
    return argv


def test_the_accept_command_reproduces_the_reports_configuration():
    data = report_dict({1: 3.7, 8: 3.2})
    data["engine"]["defects"] = ["stale_req_idx"]
    argv = accept_command(data)
    ctx = accept.make_context("accept", argv[2:])
    assert ctx.params["engine"] == "reference"
    assert ctx.params["batch_sizes"] == [1, 8]
    assert ctx.params["max_draft_len"] == data["config"]["max_draft_len"]
    assert ctx.params["max_new_tokens"] == data["config"]["max_new_tokens"]
    assert ctx.params["num_prompts"] == data["config"]["num_prompts"]
    assert ctx.params["defects"] == ("stale_req_idx",)
    assert ctx.params["json_out"] == "-"


def test_a_trtllm_report_names_its_model():
    data = report_dict({1: 3.7, 8: 3.2})
    data["engine"] = {"name": "trtllm", "device": "cuda"}
    data["model"] = "/models/glm-5.2"
    ctx = accept.make_context("accept", accept_command(data)[2:])
    assert ctx.params["model"] == "/models/glm-5.2"


def test_an_engine_accept_cannot_run_needs_a_recorded_command():
    with pytest.raises(UsageError, match="--command"):
        accept_command(report_dict({1: 3.7}, engine="synthetic"))


def test_a_plan_bisects_the_range_with_the_index_path():
    data = report_dict({1: 3.7, 2: 3.6, 8: 3.2})
    plan = plan_bisect(Metric.parse("runs[batch=8].acceptance_length"), "aaa", "bbb", data, None)
    argv = _parses(plan.argv)
    assert argv[argv.index("--good") + 1] == "aaa"
    assert argv[argv.index("--bad") + 1] == "bbb"
    assert argv[argv.index("--metric") + 1] == "runs[2].acceptance_length"
    assert "--higher-is-better" in argv and "--threshold" not in argv


def test_a_ratio_is_bisected_through_its_numerator():
    data = report_dict({1: 3.7, 8: 3.2})
    ratio = Metric.parse("runs[batch=8].acceptance_length / runs[batch=1].acceptance_length")
    plan = plan_bisect(ratio, "a", "b", data, None, levels=(1.0, 0.86))
    assert plan.probe_path == "runs[1].acceptance_length"
    assert plan.threshold is None  # the ratio's levels are not the numerator's


def test_a_threshold_is_the_midpoint_of_the_two_levels():
    data = report_dict({1: 3.7, 8: 3.2})
    metric = Metric.parse("runs[batch=8].acceptance_length")
    plan = plan_bisect(metric, "a", "b", data, ["python", "n.py"], levels=(3.7, 3.2))
    argv = _parses(plan.argv)
    assert float(argv[argv.index("--threshold") + 1]) == pytest.approx(3.45)
    assert argv[argv.index("--") + 1 :] == ["python", "n.py"]


def test_lower_is_better_metrics_bisect_that_way():
    data = report_dict({1: 3.7, 8: 3.2})
    data["runs"][1]["wall_seconds"] = 9.0
    plan = plan_bisect(Metric.parse("runs[batch=8].wall_seconds"), "a", "b", data, None)
    assert "--lower-is-better" in _parses(plan.argv)


def test_run_plan_starts_this_interpreters_regress(monkeypatch):
    seen = []

    def fake(argv, **kwargs):
        seen.append((argv, kwargs))
        return subprocess.CompletedProcess(argv, 3)

    monkeypatch.setattr(trend_bisect, "_spawn", fake)
    plan = plan_bisect(
        Metric.parse("runs[batch=8].acceptance_length"),
        "a",
        "b",
        report_dict({1: 3.7, 8: 3.2}),
        None,
        ["--repo", "/r"],
    )
    assert run_plan(plan, capture_output=True).returncode == 3
    ((argv, kwargs),) = seen
    assert argv[:3] == [sys.executable, "-m", "regress"]
    assert argv[3:] == plan.argv[1:]
    assert kwargs == {"capture_output": True}
