"""The README's timings, measured the way a newcomer meets them: whole commands, several runs, load.

    python benchmarks/readme_timings.py                      # everything, 3 runs each (suite: 1)
    python benchmarks/readme_timings.py --only demo,accept --repeats 5

Times ``regress demo``, ``regress demo --trend``, the README's ``regress accept --defect
stale_req_idx`` command and the README's test command (``python -m pytest -n 2 -q``), each as a
child process from a fresh interpreter, and records around every run the machine's load average
(``os.getloadavg``: 1, 5 and 15 minutes) and CPU count, so a range can be quoted with the load it
was taken at instead of an idle machine's best case. The suite's pytest summary line (passed,
skipped) is recorded too: the README quotes no test count, which changes with every test added.

Writes ``benchmarks/results/readme_timings.json`` and prints a markdown table: min-max wall
seconds, the exit codes, and the 1-minute load range over the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "readme_timings.json"
REGRESS = [sys.executable, "-m", "regress"]

#: name -> (argv, the exit code the README promises)
COMMANDS: dict[str, tuple[list[str], int]] = {
    "demo": ([*REGRESS, "demo"], 0),
    "demo --trend": ([*REGRESS, "demo", "--trend"], 0),
    "accept --defect": (
        [
            *REGRESS,
            "accept",
            "--engine",
            "reference",
            "--batch-sizes",
            "1,8",
            "--max-draft-len",
            "4",
            "--defect",
            "stale_req_idx",
        ],
        1,  # the planted regression is found
    ),
    "suite": ([sys.executable, "-m", "pytest", "-n", "2", "-q", "-p", "no:cacheprovider"], 0),
}
_SHORT = {"demo": "demo", "trend": "demo --trend", "accept": "accept --defect", "suite": "suite"}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _tests(output: str) -> dict[str, int]:
    """``{"passed": N, "skipped": M, ...}`` from pytest's last summary line."""
    lines = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    if not lines:
        return {}
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", lines[-1])}


def run_once(name: str) -> dict:
    argv, expected = COMMANDS[name]
    env = {**os.environ, "REGRESS_DEFECTS": ""}
    before = _load()
    start = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    record = {
        "command": name,
        "argv": argv[len(REGRESS) :] if argv[: len(REGRESS)] == REGRESS else argv[1:],
        "seconds": round(seconds, 1),
        "exit_code": done.returncode,
        "expected_exit_code": expected,
        "load_before": before,
        "load_after": _load(),
    }
    if name == "suite":
        record["tests"] = _tests(done.stdout)
    if done.returncode != expected:
        record["stderr_tail"] = done.stderr[-2000:]
    return record


def table(runs: list[dict]) -> str:
    rows = [
        "| command | runs | wall (s) | exit | load (1 min) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in COMMANDS:
        mine = [r for r in runs if r["command"] == name]
        if not mine:
            continue
        secs = [r["seconds"] for r in mine]
        loads = [x for r in mine for x in (r["load_before"][0], r["load_after"][0])]
        codes = sorted({r["exit_code"] for r in mine})
        rows.append(
            f"| `{name}` | {len(mine)} | {min(secs):.0f}-{max(secs):.0f} | "
            f"{', '.join(map(str, codes))} | {min(loads):.1f}-{max(loads):.1f} |"
        )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(_SHORT), help="demo,trend,accept,suite")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each command")
    parser.add_argument("--suite-repeats", type=int, default=1, help="runs of the suite")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    chosen = [_SHORT[name.strip()] for name in args.only.split(",") if name.strip()]
    runs = []
    for name in chosen:
        for i in range(args.suite_repeats if name == "suite" else args.repeats):
            record = run_once(name)
            runs.append(record)
            print(
                f"{name} run {i + 1}: {record['seconds']:.1f}s exit {record['exit_code']} "
                f"load {record['load_before'][0]} -> {record['load_after'][0]}",
                file=sys.stderr,
            )
    doc = {
        "schema": 1,
        "machine": {
            "cpus": os.cpu_count(),
            "cpus_available": len(os.sched_getaffinity(0)),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(table(runs))
    bad = [r for r in runs if r["exit_code"] != r["expected_exit_code"]]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
