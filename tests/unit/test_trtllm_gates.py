"""Case gates on synthetic runs: healthy passes, the stale-map signature and the sentinel fail."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from regress.acceptance.stats import summarize
from regress.acceptance.trace import RequestTrace
from regress.errors import UsageError
from regress.trtllm.cases import DEEPSEEK_V32, GLM52, Case
from regress.trtllm.gates import judge_case, upstream_reference
from regress.trtllm.hooks import SentinelReport

DATA = Path(__file__).resolve().parents[1] / "data" / "trtllm"
# Conditional acceptance per depth, GLM-5.2 K=4 (trtllm-facts.md): flat when healthy, decaying
# with depth when draft steps read another request's indexer cache.
HEALTHY = (0.868, 0.864, 0.825, 0.834)
STALE_MAP = (0.880, 0.775, 0.670, 0.596)
CLEAN = SentinelReport(attached=[{"event": "attached", "pid": 1}], violations=[], errors=[])


def stats(conditional, *, seed, requests=80, steps=60):
    rng = random.Random(seed)
    traces = []
    for index in range(requests):
        accepted = []
        for _ in range(steps):
            a = 0
            while a < len(conditional) and rng.random() < conditional[a]:
                a += 1
            accepted.append(a)
        traces.append(RequestTrace(accepted=accepted, prompt_index=index))
    return summarize(traces, len(conditional), seed=0, n_boot=200)


@pytest.fixture(scope="module")
def batch1():
    return stats(HEALTHY, seed=1)


def test_healthy_batch_passes(batch1):
    outcome = judge_case(8, batch1, stats(HEALTHY, seed=2), CLEAN, tolerance=0.05)
    assert outcome.passed, outcome.explain()
    assert {v.check for v in outcome.verdicts} == {
        "batch_invariance",
        "conditional_decay",
        "sentinel",
    }
    assert all(v.batch_size == 8 for v in outcome.verdicts)


def test_stale_map_signature_fails_on_al_positions_and_decay(batch1):
    outcome = judge_case(8, batch1, stats(STALE_MAP, seed=2), CLEAN, tolerance=0.05)
    assert not outcome.passed
    failed = {v.check for v in outcome.verdicts if v.regressed}
    assert failed == {"batch_invariance", "conditional_decay"}
    (invariance,) = [v for v in outcome.verdicts if v.check == "batch_invariance"]
    assert "acceptance_length" in invariance.details["regressed_metrics"]
    assert "per_position[4]" in invariance.details["regressed_metrics"]
    assert "REGRESSION batch_invariance batch 8" in outcome.explain()


def test_sentinel_violation_fails_even_when_acceptance_looks_fine(batch1):
    report = SentinelReport(
        attached=[{"event": "attached"}],
        violations=[{"check": "req_idx_map", "message": "stale"}],
        errors=[],
    )
    outcome = judge_case(8, batch1, stats(HEALTHY, seed=2), report, tolerance=0.05)
    assert [v.check for v in outcome.verdicts if v.regressed] == ["sentinel"]


def test_sentinel_that_never_attached_fails(batch1):
    silent = SentinelReport(attached=[], violations=[], errors=[])
    outcome = judge_case(8, batch1, stats(HEALTHY, seed=2), silent, tolerance=0.05)
    assert not outcome.passed
    assert "attached to no metadata object" in outcome.failures[0]
    assert "FAIL the DSA sentinel attached to no metadata object" in outcome.explain()


def test_batch_one_is_judged_on_its_own(batch1):
    outcome = judge_case(1, batch1, batch1, CLEAN, tolerance=0.05)
    assert [v.check for v in outcome.verdicts] == ["sentinel"]
    assert outcome.passed


def test_k1_never_shows_the_bug(batch1):
    one = stats((0.9,), seed=3)
    outcome = judge_case(32, one, stats((0.9,), seed=4), CLEAN, tolerance=0.05)
    assert outcome.passed
    assert "conditional_decay" not in {v.check for v in outcome.verdicts}  # needs K >= 2


def test_min_al_from_the_yaml_applies_to_its_prompt_set(batch1):
    keys = ("TestGLM52NVFP4::test_acceptance[k4-eager]", "TestGLM52NVFP4::test_acceptance[k4]")
    yaml_path = DATA / "acceptance_length.yaml"
    assert upstream_reference(yaml_path, keys, prompt_set="prompts") is None
    reference = upstream_reference(yaml_path, keys, prompt_set="mt_bench")
    assert reference.min_al == pytest.approx(0.95 * reference.ref_al)
    low = stats((0.7, 0.7, 0.7, 0.7), seed=5)  # AL about 2.7, below min_al 3.58
    outcome = judge_case(1, low, low, CLEAN, tolerance=0.05, upstream=reference)
    (gate,) = [v for v in outcome.verdicts if v.check == "upstream_min_al"]
    assert gate.regressed and not outcome.passed
    healthy = judge_case(1, batch1, batch1, CLEAN, tolerance=0.05, upstream=reference)
    assert healthy.passed, healthy.explain()


def test_missing_file_or_key_means_no_min_al_gate(tmp_path):
    assert upstream_reference(None, ("A::b",)) is None
    assert upstream_reference(tmp_path / "none.yaml", ("A::b",)) is None
    path = tmp_path / "refs.yaml"
    path.write_text("TestX::test_acceptance[k3]:\n  ref_al: 3.0\n  min_al: 2.85\n")
    assert upstream_reference(path, ("TestX::test_acceptance[k4]",)) is None
    reference = upstream_reference(
        path, ("TestX::test_acceptance[k3-graph]", "TestX::test_acceptance[k3]")
    )
    assert reference.min_al == pytest.approx(2.85)


# -- upstream's own keys gate our cases (issue 11) --------------------------------------------

UPSTREAM_YAML = DATA / "upstream_acceptance_length.yaml"


@pytest.mark.parametrize(
    ("case", "key"),
    [
        (Case(GLM52, 8, 3, True), "TestGLM52NVFP4::test_mtp_index_share"),
        (Case(DEEPSEEK_V32, 32, 1, False), "TestDeepSeekV32::test_fp8_blockscale[baseline_mtp1]"),
    ],
)
def test_an_upstream_shaped_file_gates_a_case_by_its_upstream_key(case, key):
    reference = upstream_reference(UPSTREAM_YAML, case.reference_keys(), prompt_set="prompts")
    assert reference is not None and reference.key == key


def test_the_old_keys_left_the_upstream_file_without_effect():
    """What pointing REGRESS_TRTLLM_ACCEPTANCE_YAML at upstream's file did before issue 11."""
    old = ("TestGLM52::test_acceptance[k3-graph]", "TestGLM52::test_acceptance[k3]")
    assert upstream_reference(UPSTREAM_YAML, old, prompt_set="prompts") is None


def test_a_null_min_al_raises_as_upstream_does(tmp_path):
    path = tmp_path / "refs.yaml"
    path.write_text("TestGLM52NVFP4::test_mtp_index_share:\n  ref_al: 3.4\n  min_al: null\n")
    with pytest.raises(UsageError, match="min_al: null"):
        upstream_reference(path, Case(GLM52, 8, 3, True).reference_keys())


@pytest.mark.skipif(
    not os.environ.get("REGRESS_UPSTREAM_DATA"),
    reason="set REGRESS_UPSTREAM_DATA to a folder holding upstream's acceptance_length.yaml",
)
def test_the_real_upstream_file_gates_both_models():
    path = Path(os.environ["REGRESS_UPSTREAM_DATA"]) / "acceptance_length.yaml"
    for case in (Case(GLM52, 8, 3, True), Case(DEEPSEEK_V32, 8, 1, True)):
        reference = upstream_reference(path, case.reference_keys(), prompt_set="prompts")
        assert reference is not None and reference.key == case.model.acceptance_key
        assert reference.min_al > 1.0
