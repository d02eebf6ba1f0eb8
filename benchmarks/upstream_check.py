"""Seconds per ``regress check`` and per ``trtllm-source`` bisect probe, on this machine.

    python benchmarks/upstream_check.py                      # fake trees (eras A, B, C) + a bisect
    python benchmarks/upstream_check.py --trtllm-src PATH    # also a real TensorRT-LLM tree

Each ``regress check`` runs as a fresh process (what a bisect probe pays: interpreter, torch
import, sandbox, every scenario). Fake caller trees (era C with the shape of upstream's one-model
worker, ``tests/unit/_upstream_trees.caller_files``) make the draft-loop scenarios run the tree's
worker instead of regress's model. The bisect runs ``regress bisect run --find-fix --recipe
trtllm-source`` over a generated 33-commit history of fake caller trees whose fix is commit 21
(``--bisect-trees plain``: the era-B trees without a worker), and reports wall time divided by
probe runs. Results: ``benchmarks/upstream.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from _upstream_trees import build_caller_tree, build_tree, caller_files, tree_files

from regress.bisect.synthetic import write_history

CLI = [sys.executable, "-c", "from regress.cli import main; main()"]


def time_check(src: Path, repeats: int) -> tuple[list[float], int]:
    times, code = [], -1
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run([*CLI, "check", "--trtllm-src", str(src), "-q"], capture_output=True)
        times.append(time.perf_counter() - start)
        code = done.returncode
    return times, code


def read_tree(src: Path) -> dict[str, str]:
    """Every file of a tree on disk, by path (a real tree read into /tmp, bisected in /tmp)."""
    return {str(f.relative_to(src)): f.read_text() for f in sorted(src.rglob("*.py"))}


def time_bisect(
    root: Path, n: int = 33, fix: int = 21, trees: str = "caller", real: list[str] | None = None
) -> dict:
    commits = []
    pre, post = (read_tree(Path(r)) for r in real) if real else (None, None)
    for i in range(n):
        state = "post" if i >= fix else "pre"
        if real:
            files = dict(post if state == "post" else pre)
        elif trees == "caller":
            files = caller_files("C", state)
        else:
            files = tree_files("B", state)
        files["notes.txt"] = f"{i}\n"
        commits.append(files)
    shas = write_history(root / "repo", commits)
    start = time.perf_counter()
    done = subprocess.run(
        [*CLI, "bisect", "run", "--repo", str(root / "repo"), "--good", shas[-1], "--bad",
         shas[0], "--find-fix", "--recipe", "trtllm-source", "--cache-dir", str(root / "cache"),
         "--json", "-", "-q"],
        capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - start
    if not done.stdout.strip():
        raise SystemExit(f"bisect failed (exit {done.returncode}): {done.stderr[-2000:]}")
    result = json.loads(done.stdout)
    return {
        "commits": n,
        "found": result["culprit"]["sha"] == shas[fix],
        "probes": result["probes"],
        "wall_s": wall,
        "s_per_probe": wall / max(result["probes"], 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trtllm-src", action="append", default=[])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bisect-trees", choices=["caller", "plain"], default="caller")
    parser.add_argument(
        "--real-bisect", nargs=2, metavar=("PRE", "POST"), help="bisect a history of two real trees"
    )
    parser.add_argument("--only-real", action="store_true", help="skip the fake trees")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for era in "" if args.only_real else "ABC":
            for fix in ("pre", "post"):
                src = build_tree(Path(tmp) / f"{era}-{fix}", era, fix, guard=True)
                times, code = time_check(src, args.repeats)
                rows.append((f"fake era {era} {fix}-fix", code, times))
        for fix in () if args.only_real else ("pre", "post"):
            src = build_caller_tree(Path(tmp) / f"caller-{fix}", "C", fix)
            times, code = time_check(src, args.repeats)
            rows.append((f"fake caller tree (era C) {fix}-fix", code, times))
        for src in args.trtllm_src:
            times, code = time_check(Path(src), args.repeats)
            rows.append((f"real {Path(src).name}", code, times))
        print("| tree | exit | median s | min s | max s |")
        print("|---|---|---|---|---|")
        for name, code, times in rows:
            med = statistics.median(times)
            print(f"| {name} | {code} | {med:.2f} | {min(times):.2f} | {max(times):.2f} |")
        print(flush=True)
        bisect = time_bisect(Path(tmp), trees=args.bisect_trees, real=args.real_bisect)
    kind = "real (PRE/POST)" if args.real_bisect else args.bisect_trees
    print(
        f"bisect --find-fix over {bisect['commits']} {kind} trees: "
        f"found={bisect['found']}, "
        f"{bisect['probes']} probes, {bisect['wall_s']:.1f} s wall, "
        f"{bisect['s_per_probe']:.2f} s per probe"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
