"""Generated nightly series and acceptance reports for the trend tests (seeded, no engine)."""

from __future__ import annotations

import copy
import datetime as dt
import json
import random
from pathlib import Path

from regress.acceptance.report import Report

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "acceptance" / "report_v1.json"
LEVEL = 3.77  # AL at batch 1, K = 4 (GLM-5.2's figure before the stale map)
STEP = 0.13  # the stale req_idx_per_token cut AL at batch 8 by 13 %


def step_series(
    n: int,
    *,
    at: tuple[int, ...] = (),
    sizes: tuple[float, ...] = (),
    sigma: float = 0.1,
    seed: int = 0,
    drift: float = 0.0,
    level: float = LEVEL,
) -> list[float]:
    """``n`` nights at ``level``; from night ``at[i]`` on the level moves by ``sizes[i]`` (relative).

    Noise is Gaussian with standard deviation ``sigma`` times the 13 % step; ``drift`` is the total
    relative change spread evenly over the ``n`` nights.
    """
    rnd = random.Random(seed)
    noise = sigma * STEP * level
    out = []
    for i in range(n):
        value = level * (1 + drift * i / n)
        for start, size in zip(at, sizes, strict=True):
            if i >= start:
                value += size * level
        out.append(value + rnd.gauss(0, noise))
    return out


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
