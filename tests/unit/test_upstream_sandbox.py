"""The sandbox: package shells, strict stubs with call sites, CUDA on a CPU, per-era loading."""

from __future__ import annotations

import sys

import pytest
import torch
from _upstream_trees import build_tree, tree_files

from regress.sandbox import Ledger, SandboxGap
from regress.sandbox.cuda import cuda_on_cpu
from regress.sandbox.eras import Settings, all_values, plan_for
from regress.sandbox.shells import Sandbox
from regress.sandbox.stubs import StubModule
from regress.tree.source import resolve_source_tree


def _sandbox(root, era):
    plan = plan_for(resolve_source_tree(root))
    return plan, Sandbox(plan.checkout, plan.real, all_values(plan, Settings()))


@pytest.mark.parametrize(
    ("era", "module"),
    [
        ("A", "tensorrt_llm._torch.attention_backend.sparse.dsa"),
        ("B", "tensorrt_llm._torch.attention_backend.sparse.dsa.metadata"),
        ("C", "tensorrt_llm._torch.attention.backends.sparse.dsa.metadata"),
    ],
)
def test_each_era_loads_its_real_modules_without_package_inits(tmp_path, era, module):
    build_tree(tmp_path, era)
    plan, sandbox = _sandbox(tmp_path, era)
    assert plan.dsa_module == module
    with sandbox:
        loaded = sandbox.load(module)
        cls = loaded.DSAtrtllmAttentionMetadata
        # the real base classes came from the tree, not from stubs
        assert [c.__name__ for c in cls.__mro__[1:3]] == [
            "TrtllmAttentionMetadata",
            "AttentionMetadata",
        ]
        assert loaded.__file__.startswith(str(tmp_path))
    assert set(sandbox.ledger.real_modules) >= {module, *plan.real}
    shells = {f.name for f in sandbox.ledger.fakes.values() if f.kind == "shell"}
    assert "tensorrt_llm" in shells  # its __init__ imports compiled bindings: never executed
    assert "tensorrt_llm" not in sys.modules  # the sandbox left sys.modules as it found it


def test_era_c_executes_its_params_module_when_present(tmp_path):
    build_tree(tmp_path, "C")
    plan, _ = _sandbox(tmp_path, "C")
    assert "tensorrt_llm._torch.attention.backends.sparse.dsa.params" in plan.real


def test_a_stub_called_on_the_checked_path_names_the_upstream_call_site(tmp_path):
    files = tree_files("B")
    rel = "tensorrt_llm/_torch/attention_backend/sparse/dsa/indexer.py"
    text = (
        files[rel] + "\nfrom tensorrt_llm._utils import new_native_probe\n_X = new_native_probe()\n"
    )
    build_tree(tmp_path, "B")
    (tmp_path / rel).write_text(text)
    line = len(text.splitlines())
    plan, sandbox = _sandbox(tmp_path, "B")
    with sandbox, pytest.raises(SandboxGap) as err:
        sandbox.load(plan.dsa_module)
    assert err.value.exit_code == 3
    assert err.value.site == f"{rel}:{line} in <module>()"
    assert "tensorrt_llm._utils.new_native_probe" in str(err.value)


def test_a_stub_used_as_a_truth_value_is_a_gap_not_a_silent_true(tmp_path):
    build_tree(tmp_path, "B")
    _, sandbox = _sandbox(tmp_path, "B")
    with sandbox:
        mod = sandbox.load("tensorrt_llm.some_new_module")
        flag = mod.IS_SOMETHING_AVAILABLE
        with pytest.raises(SandboxGap, match="truth value"):
            bool(flag)
        # but it can be subclassed and used in annotations, as module-level code needs
        sub = type("Sub", (flag,), {})
        assert issubclass(sub, flag)
        assert mod.Generic[int] is mod.Generic


def test_values_from_the_table_are_handed_out_and_recorded(tmp_path):
    build_tree(tmp_path, "B")
    _, sandbox = _sandbox(tmp_path, "B")
    with sandbox:
        utils = sandbox.load("tensorrt_llm._utils")
        assert utils.prefer_pinned() is False
        assert utils.get_sm_version() == 90
    names = {f.name for f in sandbox.ledger.fakes.values() if f.kind == "value"}
    assert {"tensorrt_llm._utils.prefer_pinned", "tensorrt_llm._utils.get_sm_version"} <= names


def test_host_and_device_twins_never_alias():
    # Holds on CPU-only and CUDA torch alike: the patch being undone is checked by identity and
    # by the mode stack, not by CPU torch raising outside it (a GPU box answers instead).
    from torch.overrides import _get_current_function_mode_stack

    originals = (torch.cuda.is_current_stream_capturing, torch.cuda.current_device)
    ledger = Ledger()
    with cuda_on_cpu(ledger):
        host = torch.zeros(4, dtype=torch.int32, device="cpu", pin_memory=True)
        dev = host.cuda(non_blocking=True)
        moved = host.to("cuda")
        alloc = torch.empty(3, device="cuda")
        assert torch.cuda.is_current_stream_capturing() is False
    assert dev.data_ptr() != host.data_ptr() and moved.data_ptr() != host.data_ptr()
    dev += 1
    assert host.tolist() == [0, 0, 0, 0]  # a missing host-to-device copy stays visible
    assert alloc.device.type == "cpu"
    kinds = {f.name for f in ledger.fakes.values()}
    assert {"Tensor.cuda", "Tensor.to(cuda)", "torch.cuda.is_current_stream_capturing"} <= kinds
    assert (torch.cuda.is_current_stream_capturing, torch.cuda.current_device) == originals
    assert _get_current_function_mode_stack() == []  # the CUDA-on-CPU mode is gone too


def test_the_sandbox_restores_modules_that_were_there_before(tmp_path):
    build_tree(tmp_path, "B")
    sentinel = type(sys)("tensorrt_llm")
    sys.modules["tensorrt_llm"] = sentinel
    try:
        _, sandbox = _sandbox(tmp_path, "B")
        with sandbox:
            assert sys.modules.get("tensorrt_llm") is not sentinel
            sandbox.load("tensorrt_llm._utils")
        assert sys.modules["tensorrt_llm"] is sentinel
        assert "tensorrt_llm._utils" not in sys.modules
    finally:
        sys.modules.pop("tensorrt_llm", None)


def test_cuda_apis_with_no_cpu_meaning_are_faked_and_listed_then_restored():
    ledger = Ledger()
    real_event = torch.cuda.Event
    with cuda_on_cpu(ledger):
        event = torch.cuda.Event()
        event.record()
        assert event.query() is True
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            t = torch.zeros(3, device="cuda")
        t.record_stream(stream)
        torch.cuda.synchronize()
    assert torch.cuda.Event is real_event
    names = {f.name for f in ledger.fakes.values() if f.kind == "cuda"}
    assert {
        "torch.cuda.Event",
        "torch.cuda.Event.record",
        "torch.cuda.Stream",
        "torch.cuda.stream",
        "torch.cuda.synchronize",
        "Tensor.record_stream",
    } <= names
    if not torch.cuda.is_available():  # CPU torch: a dummy class again (CUDA torch: the real one)
        with pytest.raises(Exception):  # noqa: B017
            torch.cuda.Event()


def test_a_package_shell_reexports_only_names_of_modules_the_sandbox_runs(tmp_path):
    build_tree(tmp_path, "C")
    init = tmp_path / "tensorrt_llm/_torch/attention/backends/__init__.py"
    init.write_text(
        init.read_text()
        + "from .interface import AttentionMetadata\nfrom .flashinfer import FlashInferMetadata\n"
    )
    _, sandbox = _sandbox(tmp_path, "C")
    with sandbox:
        from tensorrt_llm._torch.attention.backends import AttentionMetadata

        assert AttentionMetadata.__module__.endswith("backends.interface")
        # .flashinfer is not executed: no value is invented, the name stays a strict stub
        from tensorrt_llm._torch.attention.backends import FlashInferMetadata

        assert isinstance(FlashInferMetadata, StubModule)
        with pytest.raises(SandboxGap):
            FlashInferMetadata()
