"""Lifecycles that drive metadata the way upstream callers do, and the contract battery over them.

The draft loop is ``regress.dsa.lifecycle``'s model of the one-model MTP-Eagle worker
(``tensorrt_llm/_torch/speculative/eagle3.py::Eagle3OneModelWorker``, earlier
``mtp.py::MTPEagleWorker.forward``), which cites the upstream sources; the battery checks at its
:func:`~regress.dsa.lifecycle.draft_checkpoints`, named as ``regress check`` names them. This
module only adds the scenario battery over it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from regress.devices import require_cuda
from regress.dsa.batch import Batch, prepare_batch
from regress.dsa.invariants import (
    Violation,
    check_dense_untouched,
    check_kv_lens_2d_width,
    check_req_idx_map,
    snapshot_spec_state,
)
from regress.dsa.lifecycle import draft_checkpoints
from regress.reference.cache import PagedKVCacheManager
from regress.reference.indexer import DeepGemmAssertion
from regress.reference.layerwise import create_run_pack, run_generation_step
from regress.reference.metadata import DSAtrtllmAttentionMetadata
from regress.reference.stale_state import stale_state_scenarios

UPSTREAM_UNIT_LAYOUTS: dict[str, list[int]] = {
    "uniform_4x3": [4, 4, 4],
    "all_ones": [1, 1, 1],
    "mixed_37_5_1_1": [37, 5, 1, 1],
    "zero_len_middle": [2, 0, 3],
    "zero_len_first": [0, 4],
}
"""Named layouts of upstream's ``tests/unittest/_torch/attention/sparse/dsa/test_req_idx_per_token.py``."""


def make_dsa_metadata(
    *,
    max_num_requests: int,
    max_num_tokens: int,
    max_seq_len: int = 512,
    tokens_per_block: int = 16,
    max_draft_tokens: int = 0,
    defects: Iterable[str] | None = None,
    device: str = "cpu",
) -> DSAtrtllmAttentionMetadata:
    """A DSA mirror with a paged cache big enough for ``max_num_requests`` of ``max_seq_len``."""
    manager = PagedKVCacheManager.for_requests(
        max_num_requests, max_seq_len, tokens_per_block=tokens_per_block
    )
    return DSAtrtllmAttentionMetadata(
        max_num_requests=max_num_requests,
        max_num_tokens=max_num_tokens,
        kv_cache_manager=manager,
        max_draft_tokens=max_draft_tokens,
        defects=defects,
        device=device,
    )


def rewrite_layout(md: Any, seq_lens: Sequence[int]) -> None:
    """Rewrite ``seq_lens`` in place and notify the metadata the way a draft loop would."""
    import torch

    n = len(seq_lens)
    lens = torch.as_tensor(list(seq_lens), dtype=torch.int32)
    md._seq_lens[:n].copy_(lens)
    md._seq_lens_cuda[:n].copy_(lens)
    md.on_update()
    md.update_for_spec_dec()


def _tag(violations: list[Violation], scenario: str) -> list[Violation]:
    return [Violation(v.check, v.message, {**v.details, "scenario": scenario}) for v in violations]


def map_scenarios(
    defects: Iterable[str] | None, device: str
) -> Iterator[tuple[str, Callable[[], list[Violation]]]]:
    """Scenarios over the token-to-request map: (name, run) pairs returning violations."""

    def layouts():
        out: list[Violation] = []
        for name, lens in UPSTREAM_UNIT_LAYOUTS.items():
            md = make_dsa_metadata(
                max_num_requests=len(lens), max_num_tokens=64, defects=defects, device=device
            )
            prepare_batch(md, Batch((4,) * len(lens)))
            rewrite_layout(md, lens)
            out += _tag(check_req_idx_map(md), f"rewrite_to_{name}")
        return out

    def mtp_draft_loop():
        out: list[Violation] = []
        for batch, k in ((8, 4), (4, 2), (1, 4)):
            md = make_dsa_metadata(
                max_num_requests=batch,
                max_num_tokens=batch * (k + 1),
                max_draft_tokens=k,
                defects=defects,
                device=device,
            )
            prepare_batch(md, Batch((k + 1,) * batch))
            accepted = [1 + (i * 3) % (k + 1) for i in range(batch)]  # the bonus token counted
            for stage in draft_checkpoints(md, k, accepted):
                out += _tag(check_req_idx_map(md), f"draft_loop_b{batch}_k{k}_{stage}")
        return out

    def tree_rewrites():
        out: list[Violation] = []
        for before, after in (([5] * 8, [4] * 8), ([5] * 4, [3, 1, 4, 1]), ([1] * 8, [2] * 8)):
            md = make_dsa_metadata(
                max_num_requests=8, max_num_tokens=64, defects=defects, device=device
            )
            prepare_batch(md, Batch(tuple(before)))
            rewrite_layout(md, after)
            out += _tag(check_req_idx_map(md), f"tree_rewrite_{before[0]}x{len(before)}_to_{after}")
        return out

    yield "upstream_unit_layouts", layouts
    yield "mtp_draft_loop", mtp_draft_loop
    yield "tree_rewrites", tree_rewrites


def layerwise_scenarios(
    defects: Iterable[str] | None, device: str
) -> Iterator[tuple[str, Callable[[], list[Violation]]]]:
    """Scenarios over bug 2's announcement: DSA shapes, dense scope, CTX and q=1 untouched."""

    def dsa_gen_mtp():
        md = create_run_pack(
            "GEN",
            batch_size=32,
            seq_len_q=4,
            seq_len_kv_cache=256,
            backend="dsa",
            defects=defects,
            device=device,
        )
        out = _tag(check_kv_lens_2d_width(md), "layerwise_dsa_gen_b32_q4")
        try:
            run_generation_step(md)
        except DeepGemmAssertion as exc:
            out.append(
                Violation("indexer_shapes", str(exc), {"scenario": "layerwise_dsa_gen_b32_q4"})
            )
        return out

    def dense_scope():
        out: list[Violation] = []
        for run_type, q in (("GEN", 4), ("GEN", 1), ("CTX", 4)):
            pristine = create_run_pack(
                run_type,
                batch_size=8,
                seq_len_q=q,
                seq_len_kv_cache=64,
                backend="trtllm",
                defects=(),
                device=device,
            )
            md = create_run_pack(
                run_type,
                batch_size=8,
                seq_len_q=q,
                seq_len_kv_cache=64,
                backend="trtllm",
                defects=defects,
                device=device,
            )
            out += _tag(
                check_dense_untouched(snapshot_spec_state(pristine), md),
                f"layerwise_dense_{run_type.lower()}_q{q}",
            )
        return out

    yield "layerwise_dsa_shapes", dsa_gen_mtp
    yield "layerwise_dense_scope", dense_scope


def _check_device(device: str) -> None:
    if device == "cuda":
        require_cuda()


def run_contract_battery(
    defects: Iterable[str] | None = None, device: str = "cpu"
) -> list[Violation]:
    """Run every scenario and return all violations (empty on a correct implementation).

    Raises:
        UsageError: ``device`` is ``cuda`` and torch sees none (found now, not as a torch
            traceback mid-battery).
    """
    _check_device(device)
    out: list[Violation] = []
    for source in (map_scenarios, layerwise_scenarios, stale_state_scenarios):
        for _name, run in source(defects, device):
            out += run()
    return out
