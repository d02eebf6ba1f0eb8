"""regress.files: atomic writes with one file mode, and output paths checked before any work."""

from __future__ import annotations

import os
import stat

import pytest

from regress.errors import UsageError
from regress.files import (
    check_output_path,
    file_lock,
    json_digest,
    lock_held,
    write_atomic,
    write_json_atomic,
)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_write_atomic_replaces_and_leaves_no_temp_file(tmp_path):
    target = tmp_path / "sub" / "report.json"
    write_json_atomic(target, {"b": 1, "a": 2})
    write_atomic(target, "second\n")
    assert target.read_text() == "second\n"
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]


def test_write_atomic_uses_the_regular_file_mode_not_mkstemps_0600(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_atomic(tmp_path / "r.txt", b"x")
    finally:
        os.umask(old)
    assert _mode(path) == 0o644


def test_write_atomic_removes_its_temp_file_when_the_write_fails(tmp_path, monkeypatch):
    def boom(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(tmp_path / "r.txt", "x")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", [None, "-"])
def test_stdout_and_absent_paths_pass(value):
    assert check_output_path(value, option="--json") is None


def test_a_new_file_under_missing_folders_passes(tmp_path):
    assert (
        check_output_path(tmp_path / "a" / "b.json", option="--json") == tmp_path / "a" / "b.json"
    )


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(UsageError, match=r"--json .*is a folder"):
        check_output_path(tmp_path, option="--json")


def test_a_path_under_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match="not a folder"):
        check_output_path(tmp_path / "f" / "x.json", option="--plot")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_folder_is_refused(tmp_path):  # pragma: no cover - CI runs as root
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(UsageError, match="permission denied"):
        check_output_path(locked / "x.json", option="-o")


def test_an_unwritable_folder_is_refused_even_for_root(tmp_path, monkeypatch):
    # CI runs as root, for whom os.access says yes to everything: simulate the answer a user gets.
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(UsageError, match="permission denied"):
        check_output_path(tmp_path / "x.json", option="-o")


def test_json_digest_names_a_value_not_its_spelling():
    assert json_digest({"a": 1, "b": [1, 2]}) == json_digest({"b": [1, 2], "a": 1})
    assert json_digest({"a": 1}) != json_digest({"a": 2})
    assert len(json_digest({"a": 1}, length=12)) == 12


def test_file_lock_is_exclusive_and_released_on_exit(tmp_path):
    path = tmp_path / "sub" / "lock"
    assert not lock_held(path)  # no file yet: nothing holds it
    with file_lock(path):
        assert lock_held(path)
        with pytest.raises(BlockingIOError), file_lock(path, wait=False):
            pass
    assert not lock_held(path)
