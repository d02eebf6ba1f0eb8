"""The guardian: a tiny watcher process that ends what regress started if regress is killed -9.

``kill -9`` runs no Python at all, so cleanup cannot happen in the dying process. The guardian,
started on first use, watches it through a pipe: whatever is registered with it (the process
groups of the probes in flight, the temp folders of a demo) is ended and removed when the pipe
closes without having been released, which the kernel does when regress dies, however it dies.
Every process regress starts also carries the guardian's token in its environment
(:data:`GUARDIAN_ENV`, :meth:`Guardian.child_env`), and the guardian ends those too: a probe
killed in the moment between its start and its registration, or a process it moved into a group
of its own, is found by the mark.

The guardian is plain standard-library Python started with ``-S -I`` (about 20 ms), imports
nothing of regress, ignores SIGINT, SIGTERM and SIGHUP (a terminal's Ctrl-C must not take it down
before it is needed) and lives in its own session, so a signal to regress's process group spares
it. :mod:`regress.processes` holds the rest of "nothing we start outlives us".
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

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
