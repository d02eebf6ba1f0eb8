"""build_req_idx_per_token: right for every layout, in place, allocation-free with scratch."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from regress.dsa.mapping import build_req_idx_per_token, expected_req_idx_per_token
from regress.reference.scenarios import UPSTREAM_UNIT_LAYOUTS

layouts = st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=64)


@pytest.mark.parametrize("name", sorted(UPSTREAM_UNIT_LAYOUTS))
def test_upstream_unit_layouts(name):
    lens = UPSTREAM_UNIT_LAYOUTS[name]
    got = build_req_idx_per_token(torch.tensor(lens, dtype=torch.int32), sum(lens))
    assert got.dtype == torch.int32
    assert got.tolist() == expected_req_idx_per_token(lens)


def test_named_layout_values():
    # Written out by hand, so the oracle itself is pinned too.
    assert expected_req_idx_per_token([2, 0, 3]) == [0, 0, 2, 2, 2]
    assert expected_req_idx_per_token([0, 4]) == [1, 1, 1, 1]
    lens = torch.tensor([2, 0, 3], dtype=torch.int32)
    assert build_req_idx_per_token(lens, 5).tolist() == [0, 0, 2, 2, 2]


@given(layouts)
def test_matches_oracle_for_any_layout(lens):
    got = build_req_idx_per_token(torch.tensor(lens, dtype=torch.int32), sum(lens))
    assert got.tolist() == expected_req_idx_per_token(lens)


@given(layouts, st.integers(min_value=0, max_value=8))
def test_writes_in_place_into_preallocated_buffer(lens, spare):
    total = sum(lens)
    out = torch.full((total + spare,), -7, dtype=torch.int32)
    ptr = out.data_ptr()
    got = build_req_idx_per_token(torch.tensor(lens, dtype=torch.int32), total, out=out)
    assert out.data_ptr() == ptr
    if total:  # an empty view reports data_ptr 0
        assert got.data_ptr() == ptr
    assert out[:total].tolist() == expected_req_idx_per_token(lens)
    assert out[total:].tolist() == [-7] * spare  # nothing past num_tokens is touched


def test_tokens_past_the_layout_map_out_of_range():
    got = build_req_idx_per_token(torch.tensor([1, 2], dtype=torch.int32), 5)
    assert got.tolist() == [0, 1, 1, 2, 2]  # 2 == num_seqs: never a plausible request


class _AllocationRecorder(TorchDispatchMode):
    """Records every tensor an op returns whose storage is not one of the given buffers."""

    def __init__(self, buffers):
        super().__init__()
        self.allowed = {b.untyped_storage().data_ptr() for b in buffers}
        self.fresh: list[tuple[str, tuple[int, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        outs = result if isinstance(result, (tuple, list)) else [result]
        for t in outs:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in self.allowed:
                self.fresh.append((str(func), tuple(t.shape)))
        return result


def test_no_layout_sized_allocation_with_scratch():
    lens = torch.tensor([5, 0, 3, 1], dtype=torch.int32)
    out = torch.zeros(32, dtype=torch.int32)
    cu = torch.zeros(8, dtype=torch.int32)
    ar = torch.arange(32, dtype=torch.int32)
    with _AllocationRecorder([lens, out, cu, ar]) as rec:
        build_req_idx_per_token(lens, 9, out=out, cu_seq_lens=cu, token_arange=ar)
    assert rec.fresh == []
    assert out[:9].tolist() == expected_req_idx_per_token([5, 0, 3, 1])


def test_allocation_recorder_can_fail():
    # The recorder must see the allocations of the scratch-free path, or the test above is empty.
    lens = torch.tensor([5, 0, 3, 1], dtype=torch.int32)
    with _AllocationRecorder([lens]) as rec:
        build_req_idx_per_token(lens, 9)
    ops = {op for op, _ in rec.fresh}
    assert any("cumsum" in op for op in ops) and any("arange" in op for op in ops), ops
