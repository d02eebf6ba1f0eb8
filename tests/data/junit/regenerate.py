"""Regenerate the JUnit XML in this directory by really running pytest on ./sources.

    python tests/data/junit/regenerate.py

Outputs (committed; tests read them, never regenerate them):
    baseline/H200-PyTorch-1/results.xml   the GPU sample, REGRESS_SAMPLE_RUN=baseline
    current/H200-PyTorch-1/results.xml    the GPU sample, REGRESS_SAMPLE_RUN=current
    current/CPU-Unit-1.xml                the CPU sample, suite named via junit_suite_name
    malformed/truncated.xml               current/CPU-Unit-1.xml cut in half (a crashed node)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(source: str, out: Path, *extra: str, sample_run: str = "current") -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "REGRESS_SAMPLE_RUN": sample_run}
    env.pop("PYTEST_ADDOPTS", None)
    argv = [sys.executable, "-m", "pytest", source, "-q", "-p", "no:cacheprovider"]
    argv += ["-o", "addopts=", "--rootdir", str(HERE / "sources"), f"--junit-xml={out}", *extra]
    subprocess.run(argv, cwd=HERE / "sources", env=env, check=False)


def main() -> None:
    run("sample_gpu.py", HERE / "baseline/H200-PyTorch-1/results.xml", sample_run="baseline")
    run("sample_gpu.py", HERE / "current/H200-PyTorch-1/results.xml")
    run("sample_unit.py", HERE / "current/CPU-Unit-1.xml", "-o", "junit_suite_name=CPU-Unit-1")
    data = (HERE / "current/CPU-Unit-1.xml").read_bytes()
    (HERE / "malformed").mkdir(exist_ok=True)
    (HERE / "malformed/truncated.xml").write_bytes(data[: len(data) // 2])


if __name__ == "__main__":
    main()
