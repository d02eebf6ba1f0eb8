"""Which ``regress accept`` verdict catches each engine defect, and which ones miss it.

The profiler runs the reference engine at batch 1 and 8 (the ``regress accept`` defaults) on a
small workload, against a baseline report of the same engine without the defect:

* ``stale_req_idx``: batch invariance and conditional decay fire at batch 8 (the defect is
  batch-dependent), and so does the baseline; batch 1 passes everything.
* ``no_accept_v1_cache_manager``: AL 1.0 at every batch size, so batch invariance passes and
  conditional decay has no slope to judge; only the baseline catches it, at both batch sizes.
* ``index_share_rejected_branch`` (index-share configuration, K = 7): as batch-invariant; only
  the baseline (an index-share report without the defect) catches it.
* ``indexer_pool_exhaustion``: no verdict at all, the run aborts (an engine error, exit 3): a gap,
  found by the ``assert`` probe (test_demo_plants.py), never a pass.
"""

from __future__ import annotations

import functools

import pytest

from regress.acceptance.engines.reference import ReferenceAcceptanceEngine
from regress.acceptance.profile import profile
from regress.errors import EngineError
from regress.reference.engine import ReferenceEngine
from regress.reference.model import ModelConfig, index_share_config
from regress.reference.prompts import load_prompts

N_PROMPTS, N_TOKENS = 16, 32
SHARE = index_share_config(ModelConfig())


def _profile(defects, *, config=None, k=4, baseline=None, prompts=N_PROMPTS):
    """``profile`` at batch 1 and 8; ``prompts`` built-in prompts, the shortest first for index
    share (its dense top-k costs in proportion to the context)."""

    def factory(**options):
        return ReferenceEngine(**{**options, "config": config})

    engine = ReferenceAcceptanceEngine(defects=defects, engine_factory=factory)
    return profile(
        engine,
        sorted(load_prompts(), key=len)[:prompts] if config is SHARE else load_prompts(prompts),
        batch_sizes=(1, 8),
        max_draft_len=k,
        max_new_tokens=N_TOKENS,
        n_boot=200,
        baseline=baseline,
    )


#: The index-share runs judge a baseline from another run without pairing: they need more prompts
#: for a 10 % AL loss to stand out of the two runs' intervals.
SHARE_PROMPTS = 64


@functools.cache
def clean(share: bool = False):
    if share:
        return _profile((), config=SHARE, k=7, prompts=SHARE_PROMPTS)
    return _profile(())


def outcome(report) -> dict[tuple[str, int | None], str]:
    return {(v.check, v.batch_size): str(v.status) for v in report.verdicts}


def test_the_clean_engine_passes_its_own_baseline():
    report = _profile((), baseline=clean())
    assert set(outcome(report).values()) == {"pass"}
    assert not report.regressed


def test_stale_map_is_caught_by_batch_invariance_decay_and_baseline():
    got = outcome(_profile(("stale_req_idx",), baseline=clean()))
    assert got == {
        ("batch_invariance", 8): "regression",
        ("conditional_decay", 8): "regression",
        ("baseline", 1): "pass",
        ("baseline", 8): "regression",
    }


def test_v1_cache_manager_is_missed_by_batch_invariance_and_caught_by_the_baseline():
    report = _profile(("no_accept_v1_cache_manager",), baseline=clean())
    got = outcome(report)
    assert got[("batch_invariance", 8)] == "pass"  # AL 1.0 at both batch sizes
    assert got[("conditional_decay", 8)] == "pass"  # c1 = 0 at both: the same flat "slope"
    assert got[("baseline", 1)] == got[("baseline", 8)] == "regression"
    assert all(r.stats.acceptance_length < 1.01 for r in report.runs)


def test_index_share_stash_is_missed_by_batch_invariance_and_caught_by_the_baseline():
    report = _profile(
        ("index_share_rejected_branch",),
        config=SHARE,
        k=7,
        baseline=clean(True),
        prompts=SHARE_PROMPTS,
    )
    got = outcome(report)
    assert got[("batch_invariance", 8)] == "pass"
    assert got[("conditional_decay", 8)] == "pass"
    assert got[("baseline", 1)] == got[("baseline", 8)] == "regression"


def test_pool_exhaustion_gives_no_verdict_but_an_engine_error():
    with pytest.raises(EngineError, match="indexer K-cache pool exhausted") as info:
        _profile(("indexer_pool_exhaustion",), baseline=clean())
    assert info.value.exit_code == 3
