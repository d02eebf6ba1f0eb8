"""Real side by side on merge-heavy histories: ``git bisect run`` against ``regress bisect run``.

Each trial writes a fresh history (:func:`regress.bisect.synthetic.merge_history`: topic branches
of 1-6 commits forked from recent mainline commits and merged back ``--no-ff`` at random, the
culprit inside a branch) and runs the same probe script under every tool: it exits 1 when the bug
is there and, on good commits, exits 1 anyway with probability eps. git bisect runs in a clone
(``git bisect start HEAD ROOT && git bisect run python probe.py``); regress runs ``run_bisect``
(what ``regress bisect run`` calls, no ``--first-parent``) on the original. Runs are counted by the
probe script itself. ``--history interleaved`` writes
:func:`regress.bisect.synthetic.interleaved_history` instead: branches developed side by side, so
commit dates and the grouping of ``git rev-list --topo-order`` disagree.

    python benchmarks/bisect_merges.py --trials 30 --steps 40 --eps 0,0.1
    python benchmarks/bisect_merges.py --trials 30 --steps 80 --eps 0 --history interleaved
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from git_bisect_run import FLAKY_PROBE, real_git_bisect

from regress.bisect.search import EndpointError
from regress.bisect.session import BisectConfig, run_bisect
from regress.bisect.synthetic import interleaved_history, merge_history

TOOLS = {
    "git bisect run": None,
    "regress (auto)": {},
    "regress --no-confirm": {"confirm": False},
    "regress --flaky": {"flaky": True},
}


def one(root: Path, tool: str, repo: Path, shas: list[str], env: dict) -> tuple[str | None, int]:
    state = Path(env["FLAKE_STATE"])
    if tool == "git bisect run":
        copy = root / f"clone-{state.name}"
        answer = real_git_bisect(repo, copy, shas[0], shas[-1], root / "probe.py", env)
    else:
        config = BisectConfig(
            good=shas[0],
            bad=shas[-1],
            repo=str(repo),
            env=env,
            command=[sys.executable, str(root / "probe.py")],
            cache_dir=str(root / f"cache-{state.name}"),
            **TOOLS[tool],
        )
        try:
            answer = getattr(run_bisect(config).culprit, "sha", None)
        except EndpointError:
            answer = None
    return answer, len(state.read_text().split()) if state.exists() else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--steps", type=int, default=40, help="mainline steps per history")
    parser.add_argument("--eps", default="0,0.1")
    parser.add_argument("--history", choices=("merge", "interleaved"), default="merge")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    root = Path(args.workdir or tempfile.mkdtemp(prefix="regress-bisect-merges-"))
    root.mkdir(parents=True, exist_ok=True)
    (root / "probe.py").write_text(FLAKY_PROBE)
    print(f"histories under {root}, {args.trials} trials per row\n")
    print(
        "| false-fail | tool | right | same as git | mean runs | max | mean(runs - git) | "
        "max(runs - git) | commits (mean) | merges (mean) | mean s |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for eps in (float(x) for x in args.eps.split(",")):
        rows = {t: {"right": 0, "same": 0, "runs": [], "extra": [], "s": 0.0} for t in TOOLS}
        commits = merges = 0
        for trial in range(args.trials):
            repo = root / f"repo-{eps:g}-{trial}"
            write = merge_history if args.history == "merge" else interleaved_history
            shas, culprit = write(repo, args.steps, seed=trial)
            commits += len(shas) - 1
            merges += sum(s.startswith("Merge") for s in _subjects(repo))
            git_answer, git_runs = None, 0
            for tool, row in rows.items():
                env = {
                    "FLAKE_STATE": str(root / f"state-{eps:g}-{trial}-{tool.split()[-1]}"),
                    "FLAKE_SEED": str(trial),
                    "FLAKE_EPS": str(eps),
                }
                start = time.perf_counter()
                answer, runs = one(root, tool, repo, shas, env)
                row["s"] += time.perf_counter() - start
                if tool == "git bisect run":
                    git_answer, git_runs = answer, runs
                row["right"] += answer == culprit
                row["same"] += answer == git_answer
                row["runs"].append(runs)
                row["extra"].append(runs - git_runs)
        t = args.trials
        for tool, r in rows.items():
            print(
                f"| {eps:g} | {tool} | {100 * r['right'] / t:.0f}% | {100 * r['same'] / t:.0f}% | "
                f"{sum(r['runs']) / t:.1f} | {max(r['runs'])} | {sum(r['extra']) / t:+.1f} | "
                f"{max(r['extra']):+d} | "
                f"{commits / t:.0f} | {merges / t:.0f} | {r['s'] / t:.2f} |",
                flush=True,
            )
    return 0


def _subjects(repo: Path) -> list[str]:
    from regress.bisect.git import git

    return git(["log", "--format=%s", "main"], cwd=repo).stdout.splitlines()


if __name__ == "__main__":
    sys.exit(main())
