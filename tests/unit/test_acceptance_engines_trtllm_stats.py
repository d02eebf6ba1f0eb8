"""Iteration stats are drained during a TensorRT-LLM run, not once at the end (issue 11).

TensorRT-LLM keeps only the newest ``max_stats_len`` iteration stats (default 1000); a run read
once at the end loses the rest. The fake executor below keeps 3.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from types import SimpleNamespace

from regress.trtllm.engine import _drain_stats, _stream_all, iteration_counters

STEPS = 20
MAX_STATS_LEN = 3


class _BoundedStatsLLM:
    """Streams one token per step and logs one iteration stat per step into a bounded queue."""

    def __init__(self, *, wait_for_poll: bool) -> None:
        self.queue: collections.deque = collections.deque(maxlen=MAX_STATS_LEN)
        self.lock = threading.Lock()
        self.wait_for_poll = wait_for_poll

    def get_stats(self, timeout):
        with self.lock:
            out = list(self.queue)
            self.queue.clear()
        return out

    async def _until_not_full(self) -> None:
        """Let the poller drain before the queue overflows (a generous bound, never hit)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while loop.time() < deadline:
            with self.lock:
                if len(self.queue) < MAX_STATS_LEN:
                    return
            await asyncio.sleep(0.001)

    async def _stream(self):
        tokens = []
        for step in range(STEPS):
            if self.wait_for_poll:
                await self._until_not_full()
            tokens.append(step)
            with self.lock:
                self.queue.append(
                    {
                        "specDecodingStats": {
                            "numDraftTokens": 3,
                            "numAcceptedTokens": 2,
                            "numRequestsWithDraftTokens": 1,
                        }
                    }
                )
            out = SimpleNamespace(token_ids=list(tokens), finish_reason=None)
            yield SimpleNamespace(outputs=[out])

    def generate_async(self, request, sampling_params=None, streaming=False):
        return self._stream()


def test_stats_are_drained_during_the_run():
    llm = _BoundedStatsLLM(wait_for_poll=True)
    stats: list = []
    asyncio.run(_stream_all(llm, [[1, 2]], None, 1, None, stats=stats, poll_seconds=0.001))
    counters, _ = iteration_counters(stats)
    assert counters["num_requests_with_draft_tokens"] == STEPS


def test_reading_once_at_the_end_loses_all_but_max_stats_len():
    """The old way: what regress did before issue 11, shown to lose iterations."""
    llm = _BoundedStatsLLM(wait_for_poll=False)
    asyncio.run(_stream_all(llm, [[1, 2]], None, 1, None))
    counters, _ = iteration_counters(_drain_stats(llm, 2))
    assert counters["num_requests_with_draft_tokens"] == MAX_STATS_LEN < STEPS
