"""``stale_state``: the stale-state oracle on the real metadata classes of a tree, in the sandbox.

At every checkpoint of the draft loop (run by upstream's own one-model worker where the tree
has one, :mod:`regress.check.stale_loop`; regress's model of the MTP-Eagle loop else) and
after the next forward's ``prepare()``, a fresh object of the same class, built with the same construction
settings and announcement, is given the batch the live one describes and prepared the way the
executor prepares (:func:`regress.dsa.batch.prepare_batch`, cached lengths through
``kv_cache_params``); every tensor and scalar attribute is compared
(:func:`regress.dsa.stale_check.check_states`). A difference that the reviewed table
(:data:`regress.dsa.stale_allow.ALLOWED`) does not explain is a violation: the tree's derived
state went stale. Nothing here names a field.

Run on the DSA class, on its dense base ``TrtllmAttentionMetadata`` (spec-dec enabled, as the
executor announces for MTP), so stale state outside DSA is found the same way, and on every DSA
subclass of the tree (DeepSeek-V4's, :func:`subjects`). The batches and
capacities are :mod:`regress.dsa.stale_batches`'.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regress.check.results import ScenarioResult, Step, stale_message
from regress.check.stale_loop import caller_draft_loop
from regress.check.status import ScenarioStatus
from regress.check.steps import tree_prepare
from regress.dsa.announce import announce_speculation
from regress.dsa.batch import Batch
from regress.dsa.fresh import Blueprint
from regress.dsa.invariants import Violation
from regress.dsa.stale_batches import BATCHES, CAPACITY, MAX_TOKENS, next_forward
from regress.dsa.stale_check import Checkpoint, CheckpointResult, check_states
from regress.dsa.staleness import StaleField
from regress.dsa.write_log import WriteLog
from regress.sandbox.eras import Upstream, build_params
from regress.sandbox.fakes import FakeDeepseekV4CacheManager, FakeKVCacheManager
from regress.tree.maps import dsa_family, load_class

_REPO = Path(__file__).resolve().parents[2]


#: The compress ratios of the DeepSeek-V4 layers run: a CSA layer (compressed by 4, the indexed
#: one), an HCA layer (by 128) and a sliding-window-only layer last, every ratio upstream supports
#: (``sparse/deepseek_v4/metadata.py`` @ 5ca7a947, ``__post_init__`` ``_supported_ratios``). The
#: last is the MTP layer's, which upstream keeps sliding-window-only (as the comment in
#: ``_init_draft_sparse_buffers`` says).
V4_RATIOS = (4, 128, 1)


@dataclass(frozen=True)
class Subject:
    """One metadata class to judge, with the KV-cache manager and sparse settings it is built with.

    Attributes:
        cls: the tree's class.
        manager: a new fake KV-cache manager for it.
        sparse_params: its ``sparse_metadata_params`` where it needs its own (DeepSeek-V4's);
            None: the era's default (the DSA class) or none (the dense base).
    """

    cls: type
    manager: Callable[[], FakeKVCacheManager]
    sparse_params: Any = None


def _blueprint(up: Upstream, subject: Subject, kvm: FakeKVCacheManager, batch: Batch) -> Blueprint:
    """How the executor builds and prepares one metadata object of ``cls`` for these batches."""
    k = batch.max_draft_len

    def make() -> Any:
        md = up.make_metadata(
            kvm,
            max_num_tokens=MAX_TOKENS,
            seq_lens=None,
            metadata_cls=subject.cls,
            sparse_params=subject.sparse_params,
        )
        announce_speculation(md, batch.batch_size, k)
        return md

    return Blueprint(make, tree_prepare(up))


def _forwards(live: Any, blueprint: Blueprint, batch: Batch, loop: Any) -> Iterator[Checkpoint]:
    """Two forwards: the target's draft loop, then the next forward's prepare and draft loop.

    ``loop(live, k, accepted)`` runs one draft loop
    (:func:`regress.check.stale_loop.caller_draft_loop`:
    upstream's worker where the tree has one). The next forward batches the same requests, all
    generations now, in reverse order (the scheduler keeps no order among generations), so every
    buffer row changes hands. Its checkpoints are labelled ``f2:<label>``; the allow table matches
    the label after the colon.
    """
    k = batch.max_draft_len
    yield from loop(live, k, batch.accepted())
    nxt = next_forward(batch)
    announce_speculation(live, nxt.batch_size, k)
    blueprint.prepare(live, nxt)
    yield Checkpoint("f2:prepare")
    for cp in loop(live, k, nxt.accepted()):
        against = f"f2:{cp.against}" if cp.against else None
        yield Checkpoint(f"f2:{cp.label}", cp.replay, cp.scope, against)


def _violation(found: StaleField) -> Violation:
    fresh = f"; a fresh prepare writes it at {found.fresh_site}" if found.fresh_site else ""
    message = (
        f"{stale_message(found, found.checkpoint)} "
        f"(live last written at {found.live_site or 'no write seen'}{fresh})"
    )
    return Violation("stale_state", message, {**found.to_dict(), "step": found.checkpoint})


def _step(result: CheckpointResult) -> Step:
    cmp = result.comparison
    batch = result.batch
    return Step(
        step=result.checkpoint.label,
        seq_lens=list(batch.seq_lens),
        req_idx_per_token=[],
        extra={
            "layout": batch.describe(),
            "fields_compared": len(cmp.compared),
            "undetermined": sorted(cmp.undetermined),
            "uncomparable": sorted(cmp.uncomparable),
            "unexplained": [f.field for f in result.unexplained],
            "allowed": {f.field: row.upstream for f, row in result.allowed},
        },
    )


def run_one(up: Upstream, subject: Subject, batch: Batch) -> ScenarioResult:
    """The oracle on one class and one batch (of K ``batch.max_draft_len``): two forwards, every
    checkpoint judged."""
    cls = subject.cls
    result = ScenarioResult(f"stale_state/{cls.__name__}/{batch.name}")
    kvm = subject.manager()
    blueprint = _blueprint(up, subject, kvm, batch)
    log = WriteLog([up.plan.checkout, _REPO])
    callers: list[str] = []

    def loop(md: Any, k: int, accepted: list[int]) -> Iterator[Checkpoint]:
        return caller_draft_loop(up, md, k, accepted, callers, thread_context=log.in_thread)

    with log:
        live = log.watch(blueprint.make())
        blueprint.prepare(live, batch)
        forwards = _forwards(live, blueprint, batch, loop)
        results = check_states(live, blueprint, forwards, draft_len=batch.max_draft_len, log=log)
    for r in results:
        result.steps.append(_step(r))
        result.add([_violation(f) for f in r.unexplained], r.checkpoint.label)
    counts = ", ".join(f"{r.checkpoint.label} {len(r.comparison.compared)}" for r in results)
    allowed = sum(len(r.allowed) for r in results)
    stale = sorted({f.field for r in results for f in r.unexplained})
    unexplained = f"; unexplained: {', '.join(stale)}" if stale else ""
    result.note = (
        f"{cls.__name__}: fields compared per checkpoint: {counts}; {allowed} explained"
        f"{unexplained}; caller: {'; '.join(dict.fromkeys(callers))}"
    )
    return result


#: DeepSeek-V4's metadata (``sparse/deepseek_v4/metadata.py`` @ 5ca7a947): built with its own
#: compress ratios and a cache manager that is not a DSA one.
V4_CLASS = "DeepseekV4TrtllmAttentionMetadata"


def _subclass(up: Upstream, found: Any) -> Subject | None:
    """A DSA subclass of the tree (:func:`regress.tree.maps.dsa_family`), or None."""
    cls = load_class(up, found)
    if not (isinstance(cls, type) and issubclass(cls, up.metadata_cls)):
        return None  # another class carrying a map (QSA's): not built like DSA's
    if found.name != V4_CLASS:
        return Subject(cls, lambda: FakeKVCacheManager(CAPACITY))
    params = up.sandbox.load(found.module.rsplit(".", 1)[0] + ".params")
    base = build_params(params.DeepSeekV4MetadataParams, up.ledger)
    return Subject(
        cls,
        lambda: FakeDeepseekV4CacheManager(CAPACITY, list(V4_RATIOS)),
        dataclasses.replace(base, compress_ratios=list(V4_RATIOS)),
    )


def subjects(up: Upstream, unloadable: list[tuple[str, str]]) -> list[Subject]:
    """What is compared: the tree's DSA metadata, its dense base class and every DSA subclass.

    Subclasses are found as :mod:`regress.tree.maps` finds the DSA family (DeepSeek-V4's, in
    era C); their modules and the sibling modules they import run from source. A subclass the
    sandbox cannot load goes to ``unloadable`` as ``(class, why)`` instead of raising: a gap for
    that class alone.
    """
    from regress.tree.source import DSA_METADATA_CLASS

    tree = up.plan.tree
    trtllm = up.sandbox.load(tree.trtllm_metadata.module)
    out = [
        Subject(cls, lambda: FakeKVCacheManager(CAPACITY))
        for cls in (up.metadata_cls, trtllm.TrtllmAttentionMetadata)
    ]
    sparse = tree.dsa_metadata.file.parent.parent.relative_to(tree.package_dir)
    for found in dsa_family(tree.package_dir, str(sparse), DSA_METADATA_CLASS):
        if found.name != DSA_METADATA_CLASS and found.module != up.plan.dsa_module:
            try:
                subject = _subclass(up, found)
            except Exception as exc:  # its module or params need what the sandbox lacks
                from regress.sandbox.blame import blame, describe

                unloadable.append((found.name, describe(exc, blame(exc, up.plan.checkout))))
                continue
            out += [subject] if subject is not None else []
    return out


def stale_state(up: Upstream) -> list[ScenarioResult]:
    """The ``stale_state`` scenario: every class of :func:`subjects` on every batch.

    A class that cannot load is one ``gap`` result naming it; the others are still judged.
    """
    unloadable: list[tuple[str, str]] = []
    found = subjects(up, unloadable)
    gaps = [
        ScenarioResult(
            f"stale_state/{name}", status=ScenarioStatus.GAP, note=f"{name} cannot load: {why}"
        )
        for name, why in unloadable
    ]
    return gaps + [run_one(up, s, batch) for s in found for batch in BATCHES]


__all__ = [
    "V4_CLASS",
    "V4_RATIOS",
    "Subject",
    "run_one",
    "stale_state",
    "subjects",
]
