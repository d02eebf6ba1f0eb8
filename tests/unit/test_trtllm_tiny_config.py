"""The tiny DeepSeek-V3.2-architecture config.json written for dummy-weight runs."""

from __future__ import annotations

import json

import pytest

from regress.errors import UsageError
from regress.trtllm.tiny_config import TinyConfig, write_tiny_config

# The key set of DeepSeek-V3.2-Exp's config.json, less quantization_config (dummy weights are bf16)
# and transformers_version.
DEEPSEEK_V32_KEYS = {
    "architectures", "attention_bias", "attention_dropout", "bos_token_id", "eos_token_id",
    "ep_size", "first_k_dense_replace", "hidden_act", "hidden_size", "index_head_dim",
    "index_n_heads", "index_topk", "initializer_range", "intermediate_size", "kv_lora_rank",
    "max_position_embeddings", "model_type", "moe_intermediate_size", "moe_layer_freq", "n_group",
    "n_routed_experts", "n_shared_experts", "norm_topk_prob", "num_attention_heads",
    "num_experts_per_tok", "num_hidden_layers", "num_key_value_heads", "num_nextn_predict_layers",
    "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "rms_norm_eps", "rope_scaling",
    "rope_theta", "routed_scaling_factor", "scoring_func", "tie_word_embeddings", "topk_group",
    "topk_method", "torch_dtype", "use_cache", "v_head_dim", "vocab_size",
}  # fmt: skip


def test_written_config_has_deepseek_v32_keys_and_architecture(tmp_path):
    directory = write_tiny_config(tmp_path / "tiny")
    config = json.loads((directory / "config.json").read_text())
    assert set(config) == DEEPSEEK_V32_KEYS
    # TensorRT-LLM turns DSA on from the architecture name (ModelConfig.from_pretrained).
    assert config["architectures"] == ["DeepseekV32ForCausalLM"]
    assert config["model_type"] == "deepseek_v32"


def test_it_is_tiny_with_exactly_one_mtp_layer(tmp_path):
    config = TinyConfig().to_dict()
    assert config["num_hidden_layers"] <= 4
    assert config["num_nextn_predict_layers"] == 1
    assert config["hidden_size"] <= 2048
    assert config["n_routed_experts"] <= 64
    assert config["first_k_dense_replace"] < config["num_hidden_layers"]  # has a MoE layer


def test_kernel_pinned_dimensions_stay_at_deepseek_v32_values():
    config = TinyConfig().to_dict()
    assert (config["kv_lora_rank"], config["qk_rope_head_dim"]) == (512, 64)
    assert (config["index_head_dim"], config["index_n_heads"], config["index_topk"]) == (
        128,
        64,
        2048,
    )
    assert config["rope_scaling"]["type"] == "yarn"
    assert "quantization_config" not in config


def test_dense_twin_drops_the_indexer():
    config = TinyConfig(dsa=False).to_dict()
    assert config["architectures"] == ["DeepseekV3ForCausalLM"]
    assert config["model_type"] == "deepseek_v3"
    assert not {"index_n_heads", "index_head_dim", "index_topk"} & set(config)
    assert set(config) == DEEPSEEK_V32_KEYS - {"index_n_heads", "index_head_dim", "index_topk"}


def test_overrides_are_validated():
    assert TinyConfig().with_(num_hidden_layers=3).to_dict()["num_hidden_layers"] == 3
    with pytest.raises(UsageError, match="MTP needs its layer"):
        TinyConfig(num_nextn_predict_layers=0)
    with pytest.raises(UsageError, match="at least one MoE layer"):
        TinyConfig(first_k_dense_replace=2, num_hidden_layers=2)
    with pytest.raises(UsageError, match="n_group"):
        TinyConfig(n_routed_experts=60, n_group=8)
    with pytest.raises(UsageError, match="top-k groups"):
        TinyConfig(num_experts_per_tok=8, n_routed_experts=16, n_group=8, topk_group=2)


def test_write_replaces_atomically_and_leaves_no_temp_files(tmp_path):
    write_tiny_config(tmp_path, hidden_size=512)
    write_tiny_config(tmp_path, hidden_size=768)
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]
    assert json.loads((tmp_path / "config.json").read_text())["hidden_size"] == 768
