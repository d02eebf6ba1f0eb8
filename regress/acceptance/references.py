"""Acceptance references of our own: upstream's ``acceptance_length.yaml`` schema plus the workload.

Upstream's entries (``Key: {ref_al, min_al}``) were measured by upstream's harness on upstream's
workload (GSM8K, up to the evaluator's concurrency). An AL depends on the prompts, the output
budget and K, so an entry gates only runs of the workload it was measured on. Ours carry it
(``workload``: the keys of :data:`regress.acceptance.workload.WORKLOAD_KEYS`, the prompts
fingerprinted by :func:`regress.acceptance.workload.prompts_digest`) and per-position figures.
Upstream's reader (``assert_acceptance_length`` in
``tests/integration/defs/accuracy/accuracy_core.py`` (newest stored version, commit unknown)) reads only ``ref_al`` and ``min_al``, so the file stays in its schema; an entry without a
``workload`` is upstream's and is never applied to one of ours (:func:`find_reference`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regress.acceptance.baseline import load_upstream_reference
from regress.acceptance.findings import EPS, CheckStatus, Finding
from regress.acceptance.stats import RunStats
from regress.acceptance.verdicts import UpstreamReference
from regress.acceptance.workload import Workload
from regress.errors import RegressError, UsageError
from regress.files import parse_yaml, read_text, write_atomic

#: ``min = MIN_FACTOR * ref``, as upstream's populate mode writes ``min_al`` at 95% of the
#: measured AL.
MIN_FACTOR = 0.95
_DIGITS = 6


def _al(stats: RunStats) -> tuple[float, str]:
    """The AL a reference records and a gate reads: the iteration-stats one when kept."""
    if stats.upstream_acceptance_length is not None:
        return stats.upstream_acceptance_length, "upstream_acceptance_length"
    return stats.acceptance_length, "acceptance_length"


def reference_entry(stats: RunStats, workload: Workload, *, measured: Mapping[str, Any]) -> dict:
    """One YAML entry: upstream's ``ref_al``/``min_al``, per-position figures, the workload."""
    al, value_from = _al(stats)
    return {
        "ref_al": round(al, _DIGITS),
        "min_al": round(MIN_FACTOR * al, _DIGITS),
        "per_position": [round(p, _DIGITS) for p in stats.per_position],
        "min_per_position": [round(MIN_FACTOR * p, _DIGITS) for p in stats.per_position],
        "workload": workload.to_dict(),
        "measured": {**measured, "value_from": value_from},
    }


def report_entry(report: Any) -> dict:
    """The entry for a ``regress accept`` report: its reference batch, its workload.

    Raises:
        UsageError: the report does not say which prompts it ran (a report from before the
            prompts digest was recorded).
    """
    workload = Workload.from_mapping(report.config)
    if workload is None:
        raise UsageError(
            "the report does not record its workload (max_draft_len, max_new_tokens, "
            "num_prompts, prompts_digest); rerun it with this version of regress"
        )
    batch = report.config.get("reference_batch_size", report.runs[0].batch_size)
    run = next(r for r in report.runs if r.batch_size == batch)
    measured = {"batch_size": batch, "engine": report.engine.get("name"), "model": report.model}
    return reference_entry(run.stats, workload, measured=measured)


def check_reference_file(path: str | os.PathLike[str], key: str) -> Path:
    """Refuse, before any work, a key or a reference file that could not be recorded.

    Raises:
        UsageError: an empty key, or a file that is not a writable YAML mapping.
    """
    from regress.files import check_output_path

    if not key.strip() or "\n" in key:
        raise UsageError(
            f"reference key {key!r} must be one non-empty line, e.g. TestX::test_y[k4]"
        )
    target = _target(path)
    check_output_path(target, option="--reference-yaml")
    load_references(target)
    return target


def record_report_reference(path: str | os.PathLike[str], key: str, report: Any) -> Path:
    """Record ``report``'s reference batch as ``key`` (see :func:`report_entry`)."""
    return record_reference(path, key, report_entry(report))


def _target(path: str | os.PathLike[str]) -> Path:
    """The file to update: a symlink is written through (its target), never replaced."""
    path = Path(path)
    if path.is_symlink():
        path = path.resolve()
    if path.exists() and not path.is_file():
        raise UsageError(
            f"reference file {path} is not a regular file; references are updated in place, "
            "so give a YAML file"
        )
    return path


def load_references(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The entries of a reference YAML (empty when the file does not exist yet)."""
    target = _target(path)
    if not target.exists():
        return {}
    data = parse_yaml(read_text(target, what="reference file"), what=f"reference file {path}")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"reference file {path} is not a mapping of 'Key: {{ref_al, min_al}}'")
    return data


def _top_level_key(line: str) -> str | None:
    import yaml

    if not line.strip() or line[0] in " \t#":
        return None
    try:
        parsed = yaml.safe_load(line)
    except yaml.YAMLError:
        return None
    return next(iter(parsed)) if isinstance(parsed, dict) and len(parsed) == 1 else None


def _entry_span(lines: list[str], key: str) -> tuple[int, int] | None:
    """``[start, end)`` of ``key``'s block; comments and blanks before the next key stay there."""
    starts = [(i, _top_level_key(line)) for i, line in enumerate(lines)]
    starts = [(i, k) for i, k in starts if k is not None]
    for n, (i, k) in enumerate(starts):
        if k != key:
            continue
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        while end > i + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip()[:1] == "#"):
            end -= 1
        return i, end
    return None


def record_reference(path: str | os.PathLike[str], key: str, entry: Mapping[str, Any]) -> Path:
    """Add or replace ``key`` in a reference YAML, keeping every other line as it was.

    Only ``key``'s own lines change (comments and other entries stay byte for byte), the
    result is read back and checked before it replaces the file, atomically.

    Returns:
        The file written.

    Raises:
        UsageError: the file is not a regular file or not a YAML mapping.
    """
    import yaml

    target = _target(path)
    before = load_references(target)
    text = target.read_text(encoding="utf-8") if target.exists() else ""
    block = yaml.safe_dump({key: dict(entry)}, sort_keys=False, default_flow_style=None)
    lines = text.splitlines(keepends=True)
    if not before:  # an empty mapping (``{}``) keeps its comments and loses the marker
        lines = [line for line in lines if not line.strip() or line.lstrip().startswith("#")]
    span = _entry_span(lines, key)
    if span is None:
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        lines.append(block)
    else:
        lines[span[0] : span[1]] = [block]
    updated = "".join(lines)
    after = yaml.safe_load(updated) or {}
    others_kept = {k: v for k, v in after.items() if k != key} == {
        k: v for k, v in before.items() if k != key
    }
    if after.get(key) != yaml.safe_load(block)[key] or not others_kept:
        raise RegressError(
            f"updating {key} in {target} would change other entries; the file was left as it "
            "was. Check its layout (one top-level key per entry)"
        )
    return write_atomic(target, updated)


def check_reference_workload(
    reference: UpstreamReference, workload: Workload, *, allow_mismatch: bool
) -> list[str]:
    """Refuse an entry of ours (it records its workload) measured on another workload.

    ``regress accept --baseline FILE.yaml#KEY`` is an explicit choice, so an entry without a
    workload (upstream's own) still applies, as before; an entry with one is held to it exactly
    as a baseline report is (``regress.acceptance.baseline.check_baseline_config``).

    Returns:
        The mismatches (empty, or tolerated with ``allow_mismatch``), for the report.

    Raises:
        UsageError: the entry's workload differs and ``allow_mismatch`` is false (exit 2).
    """
    entry = load_references(reference.source).get(reference.key) or {}
    recorded = entry.get("workload")
    if not isinstance(recorded, Mapping):
        return []
    mismatches = workload.mismatches(recorded)
    if mismatches and not allow_mismatch:
        raise UsageError(
            f"reference {reference.key} in {reference.source} was measured on another workload: "
            f"{', '.join(mismatches)}; rerun on its workload, record one for this workload "
            "(--record-reference), or pass --allow-config-mismatch to compare anyway"
        )
    return mismatches


@dataclass
class ReferenceLookup:
    """The reference a run is gated by, and why other candidate entries were not used.

    Attributes:
        key: the entry used, or None.
        reference: its ``min_al`` gate (``against_upstream``), or None.
        min_per_position: its per-position floors, or None.
        skipped: one line per candidate entry left out (another workload, upstream's own).
    """

    key: str | None = None
    reference: UpstreamReference | None = None
    min_per_position: list[float] | None = None
    skipped: list[str] = field(default_factory=list)


def find_reference(
    path: str | os.PathLike[str] | None, keys: Sequence[str], workload: Workload
) -> ReferenceLookup:
    """The first of ``keys`` in a reference YAML that was measured on ``workload``.

    An entry without ``workload`` (upstream's, or one from before workloads were recorded) and
    an entry of another workload are skipped with the reason; the gate is then simply absent.
    """
    lookup = ReferenceLookup()
    if path is None or not Path(path).exists():
        return lookup
    data = load_references(path)
    for key in keys:
        entry = data.get(key)
        if entry is None:
            continue
        if not isinstance(entry, Mapping):
            lookup.skipped.append(
                f"{key}: a {type(entry).__name__}, not a mapping of ref_al, min_al"
            )
            continue
        recorded = entry.get("workload")
        if not isinstance(recorded, Mapping):
            lookup.skipped.append(
                f"{key}: no workload recorded (upstream's entry or an old one); it gates only "
                "the workload it was measured on. Record ours with regress accept "
                "--record-reference"
            )
            continue
        if mismatches := workload.mismatches(recorded):
            lookup.skipped.append(f"{key}: measured on another workload: {', '.join(mismatches)}")
            continue
        lookup.key = key
        lookup.reference = load_upstream_reference(path, key)
        floors = entry.get("min_per_position")
        lookup.min_per_position = [float(x) for x in floors] if floors else None
        return lookup
    return lookup


def per_position_verdicts(runs: Mapping[int, RunStats], lookup: ReferenceLookup) -> list[Finding]:
    """Each recorded per-position floor against each run: absolute, like upstream's ``min_al``."""
    if not lookup.min_per_position:
        return []
    verdicts = []
    for b, run in sorted(runs.items()):
        floors = lookup.min_per_position[: len(run.per_position)]
        pairs = zip(run.per_position, floors, strict=False)  # a K beyond the floors: not gated
        low = [i + 1 for i, (v, f) in enumerate(pairs) if v < f - EPS]
        details = {
            "key": lookup.key,
            "min_per_position": floors,
            "per_position": run.per_position,
            "headline": "positions " + ", ".join(map(str, low)) + " below their floor"
            if low
            else "every position at or above its floor",
            "regressed_metrics": [f"per_position[{i}]" for i in low],
        }
        status = CheckStatus.REGRESSION if low else CheckStatus.PASS
        verdicts.append(Finding("reference_per_position", b, status, details))
    return verdicts
