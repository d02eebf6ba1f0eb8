"""regress check on regress's own fake trees: verdicts per era and variant, values, the ledger."""

from __future__ import annotations

import types

import pytest
import torch
from _upstream_trees import build_tree, tree_files

from regress.check.check import run_check
from regress.dsa.invariants import check_announced_width, check_slot_ownership
from regress.sandbox.fakes import FakeKVCacheManager


def _statuses(report):
    return {r.name: r.status for r in report.results}


@pytest.mark.parametrize("era", ["A", "B", "C"])
def test_pre_fix_tree_breaks_the_map_contract_in_every_layout(tmp_path, era):
    report = run_check(build_tree(tmp_path, era, "pre"), scenarios=["req_idx_map"])
    assert report.status == "fail" and report.exit_code == 1
    assert report.era == era
    assert all(s == "fail" for s in _statuses(report).values())
    first = report.results[0]  # uniform_5x4, draft step 0: the stale map of the issue
    step = next(s for s in first.steps if s.step == "draft_step_0")
    assert step.req_idx_per_token == [0, 0, 0, 0]
    assert {v.check for v in first.violations} == {"req_idx_map", "indexer_k_slots"}
    slots = next(v for v in first.violations if v.check == "indexer_k_slots")
    assert slots.details["owner_of_written_block"] == [0, 0, 0, 0]  # all in request 0's pages


@pytest.mark.parametrize("era", ["A", "B", "C"])
def test_post_fix_tree_holds_every_upstream_contract(tmp_path, era):
    report = run_check(
        build_tree(tmp_path, era, "post", guard=True),
        scenarios=["req_idx_map", "shape_announcement", "runner_guard"],
    )
    assert report.status == "pass" and report.exit_code == 0, report.lines()
    step = next(s for s in report.results[0].steps if s.step == "draft_step_3")
    assert step.req_idx_per_token == [0, 1, 2, 3]


def test_arange_only_refresh_is_caught_by_the_zero_length_row(tmp_path):
    report = run_check(build_tree(tmp_path, "B", "arange"), scenarios=["req_idx_map"])
    assert report.exit_code == 1
    failed = [n for n, s in _statuses(report).items() if s == "fail"]
    assert failed == ["req_idx_map/zero_length_row"]


def test_runner_without_the_guard_breaks_the_announcement(tmp_path):
    report = run_check(build_tree(tmp_path, "B", "post", guard=False), scenarios=["runner_guard"])
    assert report.exit_code == 1
    found = report.results[0].violations
    assert {v.check for v in found} == {"kv_lens_2d_width"}
    assert any(v.details.get("shape") == [32, 1] for v in found)  # one column, next_n = 4


def test_runner_absent_is_a_reported_skip_not_a_verdict(tmp_path):
    report = run_check(build_tree(tmp_path, "B", "post"), scenarios=["runner_guard"])
    assert report.exit_code == 0
    assert report.results[0].status == "skip" and "runner.py" in report.results[0].note


@pytest.mark.parametrize("unrun", ["gap", "error"])
def test_one_scenario_without_a_verdict_makes_the_check_a_gap_unless_one_failed(unrun):
    """ "The contracts hold" (exit 0) only when every scenario that applies ran: one gap among
    passes used to give exit 0 (a DeepSeek-V4 class the sandbox could not build, 2026-12-02)."""
    from regress.check.report import CheckReport
    from regress.check.results import ScenarioResult

    def report(*statuses):
        out = CheckReport(
            source="t", results=[ScenarioResult(f"s{i}", s) for i, s in enumerate(statuses)]
        )
        out.finish()
        return out

    assert report("pass", "skip", "warn").exit_code == 0
    gap = report("pass", unrun, "pass")
    assert gap.exit_code == 3 and "s1" in gap.error
    assert report("pass", unrun, "fail").exit_code == 1


def test_not_a_tree_is_bad_input(tmp_path):
    report = run_check(tmp_path)
    assert report.status == "not-a-tree" and report.exit_code == 2


def test_an_unloadable_tree_is_a_gap_naming_the_missing_piece(tmp_path):
    build_tree(tmp_path, "B", "post")
    rel = "tensorrt_llm/_torch/attention_backend/sparse/dsa/metadata.py"
    text = tree_files("B", "post")[rel].replace(
        "import tensorrt_llm\n", "import tensorrt_llm\nfrom tensorrt_llm._utils import brand_new\n"
    )
    text = text.replace(
        "        super().__post_init__()\n",
        "        super().__post_init__()\n        brand_new()\n",
        1,
    )
    (tmp_path / rel).write_text(text)
    report = run_check(tmp_path, scenarios=["req_idx_map"])
    assert report.exit_code == 3
    assert "tensorrt_llm._utils.brand_new" in report.error and "metadata.py:" in report.error


def test_the_report_lists_everything_faked(tmp_path):
    report = run_check(build_tree(tmp_path, "B", "post"), scenarios=["req_idx_map"])
    doc = report.to_json()
    faked = {(f["kind"], f["name"]) for f in doc["sandbox"]["faked"]}
    assert ("value", "tensorrt_llm.deep_gemm.get_paged_mqa_logits_metadata") in faked
    assert ("shim", "DSAtrtllmAttentionMetadata.sparse_attention_config") in faked  # era B skew
    assert ("env", "TRTLLM_FUSED_DSA_METADATA") in faked
    assert any(k == "cuda" for k, _ in faked)
    assert (
        "tensorrt_llm._torch.attention_backend.sparse.dsa.metadata"
        in doc["sandbox"]["real_modules"]
    )


def _md(seq_lens, slots, request_ids=None):
    return types.SimpleNamespace(
        seq_lens=torch.tensor(seq_lens),
        num_tokens=sum(seq_lens),
        request_ids=request_ids or list(range(len(seq_lens))),
        slot_mapping_fp8=torch.tensor(slots, dtype=torch.int64),
    )


def test_slot_ownership_flags_foreign_pages_and_passes_own_pages():
    kvm = FakeKVCacheManager(3)
    stride = kvm.indexer_block_stride()
    own = [0 * stride, 100 * stride + 5, 200 * stride]  # blocks 0, 100, 200: requests 0, 1, 2
    assert check_slot_ownership(_md([1, 1, 1], own), kvm) == []
    foreign = [0, 1, 2]  # all in block 0
    (v,) = check_slot_ownership(_md([1, 1, 1], foreign), kvm)
    assert v.details["owner_of_written_block"] == [0, 0, 0]


def test_announced_width_checks_either_buffer_shape():
    wide = types.SimpleNamespace(max_draft_tokens=3, kv_lens_cuda_2d=torch.zeros(32, 4))
    narrow = types.SimpleNamespace(max_draft_tokens=0, kv_lens_cuda_2d=torch.zeros(32, 1))
    flat = types.SimpleNamespace(max_draft_tokens=3, kv_lens_expanded_cuda=torch.zeros(8))
    assert check_announced_width(wide, 32, 4) == []
    assert {v.check for v in check_announced_width(narrow, 32, 4)} == {"kv_lens_2d_width"}
    assert len(check_announced_width(narrow, 32, 4)) == 2
    assert len(check_announced_width(flat, 4, 4)) == 1


@pytest.mark.parametrize(("where", "status"), [("after", "pass"), ("before", "gap")])
def test_runner_failing_off_the_checked_path_is_a_note_before_it_a_gap(tmp_path, where, status):
    build_tree(tmp_path, "C", "post", guard=True)
    rel = "tensorrt_llm/tools/layer_wise_benchmarks/runner.py"
    text = tree_files("C", "post", guard=True)[rel]
    anchor = "        attn_metadata.prepare()\n"
    boom = "        from tensorrt_llm._torch.models import build_inputs\n        build_inputs()\n"
    text = text.replace(anchor, anchor + boom if where == "after" else boom + anchor)
    (tmp_path / rel).write_text(text)
    report = run_check(tmp_path, scenarios=["runner_guard"])
    (result,) = report.results
    assert result.status == status and "build_inputs" in result.note
    assert report.exit_code == (0 if status == "pass" else 3)  # a gap is no verdict
