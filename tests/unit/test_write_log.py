"""WriteLog: the line that last wrote each field, through views, out= and rebinds."""

from __future__ import annotations

from pathlib import Path

import torch

from regress.dsa.write_log import WriteLog

HERE = Path(__file__).resolve()


class _Meta:
    def __init__(self) -> None:
        self.buf = torch.zeros(6, dtype=torch.int32)
        self.indptr = torch.zeros(5, dtype=torch.int64)
        self.kv = torch.zeros(4, dtype=torch.int32)
        self.flags = torch.zeros(3, dtype=torch.int32)
        self.alias = self.buf


def _line(site: str) -> int:
    return int(site.rsplit(":", 1)[1].split(" ", 1)[0])


def _where(marker: str) -> int:
    return next(i for i, t in enumerate(HERE.read_text().splitlines(), 1) if t.endswith(marker))


def test_in_place_writes_and_rebinds_are_attributed_to_their_line():
    md = _Meta()
    log = WriteLog([HERE.parent])
    with log:
        log.watch(md)
        md.buf[:2].copy_(torch.tensor([7, 8], dtype=torch.int32))  # @copy
        torch.cumsum(torch.ones(4, dtype=torch.int64), 0, out=md.indptr[1:])  # @cumsum
        md.kv[:2] += 1  # @iadd
        md.flags[0] = 5  # @setitem
        md.fresh = torch.ones(2)  # @rebind
    assert log.last(md, "buf").startswith(f"{HERE.name}:")
    assert _line(log.last(md, "buf")) == _where("# @copy")
    assert _line(log.last(md, "alias")) == _where("# @copy")  # same storage, same writer
    assert _line(log.last(md, "indptr")) == _where("# @cumsum")
    assert _line(log.last(md, "flags")) == _where("# @setitem")
    assert _line(log.last(md, "kv")) == _where("# @iadd")
    assert _line(log.last(md, "fresh")) == _where("# @rebind")
    assert "test_in_place_writes_and_rebinds_are_attributed_to_their_line()" in log.last(md, "kv")


def test_the_class_is_restored_and_nothing_is_recorded_after_exit():
    md = _Meta()
    log = WriteLog()
    with log:
        log.watch(md)
        assert "__setattr__" in type(md).__dict__
    assert "__setattr__" not in type(md).__dict__
    md.buf.fill_(1)
    md.late = 1
    assert log.last(md, "buf") is None and log.last(md, "late") is None


def test_paused_writes_and_unwatched_objects_are_not_recorded():
    md, other = _Meta(), _Meta()
    log = WriteLog()
    with log:
        log.watch(md)
        with log.paused():
            md.buf.fill_(2)
        other.buf.fill_(3)
    assert log.sites(md) == {} and log.last(other, "buf") is None


def test_writes_in_another_thread_need_in_thread():
    """Torch function modes are per thread: upstream's worker runs in the caller's helper thread."""
    import threading

    md = _Meta()
    log = WriteLog([HERE.parent])

    def write(entered: bool) -> None:
        if entered:
            with log.in_thread():
                md.kv[:1] += 3  # @thread
        else:
            md.flags[:1] += 3

    with log:
        log.watch(md)
        for entered in (False, True):
            worker = threading.Thread(target=write, args=(entered,))
            worker.start()
            worker.join()
    assert log.last(md, "flags") is None  # not recorded outside in_thread
    assert _line(log.last(md, "kv")) == _where("# @thread")
