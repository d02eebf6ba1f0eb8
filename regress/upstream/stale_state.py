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
the executor announces for MTP), so stale state outside DSA is found the same way. Capacities are
chosen so the layout's row rules cannot be confused with another size: sequence capacity
:data:`CAPACITY` for batches of 4, token capacity :data:`MAX_TOKENS`, ``K`` = 3.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regress.dsa.fresh import Recipe
from regress.dsa.invariants import Violation
from regress.dsa.lifecycle import Forward, announce
from regress.dsa.stale_check import Checkpoint, CheckpointResult, check_states
from regress.dsa.stale_check import draft_loop_checkpoints as model_checkpoints
from regress.dsa.staleness import StaleField, StateLayout
from regress.dsa.write_log import WriteLog
from regress.upstream.eras import Upstream
from regress.upstream.fakes import FakeKVCacheManager
from regress.upstream.results import ScenarioResult, Step

#: Sequence capacity (``max_num_sequences``): larger than every batch, equal to no other size.
CAPACITY = 6
#: Token capacity (``max_num_tokens``).
MAX_TOKENS = 61
#: Draft length K.
DRAFT_LEN = 3
_REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Batch:
    """One scenario batch: the target forward's layout and the KV-cache lengths before it."""

    name: str
    seq_lens: tuple[int, ...]
    num_contexts: int
    cached: tuple[int, ...]


#: A generation-only verify batch, and a mixed one whose contexts turn into generations in the
#: draft loop; cached lengths put some requests just under a KV block boundary (32 tokens per
#: block), so the draft steps cross it.
BATCHES: tuple[Batch, ...] = (
    Batch("verify_4x4", (4, 4, 4, 4), 0, (40, 27, 60, 90)),
    Batch("mixed_2ctx_2gen", (6, 3, 4, 4), 2, (0, 0, 29, 70)),
)


def _accepted(batch: Batch, k: int) -> list[int]:
    """Accepted tokens per request, the bonus counted (1..K+1); contexts 1."""
    n = len(batch.seq_lens)
    return [1 if i < batch.num_contexts else 1 + (3 * i + 1) % (k + 1) for i in range(n)]


def _prompts(batch: Batch) -> tuple[int, ...]:
    """Prompt lengths: a context's is its chunk, a generation's its (made-up) prompt."""
    return tuple(s if i < batch.num_contexts else 24 + i for i, s in enumerate(batch.seq_lens))


def _target(
    batch: Batch,
    k: int,
    prompts: tuple[int, ...] | None = None,
    request_ids: tuple[int, ...] | None = None,
) -> StateLayout:
    """The layout the executor gives the metadata before the target forward's ``prepare()``."""
    return StateLayout(
        seq_lens=batch.seq_lens,
        num_contexts=batch.num_contexts,
        kv_lens=tuple(c + s for c, s in zip(batch.cached, batch.seq_lens, strict=True)),
        draft_len=k,
        max_num_tokens=MAX_TOKENS,
        max_num_sequences=CAPACITY,
        request_ids=request_ids or tuple(range(len(batch.seq_lens))),
        prompt_lens=prompts or _prompts(batch),
    )


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
    accepted = _accepted(batch, k)
    yield from model_checkpoints(live, k, accepted)
    after = tuple(
        c + s if i < batch.num_contexts else c + a
        for i, (c, s, a) in enumerate(zip(batch.cached, batch.seq_lens, accepted, strict=True))
    )
    nxt = Batch(batch.name, (1 + k,) * len(batch.seq_lens), 0, after[::-1])
    ids = tuple(range(len(batch.seq_lens)))[::-1]
    announce(live, Forward(seq_lens=nxt.seq_lens), k)
    recipe.prepare(live, _target(nxt, k, _prompts(batch)[::-1], ids))
    yield Checkpoint("f2:prepare")
    for cp in model_checkpoints(live, k, _accepted(nxt, k)):
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
        recipe.prepare(live, _target(batch, k))
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


__all__ = ["BATCHES", "Batch", "metadata_classes", "run_one", "stale_state"]
