"""The stale-state oracle at the checkpoints of a caller: fresh twins, comparison, the allow table.

A caller (the draft-loop model of :mod:`regress.dsa.lifecycle` today, upstream's own speculative
worker where the sandbox can run it) yields a :class:`Checkpoint` after each metadata call it
wants judged; :func:`check_states` builds a fresh object for the batch the live one describes
there (:func:`regress.dsa.fresh.fresh_twins`), compares the two
(:func:`regress.dsa.staleness.compare`), and sorts every difference into explained (a row of
:data:`regress.dsa.stale_allow.ALLOWED`) or not. A field leaves the report only through that
table.

Checkpoints of the draft loop (:func:`draft_loop_checkpoints`):

* ``draft_begin``: the target layout, right after ``prepare_for_spec_dec`` (where a live object
  that served earlier forwards can still hold their state);
* ``draft_step_<i>``: after step ``i``'s ``update_for_spec_dec()``, where upstream guarantees
  the derived buffers (``lifecycle.GUARANTEED_STAGES``); the fresh object replays that refresh;
* ``restore``: after ``restore_from_spec_dec()`` + ``on_update()``. Upstream leaves the derived
  buffers in the draft-step layout until the next ``prepare()`` (``speculative/eagle3.py``
  ``_restore_attn_metadata_from_spec_dec``), so only the restore's own contract is judged here:
  the fields ``prepare_for_spec_dec`` was asked to save must be back to the target layout's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from regress.dsa.batch import Batch
from regress.dsa.fresh import Blueprint, fresh_twins
from regress.dsa.lifecycle import iter_draft_loop
from regress.dsa.stale_allow import ALLOWED, Allowed, explain
from regress.dsa.staleness import Comparison, StaleField, compare


@dataclass(frozen=True)
class Checkpoint:
    """One moment a caller asks to be judged.

    Attributes:
        label: ``draft_begin``, ``draft_step_<i>``, ``restore``, ``next_prepare``, ...
        replay: metadata methods the fresh object runs after ``prepare()`` (the refresh the
            caller's last call was).
        scope: compare only these fields (None: every field).
        against: the label of an earlier checkpoint whose batch the live object must describe
            again (the restore's), instead of the batch read off the live object now.
    """

    label: str
    replay: tuple[str, ...] = ()
    scope: tuple[str, ...] | None = None
    against: str | None = None


@dataclass
class CheckpointResult:
    """What one checkpoint compared and found."""

    checkpoint: Checkpoint
    batch: Batch
    comparison: Comparison
    unexplained: list[StaleField] = field(default_factory=list)
    allowed: list[tuple[StaleField, Allowed]] = field(default_factory=list)
    note: str = ""


def draft_loop_checkpoints(
    metadata: Any,
    max_draft_len: int,
    num_accepted: Sequence[int],
    *,
    draft_seq_lens: Sequence[int] | None = None,
) -> Iterator[Checkpoint]:
    """The checkpoints of one draft loop of :func:`regress.dsa.lifecycle.iter_draft_loop`.

    The names ``prepare_for_spec_dec`` is called with are recorded (:func:`saved_fields`): they
    are the restore's contract.
    """
    with saved_fields(metadata) as saved:
        for stage, step in iter_draft_loop(
            metadata, max_draft_len, num_accepted, draft_seq_lens=draft_seq_lens
        ):
            if stage == "draft_begin":
                yield Checkpoint("draft_begin")
            elif stage == "draft_step":
                yield Checkpoint(f"draft_step_{step}", replay=("update_for_spec_dec",))
            elif stage == "restore" and saved:
                yield Checkpoint("restore", scope=tuple(saved), against="draft_begin")


@contextmanager
def saved_fields(metadata: Any) -> Iterator[list[str]]:
    """The field names ``prepare_for_spec_dec`` is called with inside the block.

    An instance-level spy, removed on leaving; a caller's own spies may wrap it meanwhile and
    must have put it back by then (:mod:`regress.check.caller` does).
    """
    saved: list[str] = []
    original = getattr(metadata, "prepare_for_spec_dec", None)
    if original is None:
        yield saved
        return

    def spy(*names: str, **kwargs: Any) -> Any:
        saved.extend(names)
        return original(*names, **kwargs)

    metadata.prepare_for_spec_dec = spy
    try:
        yield saved
    finally:
        metadata.__dict__.pop("prepare_for_spec_dec", None)


def check_states(
    live: Any,
    blueprint: Blueprint,
    checkpoints: Iterable[Checkpoint],
    *,
    draft_len: int,
    log: Any = None,
    allow: Sequence[Allowed] = ALLOWED,
    on_result: Callable[[CheckpointResult], None] | None = None,
    cell: str | None = None,
) -> list[CheckpointResult]:
    """Judge ``live`` at every checkpoint the caller yields.

    Args:
        live: the metadata the caller drives.
        blueprint: how to build one like it from scratch.
        checkpoints: the caller's checkpoints; the caller advances ``live`` between them.
        draft_len: K, for the draft-window row rule.
        log: a :class:`regress.dsa.write_log.WriteLog` watching ``live`` (fresh objects are
            watched too), for the sites of each difference.
        allow: the reviewed table of legitimate differences.
        on_result: called with each result as it is made.
        cell: the production-matrix cell judged: only allow rows decided in it explain.
    """
    batches: dict[str, Batch] = {}
    out: list[CheckpointResult] = []
    for cp in checkpoints:
        if cp.against is not None and cp.against in batches:
            batch = batches[cp.against]
        else:
            batch = Batch.from_metadata(live, draft_len)
        batches[cp.label] = batch
        watch = log.watch if log is not None else (lambda md: md)
        fresh, determined = fresh_twins(blueprint, batch, replay=cp.replay, watch=watch)
        found = compare(
            live,
            fresh,
            batch,
            determined=determined,
            fields=cp.scope,
            sites=log,
            checkpoint=cp.label,
        )
        unexplained, allowed = explain(found.differences, allow, type(live).__name__, cell)
        result = CheckpointResult(cp, batch, found, unexplained, allowed)
        out.append(result)
        if on_result is not None:
            on_result(result)
    return out


__all__ = [
    "Checkpoint",
    "CheckpointResult",
    "check_states",
    "draft_loop_checkpoints",
    "saved_fields",
]
