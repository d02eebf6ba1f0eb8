"""The draft loop's transitions and the named ways callers differ (``LoopOptions``)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from regress.dsa.batch import Batch, prepare_batch  # noqa: E402
from regress.dsa.lifecycle import iter_draft_loop  # noqa: E402
from regress.dsa.transitions import UPSTREAM_WORKER, LoopOptions  # noqa: E402
from regress.reference.scenarios import make_dsa_metadata  # noqa: E402

K = 3
LENS, CACHED, ACCEPTED = [5, 1 + K, 1 + K, 1 + K], [0, 9, 12, 20], [1, 1, 3, 4]


def _prepared():
    md = make_dsa_metadata(max_num_requests=4, max_num_tokens=32, max_draft_tokens=K, defects=())
    prepare_batch(md, Batch(tuple(LENS), 1, cached=tuple(CACHED)))
    return md


def _state(md) -> tuple:
    n = md.num_seqs
    return (
        md.num_contexts,
        md.seq_lens.tolist(),
        md.seq_lens_cuda.tolist(),
        md.kv_lens_cuda[:n].tolist(),
        md.req_idx_per_token[: md.num_tokens].tolist(),
    )


def _run(options):
    md = _prepared()
    buffers = (md._seq_lens, md._seq_lens_cuda)
    seen, same_buffers = [], []
    for stage, _ in iter_draft_loop(md, K, ACCEPTED, options=options):
        seen.append((stage, _state(md)))
        same_buffers.append(md._seq_lens is buffers[0] and md._seq_lens_cuda is buffers[1])
    return seen, same_buffers


def test_the_kv_lens_each_step_sees_are_upstreams():
    """After step 0: generations at cached + accepted (bonus counted) + 1, the context one past
    its prompt; one more per later step (upstream's ``kv[nc:bs] -= K - acc; kv[:nc] += 1``)."""
    seen, _ = _run(UPSTREAM_WORKER)
    steps = [state[3] for stage, state in seen if stage == "draft_step"]
    first = [5 + 1] + [c + a + 1 for c, a in zip(CACHED[1:], ACCEPTED[1:], strict=True)]
    assert steps == [[kv + i for kv in first] for i in range(K)]


def test_in_place_and_swap_differ_only_in_which_tensors_are_written():
    swapped, swap_buffers = _run(UPSTREAM_WORKER)
    in_place, in_place_buffers = _run(LoopOptions(save="in_place"))
    assert in_place == swapped
    assert all(in_place_buffers)  # what a partly captured loop needs: no new tensors
    assert not all(swap_buffers[:-1]) and swap_buffers[-1]  # clones in the loop, originals back


def test_restore_kv_lens_brings_back_the_target_forwards_kv_lens():
    target = [c + n for c, n in zip(CACHED, LENS, strict=True)]
    kept, _ = _run(UPSTREAM_WORKER)
    restored, _ = _run(LoopOptions(restore_kv_lens=True))
    assert restored[-1][1][3] == target
    assert kept[-1][1][3] == [kv + K - 1 for kv in kept[1][1][3]]  # left at the last advance
    assert restored[:-1] == kept[:-1]


def test_an_unknown_save_mode_says_what_to_use():
    with pytest.raises(ValueError, match="swap, in_place"):
        LoopOptions(save="copy")
