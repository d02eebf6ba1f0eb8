"""Files the one way regress handles them: checked before the work, written without harm, locked.

Every report, store record, JUnit file and config regress writes goes through :func:`write_atomic`.
A regular file (or nothing yet) at the path is replaced atomically (temp file in the same folder,
fsync, rename), so a reader or a ``kill -9`` never sees half a file and no temp file is left
behind. Anything else that exists there, a device, a FIFO, a socket or an open descriptor such as
``/dev/stdout``, is opened and written in place and never replaced: renaming over ``/dev/null`` as
root destroys the device node, and a FIFO's waiting reader would get nothing. A symlink is
followed, so its target is written and the link stays. :func:`output_target` is that rule.

Every output path a command accepts is checked with :func:`check_output_path` *before* the command
does its work: an unwritable ``--json`` found after a 20-minute run is a wasted run, and a write
error is the user's to fix (exit 2), never a "regression found" (exit 1).

The stores (the bisect's results, the nightly trend history) share the rest: :func:`file_lock` (an
``flock`` the kernel drops with its holder, so ``kill -9`` leaves no stale lock), :func:`lock_held`
and :func:`json_digest`, the short stable name of a JSON-ready value.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import secrets
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from regress.errors import UsageError

#: Mode of every file regress writes (before the umask), reports and plots alike.
FILE_MODE = 0o644

#: The path that means standard output wherever a command takes ``FILE|-``.
STDOUT = "-"

#: Symlink hops :func:`output_target` follows before it calls the path a loop (Linux's own limit).
_MAX_LINK_HOPS = 40


def output_target(path: str | os.PathLike[str]) -> tuple[Path, bool]:
    """Where a write to ``path`` lands, and whether it is written in place rather than replaced.

    Symlinks are followed hop by hop to the file they name (a dangling link names the file to
    create). The walk stops at ``/proc`` (``/dev/stdout`` is ``/proc/self/fd/1``): a path there
    is an open descriptor or a kernel file, written in place, since resolving it further would
    turn ``--json /dev/stdout >> log`` into a rename over the user's log. An existing target that
    is not a regular file (a device, a FIFO, a socket) is written in place too.

    Returns:
        ``(target, in_place)``: the absolute path to write and whether to open it as it is.
    """
    target = Path(os.path.abspath(path))
    for _ in range(_MAX_LINK_HOPS):
        target = Path(os.path.realpath(target.parent)) / target.name  # folders' links resolved
        if _is_descriptor_path(target):
            return target, True
        if not target.is_symlink():
            break
        target = Path(os.path.abspath(target.parent / os.readlink(target)))
    else:
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))
    try:
        info = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):  # nothing there yet (or it cannot be)
        return target, False
    return target, not stat.S_ISREG(info.st_mode)


def is_standard_output(path: str | os.PathLike[str] | None) -> bool:
    """Whether an output path means standard output: ``-``, or a path on fd 1's open file.

    ``/dev/stdout``, ``/proc/self/fd/1`` or the very file fd 1 is redirected to (same device and
    inode) are standard output too. Written as a second descriptor they corrupt it: under
    ``--json /dev/stdout > f`` the JSON is appended through its own descriptor while the summary,
    written through fd 1 at offset 0, overwrites it. Treated as ``-``, the JSON goes alone
    through fd 1 and the summary to stderr.
    """
    if path is None:
        return False
    if str(path) == STDOUT:
        return True
    if str(path) == "":
        return False
    try:
        here, out = os.stat(path), os.fstat(1)
    except (OSError, ValueError):  # nothing there yet, or no fd 1 at all
        return False
    return (here.st_dev, here.st_ino) == (out.st_dev, out.st_ino)


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *, mode: int = FILE_MODE) -> Path:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never a torn one.

    Where the path leads is :func:`output_target`'s rule: a regular file (or none) is replaced
    atomically, with its folders created and ``mode`` masked by the process umask, like a file
    opened with ``open(path, "w")`` would get (``mkstemp`` alone would leave it 0600); a symlink's
    target is written and the link kept; a device, FIFO, socket or descriptor path is opened and
    written in place (appending, never truncating: ``/dev/stdout`` may be the user's ``>> log``).

    Returns:
        The path given.
    """
    given = Path(path)
    target, in_place = output_target(given)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    if in_place:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY)
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        return given
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return given


def write_output(path: str | os.PathLike[str], data: str | bytes, *, option: str) -> Path:
    """:func:`write_atomic` for a path the user gave: an OS error is bad input naming ``option``."""
    with output_errors(option, path):
        return write_atomic(path, data)


@contextlib.contextmanager
def output_errors(option: str, path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn an OS error while writing ``path`` into a usage error that names ``option``.

    For writers that take a path themselves (a plot), so a full disk or a vanished folder found
    at the end of a run is exit 2 with the cause first, not an internal error.
    """
    try:
        yield
    except OSError as exc:
        raise UsageError(
            f"{option} {path}: cannot write ({exc.strerror or exc}); choose another path"
        ) from exc


def write_json_atomic(path: str | os.PathLike[str], data: Any, *, indent: int = 1) -> Path:
    """:func:`write_atomic` of ``data`` as sorted, indented JSON with a final newline."""
    return write_atomic(path, json.dumps(data, indent=indent, sort_keys=True) + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON file regress wrote (UTF-8)."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def read_record(path: str | os.PathLike[str], *, what: str, fix: str) -> dict[str, Any]:
    """A JSON object regress stored (a bisect session, a results file); damaged is bad input.

    A file cut by a full disk, edited by hand or overwritten with something else is the user's
    to remove (exit 2 with ``fix``), never an internal error with a codec's or a parser's text.

    Args:
        what: what the file is (``"bisect session"``), for the message.
        fix: what to do, e.g. ``"remove it with `regress bisect reset`"``.
    """
    try:
        data = read_json(path)
    except OSError as exc:
        raise UsageError(f"cannot read the {what} {path} ({exc.strerror}); {fix}") from None
    except UnicodeDecodeError:
        raise UsageError(f"the {what} {path} is damaged (not UTF-8 text); {fix}") from None
    except ValueError as exc:  # json.JSONDecodeError
        reason = getattr(exc, "msg", str(exc)).removesuffix(" at")
        if hasattr(exc, "lineno"):
            reason += f" at line {exc.lineno}, column {exc.colno}"
        raise UsageError(f"the {what} {path} is damaged (not JSON: {reason}); {fix}") from None
    if not isinstance(data, dict):
        raise UsageError(f"the {what} {path} is damaged (not a JSON object); {fix}")
    return data


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

    ``None`` and ``-`` (standard output) pass. Otherwise the path, followed as
    :func:`output_target` follows it, must be one of: an existing device, FIFO or descriptor the
    process may write (checked without opening it, since opening a FIFO is seen by its reader); an
    existing regular file that opens for writing, in a folder a file can be created in (the
    atomic rename needs both); or a new file whose nearest existing ancestor is a folder a file
    can be created in (missing folders below it are created when the file is written). "Can be
    created" is tried, with a temp file removed at once, because ``os.access`` says yes to root
    on a read-only filesystem or under ``/proc``.

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
    if str(path) == "":
        raise UsageError(f"{option}: empty path; give a file name or '-' for standard output")
    where = f"{option} {path}"
    try:
        target, in_place = output_target(path)
    except OSError as exc:
        raise UsageError(f"{where}: {exc.strerror} following its links; give another path") from exc
    if target.is_dir():
        raise UsageError(f"{where}: is a folder; give a file name inside it")
    if in_place:
        _check_in_place(target, where)
    elif target.exists():
        _check_opens(target, where)
        _check_creatable(target.parent, where)
    else:
        ancestor = target.parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise UsageError(f"{where}: {ancestor} is not a folder; choose another path")
        _check_creatable(ancestor, where)
    return Path(path)


def _check_in_place(target: Path, where: str) -> None:
    try:
        info = os.stat(target)
    except OSError as exc:
        raise UsageError(
            f"{where}: {exc.strerror}, and no file can be created there; choose another path"
        ) from exc
    if not os.access(target, os.W_OK):
        raise UsageError(f"{where}: not writable (permission denied); choose another path")
    if stat.S_ISREG(info.st_mode):  # a descriptor or a kernel file: opening it changes nothing
        _check_opens(target, where)


def _check_opens(target: Path, where: str) -> None:
    if not os.access(target, os.W_OK):
        raise UsageError(f"{where}: file is not writable; choose another path")
    try:  # appending nothing changes neither the content nor the modification time
        os.close(os.open(target, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY | os.O_NONBLOCK))
    except OSError as exc:
        raise UsageError(
            f"{where}: cannot be written ({exc.strerror}); choose another path"
        ) from exc


def _check_creatable(folder: Path, where: str) -> None:
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(
            f"{where}: cannot create files under {folder} (permission denied); "
            "choose a writable folder"
        )
    probe = folder / f".regress-write-check-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise UsageError(
            f"{where}: cannot create files under {folder} ({exc.strerror}); "
            "choose a writable folder"
        ) from exc
    os.close(fd)
    os.unlink(probe)


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


def parse_yaml(text: str, *, what: str) -> Any:
    """``yaml.safe_load`` of a file the user named; malformed YAML is one line of bad input.

    PyYAML's own message spans up to eight lines (context, snippet, caret); the user needs where
    and what: ``line 3, column 1: expected ',' or ']', but got '<stream end>'``.

    Args:
        what: the file as the message should name it (``"baseline x.yaml"``).
    """
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"{what} is not valid YAML ({where}{problem}); fix the file") from None


def _is_descriptor_path(path: Path) -> bool:
    """``/proc/...`` (``/proc/self/fd/1``, kernel files): never resolved further, never replaced."""
    return path.parts[:2] == ("/", "proc")


def _umask() -> int:
    # os.umask can only be read by setting it; set it straight back.
    current = os.umask(0)
    os.umask(current)
    return current
