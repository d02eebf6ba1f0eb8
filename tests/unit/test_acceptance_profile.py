"""profile(): runs every batch size, judges, reports; and fails cleanly when the engine does."""

from __future__ import annotations

import pytest

from regress.acceptance.engines.synthetic import SyntheticEngine
from regress.acceptance.profile import ProfileProgress, judge, profile
from regress.acceptance.trace import RequestTrace
from regress.acceptance.verdicts import UpstreamReference
from regress.errors import EngineError, UsageError

HEALTHY = [0.868, 0.864, 0.825, 0.834]
STALE = [0.880, 0.775, 0.670, 0.596]  # the seed's batch-8 numbers before the fix


def run(engine, **kwargs):
    options = {"batch_sizes": [1, 8], "max_draft_len": 4, "max_new_tokens": 64, "n_boot": 300}
    options.update(kwargs)
    return profile(engine, engine.default_prompts(40), **options)


def test_healthy_engine_passes_every_check():
    report = run(SyntheticEngine(HEALTHY))
    assert not report.regressed
    assert {v.check for v in report.verdicts} == {"batch_invariance", "conditional_decay"}
    one, eight = report.runs
    assert one.stats.acceptance_length == eight.stats.acceptance_length  # same prompts, same draws


def test_stale_map_fingerprint_is_flagged_at_batch_8_only():
    """The guard works: the seed's degraded numbers at batch 8 fail, batch 1 is the reference."""
    report = run(SyntheticEngine(HEALTHY, degraded={8: STALE}), batch_sizes=[1, 4, 8])
    assert report.regressed_batch_sizes == [8]
    failing = {v.check for v in report.verdicts if v.regressed}
    assert failing == {"batch_invariance", "conditional_decay"}
    [bi8] = [v for v in report.verdicts if v.check == "batch_invariance" and v.batch_size == 8]
    assert bi8.details["first_regressed_depth"] >= 2


def test_progress_reaches_the_end_in_order():
    seen: list[ProfileProgress] = []
    run(SyntheticEngine(HEALTHY), batch_sizes=[1, 2, 8], progress=seen.append)
    fractions = [p.fraction for p in seen]
    assert fractions == sorted(fractions)
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    assert [p.batch_size for p in seen if p.done == 0] == [1, 2, 8]


def test_counters_feed_the_upstream_formula():
    report = run(SyntheticEngine(HEALTHY))
    stats = report.runs[0].stats
    assert stats.upstream_acceptance_length == pytest.approx(stats.acceptance_length)
    no_counters = run(SyntheticEngine(HEALTHY, counters=False))
    assert no_counters.runs[0].stats.upstream_acceptance_length is None


def test_baseline_report_and_k_mismatch(tmp_path):
    good = run(SyntheticEngine(HEALTHY))
    path = tmp_path / "baseline.json"
    good.save(path)
    # Today's build lost acceptance at every batch size: batch invariance cannot see it, the baseline can.
    worse = run(SyntheticEngine([0.7, 0.6, 0.5, 0.4]), baseline=path)
    assert [v.check for v in worse.verdicts if v.regressed] == ["baseline", "baseline"]
    assert worse.baseline["kind"] == "report" and worse.baseline["source"] == str(path)
    with pytest.raises(UsageError, match="max_draft_len=4"):
        run(SyntheticEngine(HEALTHY), max_draft_len=3, baseline=path)


def test_upstream_yaml_gate():
    gate = UpstreamReference("T::k4", ref_al=3.3, min_al=0.95 * 3.3)
    report = run(SyntheticEngine(HEALTHY, degraded={8: STALE}), baseline=gate)
    upstream = {v.batch_size: v.status for v in report.verdicts if v.check == "upstream_min_al"}
    assert upstream == {1: "pass", 8: "regression"}
    assert report.baseline == {
        "kind": "upstream_yaml",
        "source": None,
        "key": "T::k4",
        "ref_al": 3.3,
        "min_al": pytest.approx(3.135),
        "batch_size": None,
    }


def test_sentinel_findings_land_in_the_report():
    engine = SyntheticEngine(
        HEALTHY, sentinel={8: [{"check": "req_idx_map", "message": "stale map"}]}
    )
    report = run(engine)
    assert report.sentinel == [{"check": "req_idx_map", "message": "stale map"}]
    assert report.runs[0].sentinel == [] and len(report.runs[1].sentinel) == 1
    assert [v.batch_size for v in report.verdicts if v.check == "sentinel" and v.regressed] == [8]
    assert run(SyntheticEngine(HEALTHY)).sentinel is None


class Broken(SyntheticEngine):
    def __init__(self, failure):
        super().__init__(HEALTHY)
        self.failure = failure

    def run(self, prompts, **kwargs):
        if self.failure == "crash":
            raise RuntimeError("illegal memory access")
        if self.failure == "lose":
            return [RequestTrace([1])]
        return [RequestTrace([9]) for _ in prompts]


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        ("crash", "failed at batch 1, K=4: RuntimeError: illegal memory access"),
        ("lose", "returned 1 request traces for 40 prompts"),
        ("overcount", r"outside 0\.\.4"),
    ],
)
def test_engine_failures_are_engine_errors(failure, message):
    with pytest.raises(EngineError, match=message) as info:
        run(Broken(failure))
    assert info.value.exit_code == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_sizes": []}, "batch sizes"),
        ({"batch_sizes": [0, 8]}, "batch sizes"),
        ({"max_draft_len": 0}, "max-draft-len"),
        ({"max_new_tokens": 1}, "max-new-tokens"),
        ({"tolerance": 1.5}, "tolerance"),
    ],
)
def test_bad_arguments_are_usage_errors(kwargs, message):
    with pytest.raises(UsageError, match=message):
        run(SyntheticEngine(HEALTHY), **kwargs)
    with pytest.raises(UsageError, match="no prompts"):
        profile(SyntheticEngine(HEALTHY), [], batch_sizes=[1], max_draft_len=2, max_new_tokens=8)


def test_judge_rejudges_saved_runs():
    report = run(SyntheticEngine(HEALTHY, degraded={8: STALE}))
    strict = judge(report.stats_by_batch(), tolerance=0.0)
    lenient = judge(report.stats_by_batch(), tolerance=0.9)
    assert any(v.regressed for v in strict) and not any(v.regressed for v in lenient)
