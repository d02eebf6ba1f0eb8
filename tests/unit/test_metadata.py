"""The DSA metadata mirror keeps req_idx_per_token right through the MTP-Eagle draft loop.

These tests build metadata with the defects named in REGRESS_DEFECTS (none by default), so
``REGRESS_DEFECTS=stale_req_idx pytest tests/unit`` shows them failing on the historical code.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from regress.dsa.batch import Batch, prepare_batch
from regress.dsa.invariants import check_req_idx_map
from regress.dsa.lifecycle import draft_checkpoints
from regress.dsa.mapping import expected_req_idx_per_token
from regress.reference.metadata import AttentionMetadata, DSAtrtllmAttentionMetadata
from regress.reference.scenarios import make_dsa_metadata, rewrite_layout


@st.composite
def mtp_batches(draw):
    """A mixed batch (contexts first, then generations with 1 + K tokens) and accepted counts."""
    k = draw(st.integers(min_value=0, max_value=7))
    batch = draw(st.integers(min_value=1, max_value=64))
    num_ctx = draw(st.integers(min_value=0, max_value=batch))
    ctx_lens = draw(st.lists(st.integers(1, 24), min_size=num_ctx, max_size=num_ctx))
    lens = ctx_lens + [1 + k] * (batch - num_ctx)
    accepted = draw(st.lists(st.integers(0, k), min_size=batch, max_size=batch))
    return k, num_ctx, lens, accepted


@given(mtp_batches())
def test_map_right_after_prepare_and_every_draft_step(case):
    k, num_ctx, lens, accepted = case
    md = make_dsa_metadata(
        max_num_requests=len(lens), max_num_tokens=sum(lens) + 1, max_seq_len=64, max_draft_tokens=k
    )
    prepare_batch(md, Batch(tuple(lens), num_ctx, cached=(3,) * len(lens)))
    assert check_req_idx_map(md) == []
    stages = []
    for stage in draft_checkpoints(md, k, [a + 1 for a in accepted]):  # the bonus counted
        stages.append(stage)
        assert check_req_idx_map(md) == [], stage
    assert stages == ["draft_begin"] + [f"draft_step_{i}" for i in range(k)]
    assert md.seq_lens.tolist() == lens  # restored after the loop


def test_the_restore_brings_back_the_context_metadata():
    """Step 0 turns contexts into generations; upstream's newest restore undoes that too."""
    md = make_dsa_metadata(
        max_num_requests=4, max_num_tokens=32, max_seq_len=64, max_draft_tokens=3
    )
    prepare_batch(md, Batch((6, 3, 4, 4), 2, cached=(3,) * 4))
    md.kv_cache_manager = object()  # a KV cache: the loop rewrites the context metadata
    md.host_request_types = types = torch.tensor([0, 0, 1, 1], dtype=torch.int32)
    during = []
    for _ in draft_checkpoints(md, 3, [4, 2, 1, 3]):
        during.append((md.num_contexts, types.tolist()))
    assert during[1] == (0, [1, 1, 1, 1])  # draft step 0: every request a generation
    assert md.num_contexts == 2 and md.num_ctx_tokens == 9
    assert md.host_request_types is types and types.tolist() == [0, 0, 1, 1]


@given(
    st.lists(st.integers(1, 8), min_size=1, max_size=16),
    st.lists(st.integers(0, 8), min_size=16, max_size=16),
)
def test_map_follows_any_rewrite(before, after_pool):
    after = after_pool[: len(before)]
    md = make_dsa_metadata(max_num_requests=16, max_num_tokens=256, max_seq_len=64)
    prepare_batch(md, Batch(tuple(before)))
    rewrite_layout(md, after)
    assert md.req_idx_per_token[: sum(after)].tolist() == expected_req_idx_per_token(after)


def test_refresh_keeps_the_buffer():
    md = make_dsa_metadata(max_num_requests=8, max_num_tokens=40, max_draft_tokens=4)
    ptr = md.req_idx_per_token.data_ptr()
    prepare_batch(md, Batch((5,) * 8))
    for _ in draft_checkpoints(md, 4, [5] * 8):
        assert md.req_idx_per_token.data_ptr() == ptr


def test_downstream_consumers_use_the_refreshed_map():
    """After the collapse, request j's draft token is written to and read from j's own pages."""
    b, k = 8, 4
    md = make_dsa_metadata(max_num_requests=b, max_num_tokens=b * (k + 1), max_draft_tokens=k)
    prepare_batch(md, Batch((k + 1,) * b, cached=(20,) * b))
    loop = draft_checkpoints(md, k, [k + 1] * b)
    next(loop)  # draft_begin: the target layout
    next(loop)  # draft_step_0: collapsed to one token per request
    assert md.req_idx_per_token[:b].tolist() == list(range(b))
    tables = md.indexer_k_cache_block_offsets
    tpb = md.tokens_per_block
    kv = md.kv_lens_cuda[:b].tolist()
    for j in range(b):
        pos = kv[j] - 1
        assert md.slot_mapping[j].item() == tables[j, pos // tpb].item() * tpb + pos % tpb
    local = torch.tensor([[0, 1]] * b)
    glob = md.local_to_global(local)
    for j in range(b):
        assert glob[j, 0].item() == tables[j, 0].item() * tpb


def test_on_update_recomputes_counts_only():
    md = AttentionMetadata(max_num_requests=4, max_num_tokens=32)
    md.seq_lens = [5, 5, 2]
    md.num_contexts = 1
    assert (md.num_tokens, md.num_ctx_tokens, md.num_generations) == (12, 5, 2)
    md._seq_lens[:3].fill_(1)
    md.on_update()
    assert (md.num_tokens, md.num_ctx_tokens, md.num_generations) == (3, 1, 2)


def test_on_update_alone_leaves_the_map_stale():
    """Pins the premise of bug 1: the map is refreshed by on_update_kv_lens, not on_update."""
    md = make_dsa_metadata(max_num_requests=4, max_num_tokens=32, defects=())
    prepare_batch(md, Batch((4, 4, 4, 4)))
    md._seq_lens[:4].fill_(1)
    md._seq_lens_cuda[:4].fill_(1)
    md.on_update()
    assert [v.check for v in check_req_idx_map(md)] == ["req_idx_map"]
    md.update_for_spec_dec()
    assert check_req_idx_map(md) == []


def test_seq_lens_setter_rejects_oversized_layouts():
    md = DSAtrtllmAttentionMetadata(max_num_requests=2, max_num_tokens=8, defects=())
    for bad in ([1, 1, 1], [5, 5]):
        try:
            md.seq_lens = bad
        except ValueError as exc:
            assert "exceed" in str(exc)
        else:
            raise AssertionError(f"{bad} accepted")
