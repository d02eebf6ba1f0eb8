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

from regress.trtllm.layerwise import ShapeCheck, run_in_subprocess
from regress.trtllm.mtp_buffers import KV_LENS_2D, KV_LENS_EXPANDED
from regress.trtllm.requirements import (
    HOPPER,
    SM100_FAMILY,
    Needs,
    find_checkpoint,
    in_sm100_family,
    query_devices,
    skip_reason,
)
from regress.trtllm.shapes import ShapeResult
from regress.trtllm.tiny_config import TinyConfig

BATCH_SIZE = 32
SEQ_LEN_Q = (1, 4)  # 1: plain decode; 4: MTP with three drafts, the failing upstream shape
CHECKPOINT = "DeepSeek-V3.2-Exp-hf"
# The SM90 vs SM100 buffer sets (regress.trtllm.mtp_buffers, PR #18383): sm90 flattens MTP
# steps with K > 1 into kv_lens_expanded_cuda, Blackwell reads kv_lens_cuda_2d at native next_n.
ARCHES = {"sm90": (HOPPER,), "sm100": SM100_FAMILY}
MTP_DEPTHS = (1, 2, 3, 4)


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
            if config == "depths":
                model = TinyConfig(dsa=True).write(work / "model")
                check = ShapeCheck(
                    model=str(model),
                    backend="dsa",
                    batch_size=BATCH_SIZE,
                    seq_len_q=tuple(1 + k for k in MTP_DEPTHS),
                )
            elif config == "checkpoint":
                model = find_checkpoint(CHECKPOINT)
                sm = query_devices().devices[0].sm
                check = ShapeCheck(
                    model=str(model),
                    backend="dsa",
                    batch_size=BATCH_SIZE,
                    seq_len_q=SEQ_LEN_Q,
                    layer_indices=(3,),  # first MoE layer (first_k_dense_replace = 3)
                    moe_backend="DEEPGEMM" if in_sm100_family(sm) else "CUTLASS",
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


@pytest.mark.trtllm
@pytest.mark.gpu(count=1)
@pytest.mark.parametrize("depth", MTP_DEPTHS, ids=lambda k: f"k{k}")
@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_width_contract_holds_on_the_buffer_set_this_arch_reads(arch, depth, shape_results):
    """Every MTP depth at batch 32: the buffers DeepGEMM reads on this architecture fit the step.

    The child checks the set in use (``check_width``) and, on sm90, that K > 1 takes the
    expanded set (``check_arch_buffers``); both are violations in ``result``.
    """
    _require(Needs(gpus=1, sms=ARCHES[arch]))
    result = shape_results("depths")[1 + depth]
    assert result.ok, result.describe()
    assert result.buffer in (KV_LENS_2D, KV_LENS_EXPANDED), result.describe()
