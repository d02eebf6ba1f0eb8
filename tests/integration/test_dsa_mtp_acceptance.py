"""MTP acceptance at batch > 1 on TensorRT-LLM with real DSA checkpoints, the sentinel attached."""

# Upstream never combines K >= 2 with batch > 1 (its ``latency`` ids run MTP3 at batch 1), which is
# where the stale ``req_idx_per_token`` map cost GLM-5.2 13% acceptance length while GSM8K stayed
# green. Each case runs one-model MTP-Eagle, greedy, on 80 prompts and is judged against batch 1 of
# the same (model, K, CUDA graph) series: AL and every per-position rate within tolerance, no
# faster conditional decay with depth, no DSA sentinel violation, and upstream-style ``min_al`` where
# ``tests/data/trtllm/acceptance_length.yaml`` has an entry for the prompt set in use.
#
# Environment:
#     LLM_MODELS_ROOT: directory holding the checkpoints (upstream's convention).
#     REGRESS_TRTLLM_PROMPTS: a prompts JSONL, or MT-bench's ``question.jsonl``, instead of
#         ``tests/data/trtllm/prompts.jsonl``; REGRESS_TRTLLM_PROMPT_SET names the set.
#     REGRESS_TRTLLM_ACCEPTANCE_YAML: another ``acceptance_length.yaml`` for the ``min_al`` gate.
#     REGRESS_TRTLLM_ARTIFACTS: directory receiving one JSON record per case run.

from __future__ import annotations

import os
from pathlib import Path

import pytest

from regress.trtllm.cases import (
    DEEPSEEK_V32,
    GLM52,
    MAX_NEW_TOKENS,
    NUM_PROMPTS,
    TOLERANCE,
    Case,
    ModelCase,
    cases,
)
from regress.trtllm.gates import judge_case, upstream_reference
from regress.trtllm.hooks import HookConfig
from regress.trtllm.requirements import find_checkpoint, query_devices, skip_reason
from regress.trtllm.runs import (
    PROMPT_SET_ENV,
    PROMPTS_ENV,
    CaseRun,
    RunCache,
    load_prompt_set,
    run_case,
    sink_dir_for,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "trtllm"


def _require(model: ModelCase) -> None:
    """Skip with every specific reason (package, checkpoint path, GPUs have/need, architecture)."""
    reason = skip_reason(model.needs)
    if reason is not None:
        pytest.skip(f"{model.test_class}: {reason}")


def _params(model: ModelCase) -> list:
    return [pytest.param(case, id=case.id) for case in cases(model)]


@pytest.fixture(scope="session")
def prompt_set() -> tuple[str, list]:
    path = os.environ.get(PROMPTS_ENV) or DATA / "prompts.jsonl"
    return load_prompt_set(path, limit=NUM_PROMPTS, name=os.environ.get(PROMPT_SET_ENV))


@pytest.fixture(scope="session")
def acceptance_runs(tmp_path_factory, prompt_set) -> RunCache:
    """One run per case for the whole session; batch-1 runs serve their whole series."""
    sinks = tmp_path_factory.mktemp("sentinel")
    artifacts = os.environ.get("REGRESS_TRTLLM_ARTIFACTS")

    def run(case: Case) -> CaseRun:
        # Heavy imports only here, on a machine that passed every requirement.
        import tensorrt_llm.llmapi.mpi_session as mpi_session

        from regress.trtllm import paths

        layout = paths.resolve_installed()
        model_dir = find_checkpoint(case.model.checkpoint)
        sm = query_devices().devices[0].sm
        hook = HookConfig(
            sink_dir=str(sink_dir_for(sinks, case)), module_names=layout.dsa_module_names
        )
        result = run_case(
            case,
            case.spec(model_dir, sm=sm),
            prompt_set[1],
            max_new_tokens=MAX_NEW_TOKENS,
            hook=hook,
            mpi_session_module=mpi_session,
        )
        if artifacts:
            result.save(artifacts)
        return result

    return RunCache(run)


def check_case(case: Case, runs: RunCache, prompt_set: tuple[str, list]) -> None:
    _require(case.model)
    reference = runs.get(case.reference)
    run = reference if case.batch_size == 1 else runs.get(case)
    upstream = upstream_reference(
        os.environ.get("REGRESS_TRTLLM_ACCEPTANCE_YAML") or DATA / "acceptance_length.yaml",
        case.reference_keys(),
        prompt_set=prompt_set[0],
    )
    outcome = judge_case(
        case.batch_size,
        reference.stats,
        run.stats,
        run.sentinel,
        tolerance=TOLERANCE,
        upstream=upstream,
    )
    notes = "".join(f"\nnote: {n}" for n in run.notes)
    assert outcome.passed, f"{case.model.test_class} {case.id}:\n{outcome.explain()}{notes}"


@pytest.mark.trtllm
@pytest.mark.gpu(count=DEEPSEEK_V32.tensor_parallel_size)
class TestDeepSeekV32:
    """DeepSeek-V3.2-Exp (FP8, DSA), TP=8 EP=8, Hopper or newer; see ``DEEPSEEK_V32.why``."""

    @pytest.mark.parametrize("case", _params(DEEPSEEK_V32))
    def test_acceptance(self, case, acceptance_runs, prompt_set):
        check_case(case, acceptance_runs, prompt_set)


@pytest.mark.trtllm
@pytest.mark.gpu(count=GLM52.tensor_parallel_size)
class TestGLM52:
    """GLM-5.2 NVFP4 (DSA with cross-layer indexer sharing) as upstream's TestGLM52NVFP4: TP=8 EP=8,
    CuteDSL MoE, max_seq_len 8192, Blackwell; see ``GLM52.upstream_test``."""

    @pytest.mark.parametrize("case", _params(GLM52))
    def test_acceptance(self, case, acceptance_runs, prompt_set):
        check_case(case, acceptance_runs, prompt_set)
