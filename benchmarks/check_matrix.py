"""Seconds for ``regress check`` with and without the production matrix, side by side.

    python benchmarks/check_matrix.py                       # the fake matrix tree
    python benchmarks/check_matrix.py --trtllm-src PATH     # also a real tree (copy it first)

Each run is a fresh ``regress check`` process (interpreter, torch import, sandbox, scenarios), as a
CI job or a bisect probe pays it: the scenarios outside the matrix alone (what the default check
ran before the matrix), the default run (those plus the production cells), and ``--matrix full``
(every cell, the matrix scenario only). The machine's load average is printed with the numbers,
since on a shared machine they move with it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from _matrix_trees import build_matrix_tree

from regress.check.catalog import SCENARIOS
from regress.check.production import MATRIX

CLI = [sys.executable, "-c", "from regress.cli import main; main()"]


def runs() -> dict[str, list[str]]:
    before = [f"--scenario={s.name}" for s in SCENARIOS if not s.opt_in and s.name != MATRIX]
    return {
        "without the matrix": before,
        "default (with the matrix)": [],
        "--matrix full": [f"--scenario={MATRIX}", "--matrix=full", "--timeout=600"],
    }


def time_one(src: Path, args: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(
        [*CLI, "check", "--trtllm-src", str(src), "-q", *args], capture_output=True
    )
    return time.perf_counter() - start, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trtllm-src", action="append", default=[], metavar="PATH")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="regress-matrix-bench-") as tmp:
        trees = {"fake matrix tree": build_matrix_tree(Path(tmp))}
        trees.update({src: Path(src) for src in opts.trtllm_src})
        for name, src in trees.items():
            for label, args in runs().items():
                seconds, code = time_one(src, args)
                load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
                print(f"{name}: {label}: {seconds:.1f} s, exit {code} (load {load})", flush=True)


if __name__ == "__main__":
    main()
