"""Output paths that cannot be written, shared by the CLI tests of accept, demo and defects."""

from __future__ import annotations

from pathlib import Path

import regress.files as files


def blocked_path(tmp_path: Path) -> Path:
    """A path no one can write, root included: its parent is a file."""
    (tmp_path / "afile").write_text("not a folder")
    return tmp_path / "afile" / "out"


def fill_the_disk(monkeypatch) -> None:
    """Make every atomic write fail as a full disk does, after any up-front path check passed."""

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.tempfile, "mkstemp", full)
