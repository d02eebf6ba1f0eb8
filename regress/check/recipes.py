"""The TensorRT-LLM bisect recipes: builds and environment per worktree of a source checkout.

Registry entries (:data:`RECIPES`, declared in ``pyproject.toml`` under ``regress.recipes``),
chosen with ``--recipe NAME``:

* ``trtllm-source``: no build, no binaries; each commit is judged by ``regress check`` on the CPU
  (:func:`regress.check.check.run_check`). "Contracts hold" is good, "a contract is broken"
  bad; a commit that is not a TensorRT-LLM tree with DSA (e.g. before DSA existed) or that the
  check cannot judge (it does not import, exits or hangs while loading, or needs what the sandbox
  fakes) is untestable: git bisect's skip, so the search steps around it.
* ``trtllm`` (overlay) and ``trtllm-precompiled``: Python-only rebuilds. Both historical DSA bugs
  are Python-only, so each worktree gets the compiled libraries of one release wheel instead of a
  C++ build (upstream's ``setup.py`` supports it: ``TRTLLM_USE_PRECOMPILED``). ``precompiled`` runs
  ``TRTLLM_USE_PRECOMPILED=1 pip install -e .`` in the worktree (the wheel named by
  ``TRTLLM_PRECOMPILED_LOCATION``, or the matching release); the editable install is shared by
  every job of one environment, so use it with ``--jobs 1`` or one environment per job. The
  overlay links the compiled files of the installed ``tensorrt_llm`` wheel into the worktree
  (:func:`link_binaries`): no pip, no network, safe in parallel.

The probe runs with ``PYTHONPATH`` = the worktree, so it imports that commit's Python code, and
with ``REGRESS_DSA_ERA`` / ``REGRESS_DSA_MODULE`` / ``REGRESS_DSA_IMPORT`` naming the DSA metadata
of the commit's era as :func:`regress.tree.source.resolve_source_tree` finds it: the one era
rule, so the recipe and ``regress check`` never disagree about a tree. Commits that touch ``cpp/``
need a real rebuild; the recipe warns when the range has any.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from regress.errors import MissingDependencyError, UsageError
from regress.plugins import Option, Plugin
from regress.tree.source import SourceTreeError, UnreadableSourceError, resolve_source_tree

#: Paths whose changes the precompiled binaries cannot follow.
NATIVE_PATHS = ("cpp/",)
REBUILD_HINT = "python3 scripts/build_wheel.py --use_ccache"
#: The ``python -m`` entry point of the recipes' child processes (a CLI module).
CHILD = "regress.cli.child"
_BINARY = re.compile(r"\.so(\.\d+)*$")


def dsa_env(worktree: Path) -> dict[str, str]:
    """``REGRESS_DSA_*`` for the tree at ``worktree``, or nothing when it has no known era.

    Era, module file (relative to the worktree) and import name, as ``regress check`` sees them.
    """
    try:
        tree = resolve_source_tree(worktree)
    except (SourceTreeError, UnreadableSourceError):
        return {}
    file = tree.dsa_metadata.file.relative_to(tree.package_dir.parent)
    return {
        "REGRESS_DSA_ERA": tree.era.name,
        "REGRESS_DSA_MODULE": file.as_posix(),
        "REGRESS_DSA_IMPORT": tree.dsa_metadata.module,
    }


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

    Raises:
        UsageError: ``target`` is not a directory (not run in a TensorRT-LLM worktree).
    """
    if not target.is_dir():
        raise UsageError(f"{target} is not a directory: run in a TensorRT-LLM worktree")
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


def check_repo(repo: Path, revisions: Sequence[str], recipe: str) -> None:
    """Refuse a repository with no ``tensorrt_llm/`` package at any of ``revisions``.

    Pointed at another repository, every commit was a skip: four probe runs, then an indirect
    "cannot test the endpoints". One ``git cat-file`` per endpoint says it before any run.
    """
    from regress.bisect.git import git

    for rev in revisions:
        found = git(["cat-file", "-e", f"{rev}:tensorrt_llm"], cwd=repo, check=False)
        if found.returncode == 0:
            return
    raise UsageError(
        f"--recipe {recipe}: {repo} has no tensorrt_llm/ package at --good or --bad, so it is "
        "not a TensorRT-LLM checkout; point --repo at one, or drop --recipe"
    )


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
    native_paths: tuple[str, ...] = NATIVE_PATHS

    def __post_init__(self) -> None:
        if self.mode not in ("overlay", "precompiled"):
            raise UsageError(
                f"unknown TensorRT-LLM recipe mode {self.mode!r}: overlay or precompiled"
            )

    def build_command(self) -> str:
        py = shlex.quote(self.python)
        if self.mode == "precompiled":
            return f"{py} -m pip install --no-deps -e ."
        source = shlex.quote(str(installed_package()))
        return f"{py} -m {CHILD} link-binaries --from {source}"

    def command(self) -> list[str]:
        return []

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
        env.update(dsa_env(worktree))
        return env

    def config(self) -> dict[str, str | None]:
        return {"recipe": "trtllm", "mode": self.mode, "wheel": self.wheel}

    def check_repo(self, repo: Path, revisions: Sequence[str]) -> None:
        name = "trtllm-precompiled" if self.mode == "precompiled" else "trtllm"
        check_repo(repo, revisions, name)

    def native_warning(self, touching: Sequence[str]) -> str | None:
        return native_warning(touching)


def known_digest(path: Path) -> str:
    """The sha256 of the known-findings file at ``path``, once it parsed (a bad line raises
    :class:`~regress.check.known.KnownFileError`: exit 2 before any probe).

    One bisect builds its recipe more than once (the config's validation, the preflight, the
    plan), so each version of a file is parsed once per process.
    """
    try:
        data = path.read_bytes()
    except OSError:
        from regress.check.known import load_known

        load_known(path)  # raises KnownFileError, naming why the file cannot be read
        raise
    return _parsed_known(path, data)


@functools.lru_cache(maxsize=8)
def _parsed_known(path: Path, data: bytes) -> str:
    from regress.check.catalog import scenario_names
    from regress.check.known import load_known

    load_known(path, scenario_names())
    return hashlib.sha256(data).hexdigest()


class SourceRecipe:
    """No build, no binaries; the default probe is ``regress check`` in the worktree.

    Args:
        python: the interpreter of the probe.
        known: a known-findings file (``regress check --known``): a commit whose only findings
            it lists is good. Read now, so a bad line is exit 2 before any probe; the probe
            (run in each worktree) gets its absolute path.
    """

    #: Native code does not matter to a source-only check: no rebuild warning.
    native_paths: tuple[str, ...] = ()

    def __init__(self, python: str = sys.executable, known: str | Path | None = None) -> None:
        self.python = python
        self.known = Path(known).resolve() if known else None
        self._known_sha = known_digest(self.known) if self.known is not None else ""

    def build_command(self) -> None:
        return None

    def command(self) -> list[str]:
        known = ["--known", str(self.known)] if self.known else []
        return [self.python, "-m", CHILD, "trtllm-source-probe", ".", *known]

    def env(self, sha: str, worktree: Path) -> dict[str, str]:
        return {}

    def config(self) -> dict[str, str]:
        # the file's contents change verdicts: a stored verdict is reused only for the same list
        known = {"known": str(self.known), "known_sha256": self._known_sha} if self.known else {}
        return {"recipe": "trtllm-source", **known}

    def check_repo(self, repo: Path, revisions: Sequence[str]) -> None:
        check_repo(repo, revisions, "trtllm-source")

    def native_warning(self, touching: Sequence[str]) -> str | None:
        return None


def probe_exit_code(
    path: Path,
    scenarios: Sequence[str] | None = None,
    timeout: float | None = None,
    known: Path | str | None = None,
) -> tuple[int, list[str]]:
    """One ``trtllm-source`` probe: ``regress check`` of ``path`` as a git-bisect exit code.

    The check runs in a child process (:mod:`regress.check.isolation`), so a commit whose code
    exits or hangs while loading is a gap (skip), never a good or bad verdict. Findings the
    ``known`` file lists are not bad (``regress check --known``).

    Returns:
        The exit code (:data:`regress.check.status.CODES`: 0 good, 1 bad, 125 untestable) and
        the check's report lines.
    """
    from regress.check.catalog import scenario_names
    from regress.check.isolation import DEFAULT_TIMEOUT_S, run_check_isolated
    from regress.check.known import load_known
    from regress.check.status import bisect_code

    listed = load_known(known, scenario_names()) if known else None
    report = run_check_isolated(path, scenarios=scenarios, timeout=timeout or DEFAULT_TIMEOUT_S)
    if listed is not None:
        report.apply_known(listed)
    return bisect_code(report.status), report.lines()


#: The recipes' registry entries, declared under the ``regress.recipes`` entry-point group.
RECIPES = (
    Plugin(
        "trtllm",
        "TensorRT-LLM, Python-only: the installed wheel's compiled files linked into each "
        "worktree; the DSA module path per era in the probe's environment",
        lambda config: TrtllmRecipe(mode="overlay"),
    ),
    Plugin(
        "trtllm-precompiled",
        "TensorRT-LLM, Python-only: TRTLLM_USE_PRECOMPILED=1 pip install -e . per worktree "
        "(use --jobs 1)",
        lambda config: TrtllmRecipe(mode="precompiled", wheel=config.options.get("wheel")),
        (Option("wheel", "--wheel", "TRTLLM_PRECOMPILED_LOCATION.", metavar="WHEEL"),),
    ),
    Plugin(
        "trtllm-source",
        "TensorRT-LLM, no build: each commit judged by `regress check` on the CPU (the probe "
        "command is supplied)",
        lambda config: SourceRecipe(known=config.options.get("known")),
        (
            Option(
                "known",
                "--known",
                "known findings (regress check --known); a commit whose only findings are "
                "listed is good.",
                metavar="FILE",
            ),
        ),
    ),
)
