"""Run a callback right after a module is imported, without importing it ourselves.

How the sentinel hook reaches TensorRT-LLM's DSA metadata class without importing
``tensorrt_llm`` (a checkout at an old commit may not even import): a meta-path finder wraps the
loader of the watched modules. Standard library only, so it is safe in MPI worker initializers.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Iterable
from typing import Any


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Runs a callback right after one of the watched modules has executed."""

    def __init__(self, names: Iterable[str], callback: Callable[[Any], None]) -> None:
        self.names = set(names)
        self.callback = callback

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.names:
            return None
        others = [f for f in sys.meta_path if f is not self]
        for finder in others:
            spec = (
                finder.find_spec(fullname, path, target) if hasattr(finder, "find_spec") else None
            )
            if spec is not None and spec.loader is not None:
                spec.loader = _CallbackLoader(spec.loader, self.callback)
                return spec
        return None


class _CallbackLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, callback: Callable[[Any], None]) -> None:
        self.loader = loader
        self.callback = callback

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.loader.exec_module(module)
        self.callback(module)

    def __getattr__(self, name: str) -> Any:
        # is_package, get_resource_reader, ...: whatever else importlib asks the real loader.
        return getattr(self.loader, name)


def when_imported(names: Iterable[str], callback: Callable[[Any], None]) -> Callable[[], None]:
    """Call ``callback(module)`` for each watched module: now if imported, else once it is.

    Returns the undo (removes the import hook).
    """
    names = tuple(names)
    for name in names:
        if name in sys.modules:
            callback(sys.modules[name])
    finder = _PostImportFinder(names, callback)
    sys.meta_path.insert(0, finder)

    def undo() -> None:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)

    return undo
