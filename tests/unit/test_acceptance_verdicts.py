"""Judging acceptance at its boundaries: tolerance, CI margin, decay slope, baselines, upstream gate."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from regress.acceptance.findings import CheckStatus, Finding
from regress.acceptance.stats import RunStats, summarize
from regress.acceptance.trace import RequestTrace
from regress.acceptance.verdicts import (
    UpstreamReference,
    against_baseline,
    against_upstream,
    batch_invariance,
    compare_metric,
    conditional_decay,
    reference_batch_size,
    sentinel_verdicts,
)

SEED_FILE = Path(__file__).parents[1] / "data" / "acceptance" / "seed_000_glm52_k4.json"


def make_stats(
    al,
    *,
    al_ci=None,
    per_position=(0.8, 0.6),
    per_position_ci=None,
    conditional=None,
    slope=None,
    slope_ci=None,
    upstream=None,
):
    k = len(per_position)
    return RunStats(
        max_draft_len=k,
        requests=80,
        steps=1000,
        accepted=round((al - 1) * 1000),
        drafted=1000 * k,
        acceptance_length=al,
        acceptance_length_ci=al_ci or [al, al],
        acceptance_rate=(al - 1) / k,
        per_position=list(per_position),
        per_position_ci=per_position_ci or [[p, p] for p in per_position],
        conditional=conditional or list(per_position),
        conditional_ci=[None] * k,
        conditional_slope=slope,
        conditional_slope_ci=slope_ci,
        counts=[0] * (k + 1),
        per_request=[],
        per_request_al_percentiles={},
        upstream_acceptance_length=upstream,
    )


def traces_with_conditional(conditional, *, steps=10_000, requests=80, seed=0):
    reach, prev = [], steps
    for c in conditional:
        prev = round(prev * c)
        reach.append(prev)
    bounds = [steps, *reach, 0]
    values = [a for a in range(len(conditional) + 1) for _ in range(bounds[a] - bounds[a + 1])]
    random.Random(seed).shuffle(values)
    per = steps // requests
    return [RequestTrace(values[i * per : (i + 1) * per], prompt_index=i) for i in range(requests)]


# --- compare_metric ---------------------------------------------------------------------------


def test_drop_exactly_at_tolerance_passes_and_just_beyond_fails():
    # 4.0 -> 3.8 is a 5% drop: on the boundary, despite 4.0 - 3.8 != 0.2 in binary.
    assert not compare_metric("al", 4.0, None, 3.8, None, 0.05)["regressed"]
    row = compare_metric("al", 4.0, None, 3.7999, None, 0.05)
    assert row["regressed"] and row["beyond_tolerance"] and row["significant"]


def test_drop_beyond_tolerance_within_noise_passes():
    # 10% drop, but the CIs (half-widths 0.3 and 0.4, combined 0.5) cover it.
    row = compare_metric("al", 4.0, [3.7, 4.3], 3.6, [3.2, 4.0], 0.05)
    assert row["beyond_tolerance"] and not row["significant"] and not row["regressed"]
    assert row["noise_margin"] == pytest.approx(0.5)
    # Exactly at the noise margin still passes; just beyond it fails.
    assert not compare_metric("al", 4.0, [3.7, 4.3], 3.5, [3.1, 3.9], 0.05)["regressed"]
    assert compare_metric("al", 4.0, [3.7, 4.3], 3.49, [3.09, 3.89], 0.05)["regressed"]


def test_rises_and_zero_references_never_regress():
    assert not compare_metric("p", 0.5, None, 0.9, None, 0.0)["regressed"]
    assert not compare_metric("p", 0.0, None, 0.0, None, 0.0)["regressed"]


# --- batch invariance -------------------------------------------------------------------------


def test_batch_invariance_names_the_failing_batch_and_depth():
    ref = make_stats(3.0, per_position=(0.9, 0.7, 0.4))
    same = make_stats(2.99, per_position=(0.9, 0.69, 0.4))
    bad = make_stats(2.5, per_position=(0.9, 0.5, 0.1))
    verdicts = batch_invariance({1: ref, 4: same, 8: bad}, tolerance=0.05)
    assert [(v.check, v.batch_size, v.status) for v in verdicts] == [
        ("batch_invariance", 4, CheckStatus.PASS),
        ("batch_invariance", 8, CheckStatus.REGRESSION),
    ]
    details = verdicts[1].details
    assert details["reference_batch_size"] == 1
    assert details["regressed_metrics"] == [
        "acceptance_length",
        "per_position[2]",
        "per_position[3]",
    ]
    assert details["first_regressed_depth"] == 2
    assert "batch 8" in verdicts[1].summary() and "per_position[3]" in verdicts[1].summary()


def test_reference_is_the_smallest_batch_without_batch_one():
    assert reference_batch_size([8, 2, 4]) == 2
    assert reference_batch_size([8, 1]) == 1
    verdicts = batch_invariance({2: make_stats(3.0), 8: make_stats(3.0)}, 0.05)
    assert [v.batch_size for v in verdicts] == [8]
    assert verdicts[0].details["reference_batch_size"] == 2
    assert batch_invariance({1: make_stats(3.0)}, 0.05) == []
    assert batch_invariance({}, 0.05) == []


def test_seeds_numbers_are_judged_as_the_seed_reports(tmp_path):
    """Stale map at batch 8 (seed's before-fix numbers) fails; the fixed numbers pass."""
    seed = json.loads(SEED_FILE.read_text())
    batch1 = summarize(traces_with_conditional(seed["batch_8_fixed"]["conditional"], seed=1), 4)
    stale = summarize(traces_with_conditional(seed["batch_8_stale_map"]["conditional"], seed=2), 4)
    fixed = summarize(traces_with_conditional(seed["batch_8_fixed"]["conditional"], seed=3), 4)

    [bad] = batch_invariance({1: batch1, 8: stale}, 0.05)
    assert bad.regressed and bad.details["first_regressed_depth"] == 2
    assert "per_position[1]" not in bad.details["regressed_metrics"]  # depth 1 stays exact
    [good] = batch_invariance({1: batch1, 8: fixed}, 0.05)
    assert not good.regressed

    [decay_bad] = conditional_decay({1: batch1, 8: stale}, 0.05)
    [decay_good] = conditional_decay({1: batch1, 8: fixed}, 0.05)
    assert decay_bad.regressed and not decay_good.regressed


# --- conditional decay ------------------------------------------------------------------------


def test_decay_threshold_boundary():
    # Reference mean conditional 0.8 -> threshold 0.05 * 0.8 = 0.04 per depth.
    ref = make_stats(3.0, conditional=[0.8, 0.8, 0.8], per_position=(0.8, 0.64, 0.5), slope=0.0)
    at = make_stats(3.0, conditional=[0.8, 0.76, 0.72], per_position=(0.8, 0.6, 0.4), slope=-0.04)
    past = make_stats(
        3.0, conditional=[0.8, 0.75, 0.7], per_position=(0.8, 0.6, 0.4), slope=-0.0401
    )
    verdicts = conditional_decay({1: ref, 2: at, 8: past}, 0.05)
    assert [(v.batch_size, v.status) for v in verdicts] == [
        (2, CheckStatus.PASS),
        (8, CheckStatus.REGRESSION),
    ]
    assert verdicts[1].details["threshold"] == pytest.approx(0.04)


def test_decay_within_slope_noise_passes():
    ref = make_stats(3.0, per_position=(0.8, 0.64), slope=0.0, slope_ci=[-0.05, 0.05])
    run = make_stats(3.0, per_position=(0.8, 0.5), slope=-0.1, slope_ci=[-0.2, 0.0])
    [v] = conditional_decay({1: ref, 8: run}, 0.05)
    assert not v.regressed and v.details["noise_margin"] == pytest.approx((0.05**2 + 0.1**2) ** 0.5)


def test_decay_needs_two_depths():
    one = make_stats(2.0, per_position=(0.8,), slope=None)
    assert conditional_decay({1: one, 8: one}, 0.05) == []


# --- baselines --------------------------------------------------------------------------------


def test_against_baseline_compares_same_batch_sizes_only():
    baseline = {1: make_stats(3.0), 8: make_stats(3.0)}
    runs = {1: make_stats(3.0), 8: make_stats(2.0), 16: make_stats(1.0)}
    verdicts = against_baseline(runs, baseline, 0.05, source="base.json")
    assert [(v.batch_size, v.status) for v in verdicts] == [
        (1, CheckStatus.PASS),
        (8, CheckStatus.REGRESSION),
    ]
    assert verdicts[0].details["baseline"] == "base.json"
    assert verdicts[0].details["baseline_missing_batch_sizes"] == [16]


def test_upstream_gate_boundary_and_which_al_it_reads():
    ref = UpstreamReference("T::k4", ref_al=4.0, min_al=3.8)
    runs = {1: make_stats(3.8), 8: make_stats(3.79)}
    assert [v.status for v in against_upstream(runs, ref)] == [
        CheckStatus.PASS,
        CheckStatus.REGRESSION,
    ]
    # With the engine's iteration counters, the gate reads upstream's AL, as upstream does.
    [v] = against_upstream({8: make_stats(3.9, upstream=3.7)}, ref)
    assert v.regressed and v.details["value_from"] == "upstream_acceptance_length"
    # An entry pinned to one batch size judges only that one.
    pinned = UpstreamReference("T::k4", ref_al=4.0, min_al=3.8, batch_size=8)
    assert [v.batch_size for v in against_upstream(runs, pinned)] == [8]


def test_sentinel_verdicts():
    verdicts = sentinel_verdicts({1: [], 8: [{"check": "req_idx_map", "message": "stale"}]})
    assert [(v.batch_size, v.status) for v in verdicts] == [
        (1, CheckStatus.PASS),
        (8, CheckStatus.REGRESSION),
    ]
    assert verdicts[1].details["checks"] == ["req_idx_map"]


def test_verdict_round_trip_and_status_strings():
    v = Finding(
        "batch_invariance", 8, CheckStatus.REGRESSION, {"headline": "x", "regressed_metrics": ["a"]}
    )
    assert Finding.from_dict(json.loads(json.dumps(v.to_dict()))) == v
    assert v.to_dict()["status"] == "regression" and CheckStatus.PASS == "pass"
    assert v.summary().startswith("REGRESSION batch_invariance batch 8: x; regressed: a")
    assert Finding("sentinel", None, CheckStatus.PASS).summary().strip().endswith("all runs")


# --- paired significance ----------------------------------------------------------------------


def synthetic_runs(degraded, *, prompts=10, spread=0.5):
    from regress.acceptance.engines.synthetic import SyntheticEngine

    engine = SyntheticEngine([0.85] * 4, degraded={8: degraded}, spread=spread)
    batch = engine.default_prompts(prompts)
    return {
        b: summarize(engine.run(batch, batch_size=b, max_draft_len=4, max_new_tokens=48), 4)
        for b in (1, 8)
    }


def test_identical_runs_have_zero_paired_drop():
    runs = synthetic_runs([0.85] * 4)
    [v] = batch_invariance(runs, 0.0)
    assert not v.regressed
    assert all(
        row["drop_ci"] == [0.0, 0.0] and row["noise_test"] == "paired_bootstrap"
        for row in v.details["metrics"]
    )
    [d] = conditional_decay(runs, 0.0)
    assert not d.regressed and d.details["steepening_ci"] == [0.0, 0.0]


def test_pairing_sees_a_loss_that_separate_intervals_blur():
    """Prompts differ a lot from each other; the same prompts lose acceptance at batch 8."""
    runs = synthetic_runs([0.85, 0.75, 0.75, 0.75])
    [paired] = batch_invariance(runs, 0.05)
    [unpaired] = batch_invariance(runs, 0.05, paired=False)
    assert paired.regressed and "per_position[4]" in paired.details["regressed_metrics"]
    assert not unpaired.regressed
    assert unpaired.details["metrics"][0]["noise_test"] == "ci_quadrature"


def test_paired_intervals_need_the_same_prompts():
    from regress.acceptance.stats import paired_drop_intervals

    runs = synthetic_runs([0.85] * 4)
    fewer = summarize([RequestTrace([1, 2], prompt_index=0)], 4, n_boot=10)
    assert paired_drop_intervals(runs[1], fewer) is None
    other_k = summarize([RequestTrace([1], prompt_index=i) for i in range(10)], 2, n_boot=10)
    assert paired_drop_intervals(runs[1], other_k) is None
    intervals = paired_drop_intervals(runs[1], runs[8], n_boot=50)
    assert set(intervals) == {
        "acceptance_length",
        "conditional_slope",
        *(f"per_position[{i}]" for i in range(1, 5)),
    }


# --- the paired rule reads the interval's lower bound (mutant: drop_ci[1]) ----------------------

#: (paired drop interval, significant?): a 10% drop whose interval reaches zero is noise.
PAIRED_CASES = [
    ([-0.01, 0.5], False),  # straddles zero: the upper bound alone would call it significant
    ([0.0, 0.5], False),  # touches zero: still not wholly above it
    ([0.001, 0.5], True),
    ([-0.5, -0.01], False),
]


@pytest.mark.parametrize(("drop_ci", "significant"), PAIRED_CASES)
def test_paired_significance_is_decided_by_the_lower_bound(drop_ci, significant):
    row = compare_metric("al", 4.0, None, 3.6, None, 0.05, drop_ci=drop_ci)
    assert row["beyond_tolerance"]
    assert (row["significant"], row["regressed"]) == (significant, significant)
    assert row["noise_test"] == "paired_bootstrap"


@pytest.mark.parametrize(("drop_ci", "significant"), PAIRED_CASES)
def test_decay_paired_significance_is_decided_by_the_lower_bound(monkeypatch, drop_ci, significant):
    import regress.acceptance.verdicts as verdicts

    monkeypatch.setattr(
        verdicts, "paired_drop_intervals", lambda *a, **k: {"conditional_slope": drop_ci}
    )
    ref = make_stats(3.0, per_position=(0.8, 0.64), slope=0.0)
    steep = make_stats(3.0, per_position=(0.8, 0.4), slope=-0.3)  # far past the 0.04 threshold
    [v] = conditional_decay({1: ref, 8: steep}, 0.05)
    assert v.details["noise_test"] == "paired_bootstrap"
    assert v.regressed is significant


def test_the_upper_bound_mutant_would_fail_these_checks(monkeypatch):
    """Proof the two tests above can fail: with the rule on drop_ci[1] the straddling case flips."""
    import regress.acceptance.verdicts as verdicts

    monkeypatch.setattr(verdicts, "paired_significant", lambda ci: ci[1] > verdicts.EPS)
    row = compare_metric("al", 4.0, None, 3.6, None, 0.05, drop_ci=[-0.01, 0.5])
    assert row["regressed"], "the mutant should call a straddling interval significant"
