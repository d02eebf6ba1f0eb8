"""The README's test command timed in wall and CPU seconds, with the machine's load around it.

    python benchmarks/suite_time.py --label after                # the README command, once
    python benchmarks/suite_time.py --label after --repeats 3
    python benchmarks/suite_time.py --label after --per-file tests/unit/test_demo.py ...
    python benchmarks/suite_time.py --label h12 --before main --per-file tests/unit/test_demo.py

Wall time on a shared machine says as much about the neighbours as about the suite, so each run
also records the CPU seconds (user + sys) of the whole pytest process tree (``RUSAGE_CHILDREN``:
every descendant that was waited for, xdist workers and the probes, CLIs and nested pytest runs
the tests start) and the 1-minute load average before and after (``os.getloadavg``).
``--per-file`` times each file alone at ``-n 0`` instead, the unit a change to one file's setup is
judged by. With ``--before REF`` each file is timed on ``REF`` (a temporary worktree, its own
``regress`` first on ``PYTHONPATH``) and then on this tree, back to back: both sides see about the
same load, which on a shared machine moves CPU seconds as much as a small change does.

Runs are added to ``benchmarks/results/suite_time.json`` under their label (``before``/``after``
or a commit; ``suite`` and ``files`` apart), so one file holds both sides; ``benchmarks/suite.md``
quotes them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from readme_timings import COMMANDS, ROOT, _load, _tests

RESULTS = ROOT / "benchmarks" / "results" / "suite_time.json"
#: The README's test command (``readme_timings`` owns it).
SUITE = COMMANDS["suite"][0]
#: One file alone, serial: its own CPU seconds without xdist's workers collecting everything.
PER_FILE = [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider"]


def _children_cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime, usage.ru_stime


def timed(argv: list[str], root: Path = ROOT) -> dict:
    """Run ``argv`` from ``root`` (a checkout, its ``regress`` imported); wall, CPU and load
    around it, and its test counts."""
    env = {**os.environ, "REGRESS_DEFECTS": ""}
    if root != ROOT:  # ahead of the editable install of this tree, for the children too
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    load_before, (user0, sys0) = _load(), _children_cpu()
    start = time.monotonic()
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    user1, sys1 = _children_cpu()
    record = {
        "argv": argv[1:],
        "wall_s": round(wall, 1),
        "cpu_s": round(user1 - user0 + sys1 - sys0, 1),
        "user_s": round(user1 - user0, 1),
        "sys_s": round(sys1 - sys0, 1),
        "load_before": load_before,
        "load_after": _load(),
        "exit_code": done.returncode,
        "tests": _tests(done.stdout),
    }
    if done.returncode != 0:
        record["stdout_tail"] = done.stdout[-2000:]
    return record


def _worktree(ref: str) -> Path:
    """``ref`` checked out (detached) in a new temporary folder; :func:`_drop` removes it."""
    folder = Path(tempfile.mkdtemp(prefix="suite-time-")) / "tree"
    subprocess.run(
        ["git", "worktree", "add", "-q", "--detach", str(folder), ref], cwd=ROOT, check=True
    )
    return folder


def _drop(folder: Path) -> None:
    subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=ROOT, check=False)
    folder.parent.rmdir()


def _save(path: Path, label: str, kind: str, runs: list[dict]) -> None:
    """Replace ``label``'s ``kind`` (``suite`` or ``files``) runs; every other entry stays."""
    doc = json.loads(path.read_text()) if path.exists() else {"schema": 1, "labels": {}}
    doc["labels"].setdefault(label, {})[kind] = {
        "cpus_available": len(os.sched_getaffinity(0)),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "runs": runs,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True, help="where the runs go: before, after, a sha")
    parser.add_argument("--repeats", type=int, default=1, help="runs of the README command")
    parser.add_argument("--per-file", nargs="+", metavar="FILE", help="time these files alone")
    parser.add_argument(
        "--before", metavar="REF", help="with --per-file: time each file on REF first, then here"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.before and not args.per_file:
        parser.error("--before REF compares files: give --per-file FILE ...")
    before = _worktree(args.before) if args.before else None
    sides = [("before", before), ("after", ROOT)] if before else [(None, ROOT)]
    if args.per_file:
        jobs = [(f, [*PER_FILE, f], side) for f in args.per_file for side in sides]
    else:
        jobs = [("suite", SUITE, sides[0])] * args.repeats
    runs = []
    try:
        for name, argv, (side, root) in jobs:
            record = {"what": name, **({"side": side, "ref": args.before} if side else {})}
            record.update(timed(argv, root))
            runs.append(record)
            print(
                f"{name}{f' ({side})' if side else ''}: wall {record['wall_s']:.1f}s "
                f"cpu {record['cpu_s']:.1f}s (user {record['user_s']:.1f} "
                f"sys {record['sys_s']:.1f}) exit {record['exit_code']} "
                f"load {record['load_before'][0]} -> {record['load_after'][0]} {record['tests']}",
                file=sys.stderr,
            )
    finally:
        if before:
            _drop(before)
    _save(args.out, args.label, "files" if args.per_file else "suite", runs)
    return 1 if any(r["exit_code"] != 0 for r in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
