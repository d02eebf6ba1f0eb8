"""The sandbox answers for packages as a real machine would: probes, triton, torch.compile, configs."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

import pytest
from _absent import no_triton  # noqa: F401 (the fixture, used by name)
from _upstream_trees import build_caller_tree, build_tree, tree_sandbox, write_files

from regress.check.check import run_check
from regress.sandbox import Ledger, SandboxGap
from regress.sandbox.gates import read_gate
from regress.sandbox.stubs import StubModule

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="the fused kernel runs only where triton is installed (pip install triton)",
)

WORKER = "upstream tensorrt_llm/_torch/speculative/eagle3.py::MTPEagleWorker._forward_impl"
PROBES = {
    # regress's own fake modules, shaped like upstream's availability probes
    "try_import": "try:\n    import deep_gemm\n    AVAILABLE = True\nexcept ImportError:\n"
    "    AVAILABLE = False\n",
    "find_spec": "import importlib.util\n\nAVAILABLE = importlib.util.find_spec('deep_gemm') "
    "is not None\n",
    "suppress": "import contextlib\n\nAVAILABLE = False\nwith contextlib.suppress(ImportError):\n"
    "    import deep_gemm\n    AVAILABLE = True\n",
}


def _by_name(report):
    return {r.name: r for r in report.results}


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_a_probe_for_an_absent_package_takes_upstreams_fallback(tmp_path, probe):
    build_tree(tmp_path, "C")
    write_files(tmp_path, {"tensorrt_llm/_torch/probe_mod.py": PROBES[probe]})
    ledger = Ledger()
    with tree_sandbox(tmp_path, "tensorrt_llm._torch.probe_mod", ledger=ledger) as sandbox:
        assert sandbox.load("tensorrt_llm._torch.probe_mod").AVAILABLE is False
    assert any(f.kind == "probe" for f in ledger.fakes.values())


def test_an_unconditional_import_of_an_absent_package_is_still_a_strict_stub(tmp_path):
    build_tree(tmp_path, "C")
    code = "import flashinfer\n\n\ndef run():\n    return flashinfer.sampling.top_k(1)\n"
    write_files(tmp_path, {"tensorrt_llm/_torch/uses.py": code})
    with tree_sandbox(tmp_path, "tensorrt_llm._torch.uses") as sandbox:
        mod = sandbox.load("tensorrt_llm._torch.uses")
        with pytest.raises(SandboxGap, match=r"flashinfer\.sampling\.top_k"):
            mod.run()


@needs_triton
def test_installed_triton_is_real_and_its_kernels_run_interpreted(tmp_path):
    build_caller_tree(tmp_path, fused="old")
    ledger = Ledger()
    import torch
    import triton as outside

    with tree_sandbox(tmp_path, ledger=ledger) as sandbox:
        real = sandbox.load("triton")  # never a stub where it is installed
        assert not isinstance(real, StubModule) and real.__file__ == outside.__file__
        fused = sandbox.load("tensorrt_llm._torch.attention.backends.sparse.dsa.fused_metadata")
        out = torch.full((6,), -1, dtype=torch.int32)
        fused.fused_dsa_decode_metadata(torch.tensor([1, 3, 2], dtype=torch.int32), out)
    assert out.tolist() == [0, 1, 1, 1, 2, 2]
    launched = [f for f in ledger.fakes.values() if f.kind == "triton"]
    assert [f.name.rsplit(".", 1)[1] for f in launched] == ["_req_idx_kernel"]
    assert "interpreter" in launched[0].detail
    assert "triton" in sys.modules  # the real package stays loaded after the session


@needs_triton
@pytest.mark.parametrize("gate", ["old", "new", "unknown"])
def test_the_fused_scenario_runs_upstreams_kernel_under_each_gate(tmp_path, gate):
    report = run_check(build_caller_tree(tmp_path, fused=gate), scenarios=["fused_metadata"])
    result = _by_name(report)["fused_metadata/fused_kernel"]
    assert result.status == "pass" and report.exit_code == 0, report.lines()
    assert "_req_idx_kernel x" in result.note and "interpreter" in result.note
    assert result.steps  # the maps were judged at the worker's calls


@needs_triton
def test_a_defect_inside_the_fused_kernel_is_named(tmp_path):
    tree = build_caller_tree(tmp_path, fused="old", fused_kernel="wrong")
    report = run_check(tree, scenarios=["fused_metadata", "req_idx_map"])
    results = _by_name(report)
    assert report.exit_code == 1
    assert results["fused_metadata/fused_kernel"].status == "fail"
    # the old gate is off by default: upstream's default path (eager) is right
    assert all(r.status == "pass" for n, r in results.items() if n.startswith("req_idx_map"))


@needs_triton
def test_a_gate_on_by_default_runs_the_fused_kernel_in_every_scenario(tmp_path):
    tree = build_caller_tree(tmp_path, fused="new", fused_kernel="wrong")
    report = run_check(tree, scenarios=["req_idx_map"])
    assert report.exit_code == 1
    env = {f.name: f.detail for f in report.ledger.fakes.values() if f.kind == "env"}
    assert "upstream's default for this tree, fused on" in env["TRTLLM_DISABLE_FUSED_DSA_METADATA"]


@pytest.mark.usefixtures("no_triton")
def test_without_triton_the_fused_path_is_a_gap_naming_pip_install(tmp_path):
    report = run_check(
        build_caller_tree(tmp_path, fused="old"), scenarios=["fused_metadata", "req_idx_map"]
    )
    results = _by_name(report)
    assert report.exit_code == 3
    fused = results["fused_metadata"]  # the scenario could not run: one gap result
    assert fused.status == "gap" and "pip install triton" in fused.note, fused.note
    # what does not need triton still runs and passes (the old gate is off by default)
    assert all(r.status == "pass" for n, r in results.items() if n.startswith("req_idx_map"))


def test_an_ambient_gate_value_does_not_leak_into_upstreams_default(tmp_path, monkeypatch):
    monkeypatch.setenv("TRTLLM_FUSED_DSA_METADATA", "1")
    tree = build_caller_tree(tmp_path, fused="old", fused_kernel="wrong")
    assert run_check(tree, scenarios=["req_idx_map"]).exit_code == 0


def test_gates_are_read_with_their_default_and_sense():
    text = (
        "a = os.environ.get('TRTLLM_FUSED_DSA_METADATA', '0') == '1'\n"
        "b = os.environ.get('TRTLLM_DISABLE_FUSED_DSA_METADATA', '0') != '1'\n"
    )
    old, new = (
        read_gate(n, text)
        for n in ("TRTLLM_FUSED_DSA_METADATA", "TRTLLM_DISABLE_FUSED_DSA_METADATA")
    )
    assert (old.default_on, old.value(True), old.value(False)) == (False, "1", "0")
    assert (new.default_on, new.value(True), new.value(False)) == (True, "0", "1")


COMPILED = """
    @torch.compile(options={"max-autotune": True})
    def _compiled_a(self, x):
        return x

    @torch.compile
    def _compiled_b(self, x):
        return x

    _compiled_c = torch.compile(lambda self, x: x, dynamic=False)
"""


def test_workers_decorated_with_torch_compile_load_and_run(tmp_path):
    build_caller_tree(tmp_path)
    eagle = tmp_path / "tensorrt_llm/_torch/speculative/eagle3.py"
    text = eagle.read_text()
    anchor = "    @property\n    def max_draft_len(self):"
    eagle.write_text(text.replace(anchor, COMPILED.lstrip("\n") + "\n" + anchor, 1))
    report = run_check(tmp_path, scenarios=["req_idx_map"])
    assert report.exit_code == 0, report.lines()
    assert WORKER in " ".join(r.note for r in report.results)
    compiled = [f for f in report.ledger.fakes.values() if f.kind == "compile"]
    assert compiled and compiled[0].detail.startswith("identity: ")


LLM_ARGS = '''
class MTPDecodingConfig:
    """Shape of upstream's config: a field regress's fallback does not have."""

    def __init__(self, max_draft_len=1, num_nextn_predict_layers=1, use_mtp_vanilla=False):
        self.max_draft_len = max_draft_len
        self.num_nextn_predict_layers = num_nextn_predict_layers
        self.max_total_draft_tokens = max_draft_len
        self.use_mtp_vanilla = use_mtp_vanilla
        self.sa_config = None
        self.field_only_upstream_has = None
        self.use_relaxed_acceptance_for_thinking = False
        self.use_sa_spec = False
        self.draft_offload_enabled = False
        self.draft_offload_v2 = False

    @property
    def spec_dec_mode(self):
        from tensorrt_llm._torch.speculative.interface import SpeculativeDecodingMode

        return SpeculativeDecodingMode.MTP_EAGLE_ONE_MODEL
'''


def test_upstreams_own_spec_config_is_built_from_llm_args(tmp_path):
    build_caller_tree(tmp_path)
    eagle = tmp_path / "tensorrt_llm/_torch/speculative/eagle3.py"
    eagle.write_text(
        eagle.read_text().replace(
            "        self.spec_config = spec_config\n",
            "        self.spec_config = spec_config\n"
            "        self.new = spec_config.field_only_upstream_has\n",
            1,
        )
    )
    plain = run_check(tmp_path, scenarios=["req_idx_map"])
    assert plain.exit_code == 3  # the fallback lacks the field: it drifted
    write_files(tmp_path, {"tensorrt_llm/llmapi/llm_args.py": LLM_ARGS})
    report = run_check(tmp_path, scenarios=["req_idx_map"])
    assert report.exit_code == 0, report.lines()
    used = {f.name: f.detail for f in report.ledger.fakes.values() if f.kind == "collaborator"}
    assert used["spec_config for MTPEagleWorker"].startswith("upstream MTPDecodingConfig")


def test_without_llm_args_the_fallback_is_named_in_the_ledger(tmp_path):
    report = run_check(build_caller_tree(tmp_path), scenarios=["req_idx_map"])
    used = {f.name: f.detail for f in report.ledger.fakes.values() if f.kind == "collaborator"}
    assert (
        "regress FakeSpecConfig (fallback: the tree has no"
        in used["spec_config for MTPEagleWorker"]
    )


def test_a_class_that_cannot_load_is_a_gap_for_it_alone(tmp_path):
    build_caller_tree(tmp_path, v4="post", v4_own_modules=True)
    params = tmp_path / "tensorrt_llm/_torch/attention/backends/sparse/deepseek_v4/params.py"
    params.write_text(
        "from tensorrt_llm._torch.pyexecutor.kv_cache_manager_v2 import DataRole\n\n"
        + params.read_text()
        + "\nROLE = DataRole()\n"
    )
    report = run_check(tmp_path, scenarios=["stale_state"])
    results = _by_name(report)
    v4 = [r for n, r in results.items() if "DeepseekV4" in n]
    assert [r.status for r in v4] == ["gap"] and "DeepseekV4" in v4[0].note
    others = [r for n, r in results.items() if "DeepseekV4" not in n]
    assert others and all(r.status in ("pass", "fail") for r in others)


@pytest.mark.usefixtures("no_triton")
def test_torchs_own_triton_probe_sees_an_absent_triton_as_absent(tmp_path):
    from torch.utils._triton import has_triton_package

    build_tree(tmp_path, "C")
    with tree_sandbox(tmp_path):
        assert has_triton_package.__wrapped__() is False  # uncached: asked inside the sandbox


def test_spec_config_is_upstreams_even_where_the_tree_imported_llm_args_first(tmp_path):
    """era-B ``speculative/interface.py`` imports ``AdvancedSamplingMode`` from ``llm_args`` at
    module level, so the session stubbed ``llm_args`` before a worker asked for its config: the
    config came from that stub (a placeholder whose ``model_fields`` raised), not from the file."""
    build_caller_tree(tmp_path)
    interface = tmp_path / "tensorrt_llm/_torch/speculative/interface.py"
    interface.write_text(
        "from tensorrt_llm.llmapi.llm_args import AdvancedSamplingMode  # noqa: F401\n"
        + interface.read_text()
    )
    source = LLM_ARGS + "\n\nclass AdvancedSamplingMode:\n    pass\n"
    write_files(tmp_path, {"tensorrt_llm/llmapi/llm_args.py": source})
    report = run_check(tmp_path, scenarios=["req_idx_map"])
    assert report.exit_code == 0, report.lines()
    used = {f.name: f.detail for f in report.ledger.fakes.values() if f.kind == "collaborator"}
    assert used["spec_config for MTPEagleWorker"].startswith("upstream MTPDecodingConfig"), used


COUNTED = """
import pathlib

_LOADS = pathlib.Path(__file__).with_suffix(".loads")
_LOADS.write_text(_LOADS.read_text() + "x" if _LOADS.exists() else "x")
"""


@pytest.mark.parametrize(
    ("cells", "loads"),
    [
        (["fused=off,sm=90", "fused=off,sm=90,pad=on"], 1),
        (["fused=off,sm=90", "fused=off,sm=100"], 2),
    ],
)
def test_llm_args_loads_once_per_kind_of_session_not_per_cell(tmp_path, cells, loads):
    """Every matrix cell is a sandbox of its own; loading llm_args.py (314,102 characters @
    00043967) in each made ``--matrix full`` on the era-B stack 2.4 times the CPU. Cells that
    differ in what a load sees (the SM a validator may ask) still load it each."""
    from _matrix_trees import build_matrix_tree

    build_matrix_tree(tmp_path)
    write_files(tmp_path, {"tensorrt_llm/llmapi/llm_args.py": COUNTED + LLM_ARGS})
    report = run_check(tmp_path, scenarios=["matrix"], matrix=cells)
    used = {f.name: f.detail for f in report.ledger.fakes.values() if f.kind == "collaborator"}
    assert any(d.startswith("upstream MTPDecodingConfig") for d in used.values()), used
    assert (tmp_path / "tensorrt_llm/llmapi/llm_args.loads").read_text() == "x" * loads


EAGLE3_CONFIG = '''

class Eagle3DecodingConfig:
    """Shape of upstream's: refuses to exist without a draft model, as its validator does."""

    def __init__(self, max_draft_len=1, eagle3_one_model=True, speculative_model=None):
        if speculative_model is None:
            raise ValueError("Draft model must be provided for EAGLE")
        self.max_draft_len = max_draft_len
        self.max_total_draft_tokens = max_draft_len
        self.eagle3_one_model = eagle3_one_model
        self.speculative_model = speculative_model
'''


def test_the_eagle3_config_is_upstreams_where_it_needs_a_draft_model(tmp_path):
    """``EagleDecodingConfig`` @ 00043967 raises without ``speculative_model``: the eraB-stack's
    ``Eagle3OneModelWorker`` ran with regress's fallback config before."""
    build_caller_tree(tmp_path)
    write_files(tmp_path, {"tensorrt_llm/llmapi/llm_args.py": LLM_ARGS + EAGLE3_CONFIG})
    report = run_check(tmp_path, scenarios=["draft_callers"])
    used = {f.name: f.detail for f in report.ledger.fakes.values() if f.kind == "collaborator"}
    assert used["spec_config for Eagle3OneModelWorker"].startswith(
        "upstream Eagle3DecodingConfig"
    ), used
