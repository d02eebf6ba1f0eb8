"""The GitHub workflows keep their trust boundaries: checked on the YAML, not on a live runner.

actionlint and zizmor lint the same files in .ci/run; these tests pin the properties the /bot
design rests on, so a later edit that breaks one fails here with the reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from regress.cli import cli

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"
GOOD = REPO / "tests" / "data" / "testlists" / "good"


def load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))


def steps(job: dict) -> list[dict]:
    return job.get("steps", [])


@pytest.mark.parametrize("name", ["bot.yml", "gpu.yml"])
def test_no_expression_is_interpolated_into_a_script(name):
    for job_name, job in load(name)["jobs"].items():
        for step in steps(job):
            assert "${{" not in step.get("run", ""), (job_name, step.get("name"))


@pytest.mark.parametrize("name", ["bot.yml", "gpu.yml"])
def test_no_secrets_and_no_default_permissions(name):
    text = (WORKFLOWS / name).read_text(encoding="utf-8")
    assert "secrets." not in text
    assert load(name)["permissions"] == {}
    for job in load(name)["jobs"].values():
        for step in steps(job):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False
            if "uses" in step:
                ref = step["uses"].split("@", 1)[1]
                assert len(ref) == 40 and all(c in "0123456789abcdef" for c in ref), step["uses"]


def test_the_job_reading_the_comment_is_unprivileged_and_runs_no_pr_code():
    workflow = load("bot.yml")
    assert list(workflow[True]) == ["issue_comment"]  # YAML 1.1 reads the key `on` as True
    parse = workflow["jobs"]["parse"]
    assert parse["permissions"] == {"contents": "read"}
    assert parse["runs-on"] == "ubuntu-latest"
    checkout = next(s for s in steps(parse) if s.get("uses", "").startswith("actions/checkout@"))
    assert "ref" not in checkout.get("with", {})  # the default branch, never the pull request
    install = next(s for s in steps(parse) if "pip install" in s.get("run", ""))
    assert install["run"].split()[-1] == "."  # no extras: no torch on the hosted runner
    plan = next(s for s in steps(parse) if s.get("id") == "plan")
    assert plan["env"]["COMMENT"] == "${{ github.event.comment.body }}"
    assert "regress bot parse -" in plan["run"] and "regress bot plan --parsed" in plan["run"]


def test_the_gpu_job_runs_each_planned_stage_on_its_labels_and_uploads_junit():
    test = load("bot.yml")["jobs"]["test"]
    assert test["runs-on"] == "${{ matrix.runs_on }}"
    assert test["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.parse.outputs.matrix) }}"
    assert test["permissions"] == {"contents": "read"}
    run = next(s for s in steps(test) if s.get("name") == "Run the stage")
    assert (
        run["env"]["ARGV"] == "${{ toJSON(matrix.argv) }}" and "subprocess.run(json" in run["run"]
    )
    upload = next(s for s in steps(test) if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["path"] == "${{ matrix.junit_xml }}"


def test_only_the_report_job_may_write_and_it_posts_the_junit_summary():
    jobs = load("bot.yml")["jobs"]
    writers = [n for n, j in jobs.items() if "write" in json.dumps(j.get("permissions", {}))]
    assert writers == ["report"]
    summary = next(s for s in steps(jobs["report"]) if s.get("name") == "Summarise")
    assert "regress junit summary --keep-going --markdown summary.md" in summary["run"]


def test_the_gpu_workflow_requires_gpus():
    job = load("gpu.yml")["jobs"]["gpu"]
    assert job["runs-on"][0] == "self-hosted"
    assert any("pytest -m gpu --require-gpu" in s.get("run", "") for s in steps(job))


def test_plan_outputs_turn_a_real_plan_into_a_matrix(tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "bot",
            "plan",
            '/bot run --stage-list "H200-1, CPU-1"',
            "--author",
            "alice",
            "--test-lists",
            str(GOOD),
        ],
    )
    assert result.exit_code == 0, result.output
    (tmp_path / "plan.json").write_text(result.output)
    done = subprocess.run(
        [sys.executable, str(WORKFLOWS / "plan_outputs.py"), str(tmp_path / "plan.json")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    outputs = dict(line.split("=", 1) for line in done.stdout.splitlines())
    assert outputs["action"] == "run" and outputs["fail_fast"] == "true"
    matrix = json.loads(outputs["matrix"])
    assert [m["stage"] for m in matrix] == ["H200-1", "CPU-1"]
    assert matrix[0]["runs_on"] == ["self-hosted", "gpu", "h200", "gpus-1"]
    assert matrix[1]["runs_on"] == ["ubuntu-latest"]
    assert matrix[0]["argv"][:3] == ["python", "-m", "pytest"]


def test_ci_run_is_the_readme_test_command_and_fails_on_any_error():
    lines = [
        line.strip()
        for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert lines[0] == "set -euo pipefail"  # pytest's exit 5 (nothing collected) fails the run
    commands = lines[lines.index(". .venv/bin/activate") + 1 :]
    assert commands[:4] == [
        "pip install -q torch==2.13.0",  # first, so pip takes the CPU wheel
        "pip install -q -e '.[test]'",
        "python -m pytest -n 2 -q",
        "regress testlist validate",
    ]
    assert "actionlint" in commands and "zizmor --offline .github/workflows" in commands
    assert not any("|| true" in line or line.endswith("|| :") for line in lines)
