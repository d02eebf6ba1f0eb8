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

from regress.dsa.announce import announce_speculation
from regress.dsa.batch import Batch, prepare_batch
from regress.dsa.fresh import Blueprint
from regress.dsa.invariants import Violation
from regress.dsa.sentinel import Sentinel, StaleDebug
from regress.dsa.stale_batches import BATCHES, CAPACITY, MAX_TOKENS, TREE_DRAFT
from regress.dsa.stale_check import check_states, draft_loop_checkpoints
from regress.reference.cache import PagedKVCacheManager
from regress.reference.metadata import DSAtrtllmAttentionMetadata


def _blueprint(defects: Iterable[str] | None, device: str, k: int) -> Blueprint:
    manager = PagedKVCacheManager.for_requests(CAPACITY, 512, tokens_per_block=32)

    def make() -> Any:
        md = DSAtrtllmAttentionMetadata(
            max_num_requests=CAPACITY,
            max_num_tokens=MAX_TOKENS,
            kv_cache_manager=manager,
            defects=defects,
            device=device,
        )
        announce_speculation(md, 4, k)
        return md

    return Blueprint(make)


def _run(batch: Batch, defects, device: str) -> list[Violation]:
    k = batch.max_draft_len
    blueprint = _blueprint(defects, device, k)
    live = blueprint.make()
    prepare_batch(live, batch)
    checkpoints = draft_loop_checkpoints(
        live, k, batch.accepted(), draft_seq_lens=batch.draft_seq_lens
    )
    results = check_states(live, blueprint, checkpoints, draft_len=k)
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
            draft_len=lambda m: int(m.max_draft_tokens),
        )
        sentinel_sink.append(Sentinel(stale=debug).attach(md))
        return md

    return factory


__all__ = ["debug_metadata_cls", "stale_state_scenarios"]
