"""CUDA-graph capture and replay of the reference engine's draft steps 1..K-1.

As upstream's CUDA-graph runner does, the batch is padded to the next captured size with dummy
requests (one token, kv length 1, block table pointing at the null block), one graph is captured
per padded size with static input and metadata buffers, and each iteration copies its inputs in
and replays. The ``req_idx_per_token`` refresh (``on_update_kv_lens``) runs inside the captured
region, so a stale-map defect replays exactly as it did under upstream's graphs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from regress.reference.cache import NULL_BLOCK

if TYPE_CHECKING:
    import torch

CAPTURE_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
#: Eager runs of the section on the capture stream before it is captured (torch's notes use 3).
WARMUP_ITERATIONS = 3


def padded_batch_size(bs: int, limit: int | None = None) -> int:
    """The captured size a batch of ``bs`` is padded to (``bs`` itself past the largest)."""
    return next((s for s in CAPTURE_SIZES if bs <= s and (limit is None or s <= limit)), bs)


@dataclass
class _Captured:
    graph: Any
    tokens: torch.Tensor
    hidden: torch.Tensor
    outs: list[torch.Tensor]


class DraftGraphs:
    """Captures lazily, one graph per padded batch size; replays with the live batch copied in."""

    def __init__(self, run: Any) -> None:
        self.owner = run
        self.captured: dict[int, _Captured] = {}
        self.replays = 0
        self._side: Any = None

    def padded_size(self, bs: int) -> int:
        return padded_batch_size(bs, self.owner.md.max_num_requests)

    def _pad_layout(self, bs: int, b_pad: int) -> None:
        md = self.owner.md
        if b_pad > bs:
            md._seq_lens[bs:b_pad] = 1
            md._seq_lens_cuda[bs:b_pad] = 1
            md.kv_lens_cuda[bs:b_pad] = 1
            md.indexer_k_cache_block_offsets[bs:b_pad] = NULL_BLOCK
        md._num_seqs = b_pad
        md.on_update()

    def run(self, bs: int, first: torch.Tensor, hidden: torch.Tensor) -> list[torch.Tensor]:
        """Pad the collapsed batch, replay steps 1..K-1, unpad; returns K-1 tensors of size bs."""
        md = self.owner.md
        b_pad = self.padded_size(bs)
        self._pad_layout(bs, b_pad)
        # No notification here: the captured body opens with step 0's ``advance``
        # (``update_for_spec_dec``), so the refresh for the collapsed layout is in the graph.
        entry = self.captured.get(b_pad) or self._capture(b_pad)
        entry.tokens.zero_()
        entry.hidden.zero_()
        entry.tokens[:bs] = first
        entry.hidden[:bs] = hidden
        entry.graph.replay()
        self.replays += 1
        if self.owner.sentinel is not None:
            self.owner.sentinel.after_replay()  # checks owed by the captured region
        md._num_seqs = bs  # the dummies out again; the restore recounts
        return [o[:bs] for o in entry.outs]

    def _capture(self, b_pad: int) -> _Captured:
        import torch

        run, md = self.owner, self.owner.md
        tokens = torch.zeros(b_pad, dtype=torch.int64, device=run.dev)
        hidden = torch.zeros(b_pad, run.cfg.hidden, dtype=torch.float64, device=run.dev)
        saved_kv = md.kv_lens_cuda.clone()
        # The warm-up runs the draft steps for real on the live batch (zero tokens), writing K/V
        # at the slots the live requests' next draft steps own. The replay rewrites most of them,
        # but a read of a slot the replay has not reached yet (the rejected-branch stash of index
        # share) saw the warm-up's values instead of draft step 0's: CUDA-graph runs drifted from
        # eager only at the iterations that captured. Upstream captures at start-up with dummy
        # requests, so its warm-up touches no live cache; here the live cache is put back.
        cache = run.draft_cache
        live = [t for t in (cache.k, cache.v, cache.k_idx) if t is not None]
        saved_cache = [t.clone() for t in live]
        if self._side is None:  # one stream for every capture: its cuBLAS workspace persists
            self._side = torch.cuda.Stream(device=run.dev)
        side = self._side
        side.wait_stream(torch.cuda.current_stream(run.dev))
        with torch.cuda.stream(side):  # warm-up outside capture, as torch requires
            for _ in range(WARMUP_ITERATIONS):
                run.draft_steps(tokens, hidden)
                md.kv_lens_cuda.copy_(saved_kv)
        torch.cuda.current_stream(run.dev).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # Capture on the warm-up stream: its cuBLAS workspace then exists before capture starts
        # (torch.cuda.graph's own capture stream would allocate one inside the capture). Captures
        # of this section failed on the H200 now and then (CUBLAS_STATUS_EXECUTION_FAILED, then
        # "operation failed due to a previous error during capture") after a single warm-up;
        # torch's CUDA-graph notes warm up for a few iterations, so does this.
        with torch.cuda.graph(graph, stream=side):
            outs = run.draft_steps(tokens, hidden)
        md.kv_lens_cuda.copy_(saved_kv)
        for tensor, before in zip(live, saved_cache, strict=True):
            tensor.copy_(before)
        entry = _Captured(graph, tokens, hidden, outs)
        self.captured[b_pad] = entry
        return entry
