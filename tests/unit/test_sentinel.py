"""The runtime DSA sentinel: eager checks, deferred (graph-capture) checks, attach/detach."""

from __future__ import annotations

import pytest

from regress.dsa import sentinel as sentinel_module
from regress.dsa.batch import Batch, prepare_batch
from regress.dsa.lifecycle import draft_checkpoints, run_forwards, serving_forwards
from regress.dsa.sentinel import Sentinel
from regress.reference.layerwise import create_run_pack
from regress.reference.scenarios import make_dsa_metadata


def _loop(defects, sentinel=None, k=4, b=8):
    md = make_dsa_metadata(
        max_num_requests=b, max_num_tokens=b * (k + 1), max_draft_tokens=k, defects=defects
    )
    s = (sentinel or Sentinel()).attach(md)
    prepare_batch(md, Batch((k + 1,) * b))
    for _ in draft_checkpoints(md, k, [k + 1] * b):
        pass
    return s, md


def test_silent_on_correct_code():
    s, _ = _loop(())
    assert s.violations == [] and s.num_violations == 0
    assert s.checks_run > 0
    assert s.calls["update_for_spec_dec"] == 4  # collapse + 3 steps, outermost calls only counted


def test_stale_map_reported_with_site_and_layout():
    s, _ = _loop({"stale_req_idx"})
    assert s.num_violations >= 1
    v = s.violations[0]
    assert v.check == "req_idx_map" and v.site == "update_for_spec_dec" and v.phase == "eager"
    assert v.seq_lens == [1] * 8
    assert v.backend == "DSAtrtllmAttentionMetadata"
    assert v.to_dict()["details"]["first_mismatch"] == 1


def test_on_update_alone_is_not_a_violation():
    md = make_dsa_metadata(max_num_requests=4, max_num_tokens=32, max_draft_tokens=3, defects=())
    s = Sentinel().attach(md)
    prepare_batch(md, Batch((4, 4, 4, 4)))
    md._seq_lens[:4].fill_(1)
    md._seq_lens_cuda[:4].fill_(1)
    md.on_update()  # upstream refreshes in on_update_kv_lens, which has not run yet
    assert s.violations == []


def test_nested_hooks_check_once():
    md = make_dsa_metadata(max_num_requests=2, max_num_tokens=8, defects=())
    s = Sentinel().attach(md)
    prepare_batch(md, Batch((2, 2)))
    before = s.checks_run
    md.update_for_spec_dec()  # calls on_update_kv_lens inside: one check, not two
    assert s.checks_run == before + 1


def test_unannounced_width_reported():
    md = create_run_pack(
        "GEN", batch_size=4, seq_len_q=4, seq_len_kv_cache=16, defects={"unannounced_mtp_shapes"}
    )
    s = Sentinel().attach(md)
    md.on_update_kv_lens()
    assert [v.check for v in s.violations] == ["kv_lens_2d_width"]


def test_detach_restores_methods():
    md = make_dsa_metadata(max_num_requests=2, max_num_tokens=8, defects=())
    s = Sentinel().attach(md)
    assert "prepare" in md.__dict__
    s.detach()
    assert "prepare" not in md.__dict__
    prepare_batch(md, Batch((1, 1)))
    assert s.checks_run == 0


def test_records_are_capped_but_counted():
    s = Sentinel(max_records=1)
    for b in (4, 6, 8):
        _loop({"stale_req_idx"}, sentinel=s, b=b)
    assert len(s.violations) == 1
    assert s.num_violations > 1


def test_capture_defers_checks_to_the_replay_boundary(monkeypatch):
    """Under capture nothing is read back; the snapshot is checked by after_replay()."""
    md = make_dsa_metadata(
        max_num_requests=8, max_num_tokens=40, max_draft_tokens=4, defects={"stale_req_idx"}
    )
    s = Sentinel().attach(md)
    prepare_batch(md, Batch((5,) * 8))
    loop = draft_checkpoints(md, 4, [5] * 8)
    next(loop)  # draft_begin
    monkeypatch.setattr(sentinel_module, "_capturing", lambda: True)
    next(loop)  # the collapse while "capturing": snapshots only
    assert s.violations == [] and len(s._snapshots) >= 1
    monkeypatch.setattr(sentinel_module, "_capturing", lambda: False)
    s.after_replay()
    assert s.violations and {v.phase for v in s.violations} == {"replay"}


def test_snapshot_of_correct_code_passes(monkeypatch):
    md = make_dsa_metadata(max_num_requests=8, max_num_tokens=40, max_draft_tokens=4, defects=())
    s = Sentinel().attach(md)
    prepare_batch(md, Batch((5,) * 8))
    monkeypatch.setattr(sentinel_module, "_capturing", lambda: True)
    for _ in draft_checkpoints(md, 4, [3] * 8):
        pass
    monkeypatch.setattr(sentinel_module, "_capturing", lambda: False)
    s.flush()
    assert s.violations == [] and s.checks_run >= 4


@pytest.mark.parametrize("name", ["prepare", "on_update_kv_lens"])
def test_wrapped_methods_keep_their_names(name):
    md = make_dsa_metadata(max_num_requests=2, max_num_tokens=8, defects=())
    Sentinel().attach(md)
    assert getattr(md, name).__name__ == name


# -- the sentinel under upstream's lifecycle (regress.dsa.lifecycle) ---------------------------


def _serve(defects=(), *, b=8, k=4, generations=3, sentinel=None, observer=None, **kw):
    md = make_dsa_metadata(
        max_num_requests=b, max_num_tokens=b * max(k + 1, 8), max_draft_tokens=0, defects=defects
    )
    s = (sentinel or Sentinel()).attach(md)
    run_forwards(
        md,
        serving_forwards(batch_size=b, max_draft_len=k, generations=generations, **kw),
        max_draft_len=k,
        observer=observer,
    )
    return s


def test_fresh_metadata_with_no_layout_does_not_crash_the_run():
    """Item 1 of issue 11: upstream announces before the first layout exists (seq_lens None)."""
    s = _serve()
    assert s.calls["update_spec_dec_param"] == 4
    assert s.violations == []


@pytest.mark.parametrize("k", [3, 4])
def test_post_fix_build_passes_the_full_lifecycle_at_batch_8(k):
    """Item 2 of issue 11: no false stale flag from the map left in draft layout by the restore."""
    s = _serve(k=k)
    assert s.violations == [] and s.num_violations == 0
    assert s.checks_run >= 4 * (1 + k)


@pytest.mark.parametrize(
    ("defects", "kw"),
    [({"stale_req_idx"}, {}), ({"arange_only_refresh"}, {"draft_seq_lens": [4] * 8})],
)
def test_pre_fix_and_partial_fix_layouts_are_flagged(defects, kw):
    s = _serve(defects, **kw)
    assert s.violations
    assert {v.site for v in s.violations} <= {"update_for_spec_dec", "on_update_kv_lens"}
    assert {v.check for v in s.violations} == {"req_idx_map"}


def _capture_draft_loops(monkeypatch, sentinel_box):
    """Observer that runs every draft loop "under capture" and replays at the restore, as the
    CUDA-graph path does (the graph holds the draft loop; checks are owed to the replay)."""

    def observer(event, md):
        if event.stage == "draft_begin":
            monkeypatch.setattr(sentinel_module, "_capturing", lambda: True)
        elif event.stage == "restore":
            monkeypatch.setattr(sentinel_module, "_capturing", lambda: False)
            sentinel_box[0].after_replay()

    return observer


@pytest.mark.parametrize("k", [3, 4])
def test_post_fix_build_passes_the_lifecycle_with_cuda_graphs(monkeypatch, k):
    box = [Sentinel()]
    s = _serve(k=k, sentinel=box[0], observer=_capture_draft_loops(monkeypatch, box))
    s.flush()
    assert s.violations == [] and s.checks_run >= 4 * (1 + k)


@pytest.mark.parametrize(
    ("defects", "kw"),
    [({"stale_req_idx"}, {}), ({"arange_only_refresh"}, {"draft_seq_lens": [4] * 8})],
)
def test_pre_fix_and_partial_fix_flagged_with_cuda_graphs(monkeypatch, defects, kw):
    box = [Sentinel()]
    s = _serve(defects, sentinel=box[0], observer=_capture_draft_loops(monkeypatch, box), **kw)
    assert s.violations and {v.phase for v in s.violations} == {"replay"}


def test_checking_at_the_announcement_is_what_crashed_and_misflagged(monkeypatch):
    """The old rule (check after update_spec_dec_param too), put back: it reads the layout the
    restore left behind and flags a correct build; so the rule, not luck, keeps the run clean."""
    monkeypatch.setattr(
        sentinel_module, "CHECKED_AFTER", sentinel_module.CHECKED_AFTER | {"update_spec_dec_param"}
    )
    s = _serve()
    assert s.violations
    assert {v.site for v in s.violations} == {"update_spec_dec_param"}


def test_an_internal_error_in_a_check_is_reported_not_raised(monkeypatch):
    def broken(md):
        raise RuntimeError("check blew up")

    monkeypatch.setattr(sentinel_module, "check_req_idx_map", broken)
    s = _serve(generations=1)
    assert s.violations
    assert {v.check for v in s.violations} == {"sentinel_error"}
    assert "check blew up" in s.violations[0].message
    assert s.summary()["errors"] >= 1
