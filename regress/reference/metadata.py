"""A small, faithful mirror of TensorRT-LLM's DSA attention metadata, with its historical defects.

Upstream: ``DSAtrtllmAttentionMetadata`` in ``tensorrt_llm/_torch/attention_backend/sparse/dsa.py``
(era A), ``.../sparse/dsa/metadata.py`` (era B), ``_torch/attention/backends/sparse/dsa/metadata.py``
(era C); the era table is ``regress.tree.eras.ERAS``. The base and dense classes it extends are
in ``regress.reference.attention_metadata`` and re-exported here.

Only what the two historical bugs touch is mirrored: the counts ``on_update()`` recomputes, the
spec-dec announcement hook, the token-to-request map and its consumers (indexer-K slot mapping and
the local-to-global top-k conversion), and the 2-D kv-lens buffer the DeepGEMM indexer reads.
Device buffers are preallocated at construction, as upstream's CUDA-graph buffers are, so
everything after ``prepare()`` is legal inside a captured graph.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from regress.dsa.mapping import build_req_idx_per_token
from regress.reference.attention_metadata import AttentionMetadata, TrtllmAttentionMetadata
from regress.reference.defects import active_defects

if TYPE_CHECKING:
    import torch


class DSAtrtllmAttentionMetadata(TrtllmAttentionMetadata):
    """Mirror of ``sparse/dsa.py::DSAtrtllmAttentionMetadata`` with the defects it once had.

    Owns ``req_idx_per_token`` (int32, ``(max_num_tokens,)``, preallocated, with a host twin) and
    ``kv_lens_cuda_2d`` (``(max_num_sequences, 1 + max_draft_tokens)``). The map is built on the
    host in ``prepare()`` and, since PR #16925, rebuilt on device at the top of every
    ``on_update_kv_lens()``. Pass ``defects`` (or set ``REGRESS_DEFECTS``) to replay an older state.
    """

    def __init__(
        self, *, max_draft_tokens: int = 0, defects: Iterable[str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.defects = active_defects(defects)
        self.max_draft_tokens = max_draft_tokens
        self._create_buffers_for_indexer()

    def _create_buffers_for_indexer(self) -> None:
        import torch

        dev = self.device
        self.req_idx_per_token = torch.zeros(self.max_num_tokens, dtype=torch.int32, device=dev)
        self.host_req_idx_per_token = torch.zeros(self.max_num_tokens, dtype=torch.int32)
        # Scratch for the capture-safe rebuild; the arange doubles as the static buffer the
        # closed #17240 approach copied from.
        self._cu_seq_lens = torch.zeros(self.max_num_sequences, dtype=torch.int32, device=dev)
        self._token_arange = torch.arange(self.max_num_tokens, dtype=torch.int32, device=dev)
        self.slot_mapping = torch.zeros(self.max_num_tokens, dtype=torch.int64, device=dev)
        mgr = self.kv_cache_manager
        max_blocks = mgr.max_blocks_per_seq if mgr is not None else 1
        self.tokens_per_block = mgr.tokens_per_block if mgr is not None else 1
        self.indexer_k_cache_block_offsets = torch.zeros(
            self.max_num_sequences, max_blocks, dtype=torch.int32, device=dev
        )
        # The top-k conversion's table (upstream ``block_table``): zeros before its first write,
        # as upstream's buffer pool hands out a zeroed buffer (see ``_prepare_block_table``).
        self.block_table = torch.zeros(
            self.max_num_sequences, max_blocks, dtype=torch.int32, device=dev
        )
        self._block_cols = torch.arange(max_blocks, dtype=torch.int32, device=dev)
        #: Cached lengths as the host believes them when it pads ``block_table``: the overlap
        #: scheduler's optimistic ones (every draft of the previous iteration accepted); None:
        #: the true ones. Set per forward by a caller that models the overlap scheduler.
        self.host_view_cached_lens: list[int] | None = None
        self._alloc_kv_lens_cuda_2d()
        self._pool_view: torch.Tensor | None = None

    def _alloc_kv_lens_cuda_2d(self) -> None:
        import torch

        self.kv_lens_cuda_2d = torch.zeros(
            self.max_num_sequences, 1 + self.max_draft_tokens, dtype=torch.int32, device=self.device
        )

    # -- lifecycle ----------------------------------------------------------------------------
    def prepare(self) -> None:
        """Per target forward: kv lens, block tables, and the map built on the host.

        The host ``repeat_interleave`` is the pre-#16925 construction; it is kept out of the
        captured region by doing it here, once per forward.
        """
        import torch

        super().prepare()
        n = self.num_seqs
        if self.kv_cache_manager is not None and n:
            rows = torch.tensor(
                self.kv_cache_manager.block_table_rows(self.request_ids[:n]), dtype=torch.int32
            )
            self.indexer_k_cache_block_offsets[:n].copy_(rows, non_blocking=True)
            self._prepare_block_table(rows)
        host_map = torch.repeat_interleave(
            torch.arange(n, dtype=torch.int32), self.seq_lens.to(torch.int64)
        )
        self.host_req_idx_per_token[: self.num_tokens].copy_(host_map)
        self.req_idx_per_token[: self.num_tokens].copy_(
            self.host_req_idx_per_token[: self.num_tokens], non_blocking=True
        )
        self.on_update_kv_lens()

    def on_update_kv_lens(self) -> None:
        """Device-only refresh after ``seq_lens``/``kv_lens_cuda`` changed in place.

        Order matters and mirrors the fix: the map first, then everything derived from it (the
        pool-view cache is dropped, the indexer-K slot mapping recomputed), then the 2-D kv lens.
        """
        super().on_update_kv_lens()
        self._refresh_req_idx_per_token()
        if "stale_block_table" not in self.defects:
            self._refresh_block_table()
        self._invalidate_pool_view_cache()
        if self.num_tokens > 0:
            self._compute_slot_mapping()
        self._fill_kv_lens_cuda_2d()

    def update_for_spec_dec(self) -> None:
        super().update_for_spec_dec()
        self.max_gen_seq_len = 1
        self.on_update_kv_lens()

    def update_spec_dec_param(
        self,
        batch_size: int,
        is_spec_decoding_enabled: bool,
        is_spec_dec_tree: bool,
        is_spec_dec_dynamic_tree: bool,
        max_draft_len: int,
        max_total_draft_tokens: int,
        **kwargs: Any,
    ) -> None:
        """Super's bookkeeping, then resize ``kv_lens_cuda_2d`` to ``1 + max_draft_len`` columns.

        Not gated on ``is_spec_decoding_enabled``: passing ``False`` still gets the shapes, which
        is what the layer-wise benchmark fix relies on.
        """
        super().update_spec_dec_param(
            batch_size,
            is_spec_decoding_enabled,
            is_spec_dec_tree,
            is_spec_dec_dynamic_tree,
            max_draft_len,
            max_total_draft_tokens,
            **kwargs,
        )
        if max_draft_len != self.max_draft_tokens:
            self.max_draft_tokens = max_draft_len
            self._alloc_kv_lens_cuda_2d()

    # -- the contract bug 1 broke ---------------------------------------------------------------
    def _refresh_req_idx_per_token(self) -> None:
        if "stale_req_idx" in self.defects:
            return  # pre-#16925: the map from prepare() is reused whatever the layout now is
        if "arange_only_refresh" in self.defects:
            # The closed #17240 approach: right only when every request has exactly one token.
            if self.num_tokens == self.num_seqs:
                self.req_idx_per_token[: self.num_tokens].copy_(
                    self._token_arange[: self.num_tokens]
                )
            return
        build_req_idx_per_token(
            self.seq_lens_cuda,
            self.num_tokens,
            out=self.req_idx_per_token,
            cu_seq_lens=self._cu_seq_lens,
            token_arange=self._token_arange,
        )

    # -- consumers of the map ---------------------------------------------------------------------
    def _compute_slot_mapping(self) -> None:
        """Indexer-K write slots: ``block_table[req][pos // tpb] * tpb + pos % tpb``.

        ``pos = start_position[req] + offset`` with ``req`` read from the map, as in upstream's
        ``on_update_kv_lens``; with a stale map, draft tokens land in another request's pages.
        """
        import torch

        n, t = self.num_seqs, self.num_tokens
        seq_lens = self.seq_lens_cuda.to(torch.int64)
        start = self.kv_lens_cuda[:n].to(torch.int64) - seq_lens
        req = self.req_idx_per_token[:t].to(torch.int64).clamp_(0, max(n - 1, 0))
        seq_starts = torch.cumsum(seq_lens, 0) - seq_lens
        offsets = self._token_arange[:t].to(torch.int64) - seq_starts[req]
        pos = (start[req] + offsets).clamp_(min=0)
        rows = self.indexer_k_cache_block_offsets[req]
        self.slot_mapping[:t] = self._slots(rows, pos.unsqueeze(-1)).squeeze(-1)

    def _slots(self, rows: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Physical slots of logical positions ``pos[i, :]`` through block-table row ``rows[i]``."""
        import torch

        tpb = self.tokens_per_block
        col = torch.div(pos, tpb, rounding_mode="floor").clamp_(0, rows.shape[-1] - 1)
        return rows.gather(-1, col).to(torch.int64) * tpb + pos % tpb

    # -- the top-k conversion's block table (docs/findings.md, finding 1) ------------------------
    def _prepare_block_table(self, rows: torch.Tensor) -> None:
        """Upstream's host build: pad from the host kv lengths, write ``[:n, :max_blocks_used]``.

        ``prepare_for_indexer_k_cache()`` (``.../sparse/dsa/metadata.py`` @ 186080bb) counts each
        request's blocks from ``cached + seq_lens`` on the host, writes the pool rows with every
        column at or past that count set to ``-1``, and writes only the columns up to the widest
        request's count: later columns keep what an earlier forward left in the row.
        """
        import torch

        n, tpb = self.num_seqs, self.tokens_per_block
        cached = self.host_view_cached_lens or self.cached_token_lens
        cached = list(cached[:n]) + [0] * (n - len(cached[:n]))
        kv = torch.tensor(cached, dtype=torch.int32) + self.seq_lens
        blocks = (kv + tpb - 1) // tpb
        used = min(int(blocks.max()) if n else 1, self.block_table.shape[1])
        host = rows[:, :used].masked_fill(
            torch.arange(used).unsqueeze(0) >= blocks.unsqueeze(1), -1
        )
        self.block_table[:n, :used].copy_(host, non_blocking=True)

    def _refresh_block_table(self) -> None:
        """The fix: re-derive the padding from ``kv_lens_cuda`` on device, every column.

        Capture-safe (no host sync, no data-dependent shape), so it may run in every draft step.
        """
        import torch

        n, tpb = self.num_seqs, self.tokens_per_block
        if not n:
            return
        blocks = (self.kv_lens_cuda[:n] + tpb - 1) // tpb
        owned = self._block_cols.unsqueeze(0) < blocks.unsqueeze(1)
        rows = self.indexer_k_cache_block_offsets[:n]
        self.block_table[:n] = torch.where(owned, rows, torch.full_like(rows, -1))

    def _invalidate_pool_view_cache(self) -> None:
        self._pool_view = None

    def _ensure_pool_view_cached(self) -> torch.Tensor:
        """Per-token block-table rows gathered through the map (upstream's pool-view cache)."""
        if self._pool_view is None:
            import torch

            req = self.req_idx_per_token[: self.num_tokens].to(torch.int64)
            req = req.clamp(0, max(self.num_seqs - 1, 0))
            # Upstream converts through block_table; its -1 padding drops a key. The engine
            # reads it only where that can differ from the pool rows, under the defect, so
            # every other defect keeps its calibrated behaviour.
            table = (
                self.block_table
                if "stale_block_table" in self.defects
                else self.indexer_k_cache_block_offsets
            )
            self._pool_view = table[req]
        return self._pool_view

    def local_to_global(self, local_idx: torch.Tensor) -> torch.Tensor:
        """Convert per-token local top-k positions ``(num_tokens, k)`` to global pool slots.

        Mirrors ``triton_convert_req_index_to_global_index`` fed by the pool-view cache: the
        block table used for token ``t`` is that of request ``req_idx_per_token[t]``. Negative
        (padding) entries stay ``-1``.
        """
        import torch

        slots = self._slots(self._ensure_pool_view_cached(), local_idx.clamp(min=0).to(torch.int64))
        # a negative table entry (padding) gives a negative slot: dropped, as the kernel does
        valid = (local_idx >= 0) & (slots >= 0)
        return torch.where(valid, slots, torch.full_like(slots, -1))

    def _fill_kv_lens_cuda_2d(self) -> None:
        """Context length seen by each of the ``next_n`` query tokens of every generation request.

        Only as many columns as the buffer has are filled: the indexer then slices
        ``[:num_generations, :next_n]`` and gets fewer columns than ``next_n`` when the width was
        never announced, which is what DeepGEMM's host assert rejects.
        """

        g = self.num_generations
        if g <= 0:
            return
        next_n = (self.num_tokens - self.num_ctx_tokens) // g
        cols = min(next_n, self.kv_lens_cuda_2d.shape[1])
        kv = self.kv_lens_cuda[self.num_contexts : self.num_seqs].unsqueeze(1)
        # Column j is query token j of next_n: it sees all but the (next_n - 1 - j) later ones.
        hidden_after = (next_n - 1) - self._token_arange[:cols]
        self.kv_lens_cuda_2d[:g, :cols] = kv - hidden_after

    def gen_context_lens(self) -> torch.Tensor:
        """What the DeepGEMM indexer is handed: ``kv_lens_cuda_2d[:num_generations, :next_n]``."""
        g = self.num_generations
        next_n = (self.num_tokens - self.num_ctx_tokens) // g if g else 0
        return self.kv_lens_cuda_2d[:g, :next_n]


__all__ = ["AttentionMetadata", "DSAtrtllmAttentionMetadata", "TrtllmAttentionMetadata"]
