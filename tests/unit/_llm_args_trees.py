"""Regress's own fake ``tensorrt_llm/llmapi/llm_args.py`` and its drifted variants (no upstream code).

Not a test module: the ``llm_configs`` tests write one of these beside a fake DSA tree. The clean
fake is shaped like upstream's (pydantic models that forbid unknown fields, an arguments class with
``from_kwargs``) and accepts every configuration the integration tests build; each variant is one
edit of the kind that breaks a GPU run hours in.
"""

from __future__ import annotations

from pathlib import Path

from _upstream_trees import build_tree, write_files

LLM_ARGS_PATH = "tensorrt_llm/llmapi/llm_args.py"

CLEAN = '''"""A fake llm_args.py: regress's own, shaped like upstream's."""

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MOE_BACKENDS = ("CUTLASS", "DEEPGEMM", "CUTEDSL")


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MTPDecodingConfig(StrictModel):
    max_draft_len: Optional[int] = None
    num_nextn_predict_layers: Optional[int] = None
    mtp_eagle_one_model: bool = True

    @model_validator(mode="after")
    def _one_draft_len(self):
        if self.max_draft_len is None:
            self.max_draft_len = self.num_nextn_predict_layers or 1
        return self


class CudaGraphConfig(StrictModel):
    batch_sizes: Optional[list[int]] = None
    max_batch_size: int = 0
    enable_padding: bool = False


class KvCacheConfig(StrictModel):
    free_gpu_memory_fraction: Optional[float] = None
    enable_block_reuse: bool = True
    use_kv_cache_manager_v2: Union[bool, Literal["auto"]] = "auto"
    max_tokens: Optional[int] = None


class MoeConfig(StrictModel):
    backend: str = "CUTLASS"
    max_num_tokens: Optional[int] = None

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value):
        if value not in MOE_BACKENDS:
            raise ValueError(f"unknown MoE backend {value!r}, expected one of {MOE_BACKENDS}")
        return value


class DeepSeekSparseAttentionConfig(StrictModel):
    index_share_for_mtp_iteration: Optional[bool] = None
    enable_heuristic_topk: bool = False


class TorchLlmArgs(StrictModel):
    model: str
    backend: Optional[str] = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    moe_expert_parallel_size: Optional[int] = None
    max_batch_size: Optional[int] = None
    max_num_tokens: Optional[int] = None
    max_seq_len: Optional[int] = None
    enable_attention_dp: bool = False
    disable_overlap_scheduler: bool = False
    enable_chunked_prefill: bool = False
    enable_iter_perf_stats: bool = False
    skip_tokenizer_init: bool = False
    load_format: str = "auto"
    speculative_config: Optional[MTPDecodingConfig] = None
    cuda_graph_config: Optional[CudaGraphConfig] = None
    kv_cache_config: KvCacheConfig = Field(default_factory=KvCacheConfig)
    moe_config: MoeConfig = Field(default_factory=MoeConfig)
    sparse_attention_config: Optional[DeepSeekSparseAttentionConfig] = None

    @classmethod
    def from_kwargs(cls, **kwargs):
        return cls(**kwargs)
'''

#: One edit each (old text -> new text, every occurrence) of :data:`CLEAN`, or a list of edits.
DRIFTS: dict[str, tuple[str, str] | list[tuple[str, str]]] = {
    # a KvCacheConfig field renamed: every case that sets the KV manager passes the old name
    "renamed_field": ("    use_kv_cache_manager_v2:", "    kv_cache_manager_v2:"),
    # a validator that now refuses a value GLM-5.2's cases pass
    "refusing_validator": (
        'MOE_BACKENDS = ("CUTLASS", "DEEPGEMM", "CUTEDSL")',
        'MOE_BACKENDS = ("CUTLASS", "DEEPGEMM")',
    ),
    # an LLM argument removed from the arguments class
    "removed_argument": ("    enable_iter_perf_stats: bool = False\n", ""),
    # a validator of the arguments class that now refuses a combination GLM-5.2's cases pass
    "refusing_args_validator": (
        "    @classmethod\n    def from_kwargs",
        '    @model_validator(mode="after")\n'
        "    def _no_chunked_prefill_with_mtp(self):\n"
        "        if self.speculative_config is not None and self.enable_chunked_prefill:\n"
        '            raise ValueError("chunked prefill is not supported with MTP")\n'
        "        return self\n\n"
        "    @classmethod\n    def from_kwargs",
    ),
    # a config class gone from the module
    "removed_class": ("DeepSeekSparseAttentionConfig", "SparseAttentionConfig"),
    # a validator that keeps one draft token whatever K is asked for
    "draft_len_dropped": (
        "        if self.max_draft_len is None:\n",
        "        self.num_nextn_predict_layers = None\n        if True:\n",
    ),
    # what upstream's own file does at import: mirror a compiled binding enum (its members) and use
    # an enum of mapping.py as a field default; the sandbox answers both (regress.sandbox.llm_args)
    "uses_bindings": (
        "MOE_BACKENDS =",
        "from ..bindings.executor import BatchingType as _BatchingType\n"
        "from ..mapping import CpType\n\n"
        "MIRRORED = sorted(_BatchingType.__members__)\n"
        "DEFAULT_CP = CpType.ULYSSES\n\n"
        "MOE_BACKENDS =",
    ),
    # a before-validator that still accepts the old spelling of K but warns it is going away
    "deprecated_spelling": [
        ("MOE_BACKENDS =", "from tensorrt_llm.logger import logger\n\nMOE_BACKENDS ="),
        (
            '    @model_validator(mode="after")\n    def _one_draft_len(self):',
            '    @model_validator(mode="before")\n'
            "    @classmethod\n"
            "    def _warn_old_spelling(cls, data):\n"
            '        if isinstance(data, dict) and "num_nextn_predict_layers" in data:\n'
            '            logger.warning("num_nextn_predict_layers is deprecated: use max_draft_len")\n'
            "        return data\n\n"
            '    @model_validator(mode="after")\n    def _one_draft_len(self):',
        ),
    ],
    # a third-party package the machine lacks (upstream's strenum, pydantic), imported at the top
    "needs_a_package": (
        "from pydantic import",
        "import regress_test_absent_package  # noqa: F401\nfrom pydantic import",
    ),
    # module-level code that calls a module the sandbox stubs: it cannot load here
    "needs_a_stub": (
        "MOE_BACKENDS =",
        "from tensorrt_llm._utils import mpi_rank\n\nRANK = mpi_rank()\nMOE_BACKENDS =",
    ),
}


def llm_args_text(drift: str | None = None) -> str:
    """:data:`CLEAN`, or it with the edit :data:`DRIFTS` names for ``drift``."""
    if drift is None:
        return CLEAN
    edits = DRIFTS[drift]
    text = CLEAN
    for old, new in edits if isinstance(edits, list) else [edits]:
        assert old in text, drift
        text = text.replace(old, new)
    return text


def build_llm_args_tree(root: Path, drift: str | None = None, *, with_file: bool = True) -> Path:
    """A fake era-C DSA tree under ``root`` with the fake ``llm_args.py`` (or none)."""
    build_tree(root, "C", "post")
    if with_file:
        write_files(root, {LLM_ARGS_PATH: llm_args_text(drift)})
    return root
