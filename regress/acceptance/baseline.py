"""Baselines to judge a run against: a saved acceptance report or an upstream YAML gate."""

from __future__ import annotations

import os

from regress.acceptance.report import Report
from regress.acceptance.verdicts import UpstreamReference
from regress.acceptance.workload import mismatches
from regress.errors import UsageError
from regress.files import read_text

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
    import yaml

    text = read_text(path, what="baseline")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"baseline {path} is not valid YAML: {exc}") from exc
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
    ref_al = entry.get("ref_al")
    min_al = entry.get("min_al")
    if min_al is None:
        raise UsageError(
            f"baseline entry '{key}' in {path} has min_al: null (not yet populated; upstream's "
            "assert_acceptance_length refuses it too). Populate it (upstream: "
            "TRTLLM_POPULATE_ACCEPTANCE_LENGTH=1 writes ref_al and min_al = 0.95 * ref_al) or "
            "pick another key"
        )
    return UpstreamReference(
        key=str(key),
        ref_al=None if ref_al is None else float(ref_al),
        min_al=float(min_al),
        batch_size=entry.get("batch_size"),
        source=str(path),
    )


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
