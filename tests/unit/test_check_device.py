"""``regress check --device``: the plumbing of the native mode, tested on a CPU.

The native run itself (upstream's CUDA tensors and Triton kernels on a GPU, the CPU's verdicts) is
``tests/integration/test_check_native.py``, on the H200 stage. Here: which mode a session picks
(Triton's environment, the placement in threads, the executor's tensors), what the ledger and the
report say, that the device travels to the child, and that ``--device cuda`` on a machine without
CUDA is bad input (one line, exit 2, before anything runs).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from types import SimpleNamespace

import pytest
from _cli import one_line_exit_2
from _upstream_trees import build_tree
from click.testing import CliRunner

from regress.check import isolation
from regress.check.check import run_check
from regress.check.report import CheckReport
from regress.check.summary import markdown
from regress.cli import cli
from regress.errors import UsageError
from regress.sandbox import Ledger, cuda, packages
from regress.sandbox.eras import Settings, all_values, plan_for
from regress.sandbox.shells import Sandbox
from regress.tree.source import resolve_source_tree


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


no_cuda = pytest.mark.skipif(_has_cuda(), reason="this machine has CUDA: --device cuda is valid")
needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="triton is not installed"
)


# --- which mode a session picks ------------------------------------------------------------


@needs_triton
@pytest.mark.parametrize(("device", "value"), [("cpu", "1"), ("cuda", None)])
def test_triton_is_interpreted_on_a_cpu_and_native_on_a_gpu(device, value):
    found = packages.Packages.detect(("triton",), device=device)
    assert found.interpret is (device == "cpu")
    assert found.env() == {"TRITON_INTERPRET": value}  # None: unset, an ambient 1 removed
    why = found.env_why()["TRITON_INTERPRET"]
    assert ("interpreter" in why) is (device == "cpu") and ("natively" in why) is (device == "cuda")


@needs_triton
def test_a_native_session_counts_launches_as_native(monkeypatch):
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    for cls in (InterpretedFunction, JITFunction):  # no real launch: the counting is tested
        monkeypatch.setattr(cls, "run", lambda self, *a, **k: "launched")
    kernel = SimpleNamespace(fn=test_a_native_session_counts_launches_as_native)
    for interpret, how in ((False, packages.HOW_NATIVE), (True, packages.HOW_INTERPRETED)):
        ledger = Ledger()
        with packages.kernel_launches(ledger, interpret):
            assert JITFunction.run(kernel) == "launched"
        [launch] = [f for f in ledger.fakes.values() if f.kind == "triton"]
        assert launch.detail == how and launch.count == 1
    assert "natively on the GPU" in packages.HOW_NATIVE
    assert "interpreter" in packages.HOW_INTERPRETED


def test_torch_compile_says_why_it_is_the_identity_on_each_device():
    cpu = packages.Packages(("triton",), (), (), interpret=True)
    gpu = packages.Packages(("triton",), (), (), interpret=False)
    assert "tensors are on the CPU" in packages.compile_reason(cpu)
    assert "on the GPU" in packages.compile_reason(gpu)
    assert "CPU" not in packages.compile_reason(gpu)


def test_threads_rewrite_placement_only_outside_a_native_session(monkeypatch):
    ledger = Ledger()
    assert type(cuda.device_mode(ledger)).__name__ == "CudaOnCpu"
    monkeypatch.setattr(cuda, "_native_sessions", 1)
    assert type(cuda.device_mode(ledger)).__name__ == "nullcontext"


def test_the_executors_tensors_stay_on_the_cpu_outside_a_native_session():
    import torch

    fake = SimpleNamespace(ids=torch.arange(3), name="x")
    assert cuda.on_executor_device(fake) is fake and fake.ids.device.type == "cpu"
    t = torch.zeros(2)
    assert cuda.on_executor_device(t) is t


def test_the_sandbox_places_cuda_by_its_device(tmp_path):
    plan = plan_for(resolve_source_tree(build_tree(tmp_path)))
    for device in ("cpu", "cuda"):
        box = Sandbox(plan.checkout, plan.real, all_values(plan, Settings()), device=device)
        assert box.device == device and box.packages.interpret is (device == "cpu")
    assert cuda.placement(Ledger(), "cuda").gen.__name__ == "native_cuda"
    assert cuda.placement(Ledger(), "cpu").gen.__name__ == "cuda_on_cpu"


# --- no CUDA here: bad input, before anything runs ------------------------------------------


@no_cuda
def test_a_native_sandbox_without_cuda_refuses_and_restores_everything(tmp_path):
    plan = plan_for(resolve_source_tree(build_tree(tmp_path)))
    env = dict(os.environ)
    box = Sandbox(plan.checkout, plan.real, all_values(plan, Settings()), device="cuda")
    with pytest.raises(UsageError, match="--device cuda: torch sees no CUDA device"), box:
        pass
    assert dict(os.environ) == env
    assert not any(n.startswith("tensorrt_llm") for n in sys.modules)
    assert box._finder not in sys.meta_path


@no_cuda
def test_check_device_cuda_without_cuda_is_one_line_and_exit_2(tmp_path):
    out = tmp_path / "report.json"
    args = ["check", "--trtllm-src", str(build_tree(tmp_path / "tree")), "--device", "cuda"]
    line = one_line_exit_2(CliRunner().invoke(cli, [*args, "--json", str(out)]))
    assert "--device cuda" in line and "use --device cpu" in line
    assert not out.exists()


def test_an_unknown_device_is_one_line_and_exit_2(tmp_path):
    args = ["check", "--trtllm-src", str(tmp_path), "--device", "gpu"]
    assert "--device" in one_line_exit_2(CliRunner().invoke(cli, args))


@no_cuda
def test_no_child_starts_for_a_device_the_machine_lacks(tmp_path, monkeypatch):
    def spawn(*args):
        raise AssertionError("a child started")

    monkeypatch.setattr(isolation, "_spawn", spawn)
    with pytest.raises(UsageError, match="--device cuda"):
        isolation.run_check_isolated(build_tree(tmp_path), settings=Settings(device="cuda"))
    with pytest.raises(UsageError, match="--device cuda"):
        run_check(build_tree(tmp_path), settings=Settings(device="cuda"))


# --- the device travels to the child and back, and reports name it ---------------------------


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_child_is_asked_for_the_device(tmp_path, monkeypatch, device):
    seen = {}

    def spawn(work, timeout):
        seen.update(json.loads((work / "request.json").read_text()))
        (work / "stderr.txt").write_text("")
        return 1, False  # no report: a gap, enough here

    monkeypatch.setattr(isolation, "_spawn", spawn)
    monkeypatch.setattr(isolation, "require_device", lambda device: None)
    report = isolation.run_check_isolated(build_tree(tmp_path), settings=Settings(device=device))
    assert seen["device"] == device
    assert report.device == device and report.to_json()["device"] == device


def test_a_cpu_check_reports_its_device_and_no_gpu(tmp_path):
    report = run_check(build_tree(tmp_path, fix="post"), scenarios=["req_idx_map"])
    assert report.exit_code == 0 and report.device == "cpu"
    assert report.to_json()["device"] == "cpu"
    assert ("cuda", "native") not in report.ledger.fakes
    assert "natively" not in report.lines()[0]  # the CPU's summary as it was


def test_reports_name_the_gpu_run():
    report = CheckReport(source="tree", era="C", device="cuda")
    report.finish()
    again = CheckReport.from_json(json.loads(json.dumps(report.to_json())))
    assert again.device == "cuda"
    assert "(era C, natively on the GPU): pass" in again.lines()[0]
    assert "natively on the GPU" in markdown(again) and "on a CPU" not in markdown(again)
    old = CheckReport.from_json({k: v for k, v in report.to_json().items() if k != "device"})
    assert old.device == "cpu"  # a report written before the field: a CPU run
    assert "on a CPU" in markdown(old)
