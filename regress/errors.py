"""The one exception family of regress; the CLI turns each into a message and an exit code.

Exit codes (also in README.md):
    0  success / no regression / culprit found
    1  a regression was found (``accept``) or an internal error (``bisect``)
    2  bad input: the user can fix the command line or the files it names
    3  the engine failed (``accept``) or the bisect was inconclusive (``bisect``)
  130  interrupted (Ctrl-C); a bisect resumes when rerun
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from pathlib import Path

#: Exit code of an interrupted command (128 + SIGINT), as shells report it.
INTERRUPTED = 130


class RegressError(Exception):
    """Base of every error regress raises on purpose.

    Messages say what went wrong and what to do next; ``exit_code`` is what the CLI exits with.
    """

    exit_code: int = 1

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(RegressError):
    """Bad input: an unknown option value, a missing file, an impossible range."""

    exit_code = 2


class EngineError(RegressError):
    """The inference engine could not run (missing dependency, crash, bad checkpoint)."""

    exit_code = 3


class MissingDependencyError(EngineError):
    """An optional dependency (``tensorrt_llm``, ``matplotlib``, CUDA) is not available."""


def require_module(name: str, *, purpose: str, install: str) -> object:
    """Import an optional module lazily, or explain how to get it.

    Args:
        name: module to import, e.g. ``"tensorrt_llm"``.
        purpose: what the caller wanted it for, for the error message.
        install: the command that installs it.

    Raises:
        MissingDependencyError: naming the module, the purpose and the install command.
    """
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:  # pragma: no branch - message only
        raise MissingDependencyError(
            f"{purpose} needs the Python module '{name}', which is not importable ({exc}). "
            f"Install it with: {install}"
        ) from exc


def save_traceback(exc: BaseException) -> Path:
    """Write ``exc``'s traceback to a file and return its path.

    Users see one line naming this file instead of a traceback; ``REGRESS_TRACEBACK=1`` makes the
    CLI re-raise instead. The folder is ``$REGRESS_TRACEBACK_DIR``, else the system temp folder.
    """
    folder = Path(os.environ.get("REGRESS_TRACEBACK_DIR") or tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    fd, name = tempfile.mkstemp(prefix=f"regress-traceback-{stamp}-", suffix=".txt", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("".join(traceback.format_exception(exc)))
    return Path(name)
