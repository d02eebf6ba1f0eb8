"""Persisted probe results, keyed by commit and a hash of the probe configuration.

Layout under the bisect cache directory of one repository::

    results/<config-hash>.json   every run of that probe configuration, in execution order
    session.json                 the latest bisect started there (for log, status, resume)
    lock                         held (flock) while a bisect runs; released by the OS on kill -9

Every write replaces the whole file atomically (:func:`regress.files.write_json_atomic`), so a
kill -9 at any moment leaves either the old or the new version, never half of one. Because the
search is a pure function of the verdicts it sees, resuming is replay: the same command asks for
the same commits in the same order, and the store answers from disk until it runs out.

Two rules keep a stored result from outliving the probe that produced it: the key covers the
*content* of every file the probe command names (:func:`file_digests`), so a probe fixed in place
is a new configuration; and a run that says the probe did not run at all (could not start, not
executable, command not found) is kept for ``bisect log`` but never replayed (:func:`replayable`),
so fixing the cause outside the key (``chmod +x``, installing a tool) is believed at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import shlex
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from regress import files
from regress.bisect.causes import DID_NOT_RUN
from regress.bisect.verdicts import Outcome
from regress.errors import RegressError, UsageError
from regress.files import file_lock, json_digest, read_record, write_json_atomic

SCHEMA = 1
#: What to do about a damaged stored file (the results file or the session record).
RESET_FIX = "remove it with `regress bisect reset` (the stored runs are lost; rerun the bisect)"

#: Files the probe command names are keyed by content up to this size, by size and mtime above
#: it (a checkpoint passed as an argument should not cost a full read per run).
HASHED_FILE_BYTES = 64 << 20


def config_hash(config: dict[str, Any]) -> str:
    """A stable short hash of everything that can change a probe's verdict."""
    return json_digest(config, length=16)


def file_digests(argv: Sequence[str], repo_root: Path) -> list[list[str]]:
    """``[word, digest]`` for every word of ``argv`` that names a regular file.

    Absolute paths are read where they are; relative ones against the repository root, the
    place the probe's private clone mirrors. A relative file is what the *user* sees in their
    checkout (the clone runs the committed one): keying on it too only ever reruns more.
    """
    out = []
    for word in argv:
        path = Path(word).expanduser()
        path = path if path.is_absolute() else repo_root / path
        try:
            if not path.is_file():
                continue
            stat = path.stat()
            if stat.st_size > HASHED_FILE_BYTES:
                digest = f"size={stat.st_size},mtime_ns={stat.st_mtime_ns}"
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        except OSError:  # unreadable: the run will say so; the word itself is in the key
            continue
        out.append([word, digest])
    return out


def probe_files(command: Sequence[str], build: str | None, repo_root: Path) -> list[list[str]]:
    """:func:`file_digests` of the probe command and of the words of the ``--build`` line."""
    try:
        words = shlex.split(build or "")
    except ValueError:  # not a word list: its text alone is in the key
        words = []
    return file_digests([*command, *words], repo_root)


def replayable(outcome: Outcome) -> bool:
    """False for a run in which the probe never ran: replaying it would outlive its fix."""
    if outcome.details.get(DID_NOT_RUN):
        return False
    # results stored before the marker existed
    return not outcome.reason.startswith("could not start")


class ResultStore:
    """All runs of one probe configuration in one repository.

    Args:
        root: the repository's bisect cache directory.
        key: :func:`config_hash` of the probe configuration.
        config: the configuration itself, kept in the file for humans.
        persist: ``False`` (``--no-cache``) keeps results in memory only and reads nothing.
    """

    def __init__(self, root: Path, key: str, config: dict[str, Any], *, persist: bool = True):
        self.path = root / "results" / f"{key}.json"
        self.key = key
        self.config = config
        self.persist = persist
        self.runs: list[tuple[str, Outcome]] = []
        if persist and self.path.exists():
            data = read_record(self.path, what="bisect results file", fix=RESET_FIX)
            if data.get("schema") != SCHEMA:
                raise RegressError(
                    f"{self.path} was written by another version of regress (schema "
                    f"{data.get('schema')}); remove it with `regress bisect reset`"
                )
            try:
                self.runs = [(r["commit"], Outcome.from_json(r["outcome"])) for r in data["runs"]]
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise UsageError(
                    f"the bisect results file {self.path} is damaged (a run lacks {exc}); {RESET_FIX}"
                ) from None

    def outcomes(self, sha: str) -> list[Outcome]:
        """The stored runs at ``sha`` that may be replayed (see :func:`replayable`)."""
        return [o for c, o in self.runs if c == sha and replayable(o)]

    def add(self, sha: str, outcome: Outcome) -> None:
        self.runs.append((sha, outcome))
        if self.persist:
            write_json_atomic(
                self.path,
                {
                    "schema": SCHEMA,
                    "key": self.key,
                    "config": self.config,
                    "runs": [{"commit": c, "outcome": o.to_json()} for c, o in self.runs],
                },
            )


class Replay:
    """Answers from the store first (resume), then from live runs that it records.

    Each commit's stored outcomes are handed out in order, once each per session, so a
    deterministic search repeats exactly the questions it asked before an interruption and no
    decided probe runs twice.
    """

    def __init__(self, store: ResultStore) -> None:
        self.store = store
        self.used: dict[str, int] = {}
        self.replayed = 0

    def cached(self, sha: str) -> Outcome | None:
        done = self.store.outcomes(sha)
        i = self.used.get(sha, 0)
        if i < len(done):
            self.used[sha] = i + 1
            self.replayed += 1
            return done[i]
        return None

    def record(self, sha: str, outcome: Outcome) -> None:
        self.store.add(sha, outcome)
        self.used[sha] = self.used.get(sha, 0) + 1


def lock_held(root: Path) -> bool:
    """Whether a live process holds ``root``'s lock (a bisect killed with -9 holds none)."""
    return files.lock_held(root / "lock")


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold the cache directory's lock, or explain that another bisect is using it."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(file_lock(root / "lock", wait=False))
        except BlockingIOError as exc:
            raise RegressError(
                f"another regress bisect is running on this repository (lock {root / 'lock'}); "
                "wait for it, or give this one another --cache-dir",
                exit_code=2,
            ) from exc
        yield


def session_path(root: Path) -> Path:
    return root / "session.json"
