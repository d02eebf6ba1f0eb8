"""How long ``regress trend check`` takes on a nightly history of realistic length.

    python benchmarks/trend_speed.py                          # 60, 120 and 200 nights, 3 runs
    python benchmarks/trend_speed.py --nights 120 --repeats 5 --json out.json

A nightly job runs ``regress trend check`` once per configuration over every night it has kept:
two to seven months of history. This builds such a store (the sample acceptance report of
``tests/data/acceptance/`` at batch 1 and 8, AL and per-position acceptance scaled to a seeded
``step_series``: the 11 default series), once quiet and once with the 13 % step of the stale
``req_idx_per_token`` map two thirds of the way in, so that most series hold a significant split
and pay for the full permutation test. Each store is checked by a fresh ``python -m regress`` (what
CI pays, imports included) and, in this process, by ``check_store`` alone (the detector's share).
The machine's load average is recorded around every run: the cores may be shared.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the sample report, scaled as the trend tests scale it
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from _trend_data import report_dict

from regress.acceptance.report import Report
from regress.trend.check import check_store
from regress.trend.detect import DetectorConfig
from regress.trend.store import TrendStore
from regress.trend.synthetic import STEP, step_series


def _report(al_by_batch: dict[int, float]) -> Report:
    return Report.from_dict(report_dict(al_by_batch))


def build_store(path: Path, nights: int, *, step: bool) -> TrendStore:
    """``nights`` reports: batch 1 quiet, batch 8 quiet or stepping down 13 % at 2/3."""
    at, sizes = ((2 * nights // 3,), (-STEP,)) if step else ((), ())
    batch8 = step_series(nights, at=at, sizes=sizes, seed=nights + 1)
    batch1 = step_series(nights, seed=nights + 2)
    store = TrendStore(path)
    start = dt.date(2026, 1, 1)
    for i in range(nights):
        date = (start + dt.timedelta(days=i)).isoformat()
        store.add(_report({1: batch1[i], 8: batch8[i]}), commit=f"{i:040x}", date=date)
    return store


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def time_cli(store: Path) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "regress", "trend", "check", "--store", str(store)],
        capture_output=True,
        text=True,
        check=False,
    )
    return time.perf_counter() - start, done.returncode


def time_library(store: Path) -> tuple[float, dict]:
    start = time.perf_counter()
    result = check_store(TrendStore(store), metrics=(), config=DetectorConfig())
    seconds = time.perf_counter() - start
    return seconds, result.to_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, nargs="+", default=[60, 120, 200])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="Write every run and finding.")
    args = parser.parse_args()
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    out: dict = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "torch_installed": torch_version,
        "rows": [],
    }
    print("| nights | history | `regress trend check` s | detector s | exit | load |")
    print("| ---: | --- | ---: | ---: | ---: | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for nights in args.nights:
            for step in (False, True):
                path = Path(tmp) / f"{nights}-{'step' if step else 'quiet'}"
                build_store(path, nights, step=step)
                loads, cli, lib, codes = [_load()], [], [], set()
                for _ in range(args.repeats):
                    seconds, code = time_cli(path)
                    cli.append(seconds)
                    codes.add(code)
                    seconds, findings = time_library(path)
                    lib.append(seconds)
                    loads.append(_load())
                row = {
                    "nights": nights,
                    "history": "step" if step else "quiet",
                    "cli_seconds": [round(s, 3) for s in cli],
                    "detector_seconds": [round(s, 3) for s in lib],
                    "exit_codes": sorted(codes),
                    "load_1min": loads,
                    "findings": findings["findings"],
                }
                out["rows"].append(row)
                print(
                    f"| {nights} | {row['history']} | {statistics.median(cli):.2f} "
                    f"({min(cli):.2f}-{max(cli):.2f}) | {statistics.median(lib):.2f} | "
                    f"{','.join(map(str, sorted(codes)))} | {min(loads)}-{max(loads)} |",
                    flush=True,
                )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
