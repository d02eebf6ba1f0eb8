"""``regress trend`` on a CI runner without torch: every subcommand works and nothing imports it.

The trend check is statistics over JSON files, so the nightly job that runs it must not need a
multi-GB torch (issue 31 item 6). One child Python runs every command through click's CliRunner
with torch blocked (``_absent.without_torch_env``: any ``import torch``, at import time or inside
a function, in the child or in a process it starts, raises ImportError).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _absent import without_torch_env
from _trend_data import LEVEL, STEP, night, report, sha, step_series

from regress.trend.store import TrendStore

REPO = Path(__file__).resolve().parents[2]

DRIVER = """
import json, sys
from click.testing import CliRunner
from regress.cli import cli
runs = []
for args in json.loads(sys.argv[1]):
    result = CliRunner().invoke(cli, args, prog_name="regress")
    runs.append({"exit_code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr})
loaded = sorted({m.partition(".")[0] for m, v in sys.modules.items() if v is not None})
print(json.dumps({"runs": runs, "torch_loaded": "torch" in loaded}))
"""


def _fill(path: Path, batch8: list[float]) -> Path:
    store = TrendStore(path)
    for i, al8 in enumerate(batch8):
        store.add(report({1: LEVEL, 8: al8}), commit=sha(i), date=night(i))
    return path


@pytest.fixture(scope="module")
def without_torch(tmp_path_factory):
    """Every command below, run once in one child without torch: name -> its result."""
    tmp = tmp_path_factory.mktemp("no-torch")
    quiet = _fill(tmp / "quiet", step_series(40, seed=2))
    stepped = _fill(tmp / "step", step_series(40, at=(25,), sizes=(-STEP,), seed=1))
    (tmp / "night.json").write_text(report({1: LEVEL, 8: LEVEL}).to_json())
    commands = {
        "help": ["trend", "check", "--help"],
        "add": ["trend", "add", str(tmp / "night.json"), "--commit", sha(0), "--store", str(tmp)],
        "quiet": ["trend", "check", "--store", str(quiet)],
        "step": ["trend", "check", "--store", str(stepped), "--json", "-", "--bisect"],
        "markdown": ["trend", "check", "--store", str(stepped), "--markdown", "-"],
        "plot": ["trend", "plot", "--store", str(stepped), "-o", str(tmp / "trend.png")],
    }
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(list(commands.values()))],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=without_torch_env(tmp / "site"),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    return tmp, doc["torch_loaded"], dict(zip(commands, doc["runs"], strict=True))


def test_the_child_really_has_no_torch(tmp_path):
    # the blocker works: without it this whole file would prove nothing
    done = subprocess.run(
        [sys.executable, "-c", "import torch"],
        capture_output=True,
        text=True,
        env=without_torch_env(tmp_path),
        check=False,
    )
    assert done.returncode == 1 and "ModuleNotFoundError" in done.stderr


def test_no_trend_command_imports_torch(without_torch):
    _, torch_loaded, runs = without_torch
    assert not torch_loaded
    for name, run in runs.items():
        assert "needs torch" not in run["stderr"], name
        assert "Traceback" not in run["stderr"] and "traceback" not in run["stderr"], name


def test_add_and_help_work(without_torch):
    tmp, _, runs = without_torch
    assert runs["help"]["exit_code"] == 0 and "Usage: regress trend check" in runs["help"]["stdout"]
    assert runs["add"]["exit_code"] == 0, runs["add"]["stderr"]
    assert len(TrendStore(tmp).entries()) == 1


def test_check_passes_quiet_nights_and_fails_on_the_step(without_torch):
    _, _, runs = without_torch
    assert runs["quiet"]["exit_code"] == 0, runs["quiet"]["stderr"]
    assert runs["step"]["exit_code"] == 1, runs["step"]["stderr"]
    doc = json.loads(runs["step"]["stdout"])
    alarms = [f for f in doc["findings"] if f["alarm"]]
    assert {f["first_bad"]["commit"] for f in alarms} == {sha(25)}
    # --bisect plans one bisect per configuration and commit range: last good to first bad
    planned = [f["bisect"] for f in alarms if f["bisect"]]
    assert [(b["good"], b["bad"]) for b in planned] == [(sha(24), sha(25))]
    assert runs["markdown"]["exit_code"] == 1
    assert sha(25)[:12] in runs["markdown"]["stdout"]


def test_plot_needs_only_matplotlib(without_torch):
    tmp, _, runs = without_torch
    assert runs["plot"]["exit_code"] == 0, runs["plot"]["stderr"]
    assert (tmp / "trend.png").read_bytes()[:4] == b"\x89PNG"
