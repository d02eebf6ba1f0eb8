"""``regress trend check`` as a library call: every series of a store, its change points, bisects."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from regress.errors import FAILED, OK, UsageError
from regress.progress import Progress
from regress.trend.bisect import BisectPlan, plan_bisect
from regress.trend.detect import ChangePoint, DetectorConfig, detect, open_regressions
from regress.trend.series import Metric, Series, build_series, default_metrics
from regress.trend.store import TrendStore, normalize_date

SCHEMA = 1


@dataclass
class SeriesChange:
    """A change point of one series, placed between two nights' commits.

    Attributes:
        metric: the series' metric.
        configuration: its configuration id.
        change: the detector's change point (``index`` into the series' nights).
        last_good / first_bad: ``{"commit", "date"}`` of the nights either side.
        open: a regression not recovered from since (improvements are never open).
        alarm: an open regression first seen on or after ``--since``: what makes exit 1.
        bisect: the bisect for it, when asked for and not already planned for another metric.
        bisect_error: why no bisect could be planned (e.g. an engine ``regress accept`` lacks).
    """

    metric: str
    configuration: str
    change: ChangePoint
    last_good: dict
    first_bad: dict
    open: bool
    alarm: bool
    bisect: BisectPlan | None = None
    bisect_error: str | None = None

    def to_dict(self) -> dict:
        return {
            "metric": self.metric,
            "configuration": self.configuration,
            **self.change.to_dict(),
            "last_good": self.last_good,
            "first_bad": self.first_bad,
            "open": self.open,
            "alarm": self.alarm,
            "bisect": self.bisect.to_dict() if self.bisect else None,
            "bisect_error": self.bisect_error,
        }


@dataclass
class SeriesSummary:
    """One series checked: how many nights it had and the latest value."""

    metric: str
    configuration: str
    nights: int
    latest: float | None
    direction: int
    note: str | None = None


@dataclass
class CheckResult:
    """Everything a check found; ``exit_code`` 1 when any finding is an alarm."""

    store: str
    config: DetectorConfig
    series: list[SeriesSummary] = field(default_factory=list)
    findings: list[SeriesChange] = field(default_factory=list)
    since: str | None = None

    @property
    def alarms(self) -> list[SeriesChange]:
        return [f for f in self.findings if f.alarm]

    @property
    def bisects(self) -> list[BisectPlan]:
        return [f.bisect for f in self.findings if f.bisect is not None]

    @property
    def exit_code(self) -> int:
        return FAILED if self.alarms else OK

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "store": self.store,
            "regressed": bool(self.alarms),
            "since": self.since,
            "detector": {
                "method": "e-divisive means, permutation test, local step check",
                **vars(self.config),
            },
            "series": [vars(s) for s in self.series],
            "findings": [f.to_dict() for f in self.findings],
        }


def _night(series: Series, index: int) -> dict:
    p = series.points[index]
    return {"commit": p.commit, "date": p.date}


def check_series(
    series: Series,
    config: DetectorConfig,
    *,
    since: str | None = None,
) -> list[SeriesChange]:
    """Change points of one series as findings (no bisects planned yet)."""
    steps = detect(series.values, direction=series.metric.direction, config=config)
    still_open = {s.index for s in open_regressions(steps, config.min_change)}
    out = []
    for step in steps:
        first_bad = _night(series, step.index)
        is_open = step.index in still_open
        out.append(
            SeriesChange(
                metric=series.metric.text,
                configuration=series.configuration,
                change=step,
                last_good=_night(series, step.index - 1),
                first_bad=first_bad,
                open=is_open,
                alarm=is_open and (since is None or first_bad["date"] >= since),
            )
        )
    return out


def _summary(
    series: Series | None, metric: Metric, cid: str, config: DetectorConfig
) -> SeriesSummary:
    """One series as checked: nights and latest value; a note when too short to test."""
    nights = len(series.points) if series else 0
    latest = series.points[-1].value if series and nights else None
    summary = SeriesSummary(metric.text, cid, nights, latest, metric.direction)
    if nights < 2 * config.min_size:
        summary.note = f"{nights} night(s); {2 * config.min_size} needed to find a change"
    return summary


def _plan_for(
    finding: SeriesChange,
    series: Series,
    summary: SeriesSummary,
    planned: set[tuple[str, str, str]],
    options: Sequence[str],
    threshold: bool,
) -> None:
    """Plan the bisect of an alarm, once per configuration and commit range (the first metric
    that shows it); record why when none can be planned."""
    key = (series.configuration, finding.last_good["commit"], finding.first_bad["commit"])
    if not finding.alarm or key in planned:
        return
    if key[1] == key[2]:
        summary.note = "a change between two nights of the same commit: not code"
        return
    planned.add(key)
    entry = series.entries[finding.change.index]
    c = finding.change
    try:
        finding.bisect = plan_bisect(
            series.metric,
            key[1],
            key[2],
            entry.report,
            entry.command,
            options,
            levels=(c.before, c.after) if threshold else None,
        )
    except UsageError as exc:  # the alarm still stands; say why no bisect
        finding.bisect_error = str(exc)


def check_store(
    store: TrendStore,
    *,
    metrics: Sequence[str] = (),
    config: DetectorConfig | None = None,
    since: str | None = None,
    bisect: bool = False,
    bisect_options: Sequence[str] = (),
    bisect_threshold: bool = False,
    progress: Progress[str] | None = None,
) -> CheckResult:
    """Check every configuration's series in ``store``.

    Args:
        metrics: metric texts; empty means :func:`regress.trend.series.default_metrics` of each
            configuration's latest report.
        since: only regressions first seen on or after this date raise the alarm.
        bisect: plan a bisect for each alarm (one per configuration and commit range: the first
            metric in order that shows it, so AL before per-position acceptance).
        bisect_options: extra ``regress bisect run`` options (``--repo``, ``--overlay``...).
        bisect_threshold: judge each bisect run against the midpoint of the levels either side
            of the change (one run per commit; for a deterministic engine).
        progress: called with a line per series checked.

    Raises:
        UsageError: an empty store, or a metric no night has.
    """
    config = config or DetectorConfig()
    since = normalize_date(since, option="--since") if since else None  # before the store
    chosen = [Metric.parse(m) for m in metrics]
    groups = store.by_configuration()
    if not groups:
        raise UsageError(
            f"the trend store {store.directory} holds no nights; add reports with "
            "`regress trend add REPORT.json --commit SHA --store DIR`"
        )
    result = CheckResult(store=str(store.directory), config=config, since=since)
    planned: set[tuple[str, str, str]] = set()
    for cid, entries in groups.items():
        for metric in chosen or default_metrics(entries[-1].report):
            series = build_series(entries, metric)
            summary = _summary(series, metric, cid, config)
            result.series.append(summary)
            if summary.note:
                continue
            if progress:
                progress(f"{metric.text} [{cid}]: {summary.nights} nights")
            findings = check_series(series, config, since=since)
            if bisect:
                for finding in findings:
                    _plan_for(finding, series, summary, planned, bisect_options, bisect_threshold)
            result.findings.extend(findings)
    if chosen and not any(s.nights for s in result.series):
        raise UsageError(
            "no night has the metric(s) "
            + ", ".join(m.text for m in chosen)
            + "; check the path against a report (e.g. runs[batch=8].acceptance_length)"
        )
    return result
