"""Nothing regress starts outlives it: SIGTERM as an interrupt, process groups, the guardian.

Three layers, each for a way regress can end:

* **SIGTERM** (a cancelled CI job, ``scancel``, ``timeout``) unwinds like Ctrl-C:
  :func:`sigterm_raises` turns it into :class:`regress.errors.Terminated` (a ``KeyboardInterrupt``)
  in the main thread, so every ``finally`` and every probe-killing ``except`` that Ctrl-C runs
  runs for it too; the CLI exits 143 (:data:`regress.errors.TERMINATED`).
* **Process groups**: every probe and build starts in its own session (``start_new_session``), so
  :func:`kill_group` takes down the whole tree it spawned, not only its first process.
* **kill -9** runs no Python at all, so a separate, tiny **guardian** process (:func:`guardian`)
  watches this one through a pipe. Whatever is registered with it (the process groups of the
  probes in flight, the temp folders of a demo) is ended and removed when the pipe closes without
  having been released, which the kernel does when this process dies, however it dies. Every
  process regress starts also carries the guardian's token in its environment
  (:data:`GUARDIAN_ENV`, :meth:`Guardian.child_env`), and the guardian ends those too: a probe
  killed in the moment between its start and its registration, or a process it moved into a
  group of its own, is found by the mark. The
  guardian is plain standard-library Python started with ``-S -I`` (about 20 ms), imports
  nothing of regress, ignores SIGINT, SIGTERM and SIGHUP (a terminal's Ctrl-C must not take it
  down before it is needed) and lives in its own session, so a signal to this process group
  spares it.

A bisect's job slot also records its probe's pid (:func:`record_process`): a resumed bisect
whose guardian died too (an OOM kill takes both) ends a probe a killed run left behind before it
touches the slot (:func:`end_recorded`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from regress.errors import Terminated

#: Seconds a process group has between SIGTERM and SIGKILL.
KILL_GRACE_S = 5.0

#: The guardian's argv marker (``ps`` shows it; tests find the guardian by it).
GUARDIAN_NAME = "regress-guardian"

#: Environment variable that marks every process regress starts: the tokens of the guardians
#: whose regress started it (space separated; a regress started by a regress adds its own).
GUARDIAN_ENV = "REGRESS_GUARDIANS"

# The guardian: read "+g PGID", "-g PGID", "+d DIR", "-d DIR", "+c DIR", "-c DIR" lines until EOF,
# then end every group still registered, and the group of every process whose environment
# carries this guardian's token (argv[3]; that covers a probe killed between its start and its
# registration, and what it spawned into other groups), with TERM, a grace period, KILL; then
# remove every folder (+d) or folder's contents (+c) still registered. Standard library only.
_GUARDIAN = r"""
import os, shutil, signal, sys, time
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
held = {"g": set(), "d": set(), "c": set()}
for raw in sys.stdin.buffer:
    line = raw.decode("utf-8", "surrogateescape").rstrip("\n")
    if len(line) > 3 and line[0] in "+-" and line[1] in held:
        (held[line[1]].add if line[0] == "+" else held[line[1]].discard)(line[3:])
mark = ("%s=" % sys.argv[4]).encode()
token = sys.argv[3].encode()
mine = os.getpgid(0)
for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
    try:
        with open("/proc/" + pid + "/environ", "rb") as fh:
            env = fh.read().split(b"\0")
        tokens = [v[len(mark):].split() for v in env if v.startswith(mark)]
        if tokens and token in tokens[0] and os.getpgid(int(pid)) != mine:
            held["g"].add(str(os.getpgid(int(pid))))
    except (OSError, ValueError):
        continue
def alive(group):
    try:
        os.killpg(group, 0)
    except OSError:
        return False
    if not os.path.isdir("/proc"):
        return True
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/" + pid + "/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == group and fields[0] not in "ZX":
            return True
    return False
groups = [int(g) for g in held["g"]]
for sig in (signal.SIGTERM, signal.SIGKILL):
    for g in groups:
        try:
            os.killpg(g, sig)
        except OSError:
            pass
    deadline = time.monotonic() + float(sys.argv[2])
    while any(alive(g) for g in groups) and time.monotonic() < deadline:
        time.sleep(0.05)
for d in held["d"]:
    shutil.rmtree(d, ignore_errors=True)
for d in held["c"]:
    for child in os.listdir(d) if os.path.isdir(d) else []:
        path = os.path.join(d, child)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass
"""


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


class Guardian:
    """The watcher process that ends and removes what this one registered, should it die.

    Started on the first registration. Every method is safe to call from several threads; if the
    guardian cannot start (no ``sys.executable``, no fork), registrations are dropped and the
    in-process cleanup is all there is.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._failed = False
        self._owner = 0
        self.token = ""

    def child_env(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """``env`` (default: this process's) marked for this guardian; starts the guardian.

        Give it to every process started on regress's behalf: whatever carries the mark when
        regress dies is ended, even one that started a moment before it was registered.
        """
        with self._lock:
            self._started()
            token = self.token
        out = dict(os.environ if env is None else env)
        if token:
            out[GUARDIAN_ENV] = " ".join([*out.get(GUARDIAN_ENV, "").split(), token])
        return out

    def watch_group(self, pgid: int) -> None:
        """End process group ``pgid`` if this process dies before :meth:`release_group`."""
        self._send(f"+g {pgid}")

    def release_group(self, pgid: int) -> None:
        self._send(f"-g {pgid}")

    def remove_on_death(self, folder: Path, *, contents_only: bool = False) -> None:
        """Remove ``folder`` (or only what is inside it) if this process dies before :meth:`keep`."""
        self._send(f"+{'c' if contents_only else 'd'} {folder}")

    def keep(self, folder: Path, *, contents_only: bool = False) -> None:
        self._send(f"-{'c' if contents_only else 'd'} {folder}")

    @property
    def pid(self) -> int | None:
        """The guardian's pid, once started."""
        return self._proc.pid if self._proc is not None else None

    def _send(self, line: str) -> None:
        with self._lock:
            proc = self._started()
            if proc is None or proc.stdin is None:
                return
            try:  # one short write per line: below PIPE_BUF, so lines never interleave
                os.write(proc.stdin.fileno(), (line + "\n").encode("utf-8", "surrogateescape"))
            except OSError:
                self._failed = True

    def _started(self) -> subprocess.Popen[bytes] | None:
        if self._owner != os.getpid():  # a forked child must not share its parent's guardian
            self._proc, self._failed, self._owner = None, False, os.getpid()
            self.token = ""
        if self._proc is not None or self._failed:
            return self._proc
        token = secrets.token_hex(8)
        argv = [GUARDIAN_NAME, str(KILL_GRACE_S), token, GUARDIAN_ENV]
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-S", "-I", "-c", _GUARDIAN, *argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError:
            self._failed = True
            return None
        self.token = token
        atexit.register(self._close)
        return self._proc

    def _close(self) -> None:
        """At a normal exit everything was released: close the pipe and reap the guardian."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None or proc.stdin is None:
            return
        with contextlib.suppress(OSError):
            proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KILL_GRACE_S * 2 + 1)


_GUARDIAN_INSTANCE = Guardian()


def guardian() -> Guardian:
    """This process's guardian (one per process)."""
    return _GUARDIAN_INSTANCE


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
    argv: list[str], *, capture_output: bool = False, **popen
) -> subprocess.CompletedProcess:
    """:func:`subprocess.run` for a child that must not outlive regress.

    The child gets its own session (a terminal's Ctrl-C reaches regress only, which then ends
    the child's whole group: SIGTERM, so a child regress cleans up too, then SIGKILL after the
    grace period) and is registered with the guardian while it runs (``kill -9`` of regress ends
    it). ``popen`` goes to :class:`subprocess.Popen` (``text``, ``stdout``, ``env``, ``cwd``...).
    """
    if capture_output:
        popen.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    popen["env"] = guardian().child_env(popen.get("env"))
    with subprocess.Popen(argv, start_new_session=True, **popen) as proc:
        guardian().watch_group(proc.pid)
        try:
            out, err = proc.communicate()
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
