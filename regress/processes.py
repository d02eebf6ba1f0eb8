"""Nothing regress starts outlives it: SIGTERM as an interrupt, process groups, slot records.

One layer for each way regress can end:

* **SIGTERM** (a cancelled CI job, ``scancel``, ``timeout``) unwinds like Ctrl-C:
  :func:`sigterm_raises` turns it into :class:`regress.errors.Terminated` (a ``KeyboardInterrupt``)
  in the main thread, so every ``finally`` and every probe-killing ``except`` that Ctrl-C runs
  runs for it too; the CLI exits 143 (:data:`regress.errors.TERMINATED`).
* **Process groups**: every probe and build starts in its own session (``start_new_session``), so
  :func:`kill_group` takes down the whole tree it spawned, not only its first process;
  :func:`run_child` is :func:`subprocess.run` with that rule.
* **kill -9** runs no Python at all: the guardian process (:mod:`regress.guardian`) ends what is
  registered with it or carries its mark, and removes registered temp folders
  (:class:`WorkFolder`).
* **kill -9 of both** (an OOM kill takes regress and its guardian): a bisect's job slot records
  its probe's pid (:func:`record_process`), and a resumed bisect ends a probe a killed run left
  behind before it touches the slot (:func:`end_recorded`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from regress.errors import Terminated
from regress.guardian import KILL_GRACE_S, guardian


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`~regress.errors.Terminated` in the main thread.

    The first SIGTERM raises; later ones are ignored until the block ends, so a scheduler that
    sends TERM twice cannot cut the cleanup the first one started short (its SIGKILL, which
    follows, is the guardian's to answer). Outside the main thread (an embedding application)
    signals are left alone.
    """

    def handler(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def kill_group(proc: subprocess.Popen, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM ``proc``'s process group, then SIGKILL what is still there after ``grace`` seconds.

    ``proc`` must lead its own group (started with ``start_new_session=True``).
    """
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            # the leader is gone; make sure no child in its group outlives it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            return
        except subprocess.TimeoutExpired:
            continue


class WorkFolder:
    """The folder a command builds in, absolute, and gone afterwards unless ``keep``.

    ``folder`` None makes a new temp folder named ``prefix...``. A relative path is resolved now,
    against the current directory, so child processes that run elsewhere (a probe in its clone)
    find it. :meth:`close` (also after an error, Ctrl-C or SIGTERM; the guardian's after
    ``kill -9``) removes a folder this made, and empties one that already existed, which keeps
    existing: regress never deletes a folder it did not create.

    Use it as a context manager, or call :meth:`close` in a ``finally``.
    """

    def __init__(self, folder: str | os.PathLike[str] | None, *, prefix: str, keep: bool) -> None:
        import tempfile

        self.keep = keep
        self.made = folder is None or not os.path.lexists(folder)
        if folder is None:
            self.path = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
        else:
            self.path = Path(folder).expanduser().resolve()
            self.path.mkdir(parents=True, exist_ok=True)
        if not keep:
            guardian().remove_on_death(self.path, contents_only=not self.made)

    def close(self) -> None:
        if self.keep:
            return
        if self.made:
            shutil.rmtree(self.path, ignore_errors=True)
        else:
            _empty(self.path)
        guardian().keep(self.path, contents_only=not self.made)

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_child(
    argv: list[str],
    *,
    capture_output: bool = False,
    timeout: float | None = None,
    end_group: bool = False,
    **popen,
) -> subprocess.CompletedProcess:
    """:func:`subprocess.run` for a child that must not outlive regress.

    The child gets its own session (a terminal's Ctrl-C reaches regress only, which then ends
    the child's whole group: SIGTERM, so a child regress cleans up too, then SIGKILL after the
    grace period), carries the guardian's mark and is registered with it while it runs
    (``kill -9`` of regress ends it). After ``timeout`` seconds its group is ended and
    :class:`subprocess.TimeoutExpired` raised, as :func:`subprocess.run` does. ``end_group``: also
    SIGKILL what the child left in its group when it exits (a child that runs untrusted code).
    ``popen`` goes to :class:`subprocess.Popen` (``text``, ``stdout``, ``env``, ``cwd``...).
    """
    if capture_output:
        popen.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    popen["env"] = guardian().child_env(popen.get("env"))
    with subprocess.Popen(argv, start_new_session=True, **popen) as proc:
        guardian().watch_group(proc.pid)
        try:
            out, err = proc.communicate(timeout=timeout)
            if end_group:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
        except BaseException:
            kill_group(proc)
            raise
        finally:
            guardian().release_group(proc.pid)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _empty(folder: Path) -> None:
    for child in folder.iterdir() if folder.is_dir() else []:
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                child.unlink()


def record_process(path: Path, proc: subprocess.Popen, **about: str) -> None:
    """Write ``proc``'s pid (with its start time, so a reused pid is told apart) to ``path``."""
    record = {"pid": proc.pid, "started": _start_time(proc.pid), **about}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(json.dumps(record) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def end_recorded(path: Path, grace: float = KILL_GRACE_S) -> dict | None:
    """End the process group recorded in ``path`` if its leader still runs; remove the record.

    Returns:
        The record of a process that was still alive (and is now ended), else None.
    """
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        pid = int(record["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    ended = None
    if _leads_group(pid) and _start_time(pid) == record.get("started"):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)
            deadline = time.monotonic() + grace
            while _group_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        ended = record
    with contextlib.suppress(OSError):
        path.unlink()
    return ended


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid and not _zombie(pid)
    except ProcessLookupError:
        return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _leads_group(pgid) or _any_member(pgid)


def _any_member(pgid: int) -> bool:
    """Whether a live (not zombie) process other than a dead leader is in group ``pgid``."""
    proc = Path("/proc")
    if not proc.is_dir():
        return True  # no way to tell a zombie apart: the signal probe said yes
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _zombie(pid: int) -> bool:
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] in ("Z", "X")


def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), or None without ``/proc``."""
    fields = _stat_fields(pid)
    return fields[19] if fields else None


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/PID/stat`` after the command name: state, ppid, pgrp, ... (``proc(5)`` field 3 on)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()
