"""Simulated bisects: regress against plain binary search with git bisect run semantics.

Each trial draws a culprit uniformly from 1..N and answers probes from a noisy oracle: a good commit
fails with probability eps (false fail), a bad one passes with probability delta (false pass,
two-sided case only). Every tool sees the same culprit and its own noise stream derived from the same
seed. Accuracy is the fraction of trials whose answer is the culprit (an error such as "the good
endpoint fails" counts as wrong); probes are all executions, endpoint checks included.

    python benchmarks/bisect_simulation.py                       # the full table (benchmarks/bisect.md)
    python benchmarks/bisect_simulation.py --trials 200 --sizes 1024 --eps 0.1
    python benchmarks/bisect_simulation.py --real --sizes 128 --eps 0.1 --trials 20
    python benchmarks/bisect_simulation.py --parallel 1,2,4,8 --sizes 1024 --eps 0,0.1

``--real`` runs the side-by-side on generated git repositories instead: ``git bisect run`` and
``regress bisect`` (auto and ``--flaky``) with the same flaky probe script, on the same repositories.
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

from git_bisect_run import FLAKY_PROBE, real_git_bisect

from regress.bisect.search import EndpointError, SearchConfig, search
from regress.bisect.verdicts import Verdict

TOOLS = {
    "git bisect run": None,
    "regress (auto)": SearchConfig(mode="auto"),
    # the flaky policy before issue 13: 3 runs per endpoint, culprit and parent verified twice
    "regress --flaky (before: 3 endpoint, 2 verify runs)": SearchConfig(
        mode="flaky", endpoint_runs=3, verify_runs=2
    ),
    "regress --flaky": SearchConfig(mode="flaky"),
    "regress --flaky --false-pass": SearchConfig(mode="flaky", false_pass=True),
}


def capacity(eps: float, delta: float) -> float:
    """Bits one probe run can carry: the Z channel (false fails only) or the symmetric one."""

    def h(p: float) -> float:
        return 0.0 if p in (0.0, 1.0) else -p * math.log2(p) - (1 - p) * math.log2(1 - p)

    if delta == 0:
        return 1.0 if eps == 0 else math.log2(1 + (1 - eps) * eps ** (eps / (1 - eps)))
    if eps == delta:
        return 1 - h(eps)
    raise ValueError("capacity only for one-sided or symmetric noise")


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


def real_side_by_side(n: int, eps: float, trials: int, workdir: str) -> list[dict]:
    """git bisect run against regress on generated repositories with a flaky probe script."""
    from pathlib import Path

    from regress.bisect.session import BisectConfig, run_bisect
    from regress.bisect.synthetic import regression_history

    root = Path(workdir)
    probe = root / "flaky_probe.py"
    root.mkdir(parents=True, exist_ok=True)
    probe.write_text(FLAKY_PROBE)
    rows = {
        tool: {"hits": 0, "probes": [], "seconds": 0.0}
        for tool in ("git bisect run", "regress (auto)", "regress --flaky")
    }
    for trial in range(trials):
        culprit = random.Random(f"real-{n}-{trial}").randint(1, n)
        tag = f"{n}-{eps:g}-{trial}"
        repo = root / f"repo-{tag}"
        shas = regression_history(repo, n, culprit)
        for tool, row in rows.items():
            state = root / f"state-{tag}-{tool.split()[-1]}"
            env = {"FLAKE_STATE": str(state), "FLAKE_SEED": str(trial), "FLAKE_EPS": str(eps)}
            start = time.perf_counter()
            if tool == "git bisect run":
                copy = root / f"gitcopy-{tag}"
                answer = real_git_bisect(repo, copy, shas[0], shas[-1], probe, env)
            else:
                config = BisectConfig(
                    good=shas[0],
                    bad=shas[-1],
                    repo=str(repo),
                    env=env,
                    command=[sys.executable, str(probe)],
                    flaky=tool.endswith("--flaky"),
                    cache_dir=str(root / f"cache-{n}-{trial}-{tool[-5:]}"),
                )
                try:
                    answer = getattr(run_bisect(config).culprit, "sha", None)
                except EndpointError:
                    answer = None
            row["seconds"] += time.perf_counter() - start
            row["hits"] += answer == shas[culprit]
            row["probes"].append(len(state.read_text().split()))
    return [
        {
            "n": n,
            "eps": eps,
            "tool": tool,
            "trials": trials,
            "accuracy": r["hits"] / trials,
            "mean": sum(r["probes"]) / trials,
            "max": max(r["probes"]),
            "seconds": r["seconds"] / trials,
        }
        for tool, r in rows.items()
    ]


def parallel_rounds(n: int, eps: float, trials: int, jobs: int, mode: str) -> dict:
    """Probes and rounds (wall time in probe durations) with ``jobs`` probes per round."""
    hits, probes, rounds = 0, [], []
    for trial in range(trials):
        seed = hash((n, round(eps * 1000), trial, "jobs")) & 0xFFFFFFFF
        culprit = random.Random(seed).randint(1, n)
        count = [0]
        result = search(
            n,
            oracle(culprit, eps, 0.0, random.Random(seed ^ 0x5EED)),
            SearchConfig(mode=mode, jobs=jobs),
            progress=lambda _e, c=count: c.__setitem__(0, c[0] + 1),
        )
        hits += result.culprit == culprit
        probes.append(result.probes)
        rounds.append(count[0])
    return {
        "jobs": jobs,
        "mode": mode,
        "accuracy": hits / trials,
        "probes": sum(probes) / trials,
        "rounds": sum(rounds) / trials,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--sizes", default="16,128,1024,8192")
    parser.add_argument("--eps", default="0,0.05,0.1,0.2,0.3")
    parser.add_argument(
        "--two-sided", type=float, default=0.1, help="eps = delta for the extra case"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-before", action="store_true", help="skip the pre-issue-13 policy")
    parser.add_argument("--json", default=None, help="also write the cells as JSON here")
    parser.add_argument("--real", action="store_true", help="the side-by-side on real repositories")
    parser.add_argument("--parallel", default=None, help="rounds per --jobs value, e.g. 1,2,4,8")
    parser.add_argument("--workdir", default=None, help="--real: where to create the repositories")
    args = parser.parse_args(argv)
    if args.parallel:
        print(f"{args.trials} trials per row\n")
        print("| N | false-fail | mode | --jobs | accuracy | mean probes | mean rounds |")
        print("|---:|---:|---|---:|---:|---:|---:|")
        for n in (int(x) for x in args.sizes.split(",")):
            for eps in (float(x) for x in args.eps.split(",")):
                for jobs in (int(x) for x in args.parallel.split(",")):
                    mode = "flaky" if eps else "auto"
                    r = parallel_rounds(n, eps, args.trials, jobs, mode)
                    print(
                        f"| {n} | {eps:g} | {mode} | {jobs} | {100 * r['accuracy']:.1f}% | "
                        f"{r['probes']:.1f} | {r['rounds']:.1f} |",
                        flush=True,
                    )
        return 0
    if args.real:
        import tempfile

        workdir = args.workdir or tempfile.mkdtemp(prefix="regress-bisect-real-")
        print(f"repositories under {workdir}, {args.trials} trials per row\n")
        print("| N | false-fail | tool | accuracy | mean probe runs | max | mean seconds |")
        print("|---:|---:|---|---:|---:|---:|---:|")
        for n in (int(x) for x in args.sizes.split(",")):
            for eps in (float(x) for x in args.eps.split(",")):
                for r in real_side_by_side(n, eps, args.trials, workdir):
                    print(
                        f"| {r['n']} | {r['eps']:g} | {r['tool']} | {100 * r['accuracy']:.0f}% | "
                        f"{r['mean']:.1f} | {r['max']} | {r['seconds']:.2f} |",
                        flush=True,
                    )
        return 0
    sizes = [int(x) for x in args.sizes.split(",")]
    cases = [(n, float(e), 0.0) for n in sizes for e in args.eps.split(",")]
    if args.two_sided:
        cases += [(n, args.two_sided, args.two_sided) for n in sizes]
    jobs = []
    for n, eps, delta in cases:
        for tool in TOOLS:
            if tool.endswith("--false-pass") and delta == 0:
                continue
            if "before" in tool and args.no_before:
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
        "max search probes | ceil(log2 N)+1 | 3 log2 N | info limit |"
    )
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in cells:
        print(
            f"| {c.n} | {c.eps:g} | {c.delta:g} | {c.tool} | {100 * c.accuracy:.1f}% | "
            f"{c.mean:.1f} | {c.p95} | {c.worst} | {c.search_max} | "
            f"{math.ceil(math.log2(c.n)) + 1} | {3 * math.log2(c.n):.0f} | "
            f"{math.log2(c.n) / capacity(c.eps, c.delta):.1f} |"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([c.__dict__ for c in cells], fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
