"""A tiny DeepSeek-V3.2-architecture ``config.json`` for checkpoint-free runs with dummy weights."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from regress.errors import UsageError


@dataclass(frozen=True)
class TinyConfig:
    """The shrunk model: few layers, one MTP layer, small hidden and expert sizes.

    What is shrunk is what costs memory and load time (layers, hidden size, experts, vocabulary).
    What is kept at DeepSeek-V3.2's values is what kernels pin: the MLA latent and rope widths
    (FlashMLA works on 512 + 64), the indexer head width 128 (the FP8 indexer K-cache quantises
    in blocks of 128 and DeepGEMM's ``fp8_paged_mqa_logits`` expects it), the indexer head count,
    ``index_topk`` 2048 and the yarn rope parameters. 16 attention heads is what a rank of the
    real model sees at TP=8 (128 / 8), a shape upstream already runs.

    ``TensorRT-LLM`` enables DSA when ``architectures[0]`` is ``DeepseekV32ForCausalLM`` (or
    ``GlmMoeDsaForCausalLM``) and reads ``index_n_heads``, ``index_head_dim`` and ``index_topk``
    from the config (``_torch/model_config.py``, ``ModelConfig.from_pretrained``); ``dsa=False``
    writes the DeepSeek-V3 architecture instead, the non-DSA twin for contrast tests.
    """

    dsa: bool = True
    num_hidden_layers: int = 2
    first_k_dense_replace: int = 1
    num_nextn_predict_layers: int = 1
    hidden_size: int = 1024
    intermediate_size: int = 2048
    moe_intermediate_size: int = 256
    n_routed_experts: int = 64
    n_shared_experts: int = 1
    num_experts_per_tok: int = 8
    n_group: int = 8
    topk_group: int = 4
    num_attention_heads: int = 16
    vocab_size: int = 32768
    # Pinned by kernels (see class docstring).
    kv_lora_rank: int = 512
    q_lora_rank: int = 1536
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    index_n_heads: int = 64
    index_head_dim: int = 128
    index_topk: int = 2048

    def __post_init__(self) -> None:
        problems = []
        if self.num_nextn_predict_layers < 1:
            problems.append("num_nextn_predict_layers must be >= 1: MTP needs its layer")
        if not 0 <= self.first_k_dense_replace < self.num_hidden_layers:
            problems.append("first_k_dense_replace must leave at least one MoE layer")
        if self.n_routed_experts % self.n_group:
            problems.append("n_routed_experts must divide evenly into n_group groups")
        elif self.num_experts_per_tok > self.topk_group * (self.n_routed_experts // self.n_group):
            problems.append("num_experts_per_tok exceeds the experts of the top-k groups")
        if problems:
            raise UsageError("Invalid tiny config: " + "; ".join(problems))

    def with_(self, **changes: Any) -> TinyConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The ``config.json`` content, with DeepSeek-V3.2's key set."""
        fields = asdict(self)
        dsa = fields.pop("dsa")
        index_fields = {k: fields.pop(k) for k in ("index_n_heads", "index_head_dim", "index_topk")}
        config: dict[str, Any] = {
            "architectures": ["DeepseekV32ForCausalLM" if dsa else "DeepseekV3ForCausalLM"],
            "model_type": "deepseek_v32" if dsa else "deepseek_v3",
            **fields,
            "num_key_value_heads": self.num_attention_heads,
            "moe_layer_freq": 1,
            "ep_size": 1,
            "norm_topk_prob": True,
            "routed_scaling_factor": 2.5,
            "scoring_func": "sigmoid",
            "topk_method": "noaux_tc",
            "hidden_act": "silu",
            "rms_norm_eps": 1e-6,
            "initializer_range": 0.02,
            "attention_bias": False,
            "attention_dropout": 0.0,
            "tie_word_embeddings": False,
            "use_cache": True,
            "bos_token_id": 0,
            "eos_token_id": 1,
            "max_position_embeddings": 163840,
            "rope_theta": 10000,
            "rope_scaling": {
                "type": "yarn",
                "factor": 40,
                "original_max_position_embeddings": 4096,
                "beta_fast": 32,
                "beta_slow": 1,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
            },
            "torch_dtype": "bfloat16",
        }
        if dsa:
            config.update(index_fields)
        return config

    def write(self, directory: Path | str) -> Path:
        """Write ``config.json`` into ``directory`` (created if needed) and return the directory.

        The file is written to a temporary name and renamed, so a reader never sees half of it.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".config.", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(self.to_dict(), handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.replace(tmp, directory / "config.json")
        return directory


def write_tiny_config(directory: Path | str, *, dsa: bool = True, **changes: Any) -> Path:
    """Shorthand: ``TinyConfig(dsa=dsa, **changes).write(directory)``."""
    return TinyConfig(dsa=dsa, **changes).write(directory)
