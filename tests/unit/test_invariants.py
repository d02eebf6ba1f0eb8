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


def _mapped(seq_lens, *, num_tokens=None, device_lens=None, req_map=None):
    """Metadata whose map is right for ``seq_lens`` unless ``req_map`` says otherwise."""
    right = [r for r, n in enumerate(seq_lens) for _ in range(n)]
    return SimpleNamespace(
        seq_lens=torch.tensor(seq_lens),
        seq_lens_cuda=torch.tensor(device_lens if device_lens is not None else seq_lens),
        num_tokens=sum(seq_lens) if num_tokens is None else num_tokens,
        req_idx_per_token=torch.tensor(req_map if req_map is not None else right),
    )


def test_a_right_map_on_agreeing_lengths_passes():
    assert check_req_idx_map(_mapped([2, 1, 3])) == []


def test_a_device_copy_that_disagrees_with_host_seq_lens_is_flagged():
    # The map matches the host layout; only the device copy the refresh reads is behind.
    (v,) = check_req_idx_map(_mapped([2, 2], device_lens=[2, 1]))
    assert "seq_lens_cuda disagrees" in v.message
    assert v.details == {"seq_lens": [2, 2], "seq_lens_cuda": [2, 1]}


def test_num_tokens_that_is_not_the_sum_of_seq_lens_is_flagged():
    # Three tokens counted for a layout of four: on_update() was skipped. The first three
    # entries of the map are right, so only the count can tell.
    (v,) = check_req_idx_map(_mapped([2, 2], num_tokens=3))
    assert v.message.startswith("num_tokens=3 but seq_lens sum to 4")


def test_num_tokens_beyond_the_layout_is_the_count_violation_not_an_index_error():
    # A map longer than the layout with a right prefix: the count says what is wrong.
    md = _mapped([2, 1], num_tokens=4, req_map=[0, 0, 1, 2])
    (v,) = check_req_idx_map(md)
    assert v.message.startswith("num_tokens=4 but seq_lens sum to 3")


def test_a_map_shorter_than_the_layout_is_a_violation():
    # The buffer holds 2 entries (both right) for a layout of 4 tokens.
    (v,) = check_req_idx_map(_mapped([2, 2], req_map=[0, 0]))
    assert "holds 2 entries but the layout has 4 tokens" in v.message
    assert v.details["capacity"] == 2
