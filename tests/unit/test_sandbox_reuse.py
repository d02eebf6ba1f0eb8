"""What the sandbox keeps for the process (code objects, package answers) never outlives its cause.

Every matrix cell runs the same files in a sandbox of its own, so the sandbox compiles each file
once and answers "is this package installed" once per state of the import system; these tests
pin that a changed file, a fresh session or a hidden package is still seen as such.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import subprocess
import sys

import pytest
from _upstream_trees import build_caller_tree, build_tree, write_files

from regress.sandbox import Ledger
from regress.sandbox.eras import Settings, all_values, plan_for
from regress.sandbox.packages import installed
from regress.sandbox.shells import Sandbox
from regress.tree.source import resolve_source_tree

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="whether triton is imported matters only where it is installed",
)
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


#: Run in a fresh interpreter (this one may have imported triton already): a check of a tree none
#: of whose real modules mentions triton leaves it unimported; a kernel module added to a session
#: later (as the worker catalog and the runner add theirs) still has its launches counted.
_FRESH = """
import sys
import torch
from pathlib import Path
from regress.check.check import run_check
from regress.sandbox import Ledger
from regress.sandbox.eras import Settings, all_values, plan_for
from regress.sandbox.shells import Sandbox
from regress.tree.source import resolve_source_tree

plain, fused = Path(sys.argv[1]), Path(sys.argv[2])
report = run_check(plain, scenarios=["req_idx_map"])
# triton._C stays in sys.modules after a session (its interpreted Python modules are set aside)
print("plain", report.status, any(n.partition(".")[0] == "triton" for n in sys.modules))
plan = plan_for(resolve_source_tree(fused))
kernel = next(m for m in plan.real if m.endswith("fused_metadata"))
ledger = Ledger()
real = [m for m in plan.real if m != kernel]
with Sandbox(plan.checkout, real, all_values(plan, Settings()), ledger=ledger) as sandbox:
    sandbox.add_real([kernel])
    out = torch.full((3,), -1, dtype=torch.int32)
    sandbox.load(kernel).fused_dsa_decode_metadata(torch.tensor([1, 2], dtype=torch.int32), out)
print("fused", out.tolist(), sorted(f.name.rsplit(".", 1)[1] for f in ledger.fakes.values()
                                  if f.kind == "triton"))
"""


@needs_triton
def test_triton_is_imported_only_for_a_tree_that_may_launch_a_kernel(tmp_path):
    plain = build_caller_tree(tmp_path / "plain")
    fused = build_caller_tree(tmp_path / "fused", fused="old")
    done = subprocess.run(
        [sys.executable, "-c", _FRESH, str(plain), str(fused)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-2:] == ["plain pass False", "fused [0, 1, 1] ['_req_idx_kernel']"], done.stdout
