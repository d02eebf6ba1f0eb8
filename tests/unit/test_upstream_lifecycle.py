"""Scenario 3: the sentinel judged against ground truth taken in the same upstream lifecycle."""

from __future__ import annotations

import pytest
from _upstream_trees import build_tree

import regress.dsa.sentinel as sentinel_module
from regress.check.check import run_check
from regress.dsa.invariants import Violation


class _FakeSentinel:
    """Stands in for the runtime sentinel with a fixed opinion, to test the judging."""

    flags = False

    def __init__(self) -> None:
        self.violations = []
        self.num_violations = 0

    def attach(self, md):
        return self

    def detach(self):
        pass

    def flush(self):
        if self.flags:
            v = Violation("req_idx_map", "stale (fake opinion)", {})
            self.violations = [
                sentinel_module.SentinelViolation(
                    v.check, v.message, "update_spec_dec_param", "eager", 1, [5], "X"
                )
            ]
            self.num_violations = 1

    def summary(self):
        return {"checks_run": 1, "violations": self.num_violations}


def _run(tmp_path, fix):
    report = run_check(build_tree(tmp_path, "B", fix), scenarios=["sentinel_lifecycle"])
    return report, {r.status for r in report.results}, report.results[0].note


@pytest.mark.parametrize(
    ("flags", "fix", "status", "note"),
    [
        (True, "pre", "fail", "flagged the broken map"),
        (False, "pre", "error", "missed a stale map"),
        (True, "post", "error", "false positive"),
        (False, "post", "pass", "silent on a correct map"),
    ],
)
def test_the_sentinel_is_judged_against_the_direct_check(
    tmp_path, monkeypatch, flags, fix, status, note
):
    monkeypatch.setattr(sentinel_module, "Sentinel", type("S", (_FakeSentinel,), {"flags": flags}))
    report, statuses, seen = _run(tmp_path, fix)
    assert statuses == {status} and note in seen
    # only a broken tree that the sentinel flags is a verdict on the tree
    # a checker's error is no verdict either
    assert report.exit_code == {"fail": 1, "error": 3}.get(status, 0)


def test_a_sentinel_crash_is_a_regress_error_not_a_tree_verdict(tmp_path, monkeypatch):
    def boom(md):
        raise RuntimeError("sentinel bug")

    monkeypatch.setattr(sentinel_module, "check_req_idx_map", boom)
    report, statuses, note = _run(tmp_path, "post")
    assert statuses == {"error"} and "crashed" in note and "sentinel bug" in note
    assert report.exit_code == 3


def test_the_real_sentinel_rides_the_lifecycle_and_is_right_both_ways(tmp_path):
    """The merged sentinel (checks only after prepare/on_update_kv_lens/update_for_spec_dec,
    tolerates ``seq_lens=None``) neither crashes nor flags a fixed tree, and flags a broken one."""
    post, post_statuses, _ = _run(tmp_path / "post", "post")
    assert post.exit_code == 0 and post_statuses == {"pass"}
    pre, pre_statuses, _ = _run(tmp_path / "pre", "pre")
    assert pre.exit_code == 1 and pre_statuses == {"fail"}
