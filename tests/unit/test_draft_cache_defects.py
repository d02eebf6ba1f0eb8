"""The draft-cache defects (#18662, #15806, #18660) in the reference engine: mechanism and symptom.

Each defect's symptom is checked on its own, and each is shown to come from its mechanism: with the
defect switched on but its policy function in ``regress.reference.draft_cache`` answering as the
fixed code does, the symptom is gone.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest

from regress.reference import draft_cache
from regress.reference.draft_cache import (
    WARMUP_REQUESTS,
    IndexerPoolExhausted,
    indexer_pool_blocks,
    indexer_pool_layers,
    stash_rows,
)
from regress.reference.engine import ReferenceEngine
from regress.reference.model import ModelConfig, index_share_config
from regress.reference.prompts import load_prompts

N_PROMPTS, N_TOKENS, K = 12, 32, 4
SHARE = index_share_config(ModelConfig())


@functools.cache
def run(defects: tuple[str, ...], batch: int, k: int = K, config: ModelConfig | None = None):
    return ReferenceEngine(defects=defects, config=config).generate(
        load_prompts(N_PROMPTS), batch_size=batch, max_draft_len=k, max_new_tokens=N_TOKENS
    )


def accepted(result) -> list[int]:
    return [a for r in result.requests for a in r.accepted]


def al(result) -> float:
    acc = accepted(result)
    return 1 + sum(acc) / len(acc)


def conditional(result, k: int = K) -> list[float]:
    acc = accepted(result)
    reach = [sum(a > i for a in acc) / len(acc) for i in range(k)]
    return [reach[i] / (reach[i - 1] if i else 1.0) for i in range(k)]


def tokens(result) -> list[list[int]]:
    return [r.tokens for r in result.requests]


# -- no_accept_v1_cache_manager (#18662) ------------------------------------------------------
def test_v1_mask_leaves_the_mtp_layer_without_an_indexer_pool():
    assert list(indexer_pool_layers(1, 1)) == [0, 1]
    assert list(indexer_pool_layers(1, 1, {"no_accept_v1_cache_manager"})) == [0]


@pytest.mark.parametrize("batch", [1, 8])
def test_v1_path_accepts_no_draft_at_any_batch_size(batch):
    result = run(("no_accept_v1_cache_manager",), batch)
    # Every draft is garbage (NaN logits: the first id); it can match only where the target
    # itself picks that id, which the built-in prompts make rare.
    assert al(result) < 1.01, al(result)
    assert al(run((), batch)) > 3.5
    assert tokens(result) == tokens(run((), 1, 0))  # lossless: drafts are only verified


def test_v1_symptom_comes_from_the_mask(monkeypatch):
    """With the defect on but the mask as the fixed code builds it, drafts are accepted again."""
    monkeypatch.setattr(draft_cache, "indexer_pool_layers", lambda t, d, defects=(): range(t + d))
    result = ReferenceEngine(defects={"no_accept_v1_cache_manager"}).generate(
        load_prompts(N_PROMPTS), batch_size=8, max_draft_len=K, max_new_tokens=N_TOKENS
    )
    assert al(result) == al(run((), 8))


# -- index_share_rejected_branch (PR #15806) --------------------------------------------------
def test_stash_takes_the_last_accepted_row_unless_the_defect_is_on():
    starts, lens, acc, ctx = [0, 5, 10], [5, 5, 30], [2, 4, 0], [False, False, True]
    assert stash_rows(starts, lens, acc, ctx) == [2, 9, 39]
    assert stash_rows(starts, lens, acc, ctx, {"index_share_rejected_branch"}) == [4, 9, 39]


@pytest.mark.parametrize("batch", [1, 8])
def test_rejected_branch_stash_decays_faster_with_depth(batch):
    """K = 7, where partial acceptance is the common case (PR #15806's review)."""
    fixed, broken = run((), batch, 7, SHARE), run(("index_share_rejected_branch",), batch, 7)
    assert al(broken) < 0.95 * al(fixed), (al(fixed), al(broken))
    assert abs(conditional(broken, 7)[0] - conditional(fixed, 7)[0]) <= 0.02  # step 0 is exact
    deep = slice(3, 7)
    assert sum(conditional(broken, 7)[deep]) < sum(conditional(fixed, 7)[deep]) - 0.1


def test_rejected_branch_stash_is_lossless():
    assert tokens(run(("index_share_rejected_branch",), 8, 7)) == tokens(run((), 1, 0, SHARE))


def test_index_share_with_the_right_row_is_exact():
    """Dense top-k: the fixed stash attends what each step would select, so nothing changes."""
    plain = replace(SHARE, index_share=False)
    assert [r.accepted for r in run((), 8, 7, SHARE).requests] == [
        r.accepted for r in run((), 8, 7, plain).requests
    ]


def test_rejected_branch_stash_is_harmless_at_full_acceptance():
    """A noise-free draft is always accepted: the last padded row is then the right one."""
    exact = replace(SHARE, draft_noise=0.0, draft_stack_noise=0.0)
    fixed = run((), 8, 7, exact)
    assert al(fixed) == 8
    broken = run(("index_share_rejected_branch",), 8, 7, exact)
    assert [r.accepted for r in broken.requests] == [r.accepted for r in fixed.requests]


def test_index_share_symptom_comes_from_the_stash_row(monkeypatch):
    fixed_rows = stash_rows
    monkeypatch.setattr(
        draft_cache, "stash_rows", lambda s, n, a, c, defects=(): fixed_rows(s, n, a, c)
    )
    result = ReferenceEngine(defects={"index_share_rejected_branch"}).generate(
        load_prompts(N_PROMPTS), batch_size=8, max_draft_len=7, max_new_tokens=N_TOKENS
    )
    assert [r.accepted for r in result.requests] == [
        r.accepted for r in run((), 8, 7, SHARE).requests
    ]


# -- indexer_pool_exhaustion (#18660) ---------------------------------------------------------
def test_pool_is_sized_for_the_warm_up_batch_only_with_the_defect():
    assert indexer_pool_blocks(8, 10) == 81
    assert indexer_pool_blocks(8, 10, {"indexer_pool_exhaustion"}) == 1 + WARMUP_REQUESTS * 10


def test_small_pool_aborts_past_the_warm_up_batch():
    engine = ReferenceEngine(defects={"indexer_pool_exhaustion"})
    ok = engine.generate(load_prompts(8), batch_size=WARMUP_REQUESTS, max_draft_len=K,
                         max_new_tokens=4)  # fmt: skip
    assert len(ok.requests) == 8  # finished requests give their blocks back
    with pytest.raises(IndexerPoolExhausted, match="indexer K-cache pool exhausted") as info:
        engine.generate(load_prompts(8), batch_size=8, max_draft_len=K, max_new_tokens=4)
    assert info.value.exit_code == 3  # an engine failure, never a verdict


def test_pool_abort_comes_from_the_pool_size(monkeypatch):
    monkeypatch.setattr(draft_cache, "indexer_pool_blocks", lambda b, n, defects=(): 1 + b * n)
    result = ReferenceEngine(defects={"indexer_pool_exhaustion"}).generate(
        load_prompts(8), batch_size=8, max_draft_len=K, max_new_tokens=4
    )
    assert len(result.requests) == 8
