"""Which line of code last wrote each field of a metadata object: spying on writes, not on names.

A stale field is only half a bug report; the other half is where it was last written (the
``prepare()`` of an older layout) and where a fresh object writes it (the refresh the incremental
path lacks). :class:`WriteLog` records both kinds of write to the objects it watches:

* in-place tensor writes (``copy_``, ``fill_``, ``+=``, slice assignment, ``torch.cumsum(...,
  out=...)`` and every other in-place or ``out=`` operation) through a
  :class:`torch.overrides.TorchFunctionMode`; the written tensor is matched to the fields whose
  storage it shares, so a write through a slice or a view counts for the field;
* attribute rebinds (``self.x = ...``), through the class's ``__setattr__``, patched for the
  duration and restored on exit (the same kind of spying as :class:`regress.dsa.sentinel.Sentinel`,
  which wraps the lifecycle methods on the instance).

The site is the innermost frame that is not torch, the standard library or regress's own spying,
given relative to the first of ``roots`` that holds it.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
#: regress's own frames that are plumbing, never the writer.
_PLUMBING = (
    str(_HERE / "write_log.py"),
    str(_HERE / "sentinel.py"),
    str(_HERE / "fresh.py"),
    str(_HERE.parent / "upstream" / "cuda.py"),
)
_INPLACE_DUNDER = frozenset(
    f"__i{op}__"
    for op in (
        "add",
        "sub",
        "mul",
        "truediv",
        "floordiv",
        "mod",
        "and",
        "or",
        "xor",
        "lshift",
        "rshift",
        "pow",
    )
) | {"__setitem__"}


def _skip_dirs() -> tuple[str, ...]:
    import torch

    dirs = {str(Path(torch.__file__).resolve().parent) + os.sep}
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(str(Path(path).resolve()) + os.sep)
    return tuple(dirs)


def _targets(name: str, args: tuple, kwargs: dict) -> list[Any]:
    """The tensors an operation writes: its ``self`` when in place, its ``out=`` otherwise."""
    import torch

    found: list[Any] = []
    if (
        args
        and isinstance(args[0], torch.Tensor)
        and (name in _INPLACE_DUNDER or (name.endswith("_") and not name.endswith("__")))
    ):
        found.append(args[0])
    out = kwargs.get("out")
    if isinstance(out, torch.Tensor):
        found.append(out)
    elif isinstance(out, (tuple, list)):
        found += [t for t in out if isinstance(t, torch.Tensor)]
    return found


class WriteLog:
    """Records the last writer of every field of the objects it watches.

    Args:
        roots: directories sites are named relative to (the tree first, then regress's own).

    Use as a context manager around the code that writes, after :meth:`watch`-ing the objects::

        log = WriteLog([tree])
        with log:
            log.watch(md)
            md.prepare()
        log.last(md, "req_idx_per_token")  # 'tensorrt_llm/.../metadata.py:512 in prepare()'
    """

    def __init__(self, roots: Iterable[Path | str] = ()) -> None:
        self.roots = [str(Path(r).resolve()) for r in roots]
        self._objects: dict[int, Any] = {}
        self._index: dict[int, dict[int, list[str]]] = {}
        self._sites: dict[int, dict[str, str]] = {}
        self._classes: dict[type, Any] = {}
        self._mode: Any = None
        self._skip: tuple[str, ...] = ()
        self.active = True

    # -- watching -----------------------------------------------------------------------------
    def watch(self, obj: Any) -> Any:
        """Record writes to ``obj`` from now on; returns ``obj``."""
        self._objects[id(obj)] = obj
        self._sites.setdefault(id(obj), {})
        self._index.pop(id(obj), None)
        cls = type(obj)
        if self._mode is not None and cls not in self._classes:
            self._patch(cls)
        return obj

    def last(self, obj: Any, field: str) -> str | None:
        """The site that last wrote ``obj.field``, or None when none was seen."""
        return self._sites.get(id(obj), {}).get(field)

    def sites(self, obj: Any) -> dict[str, str]:
        return dict(self._sites.get(id(obj), {}))

    # -- recording ----------------------------------------------------------------------------
    def _site(self) -> str | None:
        frame = sys._getframe(2)
        while frame is not None:
            path = os.path.realpath(frame.f_code.co_filename)
            if not (path.startswith(self._skip) or path in _PLUMBING or path.startswith("<")):
                return self._name(path, frame.f_lineno, frame.f_code.co_name)
            frame = frame.f_back
        return None

    def _name(self, path: str, line: int, fn: str) -> str:
        for root in self.roots:
            if path.startswith(root + os.sep):
                path = os.path.relpath(path, root)
                break
        return f"{path}:{line} in {fn}()"

    def _storages(self, obj: Any) -> dict[int, list[str]]:
        import torch

        index = self._index.get(id(obj))
        if index is None:
            index = {}
            from regress.dsa.state_fields import state_fields

            for name, value in state_fields(obj).items():
                if isinstance(value, torch.Tensor) and value.numel():
                    index.setdefault(value.untyped_storage().data_ptr(), []).append(name)
            self._index[id(obj)] = index
        return index

    def _tensor_written(self, tensor: Any) -> None:
        if not tensor.numel():
            return
        ptr = tensor.untyped_storage().data_ptr()
        site = None
        for key, obj in self._objects.items():
            names = self._storages(obj).get(ptr)
            if names:
                site = site or self._site()
                for name in names:
                    self._sites[key][name] = site or "?"

    def _rebound(self, obj: Any, name: str) -> None:
        key = id(obj)
        if key in self._objects:
            self._index.pop(key, None)
            self._sites[key][name] = self._site() or "?"

    # -- installing ---------------------------------------------------------------------------
    def _patch(self, cls: type) -> None:
        own = cls.__dict__.get("__setattr__")
        original = cls.__setattr__
        log = self

        def __setattr__(obj: Any, name: str, value: Any) -> None:
            original(obj, name, value)
            if log.active:
                log._rebound(obj, name)

        self._classes[cls] = own
        cls.__setattr__ = __setattr__  # type: ignore[method-assign]

    def _unpatch(self) -> None:
        for cls, own in self._classes.items():
            if own is None:
                del cls.__setattr__
            else:
                cls.__setattr__ = own  # type: ignore[method-assign]
        self._classes.clear()

    def __enter__(self) -> WriteLog:
        from torch.overrides import TorchFunctionMode

        log = self

        class _Writes(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                result = func(*args, **kwargs)
                if log.active:
                    name = getattr(func, "__name__", "")
                    for target in _targets(name, args, kwargs):
                        log._tensor_written(target)
                return result

        self._skip = _skip_dirs()
        self._mode = _Writes()
        self._mode.__enter__()
        for obj in self._objects.values():
            if type(obj) not in self._classes:
                self._patch(type(obj))
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._mode is not None:
                self._mode.__exit__(*exc)
        finally:
            self._mode = None
            self._unpatch()

    @contextmanager
    def in_thread(self) -> Iterator[None]:
        """Record in-place writes made in the calling thread too (torch function modes are per
        thread: a caller that drives the metadata from a helper thread enters this there)."""
        if self._mode is None:
            yield
            return
        with type(self._mode)():
            yield

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Stop recording inside the block (the oracle's own reads and copies)."""
        before, self.active = self.active, False
        try:
            yield
        finally:
            self.active = before


__all__ = ["WriteLog"]
