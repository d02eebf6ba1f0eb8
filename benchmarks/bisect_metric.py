"""Simulated metric bisects: adaptive runs against fixed repeats and against the old 5,3,10 judge.

Each trial draws a culprit uniformly from 1..N; a run of a commit before the culprit measures the
good level (3.766, the seeds' batch-8 acceptance length), one at or after it the bad level, 13 %
lower, plus normal noise of spread sigma = ratio x effect. Every policy sees the same culprit and a
noise stream from the same seed. *runs* counts every measurement, endpoints included.

* **regress (adaptive)**: :class:`regress.bisect.metric.MetricJudge` as ``regress bisect run``
  uses it (caps 10,1,10, no confirmation rerun).
* **regress 5,3,10 (before)**: the judge this branch replaced, loaded from git (``--before REV``):
  5 runs per endpoint, 3 first runs per commit, up to 10, Mann-Whitney/KS comparisons, plus the
  confirmation rerun of the culprit.
* **fixed R**: Pinpoint-style fixed repeats: R runs of each endpoint and of each probed commit,
  the commit called by the closer mean; plain binary search.

    python benchmarks/bisect_metric.py --trials 300
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from regress.bisect.metric import MetricJudge
from regress.bisect.search import EndpointError, SearchConfig, search

GOOD = 3.766
EFFECT = 0.13 * GOOD


def _levels(culprit: int, sigma: float, rng: random.Random):
    def measure(positions):
        return [rng.gauss(GOOD - EFFECT if p >= culprit else GOOD, sigma) for p in positions]

    return measure


def _before_judge(rev: str):
    """The MetricJudge class of an older revision (its file only; it imports today's helpers)."""
    root = Path(__file__).resolve().parent.parent
    text = subprocess.run(
        ["git", "show", f"{rev}:regress/bisect/metric.py"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="regress-metric-before-")) / "metric_before.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("metric_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["metric_before"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.MetricJudge


def fixed_repeat(n: int, measure, r: int) -> tuple[int, int]:
    """Binary search, R runs per endpoint and per commit, each commit called by the closer mean."""
    good = sum(measure([0] * r)) / r
    bad = sum(measure([n] * r)) / r
    lo, hi, runs = 0, n, 2 * r
    while hi - lo > 1:
        mid = (lo + hi) // 2
        m = sum(measure([mid] * r)) / r
        runs += r
        if abs(m - bad) < abs(m - good):
            hi = mid
        else:
            lo = mid
    return hi, runs


def run_cell(args) -> dict:
    n, ratio, policy, trials, before = args
    sigma = ratio * EFFECT
    hits, runs = 0, []
    start = time.perf_counter()
    old = _before_judge(before) if policy == "before" else None
    for trial in range(trials):
        seed = hash((n, round(ratio * 100), trial)) & 0xFFFFFFFF
        culprit = random.Random(seed).randint(1, n)
        calls = [0]
        base = _levels(culprit, sigma, random.Random(seed ^ 0x5EED))

        def measure(ps, base=base, calls=calls):
            calls[0] += len(ps)
            return base(ps)

        try:
            if policy.startswith("fixed"):
                answer, _ = fixed_repeat(n, measure, int(policy.split()[1]))
            elif policy == "before":
                judge = old(n, measure, endpoint_runs=5, min_runs=3, max_runs=10)
                answer = search(n, judge, SearchConfig()).culprit
            else:
                judge = MetricJudge(n, measure)
                answer = search(n, judge, SearchConfig(confirm=False)).culprit
        except EndpointError:
            answer = None
        hits += answer == culprit
        runs.append(calls[0])
    runs.sort()
    return {
        "n": n,
        "ratio": ratio,
        "policy": policy,
        "accuracy": hits / trials,
        "mean": sum(runs) / trials,
        "p95": runs[math.ceil(0.95 * trials) - 1],
        "max": runs[-1],
        "seconds": time.perf_counter() - start,
    }


NAMES = {
    "adaptive": "regress (adaptive)",
    "before": "regress 5,3,10 (before)",
    "fixed 5": "fixed 5 (Pinpoint-style)",
    "fixed 10": "fixed 10 (Pinpoint-style)",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--sizes", default="128,1024")
    parser.add_argument("--ratios", default="0,0.1,0.3,0.5", help="sigma / effect")
    parser.add_argument("--policies", default=",".join(NAMES))
    parser.add_argument("--before", default="d2e1365", help="git revision of the old judge")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    jobs = [
        (n, float(r), p, args.trials, args.before)
        for n in (int(x) for x in args.sizes.split(","))
        for r in args.ratios.split(",")
        for p in args.policies.split(",")
    ]
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        cells = list(pool.map(run_cell, jobs))
    print(
        f"{args.trials} trials per row, {time.perf_counter() - start:.0f}s on {args.workers} workers\n"
    )
    print("| N | sigma/effect | policy | accuracy | mean runs | p95 | max | ceil(log2 N)+3 |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    for c in cells:
        print(
            f"| {c['n']} | {c['ratio']:g} | {NAMES[c['policy']]} | {100 * c['accuracy']:.1f}% | "
            f"{c['mean']:.1f} | {c['p95']} | {c['max']} | {math.ceil(math.log2(c['n'])) + 3} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
