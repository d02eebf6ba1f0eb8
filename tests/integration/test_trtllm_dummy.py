"""Checkpoint-free TensorRT-LLM run: tiny DeepSeek-V3.2 config, random weights, batch 8, K = 4."""

# The cheapest upstream check for the stale ``req_idx_per_token`` map: random weights make
# acceptance meaningless, but the DSA metadata still goes through the one-model MTP-Eagle draft
# loop at batch 8 with K = 4 (the loop reaches draft steps 1..3, where the map went stale), and the
# sentinel checks its contracts after every metadata call. Passes only when the sentinel attached
# to at least one DSA metadata object and saw no violation.

from __future__ import annotations

import pytest

from regress.trtllm.gates import sentinel_failures
from regress.trtllm.hooks import HookConfig, read_report, sentinel_session
from regress.trtllm.integration import DUMMY_BATCH_SIZE, dummy_spec
from regress.trtllm.requirements import HOPPER, Needs, skip_reason
from regress.trtllm.smoke import dummy_prompts, run_smoke
from regress.trtllm.tiny_config import TinyConfig

NUM_PROMPTS = 2 * DUMMY_BATCH_SIZE  # two full waves
MAX_NEW_TOKENS = 64
# One GPU, no checkpoint; DSA's DeepGEMM indexer kernels need Hopper or newer.
NEEDS = Needs(gpus=1, min_sm=HOPPER)


@pytest.mark.trtllm
@pytest.mark.gpu(count=1)
@pytest.mark.parametrize("cuda_graph", [False, True], ids=["eager", "graph"])
def test_dummy_weights_sentinel_sees_no_violation(cuda_graph, tmp_path):
    reason = skip_reason(NEEDS)
    if reason is not None:
        pytest.skip(reason)
    import tensorrt_llm.llmapi.mpi_session as mpi_session

    from regress.trtllm import paths

    tiny = TinyConfig()
    model_dir = tiny.write(tmp_path / "tiny-deepseek-v32")
    spec = dummy_spec(model_dir, cuda_graph=cuda_graph)
    hook = HookConfig(
        sink_dir=str(tmp_path / "sentinel"),
        module_names=paths.resolve_installed().dsa_module_names,
    )
    prompts = dummy_prompts(NUM_PROMPTS, tiny.vocab_size, seed=0)
    with sentinel_session(hook, mpi_session_module=mpi_session):
        result = run_smoke(spec, prompts, max_new_tokens=MAX_NEW_TOKENS)
    assert result.requests == NUM_PROMPTS

    report = read_report(hook.sink_dir)
    problems = sentinel_failures(report) + [
        f"{v.get('check')}: {v.get('message')}" for v in report.violations
    ]
    assert not problems, "\n".join(problems)
