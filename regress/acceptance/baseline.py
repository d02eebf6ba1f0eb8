"""Baselines to judge a run against: a saved acceptance report or an upstream YAML gate."""

from __future__ import annotations

import math
import os

from regress.acceptance.report import Report
from regress.acceptance.verdicts import UpstreamReference
from regress.acceptance.workload import mismatches
from regress.errors import UsageError
from regress.files import parse_yaml, read_text

Baseline = Report | UpstreamReference


def load_upstream_reference(path: str | os.PathLike, key: str | None = None) -> UpstreamReference:
    """Read one entry of an upstream-style ``acceptance_length.yaml``.

    The file maps test keys to ``{ref_al, min_al}``. As upstream's
    ``tests/integration/defs/accuracy/accuracy_core.py::assert_acceptance_length`` (which raises
    ``ValueError`` on ``min_al: null``, "not yet populated"), an entry without ``min_al`` is
    refused, whatever ``ref_al`` says: a stub must not silently become a gate of our choosing.
    Checked: ``accuracy_core.py`` @ 00c11460 and ``references/acceptance_length.yaml`` @ 0a423022.

    Args:
        path: the YAML file.
        key: the test key; may be omitted when the file has exactly one entry.

    Raises:
        UsageError: unreadable file, unknown key, or an entry with ``min_al: null``.
    """
    data = parse_yaml(read_text(path, what="baseline"), what=f"baseline {path}")
    if not isinstance(data, dict) or not data:
        raise UsageError(
            f"baseline {path} has no entries; expected 'TestKey: {{ref_al: .., min_al: ..}}'"
        )
    if key is None:
        if len(data) != 1:
            keys = ", ".join(sorted(map(str, data))[:10])
            raise UsageError(
                f"baseline {path} has {len(data)} entries; pick one with {path}#KEY (keys: {keys})"
            )
        key = next(iter(data))
    if key not in data:
        raise UsageError(
            f"baseline {path} has no entry '{key}'; keys: {', '.join(sorted(map(str, data))[:10])}"
        )
    entry = data[key] or {}
    if not isinstance(entry, dict):
        raise UsageError(
            f"baseline entry '{key}' in {path} is a {type(entry).__name__}, not a mapping; "
            "expected 'TestKey: {ref_al: .., min_al: ..}'"
        )
    ref_al = _number(entry, "ref_al", key, path)
    min_al = _number(entry, "min_al", key, path)
    if min_al is None:
        raise UsageError(
            f"baseline entry '{key}' in {path} has min_al: null (not yet populated; upstream's "
            "assert_acceptance_length refuses it too). Populate it (upstream: "
            "TRTLLM_POPULATE_ACCEPTANCE_LENGTH=1 writes ref_al, and min_al at 95% of it) or "
            "pick another key"
        )
    return UpstreamReference(
        key=str(key),
        ref_al=ref_al,
        min_al=min_al,
        batch_size=entry.get("batch_size"),
        source=str(path),
    )


def _number(entry: dict, field: str, key: object, path: object) -> float | None:
    """``entry[field]`` as a finite float (None when absent or null), or bad input naming it."""
    value = entry.get(field)
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise UsageError(f"baseline entry '{key}' in {path}: {field} is {value!r}; give a number")
    return number


def load_baseline(spec: str | os.PathLike) -> Baseline:
    """Load ``--baseline``: a report written by ``--json``, or ``FILE.yaml[#KEY]`` in upstream's format."""
    text = str(spec)
    path, _, key = text.partition("#")
    if path.endswith((".yaml", ".yml")):
        return load_upstream_reference(path, key or None)
    if key:
        raise UsageError(f"--baseline {text}: '#KEY' selects an entry of a .yaml file only")
    return Report.load(path)


def config_mismatches(baseline: Report, config: dict) -> list[str]:
    """The workload settings in which ``baseline`` differs from ``config`` (see
    :func:`regress.acceptance.workload.mismatches`)."""
    return mismatches(baseline.config, config)


def check_baseline_config(
    baseline: Report, config: dict, *, source: str | None, allow_mismatch: bool
) -> list[str]:
    """Refuse a baseline measured on another workload, unless the user says to compare anyway.

    Returns:
        The mismatches (empty, or tolerated with ``allow_mismatch``), to record in the report.

    Raises:
        UsageError: the baseline differs and ``allow_mismatch`` is false (exit 2).
    """
    mismatches = config_mismatches(baseline, config)
    if mismatches and not allow_mismatch:
        raise UsageError(
            f"the baseline{' ' + source if source else ''} was measured with another configuration: "
            f"{', '.join(mismatches)}; rerun with the baseline's settings, pick a matching "
            "baseline, or pass --allow-config-mismatch to compare anyway"
        )
    return mismatches
