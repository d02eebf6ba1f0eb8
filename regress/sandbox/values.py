"""What the sandbox's stubs answer: values for the compiled and GPU-only names upstream's DSA
metadata reads, per sandbox run (:func:`stub_values`) and for the DSA cache-manager module
(:func:`cache_manager_values`). :func:`regress.sandbox.eras.all_values` joins them for a plan.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from regress.sandbox.fakes import (
    FakeDeepseekV4CacheManager,
    FakeKVCacheManager,
    RecordingLogger,
)

if TYPE_CHECKING:
    from regress.sandbox.eras import Settings


@dataclass
class KVCacheParamsStandIn:
    """Stands for ``tensorrt_llm/_torch/metadata.py::KVCacheParams`` (a pure-Python dataclass)."""

    use_cache: bool = True
    num_cached_tokens_per_seq: list[int] | None = None
    block_ids_per_seq: list[list[int]] | None = None
    host_max_attention_window_sizes: Any = None
    host_sink_token_length: Any = None
    num_extra_kv_tokens: int = 0


def _compile_passthrough(*args: Any, **kwargs: Any) -> Any:
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def stub_values(settings: Settings) -> dict[str, dict[str, tuple[Any, str]]]:
    """What each stubbed module answers, with the reason it is safe to fake."""
    import torch

    def mqa_metadata(context_lens, block_kv, num_sms):
        return torch.zeros((num_sms + 1, 2), dtype=torch.int32, device=context_lens.device)

    global_attrs = types.SimpleNamespace()
    logger = RecordingLogger()
    utils = {
        "prefer_pinned": (lambda: False, "no pinned memory on a CPU build"),
        "maybe_pin_memory": (lambda t: t.clone(), "a CPU copy (pinning copies upstream too)"),
        "get_sm_version": (lambda: settings.sm, f"pretends SM {settings.sm}"),
        "ceil_div": (_ceil_div, "integer ceil division"),
    }
    return {
        "tensorrt_llm._utils": utils,
        "tensorrt_llm.math_utils": {"ceil_div": utils["ceil_div"]},
        "tensorrt_llm.deep_gemm": {
            "get_num_sms": (lambda: settings.num_sms, f"{settings.num_sms} SMs (H200)"),
            "get_paged_mqa_logits_metadata": (
                mqa_metadata,
                "DeepGEMM scheduler metadata (a CUDA kernel): zeros of the right shape",
            ),
        },
        "tensorrt_llm._torch.utils": {
            "maybe_compile": (_compile_passthrough, "torch.compile decorator: identity"),
            "get_model_extra_attrs": (lambda: None, "no model context"),
            "get_global_attrs": (lambda: global_attrs, "a namespace"),
            "ceil_div": utils["ceil_div"],
        },
        "tensorrt_llm._torch.metadata": {
            "KVCacheParams": (KVCacheParamsStandIn, "pure-Python dataclass, same fields"),
        },
        "tensorrt_llm._torch.cute_dsl_utils": {
            "IS_CUTLASS_DSL_AVAILABLE": (False, "no CuTe DSL on a CPU"),
        },
        "tensorrt_llm._torch.flashinfer_utils": {
            "IS_FLASHINFER_AVAILABLE": (False, "no flashinfer on a CPU (greedy sampling only)"),
        },
        "tensorrt_llm.logger": {"logger": (logger, "messages recorded, not printed")},
        "tensorrt_llm._torch.attention.backends.cpp_schema": {
            "cpp_metadata": (
                _cpp_field,
                "C++ schema annotation on a dataclass field: a plain field with the default",
            ),
        },
    }


def _cpp_field(*, ctype: Any = None, default: Any = None, **kwargs: Any) -> Any:
    return dataclasses.field(default=default)


def cache_manager_values(dsa_dir_module: str) -> dict[str, dict[str, tuple[Any, str]]]:
    """``is_dsa_cache_manager`` is an isinstance check on C++-backed classes: accept the fake."""
    check = (
        lambda m: (
            isinstance(m, FakeKVCacheManager) and not isinstance(m, FakeDeepseekV4CacheManager)
        ),
        "isinstance against C++-backed managers: accepts the fake DSA manager (the DeepSeek-V4 "
        "one is a KVCacheManagerV2, not a DSA manager, upstream too)",
    )
    return {f"{dsa_dir_module}.cache_manager": {"is_dsa_cache_manager": check}}
