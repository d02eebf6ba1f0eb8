"""Acceptance against draft depth, one line per batch size: the picture of a batch-dependent loss."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from regress.acceptance.report import Report
from regress.errors import UsageError, require_module
from regress.files import write_atomic
from regress.install import install_hint

_INSTALL = install_hint("plot")


def _title(report: Report) -> tuple[str, str]:
    k = report.config.get("max_draft_len")
    title = (
        f"MTP acceptance by draft depth: {report.model}, K={k}, engine {report.engine.get('name')}"
    )
    failing = set(report.regressed_batch_sizes)
    parts = []
    for run in report.runs:
        flag = " REGRESSION" if run.batch_size in failing else ""
        parts.append(f"batch {run.batch_size}: AL {run.stats.acceptance_length:.3f}{flag}")
    baseline = report.baseline or {}
    if baseline.get("kind") == "upstream_yaml":
        parts.append(f"upstream min_al {baseline['min_al']:.3f} ({baseline['key']})")
    return title, "   ".join(parts)


def _draw_runs(report: Report, depths: list[int], ax_pos: Any, ax_cond: Any) -> dict[int, str]:
    """One line per run with its 95% band on each panel; returns each batch size's colour."""
    colors = {}
    failing = set(report.regressed_batch_sizes)
    for n, run in enumerate(report.runs):
        s = run.stats
        color = f"C{n % 10}"
        colors[run.batch_size] = color
        label = f"batch {run.batch_size} (AL {s.acceptance_length:.2f})"
        if run.batch_size in failing:
            label += " REGRESSION"
        ax_pos.plot(depths, s.per_position, marker="o", color=color, label=label)
        ax_pos.fill_between(
            depths,
            [c[0] for c in s.per_position_ci],
            [c[1] for c in s.per_position_ci],
            color=color,
            alpha=0.15,
        )
        cond_x = [d for d, c in zip(depths, s.conditional, strict=True) if c is not None]
        cond_y = [c for c in s.conditional if c is not None]
        ax_cond.plot(cond_x, cond_y, marker="o", color=color, label=label)
        bands = [(d, ci) for d, ci in zip(depths, s.conditional_ci, strict=True) if ci is not None]
        if bands:
            ax_cond.fill_between(
                [d for d, _ in bands],
                [ci[0] for _, ci in bands],
                [ci[1] for _, ci in bands],
                color=color,
                alpha=0.15,
            )
    return colors


def _draw_baseline(
    baseline: dict, depths: list[int], colors: dict[int, str], ax_pos: Any, ax_cond: Any
) -> None:
    """The baseline report's runs, dashed in their batch size's colour."""
    k = len(depths)
    for run in baseline.get("runs") or []:
        color = colors.get(run["batch_size"], "0.4")
        label = f"baseline batch {run['batch_size']} (AL {run['acceptance_length']:.2f})"
        style = {"ls": "--", "marker": "x", "color": color, "alpha": 0.8, "label": label}
        ax_pos.plot(depths, run["per_position"][:k], **style)
        cond = [
            (d, c) for d, c in zip(depths, run["conditional"][:k], strict=False) if c is not None
        ]
        ax_cond.plot([d for d, _ in cond], [c for _, c in cond], **style)


def plot_report(report: Report, path: str | os.PathLike, *, dpi: int = 100) -> Path:
    """Draw per-position and conditional acceptance against draft depth and save a PNG.

    Left panel: per-position acceptance (chance the first i drafts are all accepted) with its 95%
    bootstrap band; right panel: conditional acceptance (chance draft i is accepted given the
    earlier ones were). A batch-dependent bug shows as the batch > 1 line peeling away from batch 1
    at the deepest positions, and as a falling right-hand line where batch 1's is flat. Baseline
    runs, when the report has them, are dashed in their batch size's colour.

    Uses matplotlib's object API on an Agg canvas (no pyplot), so it holds no global state and is
    safe to call from parallel tests.

    The PNG is written atomically with the same mode as every other file regress writes.

    Raises:
        MissingDependencyError: matplotlib is not installed.
        UsageError: the file cannot be written.
    """
    require_module("matplotlib", purpose="--plot", install=_INSTALL)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    k = int(report.config.get("max_draft_len") or report.runs[0].stats.max_draft_len)
    depths = list(range(1, k + 1))
    fig = Figure(figsize=(11, 4.8), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    ax_pos, ax_cond = fig.subplots(1, 2, sharex=True)
    colors = _draw_runs(report, depths, ax_pos, ax_cond)
    _draw_baseline(report.baseline or {}, depths, colors, ax_pos, ax_cond)
    ax_pos.set_title("per-position acceptance: first i drafts all accepted")
    ax_pos.set_ylabel("fraction of verify steps")
    ax_cond.set_title("conditional acceptance: draft i | drafts before it")
    ax_cond.set_ylabel("acceptance probability")
    for ax in (ax_pos, ax_cond):
        ax.set_xlabel("draft depth i")
        ax.set_xticks(depths)
        ax.set_ylim(0.0, 1.02)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower left", fontsize="small")
    title, subtitle = _title(report)
    fig.suptitle(f"{title}\n{subtitle}", fontsize="medium")
    png = io.BytesIO()
    fig.savefig(png, format="png")
    try:
        return write_atomic(path, png.getvalue())
    except OSError as exc:
        raise UsageError(f"cannot write plot {path}: {exc.strerror}") from exc
