"""LLM(...) arguments: plain-data specs and their conversion through a fake tensorrt_llm.llmapi."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from regress.errors import MissingDependencyError, UsageError
from regress.trtllm.llm_config import (
    LlmSpec,
    build_spec,
    describe,
    graph_batch_sizes,
    mtp_kwargs,
    to_llm_kwargs,
)


class _Config:
    """A stand-in for a pydantic config class: records its keyword arguments."""

    model_fields: tuple[str, ...] = ()

    def __init__(self, **kwargs):
        unknown = set(kwargs) - set(self.model_fields)
        if unknown:
            raise TypeError(f"unexpected {sorted(unknown)}")
        self.kwargs = kwargs


class MTPDecodingConfig(_Config):
    model_fields = (
        "max_draft_len",
        "num_nextn_predict_layers",
        "mtp_eagle_one_model",
    )


class OldMTPDecodingConfig(_Config):
    model_fields = (
        "num_nextn_predict_layers",
        "mtp_eagle_one_model",
    )


class AncientMTPDecodingConfig(_Config):
    model_fields = ("num_nextn_predict_layers",)


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
    )


class MoeConfig(_Config):
    model_fields = ("backend",)


LLMAPI = SimpleNamespace(
    MTPDecodingConfig=MTPDecodingConfig,
    CudaGraphConfig=CudaGraphConfig,
    KvCacheConfig=KvCacheConfig,
    MoeConfig=MoeConfig,
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
    assert spec.cuda_graph_batch_sizes == (1, 2, 4, 8)
    assert spec.enable_iter_perf_stats is True
    assert describe(spec) == "b8-k4-graph"
    eager = build_spec("/m", batch_size=32, max_draft_len=3, cuda_graph=False)
    assert eager.cuda_graph_batch_sizes is None and describe(eager) == "b32-k3-eager"


def test_spec_is_json_data():
    spec = build_spec("/m", batch_size=8, max_draft_len=4, cuda_graph=True, moe_backend="CUTEDSL")
    data = json.loads(json.dumps(spec.to_dict()))
    assert data["cuda_graph_batch_sizes"] == [1, 2, 4, 8]
    assert data["moe_backend"] == "CUTEDSL"
    assert (
        LlmSpec(**{**data, "cuda_graph_batch_sizes": tuple(data["cuda_graph_batch_sizes"])}) == spec
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_draft_len": 0}, "max_draft_len must be >= 1"),
        ({"max_batch_size": 0}, "must be >= 1"),
        ({"max_batch_size": 8, "cuda_graph_batch_sizes": (1, 2, 4)}, "must reach max_batch_size"),
        ({"cuda_graph_batch_sizes": ()}, "must reach max_batch_size"),
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
    assert kwargs["load_format"] == "auto"
    assert kwargs["enable_iter_perf_stats"] is True
    assert kwargs["speculative_config"].kwargs == {"max_draft_len": 3, "mtp_eagle_one_model": True}
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
