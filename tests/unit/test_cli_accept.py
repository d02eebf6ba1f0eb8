"""`regress accept` through CliRunner: output channels, files, exit codes, and end to end on the reference engine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from _outputs import blocked_path, fill_the_disk
from click.testing import CliRunner

import regress.acceptance.engines as engines
from regress.acceptance.engines.synthetic import SyntheticEngine
from regress.cli import cli

DATA = Path(__file__).parents[1] / "data" / "acceptance"
HEALTHY = [0.868, 0.864, 0.825, 0.834]
STALE = [0.880, 0.775, 0.670, 0.596]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def synthetic(monkeypatch):
    """Route `--engine reference` to a synthetic engine; returns the options the CLI passed."""
    seen: dict = {}

    def fake_get_engine(name, **options):
        seen.update(options, name=name)
        degraded = {8: STALE} if options.get("defects") else None
        seen["engine"] = SyntheticEngine(HEALTHY, degraded=degraded)
        return seen["engine"]

    monkeypatch.setattr(engines, "get_engine", fake_get_engine)
    return seen


def accept(runner, *args):
    return runner.invoke(cli, ["accept", "--num-prompts", "30", *args])


def test_healthy_run_exits_0_with_a_table(runner, synthetic):
    result = accept(runner)
    assert result.exit_code == 0, result.output
    assert "model synthetic-mtp  engine synthetic  K=4" in result.stdout
    assert "bonus token" in result.stdout
    assert "batch 8 (2/2)" in result.stderr  # progress goes to stderr
    assert synthetic["name"] == "reference" and synthetic["device"] == "cpu"
    assert synthetic["defects"] is None and synthetic["cuda_graph"] is None


def test_regression_exits_1_naming_the_batch(runner, synthetic):
    result = accept(runner, "--defect", "stale_req_idx")
    assert result.exit_code == 1
    assert "acceptance regression at batch size(s) 8" in result.stderr
    assert "REGRESSION batch_invariance batch 8" in result.stdout


def test_json_dash_puts_only_json_on_stdout(runner, synthetic):
    result = accept(runner, "--defect", "stale_req_idx", "--json", "-")
    assert result.exit_code == 1
    report = json.loads(result.stdout)  # nothing else on stdout
    assert report["schema"] == 1 and report["regressed_batch_sizes"] == [8]
    assert "REGRESSION batch_invariance batch 8" in result.stderr


def test_json_file_plot_and_baseline(runner, synthetic, tmp_path):
    pytest.importorskip("matplotlib")
    report_path, plot_path = tmp_path / "r.json", tmp_path / "al.png"
    first = accept(runner, "--json", str(report_path), "--plot", str(plot_path))
    assert first.exit_code == 0, first.output
    assert json.loads(report_path.read_text())["regressed"] is False
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "model synthetic-mtp" in first.stdout  # the table still shows with --json FILE

    second = accept(runner, "--defect", "x", "--baseline", str(report_path), "--json", "-")
    assert second.exit_code == 1
    verdicts = json.loads(second.stdout)["verdicts"]
    assert {(v["check"], v["batch_size"]) for v in verdicts if v["status"] == "regression"} >= {
        ("baseline", 8)
    }


def _paired_intervals(interval):
    """paired_drop_intervals stand-in: every metric's paired drop interval is ``interval``."""

    def fake(reference, run, **_):
        names = ["acceptance_length", "conditional_slope"]
        names += [f"per_position[{i + 1}]" for i in range(reference.max_draft_len)]
        return {key: list(interval) for key in names}

    return fake


@pytest.mark.parametrize(
    ("interval", "exit_code"),
    [([-0.01, 0.9], 0), ([0.0, 0.9], 0), ([0.01, 0.9], 1)],
)
def test_main_verdict_follows_the_paired_interval_lower_bound(
    runner, synthetic, monkeypatch, interval, exit_code
):
    """The stale map's big drop at batch 8 is a regression only if its paired interval clears 0."""
    import regress.acceptance.verdicts as verdicts

    monkeypatch.setattr(verdicts, "paired_drop_intervals", _paired_intervals(interval))
    result = accept(runner, "--defect", "stale_req_idx", "--json", "-")
    assert result.exit_code == exit_code, result.stderr
    rows = json.loads(result.stdout)["verdicts"][0]["details"]["metrics"]
    assert rows[0]["noise_test"] == "paired_bootstrap" and rows[0]["beyond_tolerance"]


def test_main_verdict_would_flip_on_the_upper_bound_mutant(runner, synthetic, monkeypatch):
    """Proof the test above can fail: judging by drop_ci[1] turns a straddling interval into exit 1."""
    import regress.acceptance.verdicts as verdicts

    monkeypatch.setattr(verdicts, "paired_drop_intervals", _paired_intervals([-0.01, 0.9]))
    monkeypatch.setattr(verdicts, "paired_significant", lambda ci: ci[1] > verdicts.EPS)
    assert accept(runner, "--defect", "stale_req_idx").exit_code == 1


def test_upstream_yaml_baseline(runner, synthetic):
    spec = f"{DATA / 'acceptance_length.yaml'}#TestGLM52NVFP4::test_mtp_k4_bs8"
    result = accept(runner, "--baseline", spec, "--json", "-")
    report = json.loads(result.stdout)
    assert report["baseline"]["min_al"] == 3.5777
    gate = [v for v in report["verdicts"] if v["check"] == "upstream_min_al"]
    assert len(gate) == 2
    # Exit code follows the gate: the synthetic healthy AL sits below GLM-5.2's 3.58.
    assert result.exit_code == (1 if any(v["status"] == "regression" for v in gate) else 0)


def test_options_reach_the_engine(runner, synthetic):
    result = accept(
        runner,
        "--defect",
        "a,b",
        "--defect",
        "c",
        "--device",
        "cuda",
        "--no-cuda-graph",
        "--seed",
        "5",
        "--sentinel",
    )
    assert result.exit_code in (0, 1), result.output
    assert synthetic["defects"] == ["a", "b", "c"]
    assert (
        synthetic["device"],
        synthetic["cuda_graph"],
        synthetic["seed"],
        synthetic["sentinel"],
    ) == ("cuda", False, 5, True)


def test_prompts_file(runner, synthetic):
    file = str(DATA / "prompts_tokens.jsonl")  # 3 prompts: batch 3 is the largest that fills
    result = accept(runner, "--prompts", file, "--batch-sizes", "1,3", "--json", "-")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["config"]["num_prompts"] == 3 and report["config"]["prompts"].endswith(
        "prompts_tokens.jsonl"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch-sizes", "1,x"], "comma-separated integers"),
        (["--batch-sizes", "0,8"], "positive integers"),
        (["--max-draft-len", "0"], "x>=1"),
        (["--tolerance", "1"], "0<=x<1"),
        (["--baseline", "/nonexistent/base.json"], "cannot read acceptance report"),
        (["--tolerance", "nan"], "'nan' is not a finite number"),
        (["--tolerance", "-0.1"], "0<=x<1"),
        (["--seed", "-1"], "0<=x<=4294967295"),
        (["--num-prompts", "0"], "x>=1"),
        (["--num-prompts", "-3"], "x>=1"),
        (["--max-new-tokens", "1"], "x>=2"),
        (["--max-draft-len", "-1"], "x>=1"),
        (["--batch-sizes", "-8"], "positive integers"),
        (["--batch-sizes", "1,100000"], "batch size 100000 exceeds the 30 prompts"),
    ],
)
def test_bad_input_exits_2_before_the_engine_runs(runner, synthetic, args, message):
    result = accept(runner, *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "regress accept: batch" not in result.stderr  # progress starts with the engine
    assert not synthetic.get("engine") or synthetic["engine"].calls == []


def test_malformed_prompts_file_exits_2_naming_the_line(runner, synthetic, tmp_path):
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"token_ids": [1, 2]}\n{"tokens": [3]}\n')
    result = accept(runner, "--prompts", str(bad))
    assert result.exit_code == 2
    assert "p.jsonl:2" in result.stderr


def test_engine_crash_exits_3(runner, monkeypatch):
    class Crashing(SyntheticEngine):
        def run(self, prompts, **kwargs):
            raise RuntimeError("device-side assert triggered")

    monkeypatch.setattr(engines, "get_engine", lambda name, **o: Crashing(HEALTHY))
    result = accept(runner)
    assert result.exit_code == 3
    assert "device-side assert triggered" in result.stderr


def test_trtllm_without_tensorrt_llm_exits_3(runner, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt_llm", None)
    result = runner.invoke(cli, ["accept", "--engine", "trtllm", "--model", "/ckpt/glm"])
    assert result.exit_code == 3
    assert "pip install tensorrt_llm" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine", "trtllm"], "needs --model"),
        (
            ["--engine", "trtllm", "--model", "m", "--defect", "stale_req_idx"],
            "reference engine only",
        ),
        (["--engine", "reference", "--model", "/some/ckpt"], "built-in model"),
    ],
)
def test_engine_option_conflicts_exit_2(runner, monkeypatch, args, message):
    monkeypatch.setitem(sys.modules, "tensorrt_llm", None)
    result = runner.invoke(cli, ["accept", *args])
    assert result.exit_code == 2
    assert message in result.stderr


def test_plot_without_matplotlib_fails_before_running(runner, synthetic, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = accept(runner, "--plot", str(tmp_path / "x.png"))
    assert result.exit_code == 3
    assert "matplotlib" in result.stderr
    assert "engine" not in synthetic  # nothing was run


# --- end to end on the reference engine (the "done when", at CI-friendly size) ---------

E2E = [
    "accept",
    "--engine",
    "reference",
    "--batch-sizes",
    "1,8",
    "--max-draft-len",
    "4",
    "--num-prompts",
    "24",
    "--max-new-tokens",
    "32",
]


def test_reference_stale_req_idx_exits_1_naming_batch_8(runner, monkeypatch, tmp_path):
    monkeypatch.delenv("REGRESS_DEFECTS", raising=False)
    result = runner.invoke(cli, [*E2E, "--defect", "stale_req_idx", "--json", "-"])
    assert result.exit_code == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["model"] == "reference-dsa-tiny"
    assert report["engine"]["defects"] == ["stale_req_idx"]
    assert report["regressed_batch_sizes"] == [8]
    flagged = {
        (v["check"], v["batch_size"]) for v in report["verdicts"] if v["status"] == "regression"
    }
    assert ("batch_invariance", 8) in flagged
    assert all(batch != 1 for _, batch in flagged)  # batch 1 is where the stale map is right
    assert "batch size(s) 8" in result.stderr


def test_reference_without_defects_exits_0(runner, monkeypatch):
    monkeypatch.delenv("REGRESS_DEFECTS", raising=False)
    result = runner.invoke(cli, [*E2E, "--json", "-"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    one, eight = report["runs"]
    assert one["acceptance_length"] == pytest.approx(eight["acceptance_length"])
    assert report["regressed"] is False
    assert report["engine"]["defects"] == []


def test_reference_reads_defects_from_the_environment(runner, monkeypatch):
    """Without --defect, REGRESS_DEFECTS decides (how bisect scripts switch defects), and the report says so."""
    monkeypatch.setenv("REGRESS_DEFECTS", "stale_req_idx")
    result = runner.invoke(
        cli, [*E2E[:-4], "--num-prompts", "16", "--max-new-tokens", "32", "--json", "-"]
    )
    report = json.loads(result.stdout)
    assert result.exit_code == 1, result.stderr
    assert report["engine"]["defects"] == ["stale_req_idx"] and report["regressed_batch_sizes"] == [
        8
    ]


def test_reference_text_prompts_use_its_tokenizer(runner, monkeypatch):
    monkeypatch.delenv("REGRESS_DEFECTS", raising=False)
    args = ["accept", "--batch-sizes", "1,2", "--max-draft-len", "2", "--max-new-tokens", "12"]
    result = runner.invoke(
        cli, [*args, "--prompts", str(DATA / "prompts_text.jsonl"), "--json", "-"]
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["config"]["num_prompts"] == 2


def test_reference_sentinel_findings_reach_the_report(runner, monkeypatch):
    monkeypatch.delenv("REGRESS_DEFECTS", raising=False)
    args = [
        *E2E[:-4],
        "--num-prompts",
        "8",
        "--max-new-tokens",
        "16",
        "--defect",
        "stale_req_idx",
        "--sentinel",
    ]
    result = runner.invoke(cli, [*args, "--json", "-"])
    report = json.loads(result.stdout)
    assert result.exit_code == 1
    assert report["sentinel"], "the sentinel should see the stale map at batch 8"
    assert any(
        v["check"] == "sentinel" and v["batch_size"] == 8 and v["status"] == "regression"
        for v in report["verdicts"]
    )


# --- every failure names its cause, exits with its code, and writes nothing -------------------


@pytest.mark.parametrize("option", ["--json", "--plot"])
def test_unwritable_output_fails_before_the_run(runner, synthetic, tmp_path, option):
    result = accept(runner, option, str(blocked_path(tmp_path)))
    assert result.exit_code == 2, result.output
    assert f"regress: error: {option} " in result.stderr and "is not a folder" in result.stderr
    assert "engine" not in synthetic  # nothing was run
    assert len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_a_folder_as_json_path_fails_before_the_run(runner, synthetic, tmp_path):
    result = accept(runner, "--json", str(tmp_path))
    assert result.exit_code == 2 and "is a folder" in result.stderr
    assert "engine" not in synthetic


def test_plot_to_stdout_is_refused(runner, synthetic):
    result = accept(runner, "--plot", "-")
    assert result.exit_code == 2 and "give a file name" in result.stderr
    assert "engine" not in synthetic


def test_write_error_after_the_run_is_bad_input_not_a_regression(
    runner, synthetic, tmp_path, monkeypatch
):
    """A disk that fills up during the run: exit 2 with the reason, never 1 ("regression")."""
    fill_the_disk(monkeypatch)
    result = accept(runner, "--json", str(tmp_path / "r.json"))
    assert result.exit_code == 2
    assert f"--json {tmp_path / 'r.json'}: cannot write (No space left" in result.stderr
    assert "No space left on device" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_report_and_plot_get_the_same_mode(runner, synthetic, tmp_path):
    pytest.importorskip("matplotlib")
    import os

    report_path, plot_path = tmp_path / "r.json", tmp_path / "al.png"
    result = accept(runner, "--json", str(report_path), "--plot", str(plot_path))
    assert result.exit_code == 0, result.output
    umask = os.umask(0)
    os.umask(umask)
    modes = {p.stat().st_mode & 0o777 for p in (report_path, plot_path)}
    assert modes == {0o644 & ~umask}  # the report used to be 0600 next to a 0644 PNG
    assert sorted(p.name for p in tmp_path.iterdir()) == ["al.png", "r.json"]  # no temp files


def test_ctrl_c_exits_130(runner, monkeypatch, tmp_path):
    class Interrupted(SyntheticEngine):
        def run(self, prompts, **kwargs):
            raise KeyboardInterrupt

    monkeypatch.setattr(engines, "get_engine", lambda name, **o: Interrupted(HEALTHY))
    result = accept(runner, "--json", str(tmp_path / "r.json"))
    assert result.exit_code == 130
    assert "regress: interrupted" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_binary_baseline_is_one_line_exit_2(runner, synthetic, tmp_path, suffix):
    blob = tmp_path / f"base{suffix}"
    blob.write_bytes(bytes(range(256)) * 4)
    result = accept(runner, "--baseline", str(blob))
    assert result.exit_code == 2, result.output
    assert "not UTF-8 text" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output and "internal error" not in result.stderr
    assert synthetic["engine"].calls == []


def test_binary_prompts_file_is_one_line_exit_2(runner, synthetic, tmp_path):
    blob = tmp_path / "p.jsonl"
    blob.write_bytes(b"\xff\xfe" * 64)
    result = accept(runner, "--prompts", str(blob))
    assert result.exit_code == 2 and "not UTF-8 text" in result.stderr


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--num-prompts", "8"], "num_prompts=30 (this run: 8)"),
        (["--max-draft-len", "3"], "max_draft_len=4 (this run: 3)"),
        (["--max-new-tokens", "32"], "max_new_tokens=64 (this run: 32)"),
    ],
)
def test_baseline_from_another_configuration_is_refused(runner, synthetic, tmp_path, args, named):
    base = tmp_path / "base.json"
    assert accept(runner, "--json", str(base)).exit_code == 0
    refused = accept(runner, "--baseline", str(base), *args)
    assert refused.exit_code == 2
    assert named in refused.stderr and "--allow-config-mismatch" in refused.stderr
    allowed = accept(
        runner, "--baseline", str(base), *args, "--allow-config-mismatch", "--json", "-"
    )
    assert allowed.exit_code in (0, 1), allowed.stderr
    assert json.loads(allowed.stdout)["baseline"]["config_mismatches"] == [named]
    assert f"baseline differs: {named}" in allowed.stderr


def test_baseline_on_other_prompts_of_the_same_count_is_refused(runner, synthetic, tmp_path):
    base = tmp_path / "base.json"
    assert accept(runner, "--json", str(base)).exit_code == 0
    other = tmp_path / "p.jsonl"
    other.write_text("".join(f'{{"token_ids": [{i}, 7, 9]}}\n' for i in range(30)))
    refused = accept(runner, "--baseline", str(base), "--prompts", str(other))
    assert refused.exit_code == 2 and "prompts_digest=" in refused.stderr


def test_matching_baseline_is_accepted_silently(runner, synthetic, tmp_path):
    base = tmp_path / "base.json"
    assert accept(runner, "--json", str(base)).exit_code == 0
    again = accept(runner, "--baseline", str(base), "--json", "-")
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["baseline"]["config_mismatches"] == []
    assert "baseline differs" not in again.stderr


def test_bare_json_means_stdout_as_in_every_command(runner, synthetic):
    result = accept(runner, "--json", "--max-draft-len", "3")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["config"]["max_draft_len"] == 3


# --- issue 31: accepted nonsense, a wrong exit code, the wrong option blamed, two lines ---------


def test_a_defect_list_naming_nothing_is_refused(runner, synthetic):
    result = accept(runner, "--defect", ",")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        "regress: error: --defect ',' names no defect; give one `regress defects` lists"
    ]
    assert not synthetic.get("engine")


def test_device_cuda_without_cuda_is_bad_input_as_in_defects(runner, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = accept(runner, "--device", "cuda")
    assert result.exit_code == 2, result.output
    assert "--device cuda" in result.stderr and "--device cpu" in result.stderr
    defects = runner.invoke(cli, ["defects", "--check", "--device", "cuda"])
    assert defects.exit_code == result.exit_code


def test_a_huge_max_draft_len_blames_max_draft_len_in_one_line(runner):
    result = runner.invoke(cli, ["accept", "--max-draft-len", "100000000", "--batch-sizes", "1"])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()  # no progress line before the error
    assert "lower --max-draft-len to at most" in line, line
    assert "lower --max-new-tokens" not in line


def test_progress_in_a_log_is_plain_lines_from_the_first_finished_request(runner, synthetic):
    result = accept(runner)
    assert result.exit_code == 0, result.output
    lines = [x for x in result.stderr.splitlines() if x.startswith("regress accept: batch")]
    assert lines and lines[0].startswith("regress accept: batch 1 (1/2)")
    assert any(x.startswith("regress accept: batch 8 (2/2)") for x in lines)
