"""Two executor replays a production run makes between the metadata calls: CUDA-graph padding and
the overlap scheduler's kv-length correction.

* **Padding.** With ``CudaGraphConfig(enable_padding=True)`` the graph runner rounds a
  generation-only batch up to the next captured batch size by appending one dummy generation
  request (``1 + runtime_draft_len`` tokens, allocated once by the KV-cache manager's
  ``add_dummy_requests``) as many times as needed: every dummy row carries the same request id
  (``tensorrt_llm/_torch/pyexecutor/cuda_graph_runner.py`` ``_get_padded_batch`` /
  ``_get_or_create_padding_dummy``, newest stored version, commit unknown). :func:`padded`
  builds that layout.
* **Overlap correction.** With the overlap scheduler the host prepares forward ``n + 1`` before
  forward ``n``'s acceptance is known, assuming every draft accepted; the device then adds
  ``previous_kv_lens_offsets_cuda`` (accepted minus ``1 + K`` per generation request, 0 for a
  dummy) to ``kv_lens_cuda`` and calls ``on_update_kv_lens()``
  (``tensorrt_llm/_torch/pyexecutor/model_engine.py`` ``_preprocess_inputs``, read in the stored
  versions that call the hook after the addition). :func:`host_assumed` is the batch the host
  prepares, :func:`correct` the device's correction.

Neither is upstream code: both are what regress hands the tree's metadata.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from regress.dsa.batch import Batch

#: Captured batch sizes the padding rounds up to (``CudaGraphConfig`` batch sizes are powers of
#: two up to its ``max_batch_size`` by default).
CAPTURE_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
#: Tokens the padding dummy holds in the cache before its forward (it is allocated as a
#: generation request of one prompt token).
DUMMY_CACHED = 1


def capture_size(batch_size: int) -> int:
    """The smallest captured size that holds ``batch_size`` (the batch itself past the largest)."""
    return next((s for s in CAPTURE_SIZES if s >= batch_size), batch_size)


def padded(batch: Batch, capture: int, dummy_id: int) -> Batch:
    """``batch`` with dummy generation rows up to ``capture`` rows, all of request ``dummy_id``.

    A dummy verifies ``1 + K`` tokens like every generation request; it accepts only the bonus.
    """
    extra = capture - batch.batch_size
    if extra <= 0:
        return batch
    k = batch.max_draft_len
    cached = batch.cached_lens() + [DUMMY_CACHED] * extra
    return dataclasses.replace(
        batch,
        seq_lens=batch.seq_lens + (k + 1,) * extra,
        cached=tuple(cached),
        num_accepted=tuple(batch.accepted()) + (1,) * extra,
        request_ids=tuple(batch.ids()) + (dummy_id,) * extra,
        prompt_lens=tuple(batch.prompt_lens or cached[: batch.batch_size]) + (1,) * extra,
        name=f"{batch.name}+pad{extra}",
    )


def following(batch: Batch, dummy_id: int | None = None) -> Batch:
    """The verify forward after ``batch``'s draft loop: the same rows, each request's cache grown
    by what it accepted; a padding dummy (``dummy_id``) is the same dummy again, unchanged."""
    grown = [
        c if rid == dummy_id else c + a
        for c, a, rid in zip(batch.cached_lens(), batch.accepted(), batch.ids(), strict=True)
    ]
    return dataclasses.replace(batch, cached=tuple(grown), name=f"{batch.name}/next")


def host_assumed(true_next: Batch, previous: Batch, dummy_id: int | None = None) -> Batch:
    """What the host prepares for ``true_next`` under the overlap scheduler: every draft of
    ``previous`` accepted, so each real request's cache grew by ``1 + K``."""
    k = previous.max_draft_len
    cached = [
        c if rid == dummy_id else c + k + 1
        for c, rid in zip(previous.cached_lens(), previous.ids(), strict=True)
    ]
    return dataclasses.replace(true_next, cached=tuple(cached), name=f"{true_next.name}@host")


def offsets(host: Batch, true_next: Batch) -> list[int]:
    """``previous_kv_lens_offsets_cuda`` per generation request: true minus assumed."""
    nc = true_next.num_contexts
    return [
        t - h for t, h in zip(true_next.cached_lens()[nc:], host.cached_lens()[nc:], strict=True)
    ]


def correct(md: Any, kv_offsets: list[int]) -> None:
    """The device correction: ``kv_lens_cuda`` of the generation rows += the offsets, then the
    metadata's ``on_update_kv_lens()``."""
    import torch

    nc, ns = int(md.num_contexts), int(md.num_seqs)
    delta = torch.tensor(kv_offsets, dtype=md.kv_lens_cuda.dtype)
    md.kv_lens_cuda[nc:ns] += delta.to(md.kv_lens_cuda.device)
    md.on_update_kv_lens()


__all__ = [
    "CAPTURE_SIZES",
    "DUMMY_CACHED",
    "capture_size",
    "correct",
    "following",
    "host_assumed",
    "offsets",
    "padded",
]
