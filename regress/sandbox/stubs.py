"""Strict stand-ins for every module of a TensorRT-LLM tree the sandbox does not execute.

A stub module hands out, for any attribute, either a value from the era table (a fake with a
documented reason) or a placeholder class. Placeholders can be imported, subclassed, used in
annotations, dataclass defaults and ``isinstance`` checks, which is all module-level code needs;
but calling one, truth-testing it or iterating it raises :class:`SandboxGap` naming the upstream
line that did it. A permissive stub that returned ``None`` would let a new upstream dependency on
the checked path pass silently; a strict one turns it into exit 3 with the call site.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from regress.sandbox import Ledger, SandboxGap

#: Third-party packages the sandbox answers for: compiled, GPU-only or heavy. Where one is not
#: installed, a probe for it fails as on a machine without it; ``triton`` is run for real where
#: installed (:mod:`regress.sandbox.packages`).
THIRD_PARTY = ("deep_gemm", "flashinfer", "triton", "transformers")


def call_site(root: Path | None) -> str | None:
    """The innermost frame whose file lies under ``root``: ``path:line in function``."""
    frame = sys._getframe(1)
    root_s = str(root) if root is not None else None
    while frame is not None:
        fname = frame.f_code.co_filename
        if root_s is not None and fname.startswith(root_s):
            rel = Path(fname).relative_to(root_s)
            return f"{rel}:{frame.f_lineno} in {frame.f_code.co_name}()"
        frame = frame.f_back
    return None


class _StrictMeta(type):
    """Metaclass of placeholders: attribute access nests, use as a value raises."""

    _regress_root: Path | None = None
    _regress_hint: str = ""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        sub = make_placeholder(f"{cls.__qualname__}.{name}", cls._regress_root, cls._regress_hint)
        setattr(cls, name, sub)
        return sub

    def _gap(cls, what: str) -> SandboxGap:
        return SandboxGap(
            f"{what} of the stubbed `{cls.__qualname__}`",
            call_site(cls._regress_root),
            hint=cls._regress_hint,
        )

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise cls._gap("a call")

    def __bool__(cls) -> bool:
        raise cls._gap("the truth value")

    def __iter__(cls):
        raise cls._gap("iteration")

    def __len__(cls) -> int:
        raise cls._gap("the length")

    def __index__(cls) -> int:
        raise cls._gap("an integer value")

    def __getitem__(cls, item: Any) -> Any:
        return cls  # generic alias in an annotation: Stub[int]

    def __or__(cls, other: Any) -> Any:
        return cls  # Stub | None in an annotation

    __ror__ = __or__


def make_placeholder(qualname: str, root: Path | None, hint: str = "") -> type:
    """A new strict placeholder class standing for ``qualname``; ``hint`` ends its gaps."""
    short = qualname.rsplit(".", 1)[-1]
    cls = _StrictMeta(
        short, (), {"__qualname__": qualname, "__module__": qualname.rsplit(".", 1)[0]}
    )
    cls._regress_root = root
    cls._regress_hint = hint
    # Subclasses of a placeholder are upstream classes; their own attributes behave normally.
    return cls


def is_placeholder(obj: Any) -> bool:
    """Whether ``obj`` is a strict placeholder (or a class derived from one)."""
    return isinstance(obj, _StrictMeta)


class StubModule(types.ModuleType):
    """A module whose attributes are table values or strict placeholders, all recorded."""

    def __init__(
        self,
        name: str,
        *,
        values: Mapping[str, Any],
        ledger: Ledger,
        root: Path | None,
        hint: str = "",
    ) -> None:
        super().__init__(name)
        self.__dict__["_regress_hint"] = hint
        self.__dict__["_regress_values"] = values
        self.__dict__["_regress_ledger"] = ledger
        self.__dict__["_regress_root"] = root
        self.__path__ = []  # a package, so dotted children resolve to stubs too

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        values: Mapping[str, Any] = self.__dict__["_regress_values"]
        ledger: Ledger = self.__dict__["_regress_ledger"]
        full = f"{self.__name__}.{name}"
        if name in values:
            value, why = values[name]
            ledger.note("value", full, why)
        else:
            value = make_placeholder(
                full, self.__dict__["_regress_root"], self.__dict__["_regress_hint"]
            )
            ledger.note("placeholder", full, "strict placeholder: raises if used as a value")
        setattr(self, name, value)
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # `from <package> import name` falls back to importing `<package>.name`, which the
        # sandbox resolves to a stub module when no such file exists (a name defined by a package
        # __init__ that never ran, or compiled code): calling it is a gap, not a TypeError.
        raise SandboxGap(
            f"a call of `{self.__name__}`, which the sandbox resolved to a stub module",
            call_site(self.__dict__["_regress_root"]),
            hint=self.__dict__["_regress_hint"],
        )


Factory = Callable[[str], types.ModuleType]
