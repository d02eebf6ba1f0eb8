"""The SM90 vs SM100 buffer sets of DSA's paged-MQA call, and the width contract on each."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from regress.trtllm.mtp_buffers import (
    KV_LENS_2D,
    KV_LENS_EXPANDED,
    buffer_in_use,
    check_arch_buffers,
    check_width,
    expected_buffer,
)
from regress.trtllm.shapes import ShapeResult, check_metadata

BATCH = 32


def step(k, *, expanded, columns=None, rows=None, table_rows=None):
    """A generation-only MTP step of BATCH requests with 1 + k tokens each."""
    next_n = 1 + k
    return SimpleNamespace(
        num_tokens=BATCH * next_n,
        num_ctx_tokens=0,
        num_generations=BATCH,
        max_draft_tokens=k,
        use_expanded_buffers_for_mtp=expanded,
        kv_lens_cuda_2d=torch.zeros(BATCH, columns or next_n, dtype=torch.int32),
        kv_lens_expanded_cuda=torch.zeros(rows or BATCH * next_n, dtype=torch.int32),
        block_table_expanded=torch.zeros(table_rows or BATCH * next_n, 4, dtype=torch.int32),
    )


@pytest.mark.parametrize(
    ("sm", "k", "buffer"),
    [
        (90, 1, KV_LENS_2D),
        (90, 2, KV_LENS_EXPANDED),
        (90, 4, KV_LENS_EXPANDED),
        (100, 1, KV_LENS_2D),
        (100, 2, KV_LENS_2D),  # expanded before #18383; native at every depth after it
        (100, 4, KV_LENS_2D),
        (103, 3, KV_LENS_2D),
        (120, 3, KV_LENS_2D),
    ],
)
def test_the_post_18383_buffer_rule(sm, k, buffer):
    assert expected_buffer(sm, k) == buffer


def test_ragged_verification_expands_and_the_dsl_path_never_does():
    assert expected_buffer(100, 1, ragged=True) == KV_LENS_EXPANDED
    assert expected_buffer(90, 3, dsl=True) == KV_LENS_2D


def test_the_native_path_is_held_to_kv_lens_cuda_2d():
    assert check_width(step(3, expanded=False)) == []
    (v,) = check_width(step(3, expanded=False, columns=1))
    assert v.check == "kv_lens_2d_width"


def test_the_expanded_path_is_held_to_the_expanded_buffers_not_to_2d():
    """sm90 at K=3: kv_lens_cuda_2d is not read, so its width is not the contract there."""
    assert check_width(step(3, expanded=True, columns=1)) == []
    (v,) = check_width(step(3, expanded=True, rows=BATCH))
    assert v.check == "kv_lens_expanded_width"
    assert v.details["held"][KV_LENS_EXPANDED] == BATCH
    assert v.details["generation_tokens"] == BATCH * 4
    (table,) = check_width(step(3, expanded=True, table_rows=BATCH * 2))
    assert "block_table_expanded holds 64 rows" in table.message


def test_sm90_must_expand_beyond_two_tokens_per_request():
    assert check_arch_buffers(step(3, expanded=True), 90) == []
    assert check_arch_buffers(step(1, expanded=False), 90) == []
    (v,) = check_arch_buffers(step(3, expanded=False), 90)
    assert v.check == "mtp_buffer_set" and v.details["buffer"] == KV_LENS_2D
    # Blackwell may take either set (before #18383 K=2 expanded; after it nothing does).
    assert check_arch_buffers(step(2, expanded=True), 100) == []
    assert check_arch_buffers(step(2, expanded=False), 100) == []


def test_the_layerwise_check_reads_the_buffer_set_in_use_and_the_arch_rule():
    result = ShapeResult("dsa", BATCH, 4, sm=90)
    check_metadata(step(3, expanded=False), result)
    assert result.buffer == KV_LENS_2D
    assert [v["check"] for v in result.violations] == ["mtp_buffer_set"]
    fine = ShapeResult("dsa", BATCH, 4, sm=90)
    check_metadata(step(3, expanded=True, columns=1), fine)
    assert fine.buffer == KV_LENS_EXPANDED and fine.violations == []


def test_metadata_without_the_flag_uses_the_native_set():
    assert buffer_in_use(SimpleNamespace()) == KV_LENS_2D
