"""The batch layout of one forward, and the one way the executor hands it to metadata before prepare().

Every driver of attention metadata needs the same value (the lifecycle model, the stale-state
oracle and its batch table, the reference engine, the layer-wise benchmark, the scenarios of
``regress check``), so it is one type, :class:`Batch`, and one function, :func:`prepare_batch`,
for what the executor's ``_prepare_inputs`` does with it: set ``request_ids``, ``seq_lens``,
``num_contexts`` and the cached lengths on the metadata, then call ``prepare()``
(``tensorrt_llm/_torch/pyexecutor/model_engine.py`` ``PyTorchModelEngine``; its per-forward order
read @ 1a0dc5f7). Metadata is built with ``seq_lens`` unset
(``_torch/attention_backend/interface.py`` ``AttentionMetadata.seq_lens`` setter @ 000a01de).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Tokens a generation request has in the KV cache when a :class:`Batch` does not say.
DEFAULT_CACHED = 8


@dataclass(frozen=True)
class Batch:
    """One scheduled forward: the batch layout the executor hands the metadata.

    Attributes:
        seq_lens: new tokens per request, contexts first (upstream batches contexts first).
        num_contexts: how many leading requests are contexts.
        cached: tokens already in the KV cache per request (the executor's
            ``num_cached_tokens_per_seq``); default 0 for contexts and :data:`DEFAULT_CACHED`
            for generations.
        num_accepted: per request, accepted tokens counting the bonus one (1..K+1), as
            upstream's ``num_accepted_tokens``; contexts always 1. Default: all 1.
        request_ids: default ``0..n-1``.
        draft_seq_lens: the layout draft step 0 collapses the batch to. Default all ones, as
            MTP-Eagle's collapse; other drafters re-lay the batch out differently (tree drafts;
            ``speculative/pard.py`` gives each generation request ``2K`` draft tokens), which is
            what a map refresh that only handles all-ones (the closed PR #17240) gets wrong.
        prompt_lens: each request's prompt length (default: its cached length).
        max_draft_len: K, the draft window announced (``1 + K`` tokens per generation in a
            verify); 0 where the caller passes K separately.
        name: how a table of batches names this one (empty for an unnamed batch).
    """

    seq_lens: tuple[int, ...]
    num_contexts: int = 0
    cached: tuple[int, ...] | None = None
    num_accepted: tuple[int, ...] | None = None
    request_ids: tuple[int, ...] | None = None
    draft_seq_lens: tuple[int, ...] | None = None
    prompt_lens: tuple[int, ...] | None = None
    max_draft_len: int = 0
    name: str = ""

    @property
    def batch_size(self) -> int:
        return len(self.seq_lens)

    @property
    def num_tokens(self) -> int:
        return sum(self.seq_lens)

    @property
    def num_generations(self) -> int:
        return self.batch_size - self.num_contexts

    @property
    def next_n(self) -> int:
        """Tokens per generation request (the widest one), 0 without generations."""
        return max(self.seq_lens[self.num_contexts :], default=0)

    @property
    def request_types(self) -> tuple[int, ...]:
        """Upstream's request types per request: 0 context, 1 generation (contexts lead)."""
        return (0,) * self.num_contexts + (1,) * self.num_generations

    def cached_lens(self) -> list[int]:
        """Tokens already cached before this forward's new ones."""
        if self.cached is not None:
            return list(self.cached)
        return [0] * self.num_contexts + [DEFAULT_CACHED] * self.num_generations

    def accepted(self) -> list[int]:
        """Accepted tokens per request, the bonus counted (default all 1)."""
        if self.num_accepted is not None:
            return list(self.num_accepted)
        return [1] * self.batch_size

    def ids(self) -> list[int]:
        """The request ids, in batch order."""
        return list(self.request_ids or range(self.batch_size))

    def describe(self) -> str:
        """One short line: what a reader needs to recreate the batch."""
        kv = ""
        if self.cached is not None:
            lens = [c + s for c, s in zip(self.cached, self.seq_lens, strict=True)]
            kv = f" kv_lens={lens}"
        return (
            f"seq_lens={list(self.seq_lens)} num_contexts={self.num_contexts}{kv} "
            f"K={self.max_draft_len}"
        )

    @classmethod
    def from_metadata(cls, md: Any, max_draft_len: int) -> Batch:
        """Read the current batch off a metadata object (upstream's attribute names).

        ``seq_lens`` (host), ``num_contexts``, ``kv_lens_cuda`` (what the draft loop rewinds and
        advances: the cached lengths are it minus ``seq_lens``), ``request_ids`` and
        ``prompt_lens``.
        """
        lens = [int(x) for x in md.seq_lens.tolist()]
        kv = getattr(md, "kv_lens_cuda", None)
        cached = None
        if kv is not None:
            cached = tuple(int(k) - s for k, s in zip(kv[: len(lens)].tolist(), lens, strict=True))
        prompts = getattr(md, "prompt_lens", None)
        ids = tuple(int(r) for r in (getattr(md, "request_ids", None) or ()))
        return cls(
            seq_lens=tuple(lens),
            num_contexts=int(md.num_contexts),
            cached=cached,
            request_ids=ids or None,
            prompt_lens=tuple(int(p) for p in prompts[: len(lens)]) if prompts else None,
            max_draft_len=int(max_draft_len),
        )


KvCacheParams = Callable[[list[int]], Any]
"""Builds a tree's ``KVCacheParams`` from the cached lengths per request."""


def prepare_batch(
    metadata: Any, batch: Batch, *, kv_cache_params: KvCacheParams | None = None
) -> None:
    """What the executor does before a forward: set the batch on ``metadata``, then ``prepare()``.

    The one place regress writes this sequence (:func:`set_batch`, then ``prepare()``).

    Args:
        metadata: an attention-metadata object.
        batch: the forward's layout.
        kv_cache_params: ``kv_cache_params(cached) -> KVCacheParams`` for a real tree's class.
    """
    set_batch(metadata, batch, kv_cache_params=kv_cache_params)
    metadata.prepare()


def set_batch(metadata: Any, batch: Batch, *, kv_cache_params: KvCacheParams | None = None) -> None:
    """The batch fields the executor sets before ``prepare()``; only a caller that must put a
    call between them and ``prepare()`` (the layer-wise runner's announcement) uses it alone.

    The real upstream classes take the cached lengths through ``kv_cache_params`` (pass the
    tree's builder; ``prompt_lens`` is set then too); the reference mirrors
    (``regress.reference.metadata``) keep them in ``cached_token_lens``.
    """
    import torch

    cached = batch.cached_lens()
    metadata.request_ids = batch.ids()
    if kv_cache_params is not None:
        metadata.prompt_lens = list(batch.prompt_lens or cached)
        metadata.kv_cache_params = kv_cache_params(cached)
    elif hasattr(metadata, "cached_token_lens"):
        metadata.cached_token_lens = cached
    metadata.seq_lens = torch.tensor(batch.seq_lens, dtype=torch.int32)
    metadata.num_contexts = batch.num_contexts


__all__ = ["DEFAULT_CACHED", "Batch", "KvCacheParams", "prepare_batch", "set_batch"]
