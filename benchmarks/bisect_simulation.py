"""Simulated bisects: regress against plain binary search with git bisect run semantics.

Each trial draws a culprit uniformly from 1..N and answers probes from a noisy oracle: a good commit
fails with probability eps (false fail), a bad one passes with probability delta (false pass,
two-sided case only). Every tool sees the same culprit and its own noise stream derived from the same
seed. Accuracy is the fraction of trials whose answer is the culprit (an error such as "the good
endpoint fails" counts as wrong); probes are all executions, endpoint checks included.

    python benchmarks/bisect_simulation.py                       # the full table (benchmarks/bisect.md)
    python benchmarks/bisect_simulation.py --trials 200 --sizes 1024 --eps 0.1
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from regress.bisect.search import EndpointError, SearchConfig, search
from regress.bisect.verdicts import Verdict

TOOLS = {
    "git bisect run": None,
    "regress (auto)": SearchConfig(mode="auto"),
    "regress --flaky": SearchConfig(mode="flaky"),
    "regress --flaky --false-pass": SearchConfig(mode="flaky", false_pass=True),
}


@dataclass
class Cell:
    n: int
    eps: float
    delta: float
    tool: str
    accuracy: float
    mean: float
    p95: int
    worst: int
    search_max: int  # most probes outside the endpoints (regress) / all (git)
    seconds: float


def oracle(culprit: int, eps: float, delta: float, rng: random.Random):
    def evaluate(positions):
        out = []
        for p in positions:
            if p >= culprit:
                out.append(Verdict.GOOD if rng.random() < delta else Verdict.BAD)
            else:
                out.append(Verdict.BAD if rng.random() < eps else Verdict.GOOD)
        return out

    return evaluate


def git_bisect_run(n: int, evaluate) -> tuple[int, int]:
    """Plain binary search trusting every verdict, endpoints taken on faith (git bisect run)."""
    lo, hi, probes = 0, n, 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        probes += 1
        if evaluate([mid])[0] is Verdict.BAD:
            hi = mid
        else:
            lo = mid
    return hi, probes


def run_cell(args: tuple[int, float, float, str, int]) -> Cell:
    n, eps, delta, tool, trials = args
    start = time.perf_counter()
    hits, probes, search_probes = 0, [], []
    for trial in range(trials):
        seed = hash((n, round(eps * 1000), round(delta * 1000), trial)) & 0xFFFFFFFF
        culprit = random.Random(seed).randint(1, n)
        noise = random.Random(seed ^ 0x5EED)
        evaluate = oracle(culprit, eps, delta, noise)
        config = TOOLS[tool]
        if config is None:
            answer, used = git_bisect_run(n, evaluate)
            inner = used
        else:
            try:
                result = search(n, evaluate, config)
                answer, used = result.culprit, result.probes
                inner = used - result.endpoint_probes
            except EndpointError as exc:  # counts as a wrong answer, with its probes
                answer, used, inner = None, exc.probes, 0
        hits += answer == culprit
        probes.append(used)
        search_probes.append(inner)
    probes.sort()
    return Cell(
        n=n,
        eps=eps,
        delta=delta,
        tool=tool,
        accuracy=hits / trials,
        mean=sum(probes) / trials,
        p95=probes[math.ceil(0.95 * trials) - 1],
        worst=probes[-1],
        search_max=max(search_probes),
        seconds=time.perf_counter() - start,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--sizes", default="16,128,1024,8192")
    parser.add_argument("--eps", default="0,0.05,0.1,0.2,0.3")
    parser.add_argument(
        "--two-sided", type=float, default=0.1, help="eps = delta for the extra case"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", default=None, help="also write the cells as JSON here")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    cases = [(n, float(e), 0.0) for n in sizes for e in args.eps.split(",")]
    if args.two_sided:
        cases += [(n, args.two_sided, args.two_sided) for n in sizes]
    jobs = []
    for n, eps, delta in cases:
        for tool in TOOLS:
            if tool.endswith("--false-pass") and delta == 0:
                continue
            jobs.append((n, eps, delta, tool, args.trials))
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        cells = list(pool.map(run_cell, jobs))
    print(
        f"{args.trials} trials per row, {time.perf_counter() - start:.0f}s on {args.workers} workers\n"
    )
    print(
        "| N | false-fail | false-pass | tool | accuracy | mean probes | p95 | max | "
        "max search probes | ceil(log2 N)+1 | 3 log2 N |"
    )
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for c in cells:
        print(
            f"| {c.n} | {c.eps:g} | {c.delta:g} | {c.tool} | {100 * c.accuracy:.1f}% | "
            f"{c.mean:.1f} | {c.p95} | {c.worst} | {c.search_max} | "
            f"{math.ceil(math.log2(c.n)) + 1} | {3 * math.log2(c.n):.0f} |"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([c.__dict__ for c in cells], fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
