"""Fake DSA indexer helpers (shape of upstream sparse/dsa/indexer.py)."""
import torch


def _compute_slot_mappings(positions, block_offsets, req_indices, head_dim, tokens_per_block,
                           quant_block_size):
    """Flat byte offsets of each token's indexer-K row: block * stride + slot * head_dim."""
    scale_size = head_dim // quant_block_size * 4
    block_stride = tokens_per_block * (head_dim + scale_size)
    block_in_seq = positions // tokens_per_block
    if not torch.cuda.is_current_stream_capturing():
        assert (block_in_seq < block_offsets.shape[1]).all(), "block index out of range"
    block_ids = block_offsets[req_indices, block_in_seq].to(torch.int64)
    return block_ids * block_stride + (positions % tokens_per_block) * head_dim
