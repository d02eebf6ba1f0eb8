"""Upstream's per-forward call order on attention metadata, as a driver any metadata object can run.

One model of what TensorRT-LLM does to an attention-metadata object on every forward of one-model
MTP-Eagle speculative decoding, written once from the upstream sources so that tests of the
sentinel, of the TensorRT-LLM hooks and of the reference engine exercise the real order instead
of our engine's private one. It drives anything with upstream's metadata interface: the mirrors in
``regress.reference.metadata`` and the real upstream classes loaded in a CPU sandbox alike.

Per forward (read in the stored versions of ``NVIDIA/TensorRT-LLM`` named below):

1. **Announce.** ``update_spec_dec_param(...)`` runs first, before the inputs are prepared
   (``tensorrt_llm/_torch/pyexecutor/model_engine.py`` ``PyTorchModelEngine.forward`` @ 1a0dc5f7 and
   earlier; newer builds (the newest stored versions of the executor's forward path, commit
   unknown): ``ForwardExecutor._forward_scheduled`` -> ``update_spec_metadata``, which
   calls ``attn_metadata.update_spec_dec_param(batch_size=..., is_spec_decoding_enabled=...,
   is_spec_dec_tree=..., is_spec_dec_dynamic_tree=..., max_draft_len=...,
   max_total_draft_tokens=..., ...)``). On the first forward the metadata was built without a
   layout: ``seq_lens`` is ``None`` (``_torch/attention_backend/interface.py``
   ``AttentionMetadata.seq_lens`` setter @ 000a01de: "The model executor sets seq_lens to None
   initially"; ``num_seqs`` is ``seq_lens.shape[0]`` and raises then). On later forwards it still
   holds the previous forward's layout, restored after that forward's draft loop.
2. **Prepare.** The executor sets the batch on the metadata and calls ``prepare()``
   (:func:`regress.dsa.batch.prepare_batch`); the target model then runs on that layout.
3. **Draft loop** (``_torch/speculative/eagle3.py`` ``Eagle3OneModelWorker.forward``, the newest
   stored version, commit unknown, which ``mtp.py`` ``MTPEagleWorker`` became a thin wrapper of;
   older builds: ``mtp.py`` ``MTPEagleWorker.forward`` with the same sequence): save the target
   batch, draft step 0 on it, collapse the batch after it, advance after every step.
   ``num_accepted_tokens`` counts the bonus token (1..K+1), as eagle3's
   ``sample_and_accept_draft_tokens`` returns it.
4. **Restore** (``_restore_attn_metadata_from_spec_dec``, ``_torch/speculative/interface.py``
   ``SpecWorkerBase``, the newest stored version, commit unknown). Nothing rebuilds the
   backend's derived buffers: the DSA map stays in the draft-step layout until the next
   ``prepare()``.

Each draft-loop transition is one function of ``regress.dsa.transitions`` (which cites the
upstream lines); :func:`iter_draft_loop` composes them, the reference engine calls the same
functions from its compute loop (with the ``LoopOptions`` it needs), and the upstream scenarios
drive :func:`draft_checkpoints`: one model of the loop.

Where upstream guarantees that derived buffers (``req_idx_per_token``, ``kv_lens_cuda_2d``) match
the layout: after ``prepare()`` and after each ``update_for_spec_dec()`` (which calls
``on_update_kv_lens()`` on DSA metadata), i.e. wherever kernels read them. Not after the
announcement nor after the restore: :attr:`Event.guaranteed` says which is which.

Usage::

    from regress.dsa.lifecycle import run_forwards, serving_forwards

    events = run_forwards(md, serving_forwards(batch_size=8, max_draft_len=4, generations=3),
                          max_draft_len=4, observer=lambda event, md: ...)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from regress.dsa.announce import announce_speculation
from regress.dsa.batch import Batch, prepare_batch
from regress.dsa.transitions import (
    UPSTREAM_WORKER,
    LoopOptions,
    advance,
    collapse,
    restore_target,
    save_target,
)

STAGES = ("announce", "prepare", "draft_begin", "draft_step", "restore")
"""Stage names of :class:`Event`, in the order they occur within one forward."""

GUARANTEED_STAGES = frozenset({"prepare", "draft_begin", "draft_step"})
"""Stages after which upstream guarantees the derived buffers describe the current layout."""

GUARANTEED_AFTER = frozenset({"prepare", "on_update_kv_lens", "update_for_spec_dec"})
"""Metadata methods after whose return upstream guarantees the derived buffers match the layout:
the ones every :data:`GUARANTEED_STAGES` stage ends with (DSA's ``update_for_spec_dec`` calls
``on_update_kv_lens``). Not ``update_spec_dec_param`` (it runs before the layout is set, on
``seq_lens=None`` or on the layout the last restore left) nor ``on_update`` (counts only)."""


@dataclass(frozen=True)
class Event:
    """One point of the lifecycle, passed to the observer after the transition it names.

    Attributes:
        forward: index of the forward in the sequence.
        stage: one of :data:`STAGES`.
        step: the draft step for ``draft_step`` (0 = the collapse), else None.
        guaranteed: whether upstream guarantees here that derived buffers match the layout.
    """

    forward: int
    stage: str
    step: int | None = None
    guaranteed: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "guaranteed", self.stage in GUARANTEED_STAGES)


Observer = Callable[[Event, Any], None]
Announcer = Callable[[Any, int, int], None]
"""``announcer(metadata, batch_size, max_draft_len)``: the per-forward announcement."""


def iter_draft_loop(
    metadata: Any,
    max_draft_len: int,
    num_accepted: Sequence[int],
    *,
    draft_seq_lens: Sequence[int] | None = None,
    options: LoopOptions = UPSTREAM_WORKER,
) -> Iterator[tuple[str, int | None]]:
    """The metadata side of one MTP-Eagle draft loop, yielding ``(stage, step)`` after each step.

    ``save_target``, then after each step ``i``'s forward ``collapse`` (``i == 0`` only) and
    ``advance``, then ``restore_target`` (``regress.dsa.transitions``). A generator so that a
    caller can look at (or act on) the metadata between transitions; :func:`draft_loop` runs it
    through. The reference engine calls the same transitions from its compute loop
    (``regress.reference.serving``).

    Args:
        metadata: prepared metadata (the target forward's layout).
        max_draft_len: K, the number of draft steps.
        num_accepted: accepted tokens per request counting the bonus (1..K+1).
        draft_seq_lens: the layout step 0 collapses to (default all ones; see :class:`Batch`).
        options: how the target batch is saved and restored (default: upstream's one-model
            worker).
    """
    saved = save_target(metadata, options)
    yield "draft_begin", None
    for i in range(max_draft_len):
        if i == 0:
            collapse(metadata, saved, max_draft_len, num_accepted, draft_seq_lens=draft_seq_lens)
        advance(metadata, saved.batch_size)
        yield "draft_step", i
    restore_target(metadata, saved)
    yield "restore", None


def draft_checkpoints(
    metadata: Any,
    max_draft_len: int,
    num_accepted: Sequence[int],
    *,
    draft_seq_lens: Sequence[int] | None = None,
) -> Iterator[str]:
    """:func:`iter_draft_loop` as the labels a checker names what it saw by.

    Yields ``"draft_begin"`` before the collapse (the target forward's layout, saved for the
    restore), then ``"draft_step_<i>"`` after step ``i``'s ``update_for_spec_dec()``, the points
    where upstream guarantees the derived buffers; the restore runs when the generator is
    exhausted. One labelling for every caller: the reference battery, the upstream scenarios of
    ``regress check`` and the tests name the same moment the same way.

    Args:
        num_accepted: accepted tokens per request counting the bonus (1..K+1), as upstream's
            ``num_accepted_tokens`` (a request that accepted ``a`` drafts passes ``a + 1``).
    """
    for stage, step in iter_draft_loop(
        metadata, max_draft_len, num_accepted, draft_seq_lens=draft_seq_lens
    ):
        if stage == "draft_begin":
            yield stage
        elif stage == "draft_step":
            yield f"draft_step_{step}"


def draft_loop(
    metadata: Any,
    max_draft_len: int,
    num_accepted: Sequence[int],
    *,
    draft_seq_lens: Sequence[int] | None = None,
    emit: Callable[[str, int | None], None] = lambda stage, step: None,
    options: LoopOptions = UPSTREAM_WORKER,
) -> None:
    """Run :func:`iter_draft_loop` to the end, calling ``emit(stage, step)`` after each step."""
    for stage, step in iter_draft_loop(
        metadata, max_draft_len, num_accepted, draft_seq_lens=draft_seq_lens, options=options
    ):
        emit(stage, step)


def run_forwards(
    metadata: Any,
    forwards: Iterable[Batch],
    *,
    max_draft_len: int,
    observer: Observer | None = None,
    announcer: Announcer = announce_speculation,
    options: LoopOptions = UPSTREAM_WORKER,
) -> list[Event]:
    """Drive ``metadata`` through upstream's per-forward sequence for each of ``forwards``.

    Args:
        metadata: a freshly built metadata object (``seq_lens`` never set, as upstream builds
            it) or one that already served forwards.
        forwards: the scheduled batches, in order.
        max_draft_len: K; 0 runs no draft loop (speculation off).
        observer: ``observer(event, metadata)`` after every transition.
        announcer: the per-forward announcement (default
            :func:`regress.dsa.announce.announce_speculation`); a sandbox driving an older
            upstream signature passes its own.
        options: how each draft loop saves and restores the target batch (``LoopOptions``).

    Returns:
        Every event, in order (the observer saw the same ones).
    """
    events: list[Event] = []

    for index, forward in enumerate(forwards):

        def emit(stage: str, step: int | None = None, _index: int = index) -> None:
            event = Event(_index, stage, step)
            events.append(event)
            if observer is not None:
                observer(event, metadata)

        announcer(metadata, forward.batch_size, max_draft_len)
        emit("announce")
        prepare_batch(metadata, forward)
        emit("prepare")
        if max_draft_len > 0:
            draft_loop(
                metadata,
                max_draft_len,
                forward.accepted(),
                draft_seq_lens=forward.draft_seq_lens,
                emit=emit,
                options=options,
            )
    return events


def serving_forwards(
    *,
    batch_size: int,
    max_draft_len: int,
    generations: int,
    prompt_len: int = 8,
    accepted: Callable[[int, int], int] | None = None,
    draft_seq_lens: Sequence[int] | None = None,
) -> list[Batch]:
    """A context forward for ``batch_size`` prompts, then ``generations`` MTP verify forwards.

    Args:
        batch_size: requests, all admitted in the first forward.
        max_draft_len: K; generation forwards carry ``1 + K`` tokens per request.
        generations: verify forwards after the context one.
        prompt_len: tokens per prompt.
        accepted: ``accepted(forward_index, request) -> 1..K+1`` (bonus counted); default
            varies per request so that rewinds differ across the batch.
        draft_seq_lens: the draft layout of every generation forward (default all ones).
    """
    pick = accepted or (lambda f, r: 1 + (f + r) % (max_draft_len + 1))
    out = [
        Batch(
            seq_lens=(prompt_len,) * batch_size,
            num_contexts=batch_size,
            cached=(0,) * batch_size,
        )
    ]
    cached = [prompt_len] * batch_size
    for f in range(1, generations + 1):
        acc = tuple(pick(f, r) for r in range(batch_size))
        out.append(
            Batch(
                seq_lens=(1 + max_draft_len,) * batch_size,
                cached=tuple(cached),
                num_accepted=acc,
                draft_seq_lens=tuple(draft_seq_lens) if draft_seq_lens is not None else None,
            )
        )
        cached = [c + a for c, a in zip(cached, acc, strict=True)]
    return out


__all__ = [
    "GUARANTEED_AFTER",
    "GUARANTEED_STAGES",
    "STAGES",
    "Event",
    "draft_checkpoints",
    "draft_loop",
    "iter_draft_loop",
    "run_forwards",
    "serving_forwards",
]
