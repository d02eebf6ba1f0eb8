"""The contract scenarios, driven against real upstream metadata loaded in the sandbox.

Each scenario builds metadata the way upstream callers do and checks the contracts of
:mod:`regress.dsa.invariants` (and :mod:`regress.upstream.contracts`) at every step. The draft loop
mirrors the one-model MTP-Eagle worker (``tensorrt_llm/_torch/speculative/mtp.py::
MTPEagleWorker.forward``, later ``eagle3.py::Eagle3OneModelWorker``): end of draft step 0 fills
``seq_lens`` with 1, calls ``on_update()``, turns contexts into generations, rewinds
``kv_lens_cuda`` by the rejected drafts and calls ``update_for_spec_dec()``; later steps add 1 to
``kv_lens_cuda`` and call ``update_for_spec_dec()``; afterwards the saved fields are restored
(``restore_from_spec_dec()``) and ``on_update()`` runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from regress.dsa.announce import mtp_shape_params
from regress.dsa.invariants import Violation, check_req_idx_map
from regress.dsa.lifecycle import iter_draft_loop
from regress.upstream.contracts import check_announced_width, check_slot_ownership
from regress.upstream.eras import Upstream
from regress.upstream.fakes import FakeKVCacheManager


@dataclass(frozen=True)
class Layout:
    """One batch: new tokens per request, how many lead as contexts, the draft length."""

    name: str
    seq_lens: tuple[int, ...]
    num_contexts: int = 0
    max_draft_len: int = 4


#: Scenario 1's layouts (issue 10): uniform MTP verify chunks, a tree-drafting layout, a mixed
#: context+generation batch, and a zero-length row.
MAP_LAYOUTS: tuple[Layout, ...] = (
    Layout("uniform_5x4", (5, 5, 5, 5), 0, 4),
    Layout("uniform_4x8", (4,) * 8, 0, 3),
    Layout("tree_3_1_4_1", (3, 1, 4, 1), 0, 3),
    Layout("mixed_ctx_gen", (6, 3, 4, 4), 2, 3),
)
#: A zero-length row: the map built for ``[4, 4, 4]`` must follow a rewrite to ``[2, 0, 3]``
#: (upstream ``tests/unittest/_torch/attention/sparse/dsa/test_req_idx_per_token.py``).
ZERO_ROW = ((4, 4, 4), (2, 0, 3))


@dataclass
class Step:
    """What one checked step saw."""

    step: str
    seq_lens: list[int]
    req_idx_per_token: list[int]
    blocks_written: list[int] = field(default_factory=list)


@dataclass
class ScenarioResult:
    """One scenario's verdict: ``pass``, ``fail`` (violations) or ``gap`` (could not run)."""

    name: str
    status: str = "pass"
    violations: list[Violation] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    note: str = ""

    def add(self, found: list[Violation], where: str) -> None:
        for v in found:
            self.violations.append(Violation(v.check, v.message, {**v.details, "step": where}))
        if self.violations:
            self.status = "fail"


def _observe(md: Any, kvm: FakeKVCacheManager, where: str, result: ScenarioResult) -> None:
    n = int(md.num_tokens)
    stride = kvm.indexer_block_stride()
    slots = getattr(md, "slot_mapping_fp8", None)
    result.steps.append(
        Step(
            where,
            [int(x) for x in md.seq_lens.tolist()],
            [int(x) for x in md.req_idx_per_token[:n].tolist()],
            [int(s) // stride for s in slots[:n].tolist()] if slots is not None else [],
        )
    )
    result.add(check_req_idx_map(md), where)
    result.add(check_slot_ownership(md, kvm), where)


def target_forward(up: Upstream, layout: Layout) -> tuple[Any, FakeKVCacheManager]:
    """Metadata after the executor's per-forward calls: announce shapes, then ``prepare()``."""
    kvm = FakeKVCacheManager(len(layout.seq_lens))
    md = up.make_metadata(
        kvm,
        max_num_tokens=max(64, 2 * sum(layout.seq_lens)),
        seq_lens=list(layout.seq_lens),
        num_contexts=layout.num_contexts,
    )
    k = layout.max_draft_len
    md.update_spec_dec_param(**mtp_shape_params(len(layout.seq_lens), k + 1))
    md.prepare()
    return md, kvm


def draft_loop(md: Any, *, max_draft_len: int, num_accepted: list[int]) -> Iterator[str]:
    """The metadata side of one MTP-Eagle draft loop; yields ``draft_step_<i>`` after every step.

    A view of :func:`regress.dsa.lifecycle.iter_draft_loop`, the one model of upstream's order.
    """
    for stage, step in iter_draft_loop(md, max_draft_len, num_accepted):
        if stage == "draft_step":
            yield f"draft_step_{step}"


def _accepted(batch: int, k: int) -> list[int]:
    return [(3 * i + 1) % (k + 1) for i in range(batch)]


def map_after_draft_loop(up: Upstream) -> list[ScenarioResult]:
    """Scenario 1: the token-to-request map and the indexer-K slots at every draft step."""
    results = []
    for layout in MAP_LAYOUTS:
        result = ScenarioResult(f"req_idx_map/{layout.name}")
        md, kvm = target_forward(up, layout)
        _observe(md, kvm, "after_prepare", result)
        k = layout.max_draft_len
        for where in draft_loop(
            md, max_draft_len=k, num_accepted=_accepted(len(layout.seq_lens), k)
        ):
            _observe(md, kvm, where, result)
        results.append(result)
    result = ScenarioResult("req_idx_map/zero_length_row")
    before, after = ZERO_ROW
    md, kvm = target_forward(up, Layout("zero", before, 0, 3))
    _observe(md, kvm, "after_prepare", result)
    import torch

    lens = torch.tensor(after, dtype=torch.int32)
    md._seq_lens[: len(after)].copy_(lens)
    md._seq_lens_cuda[: len(after)].copy_(lens)
    md.on_update()
    md.update_for_spec_dec()
    _observe(md, kvm, f"rewritten_to_{list(after)}", result)
    results.append(result)
    return results


def shape_announcement(up: Upstream) -> list[ScenarioResult]:
    """Scenario 2a: ``update_spec_dec_param()`` for GEN with ``seq_len_q > 1`` sizes the buffers."""
    out = []
    for batch, q in ((32, 4), (4, 2), (8, 8)):
        result = ScenarioResult(f"shape_announcement/b{batch}_q{q}")
        kvm = FakeKVCacheManager(batch)
        md = up.make_metadata(kvm, max_num_tokens=batch * q, seq_lens=[q] * batch)
        md.update_spec_dec_param(**mtp_shape_params(batch, q))
        md.prepare()
        result.add(check_announced_width(md, batch, q), "after_prepare")
        out.append(result)
    return out


SCENARIOS: dict[str, Callable[[Upstream], list[ScenarioResult]]] = {
    "req_idx_map": map_after_draft_loop,
    "shape_announcement": shape_announcement,
}
