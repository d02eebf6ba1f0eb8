"""The nightly history: one JSON line per (commit, date, configuration), appended atomically.

Layout of a store folder (keep it as a CI artifact or commit it to a repository)::

    history.jsonl   one entry per line: schema, commit, date, configuration, the whole report
    history.lock    held (flock) while an entry is checked and appended

An entry is appended with a single ``write`` on an ``O_APPEND`` descriptor, then fsync'd, under an
exclusive lock: two CI jobs adding at once never interleave, and a reader sees whole lines. A line
cut short by a crash can only be the last one and has no newline: readers ignore it and the next
append cuts it off first. Each line carries its schema; a reader
refuses a schema it does not know instead of guessing.

Duplicates are deliberate: adding the same report for the same (commit, date, configuration) again
changes nothing (a retried CI step), a *different* report for that key is refused unless
``replace`` (then the newer line wins when read back); the same commit on another date is another
night.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regress.acceptance.report import Report
from regress.acceptance.workload import workload_of
from regress.errors import UsageError
from regress.files import file_lock, json_digest

SCHEMA = 1
HISTORY = "history.jsonl"
LOCK = "history.lock"

# engine options that do not change what is measured
_IGNORED_ENGINE_KEYS = ("sentinel",)
# config keys besides the workload that do: the batch sizes measured and the engine's seed
_RUN_KEYS = ("batch_sizes", "seed")


def configuration_of(report: Mapping) -> dict[str, Any]:
    """What must agree for two nights to belong to one series (not the bootstrap or tolerance).

    The engine and model, the batch sizes and seed, and the workload as
    :mod:`regress.acceptance.workload` defines it for a baseline too (the prompts by content).
    """
    engine = {k: v for k, v in report["engine"].items() if k not in _IGNORED_ENGINE_KEYS}
    config = report["config"]
    return {
        "engine": engine,
        "model": report["model"],
        **{k: config.get(k) for k in _RUN_KEYS},
        **workload_of(config),
    }


def config_id(configuration: Mapping) -> str:
    """A short stable name of a configuration."""
    return json_digest(configuration, length=12)


def normalize_date(
    text: str | None, *, now: dt.datetime | None = None, option: str = "--date"
) -> str:
    """``YYYY-MM-DD`` or an ISO-8601 time as UTC ``YYYY-MM-DDTHH:MM:SSZ`` (default: now).

    Args:
        option: the option that carried ``text``, for the message (``--since`` in a check).

    Raises:
        UsageError: for anything else.
    """
    if text is None:
        moment = now or dt.datetime.now(dt.UTC)
    else:
        try:
            moment = dt.datetime.fromisoformat(text.strip())
        except ValueError as exc:
            raise UsageError(
                f"{option} {text!r} is not a date; give YYYY-MM-DD or an ISO-8601 time"
            ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Entry:
    """One night: a report, the commit it measured, when, and how to measure it again.

    Attributes:
        commit: the revision measured (a SHA, as CI knows it).
        date: the night, UTC ``YYYY-MM-DDTHH:MM:SSZ``.
        config_id: short name of ``configuration``; a series is one config_id.
        configuration: see :func:`configuration_of`.
        report: the acceptance report (``Report.to_dict()``).
        command: the argv that produced the report, if CI said (the bisect reruns it).
        added: when the line was written.
    """

    commit: str
    date: str
    config_id: str
    configuration: dict
    report: dict
    command: list[str] | None = None
    added: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.commit, self.date, self.config_id)

    def to_json(self) -> str:
        return json.dumps(
            {
                "schema": SCHEMA,
                "commit": self.commit,
                "date": self.date,
                "config_id": self.config_id,
                "configuration": self.configuration,
                "command": self.command,
                "added": self.added,
                "report": self.report,
            },
            sort_keys=True,
            separators=(",", ":"),
            allow_nan=False,
        )

    @classmethod
    def from_dict(cls, data: Mapping) -> Entry:
        """The entry of a stored line, its configuration derived afresh from its report.

        Every line keeps its whole report, so a store written under an older definition of the
        configuration groups by today's (the stored ``config_id`` is for other readers).
        """
        report = dict(data["report"])
        configuration = configuration_of(report)
        return cls(
            commit=data["commit"],
            date=data["date"],
            config_id=config_id(configuration),
            configuration=configuration,
            report=report,
            command=list(data["command"]) if data.get("command") else None,
            added=data.get("added", ""),
        )


class TrendStore:
    """A folder holding ``history.jsonl``; created on the first :meth:`add`."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.path = self.directory / HISTORY

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(file_lock(self.directory / LOCK))
            except OSError as exc:
                raise UsageError(
                    f"cannot use trend store {self.directory}: {exc.strerror}; pass a writable "
                    "--store"
                ) from exc
            yield

    def add(
        self,
        report: Report,
        *,
        commit: str,
        date: str | None = None,
        command: Sequence[str] | None = None,
        replace: bool = False,
    ) -> str:
        """Append one night; returns ``"added"``, ``"unchanged"`` or ``"replaced"``.

        Raises:
            UsageError: an empty commit, a bad date, or a different report already stored for
                this (commit, date, configuration) without ``replace``.
        """
        data = report.to_dict()
        commit = commit.strip()
        if not commit or any(c.isspace() for c in commit):
            raise UsageError(f"--commit {commit!r}: give the revision measured, e.g. a SHA")
        configuration = configuration_of(data)
        entry = Entry(
            commit=commit,
            date=normalize_date(date),
            config_id=config_id(configuration),
            configuration=configuration,
            report=data,
            command=list(command) if command else None,
            added=normalize_date(None),
        )
        made = not self.directory.exists()
        try:
            with self._locked():
                return self._add(entry, replace)
        except BaseException:
            self._undo_creation(made)
            raise

    def _add(self, entry: Entry, replace: bool) -> str:
        """Append ``entry`` unless the same night is stored (we hold the lock)."""
        stored = {e.key: e for e in self._read()}
        old = stored.get(entry.key)
        status = "added"
        if old is not None:
            if old.report == entry.report and old.command == entry.command:
                return "unchanged"
            if not replace:
                raise UsageError(
                    f"the store already holds a different report for commit {entry.commit} on "
                    f"{entry.date} (configuration {entry.config_id}); pass --replace to "
                    "supersede it, or --date for another night"
                )
            status = "replaced"
        self._append(entry.to_json() + "\n")
        return status

    def _append(self, line: str) -> None:
        data = line.encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            self._drop_torn_tail(fd)
            size = os.fstat(fd).st_size
            try:
                written = os.write(fd, data)  # one write: O_APPEND puts it at the end, whole
                if written != len(data):
                    raise OSError(errno.ENOSPC, f"short write ({written} of {len(data)} bytes)")
                os.fsync(fd)
            except OSError as exc:
                os.ftruncate(fd, size)  # no torn line, and no empty history left behind
                raise UsageError(
                    f"cannot write the trend store {self.path} ({exc.strerror or exc}); free "
                    "space on its device or pass another --store"
                ) from None
        finally:
            os.close(fd)

    def _undo_creation(self, made: bool) -> None:
        """After a failed add, remove the empty history, lock and folder that add created.

        A full disk used to leave an empty ``history.jsonl`` and a lock behind, so the next
        ``trend check`` found a store "holding no nights" instead of no store.
        """
        with contextlib.suppress(OSError):
            if self.path.exists() and self.path.stat().st_size == 0:
                self.path.unlink()
            if not self.path.exists():
                (self.directory / LOCK).unlink(missing_ok=True)
            if made:
                self.directory.rmdir()

    def _drop_torn_tail(self, fd: int) -> None:
        """Cut a last line a crash left without its newline (we hold the lock)."""
        size = os.fstat(fd).st_size
        if not size:
            return
        with open(self.path, "rb") as fh:
            text = fh.read()
        if text.endswith(b"\n"):
            return
        os.ftruncate(fd, text.rfind(b"\n") + 1)

    def _read(self) -> list[Entry]:
        try:
            text = self.path.read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise UsageError(f"cannot read trend store {self.path}: {exc.strerror}") from exc
        lines = text.split("\n")
        out = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError as exc:
                if number == len(lines):
                    continue  # no newline after it: an append a crash cut short
                raise UsageError(
                    f"{self.path}:{number}: not a trend entry ({exc}); the file was edited or "
                    "damaged: remove that line"
                ) from exc
            schema = data.get("schema") if isinstance(data, dict) else None
            if schema != SCHEMA:
                raise UsageError(
                    f"{self.path}:{number}: entry schema {schema!r}, this regress reads schema "
                    f"{SCHEMA}; upgrade regress or start a new --store"
                )
            try:
                out.append(Entry.from_dict(data))
            except (KeyError, TypeError) as exc:
                raise UsageError(f"{self.path}:{number}: malformed trend entry ({exc!r})") from exc
        return out

    def entries(self) -> list[Entry]:
        """Every night, the newest line per (commit, date, configuration), by date then order."""
        latest: dict[tuple[str, str, str], tuple[int, Entry]] = {}
        for order, entry in enumerate(self._read()):
            first = latest.get(entry.key, (order, entry))[0]
            latest[entry.key] = (first, entry)
        return [e for _, e in sorted(latest.values(), key=lambda oe: (oe[1].date, oe[0]))]

    def by_configuration(self) -> dict[str, list[Entry]]:
        """Entries grouped by configuration id, each group in night order."""
        groups: dict[str, list[Entry]] = {}
        for entry in self.entries():
            groups.setdefault(entry.config_id, []).append(entry)
        return groups
