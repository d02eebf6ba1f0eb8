"""Streaming-delta accounting on synthetic streams: clean, coalesced, truncated, EOS."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regress.acceptance.engines.streaming import (
    StreamAccount,
    account_stream,
    cross_check,
    deltas_from_lengths,
)

K = 4


def stream_of(steps, prefill=1):
    """The deltas a per-iteration stream shows for these accepted counts."""
    return [prefill] + [a + 1 for a in steps]


def test_clean_stream_one_delta_per_step():
    account = account_stream([1, 3, 5, 1, 2], max_draft_len=K)
    assert account.accepted == [2, 4, 0, 1]
    assert (account.censored_steps, account.coalesced_deltas) == (0, 0)
    assert (account.verify_deltas, account.raw_accepted, account.tokens) == (4, 7, 12)


def test_coalesced_delta_is_censored_not_guessed():
    # 7 tokens in one response cannot be one step (at most K + 1 = 5): at least 2 steps hidden.
    account = account_stream([1, 3, 7, 2], max_draft_len=K)
    assert account.accepted == [2, 1]
    assert account.coalesced_deltas == 1
    assert account.censored_steps == 2
    assert account.raw_accepted is None and account.verify_deltas is None


def test_prefill_coalesced_with_first_step():
    account = account_stream([4, 5], max_draft_len=K)
    assert account.accepted == [4]
    assert (account.coalesced_deltas, account.censored_steps) == (1, 1)


def test_final_step_truncated_by_max_new_tokens_is_censored():
    # The last step accepted 4 drafts but max_new_tokens left room for 2 tokens: it shows as 2.
    account = account_stream([1, 5, 3, 2], max_draft_len=K, finish_reason="length")
    assert account.accepted == [4, 2]
    assert account.censored_steps == 1
    assert account.raw_accepted == 4 + 2 + 1  # upstream also counts the cut step's survivors
    assert account.verify_deltas == 3


def test_full_final_step_is_exact_even_when_length_limited():
    account = account_stream([1, 2, 5], max_draft_len=K, finish_reason="length")
    assert account.accepted == [1, 4]
    assert account.censored_steps == 0


def test_eos_final_step_is_censored():
    # EOS mid-step: drafts after it are never compared; the stream shows a short final delta.
    account = account_stream([1, 5, 2], max_draft_len=K, finish_reason="stop")
    assert account.accepted == [4]
    assert account.censored_steps == 1


def test_eos_with_empty_or_trimmed_final_response():
    # A final response carrying no tokens (EOS withheld) adds no step.
    empty = account_stream([1, 3, 0], max_draft_len=K, finish_reason="stop")
    assert empty.accepted == [2] and empty.censored_steps == 0
    # Stop-word trimming can make the final cumulative length shrink: negative delta, censored.
    trimmed = account_stream(
        deltas_from_lengths([1, 4, 9, 7]), max_draft_len=K, finish_reason="stop"
    )
    assert trimmed.accepted == [2, 4]
    assert trimmed.censored_steps == 1
    assert trimmed.tokens == 7


def test_short_final_step_without_stop_is_a_real_step():
    # Stream ended without a finish reason (e.g. an aborted collection): keep the step.
    assert account_stream([1, 2], max_draft_len=K).accepted == [1]


def test_empty_responses_mid_stream_are_skipped():
    assert account_stream([0, 1, 0, 3, 0, 1], max_draft_len=K).accepted == [2, 0]


def test_prefill_only_has_no_steps():
    account = account_stream([1], max_draft_len=K, finish_reason="length")
    assert account.accepted == [] and account.censored_steps == 0 and account.tokens == 1


def test_deltas_from_lengths():
    assert deltas_from_lengths([1, 3, 8, 8, 10]) == [1, 2, 5, 0, 2]
    assert deltas_from_lengths([]) == []


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, K), max_size=40))
def test_per_iteration_stream_is_recovered_exactly(steps):
    account = account_stream(stream_of(steps), max_draft_len=K)
    assert account.accepted == steps
    assert account.raw_accepted == sum(steps)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, K), min_size=1, max_size=40), st.integers(1, 200))
def test_truncated_streams_never_overstate_acceptance(steps, budget):
    """Cut a stream at any token budget: what is kept is exact, nothing is invented."""
    lengths, total = [], 0
    for n in stream_of(steps):
        total = min(total + n, budget)
        lengths.append(total)
        if total == budget:
            break
    account = account_stream(deltas_from_lengths(lengths), max_draft_len=K, finish_reason="length")
    kept = account.accepted
    assert kept == steps[: len(kept)]
    assert len(kept) + account.censored_steps == len(lengths) - 1


def _accounts():
    return [
        account_stream(stream_of([2, 4, 1]), max_draft_len=K),
        account_stream(stream_of([0, 3]), max_draft_len=K),
    ]


def test_cross_check_agrees_with_consistent_counters():
    perf = [
        {"total_accepted_draft_tokens": 7, "total_draft_tokens": 12},
        {"total_accepted_draft_tokens": 3, "total_draft_tokens": 8},
    ]
    counters = {
        "num_accepted_tokens": 10,
        "num_requests_with_draft_tokens": 5,
        "num_draft_tokens": 20,
    }
    assert cross_check(_accounts(), max_draft_len=K, perf=perf, counters=counters) == []


def test_cross_check_reports_disagreements():
    perf = [
        {"total_accepted_draft_tokens": 9, "total_draft_tokens": 16},
        {"total_accepted_draft_tokens": 3, "total_draft_tokens": 8},
    ]
    counters = {
        "num_accepted_tokens": 10,
        "num_requests_with_draft_tokens": 6,
        "num_draft_tokens": 24,
    }
    notes = cross_check(_accounts(), max_draft_len=K, perf=perf, counters=counters)
    assert any("request_perf_metrics report 12 accepted" in n for n in notes)
    assert any("24 drafted tokens" in n for n in notes)
    assert any("6 request-steps" in n for n in notes)


def test_cross_check_allows_one_token_per_eos_request_and_flags_coalescing():
    eos = StreamAccount([2], 0, 0, 1, 2, 4, finish_reason="stop")
    perf = [{"total_accepted_draft_tokens": 3, "total_draft_tokens": 4}]
    assert cross_check([eos], max_draft_len=K, perf=perf) == []
    coalesced = account_stream([1, 9], max_draft_len=K)
    [note] = cross_check([coalesced], max_draft_len=K)
    assert "held more than one verify step" in note


def test_to_trace_keeps_censoring():
    trace = account_stream([1, 5, 2], max_draft_len=K, finish_reason="stop").to_trace(
        prompt_index=3
    )
    assert (trace.accepted, trace.censored_steps, trace.prompt_index) == ([4], 1, 3)


@pytest.mark.parametrize("reason", ["timeout", "cancelled"])
def test_other_stops_also_censor_a_short_final_step(reason):
    assert account_stream([1, 5, 3], max_draft_len=K, finish_reason=reason).accepted == [4]
