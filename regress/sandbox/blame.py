"""Whose code raised: the tree's (a verdict) or the sandbox's, the CPU's, an import's (a gap).

``regress check`` may only blame a tree for what the tree's own code did on real inputs. An
exception is the tree's when the innermost frame that is not library code (the standard library,
torch, the device pass-through of :mod:`regress.sandbox.cuda`) lies in the tree. Everything else
is a gap, with the cause and the innermost upstream frame (``path:line in fn()``) named:

* ``sandbox``: a strict stub was used, or a fake of :mod:`regress.sandbox.fakes` /
  :mod:`regress.sandbox.drafts` (the draft model and spec metadata handed to upstream's worker)
  / value of :mod:`regress.sandbox.eras` raised, was called with arguments it does not take, or
  lacks an attribute upstream reads;
* ``runtime``: upstream reached the CUDA runtime (``torch.cuda.*``) or a compiled custom operator
  (``torch.ops.trtllm.*``), which a CPU build of torch does not have;
* ``import``: the tree cannot be imported (a syntax error, NUL bytes, a missing module or name);
* ``exit``: upstream called ``sys.exit()``;
* ``driver``: regress's own scenario code failed on what the tree gave it.

Callers decide what a gap means: ``regress check`` exits 3; a run of upstream's own unit tests
(:mod:`regress.sandbox.pytest_sandbox`) skips a test only for ``sandbox`` and ``runtime``, since
an import error or an exit fails that test on a GPU box too.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from regress.sandbox import SandboxGap
from regress.sandbox.packages import INSTALL_HINT, refused_for

_HERE = Path(__file__).resolve().parent
_REGRESS = _HERE.parent
#: Modules of this package that stand in for upstream: what raises there is the sandbox's.
SANDBOX_MODULES = frozenset({"fakes", "drafts", "stubs", "eras", "shells", "llm_args"})
#: Pass-throughs: the device rewrite calls torch for upstream, so a torch error there is judged
#: by the frame that called torch.
TRANSPARENT_MODULES = frozenset({"cuda"})
#: Python's binding errors name the callee by qualname: ``Fake.method() got an unexpected ...``.
_BINDING = re.compile(
    r"^([A-Za-z_][\w.<>]*)\(\) (?:got an unexpected keyword|got multiple values|missing \d+ "
    r"required|takes \d+ positional|takes from \d+|takes no arguments)"
)

Owner = Literal["upstream", "sandbox", "runtime", "import", "exit", "driver"]


@dataclass(frozen=True)
class Blame:
    """Who raised an exception.

    Attributes:
        owner: see the module docstring; only ``upstream`` is the tree's own doing.
        site: the innermost frame in the tree, ``path:line in fn()`` relative to it, or None.
        where: for the other owners, the frame or fake that raised (``stubs.py:60 in __call__``).
    """

    owner: Owner
    site: str | None = None
    where: str = ""

    @property
    def is_gap(self) -> bool:
        return self.owner != "upstream"


def _real(path: str) -> str:
    return os.path.realpath(path) if path and not path.startswith("<") else path


def _kind(filename: str, root: str) -> str:
    """``upstream``, ``sandbox``, ``driver``, ``runtime`` or ``lib`` for one frame's file."""
    path = _real(filename)
    if path.startswith(root + os.sep):
        return "upstream"
    if path.startswith(str(_HERE) + os.sep):
        stem = Path(path).stem
        if stem in SANDBOX_MODULES:
            return "sandbox"
        return "lib" if stem in TRANSPARENT_MODULES else "driver"
    if path.startswith(str(_REGRESS) + os.sep):
        return "driver"
    if f"{os.sep}torch{os.sep}cuda{os.sep}" in path or path.endswith(
        f"{os.sep}torch{os.sep}_ops.py"
    ):
        return "runtime"
    return "lib"


def _where(frame: traceback.FrameSummary, root: str | None = None) -> str:
    path = _real(frame.filename)
    if root and path.startswith(root + os.sep):
        path = os.path.relpath(path, root)
    elif path.startswith(str(_REGRESS) + os.sep):
        path = os.path.relpath(path, _REGRESS.parent)
    else:
        path = Path(path).name
    return f"{path}:{frame.lineno} in {frame.name}()"


def _fake_named(exc: BaseException) -> str | None:
    """A fake that upstream's call did not fit: a missing attribute or a binding error."""
    if isinstance(exc, AttributeError):
        obj = getattr(exc, "obj", None)
        if getattr(obj, "__regress_shell__", False):
            return f"the package shell {obj.__name__} (its __init__ never ran) has no {exc.name!r}"
        module = type(obj).__module__ or ""
        if module.startswith(__package__ + ".") and module.rpartition(".")[2] in SANDBOX_MODULES:
            return f"the fake {type(obj).__name__} has no attribute {exc.name!r}"
        return None
    if not isinstance(exc, TypeError):
        return None
    match = _BINDING.match(str(exc))
    if match is None:
        return None
    head = match.group(1).split(".", 1)[0]
    for name in SANDBOX_MODULES:
        module = sys.modules.get(f"{__package__}.{name}")
        obj = getattr(module, head, None) if module is not None else None
        if obj is not None and getattr(obj, "__module__", None) == module.__name__:
            return f"the fake {match.group(1)}() does not take upstream's arguments"
    return None


def _import_failure(exc: BaseException, frames: list[traceback.FrameSummary]) -> bool:
    if isinstance(exc, (ImportError, SyntaxError)):
        return True
    # compile() refusing a source file (NUL bytes on Python 3.11) inside the import machinery
    return bool(frames) and frames[-1].filename.startswith("<frozen importlib")


def blame(exc: BaseException, root: Path | str) -> Blame:
    """Who raised ``exc`` while the sandbox ran the tree at ``root``."""
    root_s = _real(str(Path(root).resolve()))
    frames = traceback.extract_tb(exc.__traceback__)
    inner_first = [(f, _kind(f.filename, root_s)) for f in reversed(frames)]
    site = next((_where(f, root_s) for f, k in inner_first if k == "upstream"), None)
    if isinstance(exc, SandboxGap):
        return Blame("sandbox", exc.site or site, "a strict stub")
    if isinstance(exc, SystemExit):
        return Blame("exit", site, f"sys.exit({exc.code!r})")
    if _import_failure(exc, frames):
        return Blame("import", _source_site(exc, root_s) or site, type(exc).__name__)
    fake = _fake_named(exc)
    if fake:
        return Blame("sandbox", site, fake)
    for frame, kind in inner_first:
        if kind == "upstream":
            return Blame("upstream", site)
        if kind != "lib":
            return Blame(kind, site, _where(frame))  # type: ignore[arg-type]
    return Blame("driver", site, "no frame of the tree or of regress")


def _source_site(exc: BaseException, root: str) -> str | None:
    """The file that could not be compiled: a SyntaxError names it, compile()'s ValueError not."""
    path, line = None, None
    if isinstance(exc, SyntaxError) and exc.filename:
        path, line = exc.filename, exc.lineno
    else:
        tb = exc.__traceback__
        while tb is not None:  # importlib's source_to_code(data, path) holds the file name
            if tb.tb_frame.f_code.co_name == "source_to_code":
                path = tb.tb_frame.f_locals.get("path")
            tb = tb.tb_next
    if not path:
        return None
    path = _real(str(path))
    rel = os.path.relpath(path, root) if path.startswith(root + os.sep) else path
    return f"{rel}:{line}" if line else rel


def describe(exc: BaseException, found: Blame) -> str:
    """One line naming the cause of a gap (or, for ``upstream``, the exception and its site)."""
    at = f" at {found.site}" if found.site else ""
    text = f"{type(exc).__name__}: {exc}".strip()
    if isinstance(exc, SandboxGap):
        return str(exc)
    missing = refused_for(exc) if found.owner == "import" else None
    if missing is not None:
        hint = INSTALL_HINT.get(missing, f"Install {missing} beside regress.")
        return f"upstream refuses to run without {missing}, not installed here{at} ({text}). {hint}"
    return {
        "upstream": f"{text}{at}",
        "sandbox": f"{found.where} under upstream's call{at} ({text})",
        "runtime": f"upstream needs the CUDA runtime or a compiled operator ({found.where}){at}, "
        f"which a CPU build of torch lacks ({text})",
        "import": f"the tree cannot be imported{at}: {text}",
        "exit": f"upstream called {found.where}{at}",
        "driver": f"regress could not drive this tree: {text} at {found.where} "
        f"(innermost upstream frame: {found.site or 'none'})",
    }[found.owner]
