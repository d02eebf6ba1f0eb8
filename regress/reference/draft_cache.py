"""How the MTP draft layer's caches are laid out: indexer pools, the index-share stash, pool size.

Three choices of upstream's one-model MTP path on DSA, each with the historical defect that got it
wrong (``regress defects``). They live in one small module so ``regress demo --defect NAME`` can
copy it into a throwaway history and plant a defect by editing one line, as a real commit would.

* Which layers own an indexer-K pool. Upstream's ``DSACacheManager`` allocates the indexer
  K-cache per layer from a layer mask (its start-up log reads "Indexer k-cache: 12 of 42 local
  layers own an indexer k-cache"); the MTP layer is one more layer past the target's. TensorRT-LLM
  issue #18662: with ``use_kv_cache_manager_v2=False`` (the V1 ``KVCacheManager`` +
  ``DSACacheManager``) MTP accepts no draft token at all, acceptance length 1.0. The replay: the
  V1 mask covers the target's layers only, so the draft layer owns no indexer pool.
* Which row of a request draft step 0 stashes for index share. PR #15806 (DSA MTP indexer top-k
  sharing) stashes every ``next_n``-th row of ``topk_indices_buffer`` from row ``next_n - 1``,
  each request's last padded row; its review (and the QSA follow-up #19138) points out that under
  partial acceptance that row sits on the target's rejected branch, and after the kv-lens rewind
  its indices point at stale rejected-branch KV. The right row is the last accepted one.
* How many blocks the indexer pool has. TensorRT-LLM issue #18660: with KV cache manager V2 the
  DSA indexer (draft) cache pool is not part of admission, and exhausting it aborts the engine.
  The replay: the pool is sized for a warm-up batch instead of the scheduler's batch, and
  admission never looks at it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from regress.errors import EngineError

#: Requests the defective indexer pool is sized for (a warm-up batch), whatever the batch size.
WARMUP_REQUESTS = 4


class IndexerPoolExhausted(EngineError):
    """The DSA indexer-K pool ran out of blocks mid-run: the engine aborts (#18660's symptom)."""


def indexer_pool_layers(
    num_target_layers: int, num_draft_layers: int, defects: Iterable[str] = ()
) -> range:
    """Indices of the layers (target first, then the MTP layers) that own an indexer-K pool."""
    if "no_accept_v1_cache_manager" in defects:
        return range(num_target_layers)  # V1: the mask is sized by the target's layers only
    return range(num_target_layers + num_draft_layers)


def stash_rows(
    starts: Sequence[int],
    seq_lens: Sequence[int],
    accepted: Sequence[int],
    is_context: Sequence[bool],
    defects: Iterable[str] = (),
) -> list[int]:
    """Row of the flattened target layout whose top-k each request's later draft steps reuse.

    A context request's row is its last prompt token. A generation request verified ``1 + K``
    rows and accepted ``accepted[i]`` drafts: its continuation starts at row ``start + accepted``.
    """
    rows = []
    for start, n, a, ctx in zip(starts, seq_lens, accepted, is_context, strict=True):
        if ctx:
            rows.append(start + n - 1)
        elif "index_share_rejected_branch" in defects:
            rows.append(start + n - 1)  # PR #15806: the last padded row, whatever was accepted
        else:
            rows.append(start + a)
    return rows


def indexer_pool_blocks(
    batch_size: int, blocks_per_request: int, defects: Iterable[str] = ()
) -> int:
    """Blocks of the indexer-K pool (block 0 reserved), for ``batch_size`` live requests."""
    if "indexer_pool_exhaustion" in defects:
        return 1 + WARMUP_REQUESTS * blocks_per_request  # sized for warm-up, outside admission
    return 1 + batch_size * blocks_per_request


class IndexerPool:
    """Block accounting of the indexer-K pool, apart from the KV pool's admission.

    The indexer K rows share the KV pool's block tables in this engine; what this pool adds is its
    own capacity, checked when a request's indexer blocks are taken, after admission has already
    let the request in, which is how #18660 aborts instead of queueing.
    """

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self.free = num_blocks - 1
        self.held: dict[int, int] = {}

    def take(self, request_id: int, blocks: int) -> None:
        """Reserve ``blocks`` for ``request_id``.

        Raises:
            IndexerPoolExhausted: not enough free blocks.
        """
        if blocks > self.free:
            raise IndexerPoolExhausted(
                f"DSA indexer K-cache pool exhausted: request "
                f"{request_id} needs {blocks} blocks, {self.free} of {self.num_blocks - 1} free "
                f"({len(self.held)} requests hold the rest); the pool is not part of admission. "
                "Size it with the KV pool (the fix), or lower the batch size"
            )
        self.free -= blocks
        self.held[request_id] = blocks

    def release(self, request_id: int) -> None:
        self.free += self.held.pop(request_id, 0)
