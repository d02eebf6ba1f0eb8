"""Paged-cache bookkeeping for the reference engine: a block pool and a block table per request.

Mirrors the block accounting of ``tensorrt_llm/_torch/pyexecutor/resource_manager.py::KVCacheManager``
closely enough for the DSA metadata to do what upstream does with it: turn a request's logical
token position into a physical slot ``block_table[req][pos // tokens_per_block] * tokens_per_block
+ pos % tokens_per_block``.
"""

from __future__ import annotations

import random

from regress.errors import EngineError

NULL_BLOCK = 0
"""Block 0 is never handed to a request: table padding and CUDA-graph padding rows point at it, so
a write through padding lands somewhere harmless, as upstream's clamped ``-1`` entries do."""


class PagedKVCacheManager:
    """Hands out fixed-size blocks of a shared pool to requests.

    Blocks are handed out in a seeded shuffled order so neighbouring requests' pages interleave in
    the pool, as they do in a long-running server; a write through the wrong block table then
    clobbers another live request rather than empty memory.
    """

    def __init__(
        self, *, num_blocks: int, tokens_per_block: int, max_blocks_per_seq: int, seed: int = 0
    ) -> None:
        if num_blocks < 2:
            raise EngineError("the paged cache needs at least 2 blocks (block 0 is reserved)")
        self.num_blocks = num_blocks
        self.tokens_per_block = tokens_per_block
        self.max_blocks_per_seq = max_blocks_per_seq
        self._free = list(range(1, num_blocks))
        random.Random(seed).shuffle(self._free)
        self._tables: dict[int, list[int]] = {}

    @classmethod
    def for_requests(
        cls, num_requests: int, max_tokens: int, *, tokens_per_block: int
    ) -> PagedKVCacheManager:
        """A pool sized for exactly ``num_requests`` requests (ids ``0..n-1``), all added."""
        blocks = -(-max_tokens // tokens_per_block)
        manager = cls(
            num_blocks=1 + num_requests * blocks,
            tokens_per_block=tokens_per_block,
            max_blocks_per_seq=blocks,
        )
        for rid in range(num_requests):
            manager.add_request(rid, max_tokens)
        return manager

    @property
    def num_slots(self) -> int:
        """Physical token slots in the pool (the first dimension of every cache tensor)."""
        return self.num_blocks * self.tokens_per_block

    def add_request(self, request_id: int, max_tokens: int) -> list[int]:
        """Reserve enough blocks for ``max_tokens`` tokens of ``request_id``.

        Raises:
            EngineError: when the pool or the per-request table is too small.
        """
        need = -(-max_tokens // self.tokens_per_block)
        if need > self.max_blocks_per_seq:
            raise EngineError(
                f"request {request_id} needs {need} blocks but max_blocks_per_seq is "
                f"{self.max_blocks_per_seq}; raise max_seq_len or shorten the prompt"
            )
        if need > len(self._free):
            raise EngineError(
                f"paged cache exhausted: request {request_id} needs {need} blocks, "
                f"{len(self._free)} free; raise num_blocks or lower the batch size"
            )
        blocks = [self._free.pop() for _ in range(need)]
        self._tables[request_id] = blocks
        return blocks

    def free_request(self, request_id: int) -> None:
        """Return a finished request's blocks to the pool."""
        self._free.extend(reversed(self._tables.pop(request_id)))

    def block_table_rows(self, request_ids: list[int]) -> list[list[int]]:
        """Block tables of ``request_ids``, padded with :data:`NULL_BLOCK` to a common width."""
        rows = []
        for rid in request_ids:
            blocks = self._tables.get(rid, [])
            rows.append(blocks + [NULL_BLOCK] * (self.max_blocks_per_seq - len(blocks)))
        return rows
