"""Third-party packages as a real machine answers for them: present, absent, or a strict stub.

The sandbox must not change what upstream decides. Three rules, per package of
:data:`regress.sandbox.stubs.THIRD_PARTY`:

* **Installed and runnable** (``triton``, whose CPU wheel runs ``@triton.jit`` kernels in its
  interpreter): the real package, never a stub. With tensors on the CPU (the sandbox maps CUDA
  onto it) the kernels run interpreted (``TRITON_INTERPRET=1``, set for the session before any
  kernel is defined; the interpreter needs numpy). Natively on a GPU (``--device cuda``) the
  variable is unset for the session, so they compile and run as on a production machine. Every
  launch is counted in the ledger, with how it ran.
* **Absent, and probed**: the import fails as it would on a machine without the package, so
  upstream takes its own fallback. A probe is an import inside a ``try`` whose handler catches
  ``ImportError`` (or a base of it), inside ``with suppress(ImportError)``, or an
  ``importlib.util.find_spec`` call. Whether an import is a probe is read from the AST of the
  importing module at the importing line (``_torch/flashinfer_utils.py`` @ 0ed45fea sets
  ``IS_FLASHINFER_AVAILABLE`` by such a ``try``; torch's ``has_triton_package`` probes triton the
  same way).
* **Absent (or heavy), imported unconditionally**: a strict stub (:mod:`regress.sandbox.stubs`);
  for triton its gaps say ``pip install triton``, and ``@triton.jit`` still decorates, so only
  the code that launches a kernel is a gap, never the module that defines one.

``torch.compile`` in every form upstream uses (``@torch.compile``, ``@torch.compile(options=...)``,
``torch.compile(fn, ...)``) is the identity while the sandbox holds tensors on the CPU: there
inductor would build C++ for the CPU, not the Triton code upstream ships on a GPU, and one small
function took 26 s to compile on 2 cores (real ``torch.compile`` also imports ``torch._dynamo``,
~4 s). Eager execution computes the same values. The ledger says which.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import functools
import importlib.abc
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from regress.install import install_hint
from regress.sandbox import Ledger, SandboxGap

#: Packages the sandbox runs for real when installed.
RUNNABLE = ("triton",)
#: What a gap caused by a missing package asks the reader to do.
INSTALL_HINT = {
    "triton": f"Install triton beside torch ({install_hint('check')}), then run the check again.",
    # SpecWorkerBase refuses to build without flashinfer>=0.6.4 (speculative/interface.py stored
    # id 57352998664); its dependencies are GPU-only, and the sandbox never runs its code.
    "flashinfer": "Install flashinfer beside regress (pip install --no-deps flashinfer-python: the "
    "sandbox stubs its code, its installed version answers upstream's version checks), then run "
    "the check again.",
}
#: Why the session sets the environment the real packages need, interpreted (tensors on the CPU)
#: and native (on a GPU).
ENV_WHY = {
    "TRITON_INTERPRET": "upstream's @triton.jit kernels run in Triton's interpreter, tensors being "
    "on the CPU"
}
NATIVE_ENV_WHY = {
    "TRITON_INTERPRET": "upstream's @triton.jit kernels compile and run natively on the GPU "
    "(--device cuda)"
}
#: How a launch of a real kernel ran, as the ledger and the fused scenario's note say it.
HOW_INTERPRETED = "ran for real in Triton's interpreter (TRITON_INTERPRET=1, tensors on the CPU)"
HOW_NATIVE = "ran natively on the GPU"
#: Exceptions whose handler makes a ``try`` around an import a probe.
_CATCHES_IMPORT = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
#: Frames of the import machinery and of the sandbox's finder: never the importing site.
_IMPORT_MACHINERY = ("<frozen importlib", os.path.dirname(importlib.abc.__file__))
_SANDBOX_FILES = (__file__, os.path.join(os.path.dirname(__file__), "shells.py"))


def installed(name: str) -> bool:
    """Whether ``name`` is importable outside any sandbox (its finders and stubs looked past).

    Asked for every package by every sandbox and every matrix cell, it is answered once per
    state of the import system: the answer depends only on ``sys.modules[name]`` (loaded, blocked
    or neither), the finders on ``sys.meta_path`` and ``sys.path``, so those are the cache key (a
    test hiding a package with its own finder gets its own answer).
    """
    from regress.sandbox.stubs import StubModule

    module = sys.modules.get(name, _NOT_LOADED)
    if module is not _NOT_LOADED and not isinstance(module, StubModule):
        return module is not None
    finders = tuple(
        f
        for f in sys.meta_path
        if not getattr(f, "_regress_sandbox", False) and hasattr(f, "find_spec")
    )
    try:
        return _findable(name, finders, tuple(sys.path))
    except TypeError:  # a finder that cannot be a key (unhashable): ask it every time
        return _findable.__wrapped__(name, finders, ())


_NOT_LOADED = object()


@functools.lru_cache(maxsize=64)
def _findable(name: str, finders: tuple[Any, ...], path: tuple[str, ...]) -> bool:
    """Whether one of ``finders`` finds ``name`` (``path``: ``sys.path`` then, the key only)."""
    for finder in finders:
        try:
            if finder.find_spec(name, None) is not None:
                return True
        except ImportError:
            return False
    return False


def _handler_catches(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(_name(kind) in _CATCHES_IMPORT for kind in kinds)


def _name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _suppresses(node: ast.With) -> bool:
    """``with contextlib.suppress(ImportError):`` (or a base of it)."""
    return any(
        isinstance(item.context_expr, ast.Call)
        and _name(item.context_expr.func) == "suppress"
        and any(_name(arg) in _CATCHES_IMPORT for arg in item.context_expr.args)
        for item in node.items
    )


@functools.lru_cache(maxsize=256)
def _probe_lines(path: str, mtime: float) -> frozenset[int]:
    """Lines of ``path`` inside the body of a ``try`` (or ``with suppress``) catching imports."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    lines: set[int] = set()
    for node in ast.walk(tree):
        body: list[ast.stmt] = []
        if (
            isinstance(node, (ast.Try, ast.TryStar))
            and any(_handler_catches(h) for h in node.handlers)
        ) or (isinstance(node, ast.With) and _suppresses(node)):
            body = node.body
        for stmt in body:
            lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return frozenset(lines)


def import_site() -> tuple[str, int, bool] | None:
    """The frame that asked for the module being found: ``(file, line, via find_spec)``.

    Frames of importlib itself and of the sandbox's finder are skipped; passing through
    ``importlib.util.find_spec`` marks the request as a probe whatever the line.
    """
    frame = sys._getframe(1)
    via_find_spec = False
    while frame is not None:
        fname = frame.f_code.co_filename
        if fname.startswith(_IMPORT_MACHINERY) or fname in _SANDBOX_FILES:
            if frame.f_code.co_name == "find_spec" and "importlib.util" in fname.replace(
                os.sep, "."
            ):
                via_find_spec = True
            frame = frame.f_back
            continue
        return fname, frame.f_lineno, via_find_spec
    return None


def is_probe(site: tuple[str, int, bool] | None) -> bool:
    """Whether the import at ``site`` tolerates the package's absence (see the module docstring)."""
    if site is None:
        return False
    path, line, via_find_spec = site
    if via_find_spec:
        return True
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return False
    return line in _probe_lines(path, mtime)


@dataclass
class Packages:
    """Which third-party packages are real, absent or stubbed in one sandbox session.

    Attributes:
        real: installed packages run for real (:data:`RUNNABLE`).
        stubbed: packages the sandbox answers for (absent, or heavy even when installed).
        absent: the stubbed ones not installed: a probe gets an ``ImportError`` for them.
        interpret: kernels run in Triton's interpreter (tensors on the CPU); False on a GPU
            (``--device cuda``), where they run natively.
    """

    real: tuple[str, ...]
    stubbed: tuple[str, ...]
    absent: tuple[str, ...]
    interpret: bool = True

    @classmethod
    def detect(cls, third_party: tuple[str, ...], *, device: str = "cpu") -> Packages:
        real = tuple(n for n in third_party if n in RUNNABLE and installed(n))
        stubbed = tuple(n for n in third_party if n not in real)
        absent = tuple(n for n in stubbed if not installed(n))
        return cls(real, stubbed, absent, interpret=device != "cuda")

    def env(self) -> dict[str, str | None]:
        """Environment the session needs for the real packages: Triton's interpreter on, or, on
        a GPU, off (None: unset, so an ambient ``TRITON_INTERPRET=1`` cannot slow or change it)."""
        if "triton" not in self.real:
            return {}
        return {"TRITON_INTERPRET": "1" if self.interpret else None}

    def env_why(self) -> dict[str, str]:
        """Why :meth:`env` sets what it sets."""
        return dict(ENV_WHY if self.interpret else NATIVE_ENV_WHY) if self.env() else {}

    def refuse(self, top: str, ledger: Ledger) -> bool:
        """Whether this request for the absent ``top`` is a probe, which must fail as upstream expects."""
        if top not in self.absent:
            return False
        site = import_site()
        if not is_probe(site):
            return False
        where = f"{os.path.basename(site[0])}:{site[1]}" if site else "?"
        ledger.note(
            "probe",
            top,
            f"not installed: the probe ({'find_spec' if site and site[2] else 'try/except'} at "
            f"{where}, ...) gets ImportError and upstream takes its fallback",
        )
        return True

    def hint(self, top: str) -> str:
        return INSTALL_HINT.get(top, "") if top in self.absent else ""

    def version(self, top: str) -> str | None:
        """The installed version of the stubbed ``top`` (None where absent or unknown).

        A stub stands for the module's code, not for what the machine has: upstream reads a
        package's ``__version__`` to decide whether a path is available (``SpecWorkerBase``
        requires ``flashinfer>=0.6.4`` at construction, ``speculative/interface.py`` stored id
        57352998664), so the stub of an installed package answers with the installed version.
        """
        if top not in self.stubbed or top in self.absent:
            return None
        return distribution_version(top)


def refused_for(exc: BaseException) -> str | None:
    """The absent third-party package an explicit ``raise ImportError(...)`` of upstream names.

    Upstream raises on its own when a package it needs at run time is missing (``SpecWorkerBase``:
    ``ImportError("Speculative decoding requires flashinfer>=0.6.4 ...")``): a package this
    machine lacks, not a tree that cannot be imported.
    """
    from regress.sandbox.stubs import THIRD_PARTY

    if not isinstance(exc, ImportError) or exc.name is not None:
        return None  # the import machinery's own failure names the module it could not find
    text = str(exc)
    return next((p for p in THIRD_PARTY if re.search(rf"\b{p}\b", text) and not installed(p)), None)


def distribution_version(top: str) -> str | None:
    """The version of the installed distribution that provides the import name ``top``."""
    import importlib.metadata as metadata

    for dist in metadata.packages_distributions().get(top, []):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


class MissingKernel:
    """What ``@triton.jit`` gives where triton is not installed: launching it is a gap."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "kernel")

    def __getitem__(self, grid: Any) -> Any:
        return self.run

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise SandboxGap(
            f"triton to launch the @triton.jit kernel {self.__name__}", hint=INSTALL_HINT["triton"]
        )


def missing_jit(*args: Any, **kwargs: Any) -> Any:
    """``triton.jit`` / ``triton.autotune`` / ``triton.heuristics`` without triton: decorate only."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return MissingKernel(args[0])
    return lambda fn: fn if isinstance(fn, MissingKernel) else MissingKernel(fn)


def triton_stub_values() -> dict[str, dict[str, tuple[Any, str]]]:
    """The stub values that let a module defining kernels load where triton is absent."""
    why = "triton is not installed: the kernel is defined, launching it is a gap"
    return {"triton": {n: (missing_jit, why) for n in ("jit", "autotune", "heuristics")}}


def identity_compile(ledger: Ledger, reason: str) -> Any:
    """``torch.compile`` as the identity, in each form upstream uses it; each use noted."""

    def compile(model: Any = None, /, *args: Any, **kwargs: Any) -> Any:
        ledger.note("compile", "torch.compile", f"identity: {reason}")
        if model is None:
            return lambda fn: fn
        return model

    return compile


#: Triton's modules as imported with ``TRITON_INTERPRET=1``, kept across sessions of a process.
_INTERPRETED: dict[str, Any] = {}


@atexit.register
def _finalize_with_the_others() -> None:
    """Hand the interpreted copy back to ``sys.modules`` for interpreter shutdown.

    Modules held only here are torn down after triton's compiled module, and nanobind then
    reports every triton object as leaked; in ``sys.modules`` (under another name where the
    outside copy is there) they are finalized with the rest.
    """
    for name, module in _INTERPRETED.items():
        sys.modules.setdefault(name, module)
        if sys.modules[name] is not module:
            sys.modules[f"_regress_interpreted_{name}"] = module
    _INTERPRETED.clear()


def _is_triton(name: str) -> bool:
    """Triton's Python modules; its compiled ``triton._C`` cannot load twice and is shared."""
    return (name == "triton" or name.startswith("triton.")) and not name.startswith("triton._C")


def _triton_names() -> list[str]:
    """Triton's Python modules in ``sys.modules`` (a prefix test in C first: torch alone holds
    ~2,500 other names, scanned twice by every session)."""
    return [n for n in sys.modules if n.startswith("triton") and _is_triton(n)]


@contextlib.contextmanager
def interpreted_triton() -> Iterator[None]:
    """Triton as imported with its interpreter on, whatever was imported before the session.

    Triton decides at import time how its own library kernels are wrapped: imported without
    ``TRITON_INTERPRET=1``, an interpreted kernel that calls them fails ("Cannot call
    @triton.jit'd outside of the scope of a kernel"). So the session swaps in a copy imported
    with the interpreter on (the first session imports it) and puts the outside one back after.
    """
    outside = {n: sys.modules.pop(n) for n in _triton_names()}
    sys.modules.update(_INTERPRETED)
    try:
        yield
    finally:
        for name in _triton_names():
            _INTERPRETED[name] = sys.modules.pop(name)
        sys.modules.update(outside)


@contextlib.contextmanager
def kernel_launches(ledger: Ledger, interpret: bool) -> Iterator[None]:
    """Count every launch of a real Triton kernel in the ledger (interpreted or native)."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction
    except ImportError:
        yield
        return
    how = HOW_INTERPRETED if interpret else HOW_NATIVE
    saved = {
        cls: cls.run
        for cls in (InterpretedFunction, JITFunction)
        if not getattr(cls.run, "_regress_counted", False)  # a nested session counts once
    }

    def counted(original: Any) -> Any:
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            fn = getattr(self, "fn", None)
            name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__name__', '?')}"
            ledger.note("triton", name, how)
            return original(self, *args, **kwargs)

        run._regress_counted = True
        return run

    for cls, original in saved.items():
        cls.run = counted(original)
    try:
        yield
    finally:
        for cls, original in saved.items():
            cls.run = original


def compile_reason(packages: Packages) -> str:
    """Why ``torch.compile`` is the identity in this session."""
    if "triton" not in packages.real:
        return "triton is not installed, so torch.compile could not build upstream's GPU code"
    if not packages.interpret:
        return (
            "eager execution on the GPU computes the same values as the compiled code, and "
            "compiling each function would cost seconds the contracts gain nothing from"
        )
    return (
        "tensors are on the CPU, where inductor builds C++ instead of the Triton code upstream "
        "ships (and takes ~25 s per function on 2 cores); eager execution computes the same values"
    )


__all__ = [
    "ENV_WHY",
    "HOW_INTERPRETED",
    "HOW_NATIVE",
    "INSTALL_HINT",
    "NATIVE_ENV_WHY",
    "RUNNABLE",
    "MissingKernel",
    "Packages",
    "compile_reason",
    "identity_compile",
    "import_site",
    "installed",
    "is_probe",
    "kernel_launches",
    "missing_jit",
    "triton_stub_values",
]
