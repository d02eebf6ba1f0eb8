"""The stale-state oracle on the reference mirrors: the scenario, and the sentinel's debug mode.

The same oracle ``regress check --scenario stale_state`` runs on real upstream trees
(:mod:`regress.dsa.stale_check`), driven here over the DSA mirror of
:mod:`regress.reference.metadata` with :mod:`regress.dsa.lifecycle`'s draft loop, so a defect of
the registry (``stale_req_idx``, ``arange_only_refresh``) is found without naming the map. And the
way to run the reference engine with the runtime sentinel in its stale-state debug mode:
:func:`debug_metadata_cls` gives ``ReferenceEngine(metadata_cls=...)`` a class whose instances
carry such a sentinel, built from the very construction settings the engine used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from regress.dsa.fresh import Recipe
from regress.dsa.invariants import Violation
from regress.dsa.lifecycle import Forward, announce, set_layout
from regress.dsa.sentinel import Sentinel, StaleDebug
from regress.dsa.stale_batches import BATCHES, CAPACITY, DRAFT_LEN, MAX_TOKENS, TREE_DRAFT, Batch
from regress.dsa.stale_check import check_states, draft_loop_checkpoints
from regress.dsa.staleness import StateLayout
from regress.reference.cache import PagedKVCacheManager
from regress.reference.metadata import DSAtrtllmAttentionMetadata


def lay(md: Any, layout: StateLayout) -> None:
    """What the executor does before ``prepare()``, for the mirrors (:func:`lifecycle.set_layout`)."""
    forward = Forward(
        seq_lens=layout.seq_lens,
        num_contexts=layout.num_contexts,
        cached=tuple(layout.cached()),
        request_ids=layout.request_ids or None,
    )
    set_layout(md, forward)
    md.prepare()


def _recipe(defects: Iterable[str] | None, device: str, k: int) -> Recipe:
    manager = PagedKVCacheManager.for_requests(CAPACITY, 512, tokens_per_block=32)

    def make() -> Any:
        md = DSAtrtllmAttentionMetadata(
            max_num_requests=CAPACITY,
            max_num_tokens=MAX_TOKENS,
            kv_cache_manager=manager,
            defects=defects,
            device=device,
        )
        announce(md, Forward(seq_lens=(1 + k,) * 4), k)
        return md

    return Recipe(make, lay)


def _run(batch: Batch, defects, device: str, k: int = DRAFT_LEN) -> list[Violation]:
    recipe = _recipe(defects, device, k)
    live = recipe.make()
    lay(live, batch.layout(k))
    checkpoints = draft_loop_checkpoints(
        live, k, batch.accepted(k), draft_seq_lens=batch.draft_seq_lens
    )
    results = check_states(live, recipe, checkpoints, draft_len=k)
    name = f"stale_state_{batch.name}"
    return [
        Violation(
            "stale_state",
            f"{f.field} is stale at {f.checkpoint}: live {f.live}, fresh {f.fresh}",
            {**f.to_dict(), "scenario": name},
        )
        for r in results
        for f in r.unexplained
    ]


def stale_state_scenarios(
    defects: Iterable[str] | None, device: str
) -> Iterator[tuple[str, Callable[[], list[Violation]]]]:
    """The contract battery's stale-state scenarios: ``(name, run)`` per batch."""
    for batch in (*BATCHES, TREE_DRAFT):
        yield f"stale_state_{batch.name}", (lambda b=batch: _run(b, defects, device))


def debug_metadata_cls(sentinel_sink: list[Sentinel], cls: type = DSAtrtllmAttentionMetadata):
    """A metadata class for ``ReferenceEngine(metadata_cls=...)`` with a debug-mode sentinel.

    Each instance gets a :class:`~regress.dsa.sentinel.Sentinel` in stale-state debug mode whose
    fresh objects are built with the instance's own construction arguments; the sentinels are
    appended to ``sentinel_sink`` so the caller can read their violations after the run.
    """

    def factory(**kwargs: Any) -> Any:
        md = cls(**kwargs)
        debug = StaleDebug(
            construct=lambda: cls(**kwargs),
            lay=lay,
            draft_len=lambda m: int(m.max_draft_tokens),
        )
        sentinel_sink.append(Sentinel(stale=debug).attach(md))
        return md

    return factory


__all__ = ["debug_metadata_cls", "lay", "stale_state_scenarios"]
