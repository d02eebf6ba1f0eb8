"""Contract checks on live DSA metadata that return structured violations instead of asserting.

Written against the contract, not one class, so the same definition judges the reference mirrors
and real upstream code loaded in the sandbox (``regress check``): anything with ``seq_lens`` (host), ``num_tokens`` and
``req_idx_per_token`` is checked the same way, which is how the same bug class in another sparse
backend (``QSAAttentionMetadata``) would be caught. Each check reads device buffers back to the
host, so callers inside CUDA-graph capture must defer them (the sentinel does).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from regress.dsa.mapping import expected_req_idx_per_token


@dataclass(frozen=True)
class Violation:
    """One broken contract.

    Attributes:
        check: which contract (``req_idx_map``, ``kv_lens_2d_width``, ``announcement_scope``).
        message: one sentence a human can act on.
        details: the numbers behind it (layout, expected vs actual, first mismatch).
    """

    check: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _host_list(t: Any) -> list[int]:
    return [int(x) for x in t.detach().cpu().tolist()]


def check_req_idx_map(metadata: Any) -> list[Violation]:
    """The first ``num_tokens`` entries of ``req_idx_per_token`` agree with the current layout.

    The layout is the host ``seq_lens`` (what ``on_update()`` counted); the device mirror
    ``seq_lens_cuda`` is checked against it too, since the refresh reads the device copy.
    Metadata without a layout yet (``seq_lens`` is ``None``: upstream builds it so, see
    ``regress.dsa.lifecycle``) or without a map has nothing to check.
    """
    if getattr(metadata, "seq_lens", None) is None:
        return []
    if getattr(metadata, "req_idx_per_token", None) is None:
        return []
    seq_lens = _host_list(metadata.seq_lens)
    num_tokens = int(metadata.num_tokens)
    out: list[Violation] = []
    if sum(seq_lens) != num_tokens:
        out.append(
            Violation(
                "req_idx_map",
                f"num_tokens={num_tokens} but seq_lens sum to {sum(seq_lens)}: on_update() was "
                "not called after seq_lens changed",
                {"seq_lens": seq_lens, "num_tokens": num_tokens},
            )
        )
    device_lens = getattr(metadata, "seq_lens_cuda", None)
    if device_lens is not None:
        dev = _host_list(device_lens[: len(seq_lens)])
        if dev != seq_lens:
            out.append(
                Violation(
                    "req_idx_map",
                    "seq_lens_cuda disagrees with host seq_lens: the device copy was not updated",
                    {"seq_lens": seq_lens, "seq_lens_cuda": dev},
                )
            )
    expected = expected_req_idx_per_token(seq_lens)[:num_tokens]
    actual = _host_list(metadata.req_idx_per_token[:num_tokens])
    first = next(
        (i for i, (a, e) in enumerate(zip(actual, expected, strict=False)) if a != e), None
    )
    if first is None and len(actual) < len(expected):  # the buffer cannot hold the layout
        out.append(
            Violation(
                "req_idx_map",
                f"req_idx_per_token holds {len(actual)} entries but the layout has "
                f"{len(expected)} tokens",
                {"seq_lens": seq_lens, "num_tokens": num_tokens, "capacity": len(actual)},
            )
        )
    # A longer map than the layout with a right prefix means num_tokens exceeds sum(seq_lens):
    # the count violation above already says so, and no token of the layout is mapped wrong.
    if first is None:
        return out
    out.append(
        Violation(
            "req_idx_map",
            f"req_idx_per_token is stale: token {first} maps to request {actual[first]}, "
            f"but layout {_short(seq_lens)} puts it in request {expected[first]}",
            {
                "seq_lens": seq_lens,
                "num_tokens": num_tokens,
                "expected": expected,
                "actual": actual,
                "first_mismatch": first,
            },
        )
    )
    return out


def kv_lens_2d_fits(shape: Any, requests: int, next_n: int) -> bool:
    """The one width rule: ``kv_lens_cuda_2d`` holds a row per request and ``next_n`` columns.

    DeepGEMM's ``fp8_paged_mqa_logits`` asserts ``batch_size == __batch_size and next_n ==
    _next_n`` (:data:`regress.dsa.announce.DEEPGEMM_ASSERT`) on exactly these dimensions.
    """
    rows, cols = (int(x) for x in shape)
    return cols >= next_n and rows >= requests


def check_kv_lens_2d_width(metadata: Any) -> list[Violation]:
    """``kv_lens_cuda_2d`` has at least ``next_n`` columns and a row per generation request.

    Nothing to check before the first layout or where the buffer is not allocated (``None``).
    """
    if getattr(metadata, "kv_lens_cuda_2d", None) is None:
        return []
    g = int(metadata.num_generations or 0)
    if g <= 0:
        return []
    next_n = (int(metadata.num_tokens) - int(metadata.num_ctx_tokens)) // g
    if kv_lens_2d_fits(metadata.kv_lens_cuda_2d.shape, g, next_n):
        return []
    rows, cols = (int(x) for x in metadata.kv_lens_cuda_2d.shape)
    return [
        Violation(
            "kv_lens_2d_width",
            f"kv_lens_cuda_2d is {rows}x{cols} but {g} generation requests carry next_n={next_n} "
            "tokens each: DeepGEMM will abort; announce the shapes with update_spec_dec_param()",
            {"shape": [rows, cols], "num_generations": g, "next_n": next_n},
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
        if not kv_lens_2d_fits(kv2d.shape, batch_size, seq_len_q):
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


SPEC_FIELDS = ("max_total_draft_tokens", "is_spec_decoding_enabled", "is_spec_dec_tree")


def snapshot_spec_state(metadata: Any) -> dict[str, Any]:
    """The kernel-selection-relevant spec-dec fields, for :func:`check_dense_untouched`."""
    return {f: getattr(metadata, f, None) for f in SPEC_FIELDS}


def check_dense_untouched(before: dict[str, Any], metadata: Any) -> list[Violation]:
    """Non-DSA metadata kept its spec-dec fields across a shape announcement.

    DSA metadata (it has ``kv_lens_cuda_2d``) is allowed to change: serving sets the same values.
    """
    if hasattr(metadata, "kv_lens_cuda_2d"):
        return []
    after = snapshot_spec_state(metadata)
    changed = {k: [before.get(k), after[k]] for k in SPEC_FIELDS if before.get(k) != after[k]}
    if not changed:
        return []
    return [
        Violation(
            "announcement_scope",
            f"{type(metadata).__name__} (non-DSA) had {', '.join(changed)} changed by an MTP "
            "shape announcement; it reaches kernel selection. Make the call only on metadata "
            "that has kv_lens_cuda_2d (DSA)",
            {"changed": changed, "backend": type(metadata).__name__},
        )
    ]


def _short(seq_lens: list[int], limit: int = 12) -> str:
    if len(seq_lens) <= limit:
        return str(seq_lens)
    return f"[{', '.join(map(str, seq_lens[:limit]))}, ... ({len(seq_lens)} requests)]"
