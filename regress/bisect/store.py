"""Persisted probe results, keyed by commit and a hash of the probe configuration.

Layout under the bisect cache directory of one repository::

    results/<config-hash>.json   every run of that probe configuration, in execution order
    session.json                 the latest bisect started there (for log, status, resume)
    lock                         held (flock) while a bisect runs; released by the OS on kill -9

Every write replaces the whole file atomically (temp file, fsync, rename), so a kill -9 at any
moment leaves either the old or the new version, never half of one. Because the search is a pure
function of the verdicts it sees, resuming is replay: the same command asks for the same commits
in the same order, and the store answers from disk until it runs out.
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

from regress.bisect.verdicts import Outcome
from regress.errors import RegressError

SCHEMA = 1


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON so that readers see the old or the new file, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def config_hash(config: dict[str, Any]) -> str:
    """A stable short hash of everything that can change a probe's verdict."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


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
            data = read_json(self.path)
            if data.get("schema") != SCHEMA:
                raise RegressError(
                    f"{self.path} was written by another version of regress (schema "
                    f"{data.get('schema')}); remove it with `regress bisect reset`"
                )
            self.runs = [(r["commit"], Outcome.from_json(r["outcome"])) for r in data["runs"]]

    def outcomes(self, sha: str) -> list[Outcome]:
        return [o for c, o in self.runs if c == sha]

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


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold the cache directory's lock, or explain that another bisect is using it."""
    root.mkdir(parents=True, exist_ok=True)
    fh = open(root / "lock", "a+")  # noqa: SIM115 - held for the whole block
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise RegressError(
                f"another regress bisect is running on this repository (lock {root / 'lock'}); "
                "wait for it, or give this one another --cache-dir",
                exit_code=2,
            ) from exc
        yield
    finally:
        fh.close()


def session_path(root: Path) -> Path:
    return root / "session.json"
