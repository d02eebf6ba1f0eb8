"""The fake collaborators the real DSA metadata talks to: a KV-cache manager and a logger.

Upstream's ``KVCacheManager`` / ``DSACacheManager`` are C++-backed
(``tensorrt_llm/_torch/pyexecutor/resource_manager.py``, ``.../sparse/dsa/cache_manager.py``).
The fake gives each request its own, disjoint range of pool blocks, so the indexer-K slot mapping
the metadata computes can be traced back to the request whose pages it writes.
"""

from __future__ import annotations

from typing import Any, ClassVar

#: Request ``r`` owns pool blocks ``OWN_STRIDE * r ... OWN_STRIDE * r + max_blocks_per_seq - 1``.
OWN_STRIDE = 100


class FakeKVCacheManager:
    """The attributes and methods of the C++ KV-cache manager the DSA metadata reads.

    Offsets follow the C++ ``setOffsets`` encoding that upstream's ``_get_pool_block_indices``
    (``metadata.py`` @ e5c90626) describes: the encoded offset is the pool block index times
    ``num_layers`` times ``kv_factor``, with a ``kv_factor`` of 1 (SELFKONLY). Every call is
    recorded in :attr:`calls`.
    """

    kv_factor = 1
    num_pools = 1
    index_head_dim = 128
    quant_block_size = 128
    head_dim = 576
    use_fp4 = False
    indexer_k_cache_page_scale = 1

    def __init__(
        self,
        max_batch_size: int,
        *,
        tokens_per_block: int = 32,
        max_blocks_per_seq: int = 16,
        num_local_layers: int = 2,
        block_base: int = 0,
    ) -> None:
        import torch

        self.block_base = block_base  # a second manager (a separate draft KV cache) owns others
        self.max_batch_size = max_batch_size
        self.tokens_per_block = tokens_per_block
        self.max_blocks_per_seq = max_blocks_per_seq
        self.max_seq_len = tokens_per_block * max_blocks_per_seq
        self.num_local_layers = num_local_layers
        self.blocks_in_primary_pool = block_base + OWN_STRIDE * max_batch_size
        self.kv_cache_pool_pointers = torch.zeros(1, 2, dtype=torch.int64)
        self.kv_cache_pool_mapping = torch.zeros(num_local_layers, 2, dtype=torch.int32)
        self.layer_offsets = {i: i for i in range(num_local_layers)}
        blocks = torch.arange(max_blocks_per_seq, dtype=torch.int32)
        self._pool = torch.stack(
            [block_base + OWN_STRIDE * r + blocks for r in range(max_batch_size)]
        )
        self.host_kv_cache_block_offsets = torch.zeros(
            1, max_batch_size, 2, max_blocks_per_seq, dtype=torch.int32
        )
        self.calls: dict[str, int] = {}
        self.request_ids: list[int] = list(range(max_batch_size))

    def _called(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def pool_indices(self, request_ids: list[int]) -> Any:
        """Pool block indices of ``request_ids``, one row each."""
        return self._pool[list(request_ids)].clone()

    def copy_batch_block_offsets(
        self, dst, request_ids, beam_width, num_contexts, num_seqs, max_blocks=None
    ) -> None:
        self._called("copy_batch_block_offsets")
        rows = self.pool_indices(list(request_ids)[:num_seqs]) * self.num_local_layers
        self.host_kv_cache_block_offsets[0, :num_seqs, 0] = rows
        dst[0, :num_seqs, 0, : rows.shape[1]].copy_(rows)

    def get_pool_block_indices(self, num_seqs, request_ids=None, num_contexts=0, beam_width=1):
        self._called("get_pool_block_indices")
        return self.pool_indices(list(request_ids or self.request_ids)[:num_seqs])

    def get_block_ids_per_seq(self, request_ids):
        self._called("get_block_ids_per_seq")
        return self.pool_indices(list(request_ids))

    # DeepSeek-V4's cache manager (``DeepseekV4CacheManager``, read by
    # ``.../sparse/deepseek_v4/metadata.py`` @ 5ca7a947): per-layer sliding-window block tables
    # and per-ratio compressed ones, filled with the same per-request blocks; pool pointers are
    # opaque numbers (nothing is dereferenced on a CPU).
    swa_pool_ptr = 0
    compress_pool_ptrs: ClassVar[dict[int, int]] = {}

    @property
    def pp_layers(self) -> list[int]:
        return list(range(self.num_local_layers))

    def get_buffers(self, layer_idx: int, attention_type: Any = None) -> Any:
        import torch

        return torch.zeros(1)

    def compute_sliding_block_tables(self, request_ids, num_contexts) -> None:
        self._called("compute_sliding_block_tables")

    def copy_batch_sliding_block_tables(self, dst, request_ids, num_contexts, num_seqs) -> None:
        self._called("copy_batch_sliding_block_tables")
        rows = self.pool_indices(list(request_ids)[:num_seqs])
        dst[:, :, :num_seqs, : rows.shape[1]] = rows

    def copy_batch_compress_block_tables(
        self, dst, request_ids, compress_ratio, beam_width, num_contexts, num_seqs
    ) -> None:
        self._called("copy_batch_compress_block_tables")
        rows = self.pool_indices(list(request_ids)[:num_seqs])
        dst[:num_seqs, : rows.shape[1]] = rows

    def copy_batch_indexer_compress_block_tables(
        self, dst, request_ids, beam_width, num_contexts, num_seqs
    ) -> None:
        self._called("copy_batch_indexer_compress_block_tables")
        rows = self.pool_indices(list(request_ids)[:num_seqs])
        dst[:num_seqs, : rows.shape[1]] = rows

    def owner_of_block(self, block: int) -> int:
        """The request id whose pages hold ``block`` (-1 when no request owns it)."""
        req, off = divmod(int(block) - self.block_base, OWN_STRIDE)
        return req if 0 <= req < self.max_batch_size and off < self.max_blocks_per_seq else -1

    def indexer_block_stride(self) -> int:
        """Bytes per indexer-K block: FP8 data plus one float32 scale per quant block.

        The layout of upstream ``_compute_slot_mappings`` (``sparse/dsa/indexer.py`` @ e5c90626).
        """
        scale = self.index_head_dim // self.quant_block_size * 4
        return self.tokens_per_block * (self.index_head_dim + scale)


class FakeDeepseekV4CacheManager(FakeKVCacheManager):
    """The DeepSeek-V4 cache manager as its metadata sees it: not a DSA manager.

    Upstream's ``DeepseekV4CacheManager`` extends ``KVCacheManagerV2``, not ``DSACacheManager``
    (two stored versions of ``sparse/deepseek_v4/cache_manager.py``, commits unknown), so
    ``is_dsa_cache_manager`` is False for it (``regress.sandbox.values.cache_manager_values``) and
    ``DSAtrtllmAttentionMetadata.__post_init__`` asserts DeepSeek-V4's interface instead
    (``compressed_block_sizes``, ``get_cache_indices``). The block-table calls are the base
    fake's.

    Args:
        compress_ratios: the compress ratio of each local layer (``pp_layers`` index them).
    """

    def __init__(self, max_batch_size: int, compress_ratios: list[int], **kwargs: Any) -> None:
        super().__init__(max_batch_size, num_local_layers=len(compress_ratios), **kwargs)
        self.compress_ratios = list(compress_ratios)
        #: per layer, tokens per compressed block (upstream's compressor indexes it by layer)
        self.compressed_block_sizes = [self.tokens_per_block // r for r in compress_ratios]

    def get_cache_indices(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the metadata path never calls get_cache_indices")


class RecordingLogger:
    """Stands for ``tensorrt_llm.logger.logger``: keeps messages instead of printing them."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, str]] = []

    def __getattr__(self, level: str):
        if level.startswith("__"):
            raise AttributeError(level)

        def log(msg: Any = "", *args: Any, **kwargs: Any) -> None:
            self.messages.append((level, str(msg)))

        return log
