"""A machine without triton, for the tests that need one (``no_triton``: import the fixture)."""

from __future__ import annotations

import importlib.abc
import sys

import pytest


class _Hide(importlib.abc.MetaPathFinder):
    """A machine without triton: the package cannot be found."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] == "triton":
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


@pytest.fixture
def no_triton(monkeypatch):
    for name in [n for n in sys.modules if n.partition(".")[0] == "triton"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_Hide(), *sys.meta_path])
