"""``stale_state``: the stale-state oracle on the real metadata classes of a tree, in the sandbox.

At every checkpoint of the draft loop (:func:`regress.dsa.stale_check.draft_loop_checkpoints`,
fed by :mod:`regress.dsa.lifecycle`'s model of the one-model MTP-Eagle worker) and after the next
forward's ``prepare()``, a fresh object of the same class, built with the same construction
settings and announcement, is given the layout the live one describes and prepared the way the
executor prepares (batch fields, ``seq_lens``, ``num_contexts``, cached lengths through
``kv_cache_params``, ``prepare()``); every tensor and scalar attribute is compared
(:func:`regress.dsa.staleness.compare_states`). A difference that the reviewed table
(:data:`regress.dsa.stale_allow.ALLOWED`) does not explain is a violation: the tree's derived
state went stale. Nothing here names a field.

Run on the DSA class and on its dense base ``TrtllmAttentionMetadata`` (spec-dec enabled, as
the executor announces for MTP), so stale state outside DSA is found the same way. The batches and
capacities are :mod:`regress.dsa.stale_batches`'.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from regress.dsa.fresh import Recipe
from regress.dsa.invariants import Violation
from regress.dsa.lifecycle import Forward, announce
from regress.dsa.stale_batches import BATCHES, CAPACITY, DRAFT_LEN, MAX_TOKENS, Batch
from regress.dsa.stale_check import Checkpoint, CheckpointResult, check_states
from regress.dsa.stale_check import draft_loop_checkpoints as model_checkpoints
from regress.dsa.staleness import StaleField, StateLayout
from regress.dsa.write_log import WriteLog
from regress.upstream.eras import Upstream
from regress.upstream.fakes import FakeKVCacheManager
from regress.upstream.results import ScenarioResult, Step

_REPO = Path(__file__).resolve().parents[2]


def _recipe(up: Upstream, cls: type, kvm: FakeKVCacheManager, batch: int, k: int) -> Recipe:
    """How the executor builds and prepares one metadata object of ``cls`` for these batches."""
    import torch

    def make() -> Any:
        md = up.make_metadata(kvm, max_num_tokens=MAX_TOKENS, seq_lens=None, cls=cls)
        announce(md, Forward(seq_lens=(1 + k,) * batch), k)
        return md

    def prepare(md: Any, layout: StateLayout) -> None:
        cached = layout.cached()
        md.request_ids = list(layout.request_ids)
        md.prompt_lens = list(layout.prompt_lens or cached)
        md.kv_cache_params = up.kv_cache_params_cls(
            use_cache=True, num_cached_tokens_per_seq=cached, num_extra_kv_tokens=0
        )
        md.seq_lens = torch.tensor(layout.seq_lens, dtype=torch.int)
        md.num_contexts = layout.num_contexts
        md.prepare()

    return Recipe(make, prepare)


def _forwards(live: Any, recipe: Recipe, batch: Batch, k: int) -> Iterator[Checkpoint]:
    """Two forwards: the target's draft loop, then the next forward's prepare and draft loop.

    The next forward batches the same requests, all generations now, in reverse order (the
    scheduler keeps no order among generations), so every buffer row changes hands. Its
    checkpoints are labelled ``f2:<label>``; the allow table matches the label after the colon.
    """
    accepted = batch.accepted(k)
    yield from model_checkpoints(live, k, accepted)
    after = tuple(
        c + s if i < batch.num_contexts else c + a
        for i, (c, s, a) in enumerate(zip(batch.cached, batch.seq_lens, accepted, strict=True))
    )
    nxt = Batch(batch.name, (1 + k,) * len(batch.seq_lens), 0, after[::-1])
    ids = tuple(range(len(batch.seq_lens)))[::-1]
    announce(live, Forward(seq_lens=nxt.seq_lens), k)
    recipe.prepare(live, nxt.layout(k, batch.prompts()[::-1], ids))
    yield Checkpoint("f2:prepare")
    for cp in model_checkpoints(live, k, nxt.accepted(k)):
        against = f"f2:{cp.against}" if cp.against else None
        yield Checkpoint(f"f2:{cp.label}", cp.replay, cp.scope, against)


def _violation(found: StaleField) -> Violation:
    fresh = f"; a fresh prepare writes it at {found.fresh_site}" if found.fresh_site else ""
    message = (
        f"{found.field} is stale at {found.checkpoint}: a fresh {found.owner} prepared for "
        f"{found.layout} holds {found.fresh}, the live one {found.live} "
        f"(live last written at {found.live_site or 'no write seen'}{fresh})"
    )
    return Violation("stale_state", message, {**found.to_dict(), "step": found.checkpoint})


def _step(result: CheckpointResult) -> Step:
    cmp = result.comparison
    layout = result.layout
    return Step(
        step=result.checkpoint.label,
        seq_lens=list(layout.seq_lens),
        req_idx_per_token=[],
        extra={
            "layout": layout.describe(),
            "fields_compared": len(cmp.compared),
            "undetermined": sorted(cmp.undetermined),
            "uncomparable": sorted(cmp.uncomparable),
            "unexplained": [f.field for f in result.unexplained],
            "allowed": {f.field: row.upstream for f, row in result.allowed},
        },
    )


def run_one(up: Upstream, cls: type, batch: Batch, k: int = DRAFT_LEN) -> ScenarioResult:
    """The oracle on one class and one batch: two forwards, every checkpoint judged."""
    result = ScenarioResult(f"stale_state/{cls.__name__}/{batch.name}")
    kvm = FakeKVCacheManager(CAPACITY)
    recipe = _recipe(up, cls, kvm, len(batch.seq_lens), k)
    log = WriteLog([up.plan.checkout, _REPO])
    with log:
        live = log.watch(recipe.make())
        recipe.prepare(live, batch.layout(k))
        results = check_states(
            live, recipe, _forwards(live, recipe, batch, k), draft_len=k, log=log
        )
    for r in results:
        result.steps.append(_step(r))
        result.add([_violation(f) for f in r.unexplained], r.checkpoint.label)
    counts = ", ".join(f"{r.checkpoint.label} {len(r.comparison.compared)}" for r in results)
    allowed = sum(len(r.allowed) for r in results)
    stale = sorted({f.field for r in results for f in r.unexplained})
    unexplained = f"; unexplained: {', '.join(stale)}" if stale else ""
    result.note = (
        f"{cls.__name__}: fields compared per checkpoint: {counts}; {allowed} explained"
        f"{unexplained}"
    )
    return result


def metadata_classes(up: Upstream) -> list[type]:
    """The classes compared: the tree's DSA metadata and its dense base class."""
    trtllm = up.sandbox.load(up.plan.layout.trtllm_metadata.module)
    return [up.metadata_cls, trtllm.TrtllmAttentionMetadata]


def stale_state(up: Upstream) -> list[ScenarioResult]:
    """The ``stale_state`` scenario: every class of :func:`metadata_classes` on every batch."""
    return [run_one(up, cls, batch) for cls in metadata_classes(up) for batch in BATCHES]


__all__ = ["metadata_classes", "run_one", "stale_state"]
