"""The reference engine's CUDA-graph path, on a CPU: capture and replay emulated, the engine's own.

``DraftGraphs`` is only reachable on CUDA. Here torch's stream and graph calls are replaced so that
a capture runs its body once (as the warm-up does) and a replay runs the captured body again on
the graph's static inputs, which is what a replayed graph computes. That is enough to test what
the graph path does around the captured region on a machine without a GPU; the H200 run of
``tests/integration/test_reference_gpu.py`` checks the real thing.
"""

from __future__ import annotations

import contextlib

import pytest

torch = pytest.importorskip("torch")

from regress.reference import graphs as graphs_module  # noqa: E402
from regress.reference.engine import ReferenceEngine  # noqa: E402
from regress.reference.prompts import load_prompts  # noqa: E402


class _Stream:
    def wait_stream(self, other) -> None:
        pass


class _Graph:
    def replay(self) -> None:  # set per capture below, once the static buffers exist
        raise AssertionError("replayed before its capture finished")


@pytest.fixture
def emulated_graphs(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Stream", lambda device=None: _Stream())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: _Stream())
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "CUDAGraph", _Graph)
    monkeypatch.setattr(torch.cuda, "graph", lambda g, stream=None: contextlib.nullcontext())
    capture = graphs_module.DraftGraphs._capture

    def capture_then_replayable(self, b_pad):
        entry = capture(self, b_pad)

        def replay():
            new = self.owner.draft_steps(entry.tokens, entry.hidden)
            for out, fresh in zip(entry.outs, new, strict=True):
                out.copy_(fresh)

        entry.graph.replay = replay
        return entry

    monkeypatch.setattr(graphs_module.DraftGraphs, "_capture", capture_then_replayable)


def _accepted(graph: bool, defects: set[str]) -> tuple[list[list[int]], int]:
    engine = ReferenceEngine(device="cpu", defects=defects)
    engine.cuda_graph = graph  # refused on a CPU by the constructor; the emulation stands in
    result = engine.generate(load_prompts(8), batch_size=8, max_draft_len=7, max_new_tokens=32)
    return [r.accepted for r in result.requests], result.counters.get("graph_replays", 0)


def test_a_capture_leaves_the_live_draft_cache_as_it_found_it(emulated_graphs):
    """The capture's warm-up wrote K/V into slots the live requests' rejected-branch stash reads
    before the replay rewrites them; graph runs then drifted from eager at each capture (H200:
    request 0 accepted [.., 3, 5, 5] under graphs, [.., 3, 7] eager). Fails without the restore
    in ``DraftGraphs._capture``."""
    eager, _ = _accepted(False, {"index_share_rejected_branch"})
    graphed, replays = _accepted(True, {"index_share_rejected_branch"})
    assert replays > 0
    assert graphed == eager
