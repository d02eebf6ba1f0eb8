"""The token-to-request map of a flattened batch (``req_idx_per_token``), built capture-safely.

Mirrors ``build_req_idx_per_token``, the helper merged with PR #16925 and called at the top of
``DSAtrtllmAttentionMetadata.on_update_kv_lens()``. It lives next to the class it serves:
``tensorrt_llm/_torch/attention_backend/sparse/dsa/metadata.py`` in era B and
``tensorrt_llm/_torch/attention/backends/sparse/dsa/metadata.py`` in era C (the era table is
``regress.tree.eras.ERAS``). Era A's single ``sparse/dsa.py`` predates the fix; every stored
era-C version already has it (checked on ``attention/backends/sparse/dsa/metadata.py`` @ d3d4066f).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def build_req_idx_per_token(
    seq_lens: torch.Tensor,
    num_tokens: int,
    out: torch.Tensor | None = None,
    *,
    cu_seq_lens: torch.Tensor | None = None,
    token_arange: torch.Tensor | None = None,
) -> torch.Tensor:
    """Map each token of the flattened batch to the index of the request it belongs to.

    Token ``t`` belongs to the first request whose inclusive cumulative length exceeds ``t``,
    which is exactly ``searchsorted(cumsum(seq_lens), t, right=True)``. Unlike the host-side
    ``repeat_interleave`` of the request indices by ``seq_lens`` that it replaces, this has an
    output shape fixed by ``num_tokens`` (a Python int known at capture time), needs no host sync,
    and handles
    zero-length rows and every layout: all-ones decode, ``1 + K`` verify chunks, mixed
    context/generation batches and tree drafts alike. That is why it can run inside a captured
    CUDA graph on every draft step instead of being cached from ``prepare()``.

    Args:
        seq_lens: 1-D integer tensor, one new-token count per request (may contain zeros).
        num_tokens: number of leading tokens to map; normally ``seq_lens.sum()`` held on the host.
        out: optional preallocated int32 buffer of at least ``num_tokens`` entries, written in
            place (its ``data_ptr`` does not change), as the CUDA-graph buffer upstream is.
        cu_seq_lens: optional preallocated int32 scratch of at least ``len(seq_lens)`` entries for
            the cumulative sum, so nothing sized by the layout is allocated on the hot path.
        token_arange: optional preallocated int32 ``arange`` of at least ``num_tokens`` entries.

    Returns:
        The int32 map of length ``num_tokens`` (a view of ``out`` when it is given). Entries for
        tokens beyond ``seq_lens.sum()`` are ``len(seq_lens)``, i.e. out of range, never a
        plausible request index.
    """
    import torch

    num_seqs = seq_lens.shape[0]
    if cu_seq_lens is None:
        cu = torch.cumsum(seq_lens, dim=0, dtype=torch.int32)
    else:
        cu = cu_seq_lens[:num_seqs]
        torch.cumsum(seq_lens, dim=0, dtype=torch.int32, out=cu)
    if token_arange is None:
        tokens = torch.arange(num_tokens, device=seq_lens.device, dtype=torch.int32)
    else:
        tokens = token_arange[:num_tokens]
    if out is None:
        return torch.searchsorted(cu, tokens, right=True, out_int32=True)
    target = out[:num_tokens]
    torch.searchsorted(cu, tokens, right=True, out_int32=True, out=target)
    return target


def expected_req_idx_per_token(seq_lens: list[int] | torch.Tensor) -> list[int]:
    """The map written out the obvious way, on the host: the oracle the contract checks use.

    Deliberately a different formulation from :func:`build_req_idx_per_token` (a Python loop
    rather than searchsorted), so a bug in one cannot hide in the other.
    """
    lens = seq_lens.tolist() if hasattr(seq_lens, "tolist") else list(seq_lens)
    mapping: list[int] = []
    for req, n in enumerate(lens):
        mapping.extend([req] * int(n))
    return mapping
