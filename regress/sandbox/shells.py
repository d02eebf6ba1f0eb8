"""Import selected real modules of a TensorRT-LLM tree with no package ``__init__`` executed.

Every ``tensorrt_llm`` package directory becomes an empty *shell* module whose ``__path__`` points
into the tree, so ``tensorrt_llm/__init__.py`` (which loads the compiled bindings) never runs.
Modules named real are executed from their source file; every other ``tensorrt_llm.*`` module is a
strict stub. The third-party packages of :data:`regress.sandbox.stubs.THIRD_PARTY` are answered
as a real machine would (:mod:`regress.sandbox.packages`): real where installed and runnable
(triton), absent to code that probes for them, strict stubs for unconditional imports. A shell
still answers the names its ``__init__`` re-exports from a real submodule
(``from ..attention_backend import AttentionMetadata`` in
``tensorrt_llm/_torch/speculative/eagle3.py``, the one stored version, commit unknown): the
``from .interface import AttentionMetadata`` lines of the package's
``__init__.py`` are read, never run, and only a name that comes from a module the sandbox executes
anyway is handed out; anything else stays missing, a gap. The
sandbox owns ``sys.modules`` entries under those names only while it is entered and restores
whatever was there before, so it can run twice in one process (tests, bisect probes).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from regress.sandbox import Ledger, SandboxGap, packages
from regress.sandbox.cuda import placement
from regress.sandbox.stubs import THIRD_PARTY, StubModule

ROOT_PACKAGE = "tensorrt_llm"


class _Loader(importlib.abc.Loader):
    def __init__(self, make):
        self.make = make

    def create_module(self, spec):
        return self.make(spec.name)

    def exec_module(self, module):
        pass


class _Finder(importlib.abc.MetaPathFinder):
    _regress_sandbox = True  # what packages.installed() looks past

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.partition(".")[0]
        sb = self.sandbox
        if top == ROOT_PACKAGE:
            where = sb.where(fullname)  # a string: pathlib cost a tenth of the sandbox's time
            if fullname in sb.real:
                return sb._real_spec(fullname, where)
            if fullname.rpartition(".")[0] in sb.real and not _exists(where):
                return None  # `from <real package> import <name it lacks>`: upstream's ImportError
            if os.path.isdir(where):
                spec = importlib.machinery.ModuleSpec(fullname, _Loader(sb._shell), is_package=True)
                spec.submodule_search_locations = [where]
                return spec
            return importlib.machinery.ModuleSpec(fullname, _Loader(sb._stub), is_package=True)
        if top in sb.packages.stubbed:
            if sb.packages.refuse(top, sb.ledger):
                return None  # a probe for an absent package: ImportError, upstream's fallback
            return importlib.machinery.ModuleSpec(fullname, _Loader(sb._stub), is_package=True)
        return None


#: Per source file, its text and what was made of it (code, re-exports), kept for the process:
#: every matrix cell executes the same files afresh in a sandbox of its own, and compiling them
#: (~5 ms a module) was a tenth of a cell. Keyed by the path, valid while the bytes are equal.
_FROM_SOURCE: dict[tuple[str, str], tuple[bytes, Any]] = {}
_FROM_SOURCE_MAX = 512


def _from_source(kind: str, path: str, data: bytes, make: Any) -> Any:
    """``make()``, or what it gave for ``path`` when the file held these same bytes."""
    hit = _FROM_SOURCE.get((kind, path))
    if hit is not None and hit[0] == data:
        return hit[1]
    value = make()
    if len(_FROM_SOURCE) >= _FROM_SOURCE_MAX:
        _FROM_SOURCE.pop(next(iter(_FROM_SOURCE)))
    _FROM_SOURCE[(kind, path)] = (data, value)
    return value


class _SourceLoader(importlib.machinery.SourceFileLoader):
    """A real module's loader that compiles each version of a file once per process.

    Executing it is still done afresh for every sandbox (a fresh module, its own globals); only
    the code object, which nothing can change, is shared.
    """

    def get_code(self, fullname: str) -> types.CodeType | None:
        path = self.get_filename(fullname)
        data = self.get_data(path)
        return _from_source(
            "code", path, data, lambda: super(_SourceLoader, self).get_code(fullname)
        )


def _reexports(init: Path, package: str) -> dict[str, tuple[str, str]]:
    """``name -> (module, name there)`` for the top-level ``from .x import name`` of ``init``."""
    try:
        data = init.read_bytes()
    except OSError:
        return {}
    return _from_source("reexports", str(init), data, lambda: _parse_reexports(data, package))


def _parse_reexports(data: bytes, package: str) -> dict[str, tuple[str, str]]:
    import ast

    try:
        tree = ast.parse(data.decode("utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or node.level != 1 or not node.module:
            continue
        for alias in node.names:
            if alias.name != "*":
                out[alias.asname or alias.name] = (f"{package}.{node.module}", alias.name)
    return out


class SessionEnv(dict):
    """Environment of one session, with why each variable is set (``why``: name -> reason)."""

    def __init__(self, values: Mapping[str, str | None], why: Mapping[str, str]) -> None:
        super().__init__(values)
        self.why = dict(why)


def _exists(base: str) -> bool:
    """Whether ``base`` names a source module, a package or a compiled extension in the tree."""
    if os.path.isdir(base):
        return True
    folder, name = os.path.split(base)
    try:
        return any(entry.startswith(name + ".") for entry in os.listdir(folder))
    except OSError:
        return False


class Sandbox:
    """A context in which ``import tensorrt_llm...`` resolves to shells, real files and stubs.

    Args:
        checkout: the directory holding ``tensorrt_llm/``.
        real: dotted names of the modules executed from source.
        values: per stubbed module, ``{name: (value, why)}`` handed out instead of placeholders.
        env: environment variables set while inside; a value of None unsets the variable, so
            upstream reads its own default (:meth:`regress.sandbox.eras.EraPlan.session_env`).
        ledger: where every fake is recorded.
        device: ``cpu`` (CUDA mapped onto the CPU, kernels interpreted) or ``cuda`` (upstream
            native on the GPU): :func:`regress.sandbox.cuda.placement`.
    """

    def __init__(
        self,
        checkout: Path,
        real: Iterable[str],
        values: Mapping[str, Mapping[str, tuple[Any, str]]],
        *,
        env: Mapping[str, str | None] | None = None,
        ledger: Ledger | None = None,
        device: str = "cpu",
    ) -> None:
        self.checkout = Path(checkout).resolve()
        self._root = str(self.checkout)
        self.real = set(real)
        self.device = device
        self._finder = _Finder(self)
        self.packages = packages.Packages.detect(THIRD_PARTY, device=device)
        self.values = dict(values)
        if "triton" in self.packages.absent:
            self.values.update(packages.triton_stub_values())
        self.env: Mapping[str, str | None] = env if env is not None else {}
        if self.packages.env():
            why = {**getattr(self.env, "why", {}), **self.packages.env_why()}
            self.env = SessionEnv({**self.env, **self.packages.env()}, why)
        self.ledger = ledger or Ledger()
        self._saved: dict[str, types.ModuleType] = {}
        self._saved_env: dict[str, str | None] = {}
        self._cuda = None
        self._stack: contextlib.ExitStack | None = None
        self._counting = False  # real Triton launches counted in the ledger

    def _real_spec(self, fullname: str, base: str) -> importlib.machinery.ModuleSpec | None:
        """A module executed from its file; a package (its ``__init__``, re-exports) likewise."""
        file, init = base + ".py", os.path.join(base, "__init__.py")
        if not os.path.isfile(file) and os.path.isfile(init):
            self._ran(fullname)
            return importlib.util.spec_from_file_location(
                fullname,
                init,
                loader=_SourceLoader(fullname, init),
                submodule_search_locations=[base],
            )
        if not os.path.isfile(file):
            raise SandboxGap(f"the real module {fullname} ({file} is missing)")
        self._ran(fullname)
        return importlib.util.spec_from_file_location(
            fullname, file, loader=_SourceLoader(fullname, file)
        )

    def _ran(self, fullname: str) -> None:
        if fullname not in self.ledger.real_modules:  # a second session on one ledger
            self.ledger.real_modules.append(fullname)

    def _owned(self, name: str) -> bool:
        top = name.partition(".")[0]
        return top == ROOT_PACKAGE or top in self.packages.stubbed

    def _owned_names(self) -> list[str]:
        """The names in ``sys.modules`` this sandbox owns (torch alone holds ~2,500 others: a
        prefix test in C first, as every session scans them twice)."""
        prefixes = (ROOT_PACKAGE, *self.packages.stubbed)
        return [n for n in sys.modules if n.startswith(prefixes) and self._owned(n)]

    def _shell(self, name: str) -> types.ModuleType:
        self.ledger.note("shell", name, "package __init__ not executed")
        shell = types.ModuleType(name)
        shell.__regress_shell__ = True  # a missing attribute here is the sandbox's (blame.py)
        init = self.checkout / Path(*name.split(".")) / "__init__.py"
        exports = _reexports(init, name)
        if exports:
            shell.__getattr__ = self._reexporter(name, exports)
        return shell

    def _reexporter(self, package: str, exports: dict[str, tuple[str, str]]):
        def __getattr__(attr: str) -> Any:
            target = exports.get(attr)
            if target is None or attr.startswith("__") or target[0] not in self.real:
                raise AttributeError(f"module {package!r} has no attribute {attr!r}")
            module, source_name = target
            value = getattr(importlib.import_module(module), source_name)
            self.ledger.note(
                "shell", f"{package}.{attr}", f"re-exported from {module} (__init__ read, not run)"
            )
            return value

        return __getattr__

    def _stub(self, name: str) -> types.ModuleType:
        top = name.partition(".")[0]
        base = self.where(name)
        if top == ROOT_PACKAGE:
            # how complete the tree is, read off the ledger: a checkout has every such file
            where = " (in the tree, not executed)" if _exists(base) else " (not in the tree)"
        else:
            where = " (not installed)" if top in self.packages.absent else ""
        self.ledger.note("module-stub", name, f"strict stub{where}")
        hint = self.packages.hint(top)
        if top == ROOT_PACKAGE and not _exists(base):
            rel = Path(*name.split("."))
            hint = (
                f"The tree has no {rel}.py (a module of a complete checkout, or a name a package "
                "__init__ defines): check a complete checkout, or add a value for it to "
                "regress.sandbox.eras if faking it is safe."
            )
        stub = StubModule(
            name,
            values=self.values.get(name, {}),
            ledger=self.ledger,
            root=self.checkout,
            hint=hint,
        )
        version = self.packages.version(top) if name == top else None
        if version is not None:
            stub.__dict__["__version__"] = version
            self.ledger.note("value", f"{name}.__version__", f"{version}: the installed version")
        return stub

    def __enter__(self) -> Sandbox:
        try:
            return self._enter()
        except BaseException:
            self.__exit__(None, None, None)  # __exit__ is not called when __enter__ raises
            raise

    def _enter(self) -> Sandbox:
        for name in self._owned_names():
            self._saved[name] = sys.modules.pop(name)
        why = getattr(self.env, "why", {})
        for key, value in self.env.items():
            self._saved_env[key] = os.environ.get(key)
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
            told = "unset" if value is None else f"set to {value!r}"
            name = key if value is None else f"{key}={value}"  # a second session's value too
            self.ledger.note("env", name, f"{told} in the sandbox: {why.get(key, 'see eras.py')}")
        sys.meta_path.insert(0, self._finder)
        importlib.invalidate_caches()
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(self._compile())
        if "triton" in self.packages.real:
            if self.packages.interpret:
                self._stack.enter_context(packages.interpreted_triton())
            self._count_launches(self.real)
        cuda = placement(self.ledger, self.device)
        cuda.__enter__()
        self._cuda = cuda  # only once entered: __exit__ leaves one that failed to enter
        return self

    @contextlib.contextmanager
    def _compile(self):
        """``torch.compile`` as the identity while inside (:mod:`regress.sandbox.packages`)."""
        import torch

        saved = torch.compile
        torch.compile = packages.identity_compile(
            self.ledger, packages.compile_reason(self.packages)
        )
        try:
            yield
        finally:
            torch.compile = saved

    def __exit__(self, *exc: object) -> None:
        try:
            if self._cuda is not None:
                self._cuda, cuda = None, self._cuda
                cuda.__exit__(*exc)
            if self._stack is not None:
                self._stack.close()
                self._stack = None
                self._counting = False
        finally:
            if self._finder in sys.meta_path:
                sys.meta_path.remove(self._finder)
            for name in self._owned_names():
                del sys.modules[name]
            sys.modules.update(self._saved)
            self._saved.clear()
            for key, old in self._saved_env.items():
                if old is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = old
            self._saved_env.clear()

    def _count_launches(self, modules: Iterable[str]) -> None:
        """Count real Triton launches (:func:`packages.kernel_launches`) from now on, once
        triton is loaded or one of ``modules`` may load it.

        Counting needs triton's runtime imported (~0.4 s), which a tree none of whose real
        modules mentions triton never launches a kernel from: its check does without.
        """
        if self._counting or self._stack is None or "triton" not in self.packages.real:
            return
        if "triton" not in sys.modules and not any(map(self._mentions_triton, modules)):
            return
        self._counting = True
        self._stack.enter_context(packages.kernel_launches(self.ledger, self.packages.interpret))

    def _mentions_triton(self, name: str) -> bool:
        base = self.where(name)
        for file in (base + ".py", os.path.join(base, "__init__.py")):
            with contextlib.suppress(OSError), open(file, "rb") as f:
                return b"triton" in f.read()
        return False

    def where(self, name: str) -> str:
        """The path in the checkout a dotted ``tensorrt_llm`` name maps to (no suffix)."""
        return os.path.join(self._root, *name.split("."))

    def add_real(self, modules: Iterable[str]) -> None:
        """Execute these modules from source too (a scenario that needs one more real class)."""
        modules = [m for m in modules if m not in self.real]
        self.real.update(modules)
        self._count_launches(modules)

    def load(self, module: str) -> types.ModuleType:
        """Import ``module`` inside the sandbox; an import-time gap names the missing piece."""
        try:
            return importlib.import_module(module)
        except SandboxGap:
            raise
        except ImportError as exc:
            raise self._import_gap(module, exc) from exc

    def _import_gap(self, module: str, exc: ImportError) -> SandboxGap:
        """Whose the failed import is: a name the tree's own module lacks, or the sandbox's."""
        path = Path(exc.path).resolve() if exc.path else None
        if exc.name in self.real and path is not None and path.is_relative_to(self.checkout):
            # ``from .mtp import MTPSampler`` where the tree's mtp.py runs but has no such name:
            # files of different commits (a stored eagle3.py older than its mtp.py), not a fake.
            return SandboxGap(
                f"a name the tree's {path.relative_to(self.checkout)} does not define "
                f"(importing {module}: {exc})",
                hint="The tree's files disagree (taken from different commits?): check a "
                "checkout whose files come from one commit.",
            )
        top = (exc.name or module).partition(".")[0]
        if top != ROOT_PACKAGE:  # a package upstream imports unconditionally, not installed here
            hint = f"Install {top} (pip install {top}), then run the check again."
        else:
            hint = "Mark it real or stubbed in regress.sandbox.eras."
        return SandboxGap(
            f"an importable {exc.name or module} (importing {module}: {exc})", hint=hint
        )
