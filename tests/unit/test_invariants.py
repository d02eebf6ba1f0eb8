"""The contract checks on their own: every clause of each rule must be able to fail."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from regress.dsa.invariants import check_kv_lens_2d_width, check_req_idx_map


def _gen(rows, cols, *, g=4, next_n=3):
    return SimpleNamespace(
        num_generations=g,
        num_tokens=g * next_n,
        num_ctx_tokens=0,
        kv_lens_cuda_2d=torch.zeros(rows, cols, dtype=torch.int32),
    )


def test_wide_and_tall_enough_passes():
    assert check_kv_lens_2d_width(_gen(4, 3)) == []


def test_too_few_columns_is_flagged():
    (v,) = check_kv_lens_2d_width(_gen(8, 2))
    assert v.details == {"shape": [8, 2], "num_generations": 4, "next_n": 3}


def test_too_few_rows_is_flagged():
    """The ``rows >= g`` clause: wide enough, but fewer rows than generation requests."""
    (v,) = check_kv_lens_2d_width(_gen(3, 8))
    assert v.check == "kv_lens_2d_width" and v.details["shape"] == [3, 8]


@pytest.mark.parametrize(
    "md",
    [
        SimpleNamespace(seq_lens=None, num_tokens=0, req_idx_per_token=torch.zeros(4)),
        SimpleNamespace(seq_lens=torch.tensor([2]), num_tokens=2, req_idx_per_token=None),
    ],
)
def test_map_check_has_nothing_to_say_without_a_layout_or_a_map(md):
    assert check_req_idx_map(md) == []


def test_width_check_has_nothing_to_say_without_the_buffer():
    md = SimpleNamespace(num_generations=None, kv_lens_cuda_2d=None)
    assert check_kv_lens_2d_width(md) == []
