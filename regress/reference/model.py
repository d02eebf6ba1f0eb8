"""A tiny deterministic DSA model and its MTP draft layer, reading caches the way upstream does.

The target is: token + position embedding, a token-local MLP, one DSA attention layer (lightning
indexer over a paged indexer-K cache, top-k selection, attention over the selected tokens), an MLP
and an output head. The MTP draft layer is a perturbed copy of that stack with its own paged caches,
fed the previous hidden state as MTP-Eagle is; because every layer below the attention is
token-local, a noise-free draft would reproduce the target exactly, so the weight noise sets the
acceptance rate and nothing else does.

Where each cache access takes its addresses mirrors
``tensorrt_llm/_torch/attention_backend/sparse/dsa.py`` (``Indexer`` and ``DSATrtllmAttention``):

* main K/V writes: the attention op's own per-request layout (it never used the cached map);
* indexer-K writes: ``metadata.slot_mapping``, derived from ``req_idx_per_token``;
* indexer scoring: each token's own request's block table (DeepGEMM's paged MQA logits);
* main K/V reads: the local top-k indices converted to global slots through
  ``req_idx_per_token`` (``metadata.local_to_global``), as the pool view does upstream.

All shapes depend only on Python ints fixed before a forward, so a draft step can be captured in a
CUDA graph. Computation is float64 so greedy choices do not depend on batch composition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from regress.dsa.mapping import build_req_idx_per_token
from regress.reference.indexer import check_paged_mqa_logits_shapes

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class ModelConfig:
    """Sizes and calibration of the reference model.

    ``draft_noise`` (relative weight perturbation of the draft copy) sets the defect-free per-depth
    acceptance; ``attn_gain`` sets how much a token's prediction depends on the attended context,
    hence how much a draft reading another request's cache loses; ``draft_recycle`` is the weight
    of the recycled hidden state in the draft input (MTP-Eagle), which makes that damage compound
    with depth. Defaults were calibrated on the built-in prompts (see ``benchmarks/``).
    """

    vocab_size: int = 258
    hidden: int = 64
    heads: int = 4
    head_dim: int = 16
    index_heads: int = 4
    index_dim: int = 16
    topk: int = 48
    mlp: int = 128
    max_position: int = 1024
    attn_gain: float = 0.8
    draft_noise: float = 0.01
    draft_recycle: float = 0.1
    seed: int = 1234


class Weights:
    """The parameters of one DSA stack (target or draft), on one device."""

    def __init__(self, tensors: dict[str, torch.Tensor]) -> None:
        self.t = tensors

    def __getattr__(self, name: str) -> torch.Tensor:
        try:
            return self.__dict__["t"][name]
        except KeyError as exc:
            raise AttributeError(name) from exc

    def to(self, device: Any) -> Weights:
        return Weights({k: v.to(device) for k, v in self.t.items()})


def build_weights(cfg: ModelConfig) -> tuple[Weights, Weights]:
    """Seeded target and draft weights (CPU, float64); identical for a given config."""
    import torch

    g = torch.Generator().manual_seed(cfg.seed)
    d, hd = cfg.hidden, cfg.heads * cfg.head_dim
    shapes = {
        "emb": (cfg.vocab_size, d),
        "pos": (cfg.max_position, d),
        "mlp_a1": (d, cfg.mlp),
        "mlp_a2": (cfg.mlp, d),
        "wq": (d, hd),
        "wk": (d, hd),
        "wv": (d, hd),
        "wo": (hd, d),
        "wq_idx": (d, cfg.index_heads * cfg.index_dim),
        "wk_idx": (d, cfg.index_dim),
        "w_idx": (d, cfg.index_heads),
        "mlp_b1": (d, cfg.mlp),
        "mlp_b2": (cfg.mlp, d),
        "head": (d, cfg.vocab_size),
    }
    target = {}
    for name, shape in shapes.items():
        scale = 1.0 if name in ("emb", "pos") else shape[0] ** -0.5
        target[name] = torch.randn(*shape, generator=g, dtype=torch.float64) * scale
    target["pos"] *= 0.5
    draft = {}
    for name, w in target.items():
        if name in ("emb", "pos", "head"):
            draft[name] = w  # MTP shares embedding and head with the target
        else:
            noise = torch.randn(*w.shape, generator=g, dtype=torch.float64)
            draft[name] = w + cfg.draft_noise * w.std() * noise
    draft["recycle"] = torch.randn(d, d, generator=g, dtype=torch.float64) * d**-0.5
    return Weights(target), Weights(draft)


class LayerCache:
    """Paged caches of one DSA layer: main K and V, and the indexer K (one row per slot)."""

    def __init__(self, cfg: ModelConfig, num_slots: int, device: Any) -> None:
        import torch

        hd = cfg.heads * cfg.head_dim
        self.k = torch.zeros(num_slots, hd, dtype=torch.float64, device=device)
        self.v = torch.zeros(num_slots, hd, dtype=torch.float64, device=device)
        self.k_idx = torch.zeros(num_slots, cfg.index_dim, dtype=torch.float64, device=device)


def _rms(x: torch.Tensor) -> torch.Tensor:
    return x * (x.pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt()


def _mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.nn.functional.gelu(_rms(x) @ w1) @ w2


def embed(w: Weights, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Token-local part of the stack: embedding, position, first MLP."""
    h = w.emb[tokens] + w.pos[positions]
    return h + _mlp(h, w.mlp_a1, w.mlp_a2)


def dsa_attention(
    cfg: ModelConfig,
    w: Weights,
    cache: LayerCache,
    md: Any,
    h: torch.Tensor,
    slot_positions: torch.Tensor,
    width: int,
) -> torch.Tensor:
    """One DSA layer over ``md.num_tokens`` tokens; writes this step's K/V, then reads.

    Args:
        h: ``(num_tokens, hidden)`` layer input.
        slot_positions: ``(num_tokens,)`` int64 logical cache position of each token; the token
            sees positions ``0..slot_positions[t]`` of its request.
        width: static number of local positions scored per token (>= every context length).
    """
    import torch

    t_count = md.num_tokens
    x = _rms(h)
    tpb = md.tokens_per_block
    # The attention op's own view of the layout (fresh every forward, never the cached map).
    op_req = build_req_idx_per_token(md.seq_lens_cuda, t_count).to(torch.int64)
    op_rows = md.indexer_k_cache_block_offsets[op_req]
    col = torch.div(slot_positions, tpb, rounding_mode="floor").unsqueeze(-1)
    own_slot = op_rows.gather(-1, col).squeeze(-1).to(torch.int64) * tpb + slot_positions % tpb

    q = (x @ w.wq).view(t_count, cfg.heads, cfg.head_dim)
    cache.k[own_slot] = x @ w.wk
    cache.v[own_slot] = x @ w.wv
    cache.k_idx[md.slot_mapping[:t_count]] = x @ w.wk_idx

    # Lightning indexer: score every local position of the token's own request.
    local = torch.arange(width, device=h.device, dtype=torch.int64)
    score_slots = (
        op_rows.gather(-1, torch.div(local, tpb, rounding_mode="floor").expand(t_count, width)).to(
            torch.int64
        )
        * tpb
        + local % tpb
    )
    k_idx = cache.k_idx[score_slots]  # (T, W, dI)
    q_idx = (x @ w.wq_idx).view(t_count, cfg.index_heads, cfg.index_dim)
    per_head = torch.relu(torch.einsum("thd,twd->thw", q_idx, k_idx))
    scores = torch.einsum("th,thw->tw", x @ w.w_idx, per_head)
    visible = local.unsqueeze(0) <= slot_positions.unsqueeze(1)
    # A tiny recency tie-break: relu zeros tie, and top-k must not depend on batch layout.
    scores = torch.where(visible, scores + local * 1e-9, torch.full_like(scores, -torch.inf))
    if width <= cfg.topk:  # dense path: every visible position is selected
        sel = torch.where(visible, local.expand(t_count, width), torch.full_like(score_slots, -1))
    else:
        vals, idx = scores.topk(cfg.topk, dim=-1)
        sel = torch.where(torch.isfinite(vals), idx, torch.full_like(idx, -1))

    glob = md.local_to_global(sel)  # through req_idx_per_token: the bug-1 read path
    valid = glob >= 0
    safe = glob.clamp(min=0)
    k_sel = cache.k[safe].view(t_count, -1, cfg.heads, cfg.head_dim)
    v_sel = cache.v[safe].view(t_count, -1, cfg.heads, cfg.head_dim)
    logits = torch.einsum("thd,tkhd->thk", q, k_sel) * cfg.head_dim**-0.5
    logits = logits.masked_fill(~valid.unsqueeze(1), -torch.inf)
    attn = torch.einsum("thk,tkhd->thd", torch.softmax(logits, dim=-1), v_sel)
    h = h + cfg.attn_gain * (attn.reshape(t_count, -1) @ w.wo)
    return h + _mlp(h, w.mlp_b1, w.mlp_b2)


def logits_of(w: Weights, h: torch.Tensor) -> torch.Tensor:
    return _rms(h) @ w.head


def check_indexer_shapes(md: Any) -> None:
    """What DeepGEMM checks before scoring generation tokens (raises ``DeepGemmAssertion``)."""
    g = md.num_generations
    if g and hasattr(md, "gen_context_lens"):
        next_n = (md.num_tokens - md.num_ctx_tokens) // g
        check_paged_mqa_logits_shapes(g, next_n, md.gen_context_lens())


def target_forward(
    cfg: ModelConfig,
    w: Weights,
    cache: LayerCache,
    md: Any,
    tokens: torch.Tensor,
    positions: torch.Tensor,
    width: int,
) -> torch.Tensor:
    """Target forward over the prepared layout; returns final hidden states ``(T, hidden)``."""
    check_indexer_shapes(md)
    return dsa_attention(cfg, w, cache, md, embed(w, tokens, positions), positions, width)


def draft_forward(
    cfg: ModelConfig,
    w: Weights,
    cache: LayerCache,
    md: Any,
    next_tokens: torch.Tensor,
    prev_hidden: torch.Tensor,
    slot_positions: torch.Tensor,
    width: int,
) -> torch.Tensor:
    """MTP draft layer: token ``x[p+1]`` and hidden ``h[p]`` at cache slot ``p``.

    The token is embedded at its own position ``p + 1``; the recycled hidden state enters through
    a small projection (MTP-Eagle's recycling), which is what carries a corrupted step into the
    next one.
    """
    x = embed(w, next_tokens, slot_positions + 1)
    x = x + cfg.draft_recycle * (_rms(prev_hidden) @ w.recycle)
    return dsa_attention(cfg, w, cache, md, x, slot_positions, width)
