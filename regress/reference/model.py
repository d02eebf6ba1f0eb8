"""A tiny deterministic DSA model and its MTP draft layer, reading caches the way upstream does.

The target, per position ``p`` of a request:

* ``L[p]``: token + position embedding and a token-local MLP;
* ``a[p]``: one DSA attention layer over the request's paged cache (lightning indexer over the
  indexer-K cache, top-k selection, attention over the selected tokens);
* ``z[p] = (1 - c) * attn_gain * a[p] + c * z[p-1]``: the *context state*, a running summary of
  what the layer attended (``c`` is ``context_carry``);
* ``h[p] = f + MLP(f)`` with ``f = L[p] + context_gain * R_p z[p]``, where ``R_p`` is a rotary
  read-out (position-dependent rotation, so a slowly moving state does not make the model repeat
  itself), and the output head on ``rms(h[p])``.

``z`` is the hidden state the target hands to its MTP layer, as MTP-Eagle hands over its hidden
states: the draft layer, a perturbed copy of the same stack with its own paged caches, continues the
recurrence from the target's ``z`` at draft step 0 and from its own ``z`` at steps ``1..K-1``. A
noise-free draft would reproduce the target exactly, so ``draft_noise`` sets the defect-free
acceptance. It is also why damage compounds with depth: a step that attends the wrong context puts
``1 - c`` of a wrong summary into ``z``, and every later step inherits it and adds its own
(``benchmarks/reference_engine.md``).

Where each cache access takes its addresses mirrors
``tensorrt_llm/_torch/attention_backend/sparse/dsa.py`` (``Indexer`` and ``DSATrtllmAttention``):

* main K/V writes: the attention op's own per-request layout (it never used the cached map);
* indexer-K writes: ``metadata.slot_mapping``, derived from ``req_idx_per_token``;
* indexer scoring: each token's own request's block table (DeepGEMM's paged MQA logits);
* main K/V reads: the local top-k indices converted to global slots through
  ``req_idx_per_token`` (``metadata.local_to_global``), as the pool view does upstream.

All shapes depend only on Python ints fixed before a forward, so a draft step can be captured in a
CUDA graph. Computation is float64 so greedy choices do not depend on batch composition. A
request's tokens share one copy of the rows they read (``regress.reference.per_request``);
what each token reads is still its own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from regress.dsa.mapping import build_req_idx_per_token
from regress.reference import per_request
from regress.reference.context import carry_state, context_states, rotary
from regress.reference.indexer import check_paged_mqa_logits_shapes

if TYPE_CHECKING:
    import torch

#: The draft's read-out weights: ``draft_noise`` perturbs these; every other non-shared weight
#: (embedding MLP, attention, indexer) gets ``draft_stack_noise`` times that.
READOUT_WEIGHTS = ("mlp_b1", "mlp_b2")


@dataclass(frozen=True)
class ModelConfig:
    """Sizes and calibration of the reference model (``benchmarks/calibrate_reference.py``).

    ``draft_noise`` (relative weight perturbation of the draft copy, ``draft_attn_noise`` times
    that on the attention weights) sets the defect-free acceptance; ``context_carry`` is the share
    of the context state a position keeps from the one before; ``attn_gain`` and ``context_gain``
    set how much a prediction depends on what was attended, hence what a draft step reading another
    request's cache loses. ``index_share`` makes draft steps ``1..K-1`` reuse the top-k that draft
    step 0 selected (upstream's MTP index share, PR #15806) instead of running the indexer.
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
    context_carry: float = 0.64
    context_gain: float = 5.5
    context_lag: float = 3.0
    readout_base: float = 100.0
    attn_recency: float = 0.0
    draft_noise: float = 0.3
    draft_stack_noise: float = 0.15
    index_share: bool = False
    seed: int = 1234


#: Recency bias of the index-share configuration's attention (logit per position of distance).
INDEX_SHARE_RECENCY = 0.3


def index_share_config(cfg: ModelConfig) -> ModelConfig:
    """``cfg`` with index share on, in the regime where sharing a top-k is exact: dense.

    Upstream's MT-bench contexts sit far below GLM-5.2's top-k of 2048, so every draft step's
    top-k is "every visible position"; step 0's row at the last accepted token, plus the slots
    the later steps write, is then exactly what those steps would select themselves. The same
    holds here once ``topk`` is above every context, so the fixed stash costs nothing and only the
    defect's rejected-branch row changes what is attended: the slots past the current one, still
    holding the rejected branch's K/V. Attention here is recency-weighted (ALiBi-like), as a
    language model's is, so those nearby stale slots carry weight; with the default model's diffuse
    attention a few extra positions among hundreds would not show.
    """
    recency = cfg.attn_recency or INDEX_SHARE_RECENCY
    return replace(
        cfg, index_share=True, topk=max(cfg.topk, cfg.max_position), attn_recency=recency
    )


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
            scale = cfg.draft_noise * (1.0 if name in READOUT_WEIGHTS else cfg.draft_stack_noise)
            draft[name] = w + scale * w.std() * noise
    return Weights(target), Weights(draft)


class LayerCache:
    """Paged caches of one DSA layer: main K and V, and the indexer K (one row per slot).

    ``indexer=False`` is a layer that owns no indexer-K pool (``k_idx`` is None): its writes go
    nowhere and its indexer finds no keys (see ``regress.reference.draft_cache``).
    """

    def __init__(self, cfg: ModelConfig, num_slots: int, device: Any, *, indexer: bool = True):
        import torch

        hd = cfg.heads * cfg.head_dim
        self.k = torch.zeros(num_slots, hd, dtype=torch.float64, device=device)
        self.v = torch.zeros(num_slots, hd, dtype=torch.float64, device=device)
        self.k_idx = (
            torch.zeros(num_slots, cfg.index_dim, dtype=torch.float64, device=device)
            if indexer
            else None
        )


def _rms(x: torch.Tensor) -> torch.Tensor:
    return x * (x.pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt()


def _mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.nn.functional.gelu(_rms(x) @ w1) @ w2


def embed(w: Weights, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Token-local part of the stack: embedding, position, first MLP."""
    h = w.emb[tokens] + w.pos[positions]
    return h + _mlp(h, w.mlp_a1, w.mlp_a2)


def _select(cfg, cache, x, w, score_slots, local, slot_positions, requests) -> torch.Tensor:
    """The lightning indexer's top-k local positions per token (``-1``: nothing selected).

    ``requests`` (from ``per_request.split_requests``; None: all per token) says which tokens
    share one copy of their request's indexer-K rows; the top-k itself is per token.
    """
    import torch

    t_count, width = score_slots.shape
    if cache.k_idx is None:  # no indexer pool: no keys to score, nothing is selected
        return torch.full((t_count, min(width, cfg.topk)), -1, dtype=torch.int64, device=x.device)
    visible = local.unsqueeze(0) <= slot_positions.unsqueeze(1)
    if width <= cfg.topk:  # dense path: every visible position is selected
        return torch.where(visible, local.expand(t_count, width), torch.full_like(score_slots, -1))
    q_idx = (x @ w.wq_idx).view(t_count, cfg.index_heads, cfg.index_dim)
    head_w = x @ w.w_idx
    if requests is None:
        scores = _token_scores(cache, q_idx, head_w, score_slots)
    else:
        scores = torch.empty(t_count, width, dtype=x.dtype, device=x.device)
        for start, stop in requests.spans:  # one request's rows score all its tokens
            k_rows = cache.k_idx[score_slots[start]]
            scores[start:stop] = per_request.indexer_scores(
                q_idx[start:stop], k_rows, head_w[start:stop]
            )
        if requests.singles is not None:
            one = requests.singles
            scores[one] = _token_scores(cache, q_idx[one], head_w[one], score_slots[one])
    # A tiny recency tie-break: relu zeros tie, and top-k must not depend on batch layout.
    scores = torch.where(visible, scores + local * 1e-9, torch.full_like(scores, -torch.inf))
    vals, idx = scores.topk(cfg.topk, dim=-1)
    return torch.where(torch.isfinite(vals), idx, torch.full_like(idx, -1))


def _token_scores(cache, q_idx, head_w, score_slots) -> torch.Tensor:
    """Indexer scores ``(T, width)``, each token against its own copy of its rows."""
    import torch

    k_idx = cache.k_idx[score_slots]  # (T, W, dI)
    per_head = torch.relu(torch.einsum("thd,twd->thw", q_idx, k_idx))
    return torch.einsum("th,thw->tw", head_w, per_head)


def _token_attention(cfg, cache, q, selection, glob, slot_positions) -> torch.Tensor:
    """Attention ``(T, heads, head_dim)``, each token over its own copy of its selected rows."""
    import torch

    t_count = q.shape[0]
    valid = glob >= 0
    safe = glob.clamp(min=0)
    k_sel = cache.k[safe].view(t_count, -1, cfg.heads, cfg.head_dim)
    v_sel = cache.v[safe].view(t_count, -1, cfg.heads, cfg.head_dim)
    logits = torch.einsum("thd,tkhd->thk", q, k_sel) * cfg.head_dim**-0.5
    if cfg.attn_recency:  # ALiBi-like: nearby positions (either side) weigh more
        distance = (selection - slot_positions.unsqueeze(1)).abs().to(torch.float64)
        logits = logits - cfg.attn_recency * distance.unsqueeze(1)
    logits = logits.masked_fill(~valid.unsqueeze(1), -torch.inf)
    return torch.einsum("thk,tkhd->thd", torch.softmax(logits, dim=-1), v_sel)


def dsa_attention(
    cfg: ModelConfig,
    w: Weights,
    cache: LayerCache,
    md: Any,
    h: torch.Tensor,
    slot_positions: torch.Tensor,
    width: int,
    selection: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One DSA layer over ``md.num_tokens`` tokens; writes this step's K/V, then reads.

    Args:
        h: ``(num_tokens, hidden)`` layer input.
        slot_positions: ``(num_tokens,)`` int64 logical cache position of each token; the token
            sees positions ``0..slot_positions[t]`` of its request.
        width: static number of local positions scored per token (>= every context length).
        selection: local positions to attend instead of running the indexer (index share).

    Returns:
        ``(attended, selection)``: the attention output projected to ``hidden`` (before any
        gain), and the local positions the indexer selected (or ``selection`` as given). A token
        with nothing selected attends nothing: its softmax, hence its output, is NaN.
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
    if cache.k_idx is not None:
        cache.k_idx[md.slot_mapping[:t_count]] = x @ w.wk_idx
    requests = per_request.split_requests(op_req, t_count, md.num_seqs)

    if selection is None:
        # Lightning indexer: score every local position of the token's own request.
        local = torch.arange(width, device=h.device, dtype=torch.int64)
        blocks = torch.div(local, tpb, rounding_mode="floor").expand(t_count, width)
        score_slots = op_rows.gather(-1, blocks).to(torch.int64) * tpb + local % tpb
        selection = _select(cfg, cache, x, w, score_slots, local, slot_positions, requests)
    else:
        requests = None  # a given selection (index share's draft steps) is read per token

    glob = md.local_to_global(selection)  # through req_idx_per_token: the bug-1 read path
    if requests is None or per_request.SPARSE * selection.shape[-1] < width:
        attn = _token_attention(cfg, cache, q, selection, glob, slot_positions)
    else:
        attn = torch.empty_like(q)
        alone = [] if requests.singles is None else [requests.singles]
        shared = per_request.shared_slots(requests, selection, glob, width)
        for (start, stop), slots in zip(requests.spans, shared, strict=True):
            if slots is None:  # its tokens read one position from different slots
                alone.append(torch.arange(start, stop, device=q.device))
                continue
            part = slice(start, stop)
            attn[part] = per_request.attend(
                cfg, cache, q[part], selection[part], glob[part], slot_positions[part], slots
            )
        if alone:
            one = torch.cat(alone)
            attn[one] = _token_attention(
                cfg, cache, q[one], selection[one], glob[one], slot_positions[one]
            )
    return attn.reshape(t_count, -1) @ w.wo, selection


def readout(cfg: ModelConfig, w: Weights, local: Any, z: Any, positions: Any) -> torch.Tensor:
    """Final hidden state from the token-local part and the context state."""
    f = local + cfg.context_gain * rotary(cfg, z, positions)
    return f + _mlp(f, w.mlp_b1, w.mlp_b2)


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
    carry_in: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Target forward over the prepared layout.

    Args:
        carry_in: ``(num_seqs, hidden)`` context state at each request's last cached position
            (zeros for a prompt; default all zeros).

    Returns:
        ``(h, z)``: final hidden states (for the head) and context states, both ``(T, hidden)``.
    """
    import torch

    check_indexer_shapes(md)
    local = embed(w, tokens, positions)
    attended, _ = dsa_attention(cfg, w, cache, md, local, positions, width)
    lens = [int(n) for n in md.seq_lens.tolist()]
    if carry_in is None:
        carry_in = torch.zeros(len(lens), cfg.hidden, dtype=torch.float64, device=local.device)
    z = context_states(cfg, attended, lens, carry_in)
    return readout(cfg, w, local, z, positions), z


def draft_forward(
    cfg: ModelConfig,
    w: Weights,
    cache: LayerCache,
    md: Any,
    next_tokens: torch.Tensor,
    prev_state: torch.Tensor,
    slot_positions: torch.Tensor,
    width: int,
    selection: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """MTP draft layer: token ``x[p+1]`` and context state ``z[p]``, cached at slot ``p``.

    The token is embedded at its own position ``p + 1``; the recycled state continues the
    recurrence (MTP-Eagle's hidden-state recycling), which is what carries a corrupted step into
    every later one.

    Returns:
        ``(h, z, selection)``: hidden states for the head, the new context states (recycled into
        the next step) and the local positions attended (stashed for index share).
    """
    positions = slot_positions + 1
    local = embed(w, next_tokens, positions)
    attended, chosen = dsa_attention(cfg, w, cache, md, local, slot_positions, width, selection)
    fresh = (1.0 - cfg.context_carry) * cfg.attn_gain * attended
    z = fresh + carry_state(cfg, prev_state)
    return readout(cfg, w, local, z, positions), z, chosen
