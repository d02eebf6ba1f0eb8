"""Fake modules shared by the TensorRT-LLM unit tests."""

# Source of a stand-in for regress.dsa.sentinel: a violation whenever a metadata object is stale.
FAKE_SENTINEL_MODULE = """
class Sentinel:
    def __init__(self):
        self.violations = []

    def attach(self, metadata):
        inner = metadata.prepare

        def prepare():
            inner()
            if metadata.stale:
                self.violations.append({"check": "req_idx_map", "message": "stale map"})

        metadata.prepare = prepare
"""


class RecordedConfig:
    """A stand-in for a ``tensorrt_llm.llmapi`` config class: keeps what it was passed.

    Subclasses list their fields in ``model_fields`` (what ``llm_config._field_names`` reads);
    an argument outside them raises, as pydantic's ``StrictBaseModel`` does.
    """

    model_fields: tuple[str, ...] = ()

    def __init__(self, **kwargs):
        unknown = set(kwargs) - set(self.model_fields)
        if self.model_fields and unknown:
            raise TypeError(f"{type(self).__name__}: unexpected {sorted(unknown)}")
        self.kwargs = dict(kwargs)
        for name in self.model_fields:
            setattr(self, name, kwargs.get(name))


class NewestMTPDecodingConfig(RecordedConfig):
    """``MTPDecodingConfig`` @ 00043967: ``max_draft_len`` honoured; a passed
    ``num_nextn_predict_layers`` moved onto it by the ``mode="before"`` validator."""

    model_fields = ("max_draft_len", "num_nextn_predict_layers", "mtp_eagle_one_model")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if self.max_draft_len is None:
            self.max_draft_len = kwargs.get("num_nextn_predict_layers")


def recording_llmapi():
    """A ``tensorrt_llm.llmapi`` namespace whose configs record their arguments (newest shape)."""
    from types import SimpleNamespace

    def config(name, *fields):
        return type(name, (RecordedConfig,), {"model_fields": fields})

    return SimpleNamespace(
        MTPDecodingConfig=NewestMTPDecodingConfig,
        CudaGraphConfig=config(
            "CudaGraphConfig", "batch_sizes", "max_batch_size", "enable_padding"
        ),
        KvCacheConfig=config(
            "KvCacheConfig",
            "free_gpu_memory_fraction",
            "enable_block_reuse",
            "use_kv_cache_manager_v2",
            "max_tokens",
        ),
        MoeConfig=config("MoeConfig", "backend", "max_num_tokens"),
        DeepSeekSparseAttentionConfig=config(
            "DeepSeekSparseAttentionConfig",
            "index_share_for_mtp_iteration",
            "enable_heuristic_topk",
        ),
    )


def flatten_llm_kwargs(kwargs):
    """``LLM(**kwargs)`` as ``{"kv_cache_config.free_gpu_memory_fraction": 0.7, ...}`` rows.

    A config object becomes one row per argument it was passed (``{}`` when passed none, as
    upstream's bare ``CudaGraphConfig()``); ``model`` is left out (a path, not a setting).
    """
    rows = {}
    for name, value in kwargs.items():
        if name == "model":
            continue
        if isinstance(value, RecordedConfig):
            if not value.kwargs:
                rows[name] = {}
            for inner, inner_value in value.kwargs.items():
                rows[f"{name}.{inner}"] = inner_value
        else:
            rows[name] = value
    return rows


class FakeBuiltLLM:
    """A ``tensorrt_llm.LLM`` that upstream's test already built: MTP with ``k`` drafts.

    Each prompt's accepted counts come from its own seeded draw (the same at every batch size,
    as greedy decoding is), ``conditional[d]`` the chance of accepting depth ``d + 1`` given
    depth ``d``. With ``stale_above`` set, a request that shares the batch with more than that
    many others keeps at most one draft token (the stale-map bug's shape); with ``dead``, no
    draft is ever accepted (#18662). ``held`` are iteration stats of what ran before (upstream's
    workload); ``get_stats`` drains, like the executor's queue.
    """

    def __init__(
        self,
        *,
        k=3,
        conditional=(0.87, 0.86, 0.83),
        steps=40,
        max_batch_size=2048,
        stale_above=None,
        dead=False,
        held=(),
        enable_attention_dp=False,
    ):
        from types import SimpleNamespace

        self.args = SimpleNamespace(
            model="/models/GLM-5.2-NVFP4",
            max_batch_size=max_batch_size,
            enable_attention_dp=enable_attention_dp,
            speculative_config=SimpleNamespace(max_draft_len=k),
        )
        self.k, self.conditional, self.steps = k, conditional, steps
        self.stale_above, self.dead = stale_above, dead
        self.stats = list(held)
        self.in_flight = self.max_in_flight = 0
        self.shut_down = False

    def _accepted(self, prompt):
        import random

        rng = random.Random(str(prompt))
        out = []
        for _ in range(self.steps):
            a = 0
            while a < self.k and rng.random() < self.conditional[a]:
                a += 1
            out.append(0 if self.dead else a)
        return out

    def generate_async(self, prompt, sampling_params=None, streaming=False):
        assert streaming, "the sweep streams to see each step's accepted tokens"
        return _FakeStream(self, self._accepted(prompt), sampling_params.kwargs["max_tokens"])

    def get_stats(self, timeout):
        stats, self.stats = self.stats, []
        return stats

    def shutdown(self):
        self.shut_down = True


class _FakeStream:
    def __init__(self, llm, accepted, limit):
        from types import SimpleNamespace

        self.llm, self.limit, self.started = llm, limit, False
        self.pending = [1] + [a + 1 for a in accepted]
        self.output = SimpleNamespace(token_ids=[], finish_reason=None, request_perf_metrics=None)

    def __aiter__(self):
        return self

    async def __anext__(self):
        import asyncio
        from types import SimpleNamespace

        llm = self.llm
        if not self.started:
            self.started = True
            llm.in_flight += 1
            llm.max_in_flight = max(llm.max_in_flight, llm.in_flight)
        if self.output.finish_reason is not None:
            raise StopAsyncIteration
        await asyncio.sleep(0)
        n = self.pending.pop(0)
        if llm.stale_above is not None and llm.in_flight > llm.stale_above and n > 2:
            n = 2  # deep drafts read another request's indexer cache
        n = min(n, self.limit - len(self.output.token_ids))
        self.output.token_ids.extend([7] * n)
        if len(self.output.token_ids) > 1:
            llm.stats.append(
                {
                    "inflightBatchingStats": {"numScheduledRequests": llm.in_flight},
                    "specDecodingStats": {
                        "numDraftTokens": llm.k,
                        "numAcceptedTokens": n - 1,
                        "numRequestsWithDraftTokens": 1,
                    },
                }
            )
        if not self.pending or len(self.output.token_ids) >= self.limit:
            self.output.finish_reason = "length"
            llm.in_flight -= 1
        return SimpleNamespace(outputs=[self.output])


def fake_trtllm_package(monkeypatch):
    """Install a stand-in ``tensorrt_llm`` (``SamplingParams`` only) for one test."""
    import sys
    import types

    trt = types.ModuleType("tensorrt_llm")
    trt.__version__ = "0.0-fake"

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    trt.SamplingParams = SamplingParams
    monkeypatch.setitem(sys.modules, "tensorrt_llm", trt)
    return trt
