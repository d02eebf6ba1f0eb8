"""The integration tests' wiring, end to end, against a fake ``tensorrt_llm`` laid out like era C."""

# Everything the GPU tests do runs here except the GPU: the layout is resolved from the installed
# (fake) package by ``find_spec``, the acceptance package's TensorRT-LLM engine streams from a fake
# ``LLM`` that builds DSA metadata the way the executor does (a CUDA-graph copy included), the hook
# reaches it through the lazy import hook, and the gates judge the result. A fake defect (a stale
# map at batch > 1 with K >= 2, which also costs deep drafts) must fail the gates; the fix must pass.

from __future__ import annotations

import importlib
import sys
import textwrap
import uuid

import pytest
from _trtllm_fakes import FAKE_SENTINEL_MODULE

from regress.trtllm import paths
from regress.trtllm.cases import GLM52, Case
from regress.trtllm.gates import judge_case, sentinel_failures
from regress.trtllm.hooks import HookConfig, read_report, sentinel_session
from regress.trtllm.llm_config import build_spec
from regress.trtllm.runs import RunCache, run_case, sink_dir_for
from regress.trtllm.smoke import dummy_prompts, run_smoke
from regress.trtllm.tiny_config import TinyConfig

FAKE_INIT = """
import asyncio
from types import SimpleNamespace

__version__ = "0.0-fake"
BUG = {"on": False}


class SamplingParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class _Stream:
    def __init__(self, llm, prompt, sampling):
        self.llm, self.limit = llm, sampling.kwargs["max_tokens"]
        seed = len(prompt)
        k = llm.k
        accepted = [(seed * 7 + i * 3) % (k + 1) for i in range(12)]
        if llm.broken:
            accepted = [min(a, 1) for a in accepted]  # deep drafts read another request's cache
        self.pending = [1] + [a + 1 for a in accepted]
        self.output = SimpleNamespace(token_ids=[], finish_reason=None, request_perf_metrics=None)

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self.output.finish_reason is not None:
            raise StopAsyncIteration
        await asyncio.sleep(0)
        self.llm.metadata.prepare()  # one forward per iteration
        n = min(self.pending.pop(0), self.limit - len(self.output.token_ids))
        self.output.token_ids.extend([9] * n)
        if not self.pending or len(self.output.token_ids) >= self.limit:
            self.output.finish_reason = "length"
        return SimpleNamespace(outputs=[self.output])


class LLM:
    def __init__(self, model, **kwargs):
        # The executor imports the backend and builds metadata while the engine is built.
        from tensorrt_llm._torch.attention.backends.sparse.dsa import DSAtrtllmAttentionMetadata

        self.kwargs = kwargs
        self.k = kwargs["speculative_config"].kwargs["max_draft_len"]
        self.broken = BUG["on"] and kwargs["max_batch_size"] > 1 and self.k >= 2
        self.metadata = DSAtrtllmAttentionMetadata(stale=self.broken)
        if kwargs.get("cuda_graph_config") is not None:
            self.metadata = self.metadata.create_cuda_graph_metadata()

    def generate_async(self, prompt, sampling_params=None, streaming=False):
        return _Stream(self, prompt, sampling_params)

    def generate(self, prompts, sampling_params=None):
        self.metadata.prepare()
        n = sampling_params.kwargs["max_tokens"]
        return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[9] * n)]) for _ in prompts]

    def get_stats(self, timeout):
        return []

    def shutdown(self):
        pass
"""

FAKE_LLMAPI = """
class _Config:
    model_fields = ()

    def __init__(self, **kwargs):
        self.kwargs = kwargs


class MTPDecodingConfig(_Config):
    model_fields = ("max_draft_len", "mtp_eagle_one_model")


class CudaGraphConfig(_Config):
    pass


class KvCacheConfig(_Config):
    pass


class MoeConfig(_Config):
    pass
"""

FAKE_METADATA = """
import copy
import dataclasses

from tensorrt_llm._torch.attention.backends.trtllm import TrtllmAttentionMetadata


@dataclasses.dataclass
class DSAtrtllmAttentionMetadata(TrtllmAttentionMetadata):
    stale: bool = False

    def __post_init__(self):
        self.req_idx_per_token = [0]

    def prepare(self):
        pass

    def create_cuda_graph_metadata(self):
        clone = copy.copy(self)
        clone.__post_init__()
        return clone
"""


def write(root, rel, text=""):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


@pytest.fixture
def fake_trtllm(tmp_path, monkeypatch):
    """An importable fake ``tensorrt_llm`` (era C) plus a fake sentinel, removed afterwards."""
    root = tmp_path / "site"
    pkg = "tensorrt_llm"
    backends = f"{pkg}/_torch/attention/backends"
    write(root, f"{pkg}/__init__.py", FAKE_INIT)
    write(root, f"{pkg}/llmapi/__init__.py", FAKE_LLMAPI)
    write(root, f"{pkg}/llmapi/mpi_session.py", "class MPIPoolExecutor:\n    pass\n")
    write(root, f"{backends}/interface.py", "class AttentionMetadata:\n    pass\n")
    write(
        root,
        f"{backends}/trtllm.py",
        "import dataclasses\n\n\n@dataclasses.dataclass\nclass TrtllmAttentionMetadata:\n    pass\n",
    )
    write(root, f"{backends}/sparse/dsa/metadata.py", FAKE_METADATA)
    write(
        root,
        f"{backends}/sparse/dsa/__init__.py",
        "from .metadata import DSAtrtllmAttentionMetadata\n",
    )
    sentinel = f"fakesentinel_{uuid.uuid4().hex[:8]}"
    write(root, f"{sentinel}.py", FAKE_SENTINEL_MODULE)
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    yield sentinel + ":Sentinel"
    for name in list(sys.modules):
        if name in (pkg, sentinel) or name.startswith(pkg + "."):
            del sys.modules[name]
    importlib.invalidate_caches()


def acceptance_runner(tmp_path, sentinel):
    """What the ``acceptance_runs`` fixture of test_dsa_mtp_acceptance.py does, minus the GPU."""
    layout = paths.resolve_installed()
    mpi_session = importlib.import_module("tensorrt_llm.llmapi.mpi_session")
    prompts = [f"prompt {'x' * i}" for i in range(10)]

    def run(case):
        hook = HookConfig(
            sink_dir=str(sink_dir_for(tmp_path / "sinks", case)),
            module_names=layout.dsa_module_names,
            sentinel=sentinel,
        )
        return run_case(
            case,
            case.spec("/models/GLM-5.2-NVFP4", sm=100),
            prompts,
            max_new_tokens=48,
            hook=hook,
            mpi_session_module=mpi_session,
        )

    return RunCache(run)


@pytest.mark.parametrize("cuda_graph", [False, True], ids=["eager", "graph"])
def test_healthy_engine_passes_every_gate(fake_trtllm, tmp_path, cuda_graph):
    runs = acceptance_runner(tmp_path, fake_trtllm)
    assert paths.resolve_installed().era.name == "C"
    for batch in (1, 8, 32):
        case = Case(GLM52, batch, 4, cuda_graph)
        reference = runs.get(case.reference)
        run = runs.get(case)
        outcome = judge_case(batch, reference.stats, run.stats, run.sentinel, tolerance=0.05)
        assert outcome.passed, outcome.explain()
        # Engine metadata (and its CUDA-graph copy) were watched.
        assert len(run.sentinel.attached) == (2 if cuda_graph else 1)


def test_stale_map_defect_fails_the_gates(fake_trtllm, tmp_path):
    importlib.import_module("tensorrt_llm").BUG["on"] = True
    runs = acceptance_runner(tmp_path, fake_trtllm)
    case = Case(GLM52, 8, 4, True)
    reference, run = runs.get(case.reference), runs.get(case)
    outcome = judge_case(8, reference.stats, run.stats, run.sentinel, tolerance=0.05)
    failed = {v.check for v in outcome.verdicts if v.regressed}
    assert {"batch_invariance", "sentinel"} <= failed, outcome.explain()
    # K = 1 never reaches draft step 1: the same engine passes there.
    k1 = Case(GLM52, 8, 1, True)
    outcome = judge_case(
        8, runs.get(k1.reference).stats, runs.get(k1).stats, runs.get(k1).sentinel, tolerance=0.05
    )
    assert outcome.passed, outcome.explain()


def test_dummy_smoke_flow(fake_trtllm, tmp_path):
    """What test_trtllm_dummy.py does: tiny config, dummy load, batch 8, K = 4, sentinel clean."""
    tiny = TinyConfig()
    spec = build_spec(
        str(tiny.write(tmp_path / "tiny")),
        batch_size=8,
        max_draft_len=4,
        cuda_graph=True,
        load_format="dummy",
        skip_tokenizer_init=True,
    )
    hook = HookConfig(
        sink_dir=str(tmp_path / "sentinel"),
        module_names=paths.resolve_installed().dsa_module_names,
        sentinel=fake_trtllm,
    )
    mpi_session = importlib.import_module("tensorrt_llm.llmapi.mpi_session")
    with sentinel_session(hook, mpi_session_module=mpi_session):
        result = run_smoke(spec, dummy_prompts(16, tiny.vocab_size), max_new_tokens=16)
    assert result.requests == 16
    report = read_report(hook.sink_dir)
    assert sentinel_failures(report) == [] and report.violations == []
    assert len(report.attached) == 2  # engine metadata and its CUDA-graph copy


def test_dummy_smoke_flow_sees_the_defect(fake_trtllm, tmp_path):
    importlib.import_module("tensorrt_llm").BUG["on"] = True
    spec = build_spec(str(tmp_path), batch_size=8, max_draft_len=4, cuda_graph=False)
    hook = HookConfig(
        sink_dir=str(tmp_path / "sentinel"),
        module_names=paths.resolve_installed().dsa_module_names,
        sentinel=fake_trtllm,
    )
    with sentinel_session(hook):
        run_smoke(spec, [[5, 6, 7]] * 8, max_new_tokens=4)
    assert [v["check"] for v in read_report(hook.sink_dir).violations] == ["req_idx_map"]
