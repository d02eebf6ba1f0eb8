"""`regress accept --record-reference KEY`: our own reference, in upstream's schema, per workload."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

import regress.acceptance.engines as engines
from regress.acceptance.engines.synthetic import SyntheticEngine
from regress.acceptance.references import Workload, find_reference
from regress.cli import cli

HEALTHY = [0.868, 0.864, 0.825, 0.834]
STALE = [0.880, 0.775, 0.670, 0.596]
KEY = "TestGLM52NVFP4::test_acceptance[k4-graph]"


@pytest.fixture
def synthetic(monkeypatch):
    def fake_get_engine(name, **options):
        degraded = {8: STALE} if options.get("defects") else None
        return SyntheticEngine(HEALTHY, degraded=degraded)

    monkeypatch.setattr(engines, "get_engine", fake_get_engine)


def accept(*args, prompts=30):
    return CliRunner().invoke(cli, ["accept", "--num-prompts", str(prompts), *args])


def test_record_reference_writes_the_reference_batch_with_its_workload(synthetic, tmp_path):
    path = tmp_path / "acceptance_length.yaml"
    report = tmp_path / "report.json"
    result = accept("--record-reference", KEY, "--reference-yaml", str(path), "--json", str(report))
    assert result.exit_code == 0, result.output
    assert f"reference {KEY} recorded in {path}" in result.stderr
    entry = yaml.safe_load(path.read_text())[KEY]
    config = json.loads(report.read_text())["config"]
    assert entry["workload"] == {
        k: config[k] for k in ("max_draft_len", "max_new_tokens", "num_prompts", "prompts_digest")
    }
    assert entry["measured"]["batch_size"] == 1
    assert entry["min_al"] == pytest.approx(0.95 * entry["ref_al"], abs=1e-6)
    assert len(entry["per_position"]) == 4
    # The gate finds it for this workload, and not for another prompt count.
    workload = Workload.from_mapping(config)
    assert find_reference(path, (KEY,), workload).key == KEY
    other = Workload(**{**workload.to_dict(), "num_prompts": 8})
    assert find_reference(path, (KEY,), other).reference is None


def test_a_recorded_reference_gates_the_next_run_through_baseline(synthetic, tmp_path):
    path = tmp_path / "refs.yaml"
    assert accept("--record-reference", KEY, "--reference-yaml", str(path)).exit_code == 0
    result = accept("--baseline", f"{path}#{KEY}")
    assert result.exit_code == 0, result.output


def test_a_regressed_run_records_nothing(synthetic, tmp_path):
    path = tmp_path / "refs.yaml"
    result = accept(
        "--defect", "stale_req_idx", "--record-reference", KEY, "--reference-yaml", str(path)
    )
    assert result.exit_code == 1
    assert f"{KEY} not recorded: the run regressed" in result.stderr
    assert not path.exists()


@pytest.mark.parametrize(
    ("key", "content", "message"),
    [
        ("", None, "must be one non-empty line"),
        (KEY, "- a list\n", "is not a mapping"),
        (KEY, "a: [1,\n", "is not valid YAML"),
    ],
)
def test_bad_keys_and_files_are_refused_before_the_run(synthetic, tmp_path, key, content, message):
    path = tmp_path / "refs.yaml"
    if content is not None:
        path.write_text(content)
    result = accept("--record-reference", key, "--reference-yaml", str(path))
    assert result.exit_code == 2 and message in result.stderr
    assert "regress accept: batch" not in result.stderr  # refused before any work


def test_a_reference_of_another_workload_is_refused_as_a_baseline(synthetic, tmp_path):
    """`--baseline FILE#KEY` with an entry of ours holds it to its workload, as a report is."""
    path = tmp_path / "refs.yaml"
    assert accept("--record-reference", KEY, "--reference-yaml", str(path)).exit_code == 0
    refused = accept("--baseline", f"{path}#{KEY}", prompts=20)
    assert refused.exit_code == 2
    assert "measured on another workload: num_prompts=30 (this run: 20)" in refused.stderr
    allowed = accept("--baseline", f"{path}#{KEY}", "--allow-config-mismatch", prompts=20)
    assert allowed.exit_code in (0, 1), allowed.output
    assert "baseline differs: num_prompts=30 (this run: 20)" in allowed.stderr
