"""``llm_configs``: every configuration the GPU tests build, against a fake tree's ``llm_args.py``."""

from __future__ import annotations

import pytest
from _llm_args_trees import build_llm_args_tree

from regress.check.catalog import SCENARIOS
from regress.check.check import run_check
from regress.check.llm_configs import NAME, REFUSED
from regress.install import install_hint
from regress.trtllm.integration import integration_specs


def _check(root):
    report = run_check(root, scenarios=[NAME])
    results = [r for r in report.results if r.name.startswith(NAME)]
    return report, results


def _failed(results):
    return {r.name.removeprefix(f"{NAME}/"): r for r in results if r.status == "fail"}


def test_it_runs_by_default():
    [scenario] = [s for s in SCENARIOS if s.name == NAME]
    assert not scenario.opt_in and not scenario.per_cell


def test_the_clean_fake_accepts_every_case(tmp_path):
    report, results = _check(build_llm_args_tree(tmp_path))
    ids = [b.test_id for b in integration_specs(tmp_path)]
    assert [r.name for r in results] == [f"{NAME}/{i}" for i in ids]
    assert report.status == "pass", [(r.name, r.note) for r in results if r.status != "pass"]
    assert all("TorchLlmArgs.from_kwargs accepted" in r.note for r in results)
    # the config objects were upstream's: a field only the fake's class has is in the note
    glm = next(r for r in results if "TestGLM52NVFP4::test_index_share" in r.name)
    assert "sparse_attention_config" in glm.note and "moe_config" in glm.note


def test_a_renamed_field_fails_the_cases_that_pass_it(tmp_path):
    report, results = _check(build_llm_args_tree(tmp_path, "renamed_field"))
    failed = _failed(results)
    kv_cases = {
        b.test_id for b in integration_specs(tmp_path) if b.spec.use_kv_cache_manager_v2 is not None
    }
    assert report.status == "fail" and set(failed) == kv_cases and kv_cases
    violation = next(iter(failed.values())).violations[0]
    assert violation.check == REFUSED
    assert violation.details["field"] == "use_kv_cache_manager_v2"
    assert "KvCacheConfig: Extra inputs are not permitted" in violation.message


def test_a_validator_that_now_refuses_a_value_fails_with_its_message(tmp_path):
    _, results = _check(build_llm_args_tree(tmp_path, "refusing_validator"))
    failed = _failed(results)
    assert failed and all(name.startswith("TestGLM52NVFP4::") for name in failed)
    assert len(failed) == sum(1 for r in results if "TestGLM52NVFP4::" in r.name)
    violation = failed["TestGLM52NVFP4::test_acceptance[b8-k3-graph]@sm100"].violations[0]
    assert violation.details["field"] == "backend"
    assert "unknown MoE backend 'CUTEDSL'" in violation.message


def test_a_validator_of_the_arguments_class_runs(tmp_path):
    _, results = _check(build_llm_args_tree(tmp_path, "refusing_args_validator"))
    failed = _failed(results)
    assert failed and all(name.startswith("TestGLM52NVFP4::") for name in failed)
    violation = next(iter(failed.values())).violations[0]
    assert violation.details["field"] == "TorchLlmArgs"
    assert "chunked prefill is not supported with MTP" in violation.message


def test_an_argument_removed_from_the_args_class_fails_every_case(tmp_path):
    _, results = _check(build_llm_args_tree(tmp_path, "removed_argument"))
    assert len(_failed(results)) == len(results)
    violation = results[0].violations[0]
    assert violation.details["field"] == "enable_iter_perf_stats"
    assert "not a field of TorchLlmArgs" in violation.message


def test_a_config_class_gone_from_the_module_is_named(tmp_path):
    _, results = _check(build_llm_args_tree(tmp_path, "removed_class"))
    failed = _failed(results)
    assert "TestGLM52NVFP4::test_index_share[b8-k3-graph-share]@sm100" in failed
    assert "TestDeepSeekV32::test_upstream_config[heuristic_topk_mtp1]@sm100" in failed
    assert "TestDeepSeekV32::test_acceptance[b8-k3-graph]@sm90" not in failed
    violation = next(iter(failed.values())).violations[0]
    assert violation.details["field"] == "DeepSeekSparseAttentionConfig"


def test_a_draft_length_the_config_does_not_keep_fails(tmp_path):
    _, results = _check(build_llm_args_tree(tmp_path, "draft_len_dropped"))
    failed = _failed(results)
    assert failed and all("-k1-" not in name for name in failed)
    violation = failed["TestGLM52NVFP4::test_acceptance[b8-k3-graph]@sm100"].violations[0]
    assert violation.details["field"] == "speculative_config.max_draft_len"
    assert "asked for K=3" in violation.message


def test_a_file_that_cannot_load_in_the_sandbox_is_a_gap_naming_what_it_needs(tmp_path):
    report, results = _check(build_llm_args_tree(tmp_path, "needs_a_stub"))
    assert [r.status for r in results] == ["gap"]
    assert report.status == "gap" and report.exit_code == 3
    assert "mpi_rank" in results[0].note and "cannot load in the sandbox" in results[0].note


def test_the_compiled_bindings_and_stubbed_enums_llm_args_uses_at_import_are_answered(tmp_path):
    """Upstream's file mirrors binding enums and names ``CpType`` members at import time."""
    report, results = _check(build_llm_args_tree(tmp_path, "uses_bindings"))
    assert report.status == "pass", [r.note for r in results if r.status != "pass"][:1]
    faked = {f.name: f.detail for f in report.ledger.fakes.values() if f.kind == "value"}
    assert "compiled binding" in faked["tensorrt_llm.bindings.executor.BatchingType"]
    assert "(ULYSSES)" in faked["tensorrt_llm.mapping.CpType"]


def test_a_deprecation_of_what_a_case_passes_is_named_and_passes(tmp_path):
    report, results = _check(build_llm_args_tree(tmp_path, "deprecated_spelling"))
    assert report.status == "pass"
    warned = {r.name for r in results if "upstream warned: num_nextn_predict_layers" in r.note}
    # upstream's DeepSeek-V3.2 test spells K num_nextn_predict_layers, GLM-5.2's max_draft_len; the
    # checkpoint-free run names no spelling, and mtp_kwargs then prefers num_nextn_predict_layers
    assert warned and all("TestDeepSeekV32::" in n or "test_trtllm_dummy" in n for n in warned)
    assert any("test_trtllm_dummy" in n for n in warned)
    assert not any("upstream warned" in r.note for r in results if "TestGLM52NVFP4::" in r.name)


def test_a_missing_package_is_a_gap_that_says_what_to_install(tmp_path):
    report, results = _check(build_llm_args_tree(tmp_path, "needs_a_package"))
    assert [r.status for r in results] == ["gap"] and report.exit_code == 3
    assert "No module named 'regress_test_absent_package'" in results[0].note
    assert install_hint("check") in results[0].note
    # the package is named with its install; no advice meant for regress's own developers
    assert "pip install regress_test_absent_package" in results[0].note
    assert "Mark it real or stubbed" not in results[0].note and ".." not in results[0].note


def test_a_tree_without_the_file_is_not_applicable(tmp_path):
    report, results = _check(build_llm_args_tree(tmp_path, with_file=False))
    assert [r.status for r in results] == ["skip"]
    assert "n/a: the tree has no tensorrt_llm/llmapi/llm_args.py" in results[0].note
    assert report.status == "pass"


@pytest.mark.parametrize("sm", [90, 100])
def test_every_integration_case_is_listed_once_per_architecture(tmp_path, sm):
    ids = [b.test_id for b in integration_specs(tmp_path)]
    assert len(ids) == len(set(ids))
    assert any(i.endswith(f"@sm{sm}") for i in ids)
