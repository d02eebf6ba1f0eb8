"""The reference engine on CUDA: graph capture of the draft loop, losslessness, defects on GPU.

Runs on the H200 stage (`pytest -m gpu`); on a machine without CUDA every test is skipped by the
regress pytest plugin with the reason.
"""

from __future__ import annotations

import functools

import pytest

pytestmark = pytest.mark.gpu

N_PROMPTS, N_TOKENS, K = 24, 64, 4


@functools.cache
def run(defects=(), batch=8, k=K, graph=True, sentinel=False, n=N_PROMPTS, tokens=N_TOKENS):
    from regress.reference.engine import ReferenceEngine
    from regress.reference.prompts import load_prompts

    engine = ReferenceEngine(device="cuda", defects=defects, cuda_graph=graph, sentinel=sentinel)
    result = engine.generate(
        load_prompts(n), batch_size=batch, max_draft_len=k, max_new_tokens=tokens
    )
    return result, engine


def al(result) -> float:
    acc = [a for r in result.requests for a in r.accepted]
    return 1 + sum(acc) / len(acc)


def toks(result):
    return [r.tokens for r in result.requests]


def test_searchsorted_map_in_a_graph_follows_layout_changes_between_replays():
    import torch

    from regress.dsa.mapping import build_req_idx_per_token, expected_req_idx_per_token

    dev = torch.device("cuda")
    seq_lens = torch.zeros(8, dtype=torch.int32, device=dev)
    out = torch.full((40,), -1, dtype=torch.int32, device=dev)
    cu = torch.zeros(8, dtype=torch.int32, device=dev)
    ar = torch.arange(40, dtype=torch.int32, device=dev)
    seq_lens.copy_(torch.tensor([5] * 8))
    build_req_idx_per_token(seq_lens, 40, out=out, cu_seq_lens=cu, token_arange=ar)  # warm-up
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        build_req_idx_per_token(seq_lens, 40, out=out, cu_seq_lens=cu, token_arange=ar)
    for layout in (
        [5] * 8,
        [1] * 8 + [0] * 0,
        [3, 1, 4, 1, 5, 9, 2, 15],
        [0, 40, 0, 0, 0, 0, 0, 0],
    ):
        lens = (layout + [0] * 8)[:8]
        seq_lens.copy_(torch.tensor(lens, dtype=torch.int32))
        graph.replay()
        n = sum(lens)
        assert out[:n].tolist() == expected_req_idx_per_token(lens)


def test_graph_replay_and_eager_agree():
    graph, _ = run(graph=True)
    eager, _ = run(graph=False)
    assert graph.counters["graph_replays"] > 0 and "graph_replays" not in eager.counters
    assert toks(graph) == toks(eager)
    assert [r.accepted for r in graph.requests] == [r.accepted for r in eager.requests]


def test_graph_replay_and_eager_agree_with_a_stale_map():
    graph, _ = run(defects=("stale_req_idx",), graph=True)
    eager, _ = run(defects=("stale_req_idx",), graph=False)
    assert [r.accepted for r in graph.requests] == [r.accepted for r in eager.requests]


@pytest.mark.parametrize("batch", [1, 8, 32])
def test_lossless_and_batch_invariant_on_gpu(batch):
    plain, _ = run(batch=1, k=0, graph=False)
    result, _ = run(batch=batch)
    assert toks(result) == toks(plain)
    base, _ = run(batch=1)
    assert abs(al(result) - al(base)) / al(base) <= 0.01


def test_stale_map_detected_on_gpu_with_graphs():
    clean, _ = run(batch=1)
    assert al(run(defects=("stale_req_idx",), batch=1)[0]) == al(clean)
    assert al(run(defects=("stale_req_idx",), batch=8)[0]) <= 0.9 * al(clean)
    assert al(run(defects=("stale_req_idx",), batch=8, k=1)[0]) == al(run(batch=8, k=1)[0])


@pytest.mark.parametrize(
    "defect",
    ["stale_req_idx", "arange_only_refresh", "unannounced_mtp_shapes", "method_hasattr_guard"],
)
def test_each_defect_caught_by_the_contract_battery_on_gpu(defect):
    from regress.reference.scenarios import run_contract_battery

    assert run_contract_battery(defects={defect}, device="cuda")


def test_contract_battery_clean_on_gpu():
    from regress.reference.scenarios import run_contract_battery

    assert run_contract_battery(defects=(), device="cuda") == []


def test_sentinel_checks_the_captured_refresh_at_replay():
    _, clean = run(sentinel=True)
    assert clean.sentinel_violations == []
    assert clean.sentinel_summary["checks_run"] > 0
    _, stale = run(defects=("stale_req_idx",), sentinel=True)
    phases = {v["phase"] for v in stale.sentinel_violations}
    assert "replay" in phases, stale.sentinel_violations[:2]


def test_unannounced_shapes_abort_on_gpu():
    from regress.reference.engine import ReferenceEngine
    from regress.reference.indexer import DeepGemmAssertion

    with pytest.raises(DeepGemmAssertion, match="DG_HOST_ASSERT"):
        ReferenceEngine(device="cuda", defects={"unannounced_mtp_shapes"}).layerwise_step()
    assert ReferenceEngine(device="cuda", defects=()).layerwise_step()["num_generations"] == 32


# -- issue 22: the damage model and the draft-cache defects on CUDA ---------------------------
def _cpu(defects=(), batch=8, k=K, config=None):
    from regress.reference.engine import ReferenceEngine
    from regress.reference.prompts import load_prompts

    engine = ReferenceEngine(device="cpu", defects=defects, config=config)
    return engine.generate(
        load_prompts(N_PROMPTS), batch_size=batch, max_draft_len=k, max_new_tokens=N_TOKENS
    )


@pytest.mark.parametrize("defects", [(), ("stale_req_idx",)])
def test_cuda_graphs_give_the_cpu_per_depth_profile(defects):
    """float64 end to end: the calibrated profile is the same on CPU and on CUDA with graphs."""
    gpu, _ = run(defects=defects)
    assert [r.accepted for r in gpu.requests] == [r.accepted for r in _cpu(defects).requests]


def test_v1_cache_manager_rejects_every_draft_on_gpu():
    result, _ = run(defects=("no_accept_v1_cache_manager",))
    assert al(result) < 1.01
    assert toks(result) == toks(run(batch=1, k=0, graph=False)[0])


def test_index_share_stash_under_graphs_matches_eager_and_cpu():
    from regress.reference.engine import ReferenceEngine
    from regress.reference.model import ModelConfig, index_share_config
    from regress.reference.prompts import load_prompts

    share = index_share_config(ModelConfig())
    out = {}
    for device, graph in (("cuda", True), ("cuda", False), ("cpu", False)):
        engine = ReferenceEngine(
            device=device, defects={"index_share_rejected_branch"}, cuda_graph=graph
        )
        result = engine.generate(load_prompts(8), batch_size=8, max_draft_len=7, max_new_tokens=32)
        out[(device, graph)] = [r.accepted for r in result.requests]
    assert out[("cuda", True)] == out[("cuda", False)] == out[("cpu", False)]
    fixed = ReferenceEngine(device="cuda", config=share, defects=()).generate(
        load_prompts(8), batch_size=8, max_draft_len=7, max_new_tokens=32
    )
    assert out[("cuda", True)] != [r.accepted for r in fixed.requests]


def test_indexer_pool_exhaustion_aborts_on_gpu():
    from regress.reference.draft_cache import IndexerPoolExhausted

    with pytest.raises(IndexerPoolExhausted):
        run(defects=("indexer_pool_exhaustion",), batch=8)
    assert run(defects=("indexer_pool_exhaustion",), batch=4)[0].requests
