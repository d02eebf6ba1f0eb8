"""MTP acceptance at batch > 1 on TensorRT-LLM with real DSA checkpoints, the sentinel attached."""

# Upstream gates MTP on DSA by accuracy, by aggregate acceptance rate (GLM test_mtp_index_share:
# > 0.2 on 3 prompts) and by one AL floor measured on GSM8K; none of it looks at the batch size or
# the draft depth, which is where the stale ``req_idx_per_token`` map cost GLM-5.2 13% acceptance
# length while GSM8K stayed green. Each case builds the LLM as upstream's test of the same model
# does (regress.trtllm.models; every difference is a named parameter, regress.trtllm.cases.
# DEVIATIONS), runs one-model MTP-Eagle greedy on 80 prompts and is judged against batch 1 of the
# same series: AL and every per-position rate within tolerance, no faster conditional decay with
# depth, no DSA sentinel violation, no run that accepts nothing, and ``min_al`` / per-position
# floors of our own references where one was recorded on this workload.
#
# The axes of the bug classes after #16925: test_kv_cache_manager (V1 against V2, #18662),
# test_index_share (GLM-5.2, share on against off at the same batch, #15806/#19138),
# test_indexer_pool_fill (KV manager V2, a pool the prefix-shared load overfills, #18660), and
# test_upstream_config (upstream's own LLM, swept through regress.trtllm.harness).
#
# Environment:
#     LLM_MODELS_ROOT: directory holding the checkpoints (upstream's convention).
#     REGRESS_TRTLLM_PROMPTS: a prompts JSONL, or MT-bench's ``question.jsonl``, instead of
#         ``tests/data/trtllm/prompts.jsonl``; REGRESS_TRTLLM_PROMPT_SET names the set.
#     REGRESS_TRTLLM_ACCEPTANCE_YAML: our reference file (default
#         ``tests/data/trtllm/acceptance_length.yaml``); an entry gates only its own workload.
#     REGRESS_TRTLLM_RECORD_REFERENCES: a YAML file the batch-1 runs that pass record into
#         (upstream's TRTLLM_POPULATE_ACCEPTANCE_LENGTH, with the workload digest).
#     REGRESS_TRTLLM_ARTIFACTS: directory receiving one JSON record per case run.

from __future__ import annotations

import os
from pathlib import Path

import pytest

from regress.acceptance.references import Workload, record_reference, reference_entry
from regress.errors import EngineError
from regress.trtllm.cases import (
    DEEPSEEK_V32,
    GLM52,
    MAX_NEW_TOKENS,
    NUM_PROMPTS,
    POOL_FILL_PREFIX_CHARS,
    POOL_FILL_REQUESTS,
    TOLERANCE,
    Case,
    ModelCase,
)
from regress.trtllm.gates import (
    CounterpartRun,
    completion_failures,
    judge_case,
    own_reference,
    sentinel_failures,
)
from regress.trtllm.hooks import HookConfig, read_report, sentinel_session
from regress.trtllm.integration import matrix_cases
from regress.trtllm.requirements import Needs, find_checkpoint, query_devices, skip_reason
from regress.trtllm.runs import (
    PROMPT_SET_ENV,
    PROMPTS_ENV,
    CaseRun,
    RunCache,
    load_prompt_set,
    run_case,
    shared_prefix_prompts,
    sink_dir_for,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "trtllm"
REFERENCES_ENV = "REGRESS_TRTLLM_ACCEPTANCE_YAML"
RECORD_ENV = "REGRESS_TRTLLM_RECORD_REFERENCES"


def _require(model: ModelCase, *, min_sm: int | None = None) -> None:
    """Skip with every specific reason (package, checkpoint path, GPUs have/need, architecture)."""
    needs = model.needs
    if min_sm is not None and min_sm > (needs.min_sm or 0):
        needs = Needs(needs.checkpoint, needs.gpus, min_sm, needs.min_memory_mib)
    reason = skip_reason(needs)
    if reason is not None:
        pytest.skip(f"{model.test_class}: {reason}")


def _params(found) -> list:
    return [pytest.param(case, id=case.id) for case in found]


def _references() -> Path:
    return Path(os.environ.get(REFERENCES_ENV) or DATA / "acceptance_length.yaml")


@pytest.fixture(scope="session")
def prompt_set() -> tuple[str, list]:
    path = os.environ.get(PROMPTS_ENV) or DATA / "prompts.jsonl"
    return load_prompt_set(path, limit=NUM_PROMPTS, name=os.environ.get(PROMPT_SET_ENV))


@pytest.fixture(scope="session")
def run_one(tmp_path_factory):
    """Runs one case on given prompts with the sentinel in every process (heavy imports here)."""
    sinks = tmp_path_factory.mktemp("sentinel")
    artifacts = os.environ.get("REGRESS_TRTLLM_ARTIFACTS")

    def run(case: Case, prompts: list) -> CaseRun:
        import tensorrt_llm.llmapi.mpi_session as mpi_session

        from regress.trtllm import paths

        layout = paths.resolve_installed()
        hook = HookConfig(
            sink_dir=str(sink_dir_for(sinks, case)), module_names=layout.dsa_module_names
        )
        spec = case.spec(find_checkpoint(case.model.checkpoint), sm=query_devices().devices[0].sm)
        result = run_case(
            case,
            spec,
            prompts,
            max_new_tokens=MAX_NEW_TOKENS,
            hook=hook,
            mpi_session_module=mpi_session,
        )
        if artifacts:
            result.save(artifacts)
        return result

    return run


@pytest.fixture(scope="session")
def acceptance_runs(run_one, prompt_set) -> RunCache:
    """One run per case for the whole session; batch-1 runs serve their whole series."""
    return RunCache(lambda case: run_one(case, prompt_set[1]))


def check_case(case: Case, runs: RunCache, prompt_set: tuple[str, list], test_name: str) -> None:
    _require(case.model)
    reference = runs.get(case.reference)
    run = reference if case.batch_size == 1 else runs.get(case)
    counterpart = None
    if (other := case.counterpart) is not None:
        counterpart = CounterpartRun(other.check, other.label, runs.get(other.case).stats)
    workload = Workload.of(
        prompt_set[1], max_new_tokens=MAX_NEW_TOKENS, max_draft_len=case.max_draft_len
    )
    keys = case.reference_keys(test_name)
    record = os.environ.get(RECORD_ENV) if case.batch_size == 1 else None
    lookup = None if record else own_reference(_references(), keys, workload)
    outcome = judge_case(
        case.batch_size,
        reference.stats,
        run.stats,
        run.sentinel,
        tolerance=TOLERANCE,
        lookup=lookup,
        counterpart=counterpart,
    )
    notes = "".join(f"\nnote: {n}" for n in run.notes)
    assert outcome.passed, f"{case.model.test_class} {case.id}:\n{outcome.explain()}{notes}"
    if record:
        measured = {"batch_size": 1, "engine": "trtllm", "model": case.model.checkpoint}
        record_reference(record, keys[0], reference_entry(run.stats, workload, measured=measured))


def check_pool_fill(case: Case, run_one, prompt_set: tuple[str, list]) -> None:
    """Every request of the prefix-shared load finishes and the engine stays up (#18660)."""
    _require(case.model)
    prompts = shared_prefix_prompts(
        prompt_set[1], count=POOL_FILL_REQUESTS, prefix_chars=POOL_FILL_PREFIX_CHARS
    )
    try:
        result = run_one(case, prompts)
    except EngineError as exc:
        failures = completion_failures(len(prompts), 0, error=str(exc))
    else:
        failures = completion_failures(len(prompts), result.stats.requests)
        failures += sentinel_failures(result.sentinel)
        failures += [f"{v.get('check')}: {v.get('message')}" for v in result.sentinel.violations]
    assert not failures, f"{case.model.test_class} {case.id}:\n" + "\n".join(failures)


def check_upstream_config(model: ModelCase, name: str, prompt_set, tmp_path) -> None:
    """Upstream's own LLM for this test id, swept by the harness adapter, the sentinel on.

    Upstream's ``acceptance_length.yaml`` key is not applied: it was measured on GSM8K, which
    this test does not run (regress.trtllm.harness applies it to upstream's own workload).
    """
    variant = model.variant(name)
    _require(model, min_sm=variant.min_sm)
    import tensorrt_llm
    import tensorrt_llm.llmapi.mpi_session as mpi_session

    from regress.trtllm import paths
    from regress.trtllm.harness import sweep_llm
    from regress.trtllm.llm_config import to_llm_kwargs

    sm = query_devices().devices[0].sm
    spec = model.upstream_spec(find_checkpoint(model.checkpoint), sm=sm, variant=name)
    hook = HookConfig(
        sink_dir=str(tmp_path / "sentinel"),
        module_names=paths.resolve_installed().dsa_module_names,
    )
    kwargs = to_llm_kwargs(spec)
    with (
        sentinel_session(hook, mpi_session_module=mpi_session),
        tensorrt_llm.LLM(**kwargs) as llm,
    ):
        outcome = sweep_llm(variant.test.node, llm, prompts=prompt_set[1], references=_references())
    report = read_report(hook.sink_dir)
    problems = sentinel_failures(report) + [
        f"{v.get('check')}: {v.get('message')}" for v in report.violations
    ]
    assert outcome.passed and not problems, outcome.explain() + "".join(
        f"\nFAIL {p}" for p in problems
    )


@pytest.mark.trtllm
@pytest.mark.gpu(count=DEEPSEEK_V32.tensor_parallel_size)
class TestDeepSeekV32:
    """DeepSeek-V3.2-Exp (FP8, DSA) as upstream's test_fp8_blockscale[baseline_mtp1] builds it:
    TP=8 EP=8, Hopper or newer, DEEPGEMM on SM 100/103; see ``DEEPSEEK_V32.why``."""

    @pytest.mark.parametrize("case", _params(matrix_cases(DEEPSEEK_V32, "test_acceptance")))
    def test_acceptance(self, case, acceptance_runs, prompt_set):
        check_case(case, acceptance_runs, prompt_set, "test_acceptance")

    @pytest.mark.parametrize("case", _params(matrix_cases(DEEPSEEK_V32, "test_kv_cache_manager")))
    def test_kv_cache_manager(self, case, acceptance_runs, prompt_set):
        check_case(case, acceptance_runs, prompt_set, "test_kv_cache_manager")

    @pytest.mark.parametrize("case", _params(matrix_cases(DEEPSEEK_V32, "test_indexer_pool_fill")))
    def test_indexer_pool_fill(self, case, run_one, prompt_set):
        check_pool_fill(case, run_one, prompt_set)

    @pytest.mark.parametrize("name", [v.name for v in DEEPSEEK_V32.variants])
    def test_upstream_config(self, name, prompt_set, tmp_path):
        check_upstream_config(DEEPSEEK_V32, name, prompt_set, tmp_path)


@pytest.mark.trtllm
@pytest.mark.gpu(count=GLM52.tensor_parallel_size)
class TestGLM52:
    """GLM-5.2 NVFP4 (DSA with cross-layer indexer sharing) as upstream's TestGLM52NVFP4::
    test_mtp_index_share builds it: TP=8 EP=8, CuteDSL MoE, Blackwell; see ``GLM52.why``."""

    @pytest.mark.parametrize("case", _params(matrix_cases(GLM52, "test_acceptance")))
    def test_acceptance(self, case, acceptance_runs, prompt_set):
        check_case(case, acceptance_runs, prompt_set, "test_acceptance")

    @pytest.mark.parametrize("case", _params(matrix_cases(GLM52, "test_kv_cache_manager")))
    def test_kv_cache_manager(self, case, acceptance_runs, prompt_set):
        check_case(case, acceptance_runs, prompt_set, "test_kv_cache_manager")

    @pytest.mark.parametrize("case", _params(matrix_cases(GLM52, "test_index_share")))
    def test_index_share(self, case, acceptance_runs, prompt_set):
        check_case(case, acceptance_runs, prompt_set, "test_index_share")

    @pytest.mark.parametrize("case", _params(matrix_cases(GLM52, "test_indexer_pool_fill")))
    def test_indexer_pool_fill(self, case, run_one, prompt_set):
        check_pool_fill(case, run_one, prompt_set)

    @pytest.mark.parametrize("name", [v.name for v in GLM52.variants])
    def test_upstream_config(self, name, prompt_set, tmp_path):
        check_upstream_config(GLM52, name, prompt_set, tmp_path)
