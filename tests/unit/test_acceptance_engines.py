"""Engine adapters: the TensorRT-LLM one against a fake ``tensorrt_llm``, the reference one against a fake engine."""

from __future__ import annotations

import asyncio
import json
import sys
import types
from types import SimpleNamespace

import pytest

from regress.acceptance.engines import AcceptanceEngine, get_engine
from regress.acceptance.engines.reference import ReferenceAcceptanceEngine
from regress.acceptance.engines.synthetic import SyntheticEngine
from regress.errors import EngineError, MissingDependencyError, UsageError
from regress.trtllm.engine import TrtllmAcceptanceEngine, iteration_counters
from regress.trtllm.llm_config import graph_batch_sizes

K = 3


def planned_steps(prompt) -> list[int]:
    """Each fake prompt's accepted counts, derived from its first token so tests can predict them."""
    seed = prompt[0]
    return [(seed * 7 + i * 3) % (K + 1) for i in range(6)]


class _Config:
    def __init__(self, **kwargs):
        self.kwargs = kwargs


class _MTPDecodingConfig(_Config):
    def __init__(self, *, max_draft_len=None, num_nextn_predict_layers=None, **kwargs):
        super().__init__(max_draft_len=max_draft_len, **kwargs)


class _FakeStream:
    """Async iterator mimicking a streamed TensorRT-LLM request (one response per iteration)."""

    def __init__(self, llm, prompt, sampling):
        self.llm, self.sampling = llm, sampling
        self.steps = planned_steps(prompt)
        self.output = SimpleNamespace(token_ids=[], finish_reason=None, request_perf_metrics=None)
        self.result = SimpleNamespace(outputs=[self.output])
        self.pending = [1] + [a + 1 for a in self.steps]
        self.started = False

    def __aiter__(self):
        return self

    async def __anext__(self):
        if not self.started:
            self.started = True
            self.llm.in_flight += 1
            self.llm.max_in_flight = max(self.llm.max_in_flight, self.llm.in_flight)
        if self.output.finish_reason is not None:
            raise StopAsyncIteration
        await asyncio.sleep(0)  # let the other requests advance: they share the "batch"
        limit = self.sampling.kwargs["max_tokens"]
        n = self.pending.pop(0)
        if self.llm.coalesce and len(self.output.token_ids) == 1 and self.pending:
            n += self.pending.pop(0)
        n = min(n, limit - len(self.output.token_ids))
        self.output.token_ids.extend([7] * n)
        if len(self.output.token_ids) > 1:
            self.llm.stats.append(
                {
                    "inflightBatchingStats": {"numScheduledRequests": self.llm.in_flight},
                    "specDecodingStats": {
                        "numDraftTokens": K,
                        "numAcceptedTokens": n - 1,
                        "numRequestsWithDraftTokens": 1,
                    },
                }
            )
        if len(self.output.token_ids) >= limit or not self.pending:
            self.output.finish_reason = "length"
            self.llm.in_flight -= 1
            verify = len(self.steps) - len(self.pending)
            self.output.request_perf_metrics = SimpleNamespace(
                speculative_decoding=SimpleNamespace(
                    total_accepted_draft_tokens=len(self.output.token_ids) - 1 - verify,
                    total_draft_tokens=verify * K,
                )
            )
        return self.result


@pytest.fixture
def fake_trtllm(monkeypatch):
    """A stand-in ``tensorrt_llm`` package, installed in ``sys.modules`` for one test."""
    trt = types.ModuleType("tensorrt_llm")
    llmapi = types.ModuleType("tensorrt_llm.llmapi")
    trt.__version__ = "0.0-fake"
    trt.built = []
    trt.coalesce = False

    class LLM:
        def __init__(self, **kwargs):
            self.kwargs = kwargs
            self.in_flight = self.max_in_flight = 0
            self.stats = []
            self.coalesce = trt.coalesce
            self.shut_down = False
            trt.built.append(self)

        def generate_async(self, prompt, sampling_params=None, streaming=False):
            assert streaming, "the adapter must stream to see per-step deltas"
            return _FakeStream(self, prompt, sampling_params)

        def get_stats(self, timeout):
            # Drains, as upstream's executor queue does; dicts and JSON strings, as releases vary.
            stats, self.stats = self.stats, []
            return [json.dumps(s) if i % 2 else s for i, s in enumerate(stats)]

        def shutdown(self):
            self.shut_down = True

    trt.LLM = LLM
    trt.SamplingParams = _Config
    llmapi.MTPDecodingConfig = _MTPDecodingConfig
    llmapi.CudaGraphConfig = _Config
    llmapi.KvCacheConfig = _Config
    trt.llmapi = llmapi
    monkeypatch.setitem(sys.modules, "tensorrt_llm", trt)
    monkeypatch.setitem(sys.modules, "tensorrt_llm.llmapi", llmapi)
    return trt


PROMPTS = [[i + 1, 5, 6] for i in range(7)]


def test_trtllm_builds_one_model_mtp_at_the_batch_size(fake_trtllm):
    engine = get_engine("trtllm", model="/ckpt/glm", cuda_graph=False, kv_cache_fraction=0.5)
    assert isinstance(engine, AcceptanceEngine)
    engine.run(PROMPTS, batch_size=3, max_draft_len=K, max_new_tokens=64)
    [llm] = fake_trtllm.built
    spec = llm.kwargs["speculative_config"]
    assert spec.kwargs == {"max_draft_len": K, "mtp_eagle_one_model": True}
    assert llm.kwargs["max_batch_size"] == 3
    assert llm.kwargs["cuda_graph_config"] is None
    assert llm.kwargs["kv_cache_config"].kwargs == {"free_gpu_memory_fraction": 0.5}
    assert llm.kwargs["enable_iter_perf_stats"] is True
    assert llm.shut_down
    assert engine.options["tensorrt_llm_version"] == "0.0-fake"


def test_trtllm_cuda_graph_choices(fake_trtllm):
    get_engine("trtllm", model="m", cuda_graph=True).run(
        PROMPTS[:2], batch_size=8, max_draft_len=K, max_new_tokens=8
    )
    get_engine("trtllm", model="m").run(
        PROMPTS[:2], batch_size=2, max_draft_len=K, max_new_tokens=8
    )
    with_graphs, default = fake_trtllm.built
    assert with_graphs.kwargs["cuda_graph_config"].kwargs == {
        "batch_sizes": [1, 2, 4, 8],
        "enable_padding": True,
    }
    assert "cuda_graph_config" not in default.kwargs
    assert graph_batch_sizes(6) == (1, 2, 4, 6)


def test_trtllm_reaches_the_batch_size_and_recovers_every_step(fake_trtllm):
    engine = get_engine("trtllm", model="m")
    progress = []
    traces = engine.run(
        PROMPTS,
        batch_size=3,
        max_draft_len=K,
        max_new_tokens=64,
        progress=lambda d, t: progress.append((d, t)),
    )
    [llm] = fake_trtllm.built
    assert llm.max_in_flight == 3  # never more, and really that many
    for prompt, trace in zip(PROMPTS, traces, strict=True):
        # Every step is recovered; only a short final step (cut by the stop) is left out.
        plan = planned_steps(prompt)
        assert trace.accepted == plan[: trace.steps]
        assert trace.steps + trace.censored_steps == len(plan)
        assert trace.censored_steps == (0 if plan[-1] == K else 1)
    assert [t.prompt_index for t in traces] == list(range(len(PROMPTS)))
    assert engine.last_notes == []  # stream, perf metrics and iteration stats agree
    assert engine.last_counters["num_requests_with_draft_tokens"] == 6 * len(PROMPTS)
    assert progress[-1] == (len(PROMPTS), len(PROMPTS))
    assert traces[0].tokens and set(traces[0].tokens) == {7}


def test_trtllm_greedy_sampling_with_perf_metrics(fake_trtllm):
    engine = get_engine("trtllm", model="m")
    params = engine._sampling_params(32)
    assert params.kwargs == {
        "max_tokens": 32,
        "temperature": 0.0,
        "ignore_eos": False,
        "return_perf_metrics": True,
    }


def test_trtllm_truncated_final_steps_are_censored(fake_trtllm):
    engine = get_engine("trtllm", model="m")
    traces = engine.run(PROMPTS, batch_size=2, max_draft_len=K, max_new_tokens=6)
    for prompt, trace in zip(PROMPTS, traces, strict=True):
        assert trace.accepted == planned_steps(prompt)[: trace.steps]
    assert any(t.censored_steps for t in traces)
    assert engine.last_notes == []


def test_trtllm_coalesced_responses_are_reported(fake_trtllm):
    fake_trtllm.coalesce = True
    engine = get_engine("trtllm", model="m")
    engine.run(PROMPTS, batch_size=2, max_draft_len=K, max_new_tokens=64)
    assert any("more than one verify step" in n for n in engine.last_notes)


def test_trtllm_batch_not_reached_is_noted(fake_trtllm):
    engine = get_engine("trtllm", model="m")
    engine._account(
        [], [{"inflightBatchingStats": {"numScheduledRequests": 2}}], batch_size=8, max_draft_len=K
    )
    assert engine.last_notes == []  # no requests: nothing to reach
    stats = [{"inflightBatchingStats": {"numScheduledRequests": 2}}]
    streamed = [
        SimpleNamespace(lengths=[1, 2], token_ids=[1, 2], finish_reason=None, perf=None)
    ] * 4
    engine._account(streamed, stats, batch_size=8, max_draft_len=K)
    assert any("batch size 8 was not reached" in n for n in engine.last_notes)


def test_trtllm_engine_failures_are_engine_errors(fake_trtllm):
    def broken(**kwargs):
        raise RuntimeError("CUDA out of memory")

    fake_trtllm.LLM = broken
    with pytest.raises(EngineError, match=r"could not build an engine.*out of memory"):
        get_engine("trtllm", model="m").run(
            PROMPTS, batch_size=1, max_draft_len=K, max_new_tokens=8
        )


def test_trtllm_missing_is_a_clear_missing_dependency(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt_llm", None)
    with pytest.raises(MissingDependencyError, match="pip install tensorrt_llm") as info:
        get_engine("trtllm", model="/ckpt")
    assert info.value.exit_code == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "needs --model"),
        ({"model": "m", "device": "cpu"}, "CUDA only"),
        ({"model": "m", "defects": ["stale_req_idx"]}, "reference engine only"),
        ({"model": "m", "sentinel": True}, "reference engine only"),
    ],
)
def test_trtllm_refuses_bad_options_before_importing(monkeypatch, options, message):
    monkeypatch.setitem(sys.modules, "tensorrt_llm", None)
    with pytest.raises(UsageError, match=message):
        TrtllmAcceptanceEngine(**options)


def test_trtllm_has_no_builtin_prompts(fake_trtllm):
    with pytest.raises(UsageError, match="--prompts"):
        get_engine("trtllm", model="m").default_prompts()


def test_iteration_counters_mirror_upstream():
    stats = [
        {
            "specDecodingStats": {
                "numDraftTokens": 0,
                "numAcceptedTokens": 0,
                "numRequestsWithDraftTokens": 0,
            }
        },
        json.dumps(
            {
                "inflightBatchingStats": {"numScheduledRequests": 8},
                "specDecodingStats": {
                    "numDraftTokens": 32,
                    "numAcceptedTokens": 20,
                    "numRequestsWithDraftTokens": 8,
                },
            }
        ),
        {
            "specDecodingStats": {
                "numDraftTokens": 8,
                "numAcceptedTokens": 6,
                "numRequestsWithDraftTokens": 2,
            }
        },
    ]
    counters, max_scheduled = iteration_counters(stats)
    assert counters == {
        "num_draft_tokens": 40,
        "num_accepted_tokens": 26,
        "num_requests_with_draft_tokens": 10,
    }
    assert max_scheduled == 8
    assert iteration_counters([]) == (None, 0)


# --- reference adapter ------------------------------------------------------------------------


class FakeReferenceEngine:
    """Implements the agreed ReferenceEngine interface (see .notes/interfaces.md)."""

    def __init__(self, **options):
        self.options = options
        self.model_name = "reference-dsa-tiny"
        self.sentinel_violations = []

    def generate(self, prompts, *, batch_size, max_draft_len, max_new_tokens, progress=None):
        self.sentinel_violations.append({"check": "req_idx_map", "batch_size": batch_size})
        requests = [
            SimpleNamespace(tokens=list(p), accepted=[min(len(p), max_draft_len)], prompt_index=i)
            for i, p in enumerate(prompts)
        ]
        return SimpleNamespace(
            requests=requests[::-1],  # out of order on purpose
            batch_size=batch_size,
            max_draft_len=max_draft_len,
            wall_seconds=0.5,
            counters={
                "num_draft_tokens": 8,
                "num_accepted_tokens": 3,
                "num_requests_with_draft_tokens": 2,
            },
        )


def test_reference_adapter_passes_options_and_converts_results():
    engine = ReferenceAcceptanceEngine(
        device="cpu",
        defects=["stale_req_idx"],
        seed=3,
        sentinel=True,
        engine_factory=FakeReferenceEngine,
    )
    assert engine._engine.options == {
        "device": "cpu",
        "defects": ["stale_req_idx"],
        "cuda_graph": None,
        "seed": 3,
        "sentinel": True,
    }
    assert engine.model == "reference-dsa-tiny"
    traces = engine.run([[1, 2], [3, 4, 5]], batch_size=2, max_draft_len=4, max_new_tokens=8)
    assert [(t.prompt_index, t.accepted, t.tokens) for t in traces] == [
        (0, [2], [1, 2]),
        (1, [3], [3, 4, 5]),
    ]
    assert engine.last_counters["num_requests_with_draft_tokens"] == 2
    assert engine.sentinel_violations == [{"check": "req_idx_map", "batch_size": 2}]


class ReplacingReferenceEngine(FakeReferenceEngine):
    """Hands back a fresh violations list per generate(), as the real engine does."""

    def generate(self, prompts, **kwargs):
        result = super().generate(prompts, **kwargs)
        self.sentinel_violations = [{"check": "req_idx_map", "batch_size": kwargs["batch_size"]}]
        return result


@pytest.mark.parametrize("factory", [FakeReferenceEngine, ReplacingReferenceEngine])
def test_reference_adapter_attributes_violations_to_each_run(factory):
    engine = ReferenceAcceptanceEngine(sentinel=True, engine_factory=factory)
    for batch_size in (2, 8):
        engine.run([[1, 2]], batch_size=batch_size, max_draft_len=2, max_new_tokens=4)
    assert [v["batch_size"] for v in engine.sentinel_violations] == [2, 8]


def test_reference_adapter_sentinel_off_reports_none():
    engine = ReferenceAcceptanceEngine(engine_factory=FakeReferenceEngine)
    assert engine.sentinel_violations is None


def test_reference_adapter_refuses_model_and_bad_device():
    with pytest.raises(UsageError, match="built-in model"):
        ReferenceAcceptanceEngine(model="/x", engine_factory=FakeReferenceEngine)
    with pytest.raises(UsageError, match="cpu or cuda"):
        ReferenceAcceptanceEngine(device="tpu", engine_factory=FakeReferenceEngine)


def test_reference_adapter_wraps_engine_start_failures():
    def broken(**options):
        raise RuntimeError("no CUDA device")

    with pytest.raises(EngineError, match="failed to start on cuda: no CUDA device"):
        ReferenceAcceptanceEngine(device="cuda", engine_factory=broken)


def test_reference_adapter_text_prompts_use_the_byte_tokenizer():
    from regress.reference.prompts import encode

    engine = ReferenceAcceptanceEngine(engine_factory=FakeReferenceEngine)
    [trace] = engine.run(["hi"], batch_size=1, max_draft_len=2, max_new_tokens=4)
    assert trace.tokens == encode("hi")
    with pytest.raises(UsageError, match="not encodable as UTF-8"):
        engine.tokenize("bad \ud800 surrogate")


def test_get_engine_unknown_name():
    with pytest.raises(UsageError, match="reference, trtllm"):
        get_engine("vllm")


def test_synthetic_engine_is_batch_invariant_unless_degraded():
    engine = SyntheticEngine([0.9, 0.8], degraded={8: [0.9, 0.4]})
    prompts = engine.default_prompts(5)
    one = engine.run(prompts, batch_size=1, max_draft_len=2, max_new_tokens=30)
    four = engine.run(prompts, batch_size=4, max_draft_len=2, max_new_tokens=30)
    eight = engine.run(prompts, batch_size=8, max_draft_len=2, max_new_tokens=30)
    assert one == four
    assert one != eight
    assert isinstance(engine, AcceptanceEngine)
