"""``regress trend add/check/plot`` through CliRunner: exit codes, outputs, the bisect it plans."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest
from _trend_data import LEVEL, STEP, night, report, sha, step_series
from click.testing import CliRunner

from regress.cli import cli
from regress.trend import bisect as trend_bisect


@pytest.fixture
def runner():
    return CliRunner()


def _fill(store, batch8, *, batch1=None, skip=()):
    from regress.trend.store import TrendStore

    s = TrendStore(store)
    for i, al8 in enumerate(batch8):
        if i in skip:
            continue
        al1 = LEVEL if batch1 is None else batch1[i]
        s.add(report({1: al1, 8: al8}), commit=sha(i), date=night(i))
    return s


def _invoke(runner, *args):
    return runner.invoke(cli, list(args), catch_exceptions=False)


def test_add_takes_a_report_and_refuses_anything_else(runner, tmp_path):
    good = tmp_path / "r.json"
    good.write_text(report({1: 3.7, 8: 3.6}).to_json())
    store = str(tmp_path / "h")
    res = _invoke(runner, "trend", "add", str(good), "--commit", sha(1), "--store", store)
    assert res.exit_code == 0, res.output
    bad = tmp_path / "junit.json"
    bad.write_text(json.dumps({"testsuites": []}))
    res = _invoke(runner, "trend", "add", str(bad), "--commit", sha(2), "--store", store)
    assert res.exit_code == 2
    assert "not an acceptance report" in res.output
    res = _invoke(runner, "trend", "add", str(tmp_path / "nope.json"), "--commit", "x")
    assert res.exit_code == 2


def test_check_exits_1_on_a_regression_and_names_the_commits(runner, tmp_path):
    _fill(tmp_path, step_series(40, at=(25,), sizes=(-STEP,), seed=1), skip=(10, 17))
    res = _invoke(runner, "trend", "check", "--store", str(tmp_path), "--json", "-")
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert doc["regressed"] is True
    alarms = [f for f in doc["findings"] if f["alarm"]]
    assert {f["first_bad"]["commit"] for f in alarms} == {sha(25)}
    assert {f["last_good"]["commit"] for f in alarms} == {sha(24)}
    assert "runs[batch=8].acceptance_length" in {f["metric"] for f in alarms}
    assert "runs[batch=1].acceptance_length" not in {f["metric"] for f in alarms}


def test_check_exits_0_on_quiet_nights_and_on_an_improvement(runner, tmp_path):
    _fill(tmp_path / "quiet", step_series(40, seed=2))
    assert _invoke(runner, "trend", "check", "--store", str(tmp_path / "quiet")).exit_code == 0
    _fill(tmp_path / "up", step_series(40, at=(20,), sizes=(STEP,), seed=3))
    res = _invoke(runner, "trend", "check", "--store", str(tmp_path / "up"))
    assert res.exit_code == 0
    assert "improvement" in res.output


def test_since_keeps_an_old_regression_from_alarming_and_counts_its_own_night(runner, tmp_path):
    _fill(tmp_path, step_series(40, at=(15,), sizes=(-STEP,), seed=4))
    args = [
        "trend",
        "check",
        "--store",
        str(tmp_path),
        "--metric",
        "runs[batch=8].acceptance_length",
    ]
    assert _invoke(runner, *args).exit_code == 1
    assert _invoke(runner, *args, "--since", night(30)).exit_code == 0
    # On or after: a regression first seen on the --since night itself alarms (mutation guarded:
    # `first_bad["date"] >= since` as `>` in trend/check.py let it pass silently).
    assert _invoke(runner, *args, "--since", night(15)).exit_code == 1  # the first bad night
    assert _invoke(runner, *args, "--since", night(16)).exit_code == 0  # the night after


def test_a_since_that_is_no_date_names_since(runner, tmp_path):
    _fill(tmp_path, step_series(10, seed=5))
    res = runner.invoke(cli, ["trend", "check", "--store", str(tmp_path), "--since", "yesterday"])
    assert res.exit_code == 2
    assert res.stderr.strip() == (
        "regress: error: --since 'yesterday' is not a date; give YYYY-MM-DD or an ISO-8601 time"
    )


def test_bad_input_exits_2(runner, tmp_path):
    empty = str(tmp_path / "none")
    assert _invoke(runner, "trend", "check", "--store", empty).exit_code == 2
    _fill(tmp_path / "h", step_series(10, seed=5))
    store = str(tmp_path / "h")
    res = _invoke(runner, "trend", "check", "--store", store, "--metric", "runs[batch=4].x")
    assert res.exit_code == 2
    res = _invoke(runner, "trend", "check", "--store", store, "--metric", "runs[[")
    assert res.exit_code == 2
    (tmp_path / "dir").mkdir()
    res = _invoke(runner, "trend", "check", "--store", store, "--json", str(tmp_path / "dir"))
    assert res.exit_code == 2 and "is a folder" in res.output
    res = _invoke(runner, "trend", "check", "--store", store, "--json", "-", "--markdown", "-")
    assert res.exit_code == 2
    assert _invoke(runner, "trend", "check", "--store", store, "--run").exit_code == 2


def test_markdown_is_an_issue_comment(runner, tmp_path):
    _fill(tmp_path, step_series(40, at=(25,), sizes=(-STEP,), seed=1))
    out = tmp_path / "c.md"
    res = _invoke(runner, "trend", "check", "--store", str(tmp_path), "--markdown", str(out))
    assert res.exit_code == 1
    text = out.read_text()
    assert "**REGRESSION**" in text and f"`{sha(25)[:12]}`" in text


def test_bisect_prints_a_command_the_bisect_cli_accepts(runner, tmp_path):
    _fill(tmp_path, step_series(40, at=(25,), sizes=(-STEP,), seed=1))
    res = _invoke(runner, "trend", "check", "--store", str(tmp_path), "--bisect", "--json", "-")
    assert res.exit_code == 1
    plans = [f["bisect"] for f in json.loads(res.stdout)["findings"] if f["bisect"]]
    assert len(plans) == 1  # one range, one bisect, whichever metrics show it
    argv = plans[0]["argv"]
    assert argv[:3] == ["regress", "bisect", "run"]
    assert argv[argv.index("--good") + 1] == sha(24)
    assert argv[argv.index("--bad") + 1] == sha(25)
    assert argv[argv.index("--metric") + 1] == "runs[1].acceptance_length"
    assert "--higher-is-better" in argv
    probe = argv[argv.index("--") + 1 :]
    assert probe[:4] == ["regress", "accept", "--engine", "reference"]
    assert shlex.split(plans[0]["command"]) == argv
    # both halves parse with the real commands' options
    from regress.cli.accept import accept
    from regress.cli.bisect import bisect

    bisect.commands["run"].make_context("run", argv[3:])
    accept.make_context("accept", probe[2:])


def test_run_starts_each_planned_bisect(runner, tmp_path, monkeypatch):
    _fill(tmp_path, step_series(40, at=(25,), sizes=(-STEP,), seed=1))
    started = []

    def fake(argv, **kwargs):
        started.append(argv)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(trend_bisect, "_spawn", fake)
    res = _invoke(
        runner, "trend", "check", "--store", str(tmp_path), "--bisect", "--run",
        "--repo", "/src/trtllm", "--bisect-option", "--jobs 2",
    )  # fmt: skip
    assert res.exit_code == 1
    (argv,) = started
    assert argv[1:5] == ["-m", "regress", "bisect", "run"]
    assert argv[argv.index("--repo") + 1] == "/src/trtllm"
    assert argv[argv.index("--jobs") + 1] == "2"


def test_a_recorded_command_is_what_the_bisect_reruns(runner, tmp_path):
    from regress.trend.store import TrendStore

    s = TrendStore(tmp_path)
    nightly = ["python", "nightly.py", "--json", "-"]
    for i, v in enumerate(step_series(30, at=(20,), sizes=(-STEP,), seed=6)):
        s.add(report({1: LEVEL, 8: v}), commit=sha(i), date=night(i), command=nightly)
    res = _invoke(runner, "trend", "check", "--store", str(tmp_path), "--bisect", "--json", "-")
    (plan,) = [f["bisect"] for f in json.loads(res.stdout)["findings"] if f["bisect"]]
    assert plan["argv"][plan["argv"].index("--") + 1 :] == nightly


def test_a_series_with_an_engine_accept_cannot_run_still_alarms(runner, tmp_path):
    from regress.trend.store import TrendStore

    s = TrendStore(tmp_path)
    for i, v in enumerate(step_series(30, at=(20,), sizes=(-STEP,), seed=7)):
        s.add(report({1: LEVEL, 8: v}, engine="synthetic"), commit=sha(i), date=night(i))
    res = _invoke(runner, "trend", "check", "--store", str(tmp_path), "--bisect")
    assert res.exit_code == 1
    assert "--command" in res.output


def test_plot_writes_a_png(runner, tmp_path):
    pytest.importorskip("matplotlib")
    _fill(tmp_path / "h", step_series(30, at=(20,), sizes=(-STEP,), seed=1))
    out = tmp_path / "t.png"
    res = _invoke(runner, "trend", "plot", "--store", str(tmp_path / "h"), "-o", str(out))
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (
        _invoke(runner, "trend", "plot", "--store", str(tmp_path / "h"), "-o", "-").exit_code == 2
    )


def test_add_reads_stdin_and_keeps_the_command(runner, tmp_path):
    from regress.trend.store import TrendStore

    text = report({1: 3.7, 8: 3.6}).to_json()
    res = runner.invoke(
        cli,
        ["trend", "add", "-", "--commit", sha(1), "--date", night(1), "--store", str(tmp_path),
         "--command", "python nightly.py --json -"],
        input=text,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    (entry,) = TrendStore(tmp_path).entries()
    assert entry.command == ["python", "nightly.py", "--json", "-"]
    res = runner.invoke(
        cli, ["trend", "add", "-", "--commit", sha(2), "--store", str(tmp_path)], input="{}"
    )
    assert res.exit_code == 2


def test_min_nights_decides_how_many_bad_nights_alarm(runner, tmp_path):
    _fill(tmp_path, step_series(32, at=(30,), sizes=(-STEP,), seed=8))  # two bad nights
    args = [
        "trend",
        "check",
        "--store",
        str(tmp_path),
        "--metric",
        "runs[batch=8].acceptance_length",
    ]
    assert _invoke(runner, *args).exit_code == 0
    res = _invoke(runner, *args, "--min-nights", "2", "--json", "-")
    assert res.exit_code == 1
    (f,) = json.loads(res.stdout)["findings"]
    assert f["first_bad"]["commit"] == sha(30)


# --- issue 31: each of these was an internal error (exit 1) or accepted (exit 0) ----------------


def _one_line_exit_2(res) -> str:
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "internal error" not in lines[0], res.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["--seed", "-1"],
        ["--seed", "99999999999999999999999"],
        ["--bisect", "--bisect-option", "--launcher 'srun"],
    ],
)
def test_check_refuses_a_nonsense_seed_or_unbalanced_quotes(tmp_path, args):
    _fill(tmp_path / "h", step_series(10, seed=5))
    res = CliRunner().invoke(cli, ["trend", "check", "--store", str(tmp_path / "h"), *args])
    line = _one_line_exit_2(res)
    assert args[-2] in line, line  # names the option


def test_add_refuses_unbalanced_quotes_in_command_and_writes_nothing(tmp_path):
    good = tmp_path / "r.json"
    good.write_text(report({1: 3.7, 8: 3.6}).to_json())
    store = tmp_path / "h"
    args = ["trend", "add", str(good), "--commit", sha(1), "--store", str(store)]
    line = _one_line_exit_2(CliRunner().invoke(cli, [*args, "--command", "regress 'accept"]))
    assert "--command" in line and "quotation" in line
    assert not store.exists()


def test_add_on_a_full_disk_is_one_line_and_leaves_no_empty_history_or_lock(tmp_path, monkeypatch):
    import errno
    import os

    real_write = os.write

    def full(fd, data):  # only the history is on the "full" device
        if os.readlink(f"/proc/self/fd/{fd}").endswith("history.jsonl"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    good = tmp_path / "r.json"
    good.write_text(report({1: 3.7, 8: 3.6}).to_json())
    store = tmp_path / "h"
    monkeypatch.setattr(os, "write", full)
    res = CliRunner().invoke(
        cli, ["trend", "add", str(good), "--commit", sha(1), "--store", str(store)]
    )
    monkeypatch.setattr(os, "write", real_write)
    line = _one_line_exit_2(res)
    assert "No space left on device" in line and "--store" in line
    assert not store.exists()  # no empty history.jsonl, no lock, no folder
