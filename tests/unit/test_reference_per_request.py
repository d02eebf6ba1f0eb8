"""The DSA layer computed per request (``regress.reference.per_request``) against per token.

A request's tokens share one copy of its rows only where that changes nothing but the order of
the sums: each token must still attend exactly the slots ``md.local_to_global`` gave it, or a
stale map (bug 1) could hide behind its neighbours' rows.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from regress.dsa.batch import Batch, prepare_batch  # noqa: E402
from regress.reference import per_request  # noqa: E402
from regress.reference.model import (  # noqa: E402
    LayerCache,
    ModelConfig,
    build_weights,
    dsa_attention,
    index_share_config,
)
from regress.reference.scenarios import make_dsa_metadata  # noqa: E402

CACHED = (40, 75, 9)  # a K = 4 verify chunk, a K = 0 step and a 9-token chunk, one forward
LENS = (5, 1, 9)
SPARSE, DENSE = ModelConfig(), index_share_config(ModelConfig())


def _forward(cfg):
    """A prepared three-request forward and a cache full of random rows."""
    md = make_dsa_metadata(max_num_requests=3, max_num_tokens=32, max_seq_len=128)
    prepare_batch(md, Batch(seq_lens=LENS, num_contexts=0, cached=CACHED))
    g = torch.Generator().manual_seed(7)
    cache = LayerCache(cfg, md.kv_cache_manager.num_slots, "cpu")
    for t in (cache.k, cache.v, cache.k_idx):
        t.copy_(torch.randn(t.shape, generator=g, dtype=torch.float64))
    h = torch.randn(md.num_tokens, cfg.hidden, generator=g, dtype=torch.float64)
    positions = torch.cat([torch.arange(c, c + n) for c, n in zip(CACHED, LENS, strict=True)])
    width = md.indexer_k_cache_block_offsets.shape[1] * md.tokens_per_block
    return md, cache, h, positions, width


def _attend(cfg, md, cache, h, positions, width, *, per_token):
    weights, _ = build_weights(cfg)
    fresh = LayerCache(cfg, cache.k.shape[0], "cpu")
    fresh.k.copy_(cache.k), fresh.v.copy_(cache.v), fresh.k_idx.copy_(cache.k_idx)
    with pytest.MonkeyPatch.context() as patch:
        if per_token:
            patch.setattr(per_request, "split_requests", lambda *args: None)
        return dsa_attention(cfg, weights, fresh, md, h, positions, width)


@pytest.mark.parametrize("cfg", [SPARSE, DENSE], ids=["top-k", "dense"])
def test_a_request_attends_what_its_tokens_attend_one_by_one(cfg, monkeypatch):
    md, cache, h, positions, width = _forward(cfg)
    shared = []
    attend = per_request.attend
    monkeypatch.setattr(per_request, "attend", lambda *a: shared.append(1) or attend(*a))
    out, chosen = _attend(cfg, md, cache, h, positions, width, per_token=False)
    assert len(shared) == 2  # the requests of more than one token shared their rows
    want, want_chosen = _attend(cfg, md, cache, h, positions, width, per_token=True)
    assert torch.equal(chosen, want_chosen)
    assert torch.allclose(out, want, rtol=1e-12, atol=1e-12)


def test_a_token_misrouted_by_a_stale_map_reads_its_own_slots(monkeypatch):
    """One token of request 0 reads through request 1's row (a stale ``req_idx_per_token``):
    the shared copy of request 0's rows would hide that; the request is computed per token."""
    md, cache, h, positions, width = _forward(DENSE)
    md.req_idx_per_token[2] = 1
    md._invalidate_pool_view_cache()
    shared = []
    attend = per_request.attend
    monkeypatch.setattr(per_request, "attend", lambda *a: shared.append(1) or attend(*a))
    out, _ = _attend(DENSE, md, cache, h, positions, width, per_token=False)
    assert len(shared) == 1  # request 2 still shares; request 0 does not
    want, _ = _attend(DENSE, md, cache, h, positions, width, per_token=True)
    assert torch.allclose(out, want, rtol=1e-12, atol=1e-12)
    clean_md, *_ = _forward(DENSE)
    clean, _ = _attend(DENSE, clean_md, cache, h, positions, width, per_token=True)
    assert not torch.allclose(out[2], clean[2])  # the misrouted token did read other rows


def test_a_token_that_selects_nothing_attends_nothing():
    """The NaN that marks a draft layer without an indexer pool survives the shared path."""
    _, cache, _, _, width = _forward(SPARSE)
    dropped = LayerCache(SPARSE, cache.k.shape[0], "cpu", indexer=False)
    dropped.k.copy_(cache.k), dropped.v.copy_(cache.v)
    q = torch.randn(3, SPARSE.heads, SPARSE.head_dim, dtype=torch.float64)
    selection = torch.tensor([[0, 1, 2], [-1, -1, -1], [1, 2, -1]])
    glob = torch.tensor([[16, 17, -1], [-1, -1, -1], [17, -1, -1]])  # local 2: a dropped key
    slots = torch.full((width,), -1, dtype=torch.int64)
    slots[:2] = torch.tensor([16, 17])
    out = per_request.attend(SPARSE, dropped, q, selection, glob, torch.tensor([2, 2, 2]), slots)
    assert out[1].isnan().all() and not out[[0, 2]].isnan().any()
    v = dropped.v[17].view(SPARSE.heads, SPARSE.head_dim)
    assert torch.allclose(out[2], v)  # its one valid key takes all the weight
