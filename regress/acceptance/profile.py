"""The profiler's library entry: run an engine at each batch size, summarise, judge, report."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from regress.acceptance.baseline import Baseline, check_baseline_config, load_baseline
from regress.acceptance.engines import AcceptanceEngine, Prompt
from regress.acceptance.findings import Finding
from regress.acceptance.references import check_reference_workload
from regress.acceptance.report import Report, Run
from regress.acceptance.stats import RunStats, summarize
from regress.acceptance.trace import validate_traces
from regress.acceptance.verdicts import (
    UpstreamReference,
    against_baseline,
    against_upstream,
    batch_invariance,
    conditional_decay,
    reference_batch_size,
    sentinel_verdicts,
)
from regress.acceptance.workload import Workload
from regress.acceptance.workload import workload as measured_workload
from regress.errors import EngineError, RegressError, UsageError
from regress.progress import Progress


@dataclass(frozen=True)
class ProfileProgress:
    """Where a profile stands, for a progress bar.

    Attributes:
        batch_size: the batch size being run.
        run_index: 0-based index of that run among ``runs``.
        runs: number of batch sizes to run.
        done: requests finished in this run.
        total: requests in this run.
    """

    batch_size: int
    run_index: int
    runs: int
    done: int
    total: int

    @property
    def fraction(self) -> float:
        """Overall completion in [0, 1], runs weighted equally."""
        within = self.done / self.total if self.total else 1.0
        return (self.run_index + within) / self.runs


def _check_args(
    prompts: Sequence[Prompt],
    batch_sizes: Sequence[int],
    max_draft_len: int,
    max_new_tokens: int,
    tolerance: float,
) -> list[int]:
    sizes = sorted(set(batch_sizes))
    if not sizes or any(not isinstance(b, int) or b < 1 for b in sizes):
        raise UsageError(f"batch sizes must be positive integers, got {list(batch_sizes)}")
    if max_draft_len < 1:
        raise UsageError(f"--max-draft-len must be >= 1, got {max_draft_len}")
    if max_new_tokens < 2:
        raise UsageError(
            f"--max-new-tokens must be >= 2 (one prefill token, then verify steps), got {max_new_tokens}"
        )
    if not 0 <= tolerance < 1:
        raise UsageError(f"--tolerance is a relative drop in [0, 1), got {tolerance}")
    if not prompts:
        raise UsageError("no prompts to profile")
    if sizes[-1] > len(prompts):
        # In-flight batching never has more requests than prompts: a larger batch would measure
        # batch len(prompts) under another name, and engines size their caches for the batch
        # asked (batch 100000 had the reference engine reach for 23.7 GB).
        raise UsageError(
            f"batch size {sizes[-1]} exceeds the {len(prompts)} prompts: at most "
            f"{len(prompts)} requests can be in flight, so it would measure batch "
            f"{len(prompts)}; use batch sizes up to {len(prompts)} or give more prompts "
            "(--num-prompts, --prompts FILE)"
        )
    return sizes


def _load_baseline(
    baseline: Baseline | str | os.PathLike | None, workload: dict, *, allow_mismatch: bool
) -> tuple[Baseline | None, str | None, list[str]]:
    """The baseline (loaded if a path), its source, and how its workload differs (refused
    unless ``allow_mismatch``), all before the first run."""
    source = None
    if isinstance(baseline, str | os.PathLike):
        source = str(baseline)
        baseline = load_baseline(baseline)
    mismatches: list[str] = []
    if isinstance(baseline, Report):
        mismatches = check_baseline_config(
            baseline, workload, source=source, allow_mismatch=allow_mismatch
        )
    elif isinstance(baseline, UpstreamReference) and baseline.source:
        # An entry of ours (recorded with its workload) gates only that workload.
        mismatches = check_reference_workload(
            baseline, Workload(**workload), allow_mismatch=allow_mismatch
        )
    return baseline, source, mismatches


def _measure(
    engine: AcceptanceEngine,
    prompts: Sequence[Prompt],
    *,
    batch_size: int,
    max_draft_len: int,
    max_new_tokens: int,
    on_requests: Callable[[int, int], None],
    seed: int,
    n_boot: int,
) -> Run:
    """One batch size: run the engine, check its traces, summarize, collect notes and the
    sentinel's findings of this run."""
    seen = len(getattr(engine, "sentinel_violations", None) or [])
    on_requests(0, len(prompts))
    start = time.perf_counter()
    try:
        traces = engine.run(
            prompts,
            batch_size=batch_size,
            max_draft_len=max_draft_len,
            max_new_tokens=max_new_tokens,
            progress=on_requests,
        )
    except RegressError:
        raise
    except Exception as exc:
        raise EngineError(
            f"the {engine.name} engine failed at batch {batch_size}, K={max_draft_len}: "
            f"{type(exc).__name__}: {exc}. Rerun that batch size alone to reproduce it."
        ) from exc
    wall = time.perf_counter() - start
    traces = validate_traces(traces, max_draft_len, expected=len(prompts))
    stats = summarize(
        traces,
        max_draft_len,
        seed=seed,
        n_boot=n_boot,
        counters=getattr(engine, "last_counters", None),
    )
    notes = list(getattr(engine, "last_notes", None) or [])
    if stats.censored_steps:
        notes.append(f"{stats.censored_steps} verify step(s) with unknown accepted count left out")
    violations = getattr(engine, "sentinel_violations", None)
    run_sentinel = [_jsonable(v) for v in violations[seen:]] if violations is not None else None
    on_requests(len(prompts), len(prompts))
    return Run(batch_size, stats, round(wall, 3), notes, run_sentinel)


def _plain(data: dict) -> dict:
    """JSON-plain copy (string keys, no tuples), so a saved report reads back equal."""
    return json.loads(json.dumps(data, default=str))


def _jsonable(violation: Any) -> dict:
    """A sentinel violation as plain JSON data (engines may put tensors or enums in them)."""
    if dataclasses.is_dataclass(violation) and not isinstance(violation, type):
        data = dataclasses.asdict(violation)
    elif isinstance(violation, dict):
        data = violation
    else:
        data = {"value": violation}
    return _plain(data)


def _baseline_record(baseline: Baseline, source: str | None, mismatches: list[str]) -> dict:
    if isinstance(baseline, UpstreamReference):
        return {
            "kind": "upstream_yaml",
            "source": baseline.source or source,
            "key": baseline.key,
            "ref_al": baseline.ref_al,
            "min_al": baseline.min_al,
            "batch_size": baseline.batch_size,
            **({"config_mismatches": mismatches} if mismatches else {}),
        }
    return {
        "kind": "report",
        "source": source,
        "model": baseline.model,
        "engine": baseline.engine.get("name"),
        "config_mismatches": mismatches,
        "runs": [
            {
                "batch_size": r.batch_size,
                "acceptance_length": r.stats.acceptance_length,
                "per_position": r.stats.per_position,
                "conditional": r.stats.conditional,
            }
            for r in baseline.runs
        ],
    }


def judge(
    runs: dict[int, RunStats],
    *,
    tolerance: float,
    baseline: Baseline | None = None,
    baseline_source: str | None = None,
    sentinel: dict[int, list[dict]] | None = None,
) -> list[Finding]:
    """Every verdict the profiler gives on a set of runs (also used to re-judge a saved report)."""
    ref_b = reference_batch_size(list(runs))
    verdicts = batch_invariance(runs, tolerance, reference_batch=ref_b)
    verdicts += conditional_decay(runs, tolerance, reference_batch=ref_b)
    if isinstance(baseline, UpstreamReference):
        verdicts += against_upstream(runs, baseline)
    elif baseline is not None:
        verdicts += against_baseline(
            runs, baseline.stats_by_batch(), tolerance, source=baseline_source
        )
    if sentinel is not None:
        verdicts += sentinel_verdicts(sentinel)
    return verdicts


def profile(
    engine: AcceptanceEngine,
    prompts: Sequence[Prompt],
    *,
    batch_sizes: Sequence[int],
    max_draft_len: int,
    max_new_tokens: int,
    tolerance: float = 0.05,
    baseline: Baseline | str | os.PathLike | None = None,
    progress: Progress[ProfileProgress] | None = None,
    seed: int = 0,
    n_boot: int = 1000,
    config: dict[str, Any] | None = None,
    allow_config_mismatch: bool = False,
) -> Report:
    """Measure acceptance at every batch size and judge it.

    Args:
        engine: an adapter (see :func:`regress.acceptance.engines.get_engine`).
        prompts: token-id lists (or text, for engines with a tokenizer); the same prompts run at
            every batch size, so runs compare prompt for prompt.
        batch_sizes: e.g. ``[1, 8]``; batch 1 (else the smallest) is the reference.
        max_draft_len: K, drafts per verify step.
        max_new_tokens: output budget per request.
        tolerance: relative drop tolerated before a significant loss counts as a regression.
        baseline: a saved report, an upstream ``acceptance_length.yaml`` entry, or a path to
            either (``FILE.yaml#KEY``).
        progress: called as requests finish, with a :class:`ProfileProgress`.
        seed: bootstrap seed.
        n_boot: bootstrap resamples.
        config: extra, JSON-ready facts to record in the report's config (e.g. prompt source).
        allow_config_mismatch: compare against a baseline report measured on another workload
            (other prompts, K or output budget) instead of refusing it; the differences are
            recorded in the report's ``baseline.config_mismatches``.

    Raises:
        UsageError: bad arguments or an unreadable / incompatible baseline (exit 2).
        EngineError: the engine failed or returned inconsistent traces (exit 3).
    """
    sizes = _check_args(prompts, batch_sizes, max_draft_len, max_new_tokens, tolerance)
    workload = measured_workload(
        prompts, max_draft_len=max_draft_len, max_new_tokens=max_new_tokens
    )
    baseline, baseline_source, mismatches = _load_baseline(
        baseline, workload, allow_mismatch=allow_config_mismatch
    )
    sentinel_on = getattr(engine, "sentinel_violations", None) is not None
    runs: list[Run] = []
    for index, batch_size in enumerate(sizes):

        def on_requests(done: int, total: int, _b: int = batch_size, _i: int = index) -> None:
            if progress is not None:
                progress(ProfileProgress(_b, _i, len(sizes), done, total))

        runs.append(
            _measure(
                engine,
                prompts,
                batch_size=batch_size,
                max_draft_len=max_draft_len,
                max_new_tokens=max_new_tokens,
                on_requests=on_requests,
                seed=seed,
                n_boot=n_boot,
            )
        )

    by_batch = {r.batch_size: r.stats for r in runs}
    sentinel = {r.batch_size: r.sentinel or [] for r in runs} if sentinel_on else None
    verdicts = judge(
        by_batch,
        tolerance=tolerance,
        baseline=baseline,
        baseline_source=baseline_source,
        sentinel=sentinel,
    )
    return Report(
        engine=_plain({"name": engine.name, **dict(getattr(engine, "options", {}) or {})}),
        model=engine.model,
        config={
            "batch_sizes": sizes,
            **workload,
            "tolerance": tolerance,
            "seed": seed,
            "n_boot": n_boot,
            "reference_batch_size": reference_batch_size(sizes),
            **_plain(config or {}),
        },
        runs=runs,
        verdicts=verdicts,
        sentinel=[v for r in runs for v in (r.sentinel or [])] if sentinel_on else None,
        baseline=_baseline_record(baseline, baseline_source, mismatches)
        if baseline is not None
        else None,
    )
