"""Our batch sweep and per-position gates, called from upstream's harness on the LLM it built.

Upstream's acceptance-length hook is ``accuracy_core.assert_acceptance_length_for_llm(test_key,
llm)`` in ``tests/integration/defs/accuracy/accuracy_core.py`` (newest stored version, commit unknown): after ``task.evaluate(llm)`` it sums the iteration
stats the LLM holds (``compute_acceptance_length`` polls ``llm.get_stats`` with a 2 s timeout,
keeps the iterations that drafted tokens and divides accepted tokens plus requests by requests)
and asserts that AL is at least ``min_al`` from ``references/acceptance_length.yaml``. It runs
K >= 2 at batch > 1 on DSA but never looks at the batch size or the draft depth.
:func:`assert_acceptance_sweep_for_llm` has the same shape and goes in the same place; on the same
``LLM`` it

1. drains the stats the LLM holds and, given upstream's YAML, applies upstream's key to them:
   that is upstream's workload, the only one upstream's figure gates;
2. runs regress's batch sweep (the prompts with 1, 8, ... requests in flight) and gates every
   batch against batch 1 on AL, every per-position rate and the conditional decay with depth,
   refuses a run that accepts no draft token, and applies our own reference for ``test_key``
   (recorded with ``regress accept --record-reference``) only if it was measured on this
   sweep's workload.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regress.acceptance.baseline import load_upstream_reference
from regress.acceptance.engines import Prompt
from regress.acceptance.findings import CheckStatus, Finding
from regress.acceptance.references import (
    ReferenceLookup,
    Workload,
    find_reference,
    per_position_verdicts,
)
from regress.acceptance.report import Report
from regress.acceptance.stats import upstream_acceptance_length
from regress.acceptance.verdicts import against_upstream
from regress.errors import UsageError
from regress.trtllm.cases import MAX_NEW_TOKENS, TOLERANCE
from regress.trtllm.engine import TrtllmAcceptanceEngine, iteration_counters
from regress.trtllm.gates import no_acceptance
from regress.trtllm.llm_config import effective_draft_len

SWEEP_BATCH_SIZES: tuple[int, ...] = (1, 8, 32)
# compute_acceptance_length's own timeout for llm.get_stats.
_STATS_TIMEOUT = 2.0


class _Borrowed:
    """An ``LLM`` lent to the engine: everything passes through except ``shutdown``."""

    def __init__(self, llm: Any) -> None:
        self._llm = llm

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)

    def shutdown(self) -> None:
        """The caller built the LLM and shuts it down (``with LLM(...) as llm``)."""


class BuiltLlmEngine(TrtllmAcceptanceEngine):
    """The acceptance package's TensorRT-LLM engine on an ``LLM`` someone else built and owns.

    Each batch size streams on the same ``LLM``: the batch under test is the number of requests
    in flight, capped by the LLM's own ``max_batch_size``.
    """

    def __init__(self, llm: Any, *, model: str) -> None:
        super().__init__(model=model, iter_stats=True)
        self._llm = llm

    def _build_llm(self, batch_size: int, max_draft_len: int) -> Any:
        return _Borrowed(self._llm)


@dataclass
class SweepOutcome:
    """What the sweep found, upstream's gate on upstream's workload included.

    Attributes:
        test_key: the key both gates look up.
        report: the sweep (runs per batch size, batch-invariance and decay verdicts).
        verdicts: every verdict: the report's, upstream's, our reference's, no-acceptance.
        problems: failures that are not verdicts (upstream's gate could not be computed).
        notes: what was not applied and why, and what to keep in mind reading the numbers.
        lookup: our reference's lookup for the sweep's workload.
    """

    test_key: str
    report: Report
    verdicts: list[Finding]
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lookup: ReferenceLookup = field(default_factory=ReferenceLookup)

    @property
    def passed(self) -> bool:
        return not self.problems and not any(v.regressed for v in self.verdicts)

    def explain(self) -> str:
        lines = [f"[AL sweep] {self.test_key}"]
        lines += [v.summary() for v in self.verdicts]
        lines += [f"FAIL {p}" for p in self.problems] + [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _args(llm: Any) -> Any:
    args = getattr(llm, "args", None)
    if args is None:
        raise UsageError(
            "expected a tensorrt_llm.LLM (it has no .args); pass the LLM upstream built"
        )
    return args


def sweep_batch_sizes(cap: int, requested: Sequence[int] | None) -> tuple[int, ...]:
    """The batch sizes to sweep: ``requested`` (each at most ``cap``), else 1, 8, 32 up to it.

    Raises:
        UsageError: a requested batch size above ``cap`` (the LLM's ``max_batch_size``, or the
            number of prompts), since it could only measure ``cap`` under another name.
    """
    if requested is not None:
        sizes = sorted(set(requested))
        if not sizes or sizes[0] < 1 or sizes[-1] > cap:
            raise UsageError(
                f"batch sizes {sizes} must lie in 1..{cap} (the LLM's max_batch_size or the "
                "number of prompts, whichever is smaller)"
            )
        return tuple(sizes)
    sizes = [b for b in SWEEP_BATCH_SIZES if b <= cap]
    if cap > sizes[-1] and cap < SWEEP_BATCH_SIZES[-1]:
        sizes.append(cap)
    return tuple(sizes)


def upstream_gate(test_key: str, llm: Any, path: Path | str) -> tuple[list[Finding], list[str]]:
    """Upstream's own check on the stats the LLM holds (upstream's workload), and problems.

    Mirrors ``compute_acceptance_length`` + ``assert_acceptance_length``: no spec-decoding
    iteration is a failure (upstream asserts it too), a ``min_al: null`` entry is refused.
    """
    counters, _ = iteration_counters(llm.get_stats(timeout=_STATS_TIMEOUT) or [])
    al = upstream_acceptance_length(counters)
    if al is None:
        return [], [
            f"upstream's gate for {test_key}: the LLM holds no iteration with speculative "
            "decoding stats; build it with enable_iter_perf_stats=True and call this right "
            "after upstream's task.evaluate(llm)"
        ]
    gate = load_upstream_reference(path, test_key)
    regressed = al < gate.min_al
    details = {
        "key": test_key,
        "source": str(path),
        "value": al,
        "min_al": gate.min_al,
        "ref_al": gate.ref_al,
        "workload": "upstream's (the iterations the LLM ran before this call)",
        "headline": f"AL {al:.3f} vs min_al {gate.min_al:.3f} on upstream's workload",
        "regressed_metrics": ["acceptance_length"] if regressed else [],
    }
    status = CheckStatus.REGRESSION if regressed else CheckStatus.PASS
    return [Finding("upstream_min_al", None, status, details)], []


def sweep_llm(
    test_key: str,
    llm: Any,
    *,
    prompts: Sequence[Prompt],
    batch_sizes: Sequence[int] | None = None,
    max_new_tokens: int = MAX_NEW_TOKENS,
    tolerance: float = TOLERANCE,
    references: Path | str | None = None,
    upstream_references: Path | str | None = None,
    progress: Callable[[Any], None] | None = None,
    engine_factory: Callable[..., Any] = BuiltLlmEngine,
) -> SweepOutcome:
    """Run the batch sweep on ``llm`` and gate it; see the module docstring.

    Args:
        test_key: upstream's test key (``TestGLM52NVFP4::test_mtp_index_share``).
        llm: the ``tensorrt_llm.LLM`` upstream's test built, with MTP.
        prompts: the sweep's prompts (text, or token ids).
        batch_sizes: requests in flight per run; default 1, 8, 32 up to the LLM's cap.
        max_new_tokens: output budget per request.
        tolerance: relative drop tolerated against batch 1.
        references: our reference YAML; ``test_key`` applies if measured on this workload.
        upstream_references: upstream's ``acceptance_length.yaml``, applied to the stats the
            LLM held on entry (upstream's workload), or None to skip that gate.
        progress: called with the profiler's progress.
        engine_factory: builds the engine on the LLM (tests pass a fake).
    """
    from regress.acceptance.profile import profile

    if not prompts:
        raise UsageError("the sweep needs prompts (regress.trtllm.runs.load_prompt_set)")
    args = _args(llm)
    k = effective_draft_len(getattr(args, "speculative_config", None))
    if k is None or k < 1:
        raise UsageError(f"{test_key}: the LLM has no MTP speculative_config with K >= 1")
    cap = min(int(getattr(args, "max_batch_size", None) or len(prompts)), len(prompts))
    sizes = sweep_batch_sizes(cap, batch_sizes)
    verdicts, problems, notes = [], [], []
    if upstream_references is not None:
        verdicts, problems = upstream_gate(test_key, llm, upstream_references)
    else:
        llm.get_stats(timeout=_STATS_TIMEOUT)  # upstream's iterations stay out of the sweep
    if getattr(args, "enable_attention_dp", False):
        notes.append(
            "attention DP is on: the requests in flight are spread over the ranks, so each DSA "
            "metadata object sees about batch / ranks of them"
        )
    engine = engine_factory(llm, model=str(getattr(args, "model", None) or "LLM"))
    report = profile(
        engine,
        list(prompts),
        batch_sizes=sizes,
        max_draft_len=k,
        max_new_tokens=max_new_tokens,
        tolerance=tolerance,
        progress=progress,
        config={"test_key": test_key, "harness": "regress.trtllm.harness"},
    )
    runs = {r.batch_size: r.stats for r in report.runs}
    workload = Workload.of(prompts, max_new_tokens=max_new_tokens, max_draft_len=k)
    lookup = find_reference(references, (test_key,), workload)
    verdicts = list(report.verdicts) + verdicts
    verdicts += [no_acceptance(b, s) for b, s in sorted(runs.items())]
    if lookup.reference is not None:
        verdicts += against_upstream(runs, lookup.reference) + per_position_verdicts(runs, lookup)
    notes += lookup.skipped + [n for r in report.runs for n in r.notes]
    return SweepOutcome(test_key, report, verdicts, problems, notes, lookup)


def assert_acceptance_sweep_for_llm(test_key: str, llm: Any, **options: Any) -> SweepOutcome:
    """:func:`sweep_llm`, raising ``AssertionError`` with every verdict when a gate fails.

    The drop-in for upstream's ``assert_acceptance_length_for_llm(test_key, llm)``; the options
    are :func:`sweep_llm`'s (``prompts`` is required).
    """
    outcome = sweep_llm(test_key, llm, **options)
    if not outcome.passed:
        raise AssertionError(outcome.explain())
    return outcome
