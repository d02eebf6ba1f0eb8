"""Per-request speculative-decoding traces: how many drafts each verify step accepted."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from regress.errors import EngineError


@dataclass
class RequestTrace:
    """What one request did, step by step, as the profiler needs it.

    ``accepted[i]`` is the number of draft tokens the target model accepted at verify step ``i``
    (``0..max_draft_len``); each step therefore emitted ``accepted[i] + 1`` tokens, the extra one
    being the target's own "bonus" token. The prefill step, which verifies nothing, is not a step.

    Attributes:
        accepted: accepted-draft count per verify step, in order.
        tokens: the generated token ids, when the engine reports them (kept for debugging and for
            checking that speculative decoding stayed lossless; statistics never read them).
        prompt_index: position of the prompt in the prompt list, so runs at different batch sizes
            can be compared prompt by prompt.
        censored_steps: verify steps the engine ran but whose accepted count is unknown (for
            example a final step cut short by ``max_new_tokens`` in a stream); they are left out of
            ``accepted`` on purpose and only counted here.
    """

    accepted: list[int]
    tokens: list[int] | None = None
    prompt_index: int | None = None
    censored_steps: int = field(default=0)

    @property
    def steps(self) -> int:
        """Number of verify steps with a known accepted count."""
        return len(self.accepted)

    @property
    def accepted_total(self) -> int:
        """Accepted drafts summed over all known steps."""
        return sum(self.accepted)


def validate_traces(
    traces: Iterable[RequestTrace], max_draft_len: int, *, expected: int | None = None
) -> list[RequestTrace]:
    """Check engine output before any statistic is computed from it.

    An engine that reports more accepted drafts than it drafted, or loses requests, has a bug of its
    own; reporting an acceptance length from such data would hide it, so this raises instead.

    Args:
        traces: the engine's traces.
        max_draft_len: K; every accepted count must lie in ``0..K``.
        expected: number of requests the engine was given, if it must return one trace each.

    Returns:
        The traces as a list.

    Raises:
        EngineError: on a count outside ``0..K`` or a missing request.
    """
    out = list(traces)
    if expected is not None and len(out) != expected:
        raise EngineError(
            f"the engine returned {len(out)} request traces for {expected} prompts; "
            "it dropped or duplicated requests, so its acceptance numbers cannot be trusted"
        )
    for n, trace in enumerate(out):
        bad = [a for a in trace.accepted if not 0 <= a <= max_draft_len]
        if bad:
            name = trace.prompt_index if trace.prompt_index is not None else n
            raise EngineError(
                f"request {name} reports accepted-draft counts {bad[:5]} outside 0..{max_draft_len} "
                "(max_draft_len); the engine's accounting is broken"
            )
    return out


def reach_counts(accepted: Sequence[int], max_draft_len: int) -> list[int]:
    """Count, for each depth ``i``, the steps whose first ``i + 1`` drafts were all accepted.

    Because verification stops at the first rejected draft, "the first ``i + 1`` drafts were
    accepted" is the same as ``accepted >= i + 1``; these counts are the numerators of vLLM's
    per-position acceptance rate.
    """
    reach = [0] * max_draft_len
    for a in accepted:
        for i in range(min(a, max_draft_len)):
            reach[i] += 1
    return reach
