"""What a scenario of ``regress check`` records, and how it judges one checkpoint of a draft loop.

Shared by every scenario module (:mod:`regress.check.scenarios` holds the table), so that a
checkpoint is judged the same way whoever drives it: the maps of :mod:`regress.tree.maps` at
every point where upstream guarantees them (:class:`regress.check.caller.CallPoint`), and the
indexer-K pages the slot mapping writes. A stale map at a draft forward that the caller never let
the metadata rebuild (it changed ``seq_lens`` and called no ``update_for_spec_dec()`` /
``on_update_kv_lens()`` since) is a finding about the caller, reported ``warn``: whether the draft
model's attention reads the DSA maps is the model's, which regress does not know.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from regress.check.caller import CallerRun, DraftSettings, caller_checkpoints
from regress.check.results import NO_REBUILD, ScenarioResult, Step
from regress.dsa.announce import mtp_shape_params
from regress.dsa.batch import Batch, prepare_batch
from regress.dsa.invariants import Violation, check_slot_ownership
from regress.sandbox.cuda import regress_side
from regress.sandbox.fakes import FakeKVCacheManager
from regress.tree.maps import TOKEN_MAPS, check_maps


def tree_prepare(up: Any) -> Callable[[Any, Batch], None]:
    """:func:`regress.dsa.batch.prepare_batch` for the tree's own classes: the cached lengths go
    in through the tree's ``KVCacheParams``, as the executor hands them over."""

    def kv_cache_params(cached: list[int]) -> Any:
        return up.kv_cache_params_cls(
            use_cache=True, num_cached_tokens_per_seq=cached, num_extra_kv_tokens=0
        )

    return partial(prepare_batch, kv_cache_params=kv_cache_params)


def target_forward(
    up: Any, batch: Batch, *, draft_kv_cache_manager: Any = None
) -> tuple[Any, FakeKVCacheManager]:
    """Metadata after the executor's per-forward calls: announce shapes, then ``prepare()``.

    The batch goes in through the constructor (``make_metadata``), as upstream's tests build it.
    """
    kvm = FakeKVCacheManager(batch.batch_size)
    md = up.make_metadata(
        kvm,
        max_num_tokens=max(64, 2 * batch.num_tokens),
        seq_lens=list(batch.seq_lens),
        num_contexts=batch.num_contexts,
        draft_kv_cache_manager=draft_kv_cache_manager,
    )
    md.update_spec_dec_param(**mtp_shape_params(batch.batch_size, batch.max_draft_len + 1))
    md.prepare()
    return md, kvm


def observe(md: Any, where: str, result: ScenarioResult, *, pages: Any = None) -> list[Violation]:
    """Record the step and check every map (and, given the owning manager, the pages written)."""
    with regress_side():
        return _observe(md, where, result, pages)


def _observe(md: Any, where: str, result: ScenarioResult, pages: Any) -> list[Violation]:
    n = int(md.num_tokens)
    slots = getattr(md, "slot_mapping_fp8", None)
    stride = pages.indexer_block_stride() if pages is not None else None
    token_map = next((getattr(md, m) for m in TOKEN_MAPS if getattr(md, m, None) is not None), None)
    result.steps.append(
        Step(
            where,
            [int(x) for x in md.seq_lens.tolist()],
            [int(x) for x in token_map[:n].tolist()] if token_map is not None else [],
            [int(s) // stride for s in slots[:n].tolist()] if slots is not None and stride else [],
        )
    )
    found = check_maps(md)
    if pages is not None:
        found += check_slot_ownership(md, pages)
    return found


def judge(cp: Any, result: ScenarioResult, *, pages: Any = None) -> None:
    """Judge one :class:`~regress.check.caller.CallPoint` where upstream guarantees the maps."""
    label, md = cp
    if not cp.guaranteed or getattr(md, "seq_lens", None) is None:
        return
    found = observe(md, label, result, pages=pages)
    if not found:
        return
    if cp.reads and not cp.rebuilt:
        result.warn(
            [
                Violation(
                    NO_REBUILD,
                    f"the caller changed seq_lens to {_lens(md)} and ran a draft forward without "
                    "calling update_for_spec_dec()/on_update_kv_lens(): the metadata had no point "
                    f"to rebuild its maps ({v.message})",
                    v.details,
                )
                for v in found
            ],
            label,
        )
        return
    result.add(found, label)


def _lens(md: Any) -> list[int]:
    return [int(x) for x in md.seq_lens.tolist()]


def caller_note(run: CallerRun) -> str:
    """How a result names its caller (and why the regress model ran, when it did)."""
    why = f"; {run.fallback}" if run.fallback else ""
    return f"caller: {run.caller}{why}"


def drive(
    up: Any,
    md: Any,
    pages: Any,
    settings: DraftSettings,
    result: ScenarioResult,
    *,
    fused_gates: Sequence[Any] = (),
) -> CallerRun:
    """Run the best caller on ``md``, judge every checkpoint into ``result``, name the caller.

    ``fused_gates``: in a session that runs the fused kernel, the tree's gates; every rebuilt
    checkpoint is then also held to upstream's fused-vs-eager contract
    (:func:`regress.check.differential.fused_vs_eager`).
    """
    from regress.check.differential import fused_vs_eager

    run = caller_checkpoints(up, md, settings)
    for cp in run:
        judge(cp, result, pages=pages)
        if (
            fused_gates
            and cp.guaranteed
            and cp.rebuilt
            and getattr(md, "seq_lens", None) is not None
        ):
            result.add(fused_vs_eager(md, fused_gates, cp.label), cp.label)
    result.note = caller_note(run)
    return run
