"""What the child process costs ``regress check``: seconds per check, in a child and in-process.

    python benchmarks/check_isolation.py [--repeats 5]

Per fake tree (eras A, B, C, pre- and post-fix): ``regress check`` as shipped (the parent, then
the child that imports torch and runs the tree), the same check in one process
(``run_check`` called directly: what ``regress check`` did before the child), and the floor
``python -c "import torch"``. All fresh processes, as a bisect probe pays them. Results:
``benchmarks/upstream.md`` ("The child process").
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from _upstream_trees import build_tree

IN_PROCESS = (
    "import sys; from regress.check.check import run_check; "
    "sys.exit(run_check(sys.argv[1]).exit_code)"
)


def timed(argv: list[str], repeats: int) -> tuple[list[float], int]:
    times, code = [], -1
    for _ in range(repeats):
        start = time.perf_counter()
        code = subprocess.run(argv, capture_output=True).returncode
        times.append(time.perf_counter() - start)
    return times, code


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    torch_times, _ = timed([sys.executable, "-c", "import torch"], args.repeats)
    print(f"import torch alone: median {statistics.median(torch_times):.2f} s")
    print("| tree | exit | child: median (min-max) s | in-process: median (min-max) s |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for era in "ABC":
            for fix in ("pre", "post"):
                src = str(build_tree(Path(tmp) / f"{era}-{fix}", era, fix, guard=True))
                cli = [sys.executable, "-m", "regress", "check", "--trtllm-src", src, "-q"]
                child, code = timed(cli, args.repeats)
                inproc, code2 = timed([sys.executable, "-c", IN_PROCESS, src], args.repeats)
                assert code == code2, (era, fix, code, code2)
                print(f"| fake era {era} {fix}-fix | {code} | {_cell(child)} | {_cell(inproc)} |")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


def _cell(times: list[float]) -> str:
    return f"{statistics.median(times):.2f} ({min(times):.2f}-{max(times):.2f})"


if __name__ == "__main__":
    raise SystemExit(main())
