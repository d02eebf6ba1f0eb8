"""Upstream's own worker drives the real metadata: the seam, the worker's calls, its findings."""

from __future__ import annotations

import threading

import pytest
from _upstream_trees import build_caller_tree, build_tree

from regress.check.caller import MODEL_CALLER, DraftSettings, caller_checkpoints
from regress.check.check import _load, run_check
from regress.check.steps import target_forward
from regress.dsa.batch import Batch
from regress.sandbox import Ledger
from regress.sandbox.eras import Settings, all_values, plan_for
from regress.sandbox.shells import Sandbox
from regress.tree.source import resolve_source_tree

WORKER = "upstream tensorrt_llm/_torch/speculative/eagle3.py::MTPEagleWorker._forward_impl"


def _by_name(report):
    return {r.name: r for r in report.results}


def _loaded(root):
    plan = plan_for(resolve_source_tree(root))
    ledger = Ledger()
    sandbox = Sandbox(
        plan.checkout, plan.real, all_values(plan, Settings()), env=plan.env, ledger=ledger
    )
    return plan, ledger, sandbox


def test_the_seam_yields_after_every_outermost_metadata_call_of_the_worker(tmp_path):
    plan, ledger, sandbox = _loaded(build_caller_tree(tmp_path))
    with sandbox:
        up = _load(sandbox, plan, ledger)
        md, _ = target_forward(up, Batch((4, 4, 4, 4), max_draft_len=3))
        run = caller_checkpoints(up, md, DraftSettings(3, [4, 1, 2, 3]))
        seen = [(label, md.req_idx_per_token[: md.num_tokens].tolist()) for label, md in run]
    assert run.caller == WORKER and run.kind == "upstream" and not run.fallback
    labels = [label for label, _ in seen]
    assert labels == [
        "prepare_for_spec_dec#1",
        "draft_forward_0",
        "on_update#1",  # _seq_lens filled with 1
        "on_update#2",  # the num_contexts = 0 setter calls on_update()
        "update_for_spec_dec#1",
        "draft_forward_1",
        "update_for_spec_dec#2",
        "draft_forward_2",
        "update_for_spec_dec#3",
        "restore_from_spec_dec#1",
        "on_update#3",  # the restore puts num_contexts back (a setter)
        "on_update#4",
    ]  # nested calls (update_for_spec_dec -> on_update_kv_lens) are not checkpoints
    assert dict(seen)["update_for_spec_dec#1"] == [0, 1, 2, 3]
    # the acceptance regress planned (full, zero, partial) is what upstream's worker accepted
    assert run.result["new_tokens_lens"].tolist() == [4, 1, 2, 3]
    assert not [t for t in threading.enumerate() if t.name.startswith("Thread") and t.daemon]


def test_a_consumer_that_stops_early_unwinds_the_worker_through_its_own_cleanup(tmp_path):
    plan, ledger, sandbox = _loaded(build_caller_tree(tmp_path))
    with sandbox:
        up = _load(sandbox, plan, ledger)
        md, _ = target_forward(up, Batch((4, 4, 4, 4), max_draft_len=3))
        wrapped = type(md).update_for_spec_dec
        run = caller_checkpoints(up, md, DraftSettings(3, [4, 1, 2, 3]))
        for label, _ in run:
            if label == "update_for_spec_dec#1":
                break
        unwrapped = "update_for_spec_dec" not in md.__dict__
        restored = not md._saved and md.seq_lens.tolist() == [4, 4, 4, 4]
    assert unwrapped and type(md).update_for_spec_dec is wrapped
    # the final SpecWorkerBase.forward restored the metadata when the loop was abandoned
    assert restored and "draft_forward_1" not in run.calls
    assert run.calls[-2:] == ["on_update#3", "on_update#4"]


def test_regress_check_names_upstreams_worker_and_fails_a_pre_fix_tree_at_its_call(tmp_path):
    post = run_check(build_caller_tree(tmp_path / "post"), scenarios=["req_idx_map"])
    pre = run_check(build_caller_tree(tmp_path / "pre", fix="pre"), scenarios=["req_idx_map"])
    assert post.exit_code == 0 and pre.exit_code == 1
    uniform = _by_name(pre)["req_idx_map/uniform_5x4"]
    assert uniform.note == f"caller: {WORKER}"
    first = uniform.violations[0]
    assert first.details["step"] == "update_for_spec_dec#1"
    assert first.details["actual"][:4] == [0, 0, 0, 0]
    # a layout the worker never receives is driven by the model, and the report says so
    tree = _by_name(post)["req_idx_map/tree_3_1_4_1"]
    assert tree.note.startswith(f"caller: {MODEL_CALLER}") and "never receives" in tree.note
    # the worker module imported AttentionMetadata from a package whose __init__ never ran
    shells = {f.name for f in post.ledger.fakes.values() if f.kind == "shell"}
    assert "tensorrt_llm._torch.attention.backends.AttentionMetadata" in shells


def test_without_a_worker_the_model_runs_and_the_report_says_why(tmp_path):
    report = run_check(
        build_tree(tmp_path, "C", "post"), scenarios=["req_idx_map", "draft_callers"]
    )
    results = _by_name(report)
    assert results["req_idx_map/uniform_5x4"].note.startswith(f"caller: {MODEL_CALLER}")
    assert "no one-model speculative worker" in results["req_idx_map/uniform_5x4"].note
    assert results["draft_callers"].status == "skip"


def test_a_worker_that_never_lets_the_metadata_rebuild_is_a_named_finding(tmp_path):
    report = run_check(
        build_caller_tree(tmp_path, workers=("eagle3", "mtp")), scenarios=["draft_callers"]
    )
    mtp = _by_name(report)["draft_callers/MTPWorker"]
    assert mtp.status == "warn" and "MTPWorker never lets the metadata rebuild" in mtp.note
    v = mtp.violations[0]
    assert v.check == "no_rebuild_point" and v.details["step"] == "draft_forward_0"
    assert _by_name(report)["draft_callers/MTPEagleWorker"].status == "pass"
    assert report.exit_code == 0  # a finding about the caller, not a verdict on the metadata


def test_a_planned_acceptance_that_does_not_take_effect_is_a_gap_not_a_pass(tmp_path, monkeypatch):
    import regress.sandbox.workers as workers

    original = workers.forward_inputs

    def wrong(*args, **kwargs):
        plan = original(*args, **kwargs)
        plan.accepted = [1] * len(plan.accepted)  # regress believes nothing will be accepted
        return plan

    monkeypatch.setattr(workers, "forward_inputs", wrong)
    report = run_check(build_caller_tree(tmp_path), scenarios=["draft_callers"])
    assert report.exit_code == 3
    assert "do not drive this worker as intended" in report.error


def test_the_restore_must_bring_back_num_contexts_and_request_types(tmp_path):
    new = run_check(build_caller_tree(tmp_path / "n"), scenarios=["draft_callers"])
    old = run_check(
        build_caller_tree(tmp_path / "o", restore_contexts=False), scenarios=["draft_callers"]
    )
    name = "draft_callers/MTPEagleWorker/mixed_ctx_gen"
    assert _by_name(new)[name].status == "pass"
    finding = _by_name(old)[name]
    assert finding.status == "warn" and "num_contexts is 0" in finding.violations[0].message


@pytest.mark.parametrize("gate", ["old", "new", "unknown"])
def test_fused_metadata_runs_the_eager_path_under_either_gate(tmp_path, gate):
    report = run_check(build_caller_tree(tmp_path, fused=gate), scenarios=["fused_metadata"])
    result = _by_name(report)["fused_metadata/eager_path"]
    assert result.status == "pass" and report.exit_code == 0
    assert (
        "the fused kernel (compiled Triton, fused_dsa_decode_metadata) was not run" in result.note
    )
    assert result.steps  # the eager chain's maps were checked at the worker's calls


def test_without_forcing_the_newer_gate_the_fused_stub_is_reached_a_gap(tmp_path, monkeypatch):
    import regress.sandbox.eras as eras

    monkeypatch.setattr(eras, "ENV", {"TRTLLM_FUSED_DSA_METADATA": "0"})
    monkeypatch.setattr(eras, "fused_gates", lambda path: ())  # the gate not read from source
    report = run_check(build_caller_tree(tmp_path, fused="new"), scenarios=["req_idx_map"])
    assert report.exit_code == 3 and "fused_dsa_decode_metadata" in report.error


def test_an_event_recorded_in_prepare_is_faked_not_a_false_failure(tmp_path):
    report = run_check(build_caller_tree(tmp_path, event=True), scenarios=["sentinel_lifecycle"])
    assert report.exit_code == 0, report.lines()
    faked = {f.name for f in report.ledger.fakes.values() if f.kind == "cuda"}
    assert {"torch.cuda.Event", "torch.cuda.Event.record"} <= faked


@pytest.mark.parametrize(
    ("variant", "name", "status"),
    [
        ({"v4": "post"}, "DeepseekV4TrtllmAttentionMetadata", "pass"),
        ({"v4": "stale"}, "DeepseekV4TrtllmAttentionMetadata", "fail"),
        ({"v4": "post", "v4_own_modules": True}, "DeepseekV4TrtllmAttentionMetadata", "pass"),
        ({"v4": "stale", "v4_own_modules": True}, "DeepseekV4TrtllmAttentionMetadata", "fail"),
        ({"qsa": "post"}, "QSAAttentionMetadata", "pass"),
        ({"qsa": "pre"}, "QSAAttentionMetadata", "fail"),
    ],
)
def test_every_dsa_family_class_and_its_own_map_is_checked(tmp_path, variant, name, status):
    report = run_check(build_caller_tree(tmp_path, **variant), scenarios=["metadata_classes"])
    result = _by_name(report)[f"metadata_classes/{name}"]
    assert result.status == status
    wanted = "qsa_req_idx_per_token" if "qsa" in variant else "req_idx_per_token"
    assert result.note.startswith(f"maps checked: {wanted}") and WORKER in result.note
    if status == "fail":
        assert wanted in result.violations[0].message
    assert _by_name(report)["metadata_classes/DSAtrtllmAttentionMetadata"].status == "pass"


def test_a_subclass_runs_with_its_own_params_and_indexer_and_its_pages_are_not_judged(tmp_path):
    """Upstream's DeepSeek-V4 metadata type-checks its own params, calls its own indexer's
    prepare() (both siblings, run for real) and writes indexer K through its compressor, not
    DSA's slot mapping: the class is built and its maps judged; DSA's pages check stays DSA's."""
    tree = build_caller_tree(tmp_path, v4="post", v4_own_modules=True)
    v4 = tree / "tensorrt_llm/_torch/attention/backends/sparse/deepseek_v4/metadata.py"
    v4.write_text(
        v4.read_text().replace(
            "        super().prepare()\n",
            "        super().prepare()\n"
            "        self.slot_mapping_fp8.zero_()  # DSA's write path, unused here\n",
            1,
        )
    )
    report = run_check(tree, scenarios=["metadata_classes"])
    result = _by_name(report)["metadata_classes/DeepseekV4TrtllmAttentionMetadata"]
    assert result.status == "pass", result.note
    assert (
        "tensorrt_llm._torch.attention.backends.sparse.deepseek_v4.params"
        in report.ledger.real_modules
    )


@pytest.mark.parametrize(("variant", "status"), [("post", "pass"), ("stale", "fail")])
def test_ragged_verification_row_maps_follow_the_device_windows(tmp_path, variant, status):
    report = run_check(build_caller_tree(tmp_path, ragged=variant), scenarios=["ragged_verify"])
    result = report.results[0]
    assert result.status == status
    assert "row_req_idx_cuda" in result.note and "attn_row_req_idx_cuda" in result.note
    if status == "fail":
        assert result.violations[0].details["map"] == "attn_row_req_idx_cuda"


@pytest.mark.parametrize(("variant", "status"), [("post", "pass"), ("stale", "fail")])
def test_a_class_that_needs_the_ragged_switch_gets_it_from_its_constructor(
    tmp_path, variant, status
):
    """Newer DSA metadata (186080bb) allocates the row buffers from ``enable_ragged_verification``
    in its constructor and refuses windows installed without it: the scenario enables it as
    upstream does, so the tree is judged (a stale row map still fails), never refused."""
    tree = build_caller_tree(tmp_path, ragged=variant, ragged_switch=True)
    report = run_check(tree, scenarios=["ragged_verify"])
    result = report.results[0]
    assert result.status == status, result.note
    assert "enable_ragged_verification=True passed to the constructor" in result.note
    if status == "fail":
        assert result.violations[0].details["map"] == "attn_row_req_idx_cuda"


def test_a_class_without_ragged_verification_is_skipped(tmp_path):
    report = run_check(build_caller_tree(tmp_path), scenarios=["ragged_verify"])
    result = report.results[0]
    assert (result.status, result.note) == ("skip", "this metadata has no ragged verification")
    assert report.exit_code == 0


def test_upstream_refusing_the_windows_regress_chose_is_a_gap_not_a_fail(tmp_path):
    tree = build_caller_tree(tmp_path, ragged="post", ragged_switch="refuses")
    report = run_check(tree, scenarios=["ragged_verify"])
    result = report.results[0]
    assert result.status == "gap" and not result.violations
    assert "the ragged-verification input regress chose" in result.note
    assert "every verification window must hold the bonus and a draft" in result.note
    assert report.exit_code == 3


@pytest.mark.parametrize(("variant", "status"), [("post", "pass"), ("stale", "fail")])
def test_a_separate_draft_kv_cache_is_switched_by_the_worker_and_judged(tmp_path, variant, status):
    report = run_check(build_caller_tree(tmp_path, draft_kv=variant), scenarios=["draft_kv_cache"])
    result = report.results[0]
    assert result.status == status
    assert "called prepare_for_draft_forward()" in result.note
    if status == "pass":
        assert "draft_forward_1: draft pages" in result.note


def test_a_tree_given_as_a_relative_path_names_its_worker_too(tmp_path, monkeypatch):
    build_caller_tree(tmp_path)
    monkeypatch.chdir(tmp_path)  # a bisect probe checks "." in its worktree
    report = run_check(".", scenarios=["draft_callers"])
    assert report.exit_code == 0, report.lines()
    assert _by_name(report)["draft_callers/MTPEagleWorker"].note.startswith(
        "caller: upstream tensorrt_llm/_torch/speculative/eagle3.py::MTPEagleWorker."
    )


def test_thread_context_is_entered_in_the_workers_thread(tmp_path):
    """A per-thread recorder (the stale-state write log) must be entered where the worker runs."""
    from contextlib import contextmanager

    entered: list[str] = []

    @contextmanager
    def record():
        entered.append(threading.current_thread().name)
        yield

    plan, ledger, sandbox = _loaded(build_caller_tree(tmp_path))
    with sandbox:
        up = _load(sandbox, plan, ledger)
        md, _ = target_forward(up, Batch((4, 4, 4, 4), max_draft_len=3))
        run = caller_checkpoints(up, md, DraftSettings(3, [4, 1, 2, 3]), thread_context=record)
        labels = [label for label, _ in run]
    assert "update_for_spec_dec#1" in labels
    assert entered and entered[0] != threading.current_thread().name
