"""Case runs with a fake engine that builds fake DSA metadata; the run cache; prompt sets."""

from __future__ import annotations

import importlib
import json
import sys
import uuid
from types import SimpleNamespace

import pytest
from _trtllm_fakes import FAKE_SENTINEL_MODULE

from regress.acceptance.trace import RequestTrace
from regress.errors import EngineError, UsageError
from regress.trtllm.cases import GLM52, Case
from regress.trtllm.gates import judge_case
from regress.trtllm.hooks import HookConfig
from regress.trtllm.runs import RunCache, acceptance_engine, load_prompt_set, run_case, sink_dir_for


class _Config:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


LLMAPI = SimpleNamespace(
    MTPDecodingConfig=type(
        "MTPDecodingConfig", (_Config,), {"model_fields": ("max_draft_len", "mtp_eagle_one_model")}
    ),
    CudaGraphConfig=_Config,
    KvCacheConfig=_Config,
    MoeConfig=_Config,
)

METADATA = """
import dataclasses


@dataclasses.dataclass
class DSAtrtllmAttentionMetadata:
    stale: bool = False

    def __post_init__(self):
        pass

    def prepare(self):
        pass
"""


@pytest.fixture
def fake_dsa(tmp_path, monkeypatch):
    name = f"fakerun_{uuid.uuid4().hex[:8]}"
    (tmp_path / "src" / name).mkdir(parents=True)
    (tmp_path / "src" / name / "metadata.py").write_text(METADATA)
    (tmp_path / "src" / name / "sentinel.py").write_text(FAKE_SENTINEL_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    importlib.invalidate_caches()
    yield SimpleNamespace(module=f"{name}.metadata", sentinel=f"{name}.sentinel:Sentinel")
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]


class FakeEngine:
    """Stands in for the TensorRT-LLM engine: builds DSA metadata like the executor would.

    With ``buggy`` it reproduces the stale-map defect's two symptoms at batch > 1 and K >= 2:
    the metadata goes stale (the sentinel sees it) and deep drafts get rejected.
    """

    name = "fake"

    def __init__(self, spec, module, *, buggy=False):
        self.spec = spec
        self.module = module
        self.buggy = buggy
        self.model = spec.model
        self.last_counters = None
        self.last_notes = ["a note"]

    def run(self, prompts, *, batch_size, max_draft_len, max_new_tokens, progress=None):
        broken = self.buggy and batch_size > 1 and max_draft_len >= 2
        metadata = importlib.import_module(self.module).DSAtrtllmAttentionMetadata(stale=broken)
        metadata.prepare()
        accepted = [1 if broken else max_draft_len] * 20
        return [RequestTrace(accepted=list(accepted), prompt_index=i) for i in range(len(prompts))]


def runner(tmp_path, fake_dsa, *, buggy=False):
    calls = []

    def run(case):
        calls.append(case)
        hook = HookConfig(
            sink_dir=str(sink_dir_for(tmp_path / "sinks", case)),
            module_names=(fake_dsa.module,),
            sentinel=fake_dsa.sentinel,
        )
        return run_case(
            case,
            case.spec("/models/GLM-5.2-NVFP4"),
            ["p"] * 8,
            max_new_tokens=64,
            hook=hook,
            engine_factory=lambda spec: FakeEngine(spec, fake_dsa.module, buggy=buggy),
        )

    return run, calls


def test_run_case_measures_and_watches(tmp_path, fake_dsa):
    run, _ = runner(tmp_path, fake_dsa)
    result = run(Case(GLM52, 8, 4, False))
    assert result.stats.acceptance_length == pytest.approx(5.0)
    assert result.sentinel.clean
    assert result.notes == ["a note"]
    assert result.spec.max_batch_size == 8
    assert result.wall_seconds >= 0
    saved = json.loads(result.save(tmp_path / "artifacts").read_text())
    assert (saved["test_class"], saved["case"]) == ("TestGLM52NVFP4", "b8-k4-eager")
    assert saved["stats"]["acceptance_length"] == pytest.approx(5.0)
    assert saved["sentinel"] == {"attached": 1, "violations": [], "errors": []}
    assert saved["spec"]["max_batch_size"] == 8


def test_the_fake_defect_fails_the_gates_and_the_fix_passes(tmp_path, fake_dsa):
    case = Case(GLM52, 8, 4, False)
    for buggy, passes in ((True, False), (False, True)):
        run, _ = runner(tmp_path / str(buggy), fake_dsa, buggy=buggy)
        cache = RunCache(run)
        reference, result = cache.get(case.reference), cache.get(case)
        outcome = judge_case(8, reference.stats, result.stats, result.sentinel, tolerance=0.05)
        assert outcome.passed is passes, outcome.explain()
        if buggy:
            assert {"batch_invariance", "sentinel"} <= {
                v.check for v in outcome.verdicts if v.regressed
            }


def test_cache_runs_each_case_once_and_shares_the_reference(tmp_path, fake_dsa):
    run, calls = runner(tmp_path, fake_dsa)
    cache = RunCache(run)
    for batch in (8, 32):
        case = Case(GLM52, batch, 3, True)
        cache.get(case.reference)
        cache.get(case)
    assert calls == [Case(GLM52, 1, 3, True), Case(GLM52, 8, 3, True), Case(GLM52, 32, 3, True)]
    assert Case(GLM52, 1, 3, True) in cache


def test_cache_remembers_failures(tmp_path):
    calls = []

    def run(case):
        calls.append(case)
        raise EngineError("engine build failed")

    cache = RunCache(run)
    case = Case(GLM52, 1, 4, False)
    for _ in range(2):
        with pytest.raises(EngineError, match="engine build failed"):
            cache.get(case)
    assert calls == [case]


def test_engine_count_mismatch_is_an_engine_error(tmp_path, fake_dsa):
    class Lossy(FakeEngine):
        def run(self, prompts, **kwargs):
            return super().run(prompts, **kwargs)[:-1]

    case = Case(GLM52, 1, 4, False)
    hook = HookConfig(str(tmp_path / "s"), (fake_dsa.module,), sentinel=fake_dsa.sentinel)
    with pytest.raises(EngineError, match="7 request traces for 8 prompts"):
        run_case(
            case,
            case.spec("/m"),
            ["p"] * 8,
            max_new_tokens=8,
            hook=hook,
            engine_factory=lambda spec: Lossy(spec, fake_dsa.module),
        )


def test_acceptance_engine_gets_the_whole_spec():
    seen = {}

    class Engine:
        def __init__(self, **kwargs):
            seen.update(kwargs)

    spec = Case(GLM52, 32, 4, True).spec("/models/GLM-5.2-NVFP4", sm=100)
    acceptance_engine(spec, llmapi=LLMAPI, engine_cls=Engine)
    assert seen["model"] == "/models/GLM-5.2-NVFP4"
    assert seen["cuda_graph"] is True
    assert seen["tensor_parallel_size"] == 8
    llm_kwargs = seen["llm_kwargs"]
    assert "model" not in llm_kwargs
    assert llm_kwargs["max_batch_size"] == 32
    assert llm_kwargs["speculative_config"].kwargs == {
        "max_draft_len": 4,
        "mtp_eagle_one_model": True,
    }
    # Block reuse and the KV-cache manager are left to upstream's defaults, as its test does.
    assert llm_kwargs["kv_cache_config"].kwargs == {"free_gpu_memory_fraction": 0.7}
    assert llm_kwargs["moe_config"].kwargs == {"backend": "CUTEDSL"}


def test_shipped_prompt_set_has_80_prompts_in_8_categories():
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "data" / "trtllm" / "prompts.jsonl"
    name, prompts = load_prompt_set(path)
    assert name == "prompts" and len(prompts) == 80
    assert len(set(prompts)) == 80 and all(isinstance(p, str) and p for p in prompts)
    categories = [json.loads(line)["category"] for line in path.read_text().splitlines()]
    assert {categories.count(c) for c in set(categories)} == {10} and len(set(categories)) == 8


def test_mt_bench_question_file_is_recognised(tmp_path):
    path = tmp_path / "question.jsonl"
    path.write_text(
        json.dumps({"question_id": 81, "category": "writing", "turns": ["first", "second"]})
        + "\n\n"
        + json.dumps({"question_id": 82, "turns": ["again", "more"]})
        + "\n"
    )
    assert load_prompt_set(path) == ("mt_bench", ["first", "again"])
    assert load_prompt_set(path, limit=1, name="custom") == ("custom", ["first"])


def test_bad_prompt_files(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(UsageError, match="holds no prompts"):
        load_prompt_set(empty)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"turns": []}) + "\n")
    with pytest.raises(UsageError, match=r"bad\.jsonl:1"):
        load_prompt_set(bad)


def test_shared_prefix_prompts_share_one_long_prefix():
    from regress.trtllm.runs import shared_prefix_prompts

    base = ["Explain DSA.", "Write a haiku about caches.", "List three primes."]
    prompts = shared_prefix_prompts(base, count=7, prefix_chars=500)
    assert len(set(prompts)) == 7  # every request its own, the base prompts cycled
    prefix = prompts[0].split("\n\nQuestion 1:")[0]
    assert 400 < len(prefix) <= 500 and not prefix.endswith(" ")
    assert all(p.startswith(prefix + "\n\nQuestion ") for p in prompts)
    assert prompts[4].endswith("Question 5: Write a haiku about caches.")
    with pytest.raises(UsageError, match="text prompts"):
        shared_prefix_prompts([[1, 2, 3]], count=2, prefix_chars=100)
