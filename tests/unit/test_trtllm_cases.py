"""The acceptance matrix: models, case ids, batch-1 references and the specs cases build."""

from __future__ import annotations

import itertools

from regress.trtllm.cases import (
    BATCH_SIZES,
    DEEPSEEK_V32,
    DRAFT_LENS,
    GLM52,
    MODELS,
    NUM_PROMPTS,
    Case,
    cases,
)
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


def test_upstream_keys_gate_the_k_upstream_measured():
    """Issue 11: our cases must answer to upstream's own acceptance_length.yaml keys."""
    glm = Case(GLM52, 8, 3, True).reference_keys()
    assert glm[0] == "TestGLM52NVFP4::test_mtp_index_share"
    dsv = Case(DEEPSEEK_V32, 32, 1, False).reference_keys()
    assert dsv[0] == "TestDeepSeekV32::test_fp8_blockscale[baseline_mtp1]"
    # Another K is another reference: upstream's entry does not apply.
    assert "TestGLM52NVFP4::test_mtp_index_share" not in Case(GLM52, 8, 4, True).reference_keys()


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
    assert spec.cuda_graph_batch_sizes == (1, 2, 4, 8, 16, 32)
    assert spec.moe_backend is None  # Hopper: TensorRT-LLM's default
    assert spec.moe_max_num_tokens is None and spec.free_gpu_memory_fraction == 0.7
    blackwell = Case(DEEPSEEK_V32, 8, 3, False).spec("/m", sm=100)
    assert (blackwell.moe_backend, blackwell.moe_max_num_tokens) == ("DEEPGEMM", 16384)
    assert blackwell.free_gpu_memory_fraction == 0.6
    assert (
        Case(GLM52, 8, 4, False)
        .spec("/m", sm=100, free_gpu_memory_fraction=0.5)
        .free_gpu_memory_fraction
        == 0.5
    )


def test_glm52_runs_as_upstreams_test_mtp_index_share():
    """test_glm52.py @ 29c0516a: TP=8/EP=8, MoeConfig(backend="CUTEDSL"), max_seq_len=8192."""
    spec = Case(GLM52, 8, 3, True).spec("/m", sm=100)
    assert (spec.tensor_parallel_size, spec.moe_expert_parallel_size) == (8, 8)
    assert (spec.moe_backend, spec.max_seq_len) == ("CUTEDSL", 8192)
    assert spec.free_gpu_memory_fraction == 0.7
    assert "test_glm52.py::TestGLM52NVFP4::test_mtp_index_share" in GLM52.upstream_test
    assert "test_fp8_blockscale[baseline_mtp1]" in DEEPSEEK_V32.upstream_test
