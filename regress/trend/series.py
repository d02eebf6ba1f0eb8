"""Metric series out of stored acceptance reports: paths like ``runs[batch=8].acceptance_length``.

A metric is a path into an acceptance report (schema 1, ``regress.acceptance.report``) or the
ratio of two paths (``runs[batch=8].acceptance_length / runs[batch=1].acceptance_length``). A path
step is a key, a list index (``per_position[0]``) or a selector (``runs[batch=8]``: the element
whose ``batch_size`` is 8), so a path means the same run however many batch sizes a night ran.
``regress bisect``'s metric probe only knows indices (``runs[1]``); :func:`index_path` turns a
selector path into that form against the report the bisect will reproduce.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from regress.errors import UsageError

# selector keys users write -> the report's key
_ALIASES = {"batch": "batch_size"}

#: +1: higher is better; -1: lower is better, by the path's last key.
DIRECTIONS = {
    "acceptance_length": 1,
    "upstream_acceptance_length": 1,
    "acceptance_rate": 1,
    "per_position": 1,
    "conditional": 1,
    "wall_seconds": -1,
}

_STEP = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)|\[(-?\d+)\]|\[([A-Za-z_][A-Za-z0-9_]*)=([^\]]+)\]")


def _steps(path: str) -> list[tuple[str, Any]]:
    """Parse one path into ("key", name) / ("index", i) / ("select", (key, value)) steps."""
    out: list[tuple[str, Any]] = []
    pos = 0
    text = path.strip()
    if not text:
        raise UsageError("empty metric path; give one like runs[batch=8].acceptance_length")
    while pos < len(text):
        if out and text[pos] == "." and pos + 1 < len(text) and text[pos + 1] != "[":
            pos += 1
        match = _STEP.match(text, pos)
        if match is None or (match.group(1) and out and text[pos - 1] != "."):
            raise UsageError(
                f"cannot parse metric path {path!r} near {text[pos:]!r}; "
                "write keys, [index] and [key=value], e.g. runs[batch=8].per_position[0]"
            )
        key, index, sel_key, sel_value = match.groups()
        if key:
            out.append(("key", key))
        elif index is not None:
            out.append(("index", int(index)))
        else:
            out.append(("select", (_ALIASES.get(sel_key, sel_key), sel_value.strip())))
        pos = match.end()
    return out


def _matches(value: Any, wanted: str) -> bool:
    if isinstance(value, bool) or value is None:
        return str(value).lower() == wanted.lower()
    if isinstance(value, int | float):
        try:
            return float(wanted) == float(value)
        except ValueError:
            return False
    return str(value) == wanted


def _follow(data: Any, steps: Sequence[tuple[str, Any]]) -> tuple[Any, list[str]]:
    """The value at ``steps`` (None when absent) and the index form of the path taken."""
    node, taken = data, []
    for kind, arg in steps:
        if kind == "key":
            if not isinstance(node, Mapping) or arg not in node:
                return None, taken
            node = node[arg]
            taken.append(f".{arg}" if taken else arg)
        elif kind == "index":
            if not isinstance(node, list) or not -len(node) <= arg < len(node):
                return None, taken
            node = node[arg]
            taken.append(f"[{arg}]")
        else:
            key, wanted = arg
            if not isinstance(node, list):
                return None, taken
            hit = next(
                (
                    i
                    for i, item in enumerate(node)
                    if isinstance(item, Mapping) and key in item and _matches(item[key], wanted)
                ),
                None,
            )
            if hit is None:
                return None, taken
            node = node[hit]
            taken.append(f"[{hit}]")
    return node, taken


@dataclass(frozen=True)
class Metric:
    """A parsed metric: one path, or a ratio of two.

    Attributes:
        text: as the user wrote it (normalised spacing); the series' name.
        paths: one path, or numerator and denominator.
        direction: +1 higher is better, -1 lower is better (from the numerator's last key).
    """

    text: str
    paths: tuple[str, ...]
    direction: int

    @classmethod
    def parse(cls, text: str) -> Metric:
        parts = [p.strip() for p in text.split("/")]
        if len(parts) > 2 or not all(parts):
            raise UsageError(f"metric {text!r}: give one path, or two separated by '/' for a ratio")
        keys = [arg for kind, arg in _steps(parts[0]) if kind == "key"]
        for part in parts[1:]:
            _steps(part)
        direction = DIRECTIONS.get(keys[-1], 1) if keys else 1
        return cls(" / ".join(parts), tuple(parts), direction)

    def value(self, report: Mapping) -> float | None:
        """The metric on one report; None when the report lacks it (that night is a gap)."""
        values = []
        for path in self.paths:
            raw, _ = _follow(report, _steps(path))
            if isinstance(raw, bool) or not isinstance(raw, int | float):
                return None
            values.append(float(raw))
        if len(values) == 2:
            return values[0] / values[1] if values[1] else None
        return values[0]


def index_path(path: str, report: Mapping) -> str:
    """``path`` with every selector replaced by its list index in ``report``.

    Raises:
        UsageError: when the report has nothing at the path.
    """
    node, taken = _follow(report, _steps(path))
    if node is None:
        raise UsageError(f"the report has no {path!r}; cannot build a bisect probe for it")
    return "".join(taken)


def default_metrics(report: Mapping, *, per_position: bool = True) -> list[Metric]:
    """What ``regress trend check`` watches when no ``--metric`` is given.

    AL per batch size, per-position acceptance per batch size (unless ``per_position`` is false:
    ``trend plot`` leaves them out), and each batch size's AL over the reference batch size's
    (the stale ``req_idx_per_token`` signature: batch 8 falls, batch 1 does not).
    """
    runs = [r for r in report.get("runs", []) if isinstance(r, Mapping) and "batch_size" in r]
    sizes = sorted({int(r["batch_size"]) for r in runs})
    ref = report.get("config", {}).get("reference_batch_size") or (sizes[0] if sizes else None)
    texts = [f"runs[batch={b}].acceptance_length" for b in sizes]
    for r in sorted(runs, key=lambda r: r["batch_size"]) if per_position else []:
        texts += [
            f"runs[batch={r['batch_size']}].per_position[{i}]"
            for i in range(len(r.get("per_position") or []))
        ]
    texts += [
        f"runs[batch={b}].acceptance_length / runs[batch={ref}].acceptance_length"
        for b in sizes
        if b != ref
    ]
    return [Metric.parse(t) for t in texts]


@dataclass(frozen=True)
class Point:
    """One night of one series."""

    commit: str
    date: str
    value: float


@dataclass
class Series:
    """One metric over the nights of one configuration, oldest first (nights without it left out).

    Attributes:
        metric: what is measured.
        configuration: the configuration id the nights share.
        points: the nights that have a value.
        entries: the store entries behind ``points``, same order (for the bisect's command).
    """

    metric: Metric
    configuration: str
    points: list[Point] = field(default_factory=list)
    entries: list[Any] = field(default_factory=list)

    @property
    def values(self) -> list[float]:
        return [p.value for p in self.points]


def build_series(entries: Iterable[Any], metric: Metric) -> Series | None:
    """The series of ``metric`` over ``entries`` (one configuration, already in night order)."""
    series = None
    for entry in entries:
        if series is None:
            series = Series(metric, entry.config_id)
        value = metric.value(entry.report)
        if value is not None:
            series.points.append(Point(entry.commit, entry.date, value))
            series.entries.append(entry)
    return series
