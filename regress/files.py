"""Writing files the one way regress writes them: checked before the work, atomic, same mode.

Every report, store record, JUnit file and config regress writes goes through :func:`write_atomic`
(temp file in the same folder, fsync, rename), so a reader or a ``kill -9`` never sees half a file
and no temp file is left behind. Every output path a command accepts is checked with
:func:`check_output_path` *before* the command does its work: an unwritable ``--json`` found after a
20-minute run is a wasted run, and a write error is the user's to fix (exit 2), never a "regression
found" (exit 1).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from regress.errors import UsageError

#: Mode of every file regress writes (before the umask), reports and plots alike.
FILE_MODE = 0o644

#: The path that means standard output wherever a command takes ``FILE|-``.
STDOUT = "-"


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *, mode: int = FILE_MODE) -> Path:
    """Replace ``path`` with ``data`` so readers see the old file or the new one, never a torn one.

    The parent folder is created. The file gets ``mode`` masked by the process umask, like a file
    opened with ``open(path, "w")`` would (``mkstemp`` alone would leave it 0600).

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def write_json_atomic(path: str | os.PathLike[str], data: Any, *, indent: int = 1) -> Path:
    """:func:`write_atomic` of ``data`` as sorted, indented JSON with a final newline."""
    return write_atomic(path, json.dumps(data, indent=indent, sort_keys=True) + "\n")


def check_output_path(path: str | os.PathLike[str] | None, *, option: str) -> Path | None:
    """Fail now, as bad input, if ``path`` could not be written later.

    ``None`` and ``-`` (standard output) pass. Otherwise the nearest existing ancestor must be a
    writable folder (missing folders below it are created when the file is written), and the path
    itself must not be a folder or an unwritable file.

    Args:
        path: the value the user gave.
        option: the option that carried it (``"--json"``), named in the message.

    Returns:
        The path as a :class:`Path`, or ``None`` for ``None``/``-``.

    Raises:
        UsageError: naming the option, the path and why it cannot be written.
    """
    if path is None or str(path) == STDOUT:
        return None
    target = Path(path)
    if str(path) == "":
        raise UsageError(f"{option}: empty path; give a file name or '-' for standard output")
    if target.is_dir():
        raise UsageError(f"{option} {path}: is a folder; give a file name inside it")
    if target.exists():
        if not os.access(target, os.W_OK):
            raise UsageError(f"{option} {path}: file is not writable; choose another path")
        return target
    ancestor = target.parent
    while not ancestor.exists():
        if ancestor == ancestor.parent:
            break
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{option} {path}: {ancestor} is not a folder; choose another path")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(
            f"{option} {path}: cannot create files under {ancestor} (permission denied); "
            "choose a writable folder"
        )
    return target


def read_text(path: str | os.PathLike[str], *, what: str) -> str:
    """Read a UTF-8 text file the user named; unreadable or binary is bad input (exit 2).

    Args:
        what: what the file should be (``"prompts file"``), for the message.
    """
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{what} {path} is not UTF-8 text ({exc.reason} at byte {exc.start}); "
            "is it the right file?"
        ) from exc


def _umask() -> int:
    # os.umask can only be read by setting it; set it straight back.
    current = os.umask(0)
    os.umask(current)
    return current
