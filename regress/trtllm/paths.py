"""The installed ``tensorrt_llm``: its layout, found without importing it, and loading a class.

The layout itself (eras, where each class lives) is read from files by
:func:`regress.tree.source.resolve_source_tree`, the one era rule; this module only finds the
installed package directory to read, and imports a resolved class where the engine is about to run.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path

from regress.errors import MissingDependencyError
from regress.tree.source import Location, SourceTree, resolve_source_tree

FindSpec = Callable[[str], object]


def resolve_installed(find_spec: FindSpec | None = None) -> SourceTree:
    """Resolve the layout of the importable ``tensorrt_llm`` without importing it.

    ``importlib.util.find_spec`` on a top-level name locates the package without executing it, so
    this is safe at pytest collection time and on a machine whose ``tensorrt_llm`` cannot load.

    Raises:
        MissingDependencyError: when ``tensorrt_llm`` is not importable.
        SourceTreeError: when it is, but no known layout matches.
    """
    spec = (find_spec or importlib.util.find_spec)("tensorrt_llm")
    locations = list(getattr(spec, "submodule_search_locations", None) or [])
    if spec is None or not locations:
        raise MissingDependencyError(
            "The TensorRT-LLM module paths are resolved from the installed package, but "
            "'tensorrt_llm' is not importable. Install it (pip install tensorrt_llm, or "
            "TRTLLM_USE_PRECOMPILED=1 pip install -e <checkout>) or pass a source tree."
        )
    return resolve_source_tree(Path(locations[0]))


def resolve(source: Path | str | None = None, *, find_spec: FindSpec | None = None) -> SourceTree:
    """Resolve a given source tree, or the installed package when ``source`` is None."""
    if source is not None:
        return resolve_source_tree(source)
    return resolve_installed(find_spec)


def load(location: Location) -> object:
    """Import the module of ``location`` and return the class (or method) it names.

    This is the one place that imports ``tensorrt_llm`` for a resolved layout; call it only where
    the engine is about to run.
    """
    try:
        obj: object = importlib.import_module(location.module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"Cannot import {location.module} (resolved from {location.file}): {exc}. Is the "
            "tree importable (built, or installed with TRTLLM_USE_PRECOMPILED=1)?"
        ) from exc
    for part in location.qualname.split("."):
        obj = getattr(obj, part)
    return obj
