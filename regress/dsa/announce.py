"""Announcing speculation to attention metadata: every ``update_spec_dec_param()`` call regress makes.

Two callers announce, for two reasons, and each has one function here: the executor announces
the draft length before every forward (:func:`announce_speculation`, spec-dec on), and the
layer-wise benchmark announces MTP shapes only (:func:`announce_mtp_shapes`, bug 2's contract:
the fix in ``tensorrt_llm/tools/layer_wise_benchmarks/runner.py::Runner.create_run_pack``,
PR #17247, final revision).
"""

from __future__ import annotations

from typing import Any

DEEPGEMM_ASSERT = "DG_HOST_ASSERT(batch_size == __batch_size and next_n == _next_n)"
"""DeepGEMM's host assertion in ``fp8_paged_mqa_logits`` (``csrc/apis/attention.hpp``): what an
unannounced ``next_n`` aborts the process with. Defined once; probes, the reference indexer and
the layer-wise runner import it. Condition text checked in DeepGEMM's ``attention.hpp`` (newest
stored version of DeepGEMM's ``csrc/apis/attention.hpp``, commit unknown)."""


def announce_mtp_shapes(metadata: Any, run_type: str, batch_size: int, seq_len_q: int) -> bool:
    """Tell DSA metadata that each request carries ``seq_len_q`` tokens, before ``prepare()``.

    In serving the executor calls ``update_spec_dec_param()``; the layer-wise benchmark did not,
    so ``kv_lens_cuda_2d`` stayed one column wide and DeepGEMM aborted. The guard is
    whether the metadata has a ``kv_lens_cuda_2d`` attribute: it exists on DSA metadata only,
    whereas ``update_spec_dec_param`` is on the base class and, on the dense TRT-LLM backend, sets
    ``max_total_draft_tokens`` (a kernel-selection input). Spec decoding and tree modes stay off:
    only the shapes are wanted.

    Args:
        metadata: an attention-metadata object (TensorRT-LLM's or a reference mirror).
        run_type: ``"CTX"`` or ``"GEN"``.
        batch_size: requests in the pack.
        seq_len_q: new tokens per request (``1 + num_draft`` under MTP).

    Returns:
        Whether the announcement was made.
    """
    if run_type != "GEN" or seq_len_q <= 1 or not hasattr(metadata, "kv_lens_cuda_2d"):
        return False
    metadata.update_spec_dec_param(**mtp_shape_params(batch_size, seq_len_q))
    return True


def mtp_shape_params(batch_size: int, seq_len_q: int) -> dict[str, Any]:
    """The ``update_spec_dec_param`` arguments that announce shapes only: no spec dec, no tree."""
    return {
        "batch_size": batch_size,
        "is_spec_decoding_enabled": False,
        "is_spec_dec_tree": False,
        "is_spec_dec_dynamic_tree": False,
        "max_draft_len": seq_len_q - 1,
        "max_total_draft_tokens": seq_len_q - 1,
    }


def announce_speculation(metadata: Any, batch_size: int, max_draft_len: int) -> None:
    """The executor's per-forward ``update_spec_dec_param`` call (linear MTP drafts, no tree).

    Made before the batch is set (``regress.dsa.lifecycle`` cites where upstream makes it);
    ``max_draft_len == 0`` announces speculation off.
    """
    metadata.update_spec_dec_param(
        batch_size=batch_size,
        is_spec_decoding_enabled=max_draft_len > 0,
        is_spec_dec_tree=False,
        is_spec_dec_dynamic_tree=False,
        max_draft_len=max_draft_len,
        max_total_draft_tokens=max_draft_len,
    )


__all__ = ["DEEPGEMM_ASSERT", "announce_mtp_shapes", "announce_speculation", "mtp_shape_params"]
