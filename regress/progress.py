"""The one progress callback type: the library reports ``Progress[Event]``, the CLI renders it.

Long work (a bisect, a profile, ``regress check``, the demo) takes an optional ``progress``
callback and calls it with one event record per update; what the record holds is the caller's
own (``BisectProgress``, ``ProfileProgress``, ``DemoEvent``, a line of text). The library never
prints: the CLI decides whether an event becomes a progress bar, a line on stderr or nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

Event = TypeVar("Event")

#: ``progress(event)``: called from the library, synchronously, once per update.
Progress = Callable[[Event], None]
