"""The suite's own settings (tests/conftest.py): file schedule under xdist, and malloc's settings."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import conftest
import pytest

HERE = Path(__file__).resolve().parent

#: ``mmapped()``: how many more bytes glibc holds in mmapped chunks (``mallinfo2().hblkhd``)
#: while a 64 MB block from malloc is live; run here and in a child.
_MMAPPED = """
import ctypes

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split())]

def mmapped():
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.mallinfo2.restype = Info
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(64 << 20)
    try:
        return libc.mallinfo2().hblkhd - before
    finally:
        libc.free(ctypes.c_void_p(block))
"""


def _child(env: dict[str, str]) -> int:
    argv = [sys.executable, "-c", _MMAPPED + "print(mmapped())"]
    return int(subprocess.run(argv, capture_output=True, text=True, check=True, env=env).stdout)


def test_every_slow_file_exists():
    """A renamed file would silently drop out of the schedule: it must be renamed here too."""
    assert [n for n in conftest.SLOW_FIRST if not (HERE / n).is_file()] == []


def test_slow_files_come_first_in_their_order_and_each_file_keeps_its_own():
    first, second = conftest.SLOW_FIRST[:2]
    items = [
        SimpleNamespace(path=HERE / name, name=f"{name}:{i}")
        for name, i in [("test_a.py", 0), (second, 0), ("test_b.py", 0), (first, 0), (second, 1)]
    ]
    conftest.pytest_collection_modifyitems(items)
    assert [i.name for i in items] == [
        f"{first}:0",
        f"{second}:0",
        f"{second}:1",
        "test_a.py:0",
        "test_b.py:0",
    ]


@pytest.mark.parametrize(
    ("given", "args", "dist", "reorder"),
    [
        ({"numprocesses": 2, "dist": "no"}, [], "loadfile", False),
        ({"numprocesses": "auto", "dist": "no"}, ["--loadscope-reorder"], "loadfile", True),
        ({"numprocesses": 2, "dist": "load"}, [], "load", True),  # asked for: kept
        ({"numprocesses": 2, "dist": "no", "distload": True}, [], "no", True),  # -d: xdist's
        ({"numprocesses": None, "dist": "no"}, [], "no", True),  # no -n: no distribution
        ({"numprocesses": 0, "dist": "no"}, [], "no", True),
    ],
)
def test_xdist_runs_whole_files_unless_another_mode_is_asked_for(given, args, dist, reorder):
    option = SimpleNamespace(**{"distload": False, "loadscopereorder": True, **given})
    config = SimpleNamespace(option=option, invocation_params=SimpleNamespace(args=args))
    conftest.pytest_cmdline_main(config)
    assert (option.dist, option.loadscopereorder) == (dist, reorder)


def test_without_xdist_the_schedule_is_left_alone():
    option = SimpleNamespace()  # -p no:xdist: none of its options exist
    conftest.pytest_cmdline_main(SimpleNamespace(option=option))
    assert vars(option) == {}


@pytest.mark.skipif(
    not hasattr(ctypes.CDLL(None), "mallinfo2"), reason="needs glibc >= 2.33 (mallinfo2)"
)
def test_large_allocations_stay_on_the_heap_here_and_in_children():
    """No 64 MB allocation is mmapped (and unmapped on free), here or in a child."""
    namespace: dict = {}
    exec(_MMAPPED, namespace)
    assert namespace["mmapped"]() == 0
    assert _child(dict(os.environ)) == 0
    without = {k: v for k, v in os.environ.items() if k not in conftest.MALLOC_ENV}
    assert _child(without) >= 64 << 20  # the control: glibc's default maps it
