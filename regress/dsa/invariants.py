"""Contract checks on live DSA metadata that return structured violations instead of asserting.

Written against the contract, not one class: anything with ``seq_lens`` (host), ``num_tokens`` and
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
    if actual != expected:
        first = next(
            (i for i, (a, e) in enumerate(zip(actual, expected, strict=False)) if a != e),
            min(len(actual), len(expected)),  # one is shorter: the buffer cannot hold the layout
        )
        if first >= len(actual):
            return [
                *out,
                Violation(
                    "req_idx_map",
                    f"req_idx_per_token holds {len(actual)} entries but the layout has "
                    f"{len(expected)} tokens",
                    {"seq_lens": seq_lens, "num_tokens": num_tokens, "capacity": len(actual)},
                ),
            ]
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
    rows, cols = (int(x) for x in metadata.kv_lens_cuda_2d.shape)
    if cols >= next_n and rows >= g:
        return []
    return [
        Violation(
            "kv_lens_2d_width",
            f"kv_lens_cuda_2d is {rows}x{cols} but {g} generation requests carry next_n={next_n} "
            "tokens each: DeepGEMM will abort; announce the shapes with update_spec_dec_param()",
            {"shape": [rows, cols], "num_generations": g, "next_n": next_n},
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
            "shape announcement; it reaches kernel selection. Guard the call with "
            "hasattr(metadata, 'kv_lens_cuda_2d')",
            {"changed": changed, "backend": type(metadata).__name__},
        )
    ]


def _short(seq_lens: list[int], limit: int = 12) -> str:
    if len(seq_lens) <= limit:
        return str(seq_lens)
    return f"[{', '.join(map(str, seq_lens[:limit]))}, ... ({len(seq_lens)} requests)]"
