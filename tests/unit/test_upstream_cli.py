"""``regress check`` and the trtllm-source bisect recipe, end to end on fake trees."""

from __future__ import annotations

import json

import pytest
from _upstream_trees import build_tree, tree_files
from click.testing import CliRunner

from regress.bisect.synthetic import write_history
from regress.cli import cli
from regress.cli.child import main as child_main


@pytest.fixture
def run():
    def invoke(*args, env=None):
        return CliRunner().invoke(cli, ["check", *args], env=env)

    return invoke


def test_exit_1_names_the_contract_layout_and_values(tmp_path, run):
    result = run("--trtllm-src", str(build_tree(tmp_path, "B")), "--scenario", "req_idx_map")
    assert result.exit_code == 1
    assert "req_idx_map/uniform_5x4" in result.output
    assert "seen [0, 0, 0, 0], expected [0, 1, 2, 3]" in result.output


def test_exit_0_on_post_fix_and_json_to_stdout(tmp_path, run):
    src = build_tree(tmp_path, "C", "post", guard=True)
    result = run("--trtllm-src", str(src), "--json", "-", "-q", "--scenario", "req_idx_map")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["era"] == "C" and doc["exit_code"] == 0
    assert doc["scenarios"][0]["steps"][-1]["req_idx_per_token"] == [0, 1, 2, 3]


def test_env_var_names_the_tree_and_json_file_is_written(tmp_path, run):
    src = build_tree(tmp_path / "src", "B", "post")
    out = tmp_path / "out" / "report.json"
    result = run("--json", str(out), "-q", env={"REGRESS_TRTLLM_SRC": str(src)})
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["status"] == "pass"


def test_exit_2_for_a_tree_that_is_not_tensorrt_llm_or_a_bad_scenario(tmp_path, run):
    assert run("--trtllm-src", str(tmp_path)).exit_code == 2
    src = build_tree(tmp_path / "t", "B")
    result = run("--trtllm-src", str(src), "--scenario", "nope")
    assert result.exit_code == 2 and "unknown --scenario nope" in result.output


def test_exit_3_when_the_sandbox_cannot_load_the_tree(tmp_path, run):
    build_tree(tmp_path, "B")
    rel = "tensorrt_llm/_torch/attention_backend/sparse/dsa/indexer.py"
    (tmp_path / rel).write_text(
        tree_files("B")[rel] + "\nfrom tensorrt_llm._utils import probe\nprobe()\n"
    )
    result = run("--trtllm-src", str(tmp_path))
    assert result.exit_code == 3
    assert "indexer.py:" in result.output and "tensorrt_llm._utils.probe" in result.output


def test_quiet_still_names_the_cause_of_exit_2_and_3_on_stderr(tmp_path, run):
    """``-q`` drops the summary of a verdict, never the reason there is none."""
    result = run("--trtllm-src", str(tmp_path), "-q")
    assert result.exit_code == 2
    assert f"{tmp_path} is not a TensorRT-LLM tree" in result.stderr
    tree = build_tree(tmp_path / "t", "B")
    rel = "tensorrt_llm/_torch/attention_backend/sparse/dsa/indexer.py"
    (tree / rel).write_text(tree_files("B")[rel] + "\nraise RuntimeError('no extension')\n")
    result = run("--trtllm-src", str(tree), "-q", "--json", "-", "--scenario", "req_idx_map")
    assert result.exit_code == 3
    assert "indexer.py:" in result.stderr and "no extension" in result.stderr
    assert json.loads(result.stdout)["exit_code"] == 3  # stdout stays the JSON alone


def test_the_probe_maps_untestable_commits_to_skip(tmp_path):
    assert probe_main([str(tmp_path)]) == 125  # not a TensorRT-LLM tree
    build_tree(tmp_path, "B")
    rel = "tensorrt_llm/_torch/attention_backend/sparse/dsa/indexer.py"
    (tmp_path / rel).write_text(tree_files("B")[rel] + "\nimport tensorrt_llm.x as x\nx.f()\n")
    assert probe_main([str(tmp_path)]) == 125  # sandbox gap
    assert (
        probe_main([str(build_tree(tmp_path / "ok", "B", "post")), "--scenario", "req_idx_map"])
        == 0
    )
    assert probe_main([str(build_tree(tmp_path / "bad", "B")), "--scenario", "req_idx_map"]) == 1


def test_bisect_over_a_generated_history_finds_the_fixing_commit(tmp_path):
    """Commits 0-4 pre-fix (2: unloadable), 5 the fix, 6-7 post-fix; --find-fix must name 5."""
    commits, subjects = [], []
    indexer = "tensorrt_llm/_torch/attention_backend/sparse/dsa/indexer.py"
    for i in range(8):
        files = tree_files("B", "post" if i >= 5 else "pre")
        files[indexer] = tree_files("B")[indexer] + (
            "\nimport tensorrt_llm.native as n\nn.init()\n" if i == 2 else ""
        )
        files["notes.txt"] = f"{i}\n"
        commits.append(files)
        subjects.append("rebuild the map in on_update_kv_lens" if i == 5 else f"change {i}")
    repo = tmp_path / "trtllm"
    shas = write_history(repo, commits, subjects=subjects)
    done = CliRunner().invoke(cli, [
        "bisect", "run", "--repo", str(repo),
        "--good", shas[-1], "--bad", shas[0], "--find-fix", "--recipe", "trtllm-source",
        "--cache-dir", str(tmp_path / "cache"), "--json", "-", "-q",
    ])  # fmt: skip
    assert done.exit_code == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["culprit"]["sha"] == shas[5]


def probe_main(argv: list[str]) -> int:
    """The trtllm-source recipe's probe, as its child process runs it."""
    return child_main(["trtllm-source-probe", *argv])
