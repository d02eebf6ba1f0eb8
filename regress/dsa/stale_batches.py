"""The batches the stale-state scenarios drive, on real trees and on the reference mirrors alike.

One table for ``regress check --scenario stale_state`` (:mod:`regress.check.stale_state`) and
the reference battery (:mod:`regress.reference.stale_state`), so both judge the same batches.
Capacities are chosen so the row rules (:meth:`regress.dsa.staleness.Capacities.used`) cannot
be confused with another size: sequence capacity :data:`CAPACITY` for batches of 4, token
capacity :data:`MAX_TOKENS`, K = :data:`DRAFT_LEN`; 32 tokens per KV block.
"""

from __future__ import annotations

from regress.dsa.batch import Batch

#: Sequence capacity (``max_num_sequences``): larger than every batch, equal to no other size.
CAPACITY = 6
#: Token capacity (``max_num_tokens``).
MAX_TOKENS = 61
#: Draft length K.
DRAFT_LEN = 3


def _accepted(num_requests: int, num_contexts: int, k: int) -> tuple[int, ...]:
    """Accepted tokens per request, the bonus counted (1..K+1), varied across the batch."""
    return tuple(1 if i < num_contexts else 1 + (3 * i + 1) % (k + 1) for i in range(num_requests))


def stale_batch(
    name: str,
    seq_lens: tuple[int, ...],
    num_contexts: int,
    cached: tuple[int, ...],
    draft_seq_lens: tuple[int, ...] | None = None,
    *,
    k: int = DRAFT_LEN,
) -> Batch:
    """A batch of the table: K, acceptance and prompt lengths filled in the table's way.

    A context's prompt is its chunk, a generation's a made-up ``24 + i`` tokens.
    """
    n = len(seq_lens)
    return Batch(
        seq_lens=seq_lens,
        num_contexts=num_contexts,
        cached=cached,
        num_accepted=_accepted(n, num_contexts, k),
        request_ids=tuple(range(n)),
        draft_seq_lens=draft_seq_lens,
        prompt_lens=tuple(s if i < num_contexts else 24 + i for i, s in enumerate(seq_lens)),
        max_draft_len=k,
        name=name,
    )


def next_forward(batch: Batch) -> Batch:
    """The forward after ``batch``'s draft loop: the same requests, all generations, reversed.

    Each request's cache grew by what it kept (a context its whole chunk, a generation its
    accepted tokens); the scheduler keeps no order among generations, so the batch is reversed
    and every buffer row changes hands.
    """
    k, n = batch.max_draft_len, batch.batch_size
    after = tuple(
        c + s if i < batch.num_contexts else c + a
        for i, (c, s, a) in enumerate(
            zip(batch.cached_lens(), batch.seq_lens, batch.accepted(), strict=True)
        )
    )
    return Batch(
        seq_lens=(1 + k,) * n,
        cached=after[::-1],
        num_accepted=_accepted(n, 0, k),
        request_ids=tuple(batch.ids())[::-1],
        prompt_lens=(batch.prompt_lens or tuple(batch.cached_lens()))[::-1],
        max_draft_len=k,
        name=batch.name,
    )


#: A generation-only verify batch, and a mixed one whose contexts turn into generations in the
#: draft loop; cached lengths put some requests just under a KV block boundary, so the draft
#: steps cross it.
BATCHES: tuple[Batch, ...] = (
    stale_batch("verify_4x4", (4, 4, 4, 4), 0, (40, 27, 60, 90)),
    stale_batch("mixed_2ctx_2gen", (6, 3, 4, 4), 2, (0, 0, 29, 70)),
)
#: A tree draft: the verify batch re-laid out as ``[3, 1, 4, 1]`` (the mirrors' draft loop only:
#: upstream's MTP-Eagle worker always collapses to ones).
TREE_DRAFT = stale_batch("tree_draft_3_1_4_1", (4, 4, 4, 4), 0, (40, 27, 60, 90), (3, 1, 4, 1))


__all__ = [
    "BATCHES",
    "CAPACITY",
    "DRAFT_LEN",
    "MAX_TOKENS",
    "TREE_DRAFT",
    "next_forward",
    "stale_batch",
]
