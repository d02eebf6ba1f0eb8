"""The DSA layer computed one request at a time: one gather of a request's rows for all its tokens.

Per token, the layer reads the rows of every position it selected: a ``(tokens, top-k, heads,
dim)`` copy of K and of V (and a ``(tokens, width, dim)`` copy of the indexer K to score), which
at index share's dense top-k is every visible position of every token, and ``einsum`` copies
each once more. Tokens of one request read the same rows, so a prefill of ``n`` tokens copied
its context ``n`` times. Here a request's tokens share one copy of its rows and are scored
against them with one matrix product (``benchmarks/suite.md``, "The engine's gather").

Only the arithmetic is shared, never the addresses: the indexer scores a request's own block
table (the op's layout, as before), and attention reads exactly the slots
``md.local_to_global(selection)`` gave each token (the bug-1 read path). Tokens of one request
that read one local position from different slots (a stale map) do not share: that request is
computed per token. So is every request with one token (every draft step after step 0, a verify
step at K = 0), and attention under a top-k much narrower than the context (:data:`SPARSE`; its
indexer scores are still shared). Which path a request takes depends on its own token count and
the run's fixed shapes, never on who shares the batch, which keeps acceptance batch-invariant;
and the draft steps a CUDA graph captures keep the per-token path, which has no host sync and no
data-dependent shape.

The sums run in another order than per token (over local positions, not over the selection), so
results move in the last bits of float64; greedy choices do not (``benchmarks/suite.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


#: A selection narrower than ``1 / SPARSE`` of the width (the default model's top-48 of a few
#: hundred positions) is attended per token: copying each token's few rows costs what one copy of
#: the request's rows and its ``(n, width)`` logits cost (``benchmarks/suite.md``).
SPARSE = 4


@dataclass(frozen=True)
class Requests:
    """Which tokens of a forward are computed per request, and which per token.

    ``spans``: ``(start, stop)`` token ranges of the requests with more than one token;
    ``singles``: the indices of every other token (None: no such token); ``owner``: per token,
    the index of its span (``len(spans)`` for a single).
    """

    spans: list[tuple[int, int]]
    singles: torch.Tensor | None
    owner: torch.Tensor


def split_requests(op_req: torch.Tensor, num_tokens: int, num_seqs: int) -> Requests | None:
    """Group the tokens of a forward by the request the attention op assigns them to.

    Returns None where there are no more tokens than requests (the collapsed draft layout, which
    a CUDA graph may be capturing: no host sync there) or no request has more than one token.
    """
    import torch

    if num_tokens <= num_seqs:
        return None
    _, counts = torch.unique_consecutive(op_req, return_counts=True)
    spans, singles, runs, start = [], [], [], 0
    for count in counts.tolist():
        if count > 1:
            runs.append(len(spans))
            spans.append((start, start + count))
        else:
            runs.append(-1)
            singles.append(start)
        start += count
    if not spans:
        return None
    device = op_req.device
    runs = [len(spans) if r < 0 else r for r in runs]
    owner = torch.repeat_interleave(torch.tensor(runs, device=device), counts)
    index = torch.tensor(singles, dtype=torch.int64, device=device) if singles else None
    return Requests(spans, index, owner)


def indexer_scores(q_idx, k_idx_rows, head_w) -> torch.Tensor:
    """One request's lightning-indexer scores ``(n, width)``: ``sum_h w_h relu(q_h . k)``.

    Args:
        q_idx: ``(n, index_heads, index_dim)`` the request's indexer queries.
        k_idx_rows: ``(width, index_dim)`` the indexer K at the request's local positions.
        head_w: ``(n, index_heads)`` the per-token head weights.
    """
    import torch

    n, heads, dim = q_idx.shape
    per_head = torch.relu(q_idx.reshape(n * heads, dim) @ k_idx_rows.T).view(n, heads, -1)
    return torch.bmm(head_w.unsqueeze(1), per_head).squeeze(1)


def shared_slots(requests: Requests, selection, glob, width: int) -> list[torch.Tensor | None]:
    """Per span, the slot each local position is read from (``-1``: not read), or None where
    the span's tokens read one local position from different slots (one host sync in all)."""
    import torch

    picked = selection >= 0
    owner = requests.owner.unsqueeze(1).expand_as(selection)
    rows = len(requests.spans) + 1  # the last row collects the singles' reads, unused
    table = torch.full((rows, width), -1, dtype=torch.int64, device=selection.device)
    table[owner[picked], selection[picked]] = glob[picked]
    agrees = (table[owner, selection.clamp(min=0)] == glob) | ~picked
    disagree = torch.zeros(rows, dtype=torch.int64, device=selection.device)
    disagree.index_add_(0, requests.owner, (~agrees.all(dim=1)).to(torch.int64))
    return [None if bad else table[i] for i, bad in enumerate(disagree.tolist()[:-1])]


def attend(cfg, cache, q, selection, glob, slot_positions, slots) -> torch.Tensor:
    """One request's attention ``(n, heads, head_dim)`` over the rows its tokens selected.

    Each token attends the local positions it selected whose slot is valid, as per token; the
    softmax runs over every local position with the others at ``-inf``. K and V rows are
    gathered once per local position (``slots``: from :func:`shared_slots`); the rows of
    positions no token selected are gathered too (slot 0 stands in) and weigh exactly 0: K/V
    are written from embeddings only, so every cached row is finite.

    Args:
        q: ``(n, heads, head_dim)`` the request's queries.
        selection, glob: ``(n, k)`` local positions selected and the slots they are read from.
        slot_positions: ``(n,)`` each token's own logical position.
        slots: ``(width,)`` the slot of each local position (``-1``: not read).
    """
    import torch

    n, heads, dim = q.shape
    width = slots.shape[0]
    attended = torch.zeros(n, width, dtype=torch.bool, device=q.device)
    picked = selection >= 0
    rows = torch.arange(n, device=q.device).unsqueeze(1).expand_as(selection)
    attended[rows[picked], selection[picked]] = glob[picked] >= 0
    safe = slots.clamp(min=0)
    keys = cache.k[safe].view(width, heads, dim).permute(1, 2, 0)  # (heads, dim, width)
    values = cache.v[safe].view(width, heads, dim).transpose(0, 1)  # (heads, width, dim)
    logits = torch.matmul(q.transpose(0, 1), keys) * dim**-0.5  # (heads, n, width)
    if cfg.attn_recency:
        local = torch.arange(width, device=q.device)
        distance = (local - slot_positions.unsqueeze(1)).abs().to(torch.float64)
        logits = logits - cfg.attn_recency * distance.unsqueeze(0)
    logits = logits.masked_fill(~attended.unsqueeze(0), -torch.inf)
    return torch.matmul(torch.softmax(logits, dim=-1), values).transpose(0, 1)
