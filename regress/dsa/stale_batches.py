"""The batches the stale-state scenarios drive, on real trees and on the reference mirrors alike.

One table for ``regress check --scenario stale_state`` (:mod:`regress.check.stale_state`) and
the reference battery (:mod:`regress.reference.stale_state`), so both judge the same layouts.
Capacities are chosen so the layout's row rules (:meth:`regress.dsa.staleness.StateLayout.used`)
cannot be confused with another size: sequence capacity :data:`CAPACITY` for batches of 4, token
capacity :data:`MAX_TOKENS`, K = :data:`DRAFT_LEN`; 32 tokens per KV block.
"""

from __future__ import annotations

from dataclasses import dataclass

from regress.dsa.staleness import StateLayout

#: Sequence capacity (``max_num_sequences``): larger than every batch, equal to no other size.
CAPACITY = 6
#: Token capacity (``max_num_tokens``).
MAX_TOKENS = 61
#: Draft length K.
DRAFT_LEN = 3


@dataclass(frozen=True)
class Batch:
    """One batch: the target forward's layout, the KV-cache lengths before it, the draft layout.

    Attributes:
        draft_seq_lens: the layout draft step 0 collapses to (None: MTP-Eagle's all ones; a tree
            draft re-lays the batch out, which is what the closed #17240 refresh got wrong).
    """

    name: str
    seq_lens: tuple[int, ...]
    num_contexts: int
    cached: tuple[int, ...]
    draft_seq_lens: tuple[int, ...] | None = None

    def accepted(self, k: int) -> list[int]:
        """Accepted tokens per request, the bonus counted (1..K+1); contexts 1."""
        n = len(self.seq_lens)
        return [1 if i < self.num_contexts else 1 + (3 * i + 1) % (k + 1) for i in range(n)]

    def prompts(self) -> tuple[int, ...]:
        """Prompt lengths: a context's is its chunk, a generation's its (made-up) prompt."""
        return tuple(s if i < self.num_contexts else 24 + i for i, s in enumerate(self.seq_lens))

    def layout(
        self,
        k: int,
        prompts: tuple[int, ...] | None = None,
        request_ids: tuple[int, ...] | None = None,
    ) -> StateLayout:
        """The layout the executor gives the metadata before the target forward's prepare()."""
        return StateLayout(
            seq_lens=self.seq_lens,
            num_contexts=self.num_contexts,
            kv_lens=tuple(c + s for c, s in zip(self.cached, self.seq_lens, strict=True)),
            draft_len=k,
            max_num_tokens=MAX_TOKENS,
            max_num_sequences=CAPACITY,
            request_ids=request_ids or tuple(range(len(self.seq_lens))),
            prompt_lens=prompts or self.prompts(),
        )


#: A generation-only verify batch, and a mixed one whose contexts turn into generations in the
#: draft loop; cached lengths put some requests just under a KV block boundary, so the draft
#: steps cross it.
BATCHES: tuple[Batch, ...] = (
    Batch("verify_4x4", (4, 4, 4, 4), 0, (40, 27, 60, 90)),
    Batch("mixed_2ctx_2gen", (6, 3, 4, 4), 2, (0, 0, 29, 70)),
)
#: A tree draft: the verify batch re-laid out as ``[3, 1, 4, 1]`` (the mirrors' draft loop only:
#: upstream's MTP-Eagle worker always collapses to ones).
TREE_DRAFT = Batch("tree_draft_3_1_4_1", (4, 4, 4, 4), 0, (40, 27, 60, 90), (3, 1, 4, 1))


__all__ = ["BATCHES", "CAPACITY", "DRAFT_LEN", "MAX_TOKENS", "TREE_DRAFT", "Batch"]
