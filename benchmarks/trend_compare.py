"""regress trend's detector against Apache Otava on the same generated nightly series.

    python benchmarks/trend_compare.py --otava-python /tmp/otava-venv/bin/python --json out.json

Every scenario is seeded (``regress.trend.synthetic.step_series``: AL 3.77, a 13 % step, Gaussian
noise given as sigma/step). Otava runs in its own venv through ``benchmarks/trend_otava.py`` on the
very same numbers. A regression is a change point whose level falls (AL: higher is better).

* detection: a regression reported at the planted night (the right commit) on 100 nights;
* false alarms: regressions reported on quiet series, per 100 nights; and, as CI sees it, the
  share of nights whose check alarms when a quiet series is rechecked every night (20 to 100);
* nights late: the detector is rerun each night after the step lands (as a nightly check would);
  bad nights seen before the first alarm at the right night, minus one (0: the night it landed);
* drift / improvement: regressions reported on a slow -8 % drift and on a +13 % step (should be 0);
* two regressions: both found at their nights (-13 % at 40, -8 % at 85 of 120);
* outliers: quiet series with three one-night drops of 26 % (a broken node), false alarms;
* gaps: 15 % of nights missing, the regression found at the first night after it landed.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from regress.trend.detect import DetectorConfig, detect
from regress.trend.synthetic import STEP, step_series

HERE = Path(__file__).resolve().parent


class Ours:
    def __init__(self, **config):
        self.config = DetectorConfig(**config)
        self.name = "regress trend" + "".join(f", {k}={v}" for k, v in config.items())
        self.seconds = 0.0

    def regressions(self, many: list[list[float]]) -> list[list[int]]:
        start = time.perf_counter()
        out = [[c.index for c in detect(v, config=self.config) if c.regression] for v in many]
        self.seconds += time.perf_counter() - start
        return out


class Otava:
    def __init__(self, python: str, **options):
        self.python = python
        self.options = options
        self.name = "Otava " + ", ".join(f"{k}={v}" for k, v in options.items())
        self.seconds = 0.0

    def regressions(self, many: list[list[float]]) -> list[list[int]]:
        start = time.perf_counter()
        done = subprocess.run(
            [self.python, str(HERE / "trend_otava.py")],
            input=json.dumps({"series": many, **self.options}),
            capture_output=True,
            text=True,
            check=True,
        )
        self.seconds += time.perf_counter() - start
        return [
            [p["index"] for p in cps if p["after"] < p["before"]] for cps in json.loads(done.stdout)
        ]


def _steps(trials: int, sigma: float, seed: int) -> list[tuple[int, list[float]]]:
    rnd = random.Random(seed)
    out = []
    for t in range(trials):
        at = rnd.randrange(30, 71)
        out.append((at, step_series(100, at=(at,), sizes=(-STEP,), sigma=sigma, seed=seed + t)))
    return out


def _late(tool, cases: list[tuple[int, list[float]]], most: int = 15) -> list[int | None]:
    """Bad nights seen before the first alarm at the planted night, minus one (None: never)."""
    late: list[int | None] = [None] * len(cases)
    open_ = list(range(len(cases)))
    for seen in range(1, most + 1):
        if not open_:
            break
        found = tool.regressions([cases[i][1][: cases[i][0] + seen] for i in open_])
        for i, idx in zip(list(open_), found, strict=True):
            if cases[i][0] in idx:
                late[i] = seen - 1
                open_.remove(i)
    return late


def run(tools, trials: int, nightly: int) -> dict:
    rows: dict[str, dict] = {t.name: {} for t in tools}
    for sigma in (0.05, 0.1, 0.3):
        cases = _steps(trials, sigma, seed=int(sigma * 1000))
        for tool in tools:
            found = tool.regressions([v for _, v in cases])
            hits = sum(at in idx for (at, _), idx in zip(cases, found, strict=True))
            extra = sum(
                len([i for i in idx if i != at]) for (at, _), idx in zip(cases, found, strict=True)
            )
            late = [x for x in _late(tool, cases) if x is not None]
            rows[tool.name][f"sigma {sigma}"] = {
                "detected": hits / trials,
                "other regressions per series": extra / trials,
                "nights late (median)": statistics.median(late) if late else None,
                "nights late (mean)": round(statistics.mean(late), 2) if late else None,
                "found while rerun nightly (<= 15 nights)": len(late) / trials,
            }
    for sigma in (0.1, 0.3):
        quiet = [step_series(100, sigma=sigma, seed=5000 + t) for t in range(trials)]
        for tool in tools:
            alarms = sum(len(idx) for idx in tool.regressions(quiet))
            rows[tool.name][f"quiet sigma {sigma}"] = {
                "false alarms per 100 nights": alarms / trials
            }
    # as CI sees it: the check rerun every night from night 20 to 100 of a quiet series
    for sigma in (0.1, 0.3):
        quiet = [step_series(100, sigma=sigma, seed=5200 + t) for t in range(nightly)]
        prefixes = [v[:n] for v in quiet for n in range(20, 101)]
        for tool in tools:
            alarmed = sum(bool(idx) for idx in tool.regressions(prefixes))
            rows[tool.name][f"quiet sigma {sigma}, checked every night"] = {
                "nights with an alarm per 100 nights": round(100 * alarmed / len(prefixes), 2)
            }
    outliers = []
    for t in range(trials):
        values = step_series(100, sigma=0.1, seed=5500 + t)
        for i in random.Random(5500 + t).sample(range(100), 3):
            values[i] *= 1 - 2 * STEP  # one broken node for one night
        outliers.append(values)
    for tool in tools:
        rows[tool.name]["quiet sigma 0.1 + 3 one-night outliers"] = {
            "false alarms per 100 nights": sum(map(len, tool.regressions(outliers))) / trials
        }
    drift = [step_series(100, sigma=0.1, seed=6000 + t, drift=-0.08) for t in range(trials)]
    up = [
        step_series(100, at=(50,), sizes=(STEP,), sigma=0.1, seed=7000 + t) for t in range(trials)
    ]
    two = [
        step_series(120, at=(40, 85), sizes=(-STEP, -0.08), sigma=0.1, seed=8000 + t)
        for t in range(trials)
    ]
    gaps = []
    for t in range(trials):
        rnd = random.Random(9000 + t)
        values = step_series(100, at=(60,), sizes=(-STEP,), sigma=0.1, seed=9000 + t)
        kept = [i for i in range(100) if rnd.random() > 0.15]
        gaps.append((kept, [values[i] for i in kept]))
    for tool in tools:
        r = rows[tool.name]
        r["drift -8% / 100 nights, sigma 0.1"] = {
            "alarms per series": sum(map(len, tool.regressions(drift))) / trials
        }
        r["improvement +13%, sigma 0.1"] = {
            "alarms per series": sum(map(len, tool.regressions(up))) / trials
        }
        found = tool.regressions(two)
        r["two regressions, sigma 0.1"] = {
            "both found": sum({40, 85} <= set(i) for i in found) / trials,
            "other regressions per series": sum(len(set(i) - {40, 85}) for i in found) / trials,
        }
        found = tool.regressions([v for _, v in gaps])
        r["15% nights missing, sigma 0.1"] = {
            # the first night on or after 60 (night 60 itself may be missing)
            "detected at the right commit": sum(
                min(k for k in kept if k >= 60) in [kept[i] for i in idx]
                for (kept, _), idx in zip(gaps, found, strict=True)
            )
            / trials
        }
        r["detector seconds"] = round(tool.seconds, 1)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--otava-python", help="Python of a venv with apache-otava installed.")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument(
        "--nightly-trials", type=int, default=5, help="Quiet series rechecked every night."
    )
    parser.add_argument("--json", help="Write the results here.")
    args = parser.parse_args()
    tools = [Ours(), Ours(min_size=2)]
    if args.otava_python:
        tools += [
            Otava(args.otava_python),
            Otava(args.otava_python, min_magnitude=0.02),
        ]
    rows = run(tools, args.trials, args.nightly_trials)
    doc = {"trials": args.trials, "nightly_trials": args.nightly_trials, "results": rows}
    text = json.dumps(doc, indent=1)
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(text)
    sys.exit(0)


if __name__ == "__main__":
    main()
