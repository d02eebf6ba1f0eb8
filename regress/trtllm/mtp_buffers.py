"""Which DSA indexer buffers the paged-MQA kernel reads on each architecture, and their width.

DeepGEMM's ``fp8_paged_mqa_logits`` takes the decode batch either natively, ``[batch, next_n]``
with per-token context lengths in ``kv_lens_cuda_2d``, or flattened into ``batch * next_n``
one-token rows with ``kv_lens_expanded_cuda`` and ``block_table_expanded``. Which one a step uses
is ``DSAtrtllmAttentionMetadata.use_expanded_buffers_for_mtp``, set in
``prepare_for_spec_decode``:

* after PR #18383 (the newest stored version of
  ``tensorrt_llm/_torch/attention_backend/sparse/dsa/metadata.py``, commit unknown): expanded for ragged
  verification or ``max_draft_tokens > 1`` on sm90, native everywhere else, so on Blackwell
  the ``kv_lens_cuda_2d`` width contract holds for every MTP depth;
* before it (e.g. a stored version of ``tensorrt_llm/_torch/attention_backend/sparse/dsa.py``,
  commit unknown): expanded for more than one draft token
  on sm90 and for 2 or more than 3 draft tokens on sm100+ (native ``next_n`` 1/2/4 only);
* the CuTe DSL paged-MQA path never uses the MTP expansion.

Both eras expand on sm90 for K > 1 (the sm90 kernel takes ``next_n`` 1 or 2), which is what
:func:`check_arch_buffers` holds every build to; :func:`check_width` holds whichever buffer set
is in use to the shape of the batch. The sm90 rule follows upstream's own comment (sm90 has no
native MTP support beyond sequence lengths 1 and 2, with a TODO to drop the branch): revisit it when
upstream's sm90 paged-MQA path takes a larger ``next_n``.
"""

from __future__ import annotations

from typing import Any

from regress.dsa.invariants import Violation, check_kv_lens_2d_width

KV_LENS_2D = "kv_lens_cuda_2d"
KV_LENS_EXPANDED = "kv_lens_expanded_cuda"
HOPPER_SM = 90


def expected_buffer(
    sm: int, max_draft_tokens: int, *, ragged: bool = False, dsl: bool = False
) -> str:
    """The buffer set a post-#18383 build reads for this architecture and MTP depth."""
    expanded = not dsl and (ragged or (max_draft_tokens > 1 and sm == HOPPER_SM))
    return KV_LENS_EXPANDED if expanded else KV_LENS_2D


def buffer_in_use(metadata: Any) -> str:
    """The buffer set this metadata's step will hand to DeepGEMM."""
    return (
        KV_LENS_EXPANDED if getattr(metadata, "use_expanded_buffers_for_mtp", False) else KV_LENS_2D
    )


def _rows(tensor: Any) -> int:
    return int(tensor.shape[0]) if tensor is not None and len(tensor.shape) else 0


def check_width(metadata: Any) -> list[Violation]:
    """The width contract on the buffer set in use: room for every generation token.

    Native: ``kv_lens_cuda_2d`` has ``next_n`` columns (:func:`check_kv_lens_2d_width`).
    Expanded: ``kv_lens_expanded_cuda`` and ``block_table_expanded`` hold one row per
    generation token (the sum of the rows, so ragged windows count right).
    """
    if buffer_in_use(metadata) == KV_LENS_2D:
        return check_kv_lens_2d_width(metadata)
    expanded = getattr(metadata, KV_LENS_EXPANDED, None)
    if expanded is None or not int(metadata.num_generations or 0):
        return []
    need = int(metadata.num_tokens) - int(metadata.num_ctx_tokens)
    held = {KV_LENS_EXPANDED: int(expanded.numel())}
    table = getattr(metadata, "block_table_expanded", None)
    if table is not None:
        held["block_table_expanded"] = _rows(table)
    short = {name: n for name, n in held.items() if n < need}
    if not short:
        return []
    return [
        Violation(
            "kv_lens_expanded_width",
            f"{', '.join(f'{k} holds {v} rows' for k, v in short.items())}, but the step has "
            f"{need} generation tokens: the flattened paged-MQA call reads past them",
            {"held": held, "generation_tokens": need},
        )
    ]


def check_arch_buffers(metadata: Any, sm: int) -> list[Violation]:
    """On sm90 an MTP step with more than one draft token must take the expanded buffers.

    The sm90 kernel runs ``next_n`` 1 or 2 only, in every era read; a native call at larger
    ``next_n`` is DeepGEMM's ``DG_HOST_ASSERT`` abort. Other architectures may take either.
    """
    k = int(getattr(metadata, "max_draft_tokens", 0) or 0)
    if sm != HOPPER_SM or k <= 1 or buffer_in_use(metadata) == KV_LENS_EXPANDED:
        return []
    return [
        Violation(
            "mtp_buffer_set",
            f"sm90 with max_draft_tokens={k} uses the native kv_lens_cuda_2d path; the sm90 "
            "paged-MQA kernel takes next_n 1 or 2, so the step must use the expanded buffers",
            {"sm": sm, "max_draft_tokens": k, "buffer": KV_LENS_2D},
        )
    ]
