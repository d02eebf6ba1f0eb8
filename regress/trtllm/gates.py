"""The pass/fail gates of one TensorRT-LLM case, built on ``regress.acceptance`` verdicts."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from regress.acceptance.findings import CheckStatus, Finding
from regress.acceptance.profile import judge
from regress.acceptance.references import (
    ReferenceLookup,
    Workload,
    find_reference,
    per_position_verdicts,
)
from regress.acceptance.stats import RunStats
from regress.acceptance.verdicts import against_upstream, batch_invariance, conditional_decay
from regress.trtllm.hooks import SentinelReport

#: The named failure of TensorRT-LLM issue #18662: MTP accepts no draft token at all (AL 1.0),
#: seen on DSA with ``use_kv_cache_manager_v2=False`` (V1 ``KVCacheManager`` +
#: ``DSACacheManager``) on H200, while accuracy stays green.
NO_DRAFT_ACCEPTED = "no_draft_accepted"


def sentinel_failures(report: SentinelReport) -> list[str]:
    """Why a sentinel report fails, beyond violations: it must have run, and without errors.

    A sentinel that attached to nothing (the DSA module path changed, or the hook never reached
    the worker processes) sees no violation by construction; treating that as a pass would make
    the gate vacuous, so it fails with a message that says where to look.
    """
    failures = []
    if not report.attached:
        failures.append(
            "the DSA sentinel attached to no metadata object: the hook did not reach the process "
            "that built DSAtrtllmAttentionMetadata (check regress.trtllm.paths for this "
            "TensorRT-LLM layout and the MPI worker initializer)"
        )
    for error in report.errors:
        failures.append(f"sentinel hook error in pid {error.get('pid')}: {error.get('error')}")
    return failures


@dataclass
class CaseOutcome:
    """The verdicts on one case, plus failures that are not verdicts (the sentinel did not run)."""

    verdicts: list[Finding]
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        return [v.summary() for v in self.verdicts if v.regressed] + self.problems

    @property
    def passed(self) -> bool:
        return not self.failures

    def explain(self) -> str:
        """Every verdict's line, then every other problem and note: what a failing test prints."""
        return "\n".join(
            [v.summary() for v in self.verdicts]
            + [f"FAIL {p}" for p in self.problems]
            + [f"note: {n}" for n in self.notes]
        )


def no_acceptance(batch_size: int, run: RunStats) -> Finding:
    """AL 1.0 with drafts made is its own failure, whatever the reference says (#18662).

    A batch-1 reference at AL 1.0 makes every relative gate pass (nothing to lose), which is
    how the V1 KV-manager bug hides: it has to be named on its own.
    """
    dead = run.drafted > 0 and run.accepted == 0
    details = {
        "acceptance_length": run.acceptance_length,
        "drafted": run.drafted,
        "accepted": run.accepted,
        "headline": (
            f"AL {run.acceptance_length:.3f}: none of {run.drafted} draft tokens accepted "
            "(the TensorRT-LLM #18662 shape)"
            if dead
            else f"{run.accepted} of {run.drafted} draft tokens accepted"
        ),
        "regressed_metrics": ["acceptance_length"] if dead else [],
    }
    return Finding(
        NO_DRAFT_ACCEPTED, batch_size, CheckStatus.REGRESSION if dead else CheckStatus.PASS, details
    )


@dataclass(frozen=True)
class CounterpartRun:
    """The other end of a case's bug axis, measured: see ``regress.trtllm.cases.Counterpart``."""

    check: str
    label: str
    stats: RunStats


def against_counterpart(batch_size: int, run: RunStats, other: CounterpartRun, *, tolerance: float):
    """Judge a run against its counterpart at the same batch size, on the same prompts.

    ``kv_manager_parity`` (the V1 run against V2): AL and every position within ``tolerance``,
    the batch-invariance arithmetic with V2 in the reference's place. ``index_share_decay``
    (share on against share off): conditional acceptance must not decay faster with depth, the
    conditional-decay arithmetic. The verdicts keep that arithmetic and carry the axis' name.
    """
    runs = {0: other.stats, batch_size: run}
    if other.check == "index_share_decay":
        found = conditional_decay(runs, tolerance, reference_batch=0)
    else:
        found = batch_invariance(runs, tolerance, reference_batch=0)
    return [
        dataclasses.replace(
            v,
            check=other.check,
            details={**v.details, "reference_batch_size": None, "compared_with": other.label},
        )
        for v in found
    ]


def judge_case(
    batch_size: int,
    reference: RunStats,
    run: RunStats,
    sentinel: SentinelReport,
    *,
    tolerance: float,
    lookup: ReferenceLookup | None = None,
    counterpart: CounterpartRun | None = None,
) -> CaseOutcome:
    """Gate one case against its batch-1 reference, its counterpart and its own reference.

    The gates (issue 7, issue 21): AL at this batch within ``tolerance`` of batch 1, every
    per-position acceptance within tolerance of batch 1 (``batch_invariance``), conditional
    acceptance not decaying with depth faster than at batch 1 (``conditional_decay``), no
    sentinel violation, no run that accepts nothing (:func:`no_acceptance`), the counterpart of
    the case's bug axis (:func:`against_counterpart`), and, when ``lookup`` found an entry
    measured on this workload, its ``min_al`` and per-position floors. The arithmetic is
    ``regress.acceptance``'s; only the verdicts about this batch size are kept, so the batch-1
    run shared by a series is judged once, by its own case.

    Args:
        batch_size: the case's batch size (1 judges the reference run on its own).
        reference: batch-1 statistics of the same model and parameters.
        run: this case's statistics (the same object as ``reference`` at batch 1).
        sentinel: what the sentinel recorded during this case's run.
        tolerance: relative drop tolerated (see ``regress.trtllm.cases.TOLERANCE``).
        lookup: the workload-matched reference (:func:`own_reference`), or None.
        counterpart: the axis' other end at this batch size, or None.
    """
    runs = {1: reference, batch_size: run}
    gate = lookup.reference if lookup is not None else None
    verdicts = judge(runs, tolerance=tolerance, sentinel={batch_size: sentinel.violations})
    mine = [v for v in verdicts if v.batch_size in (batch_size, None)]
    mine.append(no_acceptance(batch_size, run))
    if gate is not None:
        mine += against_upstream({batch_size: run}, gate)
        mine += per_position_verdicts({batch_size: run}, lookup)
    if counterpart is not None:
        mine += against_counterpart(batch_size, run, counterpart, tolerance=tolerance)
    notes = list(lookup.skipped) if lookup is not None else []
    return CaseOutcome(mine, sentinel_failures(sentinel), notes)


def own_reference(
    path: Path | str | None, keys: Sequence[str], workload: Workload
) -> ReferenceLookup:
    """Our own reference for a case: the first of ``keys`` measured on ``workload``, or none.

    The ``min_al`` gate is optional: a case without an entry is judged on batch invariance
    alone. Upstream's keys are never among ``keys`` here (``Case.reference_keys``), and an
    entry without a recorded workload is not applied even under one of them.
    """
    return find_reference(path, keys, workload)


def completion_failures(expected: int, finished: int, *, error: str | None = None) -> list[str]:
    """Why a fill-the-pool run failed: the engine died, or requests never finished (#18660)."""
    failures = []
    if error is not None:
        failures.append(f"the engine failed while the indexer cache pool was full: {error}")
    if finished < expected:
        failures.append(f"{expected - finished} of {expected} requests did not finish")
    return failures
