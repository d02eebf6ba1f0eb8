"""The DSA indexer's decode-time shape contract with DeepGEMM, and its abort message.

Mirrors the host check in DeepGEMM's ``fp8_paged_mqa_logits`` (``csrc/apis/attention.hpp``) as
called from ``tensorrt_llm/_torch/attention_backend/sparse/dsa.py::Indexer``: context lengths must
be ``[batch, next_n]``, matching the query.
"""

from __future__ import annotations

from typing import Any

from regress.dsa.announce import DEEPGEMM_ASSERT

__all__ = [
    "DEEPGEMM_ASSERT",
    "DeepGemmAssertion",
    "check_paged_mqa_logits_shapes",
    "indexer_decode_shapes",
]


class DeepGemmAssertion(RuntimeError):
    """Raised where DeepGEMM would abort the process; the message carries its assert text."""


def check_paged_mqa_logits_shapes(num_generations: int, next_n: int, context_lens: Any) -> None:
    """Reject context lengths whose shape is not ``(num_generations, next_n)``.

    Raises:
        DeepGemmAssertion: with DeepGEMM's own assertion text, so probes that grep for it match.
    """
    got = tuple(context_lens.shape)
    if got != (num_generations, next_n):
        raise DeepGemmAssertion(
            f"Assertion error (csrc/apis/attention.hpp): {DEEPGEMM_ASSERT}; q is "
            f"[{num_generations}, {next_n}] but context_lens is {list(got)}. The 2-D kv-lens "
            f"buffer was never widened: announce MTP shapes with update_spec_dec_param()."
        )


def indexer_decode_shapes(metadata: Any) -> tuple[int, int]:
    """Run the decode-side shape check on a prepared DSA metadata object.

    Returns:
        ``(num_generations, next_n)`` when the shapes agree.
    """
    g = metadata.num_generations
    next_n = (metadata.num_tokens - metadata.num_ctx_tokens) // g if g else 0
    check_paged_mqa_logits_shapes(g, next_n, metadata.gen_context_lens())
    return g, next_n
