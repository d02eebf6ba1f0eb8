"""`regress accept` through CliRunner: output channels, files, exit codes, and end to end on the reference engine."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import regress.acceptance.engines as engines
from regress.acceptance.engines.synthetic import SyntheticEngine
from regress.cli import cli

DATA = Path(__file__).parents[1] / "data" / "acceptance"
HEALTHY = [0.868, 0.864, 0.825, 0.834]
STALE = [0.880, 0.775, 0.670, 0.596]

HAS_REFERENCE = importlib.util.find_spec("regress.reference.engine") is not None
HAS_SENTINEL = importlib.util.find_spec("regress.dsa.sentinel") is not None
needs_reference = pytest.mark.skipif(
    not HAS_REFERENCE, reason="regress.reference.engine is not in this checkout yet"
)


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
    result = accept(runner, "--prompts", str(DATA / "prompts_tokens.jsonl"), "--json", "-")
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
    ],
)
def test_bad_input_exits_2(runner, synthetic, args, message):
    result = accept(runner, *args)
    assert result.exit_code == 2
    assert message in result.stderr


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


@needs_reference
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


@needs_reference
def test_reference_without_defects_exits_0(runner, monkeypatch):
    monkeypatch.delenv("REGRESS_DEFECTS", raising=False)
    result = runner.invoke(cli, [*E2E, "--json", "-"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    one, eight = report["runs"]
    assert one["acceptance_length"] == pytest.approx(eight["acceptance_length"])
    assert report["regressed"] is False
    assert report["engine"]["defects"] == []


@needs_reference
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


@needs_reference
def test_reference_text_prompts_use_its_tokenizer(runner, monkeypatch):
    monkeypatch.delenv("REGRESS_DEFECTS", raising=False)
    args = ["accept", "--batch-sizes", "1,2", "--max-draft-len", "2", "--max-new-tokens", "12"]
    result = runner.invoke(
        cli, [*args, "--prompts", str(DATA / "prompts_text.jsonl"), "--json", "-"]
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["config"]["num_prompts"] == 2


@needs_reference
@pytest.mark.skipif(not HAS_SENTINEL, reason="regress.dsa.sentinel is not in this checkout yet")
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
