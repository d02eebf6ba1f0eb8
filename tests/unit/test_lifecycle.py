"""The upstream lifecycle model: its order, its states, and what it shows about the mirrors."""

from __future__ import annotations

import pytest

from regress.dsa.batch import Batch
from regress.dsa.invariants import check_req_idx_map
from regress.dsa.lifecycle import GUARANTEED_STAGES, STAGES, run_forwards, serving_forwards
from regress.reference.scenarios import make_dsa_metadata


def _md(defects=(), b=8, k=4):
    return make_dsa_metadata(
        max_num_requests=b, max_num_tokens=b * max(k + 1, 8), max_draft_tokens=0, defects=defects
    )


def test_order_per_forward():
    md = _md(k=3)
    events = run_forwards(
        md, serving_forwards(batch_size=2, max_draft_len=3, generations=1), max_draft_len=3
    )
    one = [(e.stage, e.step) for e in events if e.forward == 0]
    assert one == [
        ("announce", None),
        ("prepare", None),
        ("draft_begin", None),
        ("draft_step", 0),
        ("draft_step", 1),
        ("draft_step", 2),
        ("restore", None),
    ]
    assert [(e.stage, e.step) for e in events if e.forward == 1] == one
    assert {e.stage for e in events} == set(STAGES)
    assert {e.stage for e in events if e.guaranteed} == GUARANTEED_STAGES


def test_no_draft_loop_without_speculation():
    events = run_forwards(
        _md(), serving_forwards(batch_size=2, max_draft_len=0, generations=1), max_draft_len=0
    )
    assert [e.stage for e in events] == ["announce", "prepare"] * 2


def test_first_announcement_sees_no_layout_later_ones_see_the_restored_one():
    seen = []

    def observer(event, md):
        if event.stage == "announce":
            lens = md.seq_lens
            seen.append(None if lens is None else lens.tolist())

    run_forwards(
        _md(),
        serving_forwards(batch_size=3, max_draft_len=2, generations=2, prompt_len=5),
        max_draft_len=2,
        observer=observer,
    )
    assert seen == [None, [5, 5, 5], [3, 3, 3]]


def test_restore_brings_back_the_target_layout_and_its_counts():
    states = {}

    def observer(event, md):
        if event.forward == 1 and event.stage in ("draft_step", "restore"):
            states[(event.stage, event.step)] = (md.seq_lens.tolist(), md.num_tokens)

    run_forwards(
        _md(),
        serving_forwards(batch_size=4, max_draft_len=3, generations=1),
        max_draft_len=3,
        observer=observer,
    )
    assert states[("draft_step", 2)] == ([1] * 4, 4)
    assert states[("restore", None)] == ([4] * 4, 16)


def test_kv_lens_rewound_by_rejected_drafts_and_stepped():
    """eagle3.py: generations rewound by rejected drafts (bonus counted), contexts +1; +1 a step."""
    kv = {}

    def observer(event, md):
        if event.stage == "draft_step":
            kv[(event.forward, event.step)] = md.kv_lens_cuda[: md.num_seqs].tolist()

    forwards = [
        Batch(seq_lens=(6, 6), num_contexts=2, cached=(0, 0)),
        Batch(seq_lens=(5, 5), cached=(6, 6), num_accepted=(1, 5)),
    ]
    run_forwards(_md(b=2), forwards, max_draft_len=4, observer=observer)
    assert kv[(0, 0)] == [7, 7]  # contexts: prompt + 1
    assert kv[(1, 0)] == [6 + 5 - (4 - 1), 6 + 5 - (4 - 5)]
    assert kv[(1, 3)] == [v + 3 for v in kv[(1, 0)]]


def _stale_points(defects, **kw):
    found = []

    def observer(event, md):
        if event.guaranteed and check_req_idx_map(md):
            found.append((event.forward, event.stage, event.step))

    run_forwards(
        _md(defects), serving_forwards(**kw), max_draft_len=kw["max_draft_len"], observer=observer
    )
    return found


@pytest.mark.parametrize("k", [3, 4])
def test_post_fix_mirror_holds_the_contract_wherever_upstream_guarantees_it(k):
    assert _stale_points((), batch_size=8, max_draft_len=k, generations=3) == []


def test_pre_fix_mirror_is_stale_from_draft_step_0():
    found = _stale_points({"stale_req_idx"}, batch_size=8, max_draft_len=4, generations=2)
    assert (1, "draft_step", 0) in found
    assert all(stage == "draft_step" for _f, stage, _s in found)


def test_partial_fix_is_caught_only_by_a_non_unit_draft_layout():
    kw = {"batch_size": 8, "max_draft_len": 4, "generations": 2}
    assert _stale_points({"arange_only_refresh"}, **kw) == []
    found = _stale_points({"arange_only_refresh"}, **kw, draft_seq_lens=[4] * 8)
    assert (1, "draft_step", 0) in found
    assert _stale_points((), **kw, draft_seq_lens=[4] * 8) == []


def test_map_is_stale_after_restore_on_correct_code():
    """Why no check may run at the restore (or the next announcement): upstream leaves the map
    in the draft layout until the next prepare(), on a correct post-#16925 build."""
    stale = []

    def observer(event, md):
        if event.stage == "restore" and event.forward == 1:
            stale.extend(check_req_idx_map(md))

    run_forwards(
        _md(),
        serving_forwards(batch_size=8, max_draft_len=3, generations=1),
        max_draft_len=3,
        observer=observer,
    )
    assert stale and "stale" in stale[0].message
