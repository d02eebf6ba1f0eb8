"""The draft loops the stale-state oracle judges: upstream's own worker where the tree has one.

:func:`caller_draft_loop` runs one draft loop on the live metadata through the one seam to
upstream's callers (:func:`regress.check.caller.caller_checkpoints`) and turns the caller's
checkpoints into the oracle's (:class:`regress.dsa.stale_check.Checkpoint`). Where the tree has
no one-model worker, or the layout is one no worker takes, regress's model of the loop runs instead
(:func:`regress.dsa.stale_check.draft_loop_checkpoints`), as the caller itself falls back.

Judged, of the worker's metadata calls (the caller's label after the ``@``, so a reader sees which
call of upstream's loop it was):

* ``draft_begin@prepare_for_spec_dec#1``: the target layout, once the loop saved its fields;
* ``draft_step_<i>@update_for_spec_dec#<i+1>`` (or ``@on_update_kv_lens#<n>`` where the worker
  calls that directly): where upstream guarantees the derived buffers; the fresh object replays
  the same call;
* ``restore@restore_from_spec_dec#1``: the fields ``prepare_for_spec_dec`` saved, against the
  ``draft_begin`` layout.

Not judged: ``on_update()`` and the other calls between a layout change and its refresh (the
derived buffers are legitimately behind there), and the draft forwards, which read what the
refresh before them left (a caller that changes the layout without a refresh is the caller
scenarios' finding, ``draft_callers``, not the metadata's).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from regress.check.caller import DraftSettings, caller_checkpoints
from regress.dsa.stale_check import Checkpoint, draft_loop_checkpoints, saved_fields

#: The metadata calls after which upstream guarantees the derived buffers match the layout.
REFRESHES = ("update_for_spec_dec", "on_update_kv_lens")


def caller_draft_loop(
    up: Any,
    live: Any,
    k: int,
    accepted: Sequence[int],
    callers: list[str],
    *,
    thread_context: Any = None,
) -> Iterator[Checkpoint]:
    """The oracle's checkpoints of one draft loop on ``live``; what ran it goes to ``callers``.

    Args:
        up: the loaded tree.
        live: the prepared metadata (the target forward's layout).
        k: the draft length.
        accepted: accepted tokens per request, the bonus counted (1..K+1).
        callers: receives ``run.caller`` (and why the model ran, where it did).
        thread_context: entered in the worker's thread (the write log's ``in_thread``).
    """
    run = caller_checkpoints(
        up, live, DraftSettings(k, list(accepted)), thread_context=thread_context
    )
    if run.kind != "upstream":
        callers.append(f"{run.caller} ({run.fallback})" if run.fallback else run.caller)
        yield from draft_loop_checkpoints(live, k, accepted)
        return
    callers.append(run.caller)
    with saved_fields(live) as saved:
        begin: str | None = None
        steps = 0
        for cp in run:
            method = cp.method
            if method == "prepare_for_spec_dec":
                begin = f"draft_begin@{cp.label}"
                yield Checkpoint(begin)
            elif method in REFRESHES and cp.guaranteed:
                yield Checkpoint(f"draft_step_{steps}@{cp.label}", replay=(method,))
                steps += 1
            elif method == "restore_from_spec_dec" and saved:
                yield Checkpoint(f"restore@{cp.label}", scope=tuple(saved), against=begin)


__all__ = ["REFRESHES", "caller_draft_loop"]
