"""Generated nightly series and acceptance reports for the trend tests (seeded, no engine)."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path

from regress.acceptance.report import Report
from regress.trend.synthetic import LEVEL, STEP, step_series

__all__ = ["LEVEL", "STEP", "night", "report", "report_dict", "sha", "step_series"]

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "acceptance" / "report_v1.json"


def report_dict(al_by_batch: dict[int, float], *, engine: str = "reference") -> dict:
    """The sample report with each batch size's AL (and per-position acceptance) set."""
    data = copy.deepcopy(json.loads(SAMPLE.read_text()))
    data["engine"] = {"name": engine, "device": "cpu", "defects": [], "seed": 0}
    template = data["runs"][-1]
    data["runs"] = [{**copy.deepcopy(template), "batch_size": b} for b in sorted(al_by_batch)]
    for run in data["runs"]:
        al = al_by_batch[run["batch_size"]]
        scale = (al - 1) / sum(run["per_position"])
        run["acceptance_length"] = al
        run["per_position"] = [p * scale for p in run["per_position"]]
    data["config"]["batch_sizes"] = sorted(al_by_batch)
    return data


def report(al_by_batch: dict[int, float], **kwargs) -> Report:
    return Report.from_dict(report_dict(al_by_batch, **kwargs))


def night(i: int) -> str:
    return (dt.date(2026, 1, 1) + dt.timedelta(days=i)).isoformat()


def sha(i: int) -> str:
    return f"{i:04d}" + "c0ffee" * 6
