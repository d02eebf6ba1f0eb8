"""``draft_failure``: a draft step that raises, through the fake trees' worker (``_matrix_trees``)."""

from __future__ import annotations

import pytest
from _matrix_trees import build_matrix_tree
from _upstream_trees import build_tree

from regress.check.check import run_check
from regress.check.failures import FAIL_STEPS
from regress.check.results import NO_RESTORE


def _failure(root):
    report = run_check(root, scenarios=["draft_failure"])
    results = [r for r in report.results if r.name.startswith("draft_failure/")]
    assert len(results) == len(FAIL_STEPS)
    return report, results


def test_a_worker_that_restores_in_a_finally_leaves_nothing(tmp_path):
    report, results = _failure(build_matrix_tree(tmp_path, paired=True))
    assert report.status == "pass", [(r.name, r.violations) for r in results]
    for r in results:
        assert "caller: upstream tensorrt_llm/_torch/speculative/eagle3.py" in r.note
        assert "the draft model raised in step" in r.note and "did not propagate" not in r.note


def test_a_worker_without_the_finally_is_a_named_finding(tmp_path):
    _, results = _failure(build_matrix_tree(tmp_path, no_finally=True))
    step_0, step_1 = results
    for r in results:
        assert r.status == "warn", (r.name, r.violations)
        assert {v.check for v in r.violations} == {NO_RESTORE}
        assert "eagle3.py::MTPEagleWorker._forward_impl left the" in r.violations[0].message
    # step 0 fails before the collapse: only the save outlives the loop
    assert "_saved['_seq_lens']" in step_0.violations[0].message
    assert "num_contexts is 0 where the target forward had 2" in step_1.violations[0].message


def test_with_upstreams_pairing_check_every_later_forward_fails(tmp_path):
    """``prepare_for_spec_dec`` refusing a second save: the next loop raises (PR #16382)."""
    _, results = _failure(build_matrix_tree(tmp_path, no_finally=True, paired=True))
    for r in results:
        messages = [v.message for v in r.violations]
        assert any("still saved" in m for m in messages), messages
        assert any("the next forward's draft loop" in m and "called twice" in m for m in messages)


def test_num_contexts_not_restored_is_named(tmp_path):
    """The restore runs, but does not bring ``num_contexts`` back (PR #17381)."""
    _, (step_0, step_1) = _failure(build_matrix_tree(tmp_path, restore_contexts=False))
    assert step_0.status == "pass"  # raised before the collapse: nothing to restore
    assert step_1.status == "warn"
    assert "num_contexts is 0 where the target forward had 2" in step_1.violations[0].message


@pytest.mark.parametrize("era", ["B", "C"])
def test_without_a_worker_the_model_is_the_caller(tmp_path, era):
    report, results = _failure(build_tree(tmp_path, era, "post"))
    assert report.status == "pass"
    assert all("caller: regress model" in r.note for r in results)
