"""The pass/fail gates of one TensorRT-LLM case, built on ``regress.acceptance`` verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from regress.acceptance.baseline import load_upstream_reference
from regress.acceptance.profile import judge
from regress.acceptance.stats import RunStats
from regress.acceptance.verdicts import Finding, UpstreamReference
from regress.trtllm.hooks import SentinelReport


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

    @property
    def failures(self) -> list[str]:
        return [v.summary() for v in self.verdicts if v.regressed] + self.problems

    @property
    def passed(self) -> bool:
        return not self.failures

    def explain(self) -> str:
        """Every verdict's line, then every other problem: what a failing test prints."""
        return "\n".join(
            [v.summary() for v in self.verdicts] + [f"FAIL {p}" for p in self.problems]
        )


def judge_case(
    batch_size: int,
    reference: RunStats,
    run: RunStats,
    sentinel: SentinelReport,
    *,
    tolerance: float,
    upstream: UpstreamReference | None = None,
) -> CaseOutcome:
    """Gate one case against its batch-1 reference.

    The gates (issue 7): AL at this batch within ``tolerance`` of batch 1, every per-position
    acceptance within tolerance of batch 1 (``batch_invariance``), conditional acceptance not
    decaying with depth faster than at batch 1 (``conditional_decay``), no sentinel violation,
    and, when ``upstream`` is given, upstream's absolute ``min_al``. The arithmetic is
    ``regress.acceptance``'s; only the verdicts about this batch size are kept, so the batch-1
    run shared by a series is judged once, by its own case.

    Args:
        batch_size: the case's batch size (1 judges the reference run on its own).
        reference: batch-1 statistics of the same model, K and CUDA-graph setting.
        run: this case's statistics (the same object as ``reference`` at batch 1).
        sentinel: what the sentinel recorded during this case's run.
        tolerance: relative drop tolerated (see ``regress.trtllm.cases.TOLERANCE``).
        upstream: an ``acceptance_length.yaml`` entry, or None.
    """
    runs = {1: reference, batch_size: run}
    verdicts = judge(
        runs,
        tolerance=tolerance,
        baseline=upstream,
        sentinel={batch_size: sentinel.violations},
    )
    mine = [v for v in verdicts if v.batch_size in (batch_size, None)]
    return CaseOutcome(mine, sentinel_failures(sentinel))


def upstream_reference(
    path: Path | str | None, keys: Sequence[str], *, prompt_set: str | None = None
) -> UpstreamReference | None:
    """The first of ``keys`` in an upstream-style ``acceptance_length.yaml`` that applies, or None.

    The ``min_al`` gate is optional: a case without an entry is judged on batch invariance alone.
    An entry may say which prompt set it was measured on (``prompts: mt_bench``); AL depends on
    the prompts, so such an entry applies only to runs on that set.
    """
    if path is None or not Path(path).is_file():
        return None
    import yaml

    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    for key in keys:
        entry = data.get(key)
        if entry is None:
            continue
        measured_on = (entry or {}).get("prompts")
        if measured_on is not None and measured_on != prompt_set:
            return None
        return load_upstream_reference(path, key)
    return None
