"""Case gates on synthetic runs: healthy passes, the stale-map signature and the sentinel fail."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from regress.acceptance.references import Workload, record_reference, reference_entry
from regress.acceptance.stats import summarize
from regress.acceptance.trace import RequestTrace
from regress.errors import UsageError
from regress.trtllm.cases import DEEPSEEK_V32, GLM52, Case
from regress.trtllm.gates import (
    NO_DRAFT_ACCEPTED,
    CounterpartRun,
    completion_failures,
    judge_case,
    no_acceptance,
    own_reference,
)
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
        NO_DRAFT_ACCEPTED,
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
    assert [v.check for v in outcome.verdicts] == ["sentinel", NO_DRAFT_ACCEPTED]
    assert outcome.passed


def test_k1_never_shows_the_bug(batch1):
    one = stats((0.9,), seed=3)
    outcome = judge_case(32, one, stats((0.9,), seed=4), CLEAN, tolerance=0.05)
    assert outcome.passed
    assert "conditional_decay" not in {v.check for v in outcome.verdicts}  # needs K >= 2


# -- the #18662 shape: a run that accepts nothing is a failure of its own ---------------------

DEAD = (0.0, 0.0, 0.0)


def test_al_one_fails_even_when_batch_one_is_just_as_dead():
    """V1 KV manager on DSA accepts nothing at every batch: every relative gate passes."""
    dead1, dead8 = stats(DEAD, seed=1), stats(DEAD, seed=2)
    assert dead1.acceptance_length == 1.0 and dead1.drafted > 0
    outcome = judge_case(8, dead1, dead8, CLEAN, tolerance=0.05)
    assert [v.check for v in outcome.verdicts if v.regressed] == [NO_DRAFT_ACCEPTED]
    assert "(the TensorRT-LLM #18662 shape)" in outcome.explain()
    batch_one = judge_case(1, dead1, dead1, CLEAN, tolerance=0.05)
    assert not batch_one.passed


def test_no_acceptance_passes_a_run_that_accepts_anything():
    finding = no_acceptance(8, stats((0.05, 0.0), seed=3))
    assert not finding.regressed and finding.details["accepted"] > 0


# -- the counterparts of the new axes --------------------------------------------------------


def test_v1_is_judged_against_v2_at_the_same_batch(batch1):
    """#18662 at partial strength: V1 loses acceptance at every batch, so its own series is
    batch-invariant; only the comparison with V2 sees it."""
    weak = (0.5, 0.4, 0.3, 0.3)
    v1_b1, v1_b8 = stats(weak, seed=4), stats(weak, seed=5)
    v2_b8 = stats(HEALTHY, seed=6)
    alone = judge_case(8, v1_b1, v1_b8, CLEAN, tolerance=0.05)
    assert alone.passed, alone.explain()
    other = CounterpartRun("kv_manager_parity", "KV manager V2", v2_b8)
    outcome = judge_case(8, v1_b1, v1_b8, CLEAN, tolerance=0.05, counterpart=other)
    (parity,) = [v for v in outcome.verdicts if v.check == "kv_manager_parity"]
    assert parity.regressed and parity.batch_size == 8
    assert parity.details["compared_with"] == "KV manager V2"
    assert "acceptance_length" in parity.details["regressed_metrics"]


def test_index_share_is_judged_on_the_decay_against_share_off(batch1):
    """#15806: a stash from the rejected branch makes later draft steps worse, depth by depth."""
    share_b1 = stats(STALE_MAP, seed=7)  # share on decays at batch 1 too: the series passes
    share_b8 = stats(STALE_MAP, seed=8)
    off_b8 = stats(HEALTHY, seed=9)
    other = CounterpartRun("index_share_decay", "share off", off_b8)
    outcome = judge_case(8, share_b1, share_b8, CLEAN, tolerance=0.05, counterpart=other)
    failed = {v.check for v in outcome.verdicts if v.regressed}
    assert failed == {"index_share_decay"}, outcome.explain()
    (decay,) = [v for v in outcome.verdicts if v.check == "index_share_decay"]
    assert decay.details["steepening"] > decay.details["threshold"]


def test_a_healthy_counterpart_passes(batch1):
    other = CounterpartRun("index_share_decay", "share off", stats(HEALTHY, seed=10))
    outcome = judge_case(
        8, batch1, stats(HEALTHY, seed=11), CLEAN, tolerance=0.05, counterpart=other
    )
    assert outcome.passed, outcome.explain()
    assert "index_share_decay" in {v.check for v in outcome.verdicts}


def test_pool_fill_failures_name_the_abort_and_the_missing_requests():
    assert completion_failures(64, 64) == []
    assert completion_failures(64, 60) == ["4 of 64 requests did not finish"]
    (abort,) = completion_failures(64, 0, error="engine died")[:1]
    assert "indexer cache pool was full: engine died" in abort


# -- our own references, gated on the workload they were measured on -------------------------

WORKLOAD = Workload(max_draft_len=4, max_new_tokens=256, num_prompts=80, prompts_digest="abc")
KEYS = ("TestGLM52NVFP4::test_acceptance[k4-graph]", "TestGLM52NVFP4::test_acceptance[k4]")


def _recorded(tmp_path, stats_, workload=WORKLOAD, key=KEYS[0]):
    path = tmp_path / "refs.yaml"
    entry = reference_entry(stats_, workload, measured={"batch_size": 1})
    record_reference(path, key, entry)
    return path


def test_a_reference_of_this_workload_gates_al_and_every_position(tmp_path, batch1):
    path = _recorded(tmp_path, batch1)
    lookup = own_reference(path, KEYS, WORKLOAD)
    assert lookup.key == KEYS[0] and lookup.min_per_position
    healthy = judge_case(8, batch1, stats(HEALTHY, seed=12), CLEAN, tolerance=0.05, lookup=lookup)
    assert healthy.passed, healthy.explain()
    low = stats((0.868, 0.864, 0.5, 0.834), seed=13)  # depth 3 falls; the others hold
    outcome = judge_case(1, low, low, CLEAN, tolerance=0.05, lookup=lookup)
    failed = {v.check: v for v in outcome.verdicts if v.regressed}
    assert "reference_per_position" in failed
    assert "per_position[3]" in failed["reference_per_position"].details["regressed_metrics"]


def test_a_reference_of_another_workload_never_gates(tmp_path):
    low = stats((0.5, 0.5, 0.5, 0.5), seed=14)
    path = _recorded(tmp_path, stats(HEALTHY, seed=15))
    other = Workload(max_draft_len=4, max_new_tokens=256, num_prompts=80, prompts_digest="zzz")
    lookup = own_reference(path, KEYS, other)
    assert lookup.reference is None
    assert "prompts_digest=abc (this run: zzz)" in lookup.skipped[0]
    outcome = judge_case(1, low, low, CLEAN, tolerance=0.05, lookup=lookup)
    assert outcome.passed and "measured on another workload" in outcome.explain()


UPSTREAM_YAML = DATA / "upstream_acceptance_length.yaml"


@pytest.mark.parametrize(
    "key",
    ["TestGLM52NVFP4::test_mtp_index_share", "TestDeepSeekV32::test_fp8_blockscale[baseline_mtp1]"],
)
def test_upstreams_keys_are_not_ours_to_apply(key):
    """Upstream's figures were measured on GSM8K: they gate no case of ours, even by name."""
    for case in (Case(GLM52, 8, 3, True), Case(DEEPSEEK_V32, 32, 1, False)):
        assert key not in case.reference_keys()
    lookup = own_reference(UPSTREAM_YAML, (key,), WORKLOAD)
    assert lookup.reference is None and "no workload recorded" in lookup.skipped[0]


def test_the_shipped_reference_file_holds_no_borrowed_figure():
    """Issue 21: the MT-bench/TP=4 figures gated our 80-prompt set; none may remain."""
    import yaml

    data = yaml.safe_load((DATA / "acceptance_length.yaml").read_text()) or {}
    assert all(isinstance((e or {}).get("workload"), dict) for e in data.values())


def test_missing_file_or_key_means_no_min_al_gate(tmp_path):
    assert own_reference(None, ("A::b",), WORKLOAD).reference is None
    assert own_reference(tmp_path / "none.yaml", ("A::b",), WORKLOAD).reference is None
    path = _recorded(tmp_path, stats(HEALTHY, seed=16), key="TestX::test_acceptance[k4]")
    assert own_reference(path, ("TestX::test_acceptance[k3]",), WORKLOAD).reference is None
    found = own_reference(
        path, ("TestX::test_acceptance[k4-graph]", "TestX::test_acceptance[k4]"), WORKLOAD
    )
    assert found.key == "TestX::test_acceptance[k4]"


def test_a_null_min_al_of_this_workload_raises_as_upstream_does(tmp_path):
    path = tmp_path / "refs.yaml"
    path.write_text(
        "TestX::test_acceptance[k4]:\n  ref_al: 3.4\n  min_al: null\n  workload:\n"
        "    max_draft_len: 4\n    max_new_tokens: 256\n    num_prompts: 80\n"
        "    prompts_digest: abc\n"
    )
    with pytest.raises(UsageError, match="min_al: null"):
        own_reference(path, ("TestX::test_acceptance[k4]",), WORKLOAD)


@pytest.mark.skipif(
    not os.environ.get("REGRESS_UPSTREAM_DATA"),
    reason="set REGRESS_UPSTREAM_DATA to a folder holding upstream's acceptance_length.yaml",
)
def test_the_real_upstream_file_gates_none_of_our_cases():
    path = Path(os.environ["REGRESS_UPSTREAM_DATA"]) / "acceptance_length.yaml"
    for model in (GLM52, DEEPSEEK_V32):
        lookup = own_reference(path, (model.acceptance_key,), WORKLOAD)
        assert lookup.reference is None and lookup.skipped
