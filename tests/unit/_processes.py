"""Process liveness for tests that check a bisect left no probe behind."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process; a zombie (exited, not yet reaped) is not.

    ``os.kill(pid, 0)`` succeeds on a zombie, so a test built on it alone passes only where
    PID 1 reaps orphans promptly; a container whose init does not would keep it "alive" forever.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: fall back to a signal probe
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    # the state follows the parenthesised command name, which may itself contain ") "
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def wait_for(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    """Poll ``predicate`` until it holds; fail after ``timeout`` seconds (generous: CI is loaded)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (read from ``/proc``)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
            out.append(int(entry.name))
    return out


def guardian_of(pid: int) -> int:
    """The pid of the guardian process ``pid`` started (regress.processes)."""
    from regress.guardian import GUARDIAN_NAME

    for child in children(pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if GUARDIAN_NAME.encode() in argv:
            return child
    raise AssertionError(f"process {pid} has no guardian")


def processes_in(folder: Path) -> list[int]:
    """Live processes whose working directory is ``folder`` or below it."""
    root = str(folder.resolve())
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not alive(int(entry.name)):
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd == root or cwd.startswith(root + os.sep):
            out.append(int(entry.name))
    return out
