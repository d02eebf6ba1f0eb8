"""Files the one way regress handles them: checked before the work, atomic, locked, hashed.

Every report, store record, JUnit file and config regress writes goes through :func:`write_atomic`
(temp file in the same folder, fsync, rename), so a reader or a ``kill -9`` never sees half a file
and no temp file is left behind. Every output path a command accepts is checked with
:func:`check_output_path` *before* the command does its work: an unwritable ``--json`` found after a
20-minute run is a wasted run, and a write error is the user's to fix (exit 2), never a "regression
found" (exit 1).

The stores (the bisect's results, the nightly trend history) share the rest: :func:`file_lock` (an
``flock`` the kernel drops with its holder, so ``kill -9`` leaves no stale lock), :func:`lock_held`
and :func:`json_digest`, the short stable name of a JSON-ready value.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
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


def read_json(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON file regress wrote (UTF-8)."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def json_digest(data: Any, *, length: int = 16) -> str:
    """A stable short hash of a JSON-ready value: SHA-256 of its sorted, compact JSON.

    Key order and whitespace never change it, so two equal configurations get one name.
    """
    blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:length]


@contextlib.contextmanager
def file_lock(path: str | os.PathLike[str], *, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created, with its folder) for the block.

    The kernel drops the lock with the holder's last descriptor, so a process killed with -9
    leaves none behind, and a reused pid cannot fake one the way it can a pid file.

    Raises:
        BlockingIOError: ``wait`` is false and another process holds the lock (on entering).
        OSError: the lock file cannot be created or opened.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        yield
    finally:
        os.close(fd)  # closing releases the lock


def lock_held(path: str | os.PathLike[str]) -> bool:
    """Whether a live process holds the :func:`file_lock` on ``path``.

    Opened read-only: asking needs no write access. A missing or unreadable lock file is not
    held (nothing ever ran, or it is not ours to judge).
    """
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError:
        return False
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False


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
