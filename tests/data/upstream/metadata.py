"""Fake DSA metadata (shape of upstream DSAtrtllmAttentionMetadata)."""
import torch

import tensorrt_llm
from tensorrt_llm._utils import prefer_pinned
from tensorrt_llm.deep_gemm import get_paged_mqa_logits_metadata

from {BACKENDS}.trtllm import TrtllmAttentionMetadata
# FIXTURE: indexer-import
# FIXTURE: params-import
# FIXTURE: helper


class DSAtrtllmAttentionMetadata(TrtllmAttentionMetadata):
    max_draft_tokens: int = 0

    def __init__(self, *args, **kwargs):
        self.num_sms = tensorrt_llm.deep_gemm.get_num_sms()
        super().__init__(*args, **kwargs)

    def __post_init__(self):
        super().__post_init__()
        # FIXTURE: topk
        n = self.max_num_sequences
        mgr = self.kv_cache_manager
        self.indexer_k_cache_block_offsets = self.get_empty(
            None, (n, mgr.max_blocks_per_seq), torch.int32, "indexer_k_cache_block_offsets"
        )
        self.host_indexer_k_cache_block_offsets = torch.zeros_like(
            self.indexer_k_cache_block_offsets, device="cpu", pin_memory=prefer_pinned()
        )
        self.req_idx_per_token = self.get_empty(
            None, (self.max_num_tokens,), torch.int32, "req_idx_per_token"
        )
        self.slot_mapping_fp8 = self.get_empty(
            None, (self.max_num_tokens,), torch.int64, "slot_mapping_fp8"
        )
        self.scheduler_metadata_buffer = self.get_empty(
            None, (self.num_sms + 1, 2), torch.int32, "scheduler_metadata_buffer"
        )
        self._create_kv_lens_2d()

    def _create_kv_lens_2d(self):
        self.kv_lens_cuda_2d = self.get_empty(
            None, (self.max_num_sequences, 1 + self.max_draft_tokens), torch.int32,
            "kv_lens_cuda_2d",
        )

    def update_spec_dec_param(self, batch_size, is_spec_decoding_enabled, is_spec_dec_tree,
                              is_spec_dec_dynamic_tree, max_draft_len, max_total_draft_tokens,
                              **kwargs):
        super().update_spec_dec_param(batch_size, is_spec_decoding_enabled, is_spec_dec_tree,
                                      is_spec_dec_dynamic_tree, max_draft_len,
                                      max_total_draft_tokens, **kwargs)
        self.max_draft_tokens = max_draft_len
        if self.kv_lens_cuda_2d.shape[1] != 1 + max_draft_len:
            self._create_kv_lens_2d()

    def prepare(self):
        super().prepare()
        # FIXTURE: cache-manager-check
        mgr = self.kv_cache_manager
        encoded = mgr.host_kv_cache_block_offsets[0, : self.num_seqs, 0, :]
        self.host_indexer_k_cache_block_offsets[: self.num_seqs].copy_(
            encoded // mgr.num_local_layers
        )
        self.indexer_k_cache_block_offsets[: self.num_seqs].copy_(
            self.host_indexer_k_cache_block_offsets[: self.num_seqs], non_blocking=True
        )
        host_map = torch.repeat_interleave(
            torch.arange(self.num_seqs, dtype=torch.int32), self.seq_lens
        )
        self.req_idx_per_token[: self.num_tokens].copy_(host_map, non_blocking=True)
        self._slot_mappings()

    def on_update_kv_lens(self):
        # FIXTURE: refresh
        self._slot_mappings()
        if self.num_generations > 0:
            self.scheduler_metadata_buffer.copy_(
                get_paged_mqa_logits_metadata(
                    self.kv_lens_cuda[self.num_contexts : self.num_seqs],
                    self.kv_cache_manager.tokens_per_block,
                    self.num_sms,
                )
            )

    def _slot_mappings(self):
        if self.num_tokens == 0:
            return
        seq_lens = self.seq_lens_cuda[: self.num_seqs]
        start = self.kv_lens_cuda[: self.num_seqs] - seq_lens
        req = self.req_idx_per_token[: self.num_tokens].to(torch.int64)
        starts = torch.cumsum(seq_lens, 0) - seq_lens
        offsets = torch.arange(self.num_tokens, dtype=torch.int64) - starts[req]
        mgr = self.kv_cache_manager
        self.slot_mapping_fp8[: self.num_tokens] = _compute_slot_mappings(
            start[req] + offsets, self.indexer_k_cache_block_offsets, req,
            mgr.index_head_dim, mgr.tokens_per_block, mgr.quant_block_size,
        )

    def update_for_spec_dec(self):
        super().update_for_spec_dec()
        self.on_update_kv_lens()
