"""What the sandbox keeps for the process (code objects, package answers) never outlives its cause.

Every matrix cell runs the same files in a sandbox of its own, so the sandbox compiles each file
once and answers "is this package installed" once per state of the import system; these tests
pin that a changed file, a fresh session or a hidden package is still seen as such.
"""

from __future__ import annotations

import importlib.abc
import sys

from _upstream_trees import build_tree, write_files

from regress.sandbox import Ledger
from regress.sandbox.eras import Settings, all_values, plan_for
from regress.sandbox.packages import installed
from regress.sandbox.shells import Sandbox
from regress.tree.source import resolve_source_tree

MODULE = "tensorrt_llm._torch.reuse_mod"
FILE = "tensorrt_llm/_torch/reuse_mod.py"


def _sandbox(root):
    plan = plan_for(resolve_source_tree(root))
    return Sandbox(
        plan.checkout, [*plan.real, MODULE], all_values(plan, Settings()), ledger=Ledger()
    )


def test_a_file_rewritten_between_sessions_runs_its_new_code(tmp_path):
    build_tree(tmp_path, "C")
    write_files(tmp_path, {FILE: "VALUE = 1\n"})
    with _sandbox(tmp_path) as sandbox:
        assert sandbox.load(MODULE).VALUE == 1
    write_files(tmp_path, {FILE: "VALUE = 22  # another version\n"})
    with _sandbox(tmp_path) as sandbox:
        assert sandbox.load(MODULE).VALUE == 22


def test_each_session_executes_the_module_afresh(tmp_path):
    """The code is shared, never the module: state one session left is not in the next."""
    build_tree(tmp_path, "C")
    write_files(tmp_path, {FILE: "CALLS = []\n"})
    for _ in range(2):
        with _sandbox(tmp_path) as sandbox:
            module = sandbox.load(MODULE)
            assert module.CALLS == []
            module.CALLS.append("session")


class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] == "json":
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def test_installed_follows_the_finders_it_was_asked_under(monkeypatch):
    monkeypatch.delitem(sys.modules, "json")  # not loaded: the finders decide
    assert installed("json")
    hide = _Hide()
    monkeypatch.setattr(sys, "meta_path", [hide, *sys.meta_path])
    assert not installed("json")
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if f is not hide])
    assert installed("json")
