"""The acceptance matrix: models, case ids, axes, batch-1 references and the specs cases build."""

from __future__ import annotations

import itertools

import pytest

from regress.trtllm.cases import (
    BATCH_SIZES,
    DEEPSEEK_V32,
    DEVIATIONS,
    DRAFT_LENS,
    GLM52,
    MODELS,
    NUM_PROMPTS,
    POOL_FILL_KV_TOKENS,
    Case,
    cases,
    index_share_cases,
    kv_manager_cases,
    pool_fill_cases,
)
from regress.trtllm.llm_config import CudaGraphSpec
from regress.trtllm.requirements import BLACKWELL, HOPPER


def test_matrix_is_batch_by_k_by_graph_for_each_model():
    assert (BATCH_SIZES, DRAFT_LENS, NUM_PROMPTS) == ((1, 8, 32), (1, 3, 4), 80)
    for model in MODELS:
        matrix = list(cases(model))
        assert len(matrix) == 18
        assert len({c.id for c in matrix}) == 18
        assert {(c.batch_size, c.max_draft_len, c.cuda_graph) for c in matrix} == {
            (b, k, g) for b in (1, 8, 32) for k in (1, 3, 4) for g in (False, True)
        }


def test_cases_sharing_a_reference_are_adjacent():
    series = [c.series for c in cases(GLM52)]
    changes = sum(1 for a, b in itertools.pairwise(series) if a != b)
    assert changes == 6 - 1  # six series (3 K x 2 graph settings), each contiguous


def test_ids_and_references():
    case = Case(GLM52, 8, 4, True)
    assert case.id == "b8-k4-graph"
    assert Case(GLM52, 32, 1, False).id == "b32-k1-eager"
    assert case.reference == Case(GLM52, 1, 4, True)
    assert case.reference.reference == case.reference
    assert case.reference_keys() == (
        "TestGLM52NVFP4::test_acceptance[k4-graph]",
        "TestGLM52NVFP4::test_acceptance[k4]",
    )


def test_axis_ids_name_every_parameter_set_away_from_upstream():
    assert [c.id for c in kv_manager_cases(DEEPSEEK_V32)] == [
        f"b{b}-k{k}-graph-kv{kv}" for kv in ("v2", "v1") for k in (1, 3) for b in (1, 8)
    ]
    share = [c.id for c in index_share_cases(GLM52)]
    assert share[:3] == ["b1-k3-graph-noshare", "b8-k3-graph-noshare", "b32-k3-graph-noshare"]
    assert share[-1] == "b32-k4-graph-share" and len(share) == 12
    assert list(index_share_cases(DEEPSEEK_V32)) == []  # only GLM-5.2 shares its indexer
    assert [c.id for c in pool_fill_cases(GLM52)] == [
        "b32-k1-graph-kvv2-pool",
        "b32-k3-graph-kvv2-pool",
    ]
    assert Case(GLM52, 8, 3, True, block_reuse=False, attention_dp=True).id == (
        "b8-k3-graph-noreuse-adp"
    )
    keys = Case(GLM52, 8, 3, True, kv_manager="v1").reference_keys("test_kv_cache_manager")
    assert keys[0] == "TestGLM52NVFP4::test_kv_cache_manager[k3-graph-kvv1]"


def test_counterparts_pair_each_axis_at_the_same_batch():
    v1 = Case(DEEPSEEK_V32, 8, 3, True, kv_manager="v1")
    assert v1.counterpart.check == "kv_manager_parity"
    assert v1.counterpart.case == Case(DEEPSEEK_V32, 8, 3, True, kv_manager="v2")
    assert Case(DEEPSEEK_V32, 8, 3, True, kv_manager="v2").counterpart is None
    share = Case(GLM52, 32, 3, True, index_share=True)
    assert share.counterpart.check == "index_share_decay"
    assert share.counterpart.case == Case(GLM52, 32, 3, True, index_share=False)
    # The #15806 stash bug needs other requests in the batch: batch 1 has no counterpart.
    assert Case(GLM52, 1, 3, True, index_share=True).counterpart is None


def test_cases_hash_so_the_run_cache_can_key_on_them():
    assert len({Case(DEEPSEEK_V32, 8, 1, True), Case(DEEPSEEK_V32, 8, 1, True)}) == 1


def test_deviations_are_the_parameters_set_away_from_upstream():
    assert Case(GLM52, 8, 3, True).deviations() == {"batch_size"}
    assert Case(GLM52, 8, 4, False).deviations() == {"batch_size", "max_draft_len", "cuda_graph"}
    # DeepSeek-V3.2's baseline_mtp1 runs attention DP on; the matrix runs it off.
    assert Case(DEEPSEEK_V32, 8, 1, True).deviations() == {"batch_size", "attention_dp"}
    assert Case(DEEPSEEK_V32, 8, 1, True, attention_dp=True).deviations() == {"batch_size"}
    every = {d.parameter for d in DEVIATIONS.values()}
    assert every - {"always"} <= {f.name for f in Case.__dataclass_fields__.values()}


@pytest.mark.parametrize(
    ("sm", "backend", "tokens", "fraction"),
    [
        (90, None, None, 0.7),
        (100, "DEEPGEMM", 16384, 0.6),
        (103, "DEEPGEMM", 16384, 0.6),
        (120, None, None, 0.7),  # SM120 is Blackwell but not upstream's SM 100/103 set
        (None, None, None, 0.7),
    ],
)
def test_deepseek_v32_switches_settings_on_sm_100_and_103_only(sm, backend, tokens, fraction):
    spec = Case(DEEPSEEK_V32, 8, 1, True).spec("/m", sm=sm)
    assert (spec.moe_backend, spec.moe_max_num_tokens) == (backend, tokens)
    assert spec.free_gpu_memory_fraction == fraction


def test_model_requirements():
    assert DEEPSEEK_V32.needs.checkpoint == "DeepSeek-V3.2-Exp-hf"
    assert (DEEPSEEK_V32.needs.gpus, DEEPSEEK_V32.needs.min_sm) == (8, HOPPER)
    assert DEEPSEEK_V32.needs.min_memory_mib == 140_000
    assert GLM52.needs.checkpoint == "GLM-5.2-NVFP4"
    assert (GLM52.needs.gpus, GLM52.needs.min_sm) == (8, BLACKWELL)
    assert "690 GB" in DEEPSEEK_V32.why and "TP=8" in DEEPSEEK_V32.why


def test_spec_of_a_case():
    spec = Case(DEEPSEEK_V32, 32, 3, True).spec("/models/DeepSeek-V3.2-Exp-hf", sm=90)
    assert spec.model == "/models/DeepSeek-V3.2-Exp-hf"
    assert (spec.tensor_parallel_size, spec.moe_expert_parallel_size) == (8, 8)
    assert spec.max_batch_size == 32 and spec.max_draft_len == 3
    assert spec.cuda_graph_config == CudaGraphSpec()  # upstream's bare CudaGraphConfig()
    assert spec.mtp_spelling == "num_nextn_predict_layers"
    assert spec.enable_attention_dp is False and spec.enable_block_reuse is None
    glm = Case(GLM52, 8, 3, True).spec("/m", sm=100)
    assert glm.cuda_graph_config == CudaGraphSpec(max_batch_size=128, enable_padding=True)
    assert (glm.mtp_spelling, glm.enable_chunked_prefill) == ("max_draft_len", True)
    assert glm.enable_attention_dp is None  # upstream's test does not pass it
    assert (
        Case(GLM52, 8, 4, False).spec("/m", free_gpu_memory_fraction=0.5).cuda_graph_config is None
    )
    assert (
        Case(GLM52, 8, 4, False).spec("/m", free_gpu_memory_fraction=0.5).free_gpu_memory_fraction
        == 0.5
    )


def test_axis_parameters_reach_the_spec():
    v1 = Case(GLM52, 8, 3, True, kv_manager="v1").spec("/m")
    assert v1.use_kv_cache_manager_v2 is False
    assert Case(GLM52, 8, 3, True, kv_manager="v2").spec("/m").use_kv_cache_manager_v2 is True
    assert Case(GLM52, 8, 3, True).spec("/m").use_kv_cache_manager_v2 is None  # "auto"
    off = Case(GLM52, 8, 3, True, index_share=False).spec("/m")
    assert off.sparse_attention == {"index_share_for_mtp_iteration": False}
    (pool,) = list(pool_fill_cases(GLM52))[:1]
    spec = pool.spec("/m")
    assert (spec.kv_cache_max_tokens, spec.use_kv_cache_manager_v2) == (POOL_FILL_KV_TOKENS, True)
    assert spec.enable_block_reuse is None  # upstream's default: on, as in #18660


def test_upstream_spec_is_upstreams_own_test():
    glm = GLM52.upstream_spec("/m", sm=100)
    assert glm.max_batch_size is None and glm.max_draft_len == 3
    dsv = DEEPSEEK_V32.upstream_spec("/m", sm=100)
    assert (dsv.max_batch_size, dsv.enable_attention_dp, dsv.max_draft_len) == (24, True, 1)
    heuristic = DEEPSEEK_V32.upstream_spec("/m", sm=100, variant="heuristic_topk_mtp1")
    assert heuristic.sparse_attention == {"enable_heuristic_topk": True}
    assert DEEPSEEK_V32.variant("heuristic_topk_mtp1").min_sm == BLACKWELL
    with pytest.raises(KeyError):
        GLM52.variant("latency")


def test_models_cite_the_upstream_test_they_follow():
    assert GLM52.upstream.cite() == (
        "tests/integration/defs/accuracy/test_glm52.py::TestGLM52NVFP4::test_mtp_index_share"
        " @ 16d54ba2"
    )
    assert DEEPSEEK_V32.upstream.commit.startswith("000b1b9b")
    assert [v.name for v in DEEPSEEK_V32.variants] == ["baseline_mtp1", "heuristic_topk_mtp1"]
