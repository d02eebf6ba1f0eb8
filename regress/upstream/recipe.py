"""The ``trtllm-source`` bisect recipe: ``regress check`` in each worktree, no build, on a CPU.

Each probed commit of a TensorRT-LLM clone is checked out as is and judged by
:func:`regress.upstream.check.run_check`. ``regress check`` says "contracts hold" (0) or "a
contract is broken" (1); a commit that is not a TensorRT-LLM tree with DSA (2, e.g. before DSA
existed) or that the check cannot judge (3: it does not import, exits or hangs while loading, or
needs what the sandbox fakes) is untestable and becomes git bisect's skip (125), so the search
steps around it instead of blaming it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

#: ``regress check`` exit code -> git-bisect verdict code.
VERDICT = {0: 0, 1: 1, 2: 125, 3: 125}
SKIP = 125


class SourceRecipe:
    """No build, no binaries; the default probe command is :func:`main` in the worktree."""

    #: Native code does not matter to a source-only check: no rebuild warning.
    warns_on_native = False

    def __init__(self, python: str = sys.executable) -> None:
        self.python = python

    def build_command(self) -> None:
        return None

    def command(self) -> list[str]:
        return [self.python, "-m", "regress.upstream.recipe", "."]

    def env(self, sha: str, worktree: Path) -> dict[str, str]:
        return {}

    def config(self) -> dict[str, str]:
        return {"recipe": "trtllm-source"}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m regress.upstream.recipe [PATH] [--scenario NAME] [--timeout S]``: one probe.

    The check runs in a child process (:mod:`regress.upstream.isolation`), so a commit whose code
    exits or hangs while loading is a gap (skip), never a good or bad verdict.
    """
    from regress.upstream.isolation import DEFAULT_TIMEOUT_S, run_check_isolated

    parser = argparse.ArgumentParser(prog="python -m regress.upstream.recipe")
    parser.add_argument("path", nargs="?", default=".")
    parser.add_argument("--scenario", action="append", default=None)
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S)
    args = parser.parse_args(argv)
    report = run_check_isolated(Path(args.path), scenarios=args.scenario, timeout=args.timeout)
    for line in report.lines():
        print(line, file=sys.stderr)
    return VERDICT.get(report.exit_code, SKIP)


if __name__ == "__main__":
    raise SystemExit(main())
