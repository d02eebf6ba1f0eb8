"""LLM(...) arguments: plain-data specs and their conversion through a fake tensorrt_llm.llmapi."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from regress.errors import EngineError, MissingDependencyError, UsageError
from regress.trtllm import llm_config
from regress.trtllm.llm_config import (
    CudaGraphSpec,
    LlmSpec,
    build_mtp_config,
    build_spec,
    describe,
    effective_draft_len,
    graph_batch_sizes,
    mtp_kwargs,
    to_llm_kwargs,
)


class _Config:
    """A stand-in for a pydantic config class: records its keyword arguments as attributes."""

    model_fields: tuple[str, ...] = ()

    def __init__(self, **kwargs):
        unknown = set(kwargs) - set(self.model_fields)
        if unknown:
            raise TypeError(f"unexpected {sorted(unknown)}")
        self.kwargs = kwargs
        for name in self.model_fields:
            setattr(self, name, kwargs.get(name))


class MTPDecodingConfig(_Config):
    """The ~1.2 shape (llmapi/llm_args.py): ``max_draft_len`` inherited from
    ``DecodingBaseConfig``, ``num_nextn_predict_layers`` defaulting to 1, and an after-validator
    ``set_max_total_draft_tokens`` that overwrites ``max_draft_len`` with it."""

    model_fields = (
        "max_draft_len",
        "num_nextn_predict_layers",
        "mtp_eagle_one_model",
    )

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if self.num_nextn_predict_layers is None:
            self.num_nextn_predict_layers = 1
        self.max_draft_len = self.num_nextn_predict_layers  # the after-validator


class NoNextnMTPDecodingConfig(_Config):
    """A release that dropped the deprecated ``num_nextn_predict_layers``."""

    model_fields = ("max_draft_len", "mtp_eagle_one_model")


class OldMTPDecodingConfig(_Config):
    model_fields = (
        "num_nextn_predict_layers",
        "mtp_eagle_one_model",
    )


class AncientMTPDecodingConfig(_Config):
    model_fields = ("num_nextn_predict_layers",)


class NewestMTPDecodingConfig(_Config):
    """The shape @ 00043967: ``max_draft_len`` honoured, ``num_nextn_predict_layers`` an internal
    field that a ``mode="before"`` validator moves onto ``max_draft_len``."""

    model_fields = ("max_draft_len", "num_nextn_predict_layers", "mtp_eagle_one_model")

    def __init__(self, **kwargs):
        passed = dict(kwargs)
        if "num_nextn_predict_layers" in kwargs:
            kwargs.setdefault("max_draft_len", kwargs.pop("num_nextn_predict_layers"))
        super().__init__(**kwargs)
        self.kwargs = passed  # what the caller passed, before the remap


class StuckAtOneMTPDecodingConfig(_Config):
    """Ignores whatever K it is given (a release whose spelling regress does not know yet)."""

    model_fields = ("max_draft_len", "mtp_eagle_one_model")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.max_draft_len = 1


class CudaGraphConfig(_Config):
    model_fields = (
        "batch_sizes",
        "enable_padding",
        "max_batch_size",
    )


class KvCacheConfig(_Config):
    model_fields = (
        "free_gpu_memory_fraction",
        "enable_block_reuse",
        "use_kv_cache_manager_v2",
        "max_tokens",
    )


class MoeConfig(_Config):
    model_fields = ("backend", "max_num_tokens")


class DeepSeekSparseAttentionConfig(_Config):
    model_fields = ("index_share_for_mtp_iteration", "enable_heuristic_topk")


LLMAPI = SimpleNamespace(
    MTPDecodingConfig=MTPDecodingConfig,
    CudaGraphConfig=CudaGraphConfig,
    KvCacheConfig=KvCacheConfig,
    MoeConfig=MoeConfig,
    DeepSeekSparseAttentionConfig=DeepSeekSparseAttentionConfig,
)


def test_graph_batch_sizes_reach_the_batch_and_cover_the_tail():
    assert graph_batch_sizes(1) == (1,)
    assert graph_batch_sizes(8) == (1, 2, 4, 8)
    assert graph_batch_sizes(32) == (1, 2, 4, 8, 16, 32)
    assert graph_batch_sizes(24) == (1, 2, 4, 8, 16, 24)


def test_spec_for_a_case():
    spec = build_spec(
        "/m/GLM", batch_size=8, max_draft_len=4, cuda_graph=True, tensor_parallel_size=4
    )
    assert spec.max_batch_size == 8
    assert spec.max_draft_len == 4
    assert spec.mtp_eagle_one_model is True
    assert spec.cuda_graph_config == CudaGraphSpec(batch_sizes=(1, 2, 4, 8), enable_padding=True)
    assert spec.enable_iter_perf_stats is True
    assert describe(spec) == "b8-k4-graph"
    eager = build_spec("/m", batch_size=32, max_draft_len=3, cuda_graph=False)
    assert eager.cuda_graph_config is None and describe(eager) == "b32-k3-eager"
    assert describe(LlmSpec(model="/m", max_batch_size=None)) == "bdefault-k1-eager"


def test_spec_is_json_data():
    spec = build_spec("/m", batch_size=8, max_draft_len=4, cuda_graph=True, moe_backend="CUTEDSL")
    data = json.loads(json.dumps(spec.to_dict()))
    assert data["cuda_graph_config"] == {"batch_sizes": [1, 2, 4, 8], "enable_padding": True}
    assert data["moe_backend"] == "CUTEDSL"
    graph = data["cuda_graph_config"]
    rebuilt = CudaGraphSpec(tuple(graph["batch_sizes"]), enable_padding=graph["enable_padding"])
    assert LlmSpec(**{**data, "cuda_graph_config": rebuilt}) == spec


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_draft_len": 0}, "max_draft_len must be >= 1"),
        ({"max_batch_size": 0}, "must be >= 1"),
        (
            {"max_batch_size": 8, "cuda_graph_config": CudaGraphSpec(batch_sizes=(1, 2, 4))},
            "would run eager",
        ),
        (
            {"max_batch_size": 256, "cuda_graph_config": CudaGraphSpec()},
            "reach batch 128",  # CudaGraphConfig()'s default largest batch
        ),
        ({"cuda_graph_config": CudaGraphSpec(batch_sizes=())}, "batch_sizes is empty"),
        ({"mtp_spelling": "nextn"}, "mtp_spelling must be one of"),
    ],
)
def test_invalid_specs_are_usage_errors(kwargs, message):
    with pytest.raises(UsageError, match=message):
        LlmSpec(model="/m", **kwargs)


def test_kwargs_hold_the_real_config_objects():
    spec = build_spec(
        "/m/DSV32",
        batch_size=32,
        max_draft_len=3,
        cuda_graph=True,
        tensor_parallel_size=8,
        moe_expert_parallel_size=8,
        moe_backend="DEEPGEMM",
    )
    kwargs = to_llm_kwargs(spec, LLMAPI)
    assert kwargs["model"] == "/m/DSV32"
    assert kwargs["tensor_parallel_size"] == 8
    assert kwargs["moe_expert_parallel_size"] == 8
    assert kwargs["max_batch_size"] == 32
    assert "load_format" not in kwargs  # real weights: TensorRT-LLM's default
    assert kwargs["enable_iter_perf_stats"] is True
    assert kwargs["speculative_config"].kwargs == {
        "num_nextn_predict_layers": 3,
        "mtp_eagle_one_model": True,
    }
    assert kwargs["speculative_config"].max_draft_len == 3
    assert kwargs["cuda_graph_config"].kwargs == {
        "batch_sizes": [1, 2, 4, 8, 16, 32],
        "enable_padding": True,
    }
    assert kwargs["kv_cache_config"].kwargs == {
        "free_gpu_memory_fraction": 0.7,
        "enable_block_reuse": False,
    }
    assert kwargs["moe_config"].kwargs == {"backend": "DEEPGEMM"}
    assert "skip_tokenizer_init" not in kwargs and "enable_attention_dp" not in kwargs


def test_cuda_graph_off_is_an_explicit_none():
    kwargs = to_llm_kwargs(
        build_spec("/m", batch_size=8, max_draft_len=4, cuda_graph=False), LLMAPI
    )
    assert "cuda_graph_config" in kwargs and kwargs["cuda_graph_config"] is None


def test_dummy_spec_kwargs():
    spec = build_spec(
        "/tmp/tiny",
        batch_size=8,
        max_draft_len=4,
        cuda_graph=False,
        load_format="dummy",
        skip_tokenizer_init=True,
        max_seq_len=512,
        extra={"max_num_tokens": 4096},
    )
    kwargs = to_llm_kwargs(spec, LLMAPI)
    assert kwargs["load_format"] == "dummy"
    assert kwargs["skip_tokenizer_init"] is True
    assert kwargs["max_seq_len"] == 512
    assert kwargs["max_num_tokens"] == 4096
    assert "moe_config" not in kwargs and "moe_expert_parallel_size" not in kwargs


def test_mtp_draft_length_field_follows_the_release():
    assert mtp_kwargs(MTPDecodingConfig, 4, True) == {
        "num_nextn_predict_layers": 4,
        "mtp_eagle_one_model": True,
    }
    assert mtp_kwargs(NoNextnMTPDecodingConfig, 4, True) == {
        "max_draft_len": 4,
        "mtp_eagle_one_model": True,
    }
    assert mtp_kwargs(OldMTPDecodingConfig, 4, True) == {
        "num_nextn_predict_layers": 4,
        "mtp_eagle_one_model": True,
    }
    # A release without the one-model switch runs MTP-Eagle one-model by default.
    assert mtp_kwargs(AncientMTPDecodingConfig, 3, True) == {"num_nextn_predict_layers": 3}
    with pytest.raises(UsageError, match="two-model MTP-Eagle cannot"):
        mtp_kwargs(AncientMTPDecodingConfig, 3, False)


@pytest.mark.parametrize("cls", [MTPDecodingConfig, NoNextnMTPDecodingConfig, OldMTPDecodingConfig])
@pytest.mark.parametrize("k", [1, 3, 4])
def test_every_release_shape_runs_the_requested_k(cls, k):
    config = build_mtp_config(SimpleNamespace(MTPDecodingConfig=cls), k)
    assert effective_draft_len(config) == k


def test_the_old_rule_silently_ran_k1_on_a_12_era_build(monkeypatch):
    """Issue 11 item 3: passing max_draft_len because the field is declared (inherited) lets the
    ~1.2 after-validator reset K to num_nextn_predict_layers = 1. Put the old rule back: the
    check now refuses the case, naming both numbers."""
    monkeypatch.setattr(
        llm_config,
        "mtp_kwargs",
        lambda cls, k, one, *spelling: {"max_draft_len": k, "mtp_eagle_one_model": one},
    )
    with pytest.raises(EngineError, match=r"K=4 .*max_draft_len=1"):
        build_mtp_config(LLMAPI, 4)


def test_a_config_that_ignores_k_fails_the_case_with_both_numbers():
    llmapi = SimpleNamespace(**{**vars(LLMAPI), "MTPDecodingConfig": StuckAtOneMTPDecodingConfig})
    spec = build_spec("/m", batch_size=8, max_draft_len=4, cuda_graph=False)
    with pytest.raises(EngineError, match=r"asked for K=4 .* reports max_draft_len=1"):
        to_llm_kwargs(spec, llmapi)


def test_effective_draft_len_reads_what_the_executor_reads():
    assert effective_draft_len(SimpleNamespace(max_draft_len=3, num_nextn_predict_layers=1)) == 3
    assert effective_draft_len(SimpleNamespace(max_draft_len=None, num_nextn_predict_layers=2)) == 2
    assert effective_draft_len(SimpleNamespace()) is None


def test_old_release_gets_num_nextn_predict_layers():
    old = SimpleNamespace(**{**vars(LLMAPI), "MTPDecodingConfig": OldMTPDecodingConfig})
    kwargs = to_llm_kwargs(build_spec("/m", batch_size=1, max_draft_len=3, cuda_graph=False), old)
    assert kwargs["speculative_config"].kwargs == {
        "num_nextn_predict_layers": 3,
        "mtp_eagle_one_model": True,
    }


def test_without_tensorrt_llm_the_conversion_says_so():
    try:
        import tensorrt_llm  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover - a GPU box with TensorRT-LLM installed
        pytest.skip("tensorrt_llm is installed here")
    with pytest.raises(MissingDependencyError, match=r"tensorrt_llm\.llmapi"):
        to_llm_kwargs(build_spec("/m", batch_size=1, max_draft_len=1, cuda_graph=False))


# -- upstream's own spelling of K where the build honours it (issue 21) ----------------------


@pytest.mark.parametrize(
    ("cls", "spelling", "passed"),
    [
        (NewestMTPDecodingConfig, "max_draft_len", "max_draft_len"),  # GLM-5.2's test
        (NewestMTPDecodingConfig, "num_nextn_predict_layers", "num_nextn_predict_layers"),
        (MTPDecodingConfig, "max_draft_len", "num_nextn_predict_layers"),  # ~1.2: falls back
        (OldMTPDecodingConfig, "max_draft_len", "num_nextn_predict_layers"),  # no max_draft_len
        (NoNextnMTPDecodingConfig, "num_nextn_predict_layers", "max_draft_len"),  # name dropped
    ],
)
def test_upstreams_spelling_is_passed_where_the_build_honours_it(cls, spelling, passed):
    config = build_mtp_config(SimpleNamespace(MTPDecodingConfig=cls), 3, spelling=spelling)
    assert set(config.kwargs) == {passed, "mtp_eagle_one_model"}
    assert effective_draft_len(config) == 3


def test_without_the_fallback_a_12_build_would_run_k1(monkeypatch):
    """The ~1.2 after-validator resets max_draft_len to num_nextn_predict_layers' default 1:
    GLM-5.2's spelling alone would run K=1. Remove the retry and the case is refused."""
    monkeypatch.setattr(llm_config, "_field_names", lambda cls: set())
    with pytest.raises(EngineError, match=r"K=3 .*max_draft_len=1"):
        build_mtp_config(
            SimpleNamespace(MTPDecodingConfig=MTPDecodingConfig), 3, spelling="max_draft_len"
        )


def test_the_new_fields_reach_their_config_objects():
    spec = LlmSpec(
        model="/m",
        max_batch_size=None,
        pipeline_parallel_size=1,
        cuda_graph_config=CudaGraphSpec(max_batch_size=128, enable_padding=True),
        enable_block_reuse=None,
        use_kv_cache_manager_v2=False,
        kv_cache_max_tokens=32768,
        enable_attention_dp=False,
        disable_overlap_scheduler=False,
        enable_chunked_prefill=True,
        sparse_attention={"index_share_for_mtp_iteration": True},
        moe_backend="CUTEDSL",
        moe_max_num_tokens=16384,
    )
    kwargs = to_llm_kwargs(spec, LLMAPI)
    assert "max_batch_size" not in kwargs and kwargs["pipeline_parallel_size"] == 1
    assert kwargs["cuda_graph_config"].kwargs == {"max_batch_size": 128, "enable_padding": True}
    assert kwargs["kv_cache_config"].kwargs == {
        "free_gpu_memory_fraction": 0.7,
        "use_kv_cache_manager_v2": False,
        "max_tokens": 32768,
    }
    assert kwargs["enable_attention_dp"] is False and kwargs["disable_overlap_scheduler"] is False
    assert kwargs["enable_chunked_prefill"] is True
    assert kwargs["sparse_attention_config"].kwargs == {"index_share_for_mtp_iteration": True}
    assert kwargs["moe_config"].kwargs == {"backend": "CUTEDSL", "max_num_tokens": 16384}


def test_cuda_graph_spec_largest_batch():
    assert CudaGraphSpec().largest == 128
    assert CudaGraphSpec(max_batch_size=24).largest == 24
    assert CudaGraphSpec(batch_sizes=(1, 2, 48)).largest == 48
    assert CudaGraphSpec(enable_padding=False).kwargs() == {"enable_padding": False}
