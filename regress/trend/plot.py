"""The nightly series as a PNG, change points marked: the picture for an issue or a CI artifact."""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import Path

from regress.errors import require_module
from regress.files import write_atomic
from regress.install import install_hint
from regress.trend.check import SeriesChange
from regress.trend.series import Metric, Series, build_series, default_metrics
from regress.trend.store import TrendStore

_INSTALL = install_hint("plot")


def plotted_series(store: TrendStore, metrics: Sequence[str] = ()) -> list[Series]:
    """The series ``trend plot`` draws: ``metrics``, else AL per batch size and the AL ratios
    (per-position acceptance is left out: one panel per depth would bury the headline)."""
    out = []
    for entries in store.by_configuration().values():
        wanted = [Metric.parse(m) for m in metrics] or default_metrics(
            entries[-1].report, per_position=False
        )
        out += [s for s in (build_series(entries, m) for m in wanted) if s and s.points]
    return out


def plot_series(
    series: Sequence[Series],
    findings: Sequence[SeriesChange],
    path: str | os.PathLike,
    *,
    dpi: int = 100,
) -> Path:
    """One panel per series (value per night), a line at each change point's first bad night.

    Regressions are red and labelled with the first bad commit, improvements green; the x axis is
    the night's position with its date underneath, so missing nights do not stretch it.
    Matplotlib's object API on an Agg canvas (no pyplot state), written atomically.

    Raises:
        MissingDependencyError: matplotlib is not installed.
    """
    require_module("matplotlib", purpose="regress trend plot", install=_INSTALL)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    series = [s for s in series if s.points]
    rows = max(len(series), 1)
    fig = Figure(figsize=(11, 2.6 * rows + 0.6), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, 1, squeeze=False)[:, 0]
    for ax, s in zip(axes, series, strict=False):
        xs = list(range(len(s.points)))
        ax.plot(xs, s.values, marker=".", linewidth=1, color="C0")
        ax.set_title(f"{s.metric.text}   [configuration {s.configuration}]", fontsize=9)
        step = max(1, len(xs) // 8)
        ax.set_xticks(xs[::step], [p.date[:10] for p in s.points[::step]], fontsize=7)
        for f in findings:
            if f.metric != s.metric.text or f.configuration != s.configuration:
                continue
            c = f.change
            color = "red" if c.regression else "green"
            ax.axvline(c.index - 0.5, color=color, linestyle="--", linewidth=1)
            ax.annotate(
                f"{c.relative:+.1%} first bad {f.first_bad['commit'][:10]}",
                (c.index - 0.5, max(s.values)),
                xytext=(4, 0),
                textcoords="offset points",
                fontsize=7,
                color=color,
                ha="left",
                va="top",
            )
    if not series:
        axes[0].text(0.5, 0.5, "no nights", ha="center", va="center")
    fig.suptitle("regress trend: nightly acceptance", fontsize=10)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return write_atomic(path, buf.getvalue())
