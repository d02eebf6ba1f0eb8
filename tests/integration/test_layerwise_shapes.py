"""Upstream's layer-wise benchmark runner on a DSA model: GEN packs at batch 32 with MTP shapes."""

# ``Runner.create_run_pack`` must announce ``seq_len_q > 1`` to DSA metadata (else
# ``kv_lens_cuda_2d`` stays one column wide and DeepGEMM aborts with
# ``DG_HOST_ASSERT(batch_size == __batch_size and next_n == _next_n)``), and must leave non-DSA
# metadata alone (``max_total_draft_tokens`` reaches the attention op's cache key and kernel
# selection). Upstream has no DSA GEN test with ``seq_len_q > 1``. Every configuration runs in a
# child process, so an abort fails one case instead of the session.
#
# The tiny cases need no checkpoint (a ``config.json`` and ``load_format="DUMMY"``); the
# DeepSeek-V3.2 case reads only ``config.json`` from ``$LLM_MODELS_ROOT/DeepSeek-V3.2-Exp-hf``.

from __future__ import annotations

import pytest

from regress.trtllm.layerwise import ShapeCheck, ShapeResult, run_in_subprocess
from regress.trtllm.requirements import (
    BLACKWELL,
    HOPPER,
    Needs,
    find_checkpoint,
    query_devices,
    skip_reason,
)
from regress.trtllm.tiny_config import TinyConfig

BATCH_SIZE = 32
SEQ_LEN_Q = (1, 4)  # 1: plain decode; 4: MTP with three drafts, the failing upstream shape
CHECKPOINT = "DeepSeek-V3.2-Exp-hf"


def _require(needs: Needs) -> None:
    reason = skip_reason(needs)
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def shape_results(tmp_path_factory):
    """Runs each configuration's child process once; tests pick their ``seq_len_q``."""
    done: dict[str, dict[int, ShapeResult]] = {}

    def results(config: str) -> dict[int, ShapeResult]:
        if config not in done:
            work = tmp_path_factory.mktemp(f"layerwise-{config}")
            if config == "checkpoint":
                model = find_checkpoint(CHECKPOINT)
                sm = query_devices().devices[0].sm
                check = ShapeCheck(
                    model=str(model),
                    backend="dsa",
                    batch_size=BATCH_SIZE,
                    seq_len_q=SEQ_LEN_Q,
                    layer_indices=(3,),  # first MoE layer (first_k_dense_replace = 3)
                    moe_backend="DEEPGEMM" if sm >= BLACKWELL else "CUTLASS",
                )
            else:
                model = TinyConfig(dsa=config == "dsa").write(work / "model")
                check = ShapeCheck(
                    model=str(model), backend=config, batch_size=BATCH_SIZE, seq_len_q=SEQ_LEN_Q
                )
            found = run_in_subprocess(check, work / "results.jsonl")
            done[config] = {r.seq_len_q: r for r in found}
        return done[config]

    return results


@pytest.mark.trtllm
@pytest.mark.gpu(count=1)
@pytest.mark.parametrize("seq_len_q", SEQ_LEN_Q, ids=lambda q: f"q{q}")
def test_dsa_gen_pack_runs_with_mtp_shapes(seq_len_q, shape_results):
    _require(Needs(gpus=1, min_sm=HOPPER))
    result = shape_results("dsa")[seq_len_q]
    assert result.ok, result.describe()
    if seq_len_q > 1:
        assert result.kv_lens_2d_shape is not None and result.kv_lens_2d_shape[1] >= seq_len_q


@pytest.mark.trtllm
@pytest.mark.gpu(count=1)
@pytest.mark.parametrize("seq_len_q", SEQ_LEN_Q, ids=lambda q: f"q{q}")
def test_non_dsa_metadata_keeps_max_total_draft_tokens_unset(seq_len_q, shape_results):
    _require(Needs(gpus=1, min_sm=HOPPER))
    result = shape_results("dense")[seq_len_q]
    assert result.ok, result.describe()
    assert result.kv_lens_2d_shape is None, f"{result.metadata_class} is not the non-DSA metadata"


@pytest.mark.trtllm
@pytest.mark.gpu(count=1)
@pytest.mark.parametrize("seq_len_q", SEQ_LEN_Q, ids=lambda q: f"q{q}")
def test_deepseek_v32_config_gen_pack_runs_with_mtp_shapes(seq_len_q, shape_results):
    _require(Needs(checkpoint=CHECKPOINT, gpus=1, min_sm=HOPPER))
    result = shape_results("checkpoint")[seq_len_q]
    assert result.ok, result.describe()
