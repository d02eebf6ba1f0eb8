"""``draft_failure``: a draft step that raises, through upstream's own worker.

Upstream's one-model workers save the target layout (``prepare_for_spec_dec``), collapse it for
the draft steps and restore it after the loop. Before PR #16382 an exception inside the loop
skipped the restore: the metadata stayed in its draft state, the saved fields stayed saved, and
every later forward failed (``prepare_for_spec_dec`` refuses to save twice); since then the
workers restore in a ``finally`` (``speculative/interface.py``, ``SpecWorkerBase.forward`` /
``_ensure_spec_dec_state_restored``), and PR #17381 (open) restores ``num_contexts`` for every
worker.

For the preferred worker of the tree (:mod:`regress.sandbox.workers`) the draft model raises
(:class:`regress.sandbox.drafts.DraftModelFailure`) in draft step 0 and in step 1. After the
worker's own handling:

* nothing saved is left behind (``has_spec_dec_saved_state`` false, where the tree has it);
* the batch (``seq_lens``), ``num_contexts`` and ``host_request_types`` are the target's again;
* the next forward's ``prepare()`` is clean: the stale-state oracle compares it with a fresh
  object prepared for the same batch (:func:`regress.dsa.stale_check.check_states`), and that
  forward's draft loop runs.

A worker that breaks one of these is a finding about the caller (``no_restore_on_failure``,
``warn``, like the DraftTarget one); a stale field after the next ``prepare()`` is the metadata's
(``stale_state``, ``fail``). Where the tree has no worker, regress's model of the loop
(:mod:`regress.dsa.transitions`) is the caller, restoring in a ``finally`` as upstream's newest
workers do: what is judged then is the metadata's restore from the middle of a loop.
"""

from __future__ import annotations

from typing import Any

from regress.check.caller import DraftSettings, caller_checkpoints
from regress.check.results import NO_RESTORE, ScenarioResult, stale_message
from regress.check.steps import tree_prepare
from regress.dsa.announce import announce_speculation
from regress.dsa.batch import Batch
from regress.dsa.fresh import Blueprint
from regress.dsa.invariants import Violation
from regress.dsa.stale_check import Checkpoint, check_states, saved_fields
from regress.sandbox.drafts import DraftModelFailure
from regress.sandbox.fakes import FakeKVCacheManager
from regress.sandbox.workers import catalog

DRAFT_LEN = 3
#: Two contexts and two generations: the restore must bring ``num_contexts`` back too.
TARGET = Batch(
    seq_lens=(6, 3, 4, 4),
    num_contexts=2,
    cached=(0, 0, 50, 60),
    num_accepted=(1, 1, 2, 4),
    request_ids=(0, 1, 2, 3),
    max_draft_len=DRAFT_LEN,
    name="mixed_ctx_gen",
)
#: The next forward: the same requests, all verifying ``1 + K`` tokens.
NEXT = Batch(
    seq_lens=(4, 4, 4, 4),
    cached=(6, 3, 52, 64),
    num_accepted=(2, 3, 1, 4),
    request_ids=(0, 1, 2, 3),
    max_draft_len=DRAFT_LEN,
    name="verify_4x4",
)
FAIL_STEPS = (0, 1)


def _layout(md: Any) -> dict[str, Any]:
    bs = int(md.num_seqs)
    return {
        "seq_lens": [int(x) for x in md.seq_lens.tolist()],
        "num_contexts": int(md.num_contexts),
        "host_request_types": [int(x) for x in md.host_request_types[:bs].tolist()],
    }


def _blueprint(up: Any, kvm: FakeKVCacheManager) -> Blueprint:
    def make() -> Any:
        md = up.make_metadata(kvm, max_num_tokens=64, seq_lens=None)
        announce_speculation(md, TARGET.batch_size, DRAFT_LEN)
        return md

    return Blueprint(make, tree_prepare(up))


def draft_failure(up: Any) -> list[ScenarioResult]:
    """The draft model raises in step 0 and in step 1; see the module docstring."""
    worker = catalog(up).pick()
    return [_one(up, worker, k) for k in FAIL_STEPS]


def _one(up: Any, worker: Any, fail_at: int) -> ScenarioResult:
    who = worker.name if worker is not None else "model"
    result = ScenarioResult(f"draft_failure/{who}/step_{fail_at}")
    kvm = FakeKVCacheManager(TARGET.batch_size)
    blueprint = _blueprint(up, kvm)
    live = blueprint.make()
    blueprint.prepare(live, TARGET)
    before = _layout(live)
    with saved_fields(live) as saved:  # the names prepare_for_spec_dec is asked to save
        if worker is None:
            raised = _model_loop(live, fail_at)
            caller = "regress model (regress/dsa/transitions.py, restoring in a finally)"
        else:
            raised = _worker_loop(up, live, worker, fail_at)
            caller = worker.caller
    found = _left_behind(live, before, caller)
    if found:
        result.add(found, f"after the failure in draft step {fail_at}")
    announce_speculation(live, NEXT.batch_size, DRAFT_LEN)
    blueprint.prepare(live, NEXT)
    [judged] = check_states(live, blueprint, [Checkpoint("f2:prepare")], draft_len=DRAFT_LEN)
    kept = [f for f in judged.unexplained if any(f.field.endswith(f"[{n!r}]") for n in saved)]
    if kept and not found:  # the save itself outlived the loop: the worker's, not the metadata's
        message = (
            f"{caller} left the fields prepare_for_spec_dec saved "
            f"({', '.join(f.field for f in kept)}) saved when the draft model raised: the next "
            "forward's metadata still holds them (upstream's workers restore in a finally since "
            "PR #16382)"
        )
        result.add([Violation(NO_RESTORE, message, {})], "f2:prepare")
    for f in judged.unexplained:
        if f in kept:
            continue
        message = stale_message(f, "the next forward's prepare() after a failed draft step")
        result.add([Violation("stale_state", message, f.to_dict())], "f2:prepare")
    if worker is not None:
        _next_loop(up, live, worker, result)
    result.note = (
        f"caller: {caller}; the draft model raised in step {fail_at}"
        f"{'' if raised else ' but the worker did not propagate it'}; "
        f"{len(judged.comparison.compared)} fields compared at the next prepare()"
    )
    return result


def _worker_loop(up: Any, md: Any, worker: Any, fail_at: int) -> bool:
    """Run the worker with a failing draft step; whether the failure reached its caller."""
    settings = DraftSettings(DRAFT_LEN, TARGET.accepted(), worker=worker.name, fail_at=fail_at)
    try:
        for _ in caller_checkpoints(up, md, settings):
            pass
    except DraftModelFailure:
        return True
    return False


def _model_loop(md: Any, fail_at: int) -> bool:
    """Regress's model of the loop, failing in step ``fail_at`` and restoring in a ``finally``."""
    from regress.dsa.transitions import advance, collapse, restore_target, save_target

    saved = save_target(md)
    try:
        for i in range(DRAFT_LEN):
            if i == fail_at:
                raise DraftModelFailure(f"the draft model failed in draft step {fail_at}")
            if i == 0:
                collapse(md, saved, DRAFT_LEN, TARGET.accepted())
            advance(md, saved.batch_size)
    except DraftModelFailure:
        return True
    finally:
        restore_target(md, saved)
    return False


def _left_behind(md: Any, before: dict[str, Any], caller: str) -> list[Violation]:
    """What the worker's handling left: saved state, and the target layout not restored."""
    problems = []
    if bool(getattr(md, "has_spec_dec_saved_state", False)):
        problems.append("the fields prepare_for_spec_dec saved are still saved")
    after = _layout(md)
    for key, was in before.items():
        if after[key] != was:
            problems.append(f"{key} is {after[key]} where the target forward had {was}")
    if not problems:
        return []
    message = (
        f"{caller} left the metadata in its draft state when the draft model raised: "
        f"{'; '.join(problems)} (upstream's workers restore in a finally since PR #16382)"
    )
    return [Violation(NO_RESTORE, message, {"before": before, "after": after})]


def _next_loop(up: Any, md: Any, worker: Any, result: ScenarioResult) -> None:
    """The next forward's draft loop must run: a worker that left state saved makes it raise."""
    settings = DraftSettings(DRAFT_LEN, NEXT.accepted(), worker=worker.name)
    try:
        for _ in caller_checkpoints(up, md, settings):
            pass
    except Exception as exc:  # upstream's own pairing check refusing the next loop
        message = (
            f"the next forward's draft loop ({worker.caller}) raised {type(exc).__name__}: "
            f"{exc} (every later forward fails, as before PR #16382)"
        )
        result.add([Violation(NO_RESTORE, message, {})], "next forward's draft loop")


__all__ = ["FAIL_STEPS", "NEXT", "TARGET", "draft_failure"]
