"""The draft loop's metadata transitions, one function each, as upstream's one-model worker makes them.

``regress.dsa.lifecycle.iter_draft_loop`` composes them into the model of the loop; the
reference engine (``regress.reference.serving``, ``graphs``) calls the same functions from its
compute loop, so there is one definition of what the loop does to the metadata. Read from
``tensorrt_llm/_torch/speculative/eagle3.py`` ``Eagle3OneModelWorker.forward`` (the newest stored
version, commit unknown; ``mtp.py`` ``MTPEagleWorker.forward`` @ 23ee85ee, older, makes the same
calls and restores without ``num_contexts``) and ``speculative/interface.py`` ``SpecWorkerBase``
(the newest stored version, commit unknown). Upstream's ``speculative/draft_target.py`` splits the
same transitions into functions too (``_update_kv_after_first_draft_step``,
``_update_kv_for_chained_draft_step``; the newest stored version, commit unknown):

* :func:`save_target` before draft step 0 (``_prepare_attn_metadata_for_spec_dec``: the metadata
  saves its host and device seq lens through ``prepare_for_spec_dec``);
* :func:`collapse` after step 0's forward (both seq-lens buffers set to one token per request,
  ``on_update()``, with a KV cache the contexts marked as generation requests and
  ``num_contexts`` set to 0, the kv-lens rewind);
* :func:`advance` after every step's forward, step 0 included (every kv length grows by one,
  then ``update_for_spec_dec()``): the last one prepares a step that never runs, as upstream's does;
* :func:`restore_target` after the last step (``_restore_attn_metadata_from_spec_dec``:
  ``restore_from_spec_dec()`` then ``on_update()``; the newest restore also brings back
  ``num_contexts`` and ``host_request_types``, as upstream's tests of the paired prepare/restore
  assert: the newest stored versions of its speculative-metadata lifecycle tests, commit unknown).

What the loop saves (:class:`DraftSave`) is the target forward's batch, kept for the restore.
Where callers differ (how the target batch is saved, whether kv lens come back) is a named
:class:`LoopOptions` field, not a second copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SAVE_MODES = ("swap", "in_place")
"""How :class:`LoopOptions` may save the target batch for the restore."""


@dataclass(frozen=True)
class LoopOptions:
    """How a draft-loop caller saves and restores the target batch: where callers differ, named.

    Attributes:
        save: ``"swap"``, upstream's ``prepare_for_spec_dec`` of the two seq-lens buffers
            (the loop writes clones, the restore swaps the originals back; by hand where the
            method is missing). ``"in_place"``: the loop writes the buffers themselves and the
            restore copies the saved values back, so no tensor changes address. A CUDA graph
            holding only part of the loop needs it (the reference engine captures steps 1..K-1
            after an eager collapse: an eager swap's fresh clone each iteration is not the one
            the graph captured); upstream captures the whole forward, and warns against keeping
            the temporary spec-dec clone, whose storage graph capture may release (a backend's
            ``restore_from_spec_dec`` comment; the newest stored version, commit unknown).
        restore_kv_lens: also put ``kv_lens_cuda[:bs]`` back. ``Eagle3OneModelWorker``
            (``speculative/eagle3.py``) leaves it for the next ``prepare()``; vanilla
            ``MTPWorker``'s restore keeps it (upstream test
            ``test_mtp_spec_dec_restore_preserves_kv_lens_cuda``), PARD's
            (``speculative/pard.py``) restores it in place (each the newest stored version,
            commit unknown).
    """

    save: str = "swap"
    restore_kv_lens: bool = False

    def __post_init__(self) -> None:
        if self.save not in SAVE_MODES:
            raise ValueError(f"LoopOptions.save={self.save!r}: use one of {', '.join(SAVE_MODES)}")


UPSTREAM_WORKER = LoopOptions()
"""The options of upstream's one-model worker: swap the seq-lens tensors, leave kv lens as they are."""


@dataclass
class DraftSave:
    """What :func:`save_target` kept for :func:`restore_target`: the target forward's batch."""

    batch_size: int
    num_contexts: int
    options: LoopOptions
    request_types: Any = None
    seq_lens: tuple[Any, Any] | None = None  # in_place: saved values; swap by hand: originals
    kv_lens: Any = None


def save_target(metadata: Any, options: LoopOptions = UPSTREAM_WORKER) -> DraftSave:
    """Before draft step 0 (``_prepare_attn_metadata_for_spec_dec``): keep the target batch."""
    bs, types = int(metadata.num_seqs), getattr(metadata, "host_request_types", None)
    saved = DraftSave(bs, int(metadata.num_contexts), options)
    saved.request_types = types.clone() if types is not None else None
    kv = getattr(metadata, "kv_lens_cuda", None)
    if options.restore_kv_lens and kv is not None:
        saved.kv_lens = kv[:bs].clone()
    if options.save == "in_place":
        saved.seq_lens = (metadata._seq_lens[:bs].clone(), metadata._seq_lens_cuda[:bs].clone())
    elif hasattr(metadata, "prepare_for_spec_dec"):
        metadata.prepare_for_spec_dec("_seq_lens", "_seq_lens_cuda")
    else:  # an older interface.py without prepare_for_spec_dec: swap by hand
        saved.seq_lens = (metadata._seq_lens, metadata._seq_lens_cuda)
        metadata._seq_lens, metadata._seq_lens_cuda = (t.clone() for t in saved.seq_lens)
    return saved


def collapse(
    metadata: Any,
    saved: DraftSave,
    max_draft_len: int,
    num_accepted: Sequence[int],
    *,
    draft_seq_lens: Sequence[int] | None = None,
) -> None:
    """After draft step 0's forward: one token per request, all generations, kv lens rewound.

    Lays the batch out as ``draft_seq_lens`` (default all ones), ``on_update()``, turns contexts
    into generations where there is a KV cache, and rewinds each generation request's
    ``kv_lens_cuda`` to the tokens it keeps (``K + 1`` verified, ``num_accepted`` kept).
    Upstream does the rewind and the first :func:`advance` in one step (generation requests lose
    their rejected drafts, contexts grow by one: a context keeps every token); the integer
    result is the same, and the split lets a caller capture the advance in a CUDA graph.
    """
    import torch

    bs, nc = saved.batch_size, saved.num_contexts
    if draft_seq_lens is None:
        metadata._seq_lens[:bs].fill_(1)
        metadata._seq_lens_cuda[:bs].fill_(1)
    else:
        lens = torch.tensor(list(draft_seq_lens), dtype=torch.int32)
        metadata._seq_lens[:bs].copy_(lens)
        metadata._seq_lens_cuda[:bs].copy_(lens)
    metadata.on_update()
    if getattr(metadata, "kv_cache_manager", None) is not None:
        if saved.request_types is not None:
            metadata.host_request_types[: metadata.num_contexts].fill_(1)
        metadata.num_contexts = 0
    kv = getattr(metadata, "kv_lens_cuda", None)
    if kv is not None:
        acc = torch.tensor(list(num_accepted)[nc:bs], dtype=kv.dtype, device=kv.device)
        kv[nc:bs] -= max_draft_len + 1 - acc


def advance(metadata: Any, batch_size: int) -> None:
    """The end of every draft step: ``kv_lens_cuda[:bs] += 1``, then ``update_for_spec_dec()``."""
    kv = getattr(metadata, "kv_lens_cuda", None)
    if kv is not None:
        kv[:batch_size] += 1
    metadata.update_for_spec_dec()


def restore_target(metadata: Any, saved: DraftSave) -> None:
    """After the last step (``_restore_attn_metadata_from_spec_dec``): the target batch back.

    ``seq_lens`` as saved, then (newest ``SpecWorkerBase``) ``num_contexts`` and
    ``host_request_types``, then ``on_update()``; ``kv_lens_cuda`` only with
    :attr:`LoopOptions.restore_kv_lens`. Nothing rebuilds the derived buffers.
    """
    bs = saved.batch_size
    if saved.options.save == "in_place":
        metadata._seq_lens[:bs].copy_(saved.seq_lens[0])
        metadata._seq_lens_cuda[:bs].copy_(saved.seq_lens[1])
    elif saved.seq_lens is not None:
        metadata._seq_lens, metadata._seq_lens_cuda = saved.seq_lens
    else:
        metadata.restore_from_spec_dec()
    if saved.kv_lens is not None:
        metadata.kv_lens_cuda[:bs].copy_(saved.kv_lens)
    metadata.num_contexts = saved.num_contexts
    if saved.request_types is not None:
        metadata.host_request_types.copy_(saved.request_types)
    metadata.on_update()


__all__ = [
    "SAVE_MODES",
    "UPSTREAM_WORKER",
    "DraftSave",
    "LoopOptions",
    "advance",
    "collapse",
    "restore_target",
    "save_target",
]
