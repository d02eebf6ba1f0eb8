"""Target-agnostic contract checks the upstream scenarios add to :mod:`regress.dsa.invariants`.

Like the checks there they read only public-ish metadata fields and return
:class:`~regress.dsa.invariants.Violation` lists, so the same definition judges the reference
mirror and real upstream code.
"""

from __future__ import annotations

from typing import Any

from regress.dsa.invariants import Violation
from regress.dsa.mapping import expected_req_idx_per_token


def check_slot_ownership(metadata: Any, kv_cache_manager: Any) -> list[Violation]:
    """Every token's indexer-K slot lies in a page of the request the token belongs to.

    ``slot_mapping_fp8`` holds flat byte offsets into the indexer-K pool; the block is
    ``offset // block_stride`` (upstream ``_compute_slot_mappings``). The manager knows which
    request owns each block. A stale token-to-request map sends draft tokens of requests
    ``1..B-1`` into request 0's pages, which this catches even where the map itself is not read.
    """
    slots = getattr(metadata, "slot_mapping_fp8", None)
    if slots is None:
        return []
    n = int(metadata.num_tokens)
    request_ids = list(metadata.request_ids or [])
    expected = expected_req_idx_per_token([int(x) for x in metadata.seq_lens.tolist()])[:n]
    stride = kv_cache_manager.indexer_block_stride()
    written = [int(s) // stride for s in slots[:n].tolist()]
    owners = [kv_cache_manager.owner_of_block(b) for b in written]
    wanted = [request_ids[r] if r < len(request_ids) else -1 for r in expected]
    wrong = [t for t, (o, w) in enumerate(zip(owners, wanted, strict=True)) if o != w]
    if not wrong:
        return []
    t = wrong[0]
    return [
        Violation(
            "indexer_k_slots",
            f"token {t} (request {wanted[t]}) writes its indexer K into block {written[t]}, "
            f"owned by request {owners[t]}: {len(wrong)} of {n} tokens write foreign pages",
            {
                "seq_lens": [int(x) for x in metadata.seq_lens.tolist()],
                "owner_of_written_block": owners,
                "expected_owner": wanted,
                "blocks_written": written,
            },
        )
    ]


def check_announced_width(metadata: Any, batch_size: int, seq_len_q: int) -> list[Violation]:
    """After announcing ``seq_len_q`` tokens per request, the MTP buffers can hold them.

    Newer DSA metadata keeps ``kv_lens_cuda_2d`` (``(max_num_sequences, 1 + max_draft_tokens)``),
    older (e5c90626) the flattened ``kv_lens_expanded_cuda`` (``max_num_sequences * (1 +
    max_draft_tokens)``); either must be wide enough, and ``max_draft_tokens`` must be
    ``seq_len_q - 1``.
    """
    need = seq_len_q - 1
    found = getattr(metadata, "max_draft_tokens", None)
    out: list[Violation] = []
    if found is not None and int(found) != need:
        out.append(
            Violation(
                "kv_lens_2d_width",
                f"max_draft_tokens is {found} after announcing seq_len_q={seq_len_q}; "
                f"expected {need}",
                {"max_draft_tokens": found, "seq_len_q": seq_len_q},
            )
        )
    kv2d = getattr(metadata, "kv_lens_cuda_2d", None)
    if kv2d is not None:
        rows, cols = (int(x) for x in kv2d.shape)
        if cols < seq_len_q or rows < batch_size:
            out.append(
                Violation(
                    "kv_lens_2d_width",
                    f"kv_lens_cuda_2d is {rows}x{cols}; {batch_size} requests of {seq_len_q} "
                    "tokens need next_n columns: DeepGEMM would abort",
                    {"shape": [rows, cols], "batch_size": batch_size, "seq_len_q": seq_len_q},
                )
            )
        return out
    expanded = getattr(metadata, "kv_lens_expanded_cuda", None)
    if expanded is not None and int(expanded.numel()) < batch_size * seq_len_q:
        out.append(
            Violation(
                "kv_lens_2d_width",
                f"kv_lens_expanded_cuda holds {int(expanded.numel())} entries; {batch_size} "
                f"requests of {seq_len_q} tokens need {batch_size * seq_len_q}",
                {"numel": int(expanded.numel()), "batch_size": batch_size, "seq_len_q": seq_len_q},
            )
        )
    return out
