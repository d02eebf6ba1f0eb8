"""A machine without triton (``no_triton``: import the fixture) or torch (``without_torch_env``)."""

from __future__ import annotations

import importlib.abc
import os
import sys
from pathlib import Path

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


#: A ``sitecustomize`` that makes every ``import torch`` raise ImportError, as on a runner where
#: regress was installed without the torch extra.
_BLOCK_TORCH = 'import sys\nsys.modules["torch"] = None\n'


def without_torch_env(folder: Path) -> dict[str, str]:
    """The environment of a child Python (and of every Python it starts) that has no torch.

    The blocker is a ``sitecustomize`` written into ``folder`` and put first on ``PYTHONPATH``,
    so a probe, a guardian or a bisect the command starts has no torch either.
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(_BLOCK_TORCH)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
    return env
