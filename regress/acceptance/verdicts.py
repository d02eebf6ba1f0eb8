"""Verdicts on acceptance runs: batch invariance, conditional decay, baseline and upstream gates.

Each check returns :class:`~regress.acceptance.findings.Finding` records (their vocabulary lives
in :mod:`regress.acceptance.findings`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from regress.acceptance.findings import EPS, CheckStatus, Finding
from regress.acceptance.stats import RunStats, paired_drop_intervals


def _half_width(ci: Sequence[float] | None) -> float:
    return (ci[1] - ci[0]) / 2.0 if ci else 0.0


def paired_significant(drop_ci: Sequence[float]) -> bool:
    """True when a paired bootstrap interval of a drop lies wholly above zero.

    The lower bound decides: an interval that reaches zero or below says the same prompts could
    have lost nothing, so the drop is not told apart from noise, however far its upper bound goes.
    ``compare_metric`` and ``conditional_decay`` both ask this, so the rule lives once, here.
    """
    return drop_ci[0] > EPS


def compare_metric(
    metric: str,
    reference: float,
    reference_ci: Sequence[float] | None,
    value: float,
    value_ci: Sequence[float] | None,
    tolerance: float,
    *,
    drop_ci: Sequence[float] | None = None,
) -> dict:
    """Judge whether ``value`` fell below ``reference`` by more than noise and tolerance.

    A drop is a regression only when it is both larger than ``tolerance`` (relative to the
    reference) and statistically significant. Significance comes from ``drop_ci``, a paired
    bootstrap interval of ``reference - value`` over the same prompts, when there is one: the
    drop is significant when its whole 95% interval lies above zero. Without it (a baseline from
    another session), the drop must exceed the two 95% CI half-widths added in quadrature, the
    usual approximation for the CI of a difference of two independent estimates. The tolerance
    keeps harmless drift (batch-dependent numerics) from failing CI; the CI keeps small prompt
    sets from producing verdicts out of noise. Rises never count: a regression is a loss.

    Returns:
        A JSON-ready dict with both values, both CIs, the drop, the noise test and ``regressed``.
    """
    drop = reference - value
    relative_drop = drop / reference if reference > 0 else 0.0
    beyond_tolerance = relative_drop > tolerance + EPS
    if drop_ci is not None:
        margin = None
        significant = paired_significant(drop_ci)
    else:
        margin = math.hypot(_half_width(reference_ci), _half_width(value_ci))
        significant = drop > margin + EPS
    return {
        "metric": metric,
        "reference": reference,
        "reference_ci": list(reference_ci) if reference_ci else None,
        "value": value,
        "value_ci": list(value_ci) if value_ci else None,
        "drop": drop,
        "relative_drop": relative_drop,
        "tolerance": tolerance,
        "noise_test": "paired_bootstrap" if drop_ci is not None else "ci_quadrature",
        "drop_ci": list(drop_ci) if drop_ci is not None else None,
        "noise_margin": margin,
        "beyond_tolerance": beyond_tolerance,
        "significant": significant,
        "regressed": beyond_tolerance and significant,
    }


def _acceptance_comparisons(
    reference: RunStats, run: RunStats, tolerance: float, paired: Mapping | None = None
) -> list[dict]:
    """AL and every per-position rate of ``run`` against ``reference``."""
    paired = paired or {}
    rows = [
        compare_metric(
            "acceptance_length",
            reference.acceptance_length,
            reference.acceptance_length_ci,
            run.acceptance_length,
            run.acceptance_length_ci,
            tolerance,
            drop_ci=paired.get("acceptance_length"),
        )
    ]
    for i in range(min(reference.max_draft_len, run.max_draft_len)):
        name = f"per_position[{i + 1}]"
        rows.append(
            compare_metric(
                name,
                reference.per_position[i],
                reference.per_position_ci[i],
                run.per_position[i],
                run.per_position_ci[i],
                tolerance,
                drop_ci=paired.get(name),
            )
        )
    return rows


def _paired(reference: RunStats, run: RunStats, enabled: bool) -> dict | None:
    if not enabled:
        return None
    return paired_drop_intervals(reference, run, seed=reference.seed, n_boot=reference.n_boot)


def _finding(check: str, batch_size: int | None, rows: list[dict], extra: dict) -> Finding:
    failed = [r["metric"] for r in rows if r["regressed"]]
    al = next((r for r in rows if r["metric"] == "acceptance_length"), None)
    headline = ""
    if al is not None:
        headline = (
            f"AL {al['value']:.3f} vs {al['reference']:.3f} ({-100 * al['relative_drop']:+.1f}%)"
        )
    positions = [int(m[len("per_position[") : -1]) for m in failed if m.startswith("per_position[")]
    details = {
        **extra,
        "headline": headline,
        "regressed_metrics": failed,
        "first_regressed_depth": min(positions) if positions else None,
        "metrics": rows,
    }
    return Finding(check, batch_size, CheckStatus.of(failed), details)


def reference_batch_size(batch_sizes: Sequence[int]) -> int:
    """Batch 1 when measured, else the smallest: the batch where the stale-map bug cannot bite."""
    return 1 if 1 in batch_sizes else min(batch_sizes)


def batch_invariance(
    runs: Mapping[int, RunStats],
    tolerance: float,
    *,
    reference_batch: int | None = None,
    paired: bool = True,
) -> list[Finding]:
    """Judge every batch size against the reference batch (batch 1) on AL and every position.

    Speculative decoding is lossless and greedy acceptance must not depend on who shares the
    batch, so any significant loss at batch > 1 is a bug (upstream's stale ``req_idx_per_token``
    cost 13% AL at batch 8 with K=4 and nothing at batch 1). One verdict per non-reference batch.
    With ``paired`` (and per-request data for the same prompts in both runs) significance comes
    from a paired bootstrap over prompts; otherwise from the runs' own intervals.
    """
    if not runs:
        return []
    ref_b = reference_batch if reference_batch is not None else reference_batch_size(list(runs))
    ref = runs[ref_b]
    return [
        _finding(
            "batch_invariance",
            b,
            _acceptance_comparisons(ref, run, tolerance, _paired(ref, run, paired)),
            {"reference_batch_size": ref_b},
        )
        for b, run in sorted(runs.items())
        if b != ref_b
    ]


def conditional_decay(
    runs: Mapping[int, RunStats],
    tolerance: float,
    *,
    reference_batch: int | None = None,
    paired: bool = True,
) -> list[Finding]:
    """Judge whether conditional acceptance falls with depth faster than at the reference batch.

    The stale-map bug's fingerprint is a conditional rate that decays with draft depth (0.880,
    0.775, 0.670, 0.596 at batch 8 against a flat 0.868, 0.864, 0.825, 0.834 at batch 1): every
    draft step past the first reads another request's cache, so the damage compounds. The
    statistic is the least-squares slope of conditional acceptance over depth, each depth weighted
    by the steps that reached it (:func:`~regress.acceptance.stats.decay_slope`); a regression is a
    slope steeper than the reference's by more than ``tolerance`` times the reference's mean
    conditional rate per depth, and significantly so (paired bootstrap interval of the
    steepening above zero, else beyond the combined CI half-widths). Needs K >= 2.
    """
    if not runs:
        return []
    ref_b = reference_batch if reference_batch is not None else reference_batch_size(list(runs))
    ref = runs[ref_b]
    if ref.conditional_slope is None:
        return []
    defined = [c for c in ref.conditional if c is not None]
    threshold = tolerance * (sum(defined) / len(defined))
    verdicts = []
    for b, run in sorted(runs.items()):
        if b == ref_b or run.conditional_slope is None:
            continue
        steepening = ref.conditional_slope - run.conditional_slope
        drop_ci = (_paired(ref, run, paired) or {}).get("conditional_slope")
        if drop_ci is not None:
            margin = None
            significant = paired_significant(drop_ci)
        else:
            margin = math.hypot(
                _half_width(ref.conditional_slope_ci), _half_width(run.conditional_slope_ci)
            )
            significant = steepening > margin + EPS
        regressed = steepening > threshold + EPS and significant
        details = {
            "reference_batch_size": ref_b,
            "headline": (
                f"slope {run.conditional_slope:+.3f}/depth vs {ref.conditional_slope:+.3f}/depth"
            ),
            "regressed_metrics": ["conditional_slope"] if regressed else [],
            "slope": run.conditional_slope,
            "slope_ci": run.conditional_slope_ci,
            "reference_slope": ref.conditional_slope,
            "reference_slope_ci": ref.conditional_slope_ci,
            "steepening": steepening,
            "threshold": threshold,
            "noise_test": "paired_bootstrap" if drop_ci is not None else "ci_quadrature",
            "steepening_ci": drop_ci,
            "noise_margin": margin,
            "conditional": run.conditional,
            "reference_conditional": ref.conditional,
        }
        verdicts.append(
            Finding(
                "conditional_decay",
                b,
                CheckStatus.of(regressed),
                details,
            )
        )
    return verdicts


def against_baseline(
    runs: Mapping[int, RunStats],
    baseline: Mapping[int, RunStats],
    tolerance: float,
    *,
    source: str | None = None,
) -> list[Finding]:
    """Judge each batch size against the same batch size of a saved baseline report.

    Batch sizes the baseline lacks get no verdict (they are listed in the details of the others),
    since comparing batch 8 against a baseline's batch 1 would mix two questions.
    """
    missing = sorted(set(runs) - set(baseline))
    verdicts = []
    for b, run in sorted(runs.items()):
        if b not in baseline:
            continue
        extra = {"baseline": source, "baseline_missing_batch_sizes": missing}
        rows = _acceptance_comparisons(baseline[b], run, tolerance)
        verdicts.append(_finding("baseline", b, rows, extra))
    return verdicts


@dataclass
class UpstreamReference:
    """One entry of upstream's ``tests/integration/defs/accuracy/references/acceptance_length.yaml``.

    Attributes:
        key: the test key, e.g. ``"TestGLM52NVFP4::test_mtp"``.
        ref_al: the recorded acceptance length (may be None in a stub entry).
        min_al: the gate; upstream writes ``0.95 * ref_al`` when it populates an entry.
        batch_size: the batch size the gate applies to, if the entry says; else every batch size.
        source: the file it came from.
    """

    key: str
    ref_al: float | None
    min_al: float
    batch_size: int | None = None
    source: str | None = None


def against_upstream(runs: Mapping[int, RunStats], reference: UpstreamReference) -> list[Finding]:
    """Upstream's own gate, ``acceptance_length >= min_al``, applied per batch size.

    Mirrors ``assert_acceptance_length`` in upstream's ``accuracy_core.py``: absolute, no CI, and
    fed with the iteration-stats AL when the engine kept those counters (ours otherwise).
    """
    verdicts = []
    for b, run in sorted(runs.items()):
        if reference.batch_size is not None and b != reference.batch_size:
            continue
        upstream = run.upstream_acceptance_length
        value = upstream if upstream is not None else run.acceptance_length
        regressed = value < reference.min_al
        details = {
            "key": reference.key,
            "source": reference.source,
            "ref_al": reference.ref_al,
            "min_al": reference.min_al,
            "value": value,
            "value_from": "upstream_acceptance_length"
            if upstream is not None
            else "acceptance_length",
            "headline": f"AL {value:.3f} vs min_al {reference.min_al:.3f}",
            "regressed_metrics": ["acceptance_length"] if regressed else [],
        }
        verdicts.append(
            Finding(
                "upstream_min_al",
                b,
                CheckStatus.of(regressed),
                details,
            )
        )
    return verdicts


def sentinel_verdicts(violations: Mapping[int, Sequence[Mapping]]) -> list[Finding]:
    """One verdict per batch size whose run had the engine's DSA sentinel on.

    A sentinel violation is a broken DSA contract observed at runtime (e.g. a token mapped to the
    wrong request); it is a regression even when acceptance happens to look fine.
    """
    verdicts = []
    for b, found in sorted(violations.items()):
        checks = sorted({str(v.get("check", "?")) for v in found})
        details = {
            "violations": len(found),
            "checks": checks,
            "headline": f"{len(found)} violation(s): {', '.join(checks)}" if found else "clean",
            "regressed_metrics": [f"sentinel:{c}" for c in checks],
        }
        verdicts.append(Finding("sentinel", b, CheckStatus.of(found), details))
    return verdicts
