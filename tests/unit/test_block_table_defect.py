"""``stale_block_table`` (docs/findings.md, finding 1): the reference mirror drops the crossed block.

The batch is the stale-state oracle's verify batch (cached ``[40, 27, 60, 90]``, 4 tokens each,
K = 3, 32 tokens per block): every request accepts every draft, so request 2 (verify kv 64, blocks
0-1) writes its first chained draft at position 64, the first slot of block 2, while the others
stay inside the blocks their verify window covered.
"""

from __future__ import annotations

import pytest

from regress.dsa.announce import announce_speculation
from regress.dsa.batch import Batch, prepare_batch
from regress.dsa.transitions import advance, collapse, restore_target, save_target
from regress.reference.cache import PagedKVCacheManager
from regress.reference.metadata import DSAtrtllmAttentionMetadata

K = 3
TPB = 32
CACHED = (40, 27, 60, 90)
CROSSING = 2  # the only request whose draft positions leave its verify window's blocks


def _metadata(manager, defects, k=K):
    md = DSAtrtllmAttentionMetadata(
        max_num_requests=8, max_num_tokens=64, kv_cache_manager=manager, defects=defects
    )
    announce_speculation(md, 4, k)
    return md


def _verify(md, cached=CACHED, request_ids=(0, 1, 2, 3), k=K):
    batch = Batch(seq_lens=(1 + k,) * len(cached), cached=tuple(cached), request_ids=request_ids)
    prepare_batch(md, batch)


def _first_chained_step(md, k=K):
    """Draft step 0's collapse (every draft accepted) and its advance: the next step's layout."""
    saved = save_target(md)
    collapse(md, saved, k, [k + 1] * md.num_seqs)
    advance(md, md.num_seqs)
    return saved


def _own_slots(md):
    """Where each request's draft token reads its own key: position kv - 1, through the table."""
    import torch

    own = (md.kv_lens_cuda[: md.num_seqs].to(torch.int64) - 1).unsqueeze(1)
    return md.local_to_global(own).squeeze(1).tolist()


def _expected_slots(manager, md, request_ids):
    positions = (md.kv_lens_cuda[: md.num_seqs] - 1).tolist()
    rows = manager.block_table_rows(list(request_ids))
    return [rows[i][p // TPB] * TPB + p % TPB for i, p in enumerate(positions)]


def _manager():
    return PagedKVCacheManager.for_requests(4, 512, tokens_per_block=TPB)


def _pair():
    manager = _manager()
    return manager, _metadata(manager, ()), _metadata(manager, ("stale_block_table",))


def test_the_crossing_draft_token_loses_its_own_key_and_no_other_token_changes():
    manager, clean, stale = _pair()
    for md in (clean, stale):
        _verify(md)
        _first_chained_step(md)
    assert clean.kv_lens_cuda[:4].tolist() == [45, 32, 65, 95]
    expected = _expected_slots(manager, clean, (0, 1, 2, 3))
    assert _own_slots(clean) == expected
    got = _own_slots(stale)
    assert got[CROSSING] == -1  # block 2 is padding in the target forward's table
    assert [s for i, s in enumerate(got) if i != CROSSING] == [
        s for i, s in enumerate(expected) if i != CROSSING
    ]


def test_the_verify_forward_itself_is_unchanged():
    """Before the draft loop every position a token can see is inside its padded blocks."""
    import torch

    _, clean, stale = _pair()
    for md in (clean, stale):
        _verify(md)
    kv = clean.kv_lens_cuda[:4].to(torch.int64)
    req = clean.req_idx_per_token[:16].to(torch.int64)
    offsets = torch.arange(16) - req * (1 + K)
    positions = (kv[req] - (1 + K) + offsets).unsqueeze(1)
    visible = torch.arange(int(kv.max())).unsqueeze(0)
    local = torch.where(visible <= positions, visible, -1)
    assert torch.equal(clean.local_to_global(local), stale.local_to_global(local))
    assert (clean.local_to_global(local)[local >= 0] >= 0).all()


def test_the_overlap_schedulers_optimistic_host_view_covers_the_crossing():
    """The host padded from cached + (K - previous accepted): one rejected draft is enough here."""
    manager, _, stale = _pair()
    stale.host_view_cached_lens = [c + 1 for c in CACHED]  # each request rejected one draft before
    _verify(stale)
    _first_chained_step(stale)
    assert _own_slots(stale) == _expected_slots(manager, stale, (0, 1, 2, 3))


def test_the_widest_row_reads_the_block_an_earlier_forward_left_past_its_columns():
    """The cross-request case: a column past this forward's widest request keeps a stale block."""
    manager = _manager()
    md = _metadata(manager, ("stale_block_table",))
    _verify(md, cached=(80, 20), request_ids=(0, 1))  # row 0: request 0, kv 84, blocks 0-2
    restore_target(md, _first_chained_step(md))
    _verify(md, cached=(60, 20), request_ids=(3, 1))  # row 0: request 3, kv 64, widest: 2 blocks
    _first_chained_step(md)
    slot = _own_slots(md)[0]
    other = manager.block_table_rows([0])[0][2]  # request 0's block 2, left in column 2
    mine = manager.block_table_rows([3])[0][2]
    assert slot == other * TPB + 64 % TPB
    assert slot != mine * TPB + 64 % TPB


@pytest.mark.parametrize("defects", [None])  # None: honours REGRESS_DEFECTS (test_defects.py)
def test_contract_block_table_covers_every_block_the_draft_loop_reaches(defects):
    """The contract: after every update_for_spec_dec(), block_table row r owns the blocks that
    kv_lens_cuda[r] reaches, and only those. Fails with REGRESS_DEFECTS=stale_block_table."""
    manager = _manager()
    md = _metadata(manager, defects)
    _verify(md)
    saved = save_target(md)
    collapse(md, saved, K, [K + 1] * 4)
    rows = manager.block_table_rows([0, 1, 2, 3])
    for _ in range(K):
        advance(md, 4)
        for r, kv in enumerate(md.kv_lens_cuda[:4].tolist()):
            owned = -(-kv // TPB)
            assert md.block_table[r, :owned].tolist() == rows[r][:owned], (r, kv)
            assert (md.block_table[r, owned:] == -1).all(), (r, kv)
