"""Fake TRT-LLM metadata (shape of upstream trtllm.py): kv lens twins, block offsets, spec-dec."""
from dataclasses import dataclass

import torch

from tensorrt_llm._utils import get_sm_version, prefer_pinned
from tensorrt_llm.bindings.internal import thop  # noqa: F401  (compiled op, never called here)

from .interface import AttentionMetadata


@dataclass(kw_only=True)
class TrtllmAttentionMetadata(AttentionMetadata):
    max_total_draft_tokens: int = 0
    is_spec_decoding_enabled: bool = False

    def __post_init__(self):
        super().__post_init__()
        if self.max_num_sequences is None:
            self.max_num_sequences = self.max_num_requests
        n = self.max_num_sequences
        self.kv_lens_cuda = self.get_empty(None, (n,), torch.int32, "kv_lens_cuda")
        self.kv_lens = torch.zeros(n, dtype=torch.int32, device="cpu", pin_memory=prefer_pinned())
        self.host_request_types = torch.zeros(n, dtype=torch.int32)
        mgr = self.kv_cache_manager
        self.kv_cache_block_offsets = self.get_empty(
            None, (mgr.num_pools, n, 2, mgr.max_blocks_per_seq), torch.int32, "offsets"
        )

    def prepare(self):
        super().prepare()
        cached = torch.tensor(self.kv_cache_params.num_cached_tokens_per_seq, dtype=torch.int32)
        kv_lens = cached + self.seq_lens
        self.kv_lens[: self.num_seqs].copy_(kv_lens)
        self.kv_lens_cuda[: self.num_seqs].copy_(self.kv_lens[: self.num_seqs], non_blocking=True)
        self.kv_cache_manager.copy_batch_block_offsets(
            self.kv_cache_block_offsets, self.request_ids, 1, self.num_contexts, self.num_seqs
        )

    def update_spec_dec_param(self, batch_size, is_spec_decoding_enabled, is_spec_dec_tree,
                              is_spec_dec_dynamic_tree, max_draft_len, max_total_draft_tokens,
                              **kwargs):
        self.max_total_draft_tokens = max_total_draft_tokens
        self.is_spec_decoding_enabled = is_spec_decoding_enabled and get_sm_version() < 100
