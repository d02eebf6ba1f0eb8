"""The harness adapter: our batch sweep on an LLM upstream's test built, and which gate reads what."""

from __future__ import annotations

import pytest
from _trtllm_fakes import FakeBuiltLLM, fake_trtllm_package

from regress.acceptance.references import Workload, record_reference, reference_entry
from regress.errors import UsageError
from regress.trtllm import harness
from regress.trtllm.harness import assert_acceptance_sweep_for_llm, sweep_batch_sizes, sweep_llm

KEY = "TestGLM52NVFP4::test_mtp_index_share"
PROMPTS = [f"prompt {i}: " + "x" * i for i in range(40)]
TOKENS = 48


@pytest.fixture(autouse=True)
def trtllm(monkeypatch):
    return fake_trtllm_package(monkeypatch)


def sweep(llm, **options):
    return sweep_llm(KEY, llm, prompts=PROMPTS, max_new_tokens=TOKENS, **options)


def checks(outcome, batch=None):
    return {v.check for v in outcome.verdicts if batch is None or v.batch_size == batch}


def test_a_healthy_llm_passes_the_sweep_and_every_gate_ran():
    llm = FakeBuiltLLM()
    outcome = sweep(llm)
    assert outcome.passed, outcome.explain()
    assert [r.batch_size for r in outcome.report.runs] == [1, 8, 32]
    assert llm.max_in_flight == 32  # the batch under test is what was in flight
    for b in (8, 32):
        assert {"batch_invariance", "conditional_decay", "no_draft_accepted"} <= checks(outcome, b)
    assert checks(outcome, 1) == {"no_draft_accepted"}
    assert not llm.shut_down  # upstream's `with LLM(...)` owns it


def test_the_stale_map_shape_fails_at_batch_8_and_32_only():
    outcome = sweep(FakeBuiltLLM(stale_above=1))
    failed = {(v.check, v.batch_size) for v in outcome.verdicts if v.regressed}
    assert ("batch_invariance", 8) in failed and ("batch_invariance", 32) in failed
    assert all(b != 1 for _, b in failed)
    with pytest.raises(AssertionError, match="REGRESSION batch_invariance batch 8"):
        assert_acceptance_sweep_for_llm(KEY, FakeBuiltLLM(stale_above=1), prompts=PROMPTS)


def test_an_llm_that_accepts_nothing_fails_by_name():
    outcome = sweep(FakeBuiltLLM(dead=True))
    assert {v.check for v in outcome.verdicts if v.regressed} == {"no_draft_accepted"}


def clean_counters():
    """Batch 1's iteration counters on an LLM that ran nothing before."""
    return sweep(FakeBuiltLLM(), batch_sizes=(1,)).report.runs[0].stats.counters


def _upstream_yaml(tmp_path, min_al):
    path = tmp_path / "acceptance_length.yaml"
    path.write_text(f"{KEY}:\n  ref_al: {min_al / 0.95:.4f}\n  min_al: {min_al}\n")
    return path


UPSTREAM_WORKLOAD = [  # what upstream's task.evaluate(llm) left in the stats: AL 2.0
    {
        "specDecodingStats": {
            "numDraftTokens": 3,
            "numAcceptedTokens": 1,
            "numRequestsWithDraftTokens": 1,
        }
    }
] * 10


def test_upstreams_key_gates_upstreams_workload_only(tmp_path):
    """Upstream's figure judges the iterations the LLM ran before the call, not our sweep."""
    llm = FakeBuiltLLM(held=UPSTREAM_WORKLOAD)
    outcome = sweep(llm, upstream_references=_upstream_yaml(tmp_path, 2.5))
    (gate,) = [v for v in outcome.verdicts if v.check == "upstream_min_al"]
    assert gate.regressed and gate.batch_size is None and gate.details["value"] == 2.0
    assert gate.details["workload"].startswith("upstream's")
    # The sweep's own runs are healthy (AL ~ 3.3) and untouched by upstream's key.
    assert all(not v.regressed for v in outcome.verdicts if v.check != "upstream_min_al")
    assert outcome.report.runs[0].stats.counters == clean_counters()


def test_upstreams_iterations_never_leak_into_the_first_run():
    llm = FakeBuiltLLM(held=UPSTREAM_WORKLOAD * 50)
    outcome = sweep(llm)
    assert outcome.report.runs[0].stats.counters == clean_counters()


def test_upstreams_gate_without_stats_is_a_failure_not_a_pass(tmp_path):
    outcome = sweep(FakeBuiltLLM(), upstream_references=_upstream_yaml(tmp_path, 1.5))
    assert not outcome.passed
    assert "enable_iter_perf_stats=True" in outcome.problems[0]


def test_our_reference_applies_to_the_workload_it_was_measured_on(tmp_path):
    healthy = sweep(FakeBuiltLLM())
    workload = Workload.of(PROMPTS, max_new_tokens=TOKENS, max_draft_len=3)
    path = tmp_path / "ours.yaml"
    record_reference(
        path, KEY, reference_entry(healthy.report.runs[0].stats, workload, measured={})
    )
    again = sweep(FakeBuiltLLM(), references=path)
    assert again.lookup.key == KEY and again.passed, again.explain()
    assert {"upstream_min_al", "reference_per_position"} <= checks(again, 8)
    weaker = sweep(FakeBuiltLLM(conditional=(0.6, 0.5, 0.4)), references=path)
    assert ("upstream_min_al", 1) in {
        (v.check, v.batch_size) for v in weaker.verdicts if v.regressed
    }
    other = sweep_llm(
        KEY, FakeBuiltLLM(), prompts=PROMPTS[:20], max_new_tokens=TOKENS, references=path
    )
    assert other.lookup.reference is None and "num_prompts=40 (this run: 20)" in other.explain()


def test_upstreams_file_as_our_references_is_not_applied(tmp_path):
    outcome = sweep(FakeBuiltLLM(), references=_upstream_yaml(tmp_path, 9.0))
    assert outcome.passed and "no workload recorded" in outcome.explain()


def test_batch_sizes_follow_the_llms_cap():
    assert sweep_batch_sizes(2048, None) == (1, 8, 32)
    assert sweep_batch_sizes(24, None) == (1, 8, 24)  # DeepSeek-V3.2's baseline_mtp1
    assert sweep_batch_sizes(8, None) == (1, 8)
    assert sweep_batch_sizes(40, (8, 1)) == (1, 8)
    with pytest.raises(UsageError, match=r"must lie in 1\.\.24"):
        sweep_batch_sizes(24, (1, 32))
    outcome = sweep(FakeBuiltLLM(max_batch_size=24))
    assert [r.batch_size for r in outcome.report.runs] == [1, 8, 24]


def test_attention_dp_is_noted():
    outcome = sweep(FakeBuiltLLM(enable_attention_dp=True))
    assert any("attention DP is on" in n for n in outcome.notes)


def test_an_llm_without_mtp_is_refused():
    llm = FakeBuiltLLM()
    llm.args.speculative_config = None
    with pytest.raises(UsageError, match="no MTP speculative_config"):
        sweep(llm)
    with pytest.raises(UsageError, match="needs prompts"):
        sweep_llm(KEY, FakeBuiltLLM(), prompts=[])


def test_the_engine_never_shuts_down_the_borrowed_llm():
    llm = FakeBuiltLLM()
    engine = harness.BuiltLlmEngine(llm, model="m")
    borrowed = engine._build_llm(8, 3)
    borrowed.shutdown()
    assert not llm.shut_down and borrowed.get_stats(timeout=0) == []
