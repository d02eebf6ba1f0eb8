"""The TensorRT-LLM recipe: Python-only rebuilds per worktree and the DSA module path per era.

A TensorRT-LLM bisect stays fast because both historical DSA bugs are Python-only: each worktree
gets the compiled libraries of one release wheel instead of a C++ build. Two ways, both from
``../shared/trtllm-facts.md`` ("Python-only rebuilds"):

* ``precompiled``: ``TRTLLM_USE_PRECOMPILED=1 pip install -e .`` in the worktree extracts the
  binaries of the wheel named by ``TRTLLM_PRECOMPILED_LOCATION`` (or the matching release) into the
  source tree. Slow-ish (pip), and the editable install is shared by every job of one environment,
  so use it with ``--jobs 1`` or one environment per job.
* ``overlay`` (default): link the compiled files of the already installed ``tensorrt_llm`` wheel
  into the worktree's Python tree (``python -m regress.bisect.trtllm link-binaries``). No pip, no
  network, safe in parallel.

Either way the probe runs with ``PYTHONPATH`` = the worktree, so it imports that commit's Python
code, and with ``REGRESS_DSA_MODULE`` / ``REGRESS_DSA_IMPORT`` naming the DSA metadata module of
the commit's era (the module moved twice). Commits that touch ``cpp/`` need a real rebuild; the
recipe warns when the range has any.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from regress.errors import MissingDependencyError, UsageError
from regress.trtllm.paths import ERAS as LAYOUT_ERAS

#: DSA metadata module per era, newest first, as repository paths: a view of the one era table,
#: ``regress.trtllm.paths.ERAS``.
ERAS: tuple[tuple[str, str], ...] = tuple(
    (era.name, f"tensorrt_llm/{era.dsa_metadata}") for era in LAYOUT_ERAS
)
#: Paths whose changes the precompiled binaries cannot follow.
NATIVE_PATHS = ("cpp/",)
REBUILD_HINT = "python3 scripts/build_wheel.py --use_ccache"
_BINARY = re.compile(r"\.so(\.\d+)*$")


def dsa_module(exists: Callable[[str], bool]) -> tuple[str, str] | None:
    """The era and path of the DSA metadata module, given a path-exists predicate for a commit."""
    for era, path in ERAS:
        if exists(path):
            return era, path
    return None


def import_name(path: str) -> str:
    """``a/b/c.py`` -> ``a.b.c``, the name a probe imports."""
    return path.removesuffix(".py").replace("/", ".")


def native_warning(touching: Sequence[str]) -> str | None:
    """The warning for commits in the range that change native code, or ``None``.

    Args:
        touching: one line per commit that changes a path in :data:`NATIVE_PATHS`.
    """
    if not touching:
        return None
    sample = "; ".join(touching[:3]) + ("; ..." if len(touching) > 3 else "")
    return (
        f"{len(touching)} commit(s) in the range touch {', '.join(NATIVE_PATHS)} ({sample}): the "
        "precompiled binaries may not match them, so probes there can fail or mislead; if they "
        f"matter, use --build '{REBUILD_HINT}' for those commits (slow) or narrow the range"
    )


def installed_package() -> Path:
    """Directory of the installed ``tensorrt_llm`` package, found without importing it."""
    spec = importlib.util.find_spec("tensorrt_llm")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            "the TensorRT-LLM overlay recipe links the binaries of an installed tensorrt_llm "
            "wheel, and none is importable: pip install tensorrt_llm (the release closest to the "
            "range), or use --recipe trtllm-precompiled"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def link_binaries(installed: Path, target: Path) -> list[Path]:
    """Symlink every compiled file of ``installed`` into ``target`` where it is missing.

    Compiled files are shared objects (``*.so``, ``*.so.N``) and everything under ``libs/`` or
    ``bin/``; Python sources are left alone, so the worktree's own code is what runs.
    """
    made = []
    for src in sorted(installed.rglob("*")):
        rel = src.relative_to(installed)
        if src.is_dir() or "__pycache__" in rel.parts:
            continue
        if not (_BINARY.search(src.name) or {"libs", "bin"} & set(rel.parts[:-1])):
            continue
        dest = target / rel
        if dest.exists() or dest.is_symlink():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.symlink_to(src)
        made.append(dest)
    return made


@dataclass
class TrtllmRecipe:
    """Build command and per-commit environment for bisecting a TensorRT-LLM checkout.

    Args:
        mode: ``"overlay"`` or ``"precompiled"`` (see the module docstring).
        wheel: ``TRTLLM_PRECOMPILED_LOCATION`` for the precompiled mode (a wheel path or URL).
        python: the interpreter that runs the build steps.
    """

    mode: str = "overlay"
    wheel: str | None = None
    python: str = sys.executable

    def __post_init__(self) -> None:
        if self.mode not in ("overlay", "precompiled"):
            raise UsageError(
                f"unknown TensorRT-LLM recipe mode {self.mode!r}: overlay or precompiled"
            )

    def build_command(self) -> str:
        py = shlex.quote(self.python)
        if self.mode == "precompiled":
            return f"{py} -m pip install --no-deps -e ."
        return f"{py} -m regress.bisect.trtllm link-binaries --from {shlex.quote(str(installed_package()))}"

    def env(self, sha: str, worktree: Path) -> dict[str, str]:
        env = {
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(worktree), os.environ.get("PYTHONPATH")])
            )
        }
        if self.mode == "precompiled":
            env["TRTLLM_USE_PRECOMPILED"] = "1"
            if self.wheel:
                env["TRTLLM_PRECOMPILED_LOCATION"] = self.wheel
        found = dsa_module(lambda p: (worktree / p).exists())
        if found:
            era, path = found
            env.update(
                REGRESS_DSA_ERA=era, REGRESS_DSA_MODULE=path, REGRESS_DSA_IMPORT=import_name(path)
            )
        return env

    def config(self) -> dict[str, str | None]:
        return {"recipe": "trtllm", "mode": self.mode, "wheel": self.wheel}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m regress.bisect.trtllm link-binaries --from DIR``: the overlay build step."""
    parser = argparse.ArgumentParser(prog="python -m regress.bisect.trtllm")
    sub = parser.add_subparsers(dest="command", required=True)
    link = sub.add_parser(
        "link-binaries", help="link an installed wheel's binaries into ./tensorrt_llm"
    )
    link.add_argument("--from", dest="source", type=Path, required=True)
    link.add_argument("--to", dest="target", type=Path, default=Path("tensorrt_llm"))
    args = parser.parse_args(argv)
    if not args.target.is_dir():
        print(f"{args.target} is not a directory: run in a TensorRT-LLM worktree", file=sys.stderr)
        return 2
    made = link_binaries(args.source, args.target)
    print(f"linked {len(made)} binary files from {args.source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
