"""The pre-merge gate (.github/workflows/check.yml): its trust boundary and its two scripts.

actionlint and zizmor lint the file in .ci/run. Here the YAML properties the gate's safety rests
on are pinned, and the two ``run:`` scripts are executed as written: the change filter against
real merge commits, the check step against fake trees with the real ``regress``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _upstream_trees import broken_files, tree_files, write_files

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "check.yml"


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def _steps() -> list[dict]:
    return _workflow()["jobs"]["check"]["steps"]


def _script(step_id_or_name: str) -> str:
    return next(s["run"] for s in _steps() if step_id_or_name in (s.get("id"), s.get("name")))


def test_only_workflow_call_with_a_read_only_token_and_no_secrets():
    workflow = _workflow()
    assert list(workflow[True]) == ["workflow_call"]  # YAML 1.1 reads the key `on` as True
    assert workflow["permissions"] == {}
    assert workflow["jobs"]["check"]["permissions"] == {"contents": "read"}
    assert workflow["jobs"]["check"]["runs-on"] == "ubuntu-latest"
    assert "secrets." not in WORKFLOW.read_text(encoding="utf-8")
    for step in _steps():
        assert "${{" not in step.get("run", ""), step["name"]  # inputs only through env
        if "uses" in step:
            ref = step["uses"].split("@", 1)[1]
            assert len(ref) == 40 and all(c in "0123456789abcdef" for c in ref), step["uses"]
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False
        assert "GITHUB_TOKEN" not in str(step.get("env", {})) and "github.token" not in str(step)


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def _merge_commit(tmp_path: Path, changed: str) -> tuple[Path, str]:
    """A repository whose HEAD merges a pull request that changes ``changed``; its PR head."""
    repo = tmp_path / "tree"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("base\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    _git(repo, "checkout", "-qb", "pr")
    (repo / changed).parent.mkdir(parents=True, exist_ok=True)
    (repo / changed).write_text("changed\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "the pull request")
    head = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "main")
    (repo / "other.txt").write_text("main moved on\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "main")
    _git(repo, "merge", "-q", "--no-ff", "-m", "merge", "pr")
    return repo, head


def _outputs(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@pytest.mark.parametrize(
    ("changed", "runs"),
    [
        ("tensorrt_llm/_torch/attention_backend/sparse/dsa/metadata.py", "true"),
        ("tensorrt_llm/_torch/attention/backends/sparse/dsa/metadata.py", "true"),
        ("tensorrt_llm/_torch/speculative/eagle3.py", "true"),
        ("tensorrt_llm/_torch/pyexecutor/model_engine.py", "false"),
        ("docs/source/index.md", "false"),
    ],
)
def test_the_change_filter_runs_on_dsa_or_speculative_changes_and_takes_the_pr_head(
    tmp_path, changed, runs
):
    repo, head = _merge_commit(tmp_path, changed)
    out, temp = tmp_path / "github_output", tmp_path / "runner_temp"
    temp.mkdir()
    env = {**os.environ, "GITHUB_OUTPUT": str(out), "RUNNER_TEMP": str(temp)}
    subprocess.run(["bash", "-c", _script("changes")], cwd=repo, env=env, check=True)
    outputs = _outputs(out.read_text())
    assert outputs["run"] == runs
    assert outputs["sha"] == head == _git(repo, "rev-parse", "HEAD")  # the PR's own tree


def _check_step(tmp_path: Path, files: dict[str, str], fail_on_gap: str, **extra: str):
    workspace = tmp_path / "workspace"
    for name, text in _REGRESS_SRC.items():  # files of the regress checkout the step reads
        (workspace / "regress-src" / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / "regress-src" / name).write_text(text)
    write_files(workspace / "tree", files)
    temp = tmp_path / "runner_temp"
    (temp / "venv" / "bin").mkdir(parents=True)
    # the regress of the interpreter running the tests, whether or not its bin is on PATH
    shim = temp / "venv" / "bin" / "regress"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m regress "$@"\n')
    shim.chmod(0o755)
    summary = tmp_path / "summary.md"
    env = {
        **os.environ,
        "RUNNER_TEMP": str(temp),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_REPOSITORY": "NVIDIA/TensorRT-LLM",
        "GITHUB_WORKFLOW_REF": "NVIDIA/TensorRT-LLM/.github/workflows/pr.yml@refs/pull/7/merge",
        "TIMEOUT": "60",
        "FAIL_ON_GAP": fail_on_gap,
        "PR": "7",
        "SHA": "0123abc",
        **extra,
    }
    done = subprocess.run(
        ["bash", "-c", _script("regress check")],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done, summary.read_text()


#: Every finding of the pre-fix era-C fake tree, as a known-findings file (the `known` input).
_REGRESS_SRC = {
    "known.txt": "".join(
        f"{scenario} DSAtrtllmAttentionMetadata {field} (the pre-fix tree's)\n"
        for scenario in ("req_idx_map", "metadata_classes", "sentinel_lifecycle", "matrix")
        for field in ("req_idx_map", "indexer_k_slots")
    )
}


def test_the_check_step_fails_a_broken_contract_and_writes_the_summary(tmp_path):
    done, summary = _check_step(tmp_path, tree_files("C", "pre"), "false")
    assert done.returncode == 1, done.stderr
    assert "Caller: `NVIDIA/TensorRT-LLM` pull request #7, tree `0123abc`" in summary
    assert "### regress check: a contract is broken (exit 1)" in summary
    assert "| `req_idx_map/uniform_5x4` | fail |" in summary
    assert "What was faked" in summary


@pytest.mark.parametrize(("fail_on_gap", "code"), [("false", 0), ("true", 3)])
def test_a_gap_warns_unless_the_caller_asks_it_to_fail(tmp_path, fail_on_gap, code):
    done, summary = _check_step(tmp_path, broken_files("syntax_error", "C"), fail_on_gap)
    assert done.returncode == code, done.stderr
    assert "no verdict: the sandbox could not run this tree (exit 3)" in summary
    assert ("::warning title=regress check::" in done.stdout) == (code == 0)


def test_the_known_input_lets_listed_findings_pass_and_reports_them(tmp_path):
    done, summary = _check_step(tmp_path, tree_files("C", "pre"), "false", KNOWN="known.txt")
    assert done.returncode == 0, done.stderr
    assert "### regress check: contracts hold (" in summary and "known finding(s)" in summary
    assert "| `req_idx_map/uniform_5x4` | known |" in summary
    assert "**Known findings** (`regress-src/known.txt`)" in summary
    assert "line 6: `sentinel_lifecycle DSAtrtllmAttentionMetadata indexer_k_slots`" in summary
