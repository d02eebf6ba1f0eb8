"""regress.files: the one writer (atomic for a regular file, in place for a device, FIFO, symlink
target or /dev/stdout), one file mode, and output paths checked before any work."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

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


# --- the one output writer: a regular file is replaced, anything else is written in place --------


def _node(tmp_path, name: str, minor: int):
    """A character device like /dev/null (1, 3) or /dev/full (1, 7), made in ``tmp_path``."""
    path = tmp_path / name
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here ({exc}); CI runs as root, where it can")
    return path


def test_a_device_is_written_in_place_and_never_replaced(tmp_path):
    null = _node(tmp_path, "null", 3)
    check_output_path(null, option="--json")
    write_atomic(null, "{}\n")
    write_json_atomic(null, {"a": 1})
    assert stat.S_ISCHR(os.stat(null).st_mode)
    assert os.stat(null).st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]  # no temp file either


def test_a_full_device_is_a_usage_error_naming_the_option_and_stays_a_device(tmp_path):
    from regress.files import write_output

    full = _node(tmp_path, "full", 7)
    with pytest.raises(
        UsageError, match=r"--json .*full: cannot write \(No space left on device\)"
    ):
        write_output(full, "{}\n", option="--json")
    assert stat.S_ISCHR(os.stat(full).st_mode)


def test_a_fifo_is_written_through_to_its_waiting_reader(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    check_output_path(fifo, option="--json")  # does not open it: the reader sees nothing yet
    write_atomic(fifo, '{"ok": true}\n')
    reader.join(timeout=60)
    assert got == [b'{"ok": true}\n']
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_symlink_is_followed_its_target_written_and_the_link_kept(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "report.json"
    target.write_text("old\n")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    check_output_path(link, option="--json")
    write_atomic(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["report.json"]
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "real" / "new.json")
    write_atomic(dangling, "made\n")
    assert dangling.is_symlink() and (tmp_path / "real" / "new.json").read_text() == "made\n"


def test_a_symlink_to_a_device_writes_the_device(tmp_path):
    null = _node(tmp_path, "null", 3)
    (tmp_path / "out").symlink_to(null)
    write_atomic(tmp_path / "out", "x")
    assert (tmp_path / "out").is_symlink() and stat.S_ISCHR(os.stat(null).st_mode)


def test_output_target_stops_at_proc_and_says_in_place(tmp_path):
    from regress.files import output_target

    assert output_target(tmp_path / "r.json") == (tmp_path / "r.json", False)
    twin = tmp_path / "stdout"  # made as /dev/stdout is; the real one is never touched here
    twin.symlink_to("/proc/self/fd/1")
    target, in_place = output_target(twin)
    assert in_place and target.parts[:2] == ("/", "proc")


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs /proc")
def test_a_file_under_proc_is_refused_before_the_run():
    with pytest.raises(UsageError, match=r"--json /proc/regress-nowhere.json: .*no file can be"):
        check_output_path("/proc/regress-nowhere.json", option="--json")


def test_the_up_front_check_creates_a_file_for_real_and_leaves_nothing(tmp_path, monkeypatch):
    # os.access says yes to root everywhere; the check must try. A folder where creating fails:
    real_open = os.open

    def refuse(path, flags, *args):
        if str(path).startswith(str(tmp_path / "ro")) and flags & os.O_CREAT:
            raise OSError(30, "Read-only file system", str(path))
        return real_open(path, flags, *args)

    (tmp_path / "ro").mkdir()
    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(UsageError, match="Read-only file system"):
        check_output_path(tmp_path / "ro" / "x.json", option="--json")
    monkeypatch.undo()
    check_output_path(tmp_path / "ok.json", option="--json")
    assert list((tmp_path / "ro").iterdir()) == [] and not (tmp_path / "ok.json").exists()
