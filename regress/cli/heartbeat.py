"""Progress lines on stderr that never go silent: a long command says it is alive every few seconds.

A bisect whose probe takes 10 minutes, or a demo step that trains for 19 s, used to print nothing
in between, and a user (or a CI watchdog) could not tell a working command from a hung one. The
library reports events (:mod:`regress.progress`); :class:`Heartbeat` is the CLI's renderer of
them: each event is a line, and when no event came for :data:`EVERY_S` seconds a thread says what
is still going on and for how long.
"""

from __future__ import annotations

import threading
import time

import click

#: Longest silence, in seconds, before the heartbeat speaks (the issue's bar is 5 s).
EVERY_S = 4.0


class Heartbeat:
    """Lines on stderr, and a "still ..." line after :data:`EVERY_S` seconds without one.

    Use as a context manager; :meth:`say` prints a line and tells what is going on now (``doing``:
    what the heartbeat repeats until the next line), :meth:`doing` changes that without a line.

    Args:
        prefix: the line's start, e.g. ``"regress bisect"``.
        every: seconds of silence before a heartbeat line.
        quiet: no heartbeat at all (``--quiet``); :meth:`say` still prints.
    """

    def __init__(self, prefix: str, *, every: float = EVERY_S, quiet: bool = False) -> None:
        self.prefix = prefix
        self.every = every
        self.quiet = quiet
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._last = time.monotonic()
        self._what = "working"
        self._since = self._last
        self._thread = threading.Thread(target=self._beat, name="regress-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        if not self.quiet:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def say(self, line: str, *, doing: str | None = None) -> None:
        """Print ``line`` (as it is) and, if given, what is going on from now on."""
        with self._lock:
            click.echo(line, err=True)
            self._last = time.monotonic()
            if doing is not None:
                self._what, self._since = doing, self._last

    def doing(self, what: str) -> None:
        """What the heartbeat says is going on, from now on (no line now)."""
        with self._lock:
            self._what, self._since = what, time.monotonic()

    def _beat(self) -> None:
        while not self._stop.wait(min(0.25, self.every / 4)):
            with self._lock:
                now = time.monotonic()
                if now - self._last < self.every:
                    continue
                click.echo(
                    f"{self.prefix}: still {self._what} ({now - self._since:.0f}s)", err=True
                )
                self._last = now
