"""Seconds for ``regress check`` with and without the production matrix, side by side.

    python benchmarks/check_matrix.py                             # fake trees, this checkout
    python benchmarks/check_matrix.py --before /tmp/before/bin/python  # and another regress
    python benchmarks/check_matrix.py --trtllm-src PATH           # also a real tree (copy it first)

Each run is a fresh ``regress check`` process (interpreter, torch import, the child, sandbox,
scenarios), as a CI job or a bisect probe pays it: the scenarios outside the matrix alone (what
the default check ran before the matrix), the default run (those plus the production cells), and
``--matrix full`` (every cell, the matrix scenario only). Two fake trees: regress's matrix tree
(``tests/unit/_matrix_trees.py``: every axis, a pure-torch fake kernel) and a caller tree whose
fused kernel is a real ``@triton.jit`` kernel (``_upstream_trees.py``, ``fused="new"``), which
runs in Triton's interpreter in the ``fused=on`` cells where triton is installed.

``--before PYTHON`` runs every command a second time with an interpreter whose ``regress`` is
another version, alternating with this checkout run by run, so both sides see the same
neighbours. An editable install's finder wins over ``PYTHONPATH``, so make one: ``git archive BASE
regress | tar -x -C /tmp/before/src``, ``python -m venv /tmp/before``, and a ``.pth`` file in its
site-packages naming ``/tmp/before/src``, then this checkout's ``.venv/lib/python3.X/site-packages``
(torch, triton, click; its own ``.pth`` files are not read from there). On a shared machine wall time says as
much about them as about regress: each line also gives the CPU seconds (user + sys) of the whole
process tree (``RUSAGE_CHILDREN``) and the 1-minute load average before the run. Results:
``benchmarks/check_matrix.md``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from _matrix_trees import build_matrix_tree
from _upstream_trees import build_caller_tree

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


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_one(src: Path, args: list[str], python: str = sys.executable) -> tuple[float, float, int]:
    """Wall and CPU seconds of one ``regress check`` run by ``python``, and its exit code."""
    cpu, start = _cpu(), time.perf_counter()
    done = subprocess.run(
        [python, *CLI[1:], "check", "--trtllm-src", str(src), "-q", *args], capture_output=True
    )
    return time.perf_counter() - start, _cpu() - cpu, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trtllm-src", action="append", default=[], metavar="PATH")
    parser.add_argument("--before", metavar="PYTHON", help="an interpreter with another regress")
    parser.add_argument("--repeats", type=int, default=3, metavar="N")
    opts = parser.parse_args()
    sides = {"now": sys.executable, **({"before": opts.before} if opts.before else {})}
    with tempfile.TemporaryDirectory(prefix="regress-matrix-bench-") as tmp:
        trees = {
            "fake matrix tree": build_matrix_tree(Path(tmp) / "matrix"),
            "fake caller tree, Triton kernel": build_caller_tree(Path(tmp) / "t", fused="new"),
        }
        trees.update({src: Path(src) for src in opts.trtllm_src})
        for name, src in trees.items():
            for label, args in runs().items():
                seen: dict[str, list[tuple[float, float, float, int]]] = {s: [] for s in sides}
                for _ in range(opts.repeats):
                    for side, python in sides.items():
                        load = os.getloadavg()[0]
                        wall, cpu, code = time_one(src, args, python)
                        seen[side].append((wall, cpu, load, code))
                for side, got in seen.items():
                    wall = statistics.median(g[0] for g in got)
                    cpu = statistics.median(g[1] for g in got)
                    loads = [g[2] for g in got]
                    codes = sorted({g[3] for g in got})
                    print(
                        f"{name}: {label}: {side}: median {wall:.1f} s wall, {cpu:.1f} s CPU "
                        f"(of {len(got)}: wall {min(g[0] for g in got):.1f}-"
                        f"{max(g[0] for g in got):.1f}, CPU {min(g[1] for g in got):.1f}-"
                        f"{max(g[1] for g in got):.1f}), exit {codes}, load "
                        f"{min(loads):.1f}-{max(loads):.1f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
