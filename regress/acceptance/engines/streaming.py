"""Streaming-delta accounting: per-step accepted drafts from a token stream, and its cross-checks.

TensorRT-LLM reports no per-step acceptance, but its streaming API returns one response per
iteration in which a request advanced: with one-model MTP that is the prefill token first, then
``accepted + 1`` tokens per verify step. Reading the size of each streamed delta therefore recovers
the per-step counts, as long as the few deltas that do not map to exactly one step are recognised
and left out rather than guessed. Everything here is pure, so it is tested on synthetic streams.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from regress.acceptance.trace import RequestTrace

#: finish reasons after which the final step may have been cut short by the engine
#: (max_new_tokens reached, EOS or a stop word trimmed away, timeout, cancellation).
STOPPED = frozenset({"length", "stop", "timeout", "cancelled"})


@dataclass
class StreamAccount:
    """What one request's stream says about its verify steps.

    Attributes:
        accepted: accepted drafts per verify step whose count is certain.
        censored_steps: verify steps seen but left out because their count is uncertain (a final
            step cut short, or the minimum number of steps hidden in a coalesced delta).
        coalesced_deltas: deltas that held more than one step (or the prefill token and a step).
        verify_deltas: deltas attributed to verify steps, certain or not (for the cross-check
            against the engine's draft-token totals); None when coalescing hides the count.
        raw_accepted: ``sum(n - 1)`` over verify deltas, the final one included: what upstream's
            per-request ``total_accepted_draft_tokens`` should equal; None when unknowable.
        tokens: output tokens at the end of the stream.
        finish_reason: how the request ended, as the engine said.
    """

    accepted: list[int]
    censored_steps: int
    coalesced_deltas: int
    verify_deltas: int | None
    raw_accepted: int | None
    tokens: int
    finish_reason: str | None = None

    def to_trace(
        self, *, prompt_index: int | None = None, tokens: list[int] | None = None
    ) -> RequestTrace:
        return RequestTrace(
            accepted=list(self.accepted),
            tokens=tokens,
            prompt_index=prompt_index,
            censored_steps=self.censored_steps,
        )


def deltas_from_lengths(lengths: Iterable[int]) -> list[int]:
    """Turn cumulative output lengths (``len(output.token_ids)`` per response) into deltas.

    Cumulative lengths are what to record: TensorRT-LLM trims stop words from ``token_ids`` in the
    final response, so the final delta can be smaller than what the step produced, even negative.
    """
    out, prev = [], 0
    for n in lengths:
        out.append(n - prev)
        prev = n
    return out


def account_stream(
    deltas: Sequence[int],
    *,
    max_draft_len: int,
    finish_reason: str | None = None,
    prefill_tokens: int = 1,
) -> StreamAccount:
    """Recover per-step accepted counts from the token counts of one request's streamed responses.

    Rules, in order, for each response's delta ``n`` (K = ``max_draft_len``):

    * the first ``prefill_tokens`` tokens come from the prefill step, which verifies nothing;
      if the same delta carries more, a verify step was coalesced into it: censored;
    * an empty delta before the end is a response without new tokens: skipped;
    * ``n > K + 1`` cannot be one step (at most K drafts plus the bonus token): coalesced, and
      at least ``ceil(n / (K + 1))`` steps are censored;
    * the final delta of a request that stopped (length, EOS/stop word, timeout) with
      ``n < K + 1`` may have been cut short, so its ``n - 1`` is only a lower bound: censored.
      A full ``K + 1`` final step is exact (nothing could have been cut from it);
    * any other delta is one step with ``n - 1`` accepted drafts.

    A delta of ``n <= K + 1`` tokens could in principle also hide two short steps; streaming in
    TensorRT-LLM's PyTorch backend responds every iteration, so this is not expected, and the
    cross-check against the engine's own counters (:func:`cross_check`) is what would catch it.
    """
    full = max_draft_len + 1
    accepted: list[int] = []
    censored = coalesced = verify = raw = 0
    known = True
    prefill_left = prefill_tokens
    last = len(deltas) - 1
    for idx, n in enumerate(deltas):
        final = idx == last
        if prefill_left > 0 and n > 0:
            take = min(n, prefill_left)
            prefill_left -= take
            n -= take
            if n == 0:
                continue
            # Prefill and at least one verify step arrived together: the split is unknowable.
            coalesced += 1
            censored += -(-n // full)
            known = False
            continue
        if n == 0:
            continue
        if n > full:
            coalesced += 1
            censored += -(-n // full)
            known = False
            continue
        verify += 1
        raw += max(n - 1, 0)
        if final and finish_reason in STOPPED and n < full:
            censored += 1
            continue
        accepted.append(n - 1)
    return StreamAccount(
        accepted=accepted,
        censored_steps=censored,
        coalesced_deltas=coalesced,
        verify_deltas=verify if known else None,
        raw_accepted=raw if known else None,
        tokens=sum(deltas),
        finish_reason=finish_reason,
    )


def _sum(values: Iterable[int | None]) -> int | None:
    total = 0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def cross_check(
    accounts: Sequence[StreamAccount],
    *,
    max_draft_len: int,
    perf: Sequence[Mapping[str, int] | None] | None = None,
    counters: Mapping[str, int] | None = None,
) -> list[str]:
    """Compare the stream-derived counts with the engine's own, and say where they disagree.

    Args:
        accounts: one per request.
        max_draft_len: K.
        perf: per request, upstream's ``request_perf_metrics.speculative_decoding`` as a dict
            (``total_accepted_draft_tokens``, ``total_draft_tokens``), or None where absent.
        counters: summed iteration stats (``num_accepted_tokens``,
            ``num_requests_with_draft_tokens``, ``num_draft_tokens``), when enabled.

    Returns:
        Human-readable notes; empty when everything agrees. A request that ended on EOS may differ
        by one accepted token (the EOS token itself may be withheld from the output), so that much
        slack is allowed per such request.
    """
    notes: list[str] = []
    coalesced = sum(a.coalesced_deltas for a in accounts)
    if coalesced:
        notes.append(
            f"{coalesced} streamed response(s) held more than one verify step; "
            f"{sum(a.censored_steps for a in accounts)} step(s) were left out of the statistics"
        )
    ours_accepted = _sum(a.raw_accepted for a in accounts)
    ours_steps = _sum(a.verify_deltas for a in accounts)
    slack = sum(1 for a in accounts if a.finish_reason == "stop")
    if perf and all(p is not None for p in perf) and ours_accepted is not None:
        theirs = sum(int(p.get("total_accepted_draft_tokens", 0)) for p in perf)
        if abs(theirs - ours_accepted) > slack:
            notes.append(
                f"request_perf_metrics report {theirs} accepted drafts, the stream shows "
                f"{ours_accepted}; per-step numbers may be off"
            )
        drafted = sum(int(p.get("total_draft_tokens", 0)) for p in perf)
        if ours_steps is not None and drafted != ours_steps * max_draft_len:
            notes.append(
                f"request_perf_metrics report {drafted} drafted tokens, the stream shows "
                f"{ours_steps} verify steps x K={max_draft_len} = {ours_steps * max_draft_len}"
            )
    if counters and ours_accepted is not None:
        theirs = counters.get("num_accepted_tokens")
        if theirs is not None and abs(int(theirs) - ours_accepted) > slack:
            notes.append(
                f"iteration stats report {theirs} accepted drafts, the stream shows {ours_accepted} "
                "(stats may be incomplete if the engine dropped iterations from its stats queue)"
            )
        reqs = counters.get("num_requests_with_draft_tokens")
        if reqs is not None and ours_steps is not None and int(reqs) != ours_steps:
            notes.append(
                f"iteration stats count {reqs} request-steps with drafts, the stream shows "
                f"{ours_steps} verify steps"
            )
    return notes
